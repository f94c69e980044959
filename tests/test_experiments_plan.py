"""`xsyn experiment plan` and the ETA of `experiment status`: every figure worked out by hand from small
benchmark files and a small data folder, and marked for what it rests on."""

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.experiments.bench_figures import COUNTED, EXTRAPOLATED, GIVEN, MEASURED, UNKNOWN, read_benchmarks
from xsyn.experiments.experiment_file import ExperimentError, Overrides, load_experiment
from xsyn.experiments.plan import make_plan
from xsyn.experiments.status import progress
from xsyn.training.folder import RunFolder

EXPERIMENT = """
title = "plan test"
tasks = ["pawsx"]
variants = ["none", "gat"]
seeds = [1, 2]
models = ["bert-base-multilingual-cased"]
[settings]
parser = "udpipe:models/en.udpipe"
batch_size = 32
max_length = 128
epochs = 3
save_total_limit = 2
[grid.gat]
max_length = [128, 256]
[evaluation]
langs = ["en", "de"]
"""
H100 = {"environment": {"device": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "date": "2026-11-27"},
        "quick": False,
        "steps": {"bench_model": {"status": "ok", "bfloat16": {  # what `auto` precision trains in on an H100
            "none": {"step_seconds": 0.05, "tokens_per_second": 4096 / 0.05},  # 32 x 128 tokens a step
            "gat": {"step_seconds": 0.08, "tokens_per_second": 4096 / 0.08}}}}}
SIZES = {"mbert": {"rows": {}, "embedding": {"parameters": 1000, "optimizer_state_bytes": 8000}}}
PARSE = {"parser": "udpipe:models/en.udpipe", "parse": [{"workers": 1, "sentences_per_s": 400.0},
                                                         {"workers": 2, "sentences_per_s": 700.0}]}


def _tsv(path, n):
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [f"{i}\tthe cat sat {i}\ta cat sat {i}\t{i % 2}" for i in range(n)]
    path.write_text("id\tsentence1\tsentence2\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")


@pytest.fixture
def setup(tmp_path):
    data = tmp_path / "data" / "pawsx" / "x-final"
    _tsv(data / "en" / "train.tsv", 100)
    _tsv(data / "en" / "dev_2k.tsv", 10)
    _tsv(data / "en" / "test_2k.tsv", 20)
    _tsv(data / "de" / "test_2k.tsv", 30)
    bench = tmp_path / "bench"
    bench.mkdir()
    for name, content in (("h100.json", H100), ("sizes.json", SIZES), ("parse.json", PARSE)):
        (bench / name).write_text(json.dumps(content), encoding="utf-8")
    (tmp_path / "plan.toml").write_text(EXPERIMENT, encoding="utf-8")
    experiment = load_experiment(str(tmp_path / "plan.toml"), Overrides(data_dir=str(tmp_path / "data"),
                                                                       runs_dir=str(tmp_path / "runs")))
    return experiment, read_benchmarks([bench])


def test_steps_hours_parse_time_and_disk_from_the_benchmarks_and_the_data(setup):
    experiment, benchmarks = setup
    plan = make_plan(experiment, "h100", benchmarks, parse_workers=2)
    (task,) = plan.tasks
    none, gat, gat_long = task.systems
    assert [s.system for s in task.systems] == ["none", "gat (max_length=128)", "gat (max_length=256)"]
    for system in task.systems:
        assert len(system.cells) == 2  # two seeds
        assert (system.examples.value, system.examples.basis) == (100, COUNTED)
        assert (system.steps.value, system.steps.basis) == (12, COUNTED)  # 3 epochs x ceil(100 / 32)
        # 2 states (1000 float32 weights + 8000 bytes of AdamW moments each) and the best weights
        assert (system.disk_per_cell.value, system.disk_per_cell.basis) == (2 * (4000 + 8000) + 4000, MEASURED)
    assert (none.step_seconds.value, none.step_seconds.basis) == (0.05, MEASURED)
    assert (gat.step_seconds.value, gat.step_seconds.basis) == (0.08, MEASURED)
    # twice the tokens a step: twice the matrix work of the measured 32 x 128
    assert gat_long.step_seconds.value == pytest.approx(0.16) and gat_long.step_seconds.basis == EXTRAPOLATED
    assert none.hours_per_cell.value == pytest.approx(12 * 0.05 / 3600) and none.hours_per_cell.basis == MEASURED
    assert plan.hours.value == pytest.approx(2 * 12 * (0.05 + 0.08 + 0.16) / 3600)
    assert plan.hours.basis == EXTRAPOLATED  # one extrapolated part makes the total one
    # en: train 100 + dev 10 + test 20 examples, two sentences each; de: 30 test examples; 700 sentences/s at 2
    assert {lang: (f.value, f.basis) for lang, f in task.sentences.items()} == {"en": (260, COUNTED),
                                                                               "de": (60, COUNTED)}
    assert task.parse_seconds["en"].value == pytest.approx(260 / 700) and task.parse_seconds["en"].basis == MEASURED
    four = make_plan(experiment, "h100", benchmarks, parse_workers=4).tasks[0].parse_seconds["de"]
    assert four.value == pytest.approx(60 / (700 / 2 * 4)) and four.basis == EXTRAPOLATED


def test_an_unmeasured_device_and_missing_data_are_said_to_be_so(setup, tmp_path):
    experiment, benchmarks = setup
    plan = make_plan(experiment, "h200", benchmarks, parse_workers=2)
    assert plan.step_bench is None and "h200 is an unmeasured device" in plan.notes[0]
    assert all(s.step_seconds.basis == UNKNOWN and s.hours_per_cell.value is None for s in plan.tasks[0].systems)
    assert plan.tasks[0].systems[0].steps.value == 12  # what does not need the device is still there
    (tmp_path / "data" / "pawsx" / "x-final" / "en" / "train.tsv").unlink()
    bare = load_experiment(str(tmp_path / "plan.toml"), Overrides(data_dir=str(tmp_path / "data")))
    bare.cards["pawsx"] = replace(bare.cards["pawsx"], sizes=None)  # a card without published sizes
    plan = make_plan(bare, "h100", benchmarks, parse_workers=2)
    assert plan.tasks[0].systems[0].steps.basis == UNKNOWN and plan.hours.value is None
    assert any(note.startswith("data not on this machine for pawsx (train en)") for note in plan.notes)
    assert "pawsx: no published size for train en" in plan.notes
    given = make_plan(bare, "h100", benchmarks, {"pawsx": 64}, parse_workers=2).tasks[0].systems[0]
    assert (given.examples.value, given.examples.basis, given.steps.value) == (64, GIVEN, 6)  # 3 x ceil(64 / 32)


def test_status_eta_scales_the_plan_by_the_pace_of_the_finished_cells(setup, tmp_path):
    experiment, benchmarks = setup
    plan = make_plan(experiment, "h100", benchmarks, parse_workers=2)
    done = [experiment.cells[0], experiment.cells[1]]  # seed 1 of none and of gat (max_length=128)
    planned = [plan.cell_hours[c.name].value for c in done]
    for cell, hours in zip(done, planned):  # each took twice its planned time
        folder = RunFolder(experiment.cell_dir(cell))
        folder.path.mkdir(parents=True)
        folder.train_results.write_text(json.dumps({"train_seconds": 2 * hours * 3600}), encoding="utf-8")
    state = progress(experiment, plan, done)
    left = plan.hours.value - sum(planned)
    assert (state.done, state.total) == (2, 6) and state.spent_hours == pytest.approx(2 * sum(planned))
    assert state.eta.value == pytest.approx(2 * left) and state.eta.basis == EXTRAPOLATED
    assert progress(experiment, plan, []).eta.value == pytest.approx(plan.hours.value)


def test_the_command_prints_the_plan_with_its_marks(setup, tmp_path):
    result = CliRunner().invoke(main, ["experiment", "plan", str(tmp_path / "plan.toml"), "--device", "h100",
                                       "--data-dir", str(tmp_path / "data"), "--bench", str(tmp_path / "bench"),
                                       "--parse-workers", "2"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("Plan: plan test on h100 (step times measured on NVIDIA H100 80GB HBM3, 2026-11-27")
    row = next(line for line in lines if line.strip().startswith("none "))
    # 12 steps x 0.05 s = 0.6 s a cell, twice that for 2 cells; 28,000 bytes of checkpoints a cell; no peak memory
    assert row.split() == ["none", "2", "100", "c", "12", "c", "0.05", "m", "0.600", "s", "m", "1.20", "s", "m",
                           "2.8e-05", "m", "?", "?"]
    # 260 / 700 s = 0.371 s, 60 / 700 s = 0.0857 s
    assert "parse (sentences, time): en 260 c, 0.371 s m; de 60 c, 0.0857 s m" in result.output
    assert "m = measured, x = extrapolated, c = counted, g = given, ? = unknown" in lines[1]
    bad = CliRunner().invoke(main, ["experiment", "plan", str(tmp_path / "plan.toml"), "--examples", "xnli=5"])
    assert bad.exit_code != 0 and "'xnli' is not a task of the experiment (its tasks: pawsx)" in bad.output


def test_status_shows_the_plan_beside_the_progress(setup, tmp_path):
    result = CliRunner().invoke(main, ["experiment", "status", str(tmp_path / "plan.toml"), "--device", "cpu",
                                       "--data-dir", str(tmp_path / "data"), "--output-dir", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1].startswith("plan on cpu: ? (unknown) of training for 6 cells; 0 done "
                                                     "(0 s spent)")


def test_a_benchmark_file_without_its_numbers_is_named_with_the_fix(tmp_path):
    broken = {**H100, "steps": {"bench_model": {"status": "ok", "float32": {"none": {"step_seconds": 0.05}}}}}
    (tmp_path / "h100.json").write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(ExperimentError, match=r"h100\.json: a benchmark row lacks a number .*float32/none/tokens_per"):
        read_benchmarks([tmp_path])
    (tmp_path / "h100.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ExperimentError, match=r"h100\.json: not a benchmark JSON file"):
        read_benchmarks([tmp_path])


def test_less_work_than_measured_is_said_to_be_a_lower_bound(setup, tmp_path):
    _, benchmarks = setup
    short = load_experiment(str(tmp_path / "plan.toml"), Overrides(data_dir=str(tmp_path / "data"),
                                                                  settings={"max_length": 64}))
    none = make_plan(short, "h100", benchmarks, parse_workers=2).tasks[0].systems[0]
    assert none.step_seconds.value == pytest.approx(0.025) and none.step_seconds.basis == EXTRAPOLATED
    assert "x0.5 for 32 x 64 tokens" in none.step_seconds.why and "a lower bound" in none.step_seconds.why
