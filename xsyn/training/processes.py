"""The barrier every process of a run meets at (after parsing, around saves, before the final evaluation)."""

from __future__ import annotations

from typing import Any


def wait_for_everyone(accelerator: Any) -> None:
    """`accelerator.wait_for_everyone()`, except in a CPU (gloo) process group: there Accelerate passes the
    rank as a device id, and torch turns it into a CUDA device wherever one is visible, so
    `ACCELERATE_USE_CPU=true torchrun` on a GPU machine fails on rank 1 with "invalid device ordinal" where
    there is one GPU (and touches the GPU where there are more). A gloo barrier needs no device."""
    import torch.distributed as dist

    if accelerator.num_processes > 1 and dist.is_initialized() and dist.get_backend() == "gloo":
        dist.barrier()
    else:
        accelerator.wait_for_everyone()
