"""Batched tree tensors, derived on the device from the O(n) fields of a padded batch.

Inputs (as collated by `xsyn.batch`):
- `parent`  (B, N) long: each tree node's parent; `ROOT` (-1) at `[CLS]`, `PAD` (-2) at padding.
  The first T nodes are the sequence's pieces; nodes T..N-1 (if any) are removed ancestors of
  kept pieces, carried so that truncation keeps true distances.
- `upos`, `word_index`, `segment_id` (B, T) long: per-piece fields; `upos == UPOS_SPECIAL_ID`
  marks `[CLS]`/`[SEP]`, `word_index` identifies a piece's word within its segment (-1 for
  specials and for pieces of no word).

Every mask is (B, T, T) bool with True = may attend, and every row keeps at least itself, so a
softmax over a masked row never sees only -inf (no NaN from padding).

The code is written for few, large tensor operations: a batch of short sentences makes every
operation cheap, so the number of operations (and their dispatch) is what costs. Masks are built
as uint8 0/1 arithmetic and viewed as bool at the end: on CPU, comparisons producing bool and
broadcast bool operations are several times slower than int16/uint8 arithmetic.
"""

from __future__ import annotations

from functools import cached_property, lru_cache

import torch

from xsyn.syntax.vocab import PAD_ID, PUNCT_UPOS_ID, UPOS_SPECIAL_ID
from xsyn.wordpiece import PAD, ROOT

UNREACHABLE = torch.iinfo(torch.int16).max  # the distance of any pair that involves padding

__all__ = [
    "ROOT", "PAD", "UNREACHABLE", "TreeTensors", "tree_depth", "ancestor_matrix", "tree_distances",
    "gat_mask", "sla_mask", "wla_mask", "sdoi_mask", "seprem_weights", "edge_relations",
    "FURTHER", "SELF", "HEAD", "DEPENDENT", "EDGE_RELATIONS",
]


@lru_cache(maxsize=64)
def _eye(size: int, device: torch.device) -> torch.Tensor:
    return torch.eye(size, dtype=torch.uint8, device=device)


@lru_cache(maxsize=64)
def _positions(size: int, device: torch.device) -> torch.Tensor:
    return torch.arange(size, device=device)


# -- ancestors, depth, distances ------------------------------------------------------------------


def _ancestors(parent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Ancestor-or-self matrix over all N nodes, (B, N, N) bool, and depths (B, N) long.

    Every node's chain of ancestors is built by doubling: after k steps it holds the ancestors
    at distances 0 .. 2^k - 1 (the root repeats once reached); it stops once every chain has
    reached its root, after log2(depth + 1) steps.
    """
    b, n = parent.shape
    idx = _positions(n, parent.device).expand(b, n)
    step = torch.where(parent >= 0, parent, idx)  # roots and padding point to themselves
    jump, chain = step, idx.unsqueeze(-1)
    while True:
        chain = torch.cat([chain, jump.gather(1, chain.flatten(1)).view(b, n, -1)], dim=-1)
        farthest = chain[:, :, -1]
        if torch.equal(step.gather(1, farthest), farthest):  # every chain has reached its root
            break
        jump = jump.gather(1, jump)
    # (A scatter from a tensor of ones is several times faster than one from a scalar.)
    anc = torch.zeros(b, n, n, dtype=torch.uint8, device=parent.device)
    anc = anc.scatter_(2, chain, torch.ones_like(chain, dtype=torch.uint8)).view(torch.bool)
    return anc, (chain[:, :, 1:] != chain[:, :, :-1]).sum(-1)  # steps taken before the root


def tree_depth(parent: torch.Tensor) -> torch.Tensor:
    """Depth of every node, (B, N) long: 0 at `[CLS]` (and at padding), 1 at sentence roots."""
    return _ancestors(parent)[1]


def ancestor_matrix(parent: torch.Tensor) -> torch.Tensor:
    """(B, N, N) bool: `[b, i, j]` is True iff node j is node i or one of its ancestors.

    Computed from the parent pointers (not from subtree spans), so it is right for
    non-projective trees too.
    """
    return _ancestors(parent)[0]


def _distance_matrix(anc: torch.Tensor, depth: torch.Tensor, parent: torch.Tensor, size: int) -> torch.Tensor:
    """(B, T, T) float32 distances, +inf where either piece is padding: (depth_i + 1) + (depth_j + 1)
    - 2 * common ancestors, in one batched matmul (padding's inf survives it)."""
    seq = anc[:, :size].view(torch.uint8).to(torch.float32)
    lifted = torch.where(parent[:, :size] == PAD, torch.inf, depth[:, :size] + 1.0)
    return torch.baddbmm(lifted.unsqueeze(2) + lifted.unsqueeze(1), seq, seq.transpose(1, 2), alpha=-2.0)


def _as_int16(distances: torch.Tensor) -> torch.Tensor:
    return distances.clamp(max=UNREACHABLE).to(torch.int16)


def tree_distances(parent: torch.Tensor, size: int | None = None) -> torch.Tensor:
    """(B, T, T) int16: hops between pieces i and j; `UNREACHABLE` where either is padding.

    `size` (T) restricts the result to the first T nodes (the sequence); removed ancestors
    still carry the paths between kept pieces. d = depth_i + depth_j - 2 depth(lca), where
    depth(lca) + 1 is the number of common ancestors.
    """
    anc, depth = _ancestors(parent)
    return _as_int16(_distance_matrix(anc, depth, parent, size or parent.shape[1]))


# -- masks ------------------------------------------------------------------------------------------
#
# A mask is built as `clamp(limit_ij - x_ij, 0, 1)` in int16, where x is a distance and
# limit_ij = row_i + col_j folds the rules for special tokens and padding into per-piece offsets
# (B, T): a few large operations instead of one per rule. No int16 sum may overflow: against tree
# distances (UNREACHABLE at padding) offsets stay >= 0; NEVER is only used against word gaps.
# Real distances and gaps stay below ALWAYS for any sequence under 5,000 pieces, and NEVER outweighs
# ALWAYS plus any window under 1,000 words.

ALWAYS = 10_000  # an offset that makes a row or column visible whatever the distance
NEVER = -11_000  # an offset that hides a row or column whatever the other offset


def _within(x: torch.Tensor, row: torch.Tensor, col: torch.Tensor) -> torch.Tensor:
    """uint8 0/1 of `x[b, i, j] < row[b, i] + col[b, j]`, for int16 x, row and col."""
    limit = row.unsqueeze(2) + col.unsqueeze(1)
    return limit.sub_(x).clamp_(0, 1).to(torch.uint8)


def _with_self(mask: torch.Tensor) -> torch.Tensor:
    """Every row sees itself (so a padded row is never empty), as bool."""
    return mask.bitwise_or_(_eye(mask.shape[-1], mask.device)).view(torch.bool)


def gat_mask(distances: torch.Tensor, delta: int) -> torch.Tensor:
    """GAT attention (Ahmad et al. eq. 3): j visible from i iff tree distance <= delta.

    Padding is unreachable from real pieces, so padded keys drop out by distance alone.
    """
    if delta < 1:
        raise ValueError(f"delta must be >= 1, got {delta}")
    return _with_self((delta + 1 - distances).clamp_(0, 1).to(torch.uint8))


def _word_structure(word_index: torch.Tensor, segment_id: torch.Tensor):
    """Per piece: its word's first piece; the first piece of the previous and of the next word in
    its segment (its own word's first piece where there is none); whether it continues the
    previous piece's word; a word number that jumps between segments. Specials and pieces of no
    word count as one-piece words."""
    b, t = word_index.shape
    pos = _positions(t, word_index.device).expand(b, t)
    # A number per word, unique in the input: >= 0 for words, a distinct value <= -2 for each
    # lone piece, so that no lone piece is ever "the word before" or "after" another.
    word = torch.where(word_index >= 0, word_index + segment_id * (t + 2), -2 - pos)
    later = torch.zeros_like(word_index, dtype=torch.bool)
    later[:, 1:] = word[:, 1:] == word[:, :-1]
    first = torch.where(later, 0, pos).cummax(dim=1).values  # the first piece of each piece's word
    continued = torch.cat([later[:, 1:], torch.zeros_like(later[:, :1])], dim=1)
    after = torch.where(continued, t, pos).flip(1).cummin(dim=1).values.flip(1).add_(1).clamp_(max=t - 1)
    before = first.gather(1, (first - 1).clamp_(min=0))  # the first piece of the word before
    prev = torch.where(word.gather(1, before) == word - 1, before, first)
    nxt = torch.where(word.gather(1, after) == word + 1, after, first)
    number = torch.cumsum(~later, dim=1, dtype=torch.int16) + segment_id.to(torch.int16) * (t + 1)
    return later, prev, first, nxt, number


def _rows(matrix: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """matrix[b, rows[b, i], :] for every b and i (rows (B, R)): one flat index_select, (B, R, T)."""
    b, t, _ = matrix.shape
    flat = (rows + _positions(b, rows.device).unsqueeze(1) * t).view(-1)
    return matrix.reshape(b * t, -1).index_select(0, flat).view(b, rows.shape[1], -1)


def _offsets(limit: torch.Tensor | int, visible: torch.Tensor, padding: torch.Tensor | None = None
             ) -> torch.Tensor:
    """int16 (B, T) offsets for `_within`: `limit`, ALWAYS where `visible`, NEVER where `padding`."""
    offset = torch.where(visible, ALWAYS, limit)
    return (offset if padding is None else offset.masked_fill_(padding, NEVER)).to(torch.int16)


def sla_mask(distances: torch.Tensor, word_index: torch.Tensor, segment_id: torch.Tensor,
             upos: torch.Tensor, m: int, punct_visible: bool = False, _words=None) -> torch.Tensor:
    """Syntax-aware local attention mask (Li et al. 2021, eq. 2-3), at word level.

    Word j is visible from word i iff min over k in {i-1, i, i+1} of D(k, j) <= m, with i-1 and
    i+1 the linear neighbours of i in its segment. A word's pieces share its row and column;
    `[CLS]`/`[SEP]` rows and columns are always visible, and with `punct_visible` so are
    punctuation columns. Padded rows see only themselves.

    The rows k are first pieces, and a word's later pieces are leaves under its first piece, so
    D(k, first(j)) = D(k, j) - [j is a later piece]: one threshold per column, no column gather.
    """
    later, prev, first, nxt, _ = _words if _words is not None else _word_structure(word_index, segment_id)
    special = upos == UPOS_SPECIAL_ID
    always = special | (upos == PUNCT_UPOS_ID) if punct_visible else special
    col = _offsets(later + (m + 1), always)  # padding needs no offset: its distance is UNREACHABLE
    near = _within(distances, _offsets(0, special), col)  # (first-piece row k, column j): D(k, first(j)) <= m
    t = near.shape[1]
    own, before, after = _rows(near, torch.cat([first, prev, nxt], dim=1)).split(t, dim=1)
    return _with_self(own.bitwise_or_(before).bitwise_or_(after))


def wla_mask(word_index: torch.Tensor, segment_id: torch.Tensor, upos: torch.Tensor, k: int,
             _words=None) -> torch.Tensor:
    """Window local attention (the SLA paper's baseline): |word(i) - word(j)| <= k in a segment.

    Word level, shared by a word's pieces; `[CLS]`/`[SEP]` rows and columns always visible; padded
    rows see only themselves.
    """
    number = (_words if _words is not None else _word_structure(word_index, segment_id))[4]
    special = upos == UPOS_SPECIAL_ID
    gap = (number.unsqueeze(2) - number.unsqueeze(1)).abs_()
    padding = upos == PAD_ID
    return _with_self(_within(gap, _offsets(0, special, padding), _offsets(k + 1, special, padding)))


def sdoi_mask(ancestors: torch.Tensor, upos: torch.Tensor) -> torch.Tensor:
    """SG-Net's syntactic dependency of interest: each piece attends to its ancestors and itself.

    `ancestors` is `ancestor_matrix(...)` restricted to the sequence, (B, T, T). Special tokens
    attend to themselves only. Padding is nobody's ancestor, so padded keys never appear.
    """
    ordinary = (upos != UPOS_SPECIAL_ID).to(torch.uint8).unsqueeze(2)
    return _with_self(ancestors.view(torch.uint8) & ordinary)


def _seprem(distances: torch.Tensor) -> torch.Tensor:
    inv = distances.reciprocal()  # inf (padding) -> 0; the diagonal's 0 -> inf, zeroed next
    inv.diagonal(dim1=1, dim2=2).zero_()
    return inv.div_(inv.sum(-1, keepdim=True).clamp_(min=1e-12))


def seprem_weights(distances: torch.Tensor) -> torch.Tensor:
    """SEPREM's normalised inverse distance, (B, T, T) float (Xu et al. 2021).

    D~_ij = (1 / D_ij) / sum_z (1 / D_iz) over the z reachable from i (z != i); 0 on the diagonal
    and for padding. A row with nothing reachable (padding) is all zeros. `distances` are the
    int16 distances of `tree_distances`.
    """
    return _seprem(distances.to(torch.float32).masked_fill_(distances >= UNREACHABLE, torch.inf))


# -- edge direction -----------------------------------------------------------------------------------

FURTHER, SELF, HEAD, DEPENDENT = range(4)  # codes of `edge_relations`
EDGE_RELATIONS = 4


def edge_relations(parent: torch.Tensor, size: int | None = None) -> torch.Tensor:
    """(B, T, T) long: what piece j is to piece i: `SELF`, `HEAD` (j is i's parent), `DEPENDENT`
    (i is j's parent) or `FURTHER` (anything else, padding included).

    A tree mask alone is symmetric: it cannot tell a piece's head from its dependents, which a
    model needs to build depth-aware (directed) representations.
    """
    t = size or parent.shape[1]
    seq = parent[:, :t]
    pos = _positions(t, parent.device)
    head = (seq.unsqueeze(2) == pos).to(torch.uint8)  # [b, i, j]: parent(i) == j
    relations = head * HEAD + head.transpose(1, 2) * DEPENDENT + _eye(t, parent.device) * SELF
    return relations.long()


class TreeTensors:
    """All tree tensors of one batch, computed once on the batch's device and cached.

    >>> tt = TreeTensors(batch["tree_parent"], batch["tree_upos"], batch["tree_word"], batch["tree_segment"])
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
    def _float_distances(self) -> torch.Tensor:
        """(B, T, T) float32, +inf at padding."""
        anc, depth = self._anc_depth
        return _distance_matrix(anc, depth, self.parent, self.size)

    @cached_property
    def distances(self) -> torch.Tensor:
        """(B, T, T) int16, see `tree_distances`."""
        return _as_int16(self._float_distances)

    @cached_property
    def _words(self):
        return _word_structure(self.word_index, self.segment_id)

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
        return _seprem(self._float_distances)

    @cached_property
    def edge_relations(self) -> torch.Tensor:
        """(B, T, T) long, see `edge_relations`."""
        return edge_relations(self.parent, self.size)
