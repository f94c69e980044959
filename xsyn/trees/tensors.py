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

import torch

from xsyn.trees.distances import (
    UNREACHABLE,
    ancestor_matrix,
    ancestors_of,
    as_bool,
    as_int16,
    common_ancestors,
    cpu_kernel_built,
    distance_matrix,
    eye,
    kernel_applies,
    kernel_core,
    positions,
    tree_depth,
    tree_distances,
)
from xsyn.trees.masks import (
    gat_mask,
    heads_of_pieces,
    inverse_distance_weights,
    sdoi_mask,
    sentence_roots,
    sep_weights,
    sla_mask,
    wla_mask,
    word_inputs,
)
from xsyn.trees.wordpiece import PAD, ROOT

__all__ = [
    "ROOT", "PAD", "UNREACHABLE", "TreeTensors", "cpu_kernel_built", "tree_depth", "ancestor_matrix", "tree_distances",
    "gat_mask", "sla_mask", "wla_mask", "sdoi_mask", "sep_weights", "edge_relations",
    "FURTHER", "SELF", "HEAD", "DEPENDENT", "EDGE_RELATIONS",
]



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
    pos = positions(t, parent.device)
    head = (seq.unsqueeze(2) == pos).to(torch.uint8)  # [b, i, j]: parent(i) == j
    relations = head * HEAD + head.transpose(1, 2) * DEPENDENT + eye(t, parent.device) * SELF
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

    def __init__(self, parent: torch.Tensor | None, upos: torch.Tensor, word_index: torch.Tensor,
                 segment_id: torch.Tensor, cpu_kernel: bool = True, host_check: bool = True):
        self.parent, self.upos, self.word_index, self.segment_id = parent, upos, word_index, segment_id
        self.size = upos.shape[1]
        self.cpu_kernel, self.host_check = cpu_kernel, host_check
        kernel = cpu_kernel and parent is not None and kernel_applies(parent)  # wla's batches carry no parents
        self._core = kernel_core(parent, self.size) if kernel else None

    @classmethod
    def from_batch(cls, batch: Mapping[str, torch.Tensor], cpu_kernel: bool = True) -> TreeTensors:
        """The tree tensors of a collated batch (word and segment fields are optional: GAT and SDOI
        read only parents and UPOS)."""
        return cls(batch["tree_parent"], batch["tree_upos"], batch.get("tree_word"), batch.get("tree_segment"),
                   cpu_kernel)

    @_once
    def _anc(self) -> torch.Tensor:
        return ancestors_of(self.parent, self.host_check)

    @_once
    def _common(self) -> torch.Tensor:
        return common_ancestors(self._anc)

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
        return as_bool(anc)

    @_once
    def _float_distances(self) -> torch.Tensor:
        """(B, T, T) float32, +inf at padding."""
        if self._core:
            return self._core.float_distances
        return distance_matrix(self._common, self.parent, self.size)

    @_once
    def distances(self) -> torch.Tensor:
        """(B, T, T) int16, see `tree_distances`."""
        return self._core.distances if self._core else as_int16(self._float_distances)

    @_once
    def _word_inputs(self):
        return word_inputs(self.word_index, self.upos, self.cpu_kernel)

    def gat_mask(self, delta: int) -> torch.Tensor:
        return gat_mask(self.distances, delta)

    def sla_mask(self, m: int, punct_visible: bool = False, across_sentences: bool = True) -> torch.Tensor:
        """See `sla_mask`; `across_sentences=False`: never local through the tree across sentences (Li et al.'s
        code)."""
        sentences = None if across_sentences else sentence_roots(self.parent, self.size)
        return sla_mask(self.distances, self.word_index, self.upos, m, punct_visible,
                        _shared=self._word_inputs, sentences=sentences)

    def wla_mask(self, k: int) -> torch.Tensor:
        return wla_mask(self.word_index, self.segment_id, self.upos, k, _shared=self._word_inputs)

    def sdoi_mask(self, cls_visible: bool = True, heads_only: bool = False, empty_rows: str = "self") -> torch.Tensor:
        """See `sdoi_mask`; `heads_only`: only a piece that heads another sees itself (SG-Net's run_squad2.py)."""
        heads = heads_of_pieces(self.parent, self.size) if heads_only else None
        return sdoi_mask(self.ancestors, self.upos, cls_visible, heads, empty_rows)

    def sep_weights(self) -> torch.Tensor:
        return inverse_distance_weights(self._float_distances)

    @_once
    def edge_relations(self) -> torch.Tensor:
        """(B, T, T) long, see `edge_relations`."""
        return edge_relations(self.parent, self.size)
