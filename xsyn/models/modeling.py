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
from pathlib import Path
from typing import Any

import torch
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutputWithPooling
from transformers.models.bert.modeling_bert import BertModel, BertPreTrainedModel
from transformers.utils import ModelOutput

from xsyn.models.configuration import XsynBertConfig
from xsyn.models.families import EncoderFamily, family_of, resolve
from xsyn.models.gat import load_gat_state, save_gat, structural_loss
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
    """BERT's output, plus what the variant computed from the trees (`syntax_context`: the GAT's G, a
    local mask ...) and its auxiliary losses (when asked for)."""

    syntax_context: Any = None
    syntax_losses: dict[str, torch.FloatTensor] | None = None


@dataclass
class ProbeOutput(ModelOutput):
    """The GAT's structural probes on one batch, with their targets and L1 losses."""

    predicted_distances: torch.FloatTensor | None = None  # (B, T, T) squared distances
    predicted_depths: torch.FloatTensor | None = None  # (B, T) squared norms
    distances: torch.LongTensor | None = None  # (B, T, T) tree distances
    depths: torch.LongTensor | None = None  # (B, T) tree depths
    distance_loss: torch.FloatTensor | None = None
    depth_loss: torch.FloatTensor | None = None
    gat_output: torch.FloatTensor | None = None


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
                compute_structural_loss: bool = False, **kwargs) -> XsynModelOutput:
        """Encode a batch. `compute_structural_loss` adds the variant's auxiliary losses (gat: the
        probes'; sep with `sep_distance_loss_weight` > 0, in training: distance prediction)."""
        variant = self.syntax_variant
        fields = {"input_ids": input_ids, "tree_parent": tree_parent, "tree_upos": tree_upos,
                  "tree_deprel": tree_deprel, "tree_word": tree_word, "tree_segment": tree_segment}
        self._check_fields(fields)
        tree = (TreeTensors(tree_parent, tree_upos, tree_word, tree_segment, host_check=False)  # no wait in the step
                if self._needs_tree() else None)
        batch = SyntaxBatch(input_ids, attention_mask, tree_deprel, kwargs.get("position_ids"))
        context = variant.context(self, tree, batch, compute_structural_loss)
        syntax = {} if context is None else {"xsyn_syntax": context}
        out = super().forward(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                              **syntax, **kwargs)
        hidden, pooled = out.last_hidden_state, out.pooler_output
        replaced = variant.output(self, tree, hidden)
        if replaced is not None:
            hidden = replaced
            pooled = self.pooler(hidden) if self.pooler is not None else None  # pool the replaced output
        weighted = any(getattr(self.config, term.weight) > 0 for term in variant.losses)  # at weight 0: not computed
        losses = variant.auxiliary_losses(self, context, tree, batch, hidden, compute_structural_loss and weighted)
        return XsynModelOutput(last_hidden_state=hidden, pooler_output=pooled, hidden_states=out.hidden_states,
                               attentions=out.attentions, syntax_context=context, syntax_losses=losses or None)

    def _needs_tree(self) -> bool:
        return bool(self.syntax_variant.batch_fields(self.config))

    def _check_fields(self, fields: dict[str, torch.Tensor | None]) -> None:
        needed = self.syntax_variant.batch_fields(self.config)
        missing = [name for name in ("input_ids", *needed) if needed and fields[name] is None]
        if missing:
            raise ValueError(
                f"variant {self.config.variant!r} needs the batch field(s) {', '.join(missing)}; build batches "
                "with xsyn.trees.batch.collate_trees(..., syntax=True) from parsed examples")

    def gat_encode(self, input_ids: torch.Tensor, tree: TreeTensors, deprel: torch.Tensor | None = None,
                   mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """G (B, T, k d_g) of a batch's trees, under `mask` (default: tree distance <= gat_delta).

        The input is BERT's word-piece embeddings, plus its position embeddings (of `position_ids`,
        by default those the encoder's embeddings use: 0..T-1 in BERT, from the padding index + 1 over
        the pieces that are not padding in XLM-R) where the config sets `gat_position_embeddings`.
        """
        words = self.embeddings.word_embeddings(input_ids)
        if self.config.gat_position_embeddings:
            if position_ids is None and self.family.padded_positions:
                position_ids = self.embeddings.create_position_ids_from_input_ids(input_ids,
                                                                                   self.embeddings.padding_idx)
            elif position_ids is None:
                position_ids = torch.arange(input_ids.shape[1], device=input_ids.device)
            words = words + self.embeddings.position_embeddings(position_ids)
        mask = tree.gat_mask(self.config.gat_delta) if mask is None else mask
        relations = tree.edge_relations if self.config.gat_edge_direction else None
        return self.gat(words, tree.upos, mask, deprel, relations)

    # -- the GAT on its own (structural probing, pre-training on treebanks) -----------------------

    def syntax_probe(self, input_ids: torch.Tensor, tree_parent: torch.Tensor, tree_upos: torch.Tensor,
                     attention_mask: torch.Tensor | None = None, tree_deprel: torch.Tensor | None = None,
                     *, tree: TreeTensors | None = None, **unused) -> ProbeOutput:
        """Run only the GAT and its probes (no BERT layers): predictions, targets and L1 losses.

        Takes a whole collated batch (`**batch`); fields the GAT does not read are ignored. `tree`
        passes the batch's tree tensors where the caller has already built them.
        """
        self._require_gat()
        self._check_fields({"input_ids": input_ids, "tree_parent": tree_parent, "tree_upos": tree_upos,
                            "tree_deprel": tree_deprel, "tree_word": None, "tree_segment": None})
        if tree is None:
            tree = TreeTensors(tree_parent, tree_upos, None, None)
        gat_output = self.gat_encode(input_ids, tree, tree_deprel)
        predicted_distances, predicted_depths = self.gat.probe(gat_output)
        distance_loss, depth_loss = structural_loss(predicted_distances, predicted_depths, tree.distances,
                                                    tree.depth, _real_tokens(attention_mask, input_ids))
        return ProbeOutput(predicted_distances=predicted_distances, predicted_depths=predicted_depths,
                           distances=tree.distances, depths=tree.depth, distance_loss=distance_loss,
                           depth_loss=depth_loss, gat_output=gat_output)

    def gat_state_dict(self) -> dict[str, torch.Tensor]:
        """The GAT checkpoint: UPOS (and relation) embeddings, GAT layers, LayerNorm, probes."""
        self._require_gat()
        return self.gat.state_dict()

    def save_gat(self, directory: str | Path) -> None:
        self._require_gat()
        save_gat(self.gat, self.config, directory)

    def load_gat(self, directory: str | Path) -> None:
        """Load a GAT checkpoint (from `save_gat` / `xsyn pretrain-gat`); shapes must match."""
        self._require_gat()
        self.gat.load_state_dict(load_gat_state(directory, self.config))

    def freeze_gat(self) -> None:
        """Stop training the GAT and its probes (the syntax-bias projections stay trainable)."""
        self._require_gat()
        self.gat.requires_grad_(False)

    def _require_gat(self) -> None:
        if getattr(self, "gat", None) is None:  # installed by the gat variant
            raise ValueError(f"this model's variant is {self.config.variant!r}; GAT operations need variant 'gat'")

    def syntax_parameters(self) -> Iterator[tuple[str, torch.nn.Parameter]]:
        """The parameters the variant adds to BERT (for counting and for separate learning rates)."""
        markers = tuple(f".{name}." for name in self.syntax_variant.parameter_markers)
        for name, param in self.named_parameters():
            if any(marker in f".{name}" for marker in markers):
                yield name, param


def _real_tokens(attention_mask: torch.Tensor | None, input_ids: torch.Tensor) -> torch.Tensor:
    return attention_mask if attention_mask is not None else torch.ones_like(input_ids)
