"""Task heads on `XsynBertModel`, the same for every syntax variant.

| class                               | head          | reads                 | labels (-100 = ignore)          |
|-------------------------------------|---------------|-----------------------|---------------------------------|
| `XsynBertForSequenceClassification` | `sequence`    | pooled `[CLS]`        | `labels` (B,)                   |
| `XsynBertForTokenClassification`    | `token`       | every piece           | `labels` (B, T) on first pieces |
| `XsynBertForMultipleChoice`         | `multiple_`   | pooled `[CLS]` of     | `labels` (B,): the answer's     |
|                                     | `choice`      | each option's input   | option (B x options inputs)     |
| `XsynBertForQuestionAnswering`      | `qa`          | every piece           | `start_positions`,              |
|                                     |               |                       | `end_positions` (B,)            |
| `XsynBertForIntentSlot`             | `intent_slot` | pooled `[CLS]`, and   | `intent_labels` (B,),           |
|                                     |               | every piece for slots | `slot_labels` (B, T)            |

`forward(input_ids, ..., tree_segment, <labels>)` takes the fields of a collated batch
(`xsyn.trees.batch.collate_trees`) plus the head's labels. With labels it returns
`loss = task_loss + weight * (its parts)` for each auxiliary loss of the variant (`SyntaxVariant.losses`;
gat: `structural_loss_weight * (distance_loss + depth_loss)`), just `task_loss` when there are none,
and every term separately for logging (`out.distance_loss`).
The sequence and intent heads use BERT's pretrained pooler (dense + tanh on `[CLS]`).

The per-piece losses (token labels, slots) average over the batch's labelled pieces, or, given
`labelled_tokens`, sum over them divided by it: training passes the optimiser step's count of
labelled tokens in this batch's share of rows, so every split of a step averages over the same tokens
(`xsyn.training.loop`).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from transformers.utils import ModelOutput

from xsyn.models.configuration import XsynBertConfig
from xsyn.models.families import resolve
from xsyn.models.modeling import SyntaxLosses, XsynBertModel, XsynBertPreTrainedModel, XsynModelOutput
from xsyn.models.names import IGNORE_INDEX
from xsyn.utils.registry import Registry


@dataclass
class XsynHeadOutput(SyntaxLosses, ModelOutput):
    loss: torch.FloatTensor | None = None
    task_loss: torch.FloatTensor | None = None
    syntax_losses: dict[str, torch.FloatTensor] | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class XsynClassifierOutput(XsynHeadOutput):
    logits: torch.FloatTensor | None = None


@dataclass
class XsynQuestionAnsweringOutput(XsynHeadOutput):
    start_logits: torch.FloatTensor | None = None
    end_logits: torch.FloatTensor | None = None


@dataclass
class XsynIntentSlotOutput(XsynHeadOutput):
    intent_logits: torch.FloatTensor | None = None
    slot_logits: torch.FloatTensor | None = None
    intent_loss: torch.FloatTensor | None = None
    slot_loss: torch.FloatTensor | None = None


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor, labelled: float | None = None) -> torch.Tensor:
    """Cross-entropy summed over the labels that are not -100 and divided by `labelled`, by default
    their number (the mean; 0, not NaN, when there are none)."""
    flat = labels.reshape(-1)
    total = F.cross_entropy(logits.reshape(flat.numel(), -1), flat, ignore_index=IGNORE_INDEX, reduction="sum")
    return total / (labelled if labelled is not None else (flat != IGNORE_INDEX).sum().clamp(min=1))


class XsynHeadModel(XsynBertPreTrainedModel):
    """The encoder plus the bookkeeping every head shares: dropout and the loss terms."""

    uses_pooler = False
    encoder_class = XsynBertModel  # its family's (`xsyn.models.encoders`), kept under `base_model_prefix`

    def __init__(self, config: XsynBertConfig):
        super().__init__(config)
        setattr(self, self.base_model_prefix, self.encoder_class(config, add_pooling_layer=self.uses_pooler))
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)

    @classmethod
    def label_settings(cls, labels: Sequence[str], tags: Sequence[str]) -> dict[str, Any]:
        """Config fields that size this head and name its outputs, from a task's labels and tags."""
        return {}

    def _encode(self, input_ids: torch.Tensor | None, attention_mask: torch.Tensor | None,
                token_type_ids: torch.Tensor | None, tree_parent: torch.Tensor | None, tree_upos: torch.Tensor | None,
                tree_deprel: torch.Tensor | None, tree_word: torch.Tensor | None, tree_segment: torch.Tensor | None,
                labelled: bool, **kwargs) -> XsynModelOutput:
        """The encoder's output; with the variant's auxiliary losses when the head has labels."""
        return self.base_model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                               tree_parent=tree_parent, tree_upos=tree_upos, tree_deprel=tree_deprel,
                               tree_word=tree_word, tree_segment=tree_segment, with_auxiliary_losses=labelled,
                               **kwargs)

    def _losses(self, task_loss: torch.Tensor | None, encoded: XsynModelOutput) -> dict:
        """`loss`, `task_loss`, the variant's loss parts, and the encoder's optional outputs for the head's
        output."""
        parts = encoded.syntax_losses or {}
        loss = task_loss
        for term in self.syntax_variant.losses:
            if task_loss is not None and all(part in parts for part in term.parts):
                loss = loss + getattr(self.config, term.weight) * functools.reduce(
                    operator.add, (parts[part] for part in term.parts))
        return {"loss": loss, "task_loss": task_loss, "syntax_losses": encoded.syntax_losses,
                "hidden_states": encoded.hidden_states, "attentions": encoded.attentions}


def _all_or_none(**labels: torch.Tensor | None) -> bool:
    """Whether a head's labels are given: all of them (True) or none (False); half is an error."""
    given = [value is not None for value in labels.values()]
    if any(given) and not all(given):
        raise ValueError(f"give {' and '.join(labels)} together, or none of them")
    return all(given)


def _id2label(names: Sequence[str]) -> dict[str, Any]:
    """BERT's own label-name fields, for a head with one classifier."""
    return {"id2label": dict(enumerate(names)), "label2id": {name: i for i, name in enumerate(names)}}


def _require(config: XsynBertConfig, name: str) -> int:
    value = getattr(config, name)
    if value is None or value < 1:
        raise ValueError(f"{name}={value!r}: this head needs it set to the number of classes (>= 1)")
    return value


class _LabelClassifier(XsynHeadModel):
    """One linear layer over the encoder output named by `features` (or the family's `sentence_head`,
    which applies its own dropout: RoBERTa's classifier on `<s>`); cross-entropy against `labels`."""

    features = "last_hidden_state"
    sentence_head: str | None = None  # "module:class" of a classifier taking the whole sequence

    def __init__(self, config: XsynBertConfig):
        super().__init__(config)
        num_labels = _require(config, "num_labels")
        self.classifier = (resolve(self.sentence_head)(config) if self.sentence_head is not None
                           else nn.Linear(config.hidden_size, num_labels))
        self.post_init()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, tree_parent: torch.Tensor | None = None,
                tree_upos: torch.Tensor | None = None, tree_deprel: torch.Tensor | None = None,
                tree_word: torch.Tensor | None = None, tree_segment: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, labelled_tokens: float | None = None,
                **kwargs) -> XsynClassifierOutput:
        encoded = self._encode(input_ids, attention_mask, token_type_ids, tree_parent, tree_upos, tree_deprel,
                               tree_word, tree_segment, labels is not None, **kwargs)
        features = getattr(encoded, self.features)
        logits = self.classifier(features if self.sentence_head is not None else self.dropout(features))
        task_loss = None
        if labels is not None and self.config.problem_type == "regression":  # one output: MSE, as transformers
            task_loss = F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype))
        elif labels is not None:
            task_loss = cross_entropy(logits, labels, labelled_tokens)
        return XsynClassifierOutput(logits=logits, **self._losses(task_loss, encoded))


class XsynBertForSequenceClassification(_LabelClassifier):
    """A label per input, from the pooled `[CLS]`; with `problem_type="regression"` (one label) a score
    per input, trained with mean squared error (STS-B), as transformers' sequence classifiers do."""

    uses_pooler = True
    features = "pooler_output"

    @classmethod
    def label_settings(cls, labels: Sequence[str], tags: Sequence[str]) -> dict[str, Any]:
        return _id2label(labels)


class XsynBertForTokenClassification(_LabelClassifier):
    """A label per piece; the data puts a word's label on its first piece and -100 elsewhere."""

    @classmethod
    def label_settings(cls, labels: Sequence[str], tags: Sequence[str]) -> dict[str, Any]:
        return _id2label(tags)


class XsynBertForMultipleChoice(XsynHeadModel):
    """A score per option from its own sequence's pooled `[CLS]`; cross-entropy of the softmax over an
    example's options against the answer's index. The batch holds each option as an input of its own,
    an example's `num_choices` options consecutive (`xsyn.data.features.collate_features`)."""

    uses_pooler = True

    def __init__(self, config: XsynBertConfig):
        super().__init__(config)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(self, num_choices: torch.Tensor, labels: torch.Tensor | None = None, **batch) -> XsynClassifierOutput:
        if num_choices.numel() and bool((num_choices != num_choices[0]).any()):
            raise ValueError(f"every example of a batch needs the same number of options, got {num_choices.tolist()}")
        encoded = self.base_model(**batch, with_auxiliary_losses=labels is not None)
        logits = self.classifier(self.dropout(encoded.pooler_output)).view(-1, int(num_choices[0]))
        task_loss = cross_entropy(logits, labels) if labels is not None else None
        return XsynClassifierOutput(logits=logits, **self._losses(task_loss, encoded))


class XsynBertForQuestionAnswering(XsynHeadModel):
    """Start/end logits over pieces. A window without the answer should point both at `[CLS]` (0)."""

    def __init__(self, config: XsynBertConfig):
        super().__init__(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, tree_parent: torch.Tensor | None = None,
                tree_upos: torch.Tensor | None = None, tree_deprel: torch.Tensor | None = None,
                tree_word: torch.Tensor | None = None, tree_segment: torch.Tensor | None = None,
                start_positions: torch.Tensor | None = None,
                end_positions: torch.Tensor | None = None, **kwargs) -> XsynQuestionAnsweringOutput:
        labelled = _all_or_none(start_positions=start_positions, end_positions=end_positions)
        encoded = self._encode(input_ids, attention_mask, token_type_ids, tree_parent, tree_upos, tree_deprel,
                               tree_word, tree_segment, labelled, **kwargs)
        start_logits, end_logits = self.qa_outputs(encoded.last_hidden_state).unbind(-1)
        task_loss = None
        if labelled:
            task_loss = (cross_entropy(start_logits, start_positions)
                         + cross_entropy(end_logits, end_positions)) / 2
        return XsynQuestionAnsweringOutput(start_logits=start_logits, end_logits=end_logits,
                                           **self._losses(task_loss, encoded))


class XsynBertForIntentSlot(XsynHeadModel):
    """Joint intent (pooled `[CLS]`) and slots (first pieces); loss = intent + slot."""

    uses_pooler = True

    @classmethod
    def label_settings(cls, labels: Sequence[str], tags: Sequence[str]) -> dict[str, Any]:
        return {"intent_labels": list(labels), "slot_labels": list(tags)}

    def __init__(self, config: XsynBertConfig):
        super().__init__(config)
        self.intent_classifier = nn.Linear(config.hidden_size, _require(config, "num_intents"))
        self.slot_classifier = nn.Linear(config.hidden_size, _require(config, "num_slot_labels"))
        self.post_init()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, tree_parent: torch.Tensor | None = None,
                tree_upos: torch.Tensor | None = None, tree_deprel: torch.Tensor | None = None,
                tree_word: torch.Tensor | None = None, tree_segment: torch.Tensor | None = None,
                intent_labels: torch.Tensor | None = None,
                slot_labels: torch.Tensor | None = None, labelled_tokens: float | None = None,
                **kwargs) -> XsynIntentSlotOutput:
        labelled = _all_or_none(intent_labels=intent_labels, slot_labels=slot_labels)
        encoded = self._encode(input_ids, attention_mask, token_type_ids, tree_parent, tree_upos, tree_deprel,
                               tree_word, tree_segment, labelled, **kwargs)
        intent_logits = self.intent_classifier(self.dropout(encoded.pooler_output))
        slot_logits = self.slot_classifier(self.dropout(encoded.last_hidden_state))
        intent_loss = slot_loss = task_loss = None
        if labelled:
            intent_loss = cross_entropy(intent_logits, intent_labels)
            slot_loss = cross_entropy(slot_logits, slot_labels, labelled_tokens)
            task_loss = intent_loss + slot_loss
        return XsynIntentSlotOutput(intent_logits=intent_logits, slot_logits=slot_logits, intent_loss=intent_loss,
                                    slot_loss=slot_loss, **self._losses(task_loss, encoded))


HEAD_CLASSES: Registry[type[XsynHeadModel]] = Registry("head", {
    "sequence": XsynBertForSequenceClassification,
    "token": XsynBertForTokenClassification,
    "qa": XsynBertForQuestionAnswering,
    "multiple_choice": XsynBertForMultipleChoice,
    "intent_slot": XsynBertForIntentSlot,
}, of=XsynHeadModel, classes=True)
