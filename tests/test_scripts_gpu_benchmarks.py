"""scripts/gpu_benchmarks.py: the verdicts on issue 18's targets, the README tables, and merging two runs; and
scripts/gpu_steps.py, its steps that measure inside one process. (The whole script runs on CPU with `--device cpu
--quick`; that takes minutes, so it is not part of the suite.)"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def script():
    return load("gpu_benchmarks")


@pytest.fixture(scope="module")
def steps():
    return load("gpu_steps")


def row(time_ratio: float, memory_ratio: float, mfu: float | None = None, ms: float = 10.0) -> dict:
    return {"step_time_ratio": time_ratio, "peak_memory_ratio": memory_ratio, "step_seconds": ms / 1000,
            "peak_bytes": 2**30 * memory_ratio, "tokens_per_second": 4096 / (ms / 1000), "mfu": mfu}


BF16 = {"none": row(1.0, 1.0, 0.40), "gat": row(1.08, 1.10, 0.36), "sla": row(1.40, 1.12, 0.30),
        "wla": row(1.30, 1.16, 0.31), "sdoi": row(1.12, 1.05, 0.35), "plain_bert": row(0.98, 1.0, 0.41)}


def test_model_targets_follow_the_issues_thresholds(script):
    verdicts = script.model_targets({"bfloat16": BF16})["bfloat16"]
    # none / plain = 1 / 0.98 = 1.0204: within 3%
    assert verdicts["none_within_3pct_of_plain_bert"] is True
    assert verdicts["gat_time_at_most_1.1"] is True and verdicts["sdoi_time_at_most_1.12"] is True  # 1.12 <= 1.12
    assert verdicts["sla_time_at_most_1.35"] is False and verdicts["wla_time_at_most_1.35"] is True
    assert verdicts["memory_at_most_1.15"] is False  # wla holds 1.16x
    assert verdicts["mfu_at_least_35pct"] == {"none": True, "gat": True, "sla": False, "wla": False, "sdoi": True,
                                              "plain_bert": True}
    slower_plain = script.model_targets({"bfloat16": {**BF16, "plain_bert": row(0.96, 1.0)}})["bfloat16"]
    assert slower_plain["none_within_3pct_of_plain_bert"] is False  # 1 / 0.96 = 1.042


def results(steps: dict) -> dict:
    return {"environment": {"device": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "torch": "2.11.0",
                            "cuda": "13.0", "transformers": "5.17.0", "date": "2026-11-24T00:00:00+00:00"},
            "quick": False, "steps": steps}


def test_the_table_shows_every_row_and_names_unfinished_steps(script):
    text = script.table(results({"bench_model": {"status": "ok", "bfloat16": BF16,
                                                 "targets": script.model_targets({"bfloat16": BF16})},
                                 "suite": {"status": "not run: out of time (run again with --steps suite)"}}))
    assert "NVIDIA H100 80GB HBM3 (cuda), torch 2.11.0, CUDA 13.0" in text
    assert "| gat | 10.00 | 1.080 | 1126 | 1.100 | 409,600 | 36.0% |" in text  # 1.1 GiB = 1126 MiB
    assert "| plain_bert | 10.00 | 0.980 |" in text
    assert "missed sla_time_at_most_1.35, memory_at_most_1.15" in text
    assert "steps not completed: suite: not run: out of time" in text


def test_two_runs_merge_into_one_file(script, tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(results({"bench_model": {"status": "ok"}, "pawsx_minilm": {"status": "not run"}})))
    second.write_text(json.dumps(results({"pawsx_minilm": {"status": "ok", "none": {}}})))
    assert script.main(["--merge", str(first), str(second), "--output", str(tmp_path / "gpu.json")]) == 0
    merged = json.loads((tmp_path / "gpu.json").read_text())
    assert merged["steps"] == {"bench_model": {"status": "ok"}, "pawsx_minilm": {"status": "ok", "none": {}}}
    assert len(merged["merged_from"]) == 2


@pytest.mark.parametrize(("kernel", "kind"), [
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopB_TNT", "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "gemm"),
    ("fmha_cutlassB_bf16_aligned_64x64_k64_sm80", "attention"),  # CUTLASS, but attention
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4>, true>", "attention"),
    ("triton_tem_fused_mm_0", "gemm"), ("triton_per_fused_native_layer_norm_dropout_3", "fused (inductor)"),
    ("void at::native::embedding_backward_feature_kernel<float, float, long>", "embedding"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", "copy/fill"),
    ("Memset (Device)", "copy/fill"), ("void at::native::reduce_kernel<512, 1>", "other")])
def test_profiled_kernels_are_sorted_into_their_kind(steps, kernel, kind):
    assert steps.kernel_kind(kernel) == kind



def test_a_profiled_step_is_split_into_its_parts(script, tmp_path):
    """cProfile's cumulative seconds of the step's functions, per optimiser step (here: a stand-in module whose
    functions sit where the loop's do)."""
    import cProfile

    loop = tmp_path / "training" / "loop.py"
    loop.parent.mkdir()
    loop.write_text("def to_device(clock):\n    clock.now += 0.01\n"
                    "def step(clock):\n    to_device(clock)\n    clock.now += 0.02\n")
    namespace: dict = {}
    exec(compile(loop.read_text(), str(loop), "exec"), namespace)

    class Clock:  # cProfile's timer, moved on by the stand-in alone: the figures, not the machine's speed
        now = 0.0

    clock = Clock()
    profiler = cProfile.Profile(lambda: clock.now)
    profiler.runcall(lambda: [namespace["step"](clock) for _ in range(4)])
    profiler.dump_stats(tmp_path / "run.prof")
    parts = script.step_parts(tmp_path / "run.prof", steps=4)
    assert parts["to_device"] == pytest.approx(10) and parts["step"] == pytest.approx(30)  # ms a step, its copy in
    assert parts["forward"] == 0  # no function of that name ran
