"""The `sep` variant's layers: the syntax-aware representation of SEPREM (Xu et al. 2021), and (from
`distance.py`) its dependency-distance prediction.

Before each chosen encoder layer n, the layer's input H (the embeddings for layer 0) is mixed
with a syntax-aware view of itself:

    H_hat = sigmoid(W1 H + W2 D~ H),   H' = (1 - alpha) H + alpha H_hat,

where D~ is the batch's normalised inverse tree distance (`TreeTensors.sep_weights`: row i
weighs every piece j reachable from i by 1 / d(i, j), summing to 1). D~ is computed once per batch
on the batch's device and shared by all layers; a layer adds two H x H projections and one batched
(T x T) x (T x H) product. alpha = 0 gives BERT's layer input exactly.

In code the idea is called `sep`; on disk it keeps SEPREM's name: the mix's parameters are saved as
`encoder.layer.N.seprem.*`, the distance head as `seprem_head.*` and its loss is logged as `seprem_loss`
(the names of the checkpoints and logs written so far, which keep loading).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn
from torch.nn import functional as F
from transformers import initialization as init
from transformers.models.bert.modeling_bert import BertLayer

from xsyn.models.attention import cast_together, compute_dtype, lean_attention
from xsyn.models.variants.sep import SepContext
from xsyn.models.variants.sep.distance import SepDistanceHead, corrupt_distances, select_pairs
from xsyn.trees.tensors import TreeTensors, sep_weights

if TYPE_CHECKING:
    from xsyn.models.configuration import XsynBertConfig
    from xsyn.models.modeling import XsynBertModel
    from xsyn.models.variants.base import SyntaxBatch


class SepMix(nn.Module):
    """H -> (1 - alpha) H + alpha sigmoid(W1 H + W2 D~ H), for (B, T, H) states and (B, T, T) D~."""

    def __init__(self, config: XsynBertConfig):
        super().__init__()
        self.own = nn.Linear(config.hidden_size, config.hidden_size)  # W1 (and the bias)
        self.tree = nn.Linear(config.hidden_size, config.hidden_size, bias=False)  # W2
        self.alpha = nn.Parameter(torch.empty(()), requires_grad=config.sep_learn_alpha)

    def forward(self, hidden_states: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        weight, bias = self.stacked(weights.dtype)
        h = hidden_states.to(weights.dtype)  # once, in the compute dtype (autocast would cast it per product)
        # W1 H + b1 and H W2^T by one GEMM; W2 (D~ H) = D~ (H W2^T): each piece's tree-distance-weighted
        # context, added by the same product
        own, tree = F.linear(h, weight, bias).chunk(2, dim=-1)
        syntax = torch.sigmoid(torch.baddbmm(own, weights, tree))
        return torch.lerp(hidden_states, syntax.to(hidden_states.dtype), self.alpha.to(hidden_states.dtype))

    def stacked(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """[W1; W2] (2H, H) and [b1; 0] (2H) in `dtype`, by one cast (`cast_together`; the parameters keep their
        names). Cast here, in the layer's own forward, rather than once for all layers: the backward then turns
        this layer's gradients back to float32 as soon as the layer is done, where one cast for all would hold
        every layer's low-precision weight gradients to the end of the backward, when the step's gradients peak."""
        zeros = torch.zeros_like(self.own.bias)  # W2's missing bias
        weight, bias = cast_together([[self.own.weight, self.tree.weight], [self.own.bias, zeros]], dtype)
        return weight, bias


class SepLayer(BertLayer):
    """A `BertLayer` whose input first goes through `SepMix` (its own weights keep BERT's names)."""

    def __init__(self, config: XsynBertConfig, layer_idx: int):
        super().__init__(config, layer_idx=layer_idx)
        self.layer_idx = layer_idx
        self.attention.self = lean_attention(self.attention.self)  # BERT's, its projections in one GEMM
        self.seprem = SepMix(config)  # the saved name (see above)

    def forward(self, hidden_states: torch.Tensor, *args, xsyn_syntax=None, **kwargs) -> torch.Tensor:
        if xsyn_syntax is None:
            raise ValueError("a sep layer ran without its distance weights; call XsynBertModel (or a head) "
                             "with the batch's tree_* fields rather than the encoder directly")
        mixed = self.seprem(hidden_states, xsyn_syntax.weights)
        return super().forward(mixed, *args, **kwargs)


def install(model: XsynBertModel) -> None:
    """Swap each syntax layer for a `SepLayer`; add the distance head when its loss counts."""
    config = model.config
    for i in config.syntax_layer_ids:
        model.encoder.layer[i] = SepLayer(config, layer_idx=i)
    model.seprem_head = (SepDistanceHead(config.hidden_size, config.sep_max_distance)
                         if config.sep_distance_loss_weight > 0 else None)


def init_weights(module: nn.Module, config: XsynBertConfig) -> None:
    if isinstance(module, SepMix):
        init.constant_(module.alpha, config.sep_alpha)


def sep_context(model: XsynBertModel, tree: TreeTensors, batch: SyntaxBatch, with_losses: bool) -> SepContext:
    """D~ for the batch; in training with the distance loss, D~ of distances with some pairs corrupted."""
    pairs = None
    if with_losses and model.seprem_head is not None and model.training:
        # SEPREM's objective: hide or perturb some pairs' distances, predict them from the output
        pairs = select_pairs(tree.distances, batch.real_tokens().bool())
        weights = sep_weights(corrupt_distances(tree.distances, pairs, model.config.sep_max_distance))
    else:
        weights = tree.sep_weights()
    # under autocast, cast once here rather than in every layer's product
    return SepContext(weights.to(compute_dtype(weights.device, model.dtype)), pairs)
