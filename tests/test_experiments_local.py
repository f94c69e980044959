"""`run --cells-per-gpu N` on the CPU: the memory check before packing, N worker processes per device at most,
a cell that runs out of memory beside others retried alone; and `run --launcher slurm --prepare`: a CPU job,
then the cells' array with an `afterok` dependency on it."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import fake_slurm

from xsyn.cli import main
from xsyn.experiments import local
from xsyn.experiments.bench_figures import StepBench
from xsyn.experiments.cells import DONE, FAILED, CellState
from xsyn.experiments.experiment_file import Overrides, load_experiment
from xsyn.experiments.plan import CUDA_CONTEXT_BYTES, TRAINING_BYTES_PER_PARAMETER, device_memory

WORKER = """
import json, os, sys, time
folder, oom, start = sys.argv[1], sys.argv[2] == "1", float(sys.argv[3])  # start: when the packer launched it
os.makedirs(folder, exist_ok=True)
tried = os.path.join(folder, "tried")
if oom and not os.path.exists(tried):
    open(tried, "w").close()
    time.sleep(0.3)
    open(os.path.join(folder, "error.txt"), "w").write("torch.OutOfMemoryError: CUDA out of memory.\\n")
    code = 1
else:
    time.sleep(0.6)
    code = 0
with open(os.path.join(folder, "runs.jsonl"), "a") as fh:
    fh.write(json.dumps({"device": os.environ.get("CUDA_VISIBLE_DEVICES"), "start": start, "end": time.time(),
                         "offline": os.environ.get("HF_HUB_OFFLINE")}) + "\\n")
sys.exit(code)
"""


@pytest.fixture
def synth(tmp_path):
    return load_experiment("synth", Overrides(runs_dir=str(tmp_path / "runs")))


def _fake_workers(tmp_path, monkeypatch, oom: set[str]):
    """Worker processes that sleep instead of training (one runs out of memory the first time), and cell states
    read from what they leave. A run starts when the packer launches it, not when its Python is up: on a loaded
    machine one worker's start-up can outlast the other's sleep, and two launched together would not overlap."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")

    def start(experiment, cell, env):
        return subprocess.Popen([sys.executable, str(script), str(experiment.cell_dir(cell)),
                                 "1" if cell.name in oom else "0", repr(time.time())], env={**os.environ, **env})

    def state(experiment, cell):
        failed = (experiment.cell_dir(cell) / "error.txt").is_file()
        return CellState(cell, FAILED if failed else DONE, "out of memory" if failed else "")

    monkeypatch.setattr(local, "cell_state", state)
    monkeypatch.setattr(local, "POLL_S", 0.05)
    return start


def _runs(experiment, cell) -> list[dict]:
    lines = (experiment.cell_dir(cell) / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _most_at_once(intervals: list[dict]) -> int:
    edges = sorted([(r["start"], 1) for r in intervals] + [(r["end"], -1) for r in intervals])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_packed_cells_run_n_at_once_per_device_and_one_out_of_memory_is_retried_alone(synth, tmp_path, monkeypatch):
    cells = synth.cells[:6]
    start = _fake_workers(tmp_path, monkeypatch, oom={cells[1].name})
    said: list[str] = []
    outcomes = local.run_packed(synth, cells, ["0", "1"], 2, {"HF_HUB_OFFLINE": "1"}, said.append, start)
    assert sorted((o.cell.name, o.state) for o in outcomes) == sorted((c.name, DONE) for c in cells)
    runs = {cell.name: _runs(synth, cell) for cell in cells}
    assert all(r["offline"] == "1" for cell_runs in runs.values() for r in cell_runs)
    for device in ("0", "1"):
        on_it = [r for cell_runs in runs.values() for r in cell_runs if r["device"] == device]
        assert _most_at_once(on_it) == 2  # packed two at a time, never more
    first, alone = runs[cells[1].name]  # out of memory beside another cell, then run again by itself
    beside = [r for name, cell_runs in runs.items() for r in cell_runs
              if r["device"] == alone["device"] and r is not alone]
    assert all(r["end"] <= alone["start"] or r["start"] >= alone["end"] for r in beside)
    assert f"{cells[1].name}: out of memory beside other cells; run again alone" in " ".join(said)


@pytest.mark.parametrize(("asked", "cell", "device", "expected"), [
    (4, 3e9, 10e9, (3, "3 cells per GPU, not 4: a cell needs about 3 GB at its peak, the device has 10 GB")),
    (2, 3e9, 10e9, (2, "2 cells per GPU (a cell needs about 3 GB at its peak, the device has 10 GB)")),
    (4, 20e9, 10e9, (1, "1 cells per GPU, not 4: a cell needs about 20 GB at its peak, the device has 10 GB")),
    (1, 20e9, 10e9, (1, ""))])
def test_the_device_memory_bounds_the_cells_per_gpu(asked, cell, device, expected):
    assert local.cells_that_fit(asked, cell, device) == expected
    count, why = local.cells_that_fit(3, None, 10e9)
    assert count == 3 and "no estimate of a cell's device memory" in why


def test_run_local_packs_by_the_plans_estimate_against_a_fake_device(synth, monkeypatch):
    seen = {}

    def fake_run_packed(experiment, cells, devices, per_device, env, echo):
        seen.update(devices=devices, per_device=per_device, env=env)
        return []

    monkeypatch.setattr(local, "run_packed", fake_run_packed)
    monkeypatch.setattr(local, "cell_device_bytes", lambda experiment, cells: 3e9)
    said: list[str] = []
    local.run_local(synth, ["0", "1"], synth.cells[:4], echo=said.append,
                     options=local.LocalOptions(cells_per_gpu=4, offline=True, device_bytes=10e9))
    assert (seen["devices"], seen["per_device"]) == (["0", "1"], 3)
    assert seen["env"]["HF_HUB_OFFLINE"] == "1" and seen["env"]["XSYN_NO_PARSE"] == "1"
    assert any(line.startswith("3 cells per GPU, not 4") for line in said)


def test_a_cells_device_memory_is_its_models_state_and_the_measured_activations_scaled():
    from xsyn.experiments.plan import parameter_count
    from xsyn.models.names import ENCODER_SHAPES

    shape = ENCODER_SHAPES["mbert"].config
    peak = 5e9
    bench = StepBench(Path("h200.json"), "NVIDIA H200", "", {"float32": {"none": {
        "step_seconds": 0.05, "tokens_per_second": 4096 / 0.05, "peak_bytes": peak}}}, shape)
    experiment = load_experiment("synth", Overrides(model="bert-base-multilingual-cased",
                                                    settings={"batch_size": 32, "max_length": 128}))
    config = experiment.config(experiment.cells[0])
    same = device_memory(bench, config, "none")
    assert same.value == pytest.approx(peak + CUDA_CONTEXT_BYTES)  # the measured shape: its peak, one context
    state = TRAINING_BYTES_PER_PARAMETER * parameter_count(shape)
    double = device_memory(bench, _with(config, max_length=256), "none")
    assert double.value == pytest.approx(state + 2 * (peak - state) + CUDA_CONTEXT_BYTES)  # twice the activations


def _with(config, **changes):
    from dataclasses import replace

    return replace(config, **changes)


def test_slurm_prepare_is_a_cpu_job_and_the_packed_cell_array_waits_for_it(tmp_path, monkeypatch):
    import submitit

    for key, value in fake_slurm(tmp_path / "bin").items():
        monkeypatch.setenv(key, value)
    runs = tmp_path / "runs"
    result = CliRunner().invoke(main, [
        "experiment", "run", "synth", "--output-dir", str(runs), "--launcher", "slurm", "--partition", "gpu",
        "--prepare", "--prepare-partition", "cpu", "--prepare-cpus", "4", "--prepare-time", "30",
        "--cells-per-gpu", "2"])
    assert result.exit_code == 0, result.output
    prepare_script = (tmp_path / "bin" / "submitted-0.sh").read_text()
    for line in ("#SBATCH --partition=cpu", "#SBATCH --cpus-per-task=4", "#SBATCH --time=30",
                 "#SBATCH --job-name=xsyn-synth-prepare"):
        assert line in prepare_script, prepare_script
    assert "--gpus-per-node" not in prepare_script and "--gres=gpu" not in prepare_script
    cells_script = (tmp_path / "bin" / "submitted-1.sh").read_text()
    for line in ("#SBATCH --dependency=afterok:4242", "#SBATCH --partition=gpu", "#SBATCH --array=0-5"):
        assert line in cells_script, cells_script  # 12 cells, two per array task
    pickles = sorted((runs / "submitit").rglob("*_submitted.pkl"))
    calls = [submitit.core.utils.DelayedSubmission.load(p) for p in pickles]
    prepares = [c for c in calls if c.function.__name__ == "prepare_job"]
    arrays = [c for c in calls if c.function.__name__ == "cells_job"]
    assert len(prepares) == 1 and prepares[0].args[2] == 4  # its parse workers: the job's cores
    assert len(arrays) == 6 and all(len(c.args[2]) == 2 and c.args[4] == 2 and c.args[5] is True for c in arrays)
    assert sorted(name for c in arrays for name in c.args[2]) == sorted(c.name for c in load_experiment("synth").cells)
    assert "the cells' array starts when it succeeds (afterok)" in result.output
