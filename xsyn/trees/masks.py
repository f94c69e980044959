"""The attention masks (and SEPREM's weights) of the syntax variants, from a batch's tree distances and
per-piece fields (`xsyn.trees.tensors` describes the inputs; `TreeTensors` caches what they share).

Every mask is (B, T, T) bool with True = may attend, and every row keeps at least itself, so a
softmax over a masked row never sees only -inf (no NaN from padding).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import torch
import torch.nn.functional as F

from xsyn.syntax.vocab import PAD_ID, PUNCT_UPOS_ID, UPOS_SPECIAL_ID
from xsyn.trees.distances import UNREACHABLE, as_bool, as_uint8, eye, kernel_applies, positions, tree_kernel

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


def _with_self(mask: torch.Tensor) -> torch.Tensor:
    """Every row sees itself (so a padded row is never empty), as bool."""
    return as_bool(mask.bitwise_or_(eye(mask.shape[-1], mask.device)))


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
    if cpu_kernel and kernel_applies(word_index):
        return _kernel_words(word_index)
    b, t = word_index.shape
    device = word_index.device
    real = word_index >= 0
    later = F.pad((word_index[:, 1:] == word_index[:, :-1]) & real[:, 1:], (1, 0))
    ordinal = (~later).cumsum(1)
    # first_piece[b, w]: where word w (1-based) begins; later pieces write to the unread column t + 1.
    first_piece = torch.zeros(b, t + 2, dtype=torch.long, device=device)
    first_piece.scatter_(1, ordinal.masked_fill(later, t + 1), positions(t, device).expand(b, t))
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
    tree_kernel.word_structure(word_index.data_ptr(), b, t, *(x.data_ptr() for x in words))
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
    flat = (rows + positions(b, rows.device).unsqueeze(1) * t).view(-1)
    return matrix.reshape(b * t, -1).index_select(0, flat).view(b, rows.shape[1], -1)


def _special(upos: torch.Tensor) -> torch.Tensor:
    return upos == UPOS_SPECIAL_ID


def _special_offsets(special: torch.Tensor) -> torch.Tensor:
    """int16 (B, T): ALWAYS at `[CLS]`/`[SEP]`, 0 elsewhere."""
    return special.to(torch.int16) * ALWAYS


def sla_mask(distances: torch.Tensor, word_index: torch.Tensor, upos: torch.Tensor, m: int,
             punct_visible: bool = False, _shared=None, sentences: torch.Tensor | None = None) -> torch.Tensor:
    """Syntax-aware local attention mask (Li et al. 2021, eq. 2-3), (B, T, T) bool, at word level,
    from the (B, T, T) `tree_distances` and the (B, T) `word_index` and `upos`.

    Word j is visible from word i iff min over k in {i-1, i, i+1} of D(k, j) <= m, with i-1 and
    i+1 the linear neighbours of i in its segment (among the words that own pieces: "did" and "."
    are neighbours in "didn't ."). A word's pieces share its row and column;
    `[CLS]`/`[SEP]` rows and columns are always visible, and with `punct_visible` so are
    punctuation columns. Padded rows see only themselves.

    The rows k are first pieces, and a word's later pieces are leaves under its first piece, so
    D(k, first(j)) = D(k, j) - [j is a later piece]: one threshold per column, no column gather.

    `sentences` (B, T), where given (`sentence_roots`): pieces of different sentences are never local through
    the tree, as in Li et al.'s code, whose graph leaves [CLS] unconnected (linear neighbours still count).
    """
    words, special, row = _shared or word_inputs(word_index, upos)
    always = special | (upos == PUNCT_UPOS_ID) if punct_visible else special
    # Padding needs no offset: its distance is UNREACHABLE. Every real distance is below ALWAYS - 1,
    # so a larger m changes nothing; capping it keeps the column offsets within int16.
    col = (words.later + (min(m, ALWAYS - 2) + 1)).masked_fill_(always, ALWAYS).to(torch.int16)
    near = _within(distances, row, col)  # (first-piece row k, column j): D(k, first(j)) <= m
    if sentences is not None:  # not through the tree across sentences: only where column j is always visible
        apart = (sentences.unsqueeze(2) != sentences.unsqueeze(1)) & ~special.unsqueeze(2) & ~always.unsqueeze(1)
        near.masked_fill_(apart, 0)
    own, before, after = _rows(near, words.neighbours).split(near.shape[1], dim=1)
    return _with_self(own.bitwise_or_(before).bitwise_or_(after))


def word_inputs(word_index: torch.Tensor, upos: torch.Tensor, cpu_kernel: bool = True):
    special = _special(upos)
    return _word_structure(word_index, cpu_kernel), special, _special_offsets(special)


def wla_mask(word_index: torch.Tensor, segment_id: torch.Tensor, upos: torch.Tensor, k: int,
             _shared=None) -> torch.Tensor:
    """Window local attention (the SLA paper's baseline), (B, T, T) bool from the (B, T) fields:
    |word(i) - word(j)| <= k in a segment.

    Word level, shared by a word's pieces; `[CLS]`/`[SEP]` rows and columns always visible; padded
    rows see only themselves.
    """
    words, _, special_offsets = _shared or word_inputs(word_index, upos)
    t = upos.shape[1]
    k = min(k, t)  # no two words of a segment are t apart: a larger window changes nothing
    # Segments follow each other, so a jump of k + 1 per segment puts words of different segments
    # more than k apart. int16 holds every gap plus NEVER twice while t (k + 2) <= 10,000.
    dtype = torch.int16 if t * (k + 2) <= 10_000 else torch.int32
    number = (words.ordinal + segment_id * (k + 1)).to(dtype)
    gap = (number.unsqueeze(2) - number.unsqueeze(1)).abs_()
    row = special_offsets.to(dtype).masked_fill_(upos == PAD_ID, NEVER)
    return _with_self(_within(gap, row, row + (k + 1)))


def sdoi_mask(ancestors: torch.Tensor, upos: torch.Tensor, cls_visible: bool = True,
              heads: torch.Tensor | None = None, empty_rows: str = "self") -> torch.Tensor:
    """SG-Net's syntactic dependency of interest, (B, T, T) bool: each piece attends to its
    ancestors and itself.

    `ancestors` is `ancestor_matrix(...)` restricted to the sequence, (B, T, T). Special tokens
    attend to themselves only. Padding is nobody's ancestor, so padded keys never appear.

    SG-Net's code (`sdoi` settings): `cls_visible=False` hides the [CLS] column; `heads` (B, T) bool, where
    given, keeps the diagonal only where a piece heads another; a row left empty then attends to itself
    (`empty_rows="self"`) or to every position (`"all"`).
    """
    ordinary = (~_special(upos)).to(torch.uint8).unsqueeze(2)
    if cls_visible and heads is None and empty_rows == "self":
        return _with_self(as_uint8(ancestors) & ordinary)
    mask = as_uint8(ancestors) & ordinary
    if not cls_visible:  # of the specials only [CLS] is anybody's ancestor
        mask &= ordinary.transpose(1, 2)
    if heads is not None:
        mask &= (1 - eye(mask.shape[-1], mask.device) * (~heads).to(torch.uint8).unsqueeze(1)).to(torch.uint8)
    empty = mask.amax(-1, keepdim=True) == 0
    if empty_rows == "all":
        return as_bool(mask.bitwise_or_(empty.to(torch.uint8)))
    return as_bool(mask.bitwise_or_(eye(mask.shape[-1], mask.device) & empty.to(torch.uint8)))


def sentence_roots(parent: torch.Tensor, size: int) -> torch.Tensor:
    """(B, T) long: the root of each piece's sentence (the ancestor whose parent is [CLS]: a sentence root, or a
    piece hung from [CLS]), by doubling over every tree node (a cut sentence root is carried after the sequence);
    [CLS] and padding are their own."""
    n = parent.shape[1]
    up = torch.where(parent > 0, parent, positions(n, parent.device).expand_as(parent))
    for _ in range(n.bit_length()):
        up = up.gather(1, up)
    return up[:, :size]


def heads_of_pieces(parent: torch.Tensor, size: int) -> torch.Tensor:
    """(B, T) bool: piece i heads another tree node (one of the sequence, or one carried after it: a cut
    dependent, `carry_cut_dependents`)."""
    b, n = parent.shape
    counts = torch.zeros(b, n + 1, dtype=torch.int32, device=parent.device)
    counts.scatter_add_(1, parent.clamp(min=-1) + 1, torch.ones_like(parent, dtype=torch.int32))
    return counts[:, 1:size + 1] > 0


def inverse_distance_weights(distances: torch.Tensor) -> torch.Tensor:
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
    return inverse_distance_weights(distances.to(torch.float32).masked_fill_(distances >= UNREACHABLE, torch.inf))
