"""SEPREM's dependency-distance prediction (Xu et al. 2021): an objective for the GAT's pre-training
and an auxiliary loss of the `sep` variant's fine-tuning.

SEPREM masks 15% of the entries of the tree-distance matrix its model reads, and predicts each
masked distance from the concatenated representations of the two tokens. A selected pair is
hidden with probability 0.8, given a random value with 0.1, and left as it is with 0.1 (BERT's
masking recipe, as SEPREM does): in the GAT's attention mask (`corrupt_mask`: pairs within
distance delta see each other) or in the distances that `sep` reads (`corrupt_distances`). The
classifier then predicts the distance of every selected pair from [h_i; h_j], over the classes
1, 2, ..., K-1 and "K or more". The `sep` variant's layers install the head (`layers.py`); pre-training
imports this module itself.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from xsyn.trees.tensors import UNREACHABLE

MASK_FRACTION = 0.15
HIDE, RANDOMISE = 0.8, 0.1  # of the selected pairs; the rest keep their visibility


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
