"""Batched tree tensors, derived on the device from the O(n) fields of a padded batch.

Inputs (as collated by `xsyn.batch`):
- `parent`  (B, N) long: each tree node's parent; `ROOT` (-1) at `[CLS]`, `PAD` (-2) at padding.
  The first T nodes are the sequence's pieces; nodes T..N-1 (if any) are removed ancestors of
  kept pieces, carried so that truncation keeps true distances.
- `upos`, `word_index`, `segment_id` (B, T) long: per-piece fields; `upos == UPOS_SPECIAL_ID`
  marks `[CLS]`/`[SEP]`, `word_index` identifies a piece's word within its segment.

Every mask is (B, T, T) bool with True = may attend, and every row keeps at least itself, so a
softmax over a masked row never sees only -inf (no NaN from padding).
"""

from __future__ import annotations

import math
from functools import cached_property

import torch

from xsyn.syntax.vocab import PAD_ID, PUNCT_UPOS_ID, UPOS_SPECIAL_ID
from xsyn.wordpiece import PAD, ROOT

UNREACHABLE = 99_999  # distance between nodes of different trees (padding)

__all__ = [
    "ROOT", "PAD", "UNREACHABLE", "TreeTensors", "tree_depth", "ancestor_matrix", "tree_distances",
    "gat_mask", "sla_mask", "wla_mask", "sdoi_mask", "seprem_weights",
]


def _jumps(parent: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Depth of every node and the binary-lifting tables (2^k-th ancestors) by pointer doubling."""
    b, n = parent.shape
    idx = torch.arange(n, device=parent.device).expand(b, n)
    jump = torch.where(parent >= 0, parent, idx)  # roots and padding point to themselves
    depth = (parent >= 0).long()
    ups = []
    for _ in range(max(1, math.ceil(math.log2(n)))):
        ups.append(jump)
        depth = depth + depth.gather(1, jump)
        jump = jump.gather(1, jump)
    return depth, ups


def tree_depth(parent: torch.Tensor) -> torch.Tensor:
    """Depth of every node, (B, N) long: 0 at `[CLS]` (and at padding), 1 at sentence roots."""
    return _jumps(parent)[0]


def _ancestors(parent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    depth, ups = _jumps(parent)
    b, n = parent.shape
    levels = max(1, math.ceil(math.log2(int(depth.max()) + 1)))
    chain = torch.arange(n, device=parent.device).expand(b, n).unsqueeze(-1)  # distances 0 .. 2^k - 1
    for up in ups[:levels]:
        chain = torch.cat([chain, up.gather(1, chain.flatten(1)).view(b, n, -1)], dim=-1)
    anc = torch.zeros(b, n, n, dtype=torch.bool, device=parent.device)
    anc.scatter_(2, chain, True)
    return anc, depth


def ancestor_matrix(parent: torch.Tensor) -> torch.Tensor:
    """(B, N, N) bool: `[b, i, j]` is True iff node j is node i or one of its ancestors.

    Computed from the parent pointers (not from subtree spans), so it is right for
    non-projective trees too.
    """
    return _ancestors(parent)[0]


def tree_distances(parent: torch.Tensor, size: int | None = None) -> torch.Tensor:
    """(B, T, T) long: hops between pieces i and j in the tree (`UNREACHABLE` across trees).

    `size` (T) restricts the result to the first T nodes (the sequence); removed ancestors
    still carry the paths between kept pieces. d = depth_i + depth_j - 2 depth(lca), where
    depth(lca) + 1 is the number of common ancestors: one batched matmul.
    """
    anc, depth = _ancestors(parent)
    return _distances(anc, depth, size or parent.shape[1])


def _distances(anc: torch.Tensor, depth: torch.Tensor, size: int) -> torch.Tensor:
    seq = anc[:, :size].float()
    common = torch.bmm(seq, seq.transpose(1, 2)).long()
    d = depth[:, :size]
    dist = d.unsqueeze(2) + d.unsqueeze(1) - 2 * (common - 1)
    return dist.masked_fill_(common == 0, UNREACHABLE)


def _finish(mask: torch.Tensor, upos: torch.Tensor) -> torch.Tensor:
    """Drop padded keys (upos == PAD_ID), then give every row its own position (no empty rows)."""
    eye = torch.eye(mask.shape[-1], dtype=torch.bool, device=mask.device)
    return (mask & (upos != PAD_ID).unsqueeze(1)) | eye


def gat_mask(distances: torch.Tensor, delta: int) -> torch.Tensor:
    """GAT attention (Ahmad et al. eq. 3): j visible from i iff tree distance <= delta.

    Padding is unreachable from real pieces, so padded keys drop out by distance alone.
    """
    if delta < 1:
        raise ValueError(f"delta must be >= 1, got {delta}")
    eye = torch.eye(distances.shape[-1], dtype=torch.bool, device=distances.device)
    return (distances <= delta) | eye


def _word_structure(word_index: torch.Tensor, segment_id: torch.Tensor, special: torch.Tensor):
    """Per piece: position of its word's first piece, of the previous and next word's first pieces
    (itself where there is none in the same segment), and a running word number."""
    b, t = word_index.shape
    pos = torch.arange(t, device=word_index.device).expand(b, t)
    starts = torch.ones_like(special)
    starts[:, 1:] = (word_index[:, 1:] != word_index[:, :-1]) | (segment_id[:, 1:] != segment_id[:, :-1])
    starts |= special
    first = torch.where(starts, pos, 0).cummax(dim=1).values
    before = (first - 1).clamp(min=0)
    prev = first.gather(1, before)
    prev_ok = (first > 0) & (segment_id.gather(1, before) == segment_id) & ~special.gather(1, before)
    prev = torch.where(prev_ok & ~special, prev, first)
    big = torch.full_like(pos, t)
    later = torch.where(starts, pos, big).flip(1).cummin(dim=1).values.flip(1)  # next start at or after
    after = torch.cat([later[:, 1:], big[:, :1]], dim=1)  # first start strictly after each piece
    nxt = after.clamp(max=t - 1)
    nxt_ok = (after < t) & (segment_id.gather(1, nxt) == segment_id) & ~special.gather(1, nxt)
    nxt = torch.where(nxt_ok & ~special, nxt, first)
    number = starts.long().cumsum(dim=1)
    return first, prev, nxt, number


def sla_mask(distances: torch.Tensor, word_index: torch.Tensor, segment_id: torch.Tensor,
             upos: torch.Tensor, m: int, punct_visible: bool = False) -> torch.Tensor:
    """Syntax-aware local attention mask (Li et al. 2021, eq. 2-3), at word level.

    Word j is visible from word i iff min over k in {i-1, i, i+1} of D(k, j) <= m, with i-1 and
    i+1 the linear neighbours of i in its segment. A word's pieces share its row and column;
    `[CLS]`/`[SEP]` rows and columns are always visible, and with `punct_visible` so are
    punctuation columns.
    """
    special = upos == UPOS_SPECIAL_ID
    first, prev, nxt, _ = _word_structure(word_index, segment_id, special)
    t = distances.shape[-1]
    cols = distances.gather(2, first.unsqueeze(1).expand(-1, t, -1))  # D(row piece, first piece of col word)
    near = torch.minimum(cols.gather(1, first.unsqueeze(2).expand(-1, -1, t)),
                         torch.minimum(cols.gather(1, prev.unsqueeze(2).expand(-1, -1, t)),
                                       cols.gather(1, nxt.unsqueeze(2).expand(-1, -1, t))))
    mask = (near <= m) | special.unsqueeze(1) | special.unsqueeze(2)
    if punct_visible:
        mask |= (upos == PUNCT_UPOS_ID).unsqueeze(1)
    return _finish(mask, upos)


def wla_mask(word_index: torch.Tensor, segment_id: torch.Tensor, upos: torch.Tensor, k: int
             ) -> torch.Tensor:
    """Window local attention (the SLA paper's baseline): |word(i) - word(j)| <= k in a segment.

    Word level, shared by a word's pieces; `[CLS]`/`[SEP]` rows and columns always visible.
    """
    special = upos == UPOS_SPECIAL_ID
    number = _word_structure(word_index, segment_id, special)[3]
    near = (number.unsqueeze(2) - number.unsqueeze(1)).abs() <= k
    same = segment_id.unsqueeze(2) == segment_id.unsqueeze(1)
    mask = (near & same) | special.unsqueeze(1) | special.unsqueeze(2)
    return _finish(mask, upos)


def sdoi_mask(ancestors: torch.Tensor, upos: torch.Tensor) -> torch.Tensor:
    """SG-Net's syntactic dependency of interest: each piece attends to its ancestors and itself.

    `ancestors` is `ancestor_matrix(...)` restricted to the sequence, (B, T, T). Special tokens
    attend to themselves only.
    """
    special = (upos == UPOS_SPECIAL_ID).unsqueeze(2)
    eye = torch.eye(ancestors.shape[-1], dtype=torch.bool, device=ancestors.device)
    return _finish(torch.where(special, eye, ancestors), upos)


def seprem_weights(distances: torch.Tensor) -> torch.Tensor:
    """SEPREM's normalised inverse distance, (B, T, T) float (Xu et al. 2021).

    D~_ij = (1 / D_ij) / sum_z (1 / D_iz) over the z reachable from i (z != i); 0 on the diagonal
    and across trees. A row with nothing reachable (padding) is all zeros.
    """
    reach = (distances > 0) & (distances < UNREACHABLE)
    inv = torch.where(reach, 1.0 / distances.clamp(min=1).float(), 0.0)
    return inv / inv.sum(-1, keepdim=True).clamp(min=1e-12)


class TreeTensors:
    """All tree tensors of one batch, computed once on the batch's device and cached.

    >>> tt = TreeTensors(batch["tree_parent"], batch["upos_ids"], batch["word_index"], batch["segment_ids"])
    >>> tt.distances.shape, tt.gat_mask(delta=2).shape        # (B, T, T) each
    """

    def __init__(self, parent: torch.Tensor, upos: torch.Tensor, word_index: torch.Tensor,
                 segment_id: torch.Tensor):
        self.parent, self.upos, self.word_index, self.segment_id = parent, upos, word_index, segment_id
        self.size = upos.shape[1]

    @cached_property
    def _anc_depth(self) -> tuple[torch.Tensor, torch.Tensor]:
        return _ancestors(self.parent)

    @cached_property
    def depth(self) -> torch.Tensor:
        """(B, T) long."""
        return self._anc_depth[1][:, : self.size]

    @cached_property
    def ancestors(self) -> torch.Tensor:
        """(B, T, T) bool, see `ancestor_matrix`."""
        return self._anc_depth[0][:, : self.size, : self.size]

    @cached_property
    def distances(self) -> torch.Tensor:
        """(B, T, T) long, see `tree_distances`."""
        anc, depth = self._anc_depth
        return _distances(anc, depth, self.size)

    def gat_mask(self, delta: int) -> torch.Tensor:
        return gat_mask(self.distances, delta)

    def sla_mask(self, m: int, punct_visible: bool = False) -> torch.Tensor:
        return sla_mask(self.distances, self.word_index, self.segment_id, self.upos, m, punct_visible)

    def wla_mask(self, k: int) -> torch.Tensor:
        return wla_mask(self.word_index, self.segment_id, self.upos, k)

    def sdoi_mask(self) -> torch.Tensor:
        return sdoi_mask(self.ancestors, self.upos)

    def seprem_weights(self) -> torch.Tensor:
        return seprem_weights(self.distances)
