"""The steps of `scripts/gpu_benchmarks.py` that measure inside one process on the device: `profile`,
`profile_compiled`, `torch_compile` and `sdpa_masks`. gpu_benchmarks.py runs each in a fresh process (so one
step's compiled graphs and allocator state cannot colour the next) as

    python scripts/gpu_steps.py STEP --device cuda [--quick] [--variants gat,sla]

which prints the step's figures as one JSON line (the last line of its output). With `--quick` the model is a
tiny one (2 layers, hidden 64, batch 2 x 32), to check the logic on a CPU.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from typing import Any

import torch

from xsyn.benchmarks.model import (
    bert_step_flops,
    build,
    model_batch,
    peak_tflops,
    step_seconds,
    synthetic_batch,
    train_step,
)

# A kernel's kind: the first pattern its name matches (lower case). Attention first: its kernels are CUTLASS
# ones too (fmha_cutlassF...); cuBLAS's Hopper GEMMs are named nvjet/xmma, inductor's GEMM templates triton_tem.
KERNEL_KINDS = (("attention", r"fmha|flash|attention|sdpa|attn"),
                ("gemm", r"gemm|nvjet|xmma|cutlass|cublas|matmul|splitk|^triton_tem"), ("embedding", r"embedding"),
                ("fused (inductor)", r"^triton"), ("copy/fill", r"memcpy|memset|copy|fill"))
PROFILED_STEPS = 3  # steps under the profiler; its totals are divided by them (and by 1000: microseconds to ms)


def kernel_kind(name: str) -> str:
    return next((kind for kind, pattern in KERNEL_KINDS if re.search(pattern, name.lower())), "other")


def bert_base_batch(device: str, quick: bool) -> tuple[dict[str, int], int, int, dict[str, torch.Tensor]]:
    """The bert-base shape and batch of `xsyn bench model` (tiny with `quick`) on `device`: (shape, b, t, batch)."""
    shape = dict(num_hidden_layers=2 if quick else 12, hidden_size=64 if quick else 768,
                 num_attention_heads=2 if quick else 12, intermediate_size=256 if quick else 3072,
                 vocab_size=100 if quick else 119547, max_position_embeddings=512)
    b, t = (2, 32) if quick else (32, 128)
    batch = {k: v.to(device) for k, v in synthetic_batch(b, t, shape["vocab_size"], 0).items()}
    return shape, b, t, batch


def profiled(model, batch, device: str, warmup: int = 3):
    """torch.profiler over PROFILED_STEPS bf16 train steps of `model`, after `warmup` steps."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("cuda")
    for _ in range(warmup):
        train_step(model, batch, "bfloat16")
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        for _ in range(PROFILED_STEPS):
            train_step(model, batch, "bfloat16")
        if cuda:
            torch.cuda.synchronize()
    return prof.key_averages()


def per_step(total: float) -> float:
    return total / PROFILED_STEPS


def profile_variants(device: str, variants: list[str], quick: bool) -> dict[str, Any]:
    """torch.profiler's top operations of `none` and each of `variants`, and per step the kernel launches, host
    waits, aten calls, host time and device time (launch-bound or not)."""
    shape, _, _, batch = bert_base_batch(device, quick)
    key = "self_device_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    tables, totals = {}, {}
    for variant in ["none", *variants]:
        averages = profiled(build(variant, shape, 0, device), batch, device)
        tables[variant] = averages.table(sort_by=key, row_limit=15, max_name_column_width=60)
        # Launch-bound or not: kernel launches and host waits per step, host time against device time.
        calls = {e.key: e.count for e in averages}
        totals[variant] = dict(
            launches_per_step=per_step(sum(n for k, n in calls.items() if "LaunchKernel" in k)),
            host_syncs_per_step=per_step(sum(n for k, n in calls.items() if "Synchronize" in k or "Memcpy" in k)),
            aten_ops_per_step=per_step(sum(n for k, n in calls.items() if k.startswith("aten::"))),
            # kernels only (what the table's "Self CUDA time total" sums): the aten rows repeat their kernels' time
            device_ms_per_step=per_step(sum(e.self_device_time_total for e in averages
                                            if e.device_type.name == "CUDA")) / 1000,
            host_ms_per_step=per_step(sum(e.self_cpu_time_total for e in averages)) / 1000)
    return {"profiled": variants, "sort": key, "steps": PROFILED_STEPS, "totals": totals, "tables": tables}


def profile_compiled(device: str, quick: bool) -> dict[str, Any]:
    """Where the compiled `none` step's device time goes, by kind of kernel, beside the time its FLOPs would
    take at the device's peak; the 15 costliest kernels."""
    from xsyn.models.compiled import compile_model

    shape, b, t, batch = bert_base_batch(device, quick)
    model = compile_model(build("none", shape, 0, device), "default")
    for _ in range(3):  # compiles, then warms up
        train_step(model, batch, "bfloat16")
    wall = min(step_seconds(model, batch, device, "bfloat16") for _ in range(10))
    kernels = [e for e in profiled(model, batch, device, warmup=0)
               if e.device_type.name == "CUDA" and e.self_device_time_total > 0]
    by_kind: dict[str, float] = {}
    for e in kernels:
        by_kind[kernel_kind(e.key)] = by_kind.get(kernel_kind(e.key), 0.0) + per_step(e.self_device_time_total) / 1000
    flops = bert_step_flops(shape["num_hidden_layers"], shape["hidden_size"], shape["intermediate_size"], t, b)
    peak = peak_tflops(device, "bfloat16")
    top = sorted(kernels, key=lambda e: -e.self_device_time_total)[:15]
    return {"mode": "default", "batch": [b, t], "wall_ms_per_step": wall * 1000,
            "device_ms_per_step": sum(by_kind.values()), "flops_per_step": flops,
            "ms_at_peak": None if peak is None else flops / (peak * 1e12) * 1000,
            "mfu": None if peak is None else flops / wall / (peak * 1e12),
            "device_ms_by_kind": dict(sorted(by_kind.items(), key=lambda kv: -kv[1])),
            "kernels_per_step": per_step(sum(e.count for e in kernels)),
            "top_kernels": [{"name": e.key[:120], "calls_per_step": per_step(e.count),
                             "ms_per_step": per_step(e.self_device_time_total) / 1000} for e in top]}


def torch_compile(device: str, quick: bool) -> dict[str, Any]:
    """The bert-base train step (bf16, batch 32 x 128) of `none` and `gat`, eager and under torch.compile."""
    shape, _, _, batch = bert_base_batch(device, quick)
    rows = {}
    for variant in ("none", "gat"):
        inputs = model_batch(variant, batch)
        eager = build(variant, shape, 0, device)
        eager_s = min(step_seconds(eager, inputs, device, "bfloat16") for _ in range(3))
        compiled = build(variant, shape, 0, device)
        started = time.perf_counter()
        compiled.forward = torch.compile(compiled.forward)
        step_seconds(compiled, inputs, device, "bfloat16")  # the first call compiles
        compile_s = time.perf_counter() - started
        compiled_s = min(step_seconds(compiled, inputs, device, "bfloat16") for _ in range(3))
        rows[variant] = dict(eager_ms=1000 * eager_s, compiled_ms=1000 * compiled_s, speedup=eager_s / compiled_s,
                             first_call_seconds=compile_s)
    return rows


def gradients(model, batch, dtype: str, backends) -> dict[str, torch.Tensor]:
    """The gradients of one seeded train step, with the SDPA `backends` forced (None: torch's choice)."""
    from torch.nn.attention import sdpa_kernel

    torch.manual_seed(0)
    if backends is None:
        train_step(model, batch, dtype)
    else:
        with sdpa_kernel(backends):
            train_step(model, batch, dtype)
    return {n: p.grad.detach().float().clone() for n, p in model.named_parameters() if p.grad is not None}


def against_efficient(model, batch, dtype: str) -> dict[str, Any]:
    """One variant at one length: gradients finite, and their distance to those with the memory-efficient
    backend forced (over all gradients at once: some are zero in exact arithmetic, the key bias's, since
    softmax ignores a constant per query, and a per-tensor ratio of rounding noise to zero means nothing)."""
    from torch.nn.attention import SDPBackend

    entry: dict[str, Any] = {}
    try:
        got = gradients(model, batch, dtype, None)
        entry["finite"] = all(bool(torch.isfinite(g).all()) for g in got.values())
        ref = gradients(model, batch, dtype, [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])
        a, r = (torch.cat([g[n].flatten() for n in sorted(ref)]) for g in (got, ref))
        entry["relative_difference_to_efficient"] = float((a - r).norm() / r.norm())
    except Exception as error:  # a backend that refuses a shape is a finding, not a crash
        entry["error"] = type(error).__name__ + ": " + str(error)[:300]
    return entry


def cudnn_forced_masked(device: str) -> dict[str, Any]:
    """The pitfall itself (pytorch issue 196678): cuDNN's SDPA forced, a boolean padding mask, bf16."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    raw: dict[str, Any] = {}
    for t in (64, 96, 128, 192):
        torch.manual_seed(t)
        q, k, v = (torch.randn(8, 12, t, 64, device=device, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        mask = torch.ones(8, 1, t, t, dtype=torch.bool, device=device)
        mask[:, :, :, t - t // 4:] = False
        try:
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask).float().sum().backward()
            raw[str(t)] = {"grad_q_finite": bool(torch.isfinite(q.grad).all())}
        except Exception as error:  # cuDNN refusing the shape is a finding too
            raw[str(t)] = {"error": type(error).__name__ + ": " + str(error)[:200]}
    return raw


def sdpa_masks(device: str, quick: bool) -> dict[str, Any]:
    """Every variant's gradients at T = 64, 96, 128, 192 in bf16 (dropout off, the same seed): finite, and as with
    the memory-efficient backend forced; and cuDNN's SDPA forced on a masked attention alone."""
    from xsyn.models.variants import variant_names

    cuda = device.startswith("cuda")
    shape = dict(num_hidden_layers=2 if quick else 4, hidden_size=64 if quick else 768,
                 num_attention_heads=2 if quick else 12, intermediate_size=256 if quick else 3072, vocab_size=1000,
                 max_position_embeddings=512, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    dtype = "bfloat16" if cuda else "float32"
    rows = {}
    for variant in variant_names():
        model = build(variant, shape, 0, device)
        for t in ((32, 48) if quick else (64, 96, 128, 192)):
            batch = {k: v.to(device) for k, v in synthetic_batch(4, t, 1000, t).items()}
            rows[variant + "@" + str(t)] = against_efficient(model, model_batch(variant, batch), dtype)
    return {"torch": torch.__version__, "rows": rows,
            "cudnn_forced_masked": cudnn_forced_masked(device) if cuda else {},
            "all_finite": all(e.get("finite") for e in rows.values()),
            "all_within_5pct_of_efficient": all(e.get("relative_difference_to_efficient", 1) < 0.05
                                                for e in rows.values())}


STEPS = {
    "profile": lambda args: profile_variants(args.device, args.variants, args.quick),
    "profile_compiled": lambda args: profile_compiled(args.device, args.quick),
    "torch_compile": lambda args: torch_compile(args.device, args.quick),
    "sdpa_masks": lambda args: sdpa_masks(args.device, args.quick),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=sorted(STEPS))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="a tiny model: checks the logic on a CPU")
    parser.add_argument("--variants", type=lambda text: [v for v in text.split(",") if v], default=[],
                        help="profile: the variants beside `none` (comma-separated)")
    args = parser.parse_args(argv)
    print(json.dumps(STEPS[args.step](args)))


if __name__ == "__main__":
    main()
