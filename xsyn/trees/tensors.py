"""Batched tree tensors, derived on the device from the O(n) fields of a padded batch.

Inputs (as collated by `xsyn.trees.batch`):
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

On CPU, ancestors, depth and distances come from a small C kernel (`xsyn/trees/_kernel.c`, built
at install) that walks each sentence over its own pieces only: in a batch of mixed lengths most of
the padded (B, N, N) block is padding, and the torch ops below compute all of it. The torch ops
run on every other device, and on CPU where the kernel was not built; both give identical tensors.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import NamedTuple

import torch
import torch.nn.functional as F

from xsyn.syntax.vocab import PAD_ID, PUNCT_UPOS_ID, UPOS_SPECIAL_ID
from xsyn.trees.wordpiece import PAD, ROOT

try:
    from xsyn.trees import _kernel as _tree_kernel
except ImportError:  # installed without a C compiler: the torch ops run on CPU too
    _tree_kernel = None

UNREACHABLE = torch.iinfo(torch.int16).max  # the distance of any pair that involves padding

__all__ = [
    "ROOT", "PAD", "UNREACHABLE", "TreeTensors", "cpu_kernel_built", "tree_depth", "ancestor_matrix", "tree_distances",
    "gat_mask", "sla_mask", "wla_mask", "sdoi_mask", "sep_weights", "edge_relations",
    "FURTHER", "SELF", "HEAD", "DEPENDENT", "EDGE_RELATIONS",
]


@lru_cache(maxsize=64)
def _cached_eye(size: int, device: torch.device) -> torch.Tensor:
    return torch.eye(size, dtype=torch.uint8, device=device)


@lru_cache(maxsize=64)
def _cached_positions(size: int, device: torch.device) -> torch.Tensor:
    return torch.arange(size, device=device)


def _eye(size: int, device: torch.device) -> torch.Tensor:
    if torch.compiler.is_compiling():  # a constant of the graph; dynamo cannot trace into lru_cache
        return torch.eye(size, dtype=torch.uint8, device=device)
    return _cached_eye(size, device)


def _positions(size: int, device: torch.device) -> torch.Tensor:
    if torch.compiler.is_compiling():
        return torch.arange(size, device=device)
    return _cached_positions(size, device)


# -- ancestors, depth, distances ------------------------------------------------------------------


def _ancestors(parent: torch.Tensor, host_check: bool = True) -> torch.Tensor:
    """Ancestor-or-self matrix over all N nodes, (B, N, N) uint8 0/1.

    By doubling on the rows: while `jump` is every node's 2^k-th ancestor (roots and padding
    point to themselves) and the rows hold the ancestors at distances 0 .. 2^k - 1, or-ing in the
    row of `jump` adds those at 2^k .. 2^(k+1) - 1. After log2(N) + 1 steps every chain of parents
    has reached its end; parents that never reach a root (a cycle) are refused.

    On CPU the loop stops as soon as every `jump` is a root. Elsewhere it runs its fixed count
    (further steps change nothing): asking the device whether to stop would wait for it at every
    step, and the one check that needs the host (are the parents valid?) is made once, at the end.
    Parents out of range are replaced by self-loops for the computation, so no index ever leaves
    its row, and refused at that check: on CPU, or with `host_check`, a `ValueError` (which waits for
    the device); otherwise a device-side assert, which keeps the model's step free of host waits (its
    batches were checked where they were built, `xsyn.trees.batch.collate_trees`).
    """
    b, n = parent.shape
    in_range = (parent >= PAD) & (parent < n)
    flat = _positions(b * n, parent.device).view(b, n)  # node i of sentence s is row s * n + i
    jump = torch.where((parent >= 0) & in_range, parent + flat[:, :1], flat).view(-1)
    anc = _eye(n, parent.device).expand(b, n, n).clone()
    rows = anc.view(b * n, n)
    on_host = parent.device.type == "cpu" and not torch.compiler.is_compiling()
    for _ in range(n.bit_length() + 1):  # 2^steps > n: every chain of parents has reached its end
        rows |= rows.index_select(0, jump)
        farther = jump.index_select(0, jump)
        if on_host and torch.equal(farther, jump):
            break
        jump = farther
    reaches_root = parent.view(-1).index_select(0, jump).view(b, n) == ROOT
    valid = torch.stack([in_range.all(), (reaches_root | (parent == PAD)).all()])
    if not (on_host or host_check):
        torch._assert_async(valid.all(), "tree_parent: a parent out of range or on a cycle. " + _PARENTS)
        return anc
    valid = valid.tolist()  # the one wait
    if not valid[0]:
        raise ValueError(f"tree_parent holds a parent outside [{PAD}, {n}): " + _PARENTS)
    if not valid[1]:
        raise ValueError("tree_parent: some node never reaches a root through its parents. " + _PARENTS)
    return anc


_PARENTS = ("a parent must be ROOT (-1) or a node of the same row that is not padding, "
            "and no node may lie on a cycle")


class _Core(NamedTuple):
    ancestors: torch.Tensor  # (B, T, T) uint8 0/1
    distances: torch.Tensor  # (B, T, T) int16, UNREACHABLE at padding
    float_distances: torch.Tensor  # (B, T, T) float32, +inf at padding
    depth: torch.Tensor  # (B, T) long


def cpu_kernel_built() -> bool:
    """Whether the C kernel was built at install (else CPU uses the torch ops as well)."""
    return _tree_kernel is not None


def _kernel_applies(parent: torch.Tensor) -> bool:
    # the kernel keeps distances (< 2 N) in int16
    return _tree_kernel is not None and parent.device.type == "cpu" and parent.shape[1] < 16_000


def _kernel_core(parent: torch.Tensor, size: int) -> _Core:
    """Ancestors, distances (int16 and float) and depth of the first `size` nodes, from the CPU kernel."""
    return _Core(*_tree_core(parent, size))


# The kernel runs as a torch operator, so that `torch.compile` keeps it inside the step's one graph (its
# fake implementation gives the shapes) instead of breaking the graph around a call it cannot trace.
@torch.library.custom_op("xsyn::tree_core", mutates_args=(), device_types="cpu")
def _tree_core(parent: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    parent = parent.to(torch.int64).contiguous()
    b, n = parent.shape
    # device="cpu" whatever the default device: the kernel writes through these tensors' host pointers
    core = (*(torch.empty(b, size, size, dtype=dtype, device="cpu")
              for dtype in (torch.uint8, torch.int16, torch.float32)),
            torch.empty(b, size, dtype=torch.long, device="cpu"))
    row, node = _tree_kernel.tree_core(parent.data_ptr(), b, n, size, *(x.data_ptr() for x in core))
    if row >= 0:
        raise ValueError(f"tree_parent[{row}, {node}] = {int(parent[row, node])}: " + _PARENTS)
    return core


@_tree_core.register_fake
def _(parent: torch.Tensor, size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    b = parent.shape[0]
    return (*(parent.new_empty(b, size, size, dtype=dtype) for dtype in (torch.uint8, torch.int16, torch.float32)),
            parent.new_empty(b, size, dtype=torch.long))


def tree_depth(parent: torch.Tensor) -> torch.Tensor:
    """Depth of every node, (B, N) long: 0 at `[CLS]` (and at padding), 1 at sentence roots."""
    if _kernel_applies(parent):
        return _kernel_core(parent, parent.shape[1]).depth
    return _ancestors(parent).sum(-1) - 1


def ancestor_matrix(parent: torch.Tensor) -> torch.Tensor:
    """(B, N, N) bool: `[b, i, j]` is True iff node j is node i or one of its ancestors.

    Computed from the parent pointers (not from subtree spans), so it is right for
    non-projective trees too.
    """
    if _kernel_applies(parent):
        return _as_bool(_kernel_core(parent, parent.shape[1]).ancestors)
    return _as_bool(_ancestors(parent))


def _common_ancestors(anc: torch.Tensor) -> torch.Tensor:
    """(B, N, N) float32: how many ancestors-or-self nodes i and j share, depth(lca) + 1, in one
    batched matmul; its diagonal is depth + 1. (The right operand is made contiguous: a
    transposed one makes the matmul slower than the copy.) Exact for any N < 2^24."""
    a = anc.to(torch.float32)
    if not torch.amp.is_autocast_available(a.device.type):
        return torch.bmm(a, a.transpose(1, 2).contiguous())
    # Under mixed precision (bf16 training) autocast would run this product in bfloat16, which holds
    # whole numbers exactly only up to 256: deep trees would get wrong distances. Counts stay float32.
    with torch.autocast(a.device.type, enabled=False):
        return torch.bmm(a, a.transpose(1, 2).contiguous())


def _distance_matrix(common: torch.Tensor, parent: torch.Tensor, size: int) -> torch.Tensor:
    """(B, T, T) float32 distances, +inf where either piece is padding:
    (depth_i + 1) + (depth_j + 1) - 2 * common ancestors."""
    lifted = common.diagonal(dim1=1, dim2=2)[:, :size].masked_fill(parent[:, :size] == PAD, torch.inf)
    return (lifted.unsqueeze(2) + lifted.unsqueeze(1)).add_(common[:, :size, :size], alpha=-2.0)


def _as_int16(distances: torch.Tensor) -> torch.Tensor:
    return distances.clamp(max=UNREACHABLE).to(torch.int16)


def tree_distances(parent: torch.Tensor, size: int | None = None) -> torch.Tensor:
    """(B, T, T) int16: hops between pieces i and j; `UNREACHABLE` where either is padding.

    `size` (T) restricts the result to the first T nodes (the sequence); removed ancestors
    still carry the paths between kept pieces. d = depth_i + depth_j - 2 depth(lca), where
    depth(lca) + 1 is the number of common ancestors.
    """
    size = size or parent.shape[1]
    if _kernel_applies(parent):
        return _kernel_core(parent, size).distances
    return _as_int16(_distance_matrix(_common_ancestors(_ancestors(parent)), parent, size))


# -- masks ------------------------------------------------------------------------------------------
#
# A mask is built as `clamp(limit_ij - x_ij, 0, 1)` in int16, where x is a distance and
# limit_ij = row_i + col_j folds the rules for special tokens and padding into per-piece offsets
# (B, T): a few large operations instead of one per rule. No int16 sum may overflow: against tree
# distances (UNREACHABLE at padding) offsets stay >= 0; NEVER is only used against word gaps, and
# `wla_mask` moves to int32 where a gap could come near the int16 range. Real distances and gaps
# stay below ALWAYS for any sequence under 5,000 pieces, and NEVER outweighs ALWAYS plus any window
# under 1,000 words.

ALWAYS = 10_000  # an offset that makes a row or column visible whatever the distance
NEVER = -11_000  # an offset that hides a row or column whatever the other offset


def _within(x: torch.Tensor, row: torch.Tensor, col: torch.Tensor) -> torch.Tensor:
    """uint8 0/1 of `x[b, i, j] < row[b, i] + col[b, j]`, for x, row and col of one integer dtype."""
    limit = row.unsqueeze(2) + col.unsqueeze(1)
    return limit.sub_(x).clamp_(0, 1).to(torch.uint8)


def _as_bool(mask: torch.Tensor) -> torch.Tensor:
    """A uint8 0/1 tensor as bool: a view in eager (no copy); a cast under torch.compile, where it fuses into the
    kernel that makes the mask, and where inductor (torch 2.11, CUDA) cannot lower a uint8 <-> bool view ("torch.bool
    is not supported by torch.iinfo": gat, sla, wla and sdoi failed to compile on an H100)."""
    return mask.to(torch.bool) if torch.compiler.is_compiling() else mask.view(torch.bool)


def _as_uint8(mask: torch.Tensor) -> torch.Tensor:
    return mask.to(torch.uint8) if torch.compiler.is_compiling() else mask.view(torch.uint8)


def _with_self(mask: torch.Tensor) -> torch.Tensor:
    """Every row sees itself (so a padded row is never empty), as bool."""
    return _as_bool(mask.bitwise_or_(_eye(mask.shape[-1], mask.device)))


def gat_mask(distances: torch.Tensor, delta: int) -> torch.Tensor:
    """GAT attention (Ahmad et al. eq. 3), (B, T, T) bool from the (B, T, T) `tree_distances`: j
    visible from i iff tree distance <= delta.

    Padding is unreachable from real pieces, so padded keys drop out by distance alone.
    """
    if delta < 1:
        raise ValueError(f"delta must be >= 1, got {delta}")
    return _with_self((delta + 1 - distances).clamp_(0, 1).to(torch.uint8))


@lru_cache(maxsize=64)
def _neighbour_steps(size: int, device: torch.device) -> torch.Tensor:
    return torch.tensor([0, -1, 1], device=device).repeat_interleave(size)


class _Words(NamedTuple):
    later: torch.Tensor  # (B, T) bool: the piece continues the previous piece's word
    neighbours: torch.Tensor  # (B, 3T) long: first pieces of its word | the word before | the word after
    ordinal: torch.Tensor  # (B, T) long: 1, 2, ...: the piece's word, counted over the whole input


def _word_structure(word_index: torch.Tensor, cpu_kernel: bool = True) -> _Words:
    """Where each piece's word, and the words before and after it in its segment, begin.

    Words are counted as they appear in the pieces: syntactic words that own no piece (the second
    word of English "didn't", of German "zum") are skipped. Specials and pieces of no word count as
    one-piece words that are nobody's neighbour; a word with no neighbour on one side gets its own
    first piece there. Two consecutive counted words that are both real (word index >= 0) are
    neighbours in one segment, as a `[SEP]` (no word) stands between any two segments.
    """
    if cpu_kernel and _kernel_applies(word_index):
        return _kernel_words(word_index)
    b, t = word_index.shape
    device = word_index.device
    real = word_index >= 0
    later = F.pad((word_index[:, 1:] == word_index[:, :-1]) & real[:, 1:], (1, 0))
    ordinal = (~later).cumsum(1)
    # first_piece[b, w]: where word w (1-based) begins; later pieces write to the unread column t + 1.
    first_piece = torch.zeros(b, t + 2, dtype=torch.long, device=device)
    first_piece.scatter_(1, ordinal.masked_fill(later, t + 1), _positions(t, device).expand(b, t))
    neighbours = first_piece.gather(1, _thrice(ordinal) + _neighbour_steps(t, device))
    is_neighbour = real.gather(1, neighbours) & _thrice(real)
    return _Words(later, torch.where(is_neighbour, neighbours, _thrice(neighbours[:, :t])), ordinal)


def _kernel_words(word_index: torch.Tensor) -> _Words:
    return _Words(*_word_structure_op(word_index))


@torch.library.custom_op("xsyn::word_structure", mutates_args=(), device_types="cpu")
def _word_structure_op(word_index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    word_index = word_index.to(torch.int64).contiguous()
    b, t = word_index.shape
    words = tuple(torch.empty(b, size, dtype=dtype, device="cpu")  # host pointers, as in `_tree_core`
                  for size, dtype in ((t, torch.bool), (3 * t, torch.long), (t, torch.long)))
    _tree_kernel.word_structure(word_index.data_ptr(), b, t, *(x.data_ptr() for x in words))
    return words


@_word_structure_op.register_fake
def _(word_index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    b, t = word_index.shape
    return tuple(word_index.new_empty(b, size, dtype=dtype)
                 for size, dtype in ((t, torch.bool), (3 * t, torch.long), (t, torch.long)))


def _thrice(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, x, x], dim=1)  # (`repeat` is several times slower on small tensors)


def _rows(matrix: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """matrix[b, rows[b, i], :] for every b and i (rows (B, R)): one flat index_select, (B, R, T)."""
    b, t, _ = matrix.shape
    flat = (rows + _positions(b, rows.device).unsqueeze(1) * t).view(-1)
    return matrix.reshape(b * t, -1).index_select(0, flat).view(b, rows.shape[1], -1)


def _special(upos: torch.Tensor) -> torch.Tensor:
    return upos == UPOS_SPECIAL_ID


def _special_offsets(special: torch.Tensor) -> torch.Tensor:
    """int16 (B, T): ALWAYS at `[CLS]`/`[SEP]`, 0 elsewhere."""
    return special.to(torch.int16) * ALWAYS


def sla_mask(distances: torch.Tensor, word_index: torch.Tensor, upos: torch.Tensor, m: int,
             punct_visible: bool = False, _shared=None) -> torch.Tensor:
    """Syntax-aware local attention mask (Li et al. 2021, eq. 2-3), (B, T, T) bool, at word level,
    from the (B, T, T) `tree_distances` and the (B, T) `word_index` and `upos`.

    Word j is visible from word i iff min over k in {i-1, i, i+1} of D(k, j) <= m, with i-1 and
    i+1 the linear neighbours of i in its segment (among the words that own pieces: "did" and "."
    are neighbours in "didn't ."). A word's pieces share its row and column;
    `[CLS]`/`[SEP]` rows and columns are always visible, and with `punct_visible` so are
    punctuation columns. Padded rows see only themselves.

    The rows k are first pieces, and a word's later pieces are leaves under its first piece, so
    D(k, first(j)) = D(k, j) - [j is a later piece]: one threshold per column, no column gather.
    """
    words, special, row = _shared or _word_inputs(word_index, upos)
    always = special | (upos == PUNCT_UPOS_ID) if punct_visible else special
    # Padding needs no offset: its distance is UNREACHABLE. Every real distance is below ALWAYS - 1,
    # so a larger m changes nothing; capping it keeps the column offsets within int16.
    col = (words.later + (min(m, ALWAYS - 2) + 1)).masked_fill_(always, ALWAYS).to(torch.int16)
    near = _within(distances, row, col)  # (first-piece row k, column j): D(k, first(j)) <= m
    own, before, after = _rows(near, words.neighbours).split(near.shape[1], dim=1)
    return _with_self(own.bitwise_or_(before).bitwise_or_(after))


def _word_inputs(word_index: torch.Tensor, upos: torch.Tensor, cpu_kernel: bool = True):
    special = _special(upos)
    return _word_structure(word_index, cpu_kernel), special, _special_offsets(special)


def wla_mask(word_index: torch.Tensor, segment_id: torch.Tensor, upos: torch.Tensor, k: int,
             _shared=None) -> torch.Tensor:
    """Window local attention (the SLA paper's baseline), (B, T, T) bool from the (B, T) fields:
    |word(i) - word(j)| <= k in a segment.

    Word level, shared by a word's pieces; `[CLS]`/`[SEP]` rows and columns always visible; padded
    rows see only themselves.
    """
    words, _, special_offsets = _shared or _word_inputs(word_index, upos)
    t = upos.shape[1]
    k = min(k, t)  # no two words of a segment are t apart: a larger window changes nothing
    # Segments follow each other, so a jump of k + 1 per segment puts words of different segments
    # more than k apart. int16 holds every gap plus NEVER twice while t (k + 2) <= 10,000.
    dtype = torch.int16 if t * (k + 2) <= 10_000 else torch.int32
    number = (words.ordinal + segment_id * (k + 1)).to(dtype)
    gap = (number.unsqueeze(2) - number.unsqueeze(1)).abs_()
    row = special_offsets.to(dtype).masked_fill_(upos == PAD_ID, NEVER)
    return _with_self(_within(gap, row, row + (k + 1)))


def sdoi_mask(ancestors: torch.Tensor, upos: torch.Tensor) -> torch.Tensor:
    """SG-Net's syntactic dependency of interest, (B, T, T) bool: each piece attends to its
    ancestors and itself.

    `ancestors` is `ancestor_matrix(...)` restricted to the sequence, (B, T, T). Special tokens
    attend to themselves only. Padding is nobody's ancestor, so padded keys never appear.
    """
    ordinary = (~_special(upos)).to(torch.uint8).unsqueeze(2)
    return _with_self(_as_uint8(ancestors) & ordinary)


def _sep_weights(distances: torch.Tensor) -> torch.Tensor:
    inv = distances.reciprocal()  # inf (padding) -> 0; the diagonal's 0 -> inf, zeroed next
    inv.diagonal(dim1=1, dim2=2).zero_()
    # Distances are symmetric, so column sums are the row sums (and summing down columns is faster).
    return inv.div_(inv.sum(1).clamp_(min=1e-12).unsqueeze(2))


def sep_weights(distances: torch.Tensor) -> torch.Tensor:
    """SEPREM's normalised inverse distance, (B, T, T) float (Xu et al. 2021).

    D~_ij = (1 / D_ij) / sum_z (1 / D_iz) over the z reachable from i (z != i); 0 on the diagonal
    and for padding. A row with nothing reachable (padding) is all zeros. `distances` are the
    int16 distances of `tree_distances`.
    """
    return _sep_weights(distances.to(torch.float32).masked_fill_(distances >= UNREACHABLE, torch.inf))


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


class _once:
    """`functools.cached_property` without its lock (Python 3.11's), which `torch.compile` cannot trace."""

    def __init__(self, compute):
        self.compute, self.__doc__ = compute, compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.compute(instance)
        return value


class TreeTensors:
    """All tree tensors of one batch, computed once on the batch's device and cached.

    >>> tt = TreeTensors.from_batch(batch)                    # a batch of xsyn.trees.batch.collate_trees
    >>> tt.distances.shape, tt.gat_mask(delta=2).shape        # (B, T, T) each

    `cpu_kernel=False` computes ancestors, depth and distances with torch ops on CPU too (for
    comparing the two; the tensors are identical). `host_check=False` checks the parents off CPU with a
    device-side assert rather than a `ValueError` that waits for the device (the model's step).
    """

    def __init__(self, parent: torch.Tensor, upos: torch.Tensor, word_index: torch.Tensor,
                 segment_id: torch.Tensor, cpu_kernel: bool = True, host_check: bool = True):
        self.parent, self.upos, self.word_index, self.segment_id = parent, upos, word_index, segment_id
        self.size = upos.shape[1]
        self.cpu_kernel, self.host_check = cpu_kernel, host_check
        self._core = _kernel_core(parent, self.size) if cpu_kernel and _kernel_applies(parent) else None

    @classmethod
    def from_batch(cls, batch: Mapping[str, torch.Tensor], cpu_kernel: bool = True) -> TreeTensors:
        """The tree tensors of a collated batch (word and segment fields are optional: GAT and SDOI
        read only parents and UPOS)."""
        return cls(batch["tree_parent"], batch["tree_upos"], batch.get("tree_word"), batch.get("tree_segment"),
                   cpu_kernel)

    @_once
    def _anc(self) -> torch.Tensor:
        return _ancestors(self.parent, self.host_check)

    @_once
    def _common(self) -> torch.Tensor:
        return _common_ancestors(self._anc)

    @_once
    def depth(self) -> torch.Tensor:
        """(B, T) long."""
        if self._core:
            return self._core.depth
        return self._common.diagonal(dim1=1, dim2=2)[:, : self.size].long() - 1

    @_once
    def ancestors(self) -> torch.Tensor:
        """(B, T, T) bool, see `ancestor_matrix`."""
        anc = self._core.ancestors if self._core else self._anc[:, : self.size, : self.size]
        return _as_bool(anc)

    @_once
    def _float_distances(self) -> torch.Tensor:
        """(B, T, T) float32, +inf at padding."""
        if self._core:
            return self._core.float_distances
        return _distance_matrix(self._common, self.parent, self.size)

    @_once
    def distances(self) -> torch.Tensor:
        """(B, T, T) int16, see `tree_distances`."""
        return self._core.distances if self._core else _as_int16(self._float_distances)

    @_once
    def _word_inputs(self):
        return _word_inputs(self.word_index, self.upos, self.cpu_kernel)

    def gat_mask(self, delta: int) -> torch.Tensor:
        return gat_mask(self.distances, delta)

    def sla_mask(self, m: int, punct_visible: bool = False) -> torch.Tensor:
        return sla_mask(self.distances, self.word_index, self.upos, m, punct_visible,
                        _shared=self._word_inputs)

    def wla_mask(self, k: int) -> torch.Tensor:
        return wla_mask(self.word_index, self.segment_id, self.upos, k, _shared=self._word_inputs)

    def sdoi_mask(self) -> torch.Tensor:
        return sdoi_mask(self.ancestors, self.upos)

    def sep_weights(self) -> torch.Tensor:
        return _sep_weights(self._float_distances)

    @_once
    def edge_relations(self) -> torch.Tensor:
        """(B, T, T) long, see `edge_relations`."""
        return edge_relations(self.parent, self.size)
