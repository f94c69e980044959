"""Task heads on `XsynBertModel`, the same for every syntax variant.

| class                               | head          | reads                 | labels (-100 = ignore)          |
|-------------------------------------|---------------|-----------------------|---------------------------------|
| `XsynBertForSequenceClassification` | `sequence`    | pooled `[CLS]`        | `labels` (B,)                   |
| `XsynBertForTokenClassification`    | `token`       | every piece           | `labels` (B, T) on first pieces |
| `XsynBertForQuestionAnswering`      | `qa`          | every piece           | `start_positions`,              |
|                                     |               |                       | `end_positions` (B,)            |
| `XsynBertForIntentSlot`             | `intent_slot` | pooled `[CLS]`, and   | `intent_labels` (B,),           |
|                                     |               | every piece for slots | `slot_labels` (B, T)            |

`forward(**batch, <labels>)` takes a collated batch (`xsyn.trees.batch.collate_trees`) plus the head's
labels. With labels it returns `loss = task_loss + structural_loss_weight * (distance_loss +
depth_loss)` for `gat`, `task_loss + sep_distance_loss_weight * seprem_loss` for `sep` in training
(where that weight is > 0), just `task_loss` otherwise, and every term separately for logging.
The sequence and intent heads use BERT's pretrained pooler (dense + tanh on `[CLS]`).

The per-piece losses (token labels, slots) average over the batch's labelled pieces, or, given
`labelled_tokens`, sum over them divided by it: training passes the optimiser step's count of
labelled tokens in this batch's share of rows, so every split of a step averages over the same tokens
(`xsyn.training.loop`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers.utils import ModelOutput

from xsyn.models.configuration import XsynBertConfig
from xsyn.models.defaults import IGNORE_INDEX
from xsyn.models.modeling import XsynBertModel, XsynBertPreTrainedModel, XsynModelOutput


@dataclass
class XsynHeadOutput(ModelOutput):
    loss: torch.FloatTensor | None = None
    task_loss: torch.FloatTensor | None = None
    distance_loss: torch.FloatTensor | None = None
    depth_loss: torch.FloatTensor | None = None
    seprem_loss: torch.FloatTensor | None = None
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

    def __init__(self, config: XsynBertConfig):
        super().__init__(config)
        self.bert = XsynBertModel(config, add_pooling_layer=self.uses_pooler)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)

    def _losses(self, task_loss: torch.Tensor | None, encoded: XsynModelOutput) -> dict:
        """`loss`, `task_loss`, the probe terms, and the encoder's optional outputs for the head's output."""
        out = {"task_loss": task_loss, "distance_loss": encoded.distance_loss, "depth_loss": encoded.depth_loss,
               "seprem_loss": encoded.seprem_loss, "hidden_states": encoded.hidden_states,
               "attentions": encoded.attentions, "loss": task_loss}
        if task_loss is not None and encoded.distance_loss is not None:
            out["loss"] = task_loss + self.config.structural_loss_weight * (
                encoded.distance_loss + encoded.depth_loss)
        if task_loss is not None and encoded.seprem_loss is not None:
            out["loss"] = task_loss + self.config.sep_distance_loss_weight * encoded.seprem_loss
        return out


def _all_or_none(**labels: torch.Tensor | None) -> bool:
    """Whether a head's labels are given: all of them (True) or none (False); half is an error."""
    given = [value is not None for value in labels.values()]
    if any(given) and not all(given):
        raise ValueError(f"give {' and '.join(labels)} together, or none of them")
    return all(given)


def _require(config: XsynBertConfig, name: str) -> int:
    value = getattr(config, name)
    if value is None or value < 1:
        raise ValueError(f"{name}={value!r}: this head needs it set to the number of classes (>= 1)")
    return value


class _LabelClassifier(XsynHeadModel):
    """One linear layer over the encoder output named by `features`; cross-entropy against `labels`."""

    features = "last_hidden_state"

    def __init__(self, config: XsynBertConfig):
        super().__init__(config)
        self.classifier = nn.Linear(config.hidden_size, _require(config, "num_labels"))
        self.post_init()

    def forward(self, labels: torch.Tensor | None = None, labelled_tokens: float | None = None,
                **batch) -> XsynClassifierOutput:
        encoded = self.bert(**batch, compute_structural_loss=labels is not None)
        logits = self.classifier(self.dropout(getattr(encoded, self.features)))
        task_loss = cross_entropy(logits, labels, labelled_tokens) if labels is not None else None
        return XsynClassifierOutput(logits=logits, **self._losses(task_loss, encoded))


class XsynBertForSequenceClassification(_LabelClassifier):
    """A label per input, from the pooled `[CLS]`."""

    uses_pooler = True
    features = "pooler_output"


class XsynBertForTokenClassification(_LabelClassifier):
    """A label per piece; the data puts a word's label on its first piece and -100 elsewhere."""


class XsynBertForQuestionAnswering(XsynHeadModel):
    """Start/end logits over pieces. A window without the answer should point both at `[CLS]` (0)."""

    def __init__(self, config: XsynBertConfig):
        super().__init__(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    def forward(self, start_positions: torch.Tensor | None = None, end_positions: torch.Tensor | None = None,
                **batch) -> XsynQuestionAnsweringOutput:
        labelled = _all_or_none(start_positions=start_positions, end_positions=end_positions)
        encoded = self.bert(**batch, compute_structural_loss=labelled)
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

    def __init__(self, config: XsynBertConfig):
        super().__init__(config)
        self.intent_classifier = nn.Linear(config.hidden_size, _require(config, "num_intents"))
        self.slot_classifier = nn.Linear(config.hidden_size, _require(config, "num_slot_labels"))
        self.post_init()

    def forward(self, intent_labels: torch.Tensor | None = None, slot_labels: torch.Tensor | None = None,
                labelled_tokens: float | None = None, **batch) -> XsynIntentSlotOutput:
        labelled = _all_or_none(intent_labels=intent_labels, slot_labels=slot_labels)
        encoded = self.bert(**batch, compute_structural_loss=labelled)
        intent_logits = self.intent_classifier(self.dropout(encoded.pooler_output))
        slot_logits = self.slot_classifier(self.dropout(encoded.last_hidden_state))
        intent_loss = slot_loss = task_loss = None
        if labelled:
            intent_loss = cross_entropy(intent_logits, intent_labels)
            slot_loss = cross_entropy(slot_logits, slot_labels, labelled_tokens)
            task_loss = intent_loss + slot_loss
        return XsynIntentSlotOutput(intent_logits=intent_logits, slot_logits=slot_logits, intent_loss=intent_loss,
                                    slot_loss=slot_loss, **self._losses(task_loss, encoded))


HEAD_CLASSES: dict[str, type[XsynHeadModel]] = {
    "sequence": XsynBertForSequenceClassification,
    "token": XsynBertForTokenClassification,
    "qa": XsynBertForQuestionAnswering,
    "intent_slot": XsynBertForIntentSlot,
}
