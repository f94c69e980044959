"""The machine a result was computed on, as far as float results depend on it besides the versions.

`xsyn.provenance()` records `machine()` as `platform` beside `versions` in `train_results.json`,
`results.json` and `pretrain_config.json`. A run is bit-identical when repeated only where both
match: another CPU model with the same instruction set can take another oneDNN/MKL kernel or blocking
and differ in the last bits (1e-7 relative in a loss after three steps), another thread count sums in
another order, and a GPU run depends on the GPU and its CUDA.
"""

from __future__ import annotations

import platform
import re
from pathlib import Path
from typing import Any

import torch

CPUINFO = Path("/proc/cpuinfo")
# The instruction-set extensions that MKL, oneDNN and torch's own kernels dispatch on: vector widths and
# the bf16/fp16/int8/AMX units. Other cpuinfo flags (virtualisation, power management) choose no kernel.
KERNEL_FLAG = re.compile(r"(sse|ssse|avx|amx|fma|f16c)")
# How `torch.__config__.show()` names the BLAS and the deep-learning kernel library it was built with.
LIBRARY_VERSION = {"mkl": re.compile(r"Math Kernel Library Version (.+?) for "),
                   "onednn": re.compile(r"MKL-DNN v(\S+)")}


def cpu_platform() -> dict[str, Any]:
    """What CPU float results depend on besides the versions: the CPU model, its kernel-relevant flags,
    torch's CPU capability, the MKL and oneDNN builds torch carries, and the threads torch uses now."""
    return {**cpu_model(CPUINFO.read_text(encoding="utf-8", errors="replace") if CPUINFO.is_file() else ""),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            **kernel_libraries(torch.__config__.show()), "threads": torch.get_num_threads()}


def cpu_model(cpuinfo: str) -> dict[str, str]:
    """The first processor's model (name, vendor, family/model/stepping) and kernel flags in `cpuinfo`
    (/proc/cpuinfo's text); where there is none (not Linux), what Python's `platform` knows."""
    fields: dict[str, str] = {}
    for line in cpuinfo.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    if "model name" not in fields:
        return {"cpu": platform.processor() or platform.machine(), "cpu_flags": ""}
    model = (f"{fields['model name']} ({fields.get('vendor_id', '?')} family {fields.get('cpu family', '?')} "
             f"model {fields.get('model', '?')} stepping {fields.get('stepping', '?')})")
    flags = sorted(flag for flag in fields.get("flags", "").split() if KERNEL_FLAG.match(flag))
    return {"cpu": model, "cpu_flags": " ".join(flags)}


def kernel_libraries(config: str) -> dict[str, str | None]:
    """The MKL and oneDNN versions in `config` (`torch.__config__.show()`); None for one torch lacks."""
    return {name: (found.group(1) if (found := pattern.search(config)) else None)
            for name, pattern in LIBRARY_VERSION.items()}


def gpus() -> list[str]:
    """The visible GPUs' names with torch's CUDA/HIP version; empty on a CPU-only machine."""
    if not torch.cuda.is_available():
        return []
    toolkit = torch.version.cuda or torch.version.hip
    return [f"{torch.cuda.get_device_name(i)} (CUDA/HIP {toolkit})" for i in range(torch.cuda.device_count())]


def machine() -> dict[str, Any]:
    """The CPU platform and, where there are any, the GPUs: what `xsyn.provenance()` records as `platform`."""
    return {**cpu_platform(), "gpus": gpus()}
