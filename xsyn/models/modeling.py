"""`XsynBertModel`: transformers' `BertModel` with one syntax variant attached.

The pretrained weights keep their names (`embeddings.*`, `encoder.layer.N.attention.self.query`,
...), so any BERT checkpoint loads bit-exact and only the syntax parameters are new. What a variant
adds and how it reads the batch's trees is the business of its `SyntaxVariant`
(`xsyn.models.variants`); the model only asks it: `install` its modules, the batch fields it needs,
its per-batch `context` (passed to its layers), a replaced `output`, its `auxiliary_losses`.

`forward` takes the batch of `xsyn.trees.batch.collate_trees` (`input_ids, attention_mask,
token_type_ids, tree_parent, tree_upos, tree_deprel, tree_word, tree_segment`). The n x n tree
tensors are derived inside, on the batch's device, once per batch (`xsyn.trees.tensors`); a
syntax variant given a batch without a field it needs raises an error naming that field.
Attention runs through torch's fused `scaled_dot_product_attention` (transformers' `sdpa`
implementation, the default); `eager` also works and returns attention probabilities.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutputWithPooling
from transformers.models.bert.modeling_bert import BertModel, BertPreTrainedModel

from xsyn.models.attention import attention_backends, padding_mask
from xsyn.models.configuration import XsynBertConfig
from xsyn.models.families import EncoderFamily, family_of, resolve
from xsyn.models.variants import get_variant, loss_names
from xsyn.models.variants.base import SyntaxBatch, SyntaxVariant
from xsyn.trees.tensors import TreeTensors


class SyntaxLosses:
    """Output access to the variants' auxiliary losses by name (`out.distance_loss`): the loss parts of
    every registered variant, None where this batch has none."""

    def __getattr__(self, name: str) -> Any:
        if name.endswith("_loss") and name in loss_names():
            return (self.__dict__.get("syntax_losses") or {}).get(name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")


@dataclass
class XsynModelOutput(SyntaxLosses, BaseModelOutputWithPooling):
    """BERT's output, plus what the variant computed from the trees (`syntax_context`: the GAT's G and its
    layers' biases, a local mask ...) and its auxiliary losses (when asked for)."""

    syntax_context: Any = None
    syntax_losses: dict[str, torch.FloatTensor] | None = None


class XsynBertPreTrainedModel(BertPreTrainedModel):
    """Shared by the encoder and the heads: the config class and the syntax modules' initialisation."""

    config_class = XsynBertConfig

    @property
    def family(self) -> EncoderFamily:
        """The encoder family (BERT, XLM-R, ...) whose embeddings, names and heads this model has."""
        return family_of(self.config.model_type)

    @property
    def syntax_variant(self) -> SyntaxVariant:
        return get_variant(self.config.variant)

    def batch_tree_fields(self) -> tuple[str, ...] | None:
        """The tree fields a batch for this model carries, collated and copied to the device (`collate_trees`):
        those its variant reads (None: all, for a variant that does not say which)."""
        return self.syntax_variant.collated_fields(self.config)

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)  # Linear, Embedding, LayerNorm as in BERT
        if isinstance(module, resolve(self.family.embeddings)):  # its buffers, as BERT's (and XLM-R's) own rule
            init.copy_(module.position_ids, torch.arange(module.position_ids.shape[-1]).expand((1, -1)))
            init.zeros_(module.token_type_ids)
        self.syntax_variant.init_weights(module, self.config)


class XsynBertModel(XsynBertPreTrainedModel, BertModel):
    def __init__(self, config: XsynBertConfig, add_pooling_layer: bool = True):
        config.check_syntax()
        super().__init__(config, add_pooling_layer=add_pooling_layer)
        embeddings = resolve(self.family.embeddings)
        if not isinstance(self.embeddings, embeddings):  # BERT's layers after the family's embeddings
            self.embeddings = embeddings(config)
        self.syntax_variant.install(self)
        self.post_init()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, tree_parent: torch.Tensor | None = None,
                tree_upos: torch.Tensor | None = None, tree_deprel: torch.Tensor | None = None,
                tree_word: torch.Tensor | None = None, tree_segment: torch.Tensor | None = None,
                with_auxiliary_losses: bool = False, **kwargs) -> XsynModelOutput:
        """Encode a batch. `with_auxiliary_losses` adds the variant's auxiliary losses (gat: the
        probes'; sep with `sep_distance_loss_weight` > 0, in training: distance prediction)."""
        variant = self.syntax_variant
        fields = {"input_ids": input_ids, "tree_parent": tree_parent, "tree_upos": tree_upos,
                  "tree_deprel": tree_deprel, "tree_word": tree_word, "tree_segment": tree_segment}
        self.check_batch_fields(fields)
        tree = (TreeTensors(tree_parent, tree_upos, tree_word, tree_segment, host_check=False)  # no wait in the step
                if self._needs_tree() else None)
        inputs = self._shared_word_embeddings(input_ids, kwargs) if variant.reads_word_embeddings else {}
        batch = SyntaxBatch(input_ids, attention_mask, tree_deprel, kwargs.get("position_ids"),
                            inputs.get("inputs_embeds"))
        with attention_backends((input_ids if input_ids is not None else kwargs["inputs_embeds"]).device):
            context = variant.context(self, tree, batch, with_auxiliary_losses)
            syntax = {} if context is None else {"xsyn_syntax": context}
            inputs = {"input_ids": input_ids, **kwargs, **inputs}
            out = super().forward(attention_mask=padding_mask(self, attention_mask), token_type_ids=token_type_ids,
                                  **inputs, **syntax)
            hidden, pooled = out.last_hidden_state, out.pooler_output
            replaced = variant.output(self, tree, hidden)
        if replaced is not None:
            hidden = replaced
            pooled = self.pooler(hidden) if self.pooler is not None else None  # pool the replaced output
        weighted = any(getattr(self.config, term.weight) > 0 for term in variant.losses)  # at weight 0: not computed
        losses = variant.auxiliary_losses(self, context, tree, batch, hidden, with_auxiliary_losses and weighted)
        return XsynModelOutput(last_hidden_state=hidden, pooler_output=pooled, hidden_states=out.hidden_states,
                               attentions=out.attentions, syntax_context=context, syntax_losses=losses or None)

    def _shared_word_embeddings(self, input_ids: torch.Tensor | None, kwargs: dict) -> dict[str, Any]:
        """The encoder's inputs with the word-piece lookup made once, for the variant and the encoder alike:
        `inputs_embeds`, and the positions the encoder would take from `input_ids` (XLM-R's skip padding)."""
        if input_ids is None or kwargs.get("inputs_embeds") is not None:
            return {}
        embeddings = self.embeddings
        positions = kwargs.get("position_ids")
        if positions is None and self.family.padded_positions:
            positions = embeddings.create_position_ids_from_input_ids(input_ids, embeddings.padding_idx)
        return {"input_ids": None, "inputs_embeds": embeddings.word_embeddings(input_ids), "position_ids": positions}

    def _needs_tree(self) -> bool:
        return bool(self.syntax_variant.batch_fields(self.config))

    def check_batch_fields(self, fields: dict[str, torch.Tensor | None]) -> None:
        needed = self.syntax_variant.batch_fields(self.config)
        missing = [name for name in ("input_ids", *needed) if needed and fields[name] is None]
        if missing:
            raise ValueError(
                f"variant {self.config.variant!r} needs the batch field(s) {', '.join(missing)}; build batches "
                "with xsyn.trees.batch.collate_trees(...) from parsed examples")

    def syntax_parameters(self) -> Iterator[tuple[str, torch.nn.Parameter]]:
        """The parameters the variant adds to BERT (for counting and for separate learning rates)."""
        markers = tuple(f".{name}." for name in self.syntax_variant.parameter_markers)
        for name, param in self.named_parameters():
            if any(marker in f".{name}" for marker in markers):
                yield name, param

