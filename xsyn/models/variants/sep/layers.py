"""The `sep` variant's layers: the syntax-aware representation of SEPREM (Xu et al. 2021), and its
dependency-distance prediction.

Before each chosen encoder layer n, the layer's input H (the embeddings for layer 0) is mixed
with a syntax-aware view of itself:

    H_hat = sigmoid(W1 H + W2 D~ H),   H' = (1 - alpha) H + alpha H_hat,

where D~ is the batch's normalised inverse tree distance (`TreeTensors.sep_weights`: row i
weighs every piece j reachable from i by 1 / d(i, j), summing to 1). D~ is computed once per batch
on the batch's device and shared by all layers; a layer adds two H x H projections and one batched
(T x T) x (T x H) product. alpha = 0 gives BERT's layer input exactly.

Distance prediction, an auxiliary loss of `sep` and an objective of the GAT's pre-training
(`xsyn pretrain-gat --objectives seprem`): SEPREM masks 15% of the entries of the tree-distance matrix
its model reads, and predicts each masked distance from the concatenated representations of the two
tokens. A selected pair is hidden with probability 0.8, given a random value with 0.1, and left as it
is with 0.1 (BERT's masking recipe, as SEPREM does): in the GAT's attention mask (`corrupt_mask`: pairs
within distance delta see each other) or in the distances that `sep` reads (`corrupt_distances`). The
head then predicts the distance of every selected pair from [h_i; h_j], over the classes 1, 2, ..., K-1
and "K or more".

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
from xsyn.trees.tensors import UNREACHABLE, TreeTensors, sep_weights

if TYPE_CHECKING:
    from xsyn.models.configuration import XsynBertConfig
    from xsyn.models.modeling import XsynBertModel
    from xsyn.models.variants.base import SyntaxBatch

MASK_FRACTION = 0.15
HIDE, RANDOMISE = 0.8, 0.1  # of the selected pairs; the rest keep their visibility


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


class SepDistanceHead(nn.Module):
    """[h_i; h_j] -> logits over the distances 1 .. max_distance (the last class: that or more)."""

    def __init__(self, size: int, max_distance: int = 8):
        super().__init__()
        if max_distance < 2:
            raise ValueError(f"max_distance must be >= 2 (a class for 1 and one for 'or more'), "
                             f"got {max_distance}")
        self.max_distance = max_distance
        self.hidden = nn.Linear(2 * size, size)
        self.output = nn.Linear(size, max_distance)

    def forward(self, states: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        """Logits (P, max_distance) for `pairs` (P, 3) of (batch row, i, j)."""
        left = states[pairs[:, 0], pairs[:, 1]]
        right = states[pairs[:, 0], pairs[:, 2]]
        return self.output(F.gelu(self.hidden(torch.cat([left, right], dim=-1))))

    def loss(self, states: torch.Tensor, pairs: torch.Tensor, distances: torch.Tensor) -> torch.Tensor:
        """Cross-entropy of the selected pairs' distances (clipped to max_distance)."""
        target = distances[pairs[:, 0], pairs[:, 1], pairs[:, 2]].long().clamp(max=self.max_distance) - 1
        return F.cross_entropy(self(states, pairs), target)


def select_pairs(distances: torch.Tensor, real: torch.Tensor, generator: torch.Generator | None = None,
                 fraction: float = MASK_FRACTION) -> torch.Tensor:
    """(P, 3) indices (batch row, i, j), i < j, of about `fraction` of the pairs of real pieces.

    At least one pair is selected whenever the batch has any (so the loss is always defined).
    """
    b, t, _ = distances.shape
    candidates = (real.unsqueeze(2) & real.unsqueeze(1) & (distances < UNREACHABLE)
                  & torch.ones(t, t, dtype=torch.bool, device=distances.device).triu(1))
    draw = torch.rand(b, t, t, generator=generator, device=distances.device)
    chosen = candidates & (draw < fraction)
    if not chosen.any() and candidates.any():
        chosen = candidates & (draw == draw.masked_fill(~candidates, 2.0).min())
    return chosen.nonzero()


def corrupt_mask(mask: torch.Tensor, pairs: torch.Tensor, generator: torch.Generator | None = None
                 ) -> torch.Tensor:
    """The GAT mask with the selected pairs hidden (80%), randomised (10%) or kept (10%), both ways."""
    roll = torch.rand(len(pairs), generator=generator, device=mask.device)
    coin = torch.rand(len(pairs), generator=generator, device=mask.device) < 0.5
    return _corrupt(mask, pairs, roll, False, coin)


def corrupt_distances(distances: torch.Tensor, pairs: torch.Tensor, max_distance: int,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """The (B, T, T) int16 tree distances with the selected pairs hidden (80%: unreachable, so they
    weigh nothing in SEPREM's normalised inverse distances), set to a random distance in
    1 .. max_distance (10%) or kept (10%), both ways."""
    roll = torch.rand(len(pairs), generator=generator, device=distances.device)
    random = torch.randint(1, max_distance + 1, (len(pairs),), generator=generator, device=distances.device,
                           dtype=distances.dtype)
    return _corrupt(distances, pairs, roll, UNREACHABLE, random)


def _corrupt(matrix: torch.Tensor, pairs: torch.Tensor, roll: torch.Tensor, hidden: bool | int,
             random: torch.Tensor) -> torch.Tensor:
    row, i, j = pairs.unbind(1)
    current = matrix[row, i, j]
    value = torch.where(roll < HIDE, hidden, torch.where(roll < HIDE + RANDOMISE, random, current))
    corrupted = matrix.clone()
    corrupted[row, i, j] = value
    corrupted[row, j, i] = value
    return corrupted
