"""`xsyn experiment`: experiment files, cells as run folders, resuming after a kill, a failing cell that
stops nothing, the report with the papers' numbers, and the submitit path (local executor; SLURM's
script checked without SLURM)."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import fake_slurm

from xsyn.cli import main
from xsyn.experiments import cells, locks
from xsyn.experiments.cells import cell_state
from xsyn.experiments.experiment_file import ExperimentError, Overrides, load_experiment, recipe_names
from xsyn.experiments.last_run import record_run
from xsyn.experiments.locks import LOCK_FILE, LOCK_TTL_S, CellBusy, acquire_lock, lock_holder, process_start_time
from xsyn.experiments.papers import load_paper
from xsyn.models.variants import VARIANTS

PAPERS = Path(__file__).resolve().parents[1].parent / "shared" / "papers"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


GRID_FILE = """
tasks = ["synth"]
variants = ["none", "gat"]
seeds = [1, 2]
models = ["tiny"]
baseline = "none"
[settings]
parser = "chain"
learning_rate = 1e-4
[grid.gat]
gat_delta = [1, 2]
[evaluation]
langs = ["svo", "sov"]
"""


def test_cells_are_the_grid_in_a_stable_order_with_resolved_settings(tmp_path):
    experiment = load_experiment(write(tmp_path / "grid.toml", GRID_FILE),
                                 Overrides(max_steps=7, runs_dir=str(tmp_path / "runs"), settings={"warmup_steps": 3}))
    names = [cell.name for cell in experiment.cells]
    assert names == ["synth/none-max_steps=7-seed1", "synth/gat-gat_delta=1-max_steps=7-seed1",
                     "synth/gat-gat_delta=2-max_steps=7-seed1", "synth/none-max_steps=7-seed2",
                     "synth/gat-gat_delta=1-max_steps=7-seed2", "synth/gat-gat_delta=2-max_steps=7-seed2"]
    config = experiment.config(experiment.cells[2])
    assert (config.variant, config.seed, config.max_steps, config.train_lang) == ("gat", 1, 7, "svo")
    assert config.model_settings["gat_delta"] == 2 and config.learning_rate == 1e-4 and config.warmup_steps == 3
    assert config.model_settings["gat_layers"] == 2  # the card's, under the file's settings
    assert Path(config.output_dir) == tmp_path / "runs" / names[2]
    assert "gat_delta" not in experiment.config(experiment.cells[0]).model_settings  # the baseline is never varied
    assert experiment.evaluation_of("synth").langs == ("svo", "sov")
    assert recipe_names() == ["ahmad2021", "li2021", "parses", "sgnet", "synth"]
    other_model = load_experiment(write(tmp_path / "grid.toml", GRID_FILE), Overrides(model="my/bert"))
    assert other_model.cells[0].name == "synth/none-my_bert-seed1"  # never the folder of the file's model
    bundled = load_experiment("ahmad2021")
    assert len(bundled.cells) == 9 * 2 * 3 and bundled.evaluation_of("pawsx").generalized
    assert not bundled.evaluation_of("panx").generalized


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('baseline = "none"', 'baseline = "sla"'), "baseline: 'sla' is not one of the variants"),
    (lambda t: t.replace("[grid.gat]", "[grid.none]"), "grid.none: varies the baseline"),
    (lambda t: t + "\nlearning_rates = [1]\n", "evaluation.learning_rates: unknown key"),  # below [evaluation]
    (lambda t: t.replace("variants =", "variant ="), "variant: unknown key; did you mean 'variants'?"),
    (lambda t: t + '\n[task.synth]\nsplitt = "test"\n', "task.synth.splitt: unknown key; did you mean 'split'?"),
    (lambda t: t.replace('"gat"]', '"gatt"]'), "variants: 'gatt' is not one of none, gat"),
    (lambda t: t.replace('tasks = ["synth"]', 'tasks = ["synthh"]'), "did you mean 'synth'?"),
    (lambda t: t.replace("seeds = [1, 2]", "seeds = 1"), "seeds: expected a list of integers, got 1"),
    (lambda t: t.replace("seeds = [1, 2]", "seeds = [1, true]"), "seeds[1]: expected an integer, got True"),
    (lambda t: t.replace("seeds = [1, 2]", "seeds = [1, 1]"), "seeds: lists 1 twice"),
    (lambda t: t.replace('models = ["tiny"]', "models = []"), "models: must not be empty"),
    (lambda t: t.replace('langs = ["svo", "sov"]', 'generalized = "yes"'),
     "evaluation.generalized: expected true or false, got 'yes'"),
    (lambda t: t + '\n[task.xnli]\nsplit = "test"\n', "task.xnli: names a task that is not in tasks (synth)"),
    (lambda t: t + '\n[task.synth]\nvariants = ["gat"]\n', "task.synth.variants: must be some of the file's"),
    (lambda t: t.replace("gat_delta = [1, 2]", "gat_delta = 1"), "grid.gat.gat_delta: expected a non-empty list"),
    (lambda t: t.replace("learning_rate = 1e-4", "learning_rate = -1.0"),
     "settings.learning_rate: must be a finite number > 0"),
    (lambda t: t.replace("learning_rate = 1e-4", "gat_dleta = 2"), "did you mean 'gat_delta'"),
    (lambda t: t.replace('langs = ["svo", "sov"]', 'langs = ["en"]'), "en not in the task's languages"),
])
def test_a_bad_experiment_file_is_refused_naming_the_file_and_key(tmp_path, edit, message):
    """One error form, as for cards and run settings: `file: dotted.key: what was expected; did you mean`."""
    path = write(tmp_path / "bad.toml", edit(GRID_FILE))
    with pytest.raises(ExperimentError) as err:
        load_experiment(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)


def test_a_live_lock_makes_a_cell_running_and_a_dead_ones_lock_is_taken_over(tmp_path):
    experiment = load_experiment(write(tmp_path / "grid.toml", GRID_FILE), Overrides(runs_dir=str(tmp_path / "r")))
    cell = experiment.cells[0]
    folder = experiment.cell_dir(cell)
    lock = acquire_lock(folder)
    running = cell_state(experiment, cell)
    assert running.state == "running" and f"pid {os.getpid()}" in running.detail and "heartbeat" in running.detail
    with pytest.raises(CellBusy):
        acquire_lock(folder)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    holder = json.loads(lock.path.read_text())
    lock.path.write_text(json.dumps({**holder, "pid": int(dead.stdout)}))  # a process that has exited
    assert cell_state(experiment, cell).state == "to do"
    taken = acquire_lock(folder)
    assert json.loads(taken.path.read_text())["pid"] == os.getpid()
    lock.release()  # the old owner's release must not remove the lock it lost
    assert taken.path.is_file()
    taken.release()
    assert not taken.path.exists()


def _lock_of(experiment, **owner) -> Path:
    folder = experiment.cell_dir(experiment.cells[0])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    path.write_text(json.dumps({"started": "2026-01-01 00:00:00", **owner}))
    return path


@pytest.mark.parametrize("case", ["pid reused", "other host, no heartbeat", "damaged", "empty", "not a dict"])
def test_a_stale_lock_never_keeps_a_cell_waiting(tmp_path, case):
    """A lock whose owner cannot be there any more is stale: the cell is 'to do' and the next run takes it."""
    experiment = load_experiment(write(tmp_path / "grid.toml", GRID_FILE), Overrides(runs_dir=str(tmp_path / "r")))
    me = {"pid": os.getpid(), "host": socket.gethostname()}
    if case == "pid reused":  # our pid is alive, but it started long after the recorded owner
        path = _lock_of(experiment, **me, process_start=time.time() - 10 * 86400)
    elif case == "other host, no heartbeat":
        path = _lock_of(experiment, pid=1234, host="node-17.cluster", process_start=1.0)
        os.utime(path, (time.time() - LOCK_TTL_S - 5,) * 2)
    else:
        path = _lock_of(experiment, **me)
        path.write_bytes({"damaged": b"\x00\xffpid=12", "empty": b"", "not a dict": b"[1, 2]"}[case])
    holder = lock_holder(path)
    assert holder is not None and holder.stale
    assert cell_state(experiment, experiment.cells[0]).state == "to do"
    acquire_lock(path.parent).release()


def test_a_live_owner_elsewhere_is_shown_with_its_heartbeat_and_never_overtaken(tmp_path):
    experiment = load_experiment(write(tmp_path / "grid.toml", GRID_FILE), Overrides(runs_dir=str(tmp_path / "r")))
    path = _lock_of(experiment, pid=4242, host="node-17.cluster", process_start=1.0, slurm_job="991")
    state = cell_state(experiment, experiment.cells[0])
    assert state.state == "running"
    assert "pid 4242 on node-17.cluster, SLURM job 991" in state.detail and "heartbeat 0 s ago" in state.detail
    with pytest.raises(CellBusy, match="node-17.cluster"):
        acquire_lock(path.parent)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:  # a live process on this host, the lock's recorded owner: held
        path.write_text(json.dumps({"pid": sleeper.pid, "host": socket.gethostname(), "started": "now",
                                    "process_start": process_start_time(sleeper.pid)}))
        assert not lock_holder(path).stale
        result = CliRunner().invoke(main, ["experiment", "run", str(tmp_path / "grid.toml"), "--output-dir",
                                           str(tmp_path / "r"), "--cell", experiment.cells[0].name])
        # issue 39, point 7: a cell another live process runs is not a failure (exit 0), and the owner is named
        assert result.exit_code == 0, result.output
        assert f"{experiment.cells[0].name}: held by another process, not run here (locked by pid {sleeper.pid}" \
            in result.output
        assert "1 of 1 cells are being run by other processes" in result.output
        assert "writes the report" not in result.output
    finally:
        sleeper.kill()
        sleeper.wait()
    assert lock_holder(path).stale  # its owner is gone now


def test_run_wait_blocks_until_the_owner_is_done_and_fails_only_for_a_failed_cell(tmp_path, monkeypatch):
    import threading

    from xsyn.experiments import launch, local

    monkeypatch.setattr(local, "WAIT_POLL_S", 0.1)
    experiment = load_experiment(write(tmp_path / "grid.toml", GRID_FILE), Overrides(runs_dir=str(tmp_path / "r")))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    path = _lock_of(experiment, pid=sleeper.pid, host=socket.gethostname(),
                    process_start=process_start_time(sleeper.pid))

    waiting = threading.Event()  # set once `run --wait` found the cell held and began to wait for it
    wait_for_held = launch.wait_for_held

    def noted_wait(*args, **kwargs):
        waiting.set()
        return wait_for_held(*args, **kwargs)

    monkeypatch.setattr(launch, "wait_for_held", noted_wait)

    def owner_fails() -> None:  # the other process records its cell's error and exits, while `run` waits
        waiting.wait(timeout=120)  # not a fixed delay: under load the command may take seconds to start waiting
        (path.parent / cells.ERROR_FILE).write_text("Traceback ...\nRuntimeError: out of memory\n")
        sleeper.kill()
        sleeper.wait()

    finisher = threading.Thread(target=owner_fails)
    finisher.start()
    try:
        result = CliRunner().invoke(main, ["experiment", "run", str(tmp_path / "grid.toml"), "--output-dir",
                                           str(tmp_path / "r"), "--cell", experiment.cells[0].name, "--wait"])
    finally:
        finisher.join()
    assert "waiting for 1 cells other processes are running" in result.output
    assert f"{experiment.cells[0].name}: failed: RuntimeError: out of memory" in result.output
    assert result.exit_code == 1 and "1 of 1 cells failed" in result.output


def test_the_owner_keeps_its_lock_fresh_with_a_heartbeat(tmp_path, monkeypatch):
    monkeypatch.setattr(locks, "HEARTBEAT_S", 0.05)
    lock = acquire_lock(tmp_path / "cell")
    os.utime(lock.path, (time.time() - 3600,) * 2)
    deadline = time.time() + 120  # a wait, not a speed: a loaded machine may run the heartbeat late
    while time.time() - lock.path.stat().st_mtime > 60 and time.time() < deadline:
        time.sleep(0.05)
    assert time.time() - lock.path.stat().st_mtime < 60
    lock.release()


def test_status_and_report_remember_how_the_experiment_was_run(tmp_path):
    """`run --max-steps 7` then plain `status`: the capped cells, not the uncapped ones that never ran."""
    source = write(tmp_path / "grid.toml", GRID_FILE)
    experiment = load_experiment(source, Overrides(max_steps=7, runs_dir=str(tmp_path / "r")))
    record_run(experiment)
    result = CliRunner().invoke(main, ["experiment", "status", str(source), "--output-dir", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "as last run: --max-steps 7" in result.output
    assert "synth/none-max_steps=7-seed1" in result.output and "synth/none-seed1 " not in result.output
    explicit = CliRunner().invoke(main, ["experiment", "status", str(source), "--output-dir", str(tmp_path / "r"),
                                         "--max-steps", "9"])
    assert "max_steps=9" in explicit.output and "as last run" not in explicit.output


def _numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+\.\d", text)]


def test_bundled_paper_scores_match_the_paper_text():
    """A few numbers against the papers' text; each table's average against the mean of its numbers."""
    ahmad, li = load_paper("ahmad2021"), load_paper("li2021")
    for paper in (ahmad, li):
        for table in paper.scores.values():
            for variant, printed in table.average.items():
                mean = math.fsum(table.systems[variant].values()) / len(table.languages)
                assert abs(mean - printed) < 0.1  # the paper averaged its unrounded scores
        for table in paper.pair_deltas.values():
            values = [v for cols in table.delta.values() for v in cols.values()]
            assert len(values) == len(table.languages) * (len(table.languages) - 1)
            assert abs(math.fsum(values) / len(values) - table.average) < 0.1
    if not PAPERS.is_dir():
        pytest.skip(f"the paper texts are not at {PAPERS}")
    ahmad_text = next(PAPERS.glob("004_*.txt")).read_text(encoding="utf-8")
    xnli = [ahmad.scores["xnli"].systems[v][lang] for v in ("none", "gat") for lang in ahmad.scores["xnli"].languages]
    assert "mbert " + " ".join(f"{x:.1f}" for x in xnli[:13]) + "+ syn.\n" + " ".join(
        f"{x:.1f}" for x in xnli[13:]) in ahmad_text
    mtop = ahmad.scores["mtop"]  # Table 6 (en fr es de hi, then the average) repeats Table 2's exact match
    assert "".join(f"{mtop.systems['gat'][lang]:.1f}" for lang in ("en", "fr", "es", "de", "hi")) + "----" \
           + f"{mtop.average['gat']:.1f}" in ahmad_text.replace("\n", "")
    pawsx = ahmad.pair_deltas["pawsx"].delta  # Table 3 (a), the fr row: en de es, the diagonal, ja ko zh
    assert "fr" + "".join(f"{pawsx['fr'][c]:.1f}" for c in ("en", "de", "es")) + "-" + "".join(
        f"{pawsx['fr'][c]:.1f}" for c in ("ja", "ko", "zh")) in ahmad_text
    li_text = next(PAPERS.glob("002_*.txt")).read_text(encoding="utf-8")
    sla = [li.scores[t].systems["sla"]["zh"] for t in ("chnsenticorp", "msra_ner", "cged")]
    chinese_table = li_text[:li_text.index("Table 3: Experimental results on Chinese")]
    row = _numbers([line for line in chinese_table.splitlines() if line.strip().startswith("+ SLA")][-1])
    assert [row[0], row[3], row[6]] == sla


def _run_cli(args: list[str]) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "xsyn", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_synth_recipe_survives_a_kill_and_a_failing_cell_and_reports_every_system(tmp_path):
    runs = tmp_path / "runs"
    common = ["--output-dir", str(runs), "--max-steps", "1", "--set", "max_train_examples=32",
              "--set", "max_eval_examples=32"]
    seed1 = [*common, "--cell", "*-seed1"]
    # a cell whose folder holds a run with other settings: it fails, the others run
    experiment = load_experiment("synth", Overrides(runs_dir=str(runs), max_steps=1,
                                                    settings={"max_train_examples": 32, "max_eval_examples": 32}))
    broken = runs / "synth" / "sla-max_steps=1-seed1"
    (broken / "state").mkdir(parents=True)
    other = {**experiment.config(experiment.cell("synth/sla-max_steps=1-seed1")).to_dict(), "learning_rate": 0.5}
    write(broken / "config.json", json.dumps(other))
    # kill the whole command once its first cell is done
    process = _run_cli(["experiment", "run", "synth", *seed1])
    first = runs / "synth" / "none-max_steps=1-seed1"
    deadline = time.time() + 240
    while time.time() < deadline and not (first / "eval-test" / "results.json").is_file():
        time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert (first / "eval-test" / "results.json").is_file()
    scored = json.loads((first / "eval-test" / "results.json").read_text())  # max_eval_examples caps the test too
    assert scored["max_eval_examples"] == 32 and set(scored["n_examples"].values()) == {32}
    finished_at = (first / "train_results.json").stat().st_mtime_ns
    status = CliRunner().invoke(main, ["experiment", "status", "synth", *common])
    assert re.search(r"none-max_steps=1-seed1\s+done", status.output), status.output

    result = CliRunner().invoke(main, ["experiment", "run", "synth", *seed1])
    assert result.exit_code == 1 and "1 of " in result.output and "cells failed (the others ran)" in result.output
    assert (first / "train_results.json").stat().st_mtime_ns == finished_at  # a finished cell is not run again
    status = CliRunner().invoke(main, ["experiment", "status", "synth", *common])
    assert re.search(r"sla-max_steps=1-seed1\s+failed\s+.*holds a run with other settings "
                     r"\(learning_rate: 0.5 there, 0.0003 now\)", status.output), status.output
    for variant in set(VARIANTS) - {"sla"}:  # the others, each a cell of the synth recipe
        assert re.search(fr"{variant}-max_steps=1-seed1\s+done", status.output)
    assert "Traceback" in (broken / "error.txt").read_text() and not list(runs.rglob(LOCK_FILE))
    report = CliRunner().invoke(main, ["experiment", "report", "synth", *common, "--resamples", "20"])
    assert report.exit_code == 0
    assert "5 done, 0 running, 1 failed, 6 to do" in (runs / "report" / "index.md").read_text()

    (broken / "config.json").unlink()  # the fix the message names: delete what blocks the cell
    (broken / "state").rmdir()
    result = CliRunner().invoke(main, ["experiment", "run", "synth", *seed1])
    assert result.exit_code == 0, result.output
    assert not (broken / "error.txt").exists()
    config = json.loads((broken / "config.json").read_text())
    assert config["max_steps"] == 1 and config["variant"] == "sla" and config["seed"] == 1

    result = CliRunner().invoke(main, ["experiment", "report", "synth", *common, "--resamples", "50"])
    assert result.exit_code == 0, result.output
    index = (runs / "report" / "index.md").read_text()
    assert "6 done, 0 running, 0 failed, 6 to do" in index
    assert "capped at 1 optimiser steps" in index
    for variant in VARIANTS:
        label = "none (baseline)" if variant == "none" else variant
        assert f"| {label} | 1 |" in index
    report = (runs / "report" / "synth" / "report.md").read_text()
    assert "## synth · test · accuracy" in report and "Δ against none (baseline)" in report
    assert "all systems: scored on at most 32 examples per language or pair" in report
    assert len(list((runs / "report" / "synth").rglob("pairs-*.png"))) == 6 + 5  # each system, each delta


def test_slurm_submission_is_one_array_with_the_options_asked_for(tmp_path, monkeypatch):
    for key, value in fake_slurm(tmp_path / "bin").items():
        monkeypatch.setenv(key, value)
    runs = tmp_path / "runs"
    result = CliRunner().invoke(main, [
        "experiment", "run", "synth", "--output-dir", str(runs), "--launcher", "slurm", "--partition", "gpu",
        "--gpus-per-node", "4", "--time", "90", "--cpus-per-task", "8", "--array-parallelism", "3",
        "--account", "nlp"])
    assert result.exit_code == 0, result.output
    assert "submitted 12 cells as SLURM job array 4242" in result.output
    script = (tmp_path / "bin" / "submitted.sh").read_text()
    for line in ("#SBATCH --partition=gpu", "#SBATCH --gpus-per-node=4", "#SBATCH --time=90",
                 "#SBATCH --cpus-per-task=8", "#SBATCH --array=0-11%3", "#SBATCH --account=nlp",
                 "#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=1", "#SBATCH --job-name=xsyn-synth"):
        assert line in script, script
    assert "-m submitit.core._submit" in script
    import submitit

    pickles = sorted((runs / "submitit").rglob("*_submitted.pkl"))
    assert len(pickles) == 12
    calls = [submitit.core.utils.DelayedSubmission.load(p) for p in pickles]
    assert {c.function.__name__ for c in calls} == {"cell_job"}
    assert {c.args[3] for c in calls} == {4}  # four GPUs: each cell under accelerate launch
    assert sorted(c.args[2] for c in calls) == sorted(cell.name for cell in load_experiment("synth").cells)
    status = CliRunner().invoke(main, ["experiment", "status", "synth", "--output-dir", str(runs)])
    assert re.search(r"synth/gat-seed2\s+to do\s+submitted as slurm job 4242_7 at", status.output), status.output


@pytest.mark.slow
def test_submitit_local_executor_runs_the_cells_of_the_synth_recipe(tmp_path):
    from xsyn.experiments.slurm import ClusterOptions, submit

    experiment = load_experiment("synth", Overrides(runs_dir=str(tmp_path / "runs"), max_steps=1,
                                                    settings={"max_train_examples": 32, "max_eval_examples": 32}))
    cells = experiment.select(["synth/none-*seed2"])
    submitted = submit(experiment, ClusterOptions(time_min=10), cluster="local", cells=cells)
    assert [cell for cell, _ in submitted] == cells
    outcomes = [job.result() for _, job in submitted]
    assert [(o["cell"], o["state"]) for o in outcomes] == [(c.name, "done") for c in cells]
    for cell in cells:
        assert cell_state(experiment, cell).state == "done"
        assert json.loads((experiment.cell_dir(cell) / "queued.json").read_text())["cluster"] == "local"
    assert submit(experiment, ClusterOptions(time_min=10), cluster="local", cells=cells) == []  # nothing left


@pytest.mark.slow
def test_local_launcher_runs_one_worker_per_gpu(tmp_path):
    """Two GPU names on a CPU machine: each worker process is told its own device and runs its cell."""
    from xsyn.experiments.local import run_local

    experiment = load_experiment("synth", Overrides(runs_dir=str(tmp_path / "runs"), max_steps=1,
                                                    settings={"max_train_examples": 32, "max_eval_examples": 32}))
    cells = experiment.select(["synth/gat-*seed2", "synth/sdoi-*seed2"])
    outcomes = run_local(experiment, ["0", "1"], cells, echo=lambda line: None)
    assert sorted((o.cell.name, o.state) for o in outcomes) == sorted((c.name, "done") for c in cells)
    devices = {(experiment.cell_dir(c) / "cell.log").read_text().split("CUDA_VISIBLE_DEVICES=")[1].split()[0]
               for c in cells}
    assert devices == {"0", "1"}


PAPER_FILE = """
tasks = ["pawsx"]
variants = ["none", "gat"]
seeds = [1]
models = ["tiny"]
baseline = "none"
paper = "ahmad2021"
[evaluation]
langs = ["en", "de"]
generalized = true
"""


def _fake_evaluation(folder: Path, variant: str, correct: dict[str, int]) -> None:
    """An evaluated cell as `xsyn evaluate` leaves it: results.json and per-example files of 10 examples each."""
    per_language = {lang: correct[lang] * 10.0 for lang in ("en", "de")}
    pairs = {row: {col: correct[row if row == col else f"{row}-{col}"] * 10.0 for col in ("en", "de")}
             for row in ("en", "de")}
    for key, right in {**correct, "en-en": correct["en"], "de-de": correct["de"]}.items():
        lines = [{"id": str(i), "prediction": "1" if i < right else "0", "reference": "1"} for i in range(10)]
        (folder / "eval-test" / "per_example").mkdir(parents=True, exist_ok=True)
        write(folder / "eval-test" / "per_example" / f"test-{key}.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    results = {"task": "pawsx", "variant": variant, "model": "tiny", "seed": 1, "metric": "accuracy",
               "primary": "accuracy", "split": "test", "per_language": per_language, "pairs": pairs,
               "pair_axes": ["sentence1", "sentence2"],
               "scores": {lang: {"accuracy": value} for lang, value in per_language.items()},
               "config": {"task": "pawsx", "variant": variant, "model": "tiny", "seed": 1, "train_lang": "en"}}
    write(folder / "eval-test" / "results.json", json.dumps(results))


def test_report_puts_the_papers_rows_and_our_difference_beside_ours(tmp_path):
    experiment = load_experiment(write(tmp_path / "pawsx.toml", PAPER_FILE), Overrides(runs_dir=str(tmp_path / "r")))
    none, gat = experiment.cells
    _fake_evaluation(experiment.cell_dir(none), "none", {"en": 8, "de": 6, "en-de": 5, "de-en": 5})
    _fake_evaluation(experiment.cell_dir(gat), "gat", {"en": 9, "de": 7, "en-de": 6, "de-en": 6})
    from xsyn.experiments.report import write_experiment_report
    from xsyn.report import BootstrapSettings

    index = write_experiment_report(experiment, tmp_path / "report", BootstrapSettings(resamples=20)).read_text()
    assert "| none (baseline) | 1 | 80.0 | 60.0 | 70.0 | 20.0 |" in index
    assert "| paper: mBERT (Table 2, page 4543) |  | 93.9 | 85.7 | 89.8 |  |" in index
    assert "| ours − paper |  | -13.9 | -25.7 | -19.8 |  |" in index
    assert "| paper: + Syn. (Table 2, page 4543) |  | 94.0 | 85.9 | 90.0 |  |" in index
    assert "| ours − paper |  | -4.0 | -15.9 | -10.0 |  |" in index
    assert "printed average for mBERT, over its 7 languages, is 82.9" in index
    # Table 3 (a): en->de +0.5, de->en +0.7; ours +10.0 on both
    assert "Mean over the 2 pairs both have: ours +10.0, paper +0.6." in index
    assert "| en | – | +10.0 / +0.5 |" in index and "| de | +10.0 / +0.7 | – |" in index
    rows = (tmp_path / "report" / "pawsx" / "paper.csv").read_text().splitlines()
    assert "test,gat,difference,de,accuracy,-15.9000" in rows
    assert (tmp_path / "report" / "pawsx" / "report.md").is_file()


def test_a_failed_cell_shows_xsyns_message_whole_not_a_librarys_last_line(tmp_path, monkeypatch):
    from xsyn.utils.errors import MissingInputError

    experiment = load_experiment(write(tmp_path / "grid.toml", GRID_FILE), Overrides(runs_dir=str(tmp_path / "r")))

    def offline(*args, **kwargs):
        raise MissingInputError("cannot load the tokenizer 'nosuch/model': pass a vocab.txt (--tokenizer). "
                                "Cause: no connection.\nCheck your internet connection.")

    monkeypatch.setattr(cells, "train_and_evaluate", offline)
    outcome = cells.run_cell(experiment, experiment.cells[0])
    assert outcome.state == "failed"
    assert outcome.detail.startswith("cannot load the tokenizer 'nosuch/model'")
    assert outcome.detail.endswith("Check your internet connection.")
    error = (experiment.cell_dir(experiment.cells[0]) / "error.txt").read_text()
    assert "Traceback" in error and not (experiment.cell_dir(experiment.cells[0]) / LOCK_FILE).exists()


README = Path(__file__).resolve().parents[1] / "docs" / "experiments.md"


def test_readme_and_experiment_help_name_every_recipe_with_its_tasks_and_cells():
    """The README's recipe list gives each bundled recipe's number of tasks and cells as the recipe has them
    (it once listed li2021 as its three Chinese tasks and ahmad2021 as 6 tasks), and `experiment --help`
    names every recipe (it once left out `parses`)."""
    text = " ".join(README.read_text(encoding="utf-8").split())
    helped = " ".join(CliRunner().invoke(main, ["experiment", "--help"]).output.split())
    for name in recipe_names():
        experiment = load_experiment(name)
        stated = re.search(rf"`{name}` \((\d+) tasks?, ([\d,]+) cells", text)
        assert stated, f"README does not state {name}'s tasks and cells"
        assert (int(stated[1]), int(stated[2].replace(",", ""))) == (len(experiment.tasks), len(experiment.cells))
        assert re.search(rf"bundled recipe: [a-z0-9, ]*\b{name}\b", helped), name


def test_status_shows_the_papers_averages_beside_ours_before_any_report(tmp_path):
    """`status` gave no paper numbers; only `report` did, and only for finished cells."""
    experiment = load_experiment(write(tmp_path / "pawsx.toml", PAPER_FILE), Overrides(runs_dir=str(tmp_path / "r")))
    none, _gat = experiment.cells
    _fake_evaluation(experiment.cell_dir(none), "none", {"en": 8, "de": 6, "en-de": 5, "de-en": 5})
    result = CliRunner().invoke(main, ["experiment", "status", str(tmp_path / "pawsx.toml"),
                                       "--output-dir", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    # Table 2's printed averages (82.9, 84.3); ours: the none cell's en 80 and de 60, of the paper's 7 languages
    assert ("  pawsx tiny accuracy (Table 2, page 4543): mBERT (none) 82.9 [70.0, 1/1 seeds, 2/7 langs], "
            "+ Syn. (gat) 84.3 [–]") in result.output.splitlines()


def test_status_of_a_large_experiment_names_each_missing_input_once_and_lists_few_cells(tmp_path, monkeypatch):
    """li2021's status was 2,342 lines, the same "needs CGED data" text once per cell."""
    monkeypatch.setenv("XSYN_DATA_DIR", str(tmp_path / "no-data"))
    file = write(tmp_path / "mtop.toml", 'tasks = ["mtop", "synth"]\nvariants = ["none", "gat"]\n'
                 f'seeds = {list(range(1, 21))}\nmodels = ["tiny"]\nbaseline = "none"\n[settings]\nparser = "chain"\n')
    args = ["experiment", "status", str(file), "--output-dir", str(tmp_path / "r")]
    short = CliRunner().invoke(main, args)
    assert short.exit_code == 0, short.output
    assert short.output.count("MTOP data, which is not on the hub") == 1
    assert "missing (mtop: 40 cells): needs MTOP data" in short.output
    assert "mtop/none" not in short.output and "synth/gat" not in short.output
    assert re.search(r"^mtop +40 +0 +0 +0 +40$", short.output, re.M) and re.search(r"^synth +40 ", short.output, re.M)
    assert "80 cells in" in short.output and "(80 not listed; --cells lists every one)" in short.output
    every = CliRunner().invoke(main, [*args, "--cells"])
    assert sum(line.startswith(("mtop/", "synth/")) for line in every.output.splitlines()) == 80
    assert every.output.count("MTOP data, which is not on the hub") == 1


def test_report_html_is_one_page_with_the_papers_rows_and_each_tasks_report_under_the_index(tmp_path):
    experiment = load_experiment(write(tmp_path / "pawsx.toml", PAPER_FILE), Overrides(runs_dir=str(tmp_path / "r")))
    none, gat = experiment.cells
    _fake_evaluation(experiment.cell_dir(none), "none", {"en": 8, "de": 6, "en-de": 5, "de-en": 5})
    _fake_evaluation(experiment.cell_dir(gat), "gat", {"en": 9, "de": 7, "en-de": 6, "de-en": 6})
    result = CliRunner().invoke(main, ["experiment", "report", str(tmp_path / "pawsx.toml"), "--output-dir",
                                       str(tmp_path / "r"), "--resamples", "20", "--html",
                                       "--report-dir", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "report" / "index.html").read_text()
    assert "<td>paper: mBERT (Table 2, page 4543)</td>" in page and "<td>+10.0 / +0.5</td>" in page
    # the task's report follows the index one level down, and the index's link to it leads there
    assert '<a href="#pawsx-report-md">pawsx/report.md</a>' in page
    assert '<div class="part" id="pawsx-report-md">' in page
    task = page.split('id="pawsx-report-md">')[1]
    assert task.startswith('\n<h2 id="xsyn-report">xsyn report</h2>') and '<h3 id="pawsx-test-accuracy">' in task
    assert task.count('<img src="data:image/png;base64,') == (tmp_path / "report" / "pawsx" / "report.md").read_text(
        ).count("![")


def test_a_folder_given_for_the_experiment_file_is_named_as_one(tmp_path):
    """`xsyn experiment status runs/` (the output folder, not its file) said "no such file" of a folder that exists."""
    (tmp_path / "paws.toml").write_text("")
    res = CliRunner().invoke(main, ["experiment", "status", str(tmp_path)])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert (f"{tmp_path}: a folder, not an experiment file: give its .toml file (this folder holds paws.toml)"
            in res.output)
    with pytest.raises(ExperimentError, match="no such file, and no bundled recipe of that name"):
        load_experiment(tmp_path / "missing.toml")
