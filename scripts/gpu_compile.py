"""Eager against torch.compile (default and reduce-overhead) for every row of `xsyn bench model`, on one GPU
in one short run: issue 37's items 2 and 3 (and the lean model layer's GPU figures).

A compile of the bert-base train step takes tens of seconds of CPU, and a GPU session has minutes. So every
row (each variant and plain BERT) is its own worker process: the workers compile and warm up at the same
time (the CPU work overlaps), wait at a barrier until all are ready, and then take turns on the GPU under a
file lock, so that each timing runs alone on an idle GPU and a quiet host (the step is launch-bound, so host
noise would show). One more worker replays real XNLI lengths (batches of 32 in a seeded shuffle) through a
compiled `none` for 200 steps, with lengths padded to the batch maximum and bucketed to a multiple, and
counts the graphs compiled (dynamo's unique graphs) and the distinct shapes (CUDA-graph recordings under
reduce-overhead).

    python scripts/gpu_compile.py --device cuda --output compile.json [--lengths lengths.json]
    python scripts/gpu_compile.py --device cpu --quick ...     # the logic on tiny shapes (figures mean nothing)

Per row and (mode, batch): ms per step (mean of `--steps` consecutive steps, one sync at the end; the fastest
of `--rounds`), peak bytes of one step above the level before it, kernel launches per step (the profiler's
launch calls: cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch...), FLOPs per step (FlopCounterMode, eager)
and MFU against the device's dense bf16 peak; the first compiled call's seconds. Results go to one JSON file.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
MODES = ("eager", "default", "reduce-overhead")
BATCHES = (32, 64, 128)  # the batch sweep (x 128 tokens) runs for none and plain BERT; the rest at 32
SWEPT = ("none", "plain_bert")
DEFAULT_MODE_ROWS = ("none", "plain_bert", "gat")  # torch.compile's default mode too (issue 37); the rest: CUDA graphs


def shape_for(quick: bool) -> dict[str, int]:
    if quick:
        return dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=256,
                    vocab_size=100, max_position_embeddings=512)
    return dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12, intermediate_size=3072,
                vocab_size=119547, max_position_embeddings=512)


def tasks_for(rows: list[str], quick: bool) -> list[tuple[str, int]]:
    """(row, batch) per worker process: every row at the first batch, the swept rows at the larger ones too."""
    batches = (2, 4) if quick else BATCHES
    return [(row, b) for row in rows for b in (batches if row in SWEPT else batches[:1])]


def modes_for(row: str, batch: int, quick: bool, modes: tuple[str, ...]) -> list[str]:
    """Every mode at the first batch; at the sweep's larger batches eager and the compiled mode that is meant to
    reach high MFU (reduce-overhead), to keep the compiles within a GPU session."""
    first = ((2, 4) if quick else BATCHES)[0]
    return [m for m in modes if m in ("eager", "reduce-overhead") or (batch == first and row in DEFAULT_MODE_ROWS)]


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def launches(step, device: str) -> float:
    """Kernel launches per step, from the profiler's runtime/driver launch calls over 3 steps."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with profile(activities=activities) as prof:
        for _ in range(3):
            step()
        sync(device)
    names = ("LaunchKernel", "cuLaunchKernel", "cudaGraphLaunch", "LaunchCooperativeKernel")
    calls = sum(e.count for e in prof.key_averages() if any(n in e.key for n in names))
    return calls / 3


def worker(args: argparse.Namespace) -> None:
    try:
        run_worker(args)
    finally:  # a worker that died early must not hold the others at the barrier
        (Path(args.rendezvous) / f"ready-{args.row}-{args.batch}").write_text("done")


def run_worker(args: argparse.Namespace) -> None:
    """One row at one batch size: build, compile its modes, warm up, signal ready, wait for all, time alone."""
    import torch

    from xsyn.benchmarks.model import (
        PLAIN_BERT,
        build,
        model_batch,
        peak_bytes,
        peak_tflops,
        step_flops,
        synthetic_batch,
        train_step,
    )

    torch._dynamo.config.cache_size_limit = 64
    row, device = args.row, args.device
    dtype = "bfloat16" if device.startswith("cuda") else "float32"
    shape = shape_for(args.quick)
    model = build(row, shape, 0, device)
    seq = 32 if args.quick else 128
    result: dict[str, Any] = {"row": row, "configs": {}}
    steps: dict[tuple[str, int], Any] = {}
    b = args.batch
    for mode in modes_for(row, b, args.quick, tuple(args.modes.split(","))):
        batch = model_batch(row, {k: v.to(device) for k, v in synthetic_batch(b, seq, shape["vocab_size"], 0).items()})
        target = model if mode == "eager" else torch.compile(model, mode=mode, dynamic=False)
        started = time.perf_counter()
        try:
            for _ in range(3):  # the compile, then CUDA-graph warm-up and recording under reduce-overhead
                train_step(target, batch, dtype)
            sync(device)
        except Exception as error:  # recorded; the other configurations still run
            result["configs"][f"{mode}@{b}"] = {"status": f"failed: {type(error).__name__}: {str(error)[:400]}"}
            continue
        result["configs"][f"{mode}@{b}"] = {"status": "ok", "warmup_seconds": time.perf_counter() - started}
        steps[mode, b] = (target, batch)
    flops = {b: step_flops(model, model_batch(row, {k: v.to(device) for k, v in synthetic_batch(
        b, seq, shape["vocab_size"], 0).items()}), dtype) for b in {b for _, b in steps}}
    # Hand back what this process holds but does not use (gradients, the allocator's cached blocks) before the
    # others time: in the first H100 run eleven workers' caches filled the 80 GB, plain BERT's eager step ran out
    # of memory, and steps near the limit ran slowly (eager none at batch 32 slower than at 64)
    model.zero_grad(set_to_none=True)
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    ready = Path(args.rendezvous) / f"ready-{row}-{b}"
    ready.write_text("ready")
    deadline = time.monotonic() + args.barrier_seconds
    while sum(1 for _ in Path(args.rendezvous).glob("ready-*")) < args.workers and time.monotonic() < deadline:
        time.sleep(0.5)
    peak = args.peak_tflops or peak_tflops(device, dtype)
    with open(Path(args.rendezvous) / "gpu.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for (mode, b), (target, batch) in steps.items():
            entry = result["configs"][f"{mode}@{b}"]
            try:
                rounds = []
                for _ in range(args.rounds):
                    train_step(target, batch, dtype)
                    sync(device)
                    start = time.perf_counter()
                    for _ in range(args.steps):
                        train_step(target, batch, dtype)
                    sync(device)
                    rounds.append((time.perf_counter() - start) / args.steps)
                seconds = min(rounds)
                entry.update(step_seconds=seconds, rounds=rounds, flops_per_step=flops[b],
                             mfu=flops[b] / seconds / (peak * 1e12) if peak else None,
                             tokens_per_second=b * seq / seconds,
                             launches_per_step=launches(lambda t=target, x=batch: train_step(t, x, dtype), device),
                             peak_bytes=peak_bytes(target, batch, device, dtype) if mode != "reduce-overhead"
                             else None)
            except Exception as error:
                entry["status"] = f"failed while timing: {type(error).__name__}: {str(error)[:400]}"
        fcntl.flock(lock, fcntl.LOCK_UN)
    result["plain"] = row == PLAIN_BERT
    Path(args.output).write_text(json.dumps(result, indent=2))


def bucketed(lengths: list[int], multiple: int, cap: int) -> list[int]:
    return [min(cap, -(-n // multiple) * multiple) for n in lengths]


def recompiles(args: argparse.Namespace) -> None:
    """200 steps of real lengths through a compiled `none` (dynamic shapes as torch.compile decides, as a user's
    `--torch-compile` run would): graphs compiled and distinct shapes, unbucketed and bucketed, per mode."""
    import torch
    from torch._dynamo.utils import counters

    from xsyn.benchmarks.model import build, synthetic_batch, train_step

    device, dtype = args.device, "bfloat16" if args.device.startswith("cuda") else "float32"
    # Two layers of bert-base width: the recompiles depend on the shapes the batches bring, not on the depth, and
    # eight compiles of twelve layers would not fit a GPU session.
    shape = {**shape_for(args.quick), "num_hidden_layers": 2}
    lengths = json.loads(Path(args.lengths).read_text()) if args.lengths else [20 + (7 * i) % 100 for i in range(6400)]
    b, cap, steps = (2, 32, 12) if args.quick else (32, 128, 200)
    batches = [max(lengths[i * b:(i + 1) * b]) for i in range(steps)]
    batches = [min(cap, max(8, n)) for n in batches]
    result: dict[str, Any] = {"batch_size": b, "steps": steps, "distinct_lengths": len(set(batches)),
                              "model": "none, 2 layers of the bench shape (recompiles depend on the input shapes only)"}
    torch._dynamo.config.cache_size_limit = 64
    for mode in ("default", "reduce-overhead"):
        for name, seqs in (("unbucketed", batches), ("bucketed_32", bucketed(batches, 32, cap))):
            torch._dynamo.reset()
            counters.clear()
            model = build("none", shape, 0, device)
            compiled = torch.compile(model, mode=mode)
            cache: dict[int, dict] = {}
            started = time.perf_counter()
            try:
                for t in seqs:
                    if t not in cache:
                        cache[t] = {k: v.to(device) for k, v in synthetic_batch(b, t, shape["vocab_size"], t).items()}
                    train_step(compiled, cache[t], dtype)
                sync(device)
                status = "ok"
            except Exception as error:
                status = f"failed: {type(error).__name__}: {str(error)[:300]}"
            result[f"{mode}/{name}"] = {
                "status": status, "seconds": time.perf_counter() - started, "distinct_shapes": len(set(seqs)),
                "unique_graphs": counters["stats"]["unique_graphs"],
                "frames_compiled": counters["frames"]["ok"], "recompile_reasons": len(counters["recompiles"])}
            del model, compiled
    Path(args.output).write_text(json.dumps(result, indent=2))


def coordinate(args: argparse.Namespace) -> int:
    """Start the workers, wait for them, and join their results into --output."""
    import tempfile

    from xsyn.benchmarks.model import PLAIN_BERT
    from xsyn.models.variants import variant_names

    rows = [*(args.rows.split(",") if args.rows else variant_names()), PLAIN_BERT]
    tasks = tasks_for(rows, args.quick)
    work = Path(tempfile.mkdtemp(prefix="xsyn-compile-"))
    common = ["--device", args.device, "--rendezvous", str(work), "--workers", str(len(tasks)), "--modes", args.modes,
              "--steps", str(args.steps), "--rounds", str(args.rounds),
              "--barrier-seconds", str(args.barrier_seconds), *(["--quick"] if args.quick else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "TORCHINDUCTOR_COMPILE_THREADS": str(max(1, (os.cpu_count() or 2) // len(tasks))),
           "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    started = time.perf_counter()
    processes = {}
    for row, b in tasks:  # each its own inductor cache: two processes compiling one kernel into one cache raced
        name = f"{row}@{b}"
        log = open(work / f"{name}.log", "w")
        processes[name] = subprocess.Popen([sys.executable, __file__, "--worker", "--row", row, "--batch", str(b),
                                            "--output", str(work / f"{name}.json"), *common], stdout=log, stderr=log,
                                           env={**env, "TORCHINDUCTOR_CACHE_DIR": str(work / f"inductor-{name}")})
    if not args.no_recompiles:
        log = open(work / "recompiles.log", "w")
        processes["recompiles"] = subprocess.Popen(
            [sys.executable, __file__, "--recompiles", "--output", str(work / "recompiles.json"), "--device",
             args.device, *(["--lengths", args.lengths] if args.lengths else []), *(["--quick"] if args.quick else [])],
            stdout=log, stderr=log, env={**env, "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor-recompiles")})
    results: dict[str, Any] = {"rows": {}, "work_dir": str(work)}
    for name, process in processes.items():
        try:
            process.wait(timeout=max(1.0, args.deadline - (time.perf_counter() - started)))
        except subprocess.TimeoutExpired:
            process.kill()
        file = work / f"{name}.json"
        found = json.loads(file.read_text()) if file.is_file() else {
            "status": f"no result (exit {process.returncode}): " + (work / f"{name}.log").read_text()[-1500:]}
        if name == "recompiles":
            results["recompiles"] = found
        else:  # one row's batches join under the row
            row = name.rsplit("@", 1)[0]
            merged = results["rows"].setdefault(row, {"row": row, "configs": {}})
            merged["configs"].update(found.get("configs", {}))
            if "status" in found:
                merged["status"] = found["status"]
    results["seconds"] = time.perf_counter() - started
    results.update(summary(results["rows"]))
    Path(args.output).write_text(json.dumps(results, indent=2))
    print(table(results))
    return 0


def summary(rows: dict[str, Any]) -> dict[str, Any]:
    """Sections `bench_model_<mode>` at batch 32 (ratios to none in the same mode) and the MFU sweep."""
    out: dict[str, Any] = {}
    first = min((b for r in rows.values() for k in r.get("configs", {}) for b in [int(k.split("@")[1])]), default=32)
    for mode in MODES:
        base = rows.get("none", {}).get("configs", {}).get(f"{mode}@{first}", {})
        section = {}
        for row, r in rows.items():
            c = r.get("configs", {}).get(f"{mode}@{first}", {})
            if "step_seconds" not in c:
                continue
            section[row] = {k: c.get(k) for k in ("step_seconds", "mfu", "launches_per_step", "peak_bytes",
                                                  "warmup_seconds")}
            if "step_seconds" in base:
                section[row]["step_time_ratio"] = c["step_seconds"] / base["step_seconds"]
                if c.get("peak_bytes") and base.get("peak_bytes"):
                    section[row]["peak_memory_ratio"] = c["peak_bytes"] / base["peak_bytes"]
        out[f"bench_model_{mode.replace('-', '_')}"] = section
    out["mfu_sweep"] = {row: {k: c.get("mfu") for k, c in r.get("configs", {}).items()}
                        for row, r in rows.items() if row in SWEPT}
    return out


def table(results: dict[str, Any]) -> str:
    lines = ["| row | mode | ms/step @32 | x none | memory x none | launches | MFU | warm-up s |",
             "|---|---|---|---|---|---|---|---|"]
    for mode in MODES:
        for row, r in results.get(f"bench_model_{mode.replace('-', '_')}", {}).items():
            mfu = f"{r['mfu']:.1%}" if r.get("mfu") is not None else "-"
            mem = f"{r['peak_memory_ratio']:.3f}" if r.get("peak_memory_ratio") else "-"
            ms, ratio, warm = 1000 * r["step_seconds"], r.get("step_time_ratio", 0), r.get("warmup_seconds") or 0
            lines.append(f"| {row} | {mode} | {ms:.2f} | {ratio:.3f} | {mem} | {r.get('launches_per_step') or 0:.0f} | "
                         f"{mfu} | {warm:.0f} |")
    for row, mfus in results.get("mfu_sweep", {}).items():
        lines.append(f"MFU {row}: " + ", ".join(f"{k} {v:.1%}" for k, v in mfus.items() if v is not None))
    rec = results.get("recompiles", {})
    for key, r in rec.items():
        if isinstance(r, dict):
            lines.append(f"recompiles {key}: {r}")
    failed = [f"{row} {k}: {c['status']}" for row, r in results["rows"].items()
              for k, c in r.get("configs", {}).items() if c.get("status") != "ok"]
    failed += [f"{row}: {r['status']}" for row, r in results["rows"].items() if "status" in r]
    return "\n".join(lines + ["failed: " + "; ".join(failed) if failed else "all configurations ran"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--output", required=True)
    parser.add_argument("--rows", help="comma-separated variants [default: every registered variant]")
    parser.add_argument("--lengths", help="a JSON list of real token lengths, in batch order (recompile count)")
    parser.add_argument("--steps", type=int, default=20, help="consecutive steps per timing round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--deadline", type=float, default=420)
    parser.add_argument("--barrier-seconds", type=float, default=300)
    parser.add_argument("--peak-tflops", type=float)
    parser.add_argument("--no-recompiles", action="store_true")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, from " + ", ".join(MODES))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--recompiles", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--row", help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rendezvous", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return 0
    if args.recompiles:
        recompiles(args)
        return 0
    return coordinate(args)


if __name__ == "__main__":
    sys.exit(main())
