"""The device a benchmark runs on, checked against the machine before any work."""

from __future__ import annotations

import torch

from xsyn.utils.errors import InputError, OptionError


def check_device(device: str) -> str:
    """`cpu`, `cuda` or `cuda:N`, checked against the machine (a clear error, not a CUDA traceback)."""
    backend, _, index = device.partition(":")
    if backend == "cpu" and not index:
        return device
    if backend != "cuda" or (index and not index.isdigit()):
        raise OptionError(f"--device {device!r}: choose cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise InputError(f"--device {device}: torch sees no CUDA device on this machine (torch {torch.__version__}); "
                         "use --device cpu")
    if index and int(index) >= torch.cuda.device_count():
        raise InputError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device
