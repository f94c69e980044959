"""`xsyn experiment plan` on the shipped benchmark files: the H100's file (bfloat16 eager steps only) gives hours,
a precision a device lacks is derived by another device's measured ratio and said once, the papers' checkpoints
are known offline, the grid folds to a row per variant, totals and N GPUs, and settings no plan can count."""

import json
import subprocess

import pytest
from console import REPO, console_env, run_xsyn, xsyn_script
from test_experiments_plan import EXPERIMENT as PLAN_EXPERIMENT

from xsyn.experiments.bench_figures import EXTRAPOLATED, StepBench, derive_precisions
from xsyn.experiments.experiment_file import Overrides, load_experiment
from xsyn.experiments.plan import make_plan, plan_lines
from xsyn.models.names import ENCODER_SHAPES

MBERT = ENCODER_SHAPES["mbert"].config  # the shape the GPU benchmarks time

# the plan tests' experiment, on the data's own trees and in float32 (the recipes' mixed_precision = "no")
EXPERIMENT = PLAN_EXPERIMENT.replace('parser = "udpipe:models/en.udpipe"', 'parser = "gold"').replace(
    "epochs = 3\n", 'epochs = 3\nmixed_precision = "no"\n')


def _row(seconds, peak):
    return {"step_seconds": seconds, "tokens_per_second": 4096 / seconds, "peak_bytes": peak}


H100 = StepBench(REPO / "h100.json", "NVIDIA H100 80GB HBM3", "2026-11-27",
                 {"bfloat16": {"none": _row(0.05, 2e9), "gat": _row(0.08, 3e9)}}, MBERT)
H200 = StepBench(REPO / "h200.json", "NVIDIA H200", "2026-11-26",
                 {"bfloat16": {"none": _row(0.02, 1e9), "gat": _row(0.04, 1e9)},
                  "float32": {"none": _row(0.05, 1.5e9), "gat": _row(0.06, 2e9)}}, MBERT)


def test_a_precision_the_device_lacks_is_its_other_precision_times_the_ratio_another_device_measured():
    derived = derive_precisions(H100, [H100, H200])
    # float32/bfloat16 on the H200: none 0.05 / 0.02 = 2.5, gat 0.06 / 0.04 = 1.5; peaks 1.5 and 2
    assert derived.rows["float32"]["none"]["step_seconds"] == pytest.approx(0.125)
    assert derived.rows["float32"]["gat"]["step_seconds"] == pytest.approx(0.12)
    assert derived.rows["float32"]["none"]["peak_bytes"] == pytest.approx(3e9)
    assert derived.rows["float32"]["gat"]["peak_bytes"] == pytest.approx(6e9)
    assert derived.rows["bfloat16"] == H100.rows["bfloat16"]  # what was measured stays as measured
    assert "float32/bfloat16 ratio measured on NVIDIA H200 (h200.json): gat x1.50, none x2.50" in derived.derived[
        "float32"]
    assert derive_precisions(H100, [H100]).rows.keys() == {"bfloat16"}  # nothing to derive it by: not invented


def _experiment(tmp_path):
    (tmp_path / "plan.toml").write_text(EXPERIMENT, encoding="utf-8")
    return load_experiment(str(tmp_path / "plan.toml"), Overrides(runs_dir=str(tmp_path / "runs")))


def test_derived_step_times_hours_on_n_gpus_and_the_note_said_once(tmp_path):
    from xsyn.experiments.bench_figures import Benchmarks

    plan = make_plan(_experiment(tmp_path), "h100", Benchmarks(steps=[H100]), {"pawsx": 100}, 2, ratios_from=[H200],
                     gpus=4)
    none, gat, gat_long = plan.tasks[0].systems
    assert none.steps.value == 12  # 3 epochs x ceil(100 / 32)
    assert (none.step_seconds.value, none.step_seconds.basis) == (pytest.approx(0.125), EXTRAPOLATED)
    assert gat.step_seconds.value == pytest.approx(0.12)
    assert gat_long.step_seconds.value == pytest.approx(0.24)  # twice the tokens a step
    # cells: 2 x 1.5 s, 2 x 1.44 s, 2 x 2.88 s; longest first on 4 GPUs: 2.88, 2.88, 1.5 + 1.44, 1.5 + 1.44
    assert plan.hours_on_gpus.value * 3600 == pytest.approx(2.94)
    lines = plan_lines(plan)
    total = next(line for line in lines if line.startswith("Total:"))
    assert "training 11.6 s x one cell at a time, 2.94 s x on 4 GPUs at once" in total
    notes = lines[lines.index("Notes:") + 1:]
    assert sum("has no float32 step times in h100.json" in note for note in notes) == 1
    assert len(notes) == len(set(notes))
    # a row per variant: gat's two grid points summed (4 cells, 1.44 s to 2.88 s a cell, 8.64 s in all)
    row = next(line for line in lines if line.strip().startswith("gat (2 grid points)"))
    assert row.split()[4:6] == ["4", "100"] and "1.44 s–2.88 s x" in row and "8.64 s x" in row
    assert "grid points summed in a row: gat: max_length 128|256" in "\n".join(lines)


def _plan_json(*args):
    return json.loads(run_xsyn("experiment", "plan", *args, "--json", cwd=REPO).stdout)


def _cell_hours(plan):
    return {cell: s["hours_per_cell"] for t in plan["tasks"] for s in t["systems"] for cell in s["cells"]}


def test_the_readmes_ahmad2021_plan_on_h100_gives_hours_for_every_cell(tmp_path):
    empty = str(tmp_path / "empty")
    plan = _plan_json("ahmad2021", "--device", "h100", "--data-dir", empty)
    hours = _cell_hours(plan)
    assert len(hours) == 54 and all(h["value"] > 0 for h in hours.values()), hours
    assert plan["step_bench"]["source"].endswith("gpu_h100.json")
    # --bench with the same file alone: the same hours (the ratio from the shipped H200 file)
    alone = _plan_json("ahmad2021", "--device", "h100", "--data-dir", empty, "--bench",
                       str(REPO / "benchmarks" / "gpu_h100.json"))
    assert {c: h["value"] for c, h in _cell_hours(alone).items()} == {c: h["value"] for c, h in hours.items()}
    text = run_xsyn("experiment", "plan", "ahmad2021", "--device", "h100", "--data-dir", empty, cwd=REPO).stdout
    assert "unmeasured" not in text and text.count("has no float32 step times in gpu_h100.json") == 1
    assert "- gpu_h100.json, a caveat recorded with its figures: compile_modes ran eleven worker" in text
    total = next(line for line in text.splitlines() if line.startswith("Total:"))
    assert "training ? ?" not in total and "parsing at least" in total and "on 8 GPUs at once" in total


def test_li2021_on_h200_is_a_row_per_task_and_variant_with_hours_and_each_note_once(tmp_path):
    empty = str(tmp_path / "empty")
    plan = _plan_json("li2021", "--device", "h200", "--data-dir", empty)
    hours = _cell_hours(plan)
    assert len(hours) == 2340 and all(h["value"] > 0 for h in hours.values())
    text = run_xsyn("experiment", "plan", "li2021", "--device", "h200", "--data-dir", empty, "--gpus", "16",
                    cwd=REPO).stdout
    lines = text.splitlines()
    rows = [line for line in lines if line.startswith("  ") and line.split()[0] in ("none", "wla", "sla")]
    # Table 1: 4 tasks x 2 models x 3 variants; Table 2: 4 x 1 x 2; Table 3: 3 x 1 x 3
    assert len(rows) == 24 + 8 + 9 and len(lines) < 200
    assert not any("?" in row.split("train examples")[0] for row in rows)
    for row in rows:
        assert "? ?" not in row, row
    notes = lines[lines.index("Notes:") + 1:]
    assert len(notes) == len(set(notes)) and not any("shape of" in note for note in notes)
    assert "on 16 GPUs at once" in next(line for line in lines if line.startswith("Total:"))


def _plan_error(tmp_path, *args):
    done = subprocess.run([str(xsyn_script()), "experiment", "plan", *args], cwd=tmp_path, env=console_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    return done.stderr


def test_an_overflowing_epochs_and_a_huge_examples_are_refused_each_with_its_own_blame(tmp_path):
    (tmp_path / "e.toml").write_text(EXPERIMENT.replace("epochs = 3", "epochs = 1e308"), encoding="utf-8")
    error = _plan_error(tmp_path, "e.toml")
    assert "e.toml: cell pawsx/none-seed1: infinitely many optimiser steps (epochs 1e+308" in error
    assert "give a smaller epochs or max_steps" in error
    error = _plan_error(tmp_path, "ahmad2021", "--examples", "pawsx=100000000000000000000")
    assert "Error: --examples pawsx=100000000000000000000:" in error and "epochs or max_steps" not in error
    assert "give pawsx's real number of training examples" in error


def test_max_steps_is_said_in_words_not_as_a_bare_name(tmp_path):
    text = run_xsyn("experiment", "plan", "ahmad2021", "--max-steps", "2", "--data-dir", str(tmp_path / "e"),
                    cwd=REPO).stdout
    notes = text.split("Notes:")[1].splitlines()
    assert "- max_steps" not in notes
    assert "- max_steps 2: each cell stops at that step" in notes
