"""The precision a run computes in: the `mixed_precision` setting, and what `auto` (the default) becomes.

`auto` is bf16 autocast on a CUDA GPU with native bfloat16 (compute capability 8.0 and later: Ampere,
Hopper), where it is 2.6x faster than float32 at mBERT's shape on an H200, and strict float32 (`no`)
everywhere else: on the CPU, so seeded CPU runs (and the golden runs) keep their float32 arithmetic, and on
older GPUs, which only emulate bfloat16. A run records what its setting resolved to (`config.json`,
`train_results.json`, `results.json`, the model card), so its files say what it computed in.
"""

from __future__ import annotations

from xsyn.utils.errors import InputError

PRECISIONS = ("auto", "no", "fp16", "bf16")  # the `mixed_precision` setting: `no` is float32
DEFAULT_PRECISION = "auto"
AUTO_RESOLUTIONS = ("bf16", "no")  # what `auto` becomes (on a bf16 GPU; elsewhere)


def resolve_precision(setting: str, bf16_gpu: bool | None = None) -> str:
    """`setting` as the run computes it: `auto` is `bf16` where the run trains on a GPU with native bfloat16
    (`bf16_gpu`; None: this process's device, `process_has_bf16_gpu`) and `no` elsewhere; the others stay."""
    if setting != "auto":
        return setting
    return "bf16" if (process_has_bf16_gpu() if bf16_gpu is None else bf16_gpu) else "no"


def process_has_gpu() -> bool:
    """Whether this process computes on a CUDA GPU: Accelerate's choice of device, a GPU where torch sees one,
    unless ACCELERATE_USE_CPU (`accelerate launch --cpu`) keeps it on the CPU."""
    import torch
    from accelerate.utils import parse_flag_from_env

    return not parse_flag_from_env("ACCELERATE_USE_CPU") and torch.cuda.is_available()


def process_has_bf16_gpu() -> bool:
    """Whether this process trains on a CUDA GPU with native bfloat16. Emulated bfloat16 (a pre-Ampere GPU) does
    not count: it is slower there than float32."""
    import torch

    return process_has_gpu() and torch.cuda.is_bf16_supported(including_emulation=False)


def check_training_precision(setting: str) -> None:
    """A training asked for fp16 where this process has no GPU: Accelerate would accept it, compute in float32
    and the run would record fp16. Refused, with the choices that compute what they record."""
    if setting == "fp16" and not process_has_gpu():
        raise InputError("--mixed-precision fp16 computes in float16 on a CUDA GPU only, and this process trains on "
                         "the CPU (it would compute in float32 and record fp16): choose --mixed-precision no "
                         "(float32) or bf16 (bfloat16 autocast on the CPU), or train on a GPU")


def run_precision(setting: str) -> str:
    """`setting` resolved on this process's device, for the Accelerator of a run (training, evaluation,
    prediction). Float32 there (`no`) is strict: TF32 matrix products are switched off, whatever the
    environment set, so `no` on a GPU computes what it computes on the CPU. `auto` never falls back to TF32
    either: it falls back to float32 only on GPUs without native bfloat16, which have no TF32 (both came with
    Ampere). fp16 without a GPU is float32: Accelerate computes it so (and would record fp16)."""
    precision = resolve_precision(setting)
    if precision == "fp16" and not process_has_gpu():  # (an fp16 run evaluated on the CPU: float32, said as such)
        precision = "no"
    if precision == "no":
        import torch

        torch.set_float32_matmul_precision("highest")  # float32 products in float32 (torch's default)
    return precision


def same_precision(saved: str | None, setting: str) -> bool:
    """Whether a run that recorded `saved` (what its setting resolved to) is a run of `setting`."""
    return saved == setting or (setting == "auto" and saved in AUTO_RESOLUTIONS)
