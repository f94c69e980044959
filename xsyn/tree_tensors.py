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

from functools import cached_property

import torch

from xsyn.syntax.vocab import PAD_ID, PUNCT_UPOS_ID, UPOS_SPECIAL_ID
from xsyn.wordpiece import PAD, ROOT

UNREACHABLE = torch.iinfo(torch.int16).max  # the distance of any pair that involves padding

__all__ = [
    "ROOT", "PAD", "UNREACHABLE", "TreeTensors", "tree_depth", "ancestor_matrix", "tree_distances",
    "gat_mask", "sla_mask", "wla_mask", "sdoi_mask", "seprem_weights",
]


def _chains(parent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every node's ancestors by distance, (B, N, L) with entry l the l-th ancestor (the root
    repeats once reached), and depths (B, N). One gather per level, L = max depth + 1."""
    b, n = parent.shape
    idx = torch.arange(n, device=parent.device).expand(b, n)
    step = torch.where(parent >= 0, parent, idx)  # roots and padding point to themselves
    chain = [idx]
    depth = torch.zeros_like(idx)
    while True:
        up = step.gather(1, chain[-1])
        moved = up != chain[-1]
        if not bool(moved.any()):
            return torch.stack(chain, dim=-1), depth
        depth = depth + moved
        chain.append(up)


def tree_depth(parent: torch.Tensor) -> torch.Tensor:
    """Depth of every node, (B, N) long: 0 at `[CLS]` (and at padding), 1 at sentence roots."""
    return _chains(parent)[1]


def _ancestors(parent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Ancestor-or-self matrix over all N nodes (the chains scattered into a boolean matrix), and depths."""
    chain, depth = _chains(parent)
    b, n = parent.shape
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
    """(B, T, T) int16: hops between pieces i and j; `UNREACHABLE` where either is padding.

    `size` (T) restricts the result to the first T nodes (the sequence); removed ancestors
    still carry the paths between kept pieces. d = depth_i + depth_j - 2 depth(lca), where
    depth(lca) + 1 is the number of common ancestors: one batched matmul.
    """
    anc, depth = _ancestors(parent)
    return _distances(anc, depth, parent, size or parent.shape[1])


def _distances(anc: torch.Tensor, depth: torch.Tensor, parent: torch.Tensor, size: int) -> torch.Tensor:
    seq = anc[:, :size].view(torch.uint8).to(torch.float32)
    common = torch.bmm(seq, seq.transpose(1, 2))
    # Padding gets a depth so large that every pair touching it clamps to UNREACHABLE.
    lifted = torch.where(parent[:, :size] == PAD, UNREACHABLE, depth[:, :size] + 1).to(torch.float32)
    dist = torch.add(lifted.unsqueeze(2) + lifted.unsqueeze(1), common, alpha=-2.0)
    return dist.clamp_(max=UNREACHABLE).to(torch.int16)


# Masks are built as uint8 0/1 arithmetic and viewed as bool at the end: on CPU, comparisons
# producing bool and bool broadcasting ops are several times slower than int16/uint8 arithmetic.

def _eye(size: int, device: torch.device) -> torch.Tensor:
    return torch.eye(size, dtype=torch.uint8, device=device)


def _at_most(values: torch.Tensor, limit: int) -> torch.Tensor:
    """uint8 0/1 of `values <= limit` for an int16 tensor."""
    return (limit + 1 - values).clamp_(0, 1).to(torch.uint8)


def _flag(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.uint8)


def _finish(mask: torch.Tensor, upos: torch.Tensor) -> torch.Tensor:
    """Drop padded keys (upos == PAD_ID), give every row its own position (no empty rows), as bool."""
    real = _flag(upos != PAD_ID).unsqueeze(1)
    return ((mask & real) | _eye(mask.shape[-1], mask.device)).view(torch.bool)


def gat_mask(distances: torch.Tensor, delta: int) -> torch.Tensor:
    """GAT attention (Ahmad et al. eq. 3): j visible from i iff tree distance <= delta.

    Padding is unreachable from real pieces, so padded keys drop out by distance alone.
    """
    if delta < 1:
        raise ValueError(f"delta must be >= 1, got {delta}")
    return (_at_most(distances, delta) | _eye(distances.shape[-1], distances.device)).view(torch.bool)


def _word_structure(word_index: torch.Tensor, segment_id: torch.Tensor, special: torch.Tensor):
    """Per piece: does it start a word; the row of the previous and of the next word in its
    segment (itself where there is none); a running word number that jumps between segments.

    Specials and pieces of no word count as one-piece words.
    """
    b, t = word_index.shape
    pos = torch.arange(t, device=word_index.device).expand(b, t)
    alone = special | (word_index < 0)
    starts = torch.ones_like(special)
    starts[:, 1:] = (word_index[:, 1:] != word_index[:, :-1]) | (segment_id[:, 1:] != segment_id[:, :-1])
    starts |= alone
    first = torch.where(starts, pos, 0).cummax(dim=1).values
    before = (first - 1).clamp(min=0)  # the last piece of the previous word shares its row
    prev_ok = (first > 0) & (segment_id.gather(1, before) == segment_id) & ~alone.gather(1, before)
    prev = torch.where(prev_ok & ~alone, before, pos)
    later = torch.where(starts, pos, t).flip(1).cummin(dim=1).values.flip(1)
    after = torch.cat([later[:, 1:], torch.full_like(pos[:, :1], t)], dim=1)  # next word start
    nxt = after.clamp(max=t - 1)
    nxt_ok = (after < t) & (segment_id.gather(1, nxt) == segment_id) & ~alone.gather(1, nxt)
    nxt = torch.where(nxt_ok & ~alone, nxt, pos)
    number = starts.to(torch.int16).cumsum(dim=1, dtype=torch.int16) + segment_id.to(torch.int16) * (t + 1)
    return starts, prev, nxt, number


def _rows(matrix: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """matrix[b, rows[b, i], :] for every b, i: a row gather through one flat index_select."""
    b, t, _ = matrix.shape
    flat = (rows + torch.arange(b, device=rows.device).unsqueeze(1) * t).view(-1)
    return matrix.reshape(b * t, -1).index_select(0, flat).view(b, t, -1)


def sla_mask(distances: torch.Tensor, word_index: torch.Tensor, segment_id: torch.Tensor,
             upos: torch.Tensor, m: int, punct_visible: bool = False, _words=None) -> torch.Tensor:
    """Syntax-aware local attention mask (Li et al. 2021, eq. 2-3), at word level.

    Word j is visible from word i iff min over k in {i-1, i, i+1} of D(k, j) <= m, with i-1 and
    i+1 the linear neighbours of i in its segment. A word's pieces share its row and column;
    `[CLS]`/`[SEP]` rows and columns are always visible, and with `punct_visible` so are
    punctuation columns.

    Word-level distances need no gather: a word's later pieces are leaves under its first
    piece, so D(first(p), first(q)) = D(p, q) - [p is a later piece] - [q is a later piece].
    """
    special = upos == UPOS_SPECIAL_ID
    starts, prev, nxt, _ = _words if _words is not None else _word_structure(word_index, segment_id, special)
    later = (~starts).to(distances.dtype)
    words = (distances - later.unsqueeze(2) - later.unsqueeze(1)).clamp_(min=0)
    near = torch.minimum(words, torch.minimum(_rows(words, prev), _rows(words, nxt)))
    always = _flag(special)
    if punct_visible:
        always = always | _flag(upos == PUNCT_UPOS_ID)
    mask = _at_most(near, m) | always.unsqueeze(1) | _flag(special).unsqueeze(2)
    return _finish(mask, upos)


def wla_mask(word_index: torch.Tensor, segment_id: torch.Tensor, upos: torch.Tensor, k: int,
             _words=None) -> torch.Tensor:
    """Window local attention (the SLA paper's baseline): |word(i) - word(j)| <= k in a segment.

    Word level, shared by a word's pieces; `[CLS]`/`[SEP]` rows and columns always visible.
    """
    special = upos == UPOS_SPECIAL_ID
    number = (_words if _words is not None else _word_structure(word_index, segment_id, special))[3]
    near = _at_most((number.unsqueeze(2) - number.unsqueeze(1)).abs_(), k)
    spec = _flag(special)
    return _finish(near | spec.unsqueeze(1) | spec.unsqueeze(2), upos)


def sdoi_mask(ancestors: torch.Tensor, upos: torch.Tensor) -> torch.Tensor:
    """SG-Net's syntactic dependency of interest: each piece attends to its ancestors and itself.

    `ancestors` is `ancestor_matrix(...)` restricted to the sequence, (B, T, T). Special tokens
    attend to themselves only. Padding is nobody's ancestor, so padded keys never appear.
    """
    ordinary = _flag(upos != UPOS_SPECIAL_ID).unsqueeze(2)
    mask = (ancestors.view(torch.uint8) & ordinary) | _eye(ancestors.shape[-1], ancestors.device)
    return mask.view(torch.bool)


def seprem_weights(distances: torch.Tensor) -> torch.Tensor:
    """SEPREM's normalised inverse distance, (B, T, T) float (Xu et al. 2021).

    D~_ij = (1 / D_ij) / sum_z (1 / D_iz) over the z reachable from i (z != i); 0 on the diagonal
    and for padding. A row with nothing reachable (padding) is all zeros.
    """
    reachable = distances.clamp(0, 1) * (UNREACHABLE - distances).clamp_(0, 1)  # 0 < d < UNREACHABLE
    inv = reachable.to(torch.float32) / distances.clamp(min=1).to(torch.float32)
    return inv / inv.sum(-1, keepdim=True).clamp_(min=1e-12)


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
        """(B, T, T) int16, see `tree_distances`."""
        anc, depth = self._anc_depth
        return _distances(anc, depth, self.parent, self.size)

    @cached_property
    def _words(self):
        return _word_structure(self.word_index, self.segment_id, self.upos == UPOS_SPECIAL_ID)

    def gat_mask(self, delta: int) -> torch.Tensor:
        return gat_mask(self.distances, delta)

    def sla_mask(self, m: int, punct_visible: bool = False) -> torch.Tensor:
        return sla_mask(self.distances, self.word_index, self.segment_id, self.upos, m, punct_visible,
                        _words=self._words)

    def wla_mask(self, k: int) -> torch.Tensor:
        return wla_mask(self.word_index, self.segment_id, self.upos, k, _words=self._words)

    def sdoi_mask(self) -> torch.Tensor:
        return sdoi_mask(self.ancestors, self.upos)

    def seprem_weights(self) -> torch.Tensor:
        return seprem_weights(self.distances)
