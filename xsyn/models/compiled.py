"""`torch.compile` for xsyn's models: one compiled training forward per model, and how often it compiled.

Every variant's training forward traces as one graph (no graph breaks): the tree tensors' C kernels run as
torch custom operators, and nothing in the step waits for the device. Shapes are specialised, so each
new batch shape compiles again (after the second, dynamo tries a dynamic length); `pad_to_multiple_of`
bounds the shapes of an epoch. `compiled_graphs` counts the graphs dynamo has compiled in this process,
so a run can report its recompiles.
"""

from __future__ import annotations

import torch
import torch._inductor.config
from torch._dynamo.utils import counters

from xsyn.models.names import COMPILE_MODES


def compile_model(model: torch.nn.Module, mode: str) -> torch.nn.Module:
    """`model` compiled in `mode` (one of `COMPILE_MODES`), sharing its parameters; call it as the model. On CPU
    its dropout draws eager torch's random numbers; on a GPU, inductor's own (seeded, faster, other numbers)."""
    if mode not in COMPILE_MODES:
        raise ValueError(f"torch_compile={mode!r}; choose one of {', '.join(COMPILE_MODES)}")
    if next(model.parameters()).device.type == "cpu":  # so that a compiled run reproduces the eager run's losses
        torch._inductor.config.fallback_random = True
    return torch.compile(model, mode=mode)


def compiled_graphs() -> int:
    """The graphs torch.compile has compiled in this process so far (first compiles and recompiles)."""
    return int(counters["stats"]["unique_graphs"])
