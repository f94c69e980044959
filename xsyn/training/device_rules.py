"""What the `auto` of the optimiser kernel and of the length budget becomes on a run's device: the one place that
decides both (precision's `auto` is `xsyn.training.precision`'s). A run records the resolved values (config.json,
train_results.json), never `auto`, so its files say what it computed, and a resumed run keeps its start's.

The AdamW kernel (`adamw_kernel`): `auto` is torch's fused kernel wherever torch has one for the device and the
parameters' dtypes (CPU and CUDA in torch 2.13, every floating dtype), else its foreach kernel (any device,
floating dtypes), else the for-loop (one tensor at a time, what xsyn ran on the CPU before). The update is
memory-bound: on one CPU thread, MiniLM's 22.7M weights take 140 ms a step in the for-loop, 69 ms foreach and
15 ms fused, the same update within float rounding.
`fused`, `foreach` and `for-loop` ask for one; one the device lacks is an error naming the setting.

The length budget (`pad_to_multiple_of`, `max_batch_lengths`): where a new batch shape costs something (a GPU: a
kernel plan, an autotuned GEMM, a recompile) `auto` is few lengths, multiples of 8 and at most 8 a run and language
(the ladder that pads least, `xsyn.trees.padding`); where it costs nothing measurable (the CPU) every batch is
padded to its own longest row (multiple 1, no cap): the least padding. An integer (or null: no cap) overrides it.

The micro-batch split (`micro_batch_split`): where shapes cost nothing, `auto` is `by-length`: each step's batch
sorted by length and cut into micro-batches where that pads least (`xsyn.training.loop.micro_batches`), the
same step within float rounding: an epoch of random batches of 32 PAWS-X pairs (MiniLM, one CPU thread) then
computes 4.6% padding instead of 36%, and trains 1.29x the examples a second (docs/performance.md). Where shapes
cost, `even`: `grad_accum` equal parts, as they always were (every micro-batch of its own length would multiply a
GPU's shapes).
"""

from __future__ import annotations

from typing import Any

AUTO = "auto"
ADAMW_KERNELS = (AUTO, "fused", "foreach", "for-loop")  # the `adamw_kernel` setting
FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")  # what torch's fused and foreach AdamW update
# the length budget where shapes cost (`pad_to_multiple_of`, `max_batch_lengths`), and where they do not
FEW_SHAPES = (8, 8)
LEAST_PADDING = (1, None)
MICRO_BATCH_SPLITS = (AUTO, "even", "by-length")  # the `micro_batch_split` setting


# what each setting's `auto` may become, on some device (a run records one of them)
AUTO_RESOLUTIONS = {"adamw_kernel": ADAMW_KERNELS[1:], "pad_to_multiple_of": (FEW_SHAPES[0], LEAST_PADDING[0]),
                    "max_batch_lengths": (FEW_SHAPES[1], LEAST_PADDING[1]),
                    "micro_batch_split": MICRO_BATCH_SPLITS[1:]}


def same_resolution(name: str, saved: Any, setting: Any) -> bool:
    """Whether a run that recorded `saved` for the device-ruled setting `name` is a run of `setting` (`auto`:
    any of its resolutions)."""
    return saved == setting or (setting == AUTO and saved in AUTO_RESOLUTIONS.get(name, ()))


def shapes_cost(device_type: str) -> bool:
    """Whether a new batch shape costs the device something: every accelerator; not the CPU."""
    return device_type != "cpu"


def resolve_length_budget(pad_to_multiple_of: int | str | None, max_batch_lengths: int | str | None,
                          device_type: str) -> tuple[int | None, int | None]:
    """The two length settings as a run on `device_type` pads: each `auto` as `FEW_SHAPES` where shapes cost
    (`shapes_cost`), as `LEAST_PADDING` where they do not; a value given stays."""
    budget = FEW_SHAPES if shapes_cost(device_type) else LEAST_PADDING
    return (budget[0] if pad_to_multiple_of == AUTO else pad_to_multiple_of,
            budget[1] if max_batch_lengths == AUTO else max_batch_lengths)


def resolve_micro_batch_split(setting: str, device_type: str) -> str:
    """`micro_batch_split` as a run on `device_type` cuts its batches: `auto` as `by-length` where shapes cost
    nothing (`shapes_cost`), as `even` where they cost; a value given stays."""
    if setting != AUTO:
        return setting
    return "even" if shapes_cost(device_type) else "by-length"


def check_length_setting(value: Any) -> None:
    """`auto`, a count >= 1, or None (`pad_to_multiple_of`: 1; `max_batch_lengths`: no cap)."""
    if value is None or value == AUTO or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return
    raise ValueError(f"must be auto, a whole number >= 1 or null, got {value!r}")


def resolve_adamw_kernel(setting: str, device_type: str, dtypes: tuple[str, ...] = ("float32",)) -> str:
    """`setting` as the run's AdamW computes on `device_type` with parameters of `dtypes`: `auto` the fastest
    kernel torch has there (fused, else foreach: see the module docstring); one asked for stays, if torch
    has it there, else a ValueError naming what to give instead."""
    available = [kernel for kernel in ADAMW_KERNELS[1:] if kernel_available(kernel, device_type, dtypes)]
    if setting == AUTO:
        return available[0]
    if setting not in available:
        raise ValueError(f"adamw_kernel {setting!r}: torch {_torch_version()} has no {setting} AdamW for "
                         f"{'/'.join(dtypes)} parameters on {device_type}; give --set adamw_kernel="
                         f"{available[0]} (or auto)")
    return setting


def kernel_available(kernel: str, device_type: str, dtypes: tuple[str, ...]) -> bool:
    """Whether torch's AdamW has `kernel` (fused, foreach, for-loop) for parameters of `dtypes` on `device_type`."""
    from torch.optim.optimizer import _get_fused_kernels_supported_devices

    if kernel == "for-loop":
        return True
    # foreach runs on any device (where torch has no native multi-tensor kernel, as on the CPU, its ops loop inside
    # C++: still 2x the for-loop there); fused only where torch has the kernel
    on_device = kernel == "foreach" or device_type in _get_fused_kernels_supported_devices()
    return on_device and all(dtype in FLOAT_DTYPES for dtype in dtypes)


def adamw_flags(kernel: str) -> dict[str, bool]:
    """torch.optim.AdamW's arguments that run `kernel` (resolved: fused, foreach or for-loop), and only it."""
    return {"fused": kernel == "fused", "foreach": kernel == "foreach"}


def kernel_of(optimizer: Any) -> str:
    """The kernel a torch AdamW runs, read from its own arguments (what a run records: what ran)."""
    defaults = optimizer.defaults
    return "fused" if defaults.get("fused") else "foreach" if defaults.get("foreach") else "for-loop"


def _torch_version() -> str:
    import torch

    return torch.__version__.split("+")[0]
