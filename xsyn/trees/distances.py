"""Ancestors, depth and tree distances of a padded batch's parents, on the device (`xsyn.trees.tensors`
describes the inputs), and the helpers the masks share.

On CPU they come from a small C kernel (`xsyn/trees/_kernel.c`, built at install) that walks each
sentence over its own pieces only; the torch ops run on every other device, and on CPU where the
kernel was not built; both give identical tensors.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import torch

from xsyn.trees.wordpiece import PAD, ROOT

try:
    from xsyn.trees import _kernel as tree_kernel
except ImportError:  # installed without a C compiler: the torch ops run on CPU too
    tree_kernel = None

UNREACHABLE = torch.iinfo(torch.int16).max  # the distance of any pair that involves padding


@lru_cache(maxsize=64)
def _cached_eye(size: int, device: torch.device) -> torch.Tensor:
    return torch.eye(size, dtype=torch.uint8, device=device)


@lru_cache(maxsize=64)
def _cached_positions(size: int, device: torch.device) -> torch.Tensor:
    return torch.arange(size, device=device)


def eye(size: int, device: torch.device) -> torch.Tensor:
    if torch.compiler.is_compiling():  # a constant of the graph; dynamo cannot trace into lru_cache
        return torch.eye(size, dtype=torch.uint8, device=device)
    return _cached_eye(size, device)


def positions(size: int, device: torch.device) -> torch.Tensor:
    if torch.compiler.is_compiling():
        return torch.arange(size, device=device)
    return _cached_positions(size, device)


def as_bool(mask: torch.Tensor) -> torch.Tensor:
    """A uint8 0/1 tensor as bool: a view in eager (no copy); a cast under torch.compile, where it fuses into the
    kernel that makes the mask, and where inductor (torch 2.11, CUDA) cannot lower a uint8 <-> bool view ("torch.bool
    is not supported by torch.iinfo": gat, sla, wla and sdoi failed to compile on an H100)."""
    return mask.to(torch.bool) if torch.compiler.is_compiling() else mask.view(torch.bool)


def as_uint8(mask: torch.Tensor) -> torch.Tensor:
    return mask.to(torch.uint8) if torch.compiler.is_compiling() else mask.view(torch.uint8)



# -- ancestors, depth, distances ------------------------------------------------------------------


def ancestors_of(parent: torch.Tensor, host_check: bool = True) -> torch.Tensor:
    """Ancestor-or-self matrix over all N nodes, (B, N, N) uint8 0/1.

    By doubling on the rows: while `jump` is every node's 2^k-th ancestor (roots and padding
    point to themselves) and the rows hold the ancestors at distances 0 .. 2^k - 1, or-ing in the
    row of `jump` adds those at 2^k .. 2^(k+1) - 1. After log2(N) + 1 steps every chain of parents
    has reached its end; parents that never reach a root (a cycle) are refused: on CPU, or with
    `host_check`, with a `ValueError`; otherwise with a device-side assert.
    """
    b, n = parent.shape
    in_range = (parent >= PAD) & (parent < n)
    flat = positions(b * n, parent.device).view(b, n)  # node i of sentence s is row s * n + i
    # parents out of range become self-loops here, so no index leaves its row; they are refused at the check below
    jump = torch.where((parent >= 0) & in_range, parent + flat[:, :1], flat).view(-1)
    anc = eye(n, parent.device).expand(b, n, n).clone()
    rows = anc.view(b * n, n)
    on_host = parent.device.type == "cpu" and not torch.compiler.is_compiling()
    for _ in range(n.bit_length() + 1):  # 2^steps > n: every chain of parents has reached its end
        rows |= rows.index_select(0, jump)
        farther = jump.index_select(0, jump)
        # on CPU, stop once every `jump` is a root; elsewhere run the fixed count (further steps change nothing):
        # asking the device whether to stop would wait for it at every step
        if on_host and torch.equal(farther, jump):
            break
        jump = farther
    reaches_root = parent.view(-1).index_select(0, jump).view(b, n) == ROOT
    valid = torch.stack([in_range.all(), (reaches_root | (parent == PAD)).all()])
    if not (on_host or host_check):  # a device-side assert keeps the model's step free of host waits (its batches
        # were checked where they were built, `xsyn.trees.batch.collate_trees`)
        torch._assert_async(valid.all(), "tree_parent: a parent out of range or on a cycle. " + _PARENTS)
        return anc
    valid = valid.tolist()  # the one wait for the device, at the end
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
    return tree_kernel is not None


def kernel_applies(parent: torch.Tensor) -> bool:
    # the kernel keeps distances (< 2 N) in int16
    return tree_kernel is not None and parent.device.type == "cpu" and parent.shape[1] < 16_000


def kernel_core(parent: torch.Tensor, size: int) -> _Core:
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
    row, node = tree_kernel.tree_core(parent.data_ptr(), b, n, size, *(x.data_ptr() for x in core))
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
    if kernel_applies(parent):
        return kernel_core(parent, parent.shape[1]).depth
    return ancestors_of(parent).sum(-1) - 1


def ancestor_matrix(parent: torch.Tensor) -> torch.Tensor:
    """(B, N, N) bool: `[b, i, j]` is True iff node j is node i or one of its ancestors.

    Computed from the parent pointers (not from subtree spans), so it is right for
    non-projective trees too.
    """
    if kernel_applies(parent):
        return as_bool(kernel_core(parent, parent.shape[1]).ancestors)
    return as_bool(ancestors_of(parent))


def common_ancestors(anc: torch.Tensor) -> torch.Tensor:
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


def distance_matrix(common: torch.Tensor, parent: torch.Tensor, size: int) -> torch.Tensor:
    """(B, T, T) float32 distances, +inf where either piece is padding:
    (depth_i + 1) + (depth_j + 1) - 2 * common ancestors."""
    lifted = common.diagonal(dim1=1, dim2=2)[:, :size].masked_fill(parent[:, :size] == PAD, torch.inf)
    return (lifted.unsqueeze(2) + lifted.unsqueeze(1)).add_(common[:, :size, :size], alpha=-2.0)


def as_int16(distances: torch.Tensor) -> torch.Tensor:
    return distances.clamp(max=UNREACHABLE).to(torch.int16)


def tree_distances(parent: torch.Tensor, size: int | None = None) -> torch.Tensor:
    """(B, T, T) int16: hops between pieces i and j; `UNREACHABLE` where either is padding.

    `size` (T) restricts the result to the first T nodes (the sequence); removed ancestors
    still carry the paths between kept pieces. d = depth_i + depth_j - 2 depth(lca), where
    depth(lca) + 1 is the number of common ancestors.
    """
    size = size or parent.shape[1]
    if kernel_applies(parent):
        return kernel_core(parent, size).distances
    return as_int16(distance_matrix(common_ancestors(ancestors_of(parent)), parent, size))
