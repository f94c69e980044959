"""The one training loop as `xsyn finetune` drives it: checkpoints at their own interval and how many are
kept, the curves picture, progress away from a terminal, dev scores with -v, the warmup warning, Ctrl-C
and resuming from the folder alone, training and evaluating in one call, and an output folder that cannot
be written (read-only, or a disk that fills while a checkpoint is written)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.data.synth import write_vocab

QUICK = ["--task", "synth", "--model", "tiny", "--train-lang", "svo", "--parser", "chain", "--quiet",
         "--max-train-examples", "64", "--set", "max_eval_examples=32", "--batch-size", "16", "--max-length", "48",
         "--variant", "gat", "--set", "log_every=1"]


@pytest.fixture(scope="module")
def common(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("driver")
    return [*QUICK, "--tokenizer", str(write_vocab(root / "vocab.txt")), "--cache-dir", str(root / "cache")]


def finetune(*args: str):
    return CliRunner().invoke(main, ["finetune", *args])


def log_lines(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def four_steps(common, tmp_path_factory):
    """Four steps, a state saved at each, two kept; -v given after the command; a warmup longer than the run;
    progress lines at every step (their interval set to 0)."""
    from xsyn.training.loop import StepProgress

    out = tmp_path_factory.mktemp("four") / "run"
    interval, StepProgress.LINE_SECONDS = StepProgress.LINE_SECONDS, 0.0
    try:
        result = finetune(*[arg for arg in common if arg != "--quiet"], "--output-dir", str(out), "--max-steps", "4",
                          "--eval-every", "2",
                          "--checkpointing-steps", "1", "--save-total-limit", "2", "--set", "warmup_steps=10", "-v")
    finally:
        StepProgress.LINE_SECONDS = interval
    assert result.exit_code == 0, result.output
    return out, result.output


def test_states_are_saved_at_the_checkpointing_steps_and_only_the_newest_are_kept(four_steps):
    out, _ = four_steps
    assert json.loads((out / "state" / "trainer_state.json").read_text())["step"] == 4
    kept = sorted(p.name for p in out.glob("checkpoint-*"))
    assert kept == ["checkpoint-3"]  # state/ (step 4) and the one before it: --save-total-limit 2
    assert json.loads((out / "checkpoint-3" / "trainer_state.json").read_text())["step"] == 3
    assert (out / "checkpoint-3" / "model.safetensors").is_file()  # a whole resumable state
    config = json.loads((out / "config.json").read_text())
    assert config["checkpointing_steps"] == 1 and config["save_total_limit"] == 2


def test_every_run_folder_has_its_training_curves(four_steps):
    from matplotlib.image import imread

    out, _ = four_steps
    picture = imread(out / "training_curves.png")
    assert picture.shape[0] > 300 and picture.shape[1] > 300  # a panel per loss, learning rate, dev score
    assert not list(out.glob(".training_curves.png.*"))  # written atomically, no temp file left


def test_the_curves_are_drawn_once_at_the_end_however_long_the_run_and_however_often_it_saves(common, tmp_path,
                                                                                               monkeypatch):
    """A run redrew training_curves.png at a save once a minute had passed (0.4-0.6 s each, matplotlib loaded for a
    file nothing reads mid-run); here every step saves and every clock reading is a minute after the one before."""
    import time

    import xsyn.training.driver as driver

    drawn, clock = [], iter(range(0, 10**9, 61))
    real = driver.write_curves
    monkeypatch.setattr(driver, "write_curves", lambda folder: drawn.append(folder) or real(folder))
    monkeypatch.setattr(time, "monotonic", lambda: float(next(clock)))
    out = tmp_path / "run"
    result = finetune(*common, "--output-dir", str(out), "--max-steps", "3", "--checkpointing-steps", "1")
    assert result.exit_code == 0, result.output
    assert [folder.path for folder in drawn] == [out] and (out / "training_curves.png").is_file()


def test_each_loss_has_its_own_panel_so_a_small_task_loss_is_not_flattened_by_a_large_one(four_steps):
    """gat's task loss (~0.7) and distance loss (~10) shared one axis, so the task loss looked flat."""
    from xsyn.utils.plots import curve_panels

    out, _ = four_steps
    records = log_lines(out)
    panels = curve_panels(records)
    labels = [label for label, _, _ in panels]
    assert labels == ["task_loss", "distance_loss", "depth_loss", "learning rate", "dev score"]
    task = dict(panels[0][1])
    assert task == {r["step"]: r["task_loss"] for r in records if "task_loss" in r} and len(task) == 4
    assert [step for step, _ in panels[4][1]] == [2, 4] and panels[4][2] and not panels[0][2]


def test_progress_off_a_terminal_is_lines_with_the_task_loss_and_dev_scores_show_with_v(four_steps):
    out, output = four_steps
    lines = [line for line in output.splitlines() if line.startswith("synth gat: ")]
    assert [line.split()[2] for line in lines] == ["1/4", "2/4", "3/4", "4/4"]
    assert all(re.search(r"(steps/s|s/step), \d+ examples/s, ETA", line) for line in lines)  # both rates, together
    assert "\r" not in output  # no bar's redraws: neither xsyn's nor those of datasets' feature preparation
    last = log_lines(out)[-2]  # the last step's losses (the dev line follows)
    assert last["task_loss"] != last["loss"]  # the probe losses count in the sum, not in what the bar shows
    assert f"task_loss {last['task_loss']:.4f}" in lines[-1] and f"loss {last['loss']:.4f}" not in lines[-1]
    dev = [r for r in log_lines(out) if "dev_primary" in r]
    assert f"step 2: dev {dev[0]['dev_primary']:.4g}" in output and f"step 4: dev {dev[1]['dev_primary']:.4g}" in output


def test_a_warmup_longer_than_the_run_is_warned_about_and_kept(four_steps):
    out, output = four_steps
    assert "warmup_steps 10 is not shorter than the run's 4 steps" in output
    assert "--set warmup_steps=1" in output  # a tenth of the steps, at least one
    peak = json.loads((out / "config.json").read_text())["learning_rate"]
    lrs = [r["lr"] for r in log_lines(out) if "lr" in r]
    assert lrs == pytest.approx([0.0, peak / 10, peak * 2 / 10, peak * 3 / 10], rel=1e-6)  # never rescaled


def test_a_short_run_off_a_terminal_writes_no_progress_lines(common, tmp_path):
    res = finetune(*common, "--output-dir", str(tmp_path / "run"), "--max-steps", "2")
    assert res.exit_code == 0, res.output
    assert "steps (" not in res.output  # a line at most every 30 s, and none for a run shorter than that


def test_ctrl_c_names_the_resume_command_and_the_folder_alone_continues_and_evaluates(common, tmp_path,
                                                                                       monkeypatch):
    from xsyn.training.loop import Stepper

    out = tmp_path / "run"
    real_step, calls = Stepper.step, []

    def interrupted_in_step_3(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(Stepper, "step", interrupted_in_step_3)
    res = finetune(*common, "--output-dir", str(out), "--max-steps", "4", "--eval-every", "4",
                   "--checkpointing-steps", "1")
    assert res.exit_code == 130, res.output
    assert f"interrupted: the state of step 2 is saved in {out / 'state'}. Continue with:" in res.output
    assert f"xsyn finetune --resume {out}" in res.output
    monkeypatch.setattr(Stepper, "step", real_step)
    res = CliRunner().invoke(main, ["finetune", "--resume", str(out), "--eval-langs", "svo,sov", "--quiet"])
    assert res.exit_code == 0, res.output
    assert json.loads((out / "train_results.json").read_text())["steps"] == 4
    assert [r["step"] for r in log_lines(out) if "lr" in r] == [1, 2, 3, 4]  # each step logged once
    results = json.loads((out / "eval-test" / "results.json").read_text())
    assert sorted(results["per_language"]) == ["sov", "svo"]
    assert f"svo\t{results['primary']} {results['per_language']['svo']:.2f}" in res.output  # as `xsyn evaluate`
    # once more: the run is complete, which is said; nothing is reloaded (56 s on XNLI), featurised or rewritten
    import xsyn.run.train

    config_written = (out / "config.json").stat().st_mtime_ns
    monkeypatch.setattr(xsyn.run.train, "load_task_data", lambda *a, **k: pytest.fail("the data was reloaded"))
    import xsyn.run.workflow

    for module in (xsyn.run.train, xsyn.run.workflow):
        monkeypatch.setattr(module, "finetune_resources", lambda *a, **k: pytest.fail("the model was reloaded"))
    res = CliRunner().invoke(main, ["finetune", "--resume", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    assert f"{out} is a finished run (4 steps, train_results.json): nothing to continue" in res.output
    assert "trained: 4 steps in " in res.output and "{" not in res.output  # the figures, not 40 lines of JSON
    assert f"run folder: {out.resolve()} (train_results.json: the whole summary; best/: the best checkpoint)" \
        in res.output
    assert (out / "config.json").stat().st_mtime_ns == config_written


def test_a_folder_that_holds_files_is_refused_naming_both_ways_on(common, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    res = finetune(*common, "--output-dir", str(out), "--max-steps", "1")
    assert res.exit_code == 1 and "already holds 1 entries (notes.txt)" in res.output
    assert f"--resume {out}" in res.output and "--overwrite-output-dir" in res.output
    res = CliRunner().invoke(main, ["finetune", "--resume", str(tmp_path / "absent")])
    assert res.exit_code == 2 and "config.json does not exist, so there is no run there to continue" in res.output


# -- an output folder that cannot be written --------------------------------------------------------

def test_a_read_only_output_folder_is_named_with_the_fix_and_nothing_is_touched(common, tmp_path, immutable):
    parent = tmp_path / "ro"
    parent.mkdir()
    immutable(parent)
    res = finetune(*common, "--output-dir", str(parent / "run"), "--max-steps", "1")
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert f"cannot create the folder {parent / 'run'}" in res.output
    error = res.output[res.output.index("Error: "):]  # (after the readiness table of the run's languages)
    assert "choose a folder you can write to (--output-dir)" in error and len(error.splitlines()) == 1


def test_a_disk_that_fills_while_a_checkpoint_is_written_keeps_what_was_saved_before(common, tmp_path,
                                                                                    file_size_limit):
    from xsyn.models.factory import load_model

    out = tmp_path / "run"
    args = [*common, "--output-dir", str(out), "--eval-every", "2"]
    assert finetune(*args, "--max-steps", "2").exit_code == 0  # state and best of step 2
    before = {p.name: p.read_bytes() for p in (out / "state").iterdir()}
    weights = (out / "best" / "model.safetensors").stat().st_size
    with file_size_limit(weights // 2):  # the next model file is cut short: the disk is full
        res = finetune(*args, "--max-steps", "4", "--resume")
    assert res.exit_code == 1 and "Traceback" not in res.output
    # the first write after step 2 is a better model's best/ or, if the dev score did not rise, the state
    assert (f"cannot write the checkpoint {out / 'best.tmp'}" in res.output
            and f"the best checkpoint so far, {out / 'best'}, is kept" in res.output) or (
        f"cannot write the training state to {out / 'state.tmp'}" in res.output
        and f"the last complete state, {out / 'state'}, is kept" in res.output)
    assert "File too large" in res.output and "continue with --resume" in res.output
    assert not (out / "best.tmp").exists() and not (out / "state.tmp").exists()
    assert {p.name: p.read_bytes() for p in (out / "state").iterdir()} == before  # the state of step 2, whole
    assert load_model(out / "best") is not None
    res = finetune(*args, "--max-steps", "4", "--resume")  # space freed: the advice works
    assert res.exit_code == 0, res.output
    assert json.loads((out / "train_results.json").read_text())["steps"] == 4
