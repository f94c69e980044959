"""`XsynBertModel`: transformers' `BertModel` with one syntax variant attached.

The pretrained weights keep their names (`embeddings.*`, `encoder.layer.N.attention.self.query`,
...), so any BERT checkpoint loads bit-exact and only the syntax parameters are new:

| variant | new modules                                          | what the batch's tree changes         |
|---------|------------------------------------------------------|---------------------------------------|
| none    | -                                                    | nothing (plain BERT)                  |
| gat     | `gat` (GAT + probes), `encoder.layer.N.attention.    | Q/K (or K/V) of the first n heads get |
|         | self.syntax_bias`                                    | + G G_l (Ahmad et al. 2021)           |
| sla/wla | `encoder.layer.N.attention.self.gate`                | gated local + global attention        |
| sdoi    | `sdoi` (one extra layer + alpha)                     | ancestor-masked layer on the output   |
| sep     | `encoder.layer.N.seprem` (W1, W2, alpha), optional   | each chosen layer's input mixed with  |
|         | `seprem_head` (distance prediction)                  | its inverse-tree-distance view        |

`forward` takes the batch of `xsyn.trees.batch.collate_trees` (`input_ids, attention_mask,
token_type_ids, tree_parent, tree_upos, tree_deprel, tree_word, tree_segment`). The n x n tree
tensors are derived inside, on the batch's device, once per batch (`xsyn.trees.tensors`); a
syntax variant given a batch without a field it needs raises an error naming that field.
Attention runs through torch's fused `scaled_dot_product_attention` (transformers' `sdpa`
implementation, the default); `eager` also works and returns attention probabilities. For `sdoi`,
`last_hidden_state` (and the pooled output) is the aggregated H'; `hidden_states` are BERT's layers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutputWithPooling
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import (
    BertModel,
    BertPreTrainedModel,
    BertSelfAttention,
    eager_attention_forward,
)
from transformers.utils import ModelOutput

from xsyn.models.configuration import XsynBertConfig
from xsyn.models.distance_prediction import DistancePredictionHead, corrupt_distances, select_pairs
from xsyn.models.gat import AdditiveGatLayer, GatSyntaxEncoder, SyntaxBias, load_gat_state, save_gat, structural_loss
from xsyn.models.local_attention import LocalAttentionGate, attention_mask_for, mix, mix_weights
from xsyn.models.sdoi import SyntaxGuidedLayer
from xsyn.models.seprem import DistanceMix, DistanceMixLayer
from xsyn.trees.tensors import TreeTensors, seprem_weights

# The batch fields each variant reads (besides input_ids and attention_mask).
REQUIRED_FIELDS = {
    "none": (),
    "gat": ("tree_parent", "tree_upos"),
    "sla": ("tree_parent", "tree_upos", "tree_word"),
    "wla": ("tree_upos", "tree_word", "tree_segment"),
    "sdoi": ("tree_parent", "tree_upos"),
    "sep": ("tree_parent", "tree_upos"),
}
# Name fragments of the parameters a variant adds to BERT.
SYNTAX_PARAMETER_MARKERS = (".gat.", ".syntax_bias.", ".gate.", ".sdoi.", ".seprem.", ".seprem_head.")


@dataclass
class SyntaxContext:
    """What the syntax layers read, computed once per batch: G, the local mask (B, 1, T, T), or
    SEPREM's normalised inverse distances D~ (B, T, T)."""

    gat_output: torch.Tensor | None = None
    local_mask: torch.Tensor | None = None
    seprem_weights: torch.Tensor | None = None


@dataclass
class XsynModelOutput(BaseModelOutputWithPooling):
    """BERT's output plus, for `gat`, G and the structural-probe losses, and for `sep` the
    distance-prediction loss (when asked for)."""

    gat_output: torch.FloatTensor | None = None
    distance_loss: torch.FloatTensor | None = None
    depth_loss: torch.FloatTensor | None = None
    seprem_loss: torch.FloatTensor | None = None


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


class SyntaxSelfAttention(BertSelfAttention):
    """BERT self-attention with the GAT bias (gat) or the gated local/global mix (sla, wla)."""

    def __init__(self, config: XsynBertConfig, layer_idx: int):
        super().__init__(config, layer_idx=layer_idx)
        self.syntax_bias = SyntaxBias(config) if config.variant == "gat" else None
        self.gate = LocalAttentionGate(config.hidden_size) if config.variant in ("sla", "wla") else None

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                past_key_values=None, xsyn_syntax: SyntaxContext | None = None, **kwargs):
        # past_key_values: part of BertSelfAttention's interface; an encoder keeps no cache
        if xsyn_syntax is None:
            raise ValueError("a syntax layer ran without its syntax context; call XsynBertModel (or a head) "
                             "with the batch's tree_* fields rather than the encoder directly")
        shape = (*hidden_states.shape[:-1], -1, self.attention_head_size)
        query = self.query(hidden_states).view(shape).transpose(1, 2)
        key = self.key(hidden_states).view(shape).transpose(1, 2)
        value = self.value(hidden_states).view(shape).transpose(1, 2)
        if self.syntax_bias is not None:
            query, key, value = self.syntax_bias(xsyn_syntax.gat_output, query, key, value)
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
        dropout = self.dropout.p if self.training else 0.0
        output, weights = attend(self, query, key, value, attention_mask, dropout=dropout,
                                 scaling=self.scaling, **kwargs)
        if self.gate is not None:
            local, local_weights = attend(self, query, key, value, xsyn_syntax.local_mask, dropout=dropout,
                                          scaling=self.scaling, **kwargs)
            gate = self.gate(hidden_states)
            output, weights = mix(gate, local, output), mix_weights(gate, local_weights, weights)
        return output.reshape(*hidden_states.shape[:-1], -1).contiguous(), weights


class XsynBertPreTrainedModel(BertPreTrainedModel):
    """Shared by the encoder and the heads: the config class and the syntax modules' initialisation."""

    config_class = XsynBertConfig

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)  # Linear, Embedding, LayerNorm as in BERT
        if isinstance(module, SyntaxGuidedLayer):
            init.constant_(module.alpha, self.config.sdoi_alpha)
        elif isinstance(module, DistanceMix):
            init.constant_(module.alpha, self.config.sep_alpha)
        elif isinstance(module, AdditiveGatLayer):
            init.normal_(module.score_query, std=self.config.initializer_range)
            init.normal_(module.score_key, std=self.config.initializer_range)
        elif isinstance(module, GatSyntaxEncoder) and module.relation_bias is not None:
            init.zeros_(module.relation_bias)  # no preference among the relations at first


class XsynBertModel(XsynBertPreTrainedModel, BertModel):
    def __init__(self, config: XsynBertConfig, add_pooling_layer: bool = True):
        config.check_syntax()
        super().__init__(config, add_pooling_layer=add_pooling_layer)
        variant = config.variant
        if variant in ("gat", "sla", "wla"):
            for i in config.syntax_layer_ids:
                self.encoder.layer[i].attention.self = SyntaxSelfAttention(config, layer_idx=i)
        elif variant == "sep":
            for i in config.syntax_layer_ids:
                self.encoder.layer[i] = DistanceMixLayer(config, layer_idx=i)
        self.gat = GatSyntaxEncoder(config) if variant == "gat" else None
        self.sdoi = SyntaxGuidedLayer(config) if variant == "sdoi" else None
        self.seprem_head = (DistancePredictionHead(config.hidden_size, config.sep_max_distance)
                            if variant == "sep" and config.sep_distance_loss_weight > 0 else None)
        self.post_init()

    def forward(self, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, tree_parent: torch.Tensor | None = None,
                tree_upos: torch.Tensor | None = None, tree_deprel: torch.Tensor | None = None,
                tree_word: torch.Tensor | None = None, tree_segment: torch.Tensor | None = None,
                compute_structural_loss: bool = False, **kwargs) -> XsynModelOutput:
        """Encode a batch. `compute_structural_loss` adds the GAT's probe losses (gat), or in training
        SEPREM's distance-prediction loss (sep with `sep_distance_loss_weight` > 0)."""
        variant = self.config.variant
        if variant == "none":
            out = super().forward(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=token_type_ids, **kwargs)
            return XsynModelOutput(last_hidden_state=out.last_hidden_state, pooler_output=out.pooler_output,
                                   hidden_states=out.hidden_states, attentions=out.attentions)
        fields = {"input_ids": input_ids, "tree_parent": tree_parent, "tree_upos": tree_upos,
                  "tree_deprel": tree_deprel, "tree_word": tree_word, "tree_segment": tree_segment}
        self._check_fields(fields)
        tree = TreeTensors(tree_parent, tree_upos, tree_word, tree_segment)
        context = SyntaxContext()
        implementation = self.config._attn_implementation
        if variant == "gat":
            context.gat_output = self.gat_encode(input_ids, tree, tree_deprel,
                                                 position_ids=kwargs.get("position_ids"))
        elif variant == "sla":
            mask = tree.sla_mask(self.config.sla_distance, self.config.sla_punct_visible)
            context.local_mask = attention_mask_for(mask, implementation, self.dtype)
        elif variant == "wla":
            context.local_mask = attention_mask_for(tree.wla_mask(self.config.wla_window), implementation,
                                                    self.dtype)
        elif variant == "sep":
            pairs = None
            if compute_structural_loss and self.seprem_head is not None and self.training:
                # SEPREM's objective: hide or perturb some pairs' distances, predict them from the output
                pairs = select_pairs(tree.distances, _real_tokens(attention_mask, input_ids).bool())
                weights = seprem_weights(corrupt_distances(tree.distances, pairs, self.config.sep_max_distance))
            else:
                weights = tree.seprem_weights()
            device = weights.device.type  # under autocast, cast once here rather than in every layer's product
            context.seprem_weights = weights.to(torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device)
                                                else self.dtype)
        out = super().forward(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids, xsyn_syntax=context, **kwargs)
        hidden, pooled = out.last_hidden_state, out.pooler_output
        if self.sdoi is not None:
            hidden = self.sdoi(hidden, attention_mask_for(tree.sdoi_mask(), implementation, self.dtype))
            pooled = self.pooler(hidden) if self.pooler is not None else None  # pool the aggregated output
        distance_loss = depth_loss = seprem_loss = None
        if variant == "sep" and pairs is not None:
            seprem_loss = self.seprem_head.loss(hidden, pairs, tree.distances)
        if variant == "gat" and compute_structural_loss and self.config.structural_loss_weight > 0:  # 0: not computed
            predicted_distances, predicted_depths = self.gat.probe(context.gat_output)
            distance_loss, depth_loss = structural_loss(
                predicted_distances, predicted_depths, tree.distances, tree.depth,
                _real_tokens(attention_mask, input_ids))
        return XsynModelOutput(last_hidden_state=hidden, pooler_output=pooled, hidden_states=out.hidden_states,
                               attentions=out.attentions, gat_output=context.gat_output,
                               distance_loss=distance_loss, depth_loss=depth_loss, seprem_loss=seprem_loss)

    def _check_fields(self, fields: dict[str, torch.Tensor | None]) -> None:
        needed = ("input_ids",) + REQUIRED_FIELDS[self.config.variant]
        if self.config.variant == "gat" and self.config.gat_deprel_embeddings:
            needed += ("tree_deprel",)
        missing = [name for name in needed if fields[name] is None]
        if missing:
            raise ValueError(
                f"variant {self.config.variant!r} needs the batch field(s) {', '.join(missing)}; build batches "
                "with xsyn.trees.batch.collate_trees(..., syntax=True) from parsed examples")

    def gat_encode(self, input_ids: torch.Tensor, tree: TreeTensors, deprel: torch.Tensor | None = None,
                   mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None) -> torch.Tensor:
        """G (B, T, k d_g) of a batch's trees, under `mask` (default: tree distance <= gat_delta).

        The input is BERT's word-piece embeddings, plus its position embeddings (of `position_ids`,
        by default 0..T-1 as in BERT) where the config sets `gat_position_embeddings`.
        """
        words = self.embeddings.word_embeddings(input_ids)
        if self.config.gat_position_embeddings:
            if position_ids is None:
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
        if self.gat is None:
            raise ValueError(f"this model's variant is {self.config.variant!r}; GAT operations need variant 'gat'")

    def syntax_parameters(self) -> Iterator[tuple[str, torch.nn.Parameter]]:
        """The parameters the variant adds to BERT (for counting and for separate learning rates)."""
        for name, param in self.named_parameters():
            if any(marker in f".{name}" for marker in SYNTAX_PARAMETER_MARKERS):
                yield name, param


def _real_tokens(attention_mask: torch.Tensor | None, input_ids: torch.Tensor) -> torch.Tensor:
    return attention_mask if attention_mask is not None else torch.ones_like(input_ids)
