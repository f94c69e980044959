"""`mixed_precision = "auto"` (the default): bf16 autocast on a GPU with native bfloat16, float32 elsewhere; a run
records what it resolved to. The GPU is faked (torch.cuda's answers patched), so this runs on any machine."""

from __future__ import annotations

import json

import pytest
import torch

from xsyn.training.precision import process_has_bf16_gpu, resolve_precision, run_precision, same_precision


@pytest.fixture
def gpu(monkeypatch):
    """A fake CUDA device of compute capability `gpu(major)`: torch.cuda says it is there, and bfloat16 is native
    from 8 (Ampere) on; emulated bfloat16 answers True only to a caller that accepts emulation."""
    monkeypatch.delenv("ACCELERATE_USE_CPU", raising=False)

    def fake(major: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported",
                            lambda including_emulation=True: major >= 8 or including_emulation)
    return fake


@pytest.mark.parametrize(("major", "expected"), [(9, "bf16"), (8, "bf16"), (7, "no")])
def test_auto_is_bf16_on_a_gpu_with_native_bfloat16_and_float32_on_an_older_one(gpu, major, expected):
    gpu(major)
    assert resolve_precision("auto") == expected


def test_auto_is_float32_without_a_gpu_and_where_accelerate_is_kept_on_the_cpu(gpu, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_precision("auto") == "no"
    gpu(9)
    monkeypatch.setenv("ACCELERATE_USE_CPU", "true")  # `accelerate launch --cpu`, the golden runs
    assert not process_has_bf16_gpu() and resolve_precision("auto") == "no"


@pytest.mark.parametrize("setting", ["no", "bf16", "fp16"])
def test_an_explicit_precision_is_kept_on_any_device(gpu, setting):
    gpu(9)
    assert resolve_precision(setting) == setting
    assert resolve_precision(setting, bf16_gpu=False) == setting


def test_float32_is_strict_whatever_the_environment_set():
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # TF32 products, as a notebook or container may have set
    try:
        assert run_precision("no") == "no" and torch.get_float32_matmul_precision() == "highest"
    finally:
        torch.set_float32_matmul_precision(before)


def test_a_saved_resolution_is_a_run_of_auto_and_of_itself_only():
    assert same_precision("bf16", "auto") and same_precision("no", "auto") and same_precision("bf16", "bf16")
    assert not same_precision("fp16", "auto") and not same_precision("bf16", "no") and not same_precision(None, "no")


def test_the_plan_prices_auto_cells_at_their_devices_precision():
    from xsyn.experiments.bench_figures import StepBench, bench_dtype
    from xsyn.experiments.plan import bench_step_seconds
    from xsyn.models.names import ENCODER_SHAPES
    from xsyn.run.settings import RunConfig

    config = RunConfig(task="synth", model="bert-base-multilingual-cased", batch_size=32, max_length=128)
    assert config.mixed_precision == "auto"
    rows = {"float32": {"none": {"step_seconds": 0.058, "tokens_per_second": 70_621}},
            "bfloat16": {"none": {"step_seconds": 0.022, "tokens_per_second": 186_170}}}
    shape = ENCODER_SHAPES["mbert"].config  # the bench's shape and tokens (32 x 128) are the cell's
    bench = StepBench(None, "NVIDIA H200", "", rows, shape)
    assert bench_step_seconds(bench, config, "none").value == pytest.approx(0.022)
    cpu = StepBench(None, "cpu", "", rows, shape)
    assert bench_step_seconds(cpu, config, "none").value == pytest.approx(0.058)
    assert bench_dtype("auto", "h100") == "bfloat16" and bench_dtype("no", "NVIDIA H100 80GB HBM3") == "float32"


def test_a_resumed_run_keeps_the_precision_its_start_resolved_auto_to(tmp_path, gpu, monkeypatch):
    from xsyn.run.settings import RunConfig
    from xsyn.run.train import saved_settings, with_run_precision
    from xsyn.training.folder import RunFolder

    folder = RunFolder(tmp_path)
    config = RunConfig(task="synth")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert with_run_precision(config, {}).mixed_precision == "no"
    folder.config.write_text(json.dumps({"mixed_precision": "bf16"}))  # started on a GPU
    assert with_run_precision(config, saved_settings(folder)).mixed_precision == "bf16"  # continued on the CPU
    assert with_run_precision(config, {}).mixed_precision == "no"  # a fresh start resolves anew
    gpu(9)
    assert with_run_precision(config, {}).mixed_precision == "bf16"
    assert with_run_precision(RunConfig(task="synth", mixed_precision="no"),
                              saved_settings(folder)).mixed_precision == "no"


def test_an_experiment_cell_set_to_auto_is_the_run_that_recorded_what_auto_became(tmp_path):
    from xsyn.experiments.cells import check_same_run
    from xsyn.experiments.experiment_file import ExperimentError

    folder = tmp_path / "cell"
    (folder / "best").mkdir(parents=True)  # a run with something saved
    (folder / "config.json").write_text(json.dumps({"mixed_precision": "bf16", "seed": 1}))
    check_same_run(folder, {"mixed_precision": "auto", "seed": 1})
    check_same_run(folder, {"mixed_precision": "bf16", "seed": 1})
    with pytest.raises(ExperimentError, match="mixed_precision: 'bf16' there, 'fp16' now"):
        check_same_run(folder, {"mixed_precision": "fp16", "seed": 1})


def test_the_console_script_names_a_wrong_precision_as_every_setting_is_named():
    """The option is checked by the setting's own rule, so `--mixed-precision` and `--set mixed_precision=` say
    the same (click's Choice said it its own way)."""
    import shutil
    import subprocess

    xsyn = shutil.which("xsyn")
    assert xsyn is not None, "the xsyn console script is not installed"
    run = subprocess.run([xsyn, "finetune", "--task", "synth", "--mixed-precision", "bf61"], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert "--mixed-precision: 'bf61' is not one of auto, no, fp16, bf16; did you mean 'bf16'?" in run.stderr
