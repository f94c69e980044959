"""`xsyn experiment plan` before any download: the cards' published split sizes, human times, the checks of its
inputs (`--examples`, `--bench`, settings no cell can train with), and the synthetic benchmark's figures."""

import json
import math
import os
import subprocess

import pytest

from xsyn.data.cards import list_tasks, load_card
from xsyn.data.synth import vocabulary
from xsyn.experiments.bench_figures import COUNTED, GIVEN, UNKNOWN, read_benchmarks
from xsyn.experiments.experiment_file import ExperimentError, Overrides, load_experiment
from xsyn.experiments.plan import given_examples, human_hours, make_plan, significant


def test_published_sizes_match_the_shared_copies_where_they_are_here(shared_data):
    """Where a split is in the shared data, its count is the card's published figure."""
    from xsyn.data.loading import load_examples

    def rows(card, lang, split, folder):
        return len(load_examples(card, lang, split, str(shared_data / folder), allow_hub=False)[0])

    pawsx, xnli, xquad = load_card("pawsx"), load_card("xnli"), load_card("xquad")
    for lang in ("de", "en", "es", "fr", "ja", "ko", "zh"):
        assert pawsx.sizes.of("validation", lang) == rows(pawsx, lang, "validation", "pawsx")
    assert pawsx.sizes.of("test", "de") == rows(pawsx, "de", "test", "pawsx") == 2000
    assert xnli.sizes.of("validation", "fr") == rows(xnli, "fr", "validation", "xnli") == 2490
    questions = json.loads((shared_data / "xquad" / "xquad.de.json").read_text(encoding="utf-8"))
    count = sum(len(p["qas"]) for article in questions["data"] for p in article["paragraphs"])
    assert xquad.sizes.of("test", "de") == count == 1190
    assert all(load_card(task).sizes.source for task in list_tasks() if load_card(task).sizes)


def test_a_card_size_for_a_language_it_lacks_or_not_positive_is_refused(tmp_path):
    from xsyn.data.errors import CardError
    from xsyn.utils.shipped import TASKS, shipped_folder

    shared = "_xtreme_pair_classification.toml"
    (tmp_path / shared).write_text((shipped_folder(TASKS) / shared).read_text(encoding="utf-8"), encoding="utf-8")
    text = (shipped_folder(TASKS) / "pawsx.toml").read_text(encoding="utf-8")
    for bad, message in (("train = { xx = 5 }", "sizes.train: xx not in the card's languages"),
                         ("train = { en = 0 }", "sizes.train.en: must be a positive number")):
        (tmp_path / "pawsx.toml").write_text(text.replace("train = { en = 49401 }", bad), encoding="utf-8")
        with pytest.raises(CardError, match=message):
            load_card(tmp_path / "pawsx.toml")


def test_hours_for_every_task_of_ahmad2021_with_no_data_on_the_machine(tmp_path):
    """The installed command, on a data folder with nothing in it: every task has published sizes, so every
    system has its steps and hours."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(["xsyn", "experiment", "plan", "ahmad2021", "--device", "h200", "--data-dir",
                           str(tmp_path / "empty"), "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    systems = [(t["task"], s) for t in plan["tasks"] for s in t["systems"]]
    assert {task for task, _ in systems} == {"xnli", "pawsx", "mlqa", "xquad", "panx", "conll_ner", "mtop",
                                             "matis", "udpos"}
    for task, system in systems:
        assert system["examples"]["basis"] in (GIVEN, "extrapolated"), task  # matis holds 10% out as its dev set
        assert system["hours_per_cell"]["value"] > 0, task
    pawsx = next(s for task, s in systems if task == "pawsx")
    assert pawsx["examples"]["value"] == 49401 and "published sizes" in pawsx["examples"]["why"]
    # 5 epochs of ceil(49,401 / 32) = 1,544 batches
    assert pawsx["steps"]["value"] == 5 * 1544
    text = subprocess.run(["xsyn", "experiment", "plan", "ahmad2021", "--data-dir", str(tmp_path / "empty")],
                          env=env, capture_output=True, text=True, timeout=120).stdout
    notes = text.split("Notes:")[1]
    assert notes.count("data not on this machine for") == 1 and "--examples TASK=N" in notes
    assert "`xsyn experiment prepare ahmad2021`" in notes
    assert "udpipe-ud-2.5-models does not exist" in notes  # the recipe's missing parser folder is named


def test_local_data_overrides_the_published_sizes(tmp_path):
    data = tmp_path / "data" / "pawsx" / "x-final" / "en"
    data.mkdir(parents=True)
    rows = "".join(f"{i}\tthe cat {i}\ta cat {i}\t{i % 2}\n" for i in range(40))
    (data / "train.tsv").write_text("id\tsentence1\tsentence2\tlabel\n" + rows, encoding="utf-8")
    (tmp_path / "x.toml").write_text('tasks = ["pawsx"]\nvariants = ["none"]\nseeds = [1]\nmodels = ["tiny"]\n'
                                     '[settings]\nparser = "gold"\n[evaluation]\nlangs = ["de"]\n', encoding="utf-8")
    experiment = load_experiment(str(tmp_path / "x.toml"), Overrides(data_dir=str(tmp_path / "data"),
                                                                      runs_dir=str(tmp_path / "r")))
    task = make_plan(experiment, "h200", read_benchmarks([])).tasks[0]
    assert (task.systems[0].examples.value, task.systems[0].examples.basis) == (40, COUNTED)
    assert (task.sentences["de"].value, task.sentences["de"].basis) == (2 * 2000, GIVEN)  # test: published


@pytest.mark.parametrize(("hours", "shown"), [
    (5.59e-08, "0.000201 s"),  # 5.59e-08 x 3600 = 0.000201 s
    (0.5 / 60, "30.0 s"), (0.5, "30.0 min"), (1.4, "84.0 min"), (14.06, "14.1 h"), (1234.5, "1,230 h"), (None, "?")])
def test_durations_are_shown_in_seconds_minutes_or_hours_to_three_digits(hours, shown):
    assert human_hours(hours) == shown


def test_significant_digits_never_use_exponents():
    assert [significant(v) for v in (0.000123456, 9.996, 123456.0, 0.0)] == ["0.000123", "10.0", "123,000", "0"]


@pytest.mark.parametrize("item", ["pawsx=0", "pawsx=1e3", "pawsx=+5", "pawsx=05", "pawsx=5.0", "pawsx=",
                                  "pawsx=\u0663"])
def test_examples_must_be_positive_whole_numbers_in_digits(item):
    with pytest.raises(ExperimentError, match="positive whole number"):
        given_examples([item], ["pawsx"])
    assert given_examples(["pawsx=49401"], ["pawsx"]) == {"pawsx": 49401}
    with pytest.raises(ExperimentError, match="gives pawsx twice"):
        given_examples(["pawsx=5", "pawsx=6"], ["pawsx"])


@pytest.mark.parametrize(("value", "shown"), [(0, "0"), (-0.05, "-0.05"), (math.nan, "nan")])
def test_a_benchmark_figure_that_is_not_positive_and_finite_is_refused_by_file_and_row(tmp_path, value, shown):
    bench = {"environment": {"device_name": "NVIDIA H100"}, "quick": False,
             "steps": {"bench_model": {"status": "ok", "float32": {
                 "none": {"step_seconds": value, "tokens_per_second": 1000.0}}}}}
    (tmp_path / "h100.json").write_text(json.dumps(bench), encoding="utf-8")
    row = r"steps\.bench_model\.float32\.none\.step_seconds"
    with pytest.raises(ExperimentError, match=rf"h100\.json: {row} is {shown}"):
        read_benchmarks([tmp_path])
    parse = {"parser": "stanza", "parse": [{"workers": 1, "sentences_per_s": value}]}
    (tmp_path / "h100.json").write_text(json.dumps(parse), encoding="utf-8")
    with pytest.raises(ExperimentError, match=r"parse\[0\]\.sentences_per_s"):
        read_benchmarks([tmp_path])


@pytest.mark.parametrize(("setting", "message"), [
    ({"epochs": 1e30}, "more than any run can count"), ({"max_length": 600}, "beyond the 512 positions")])
def test_settings_no_cell_can_train_with_are_refused_before_planning(setting, message):
    experiment = load_experiment("synth", Overrides(settings=setting))
    with pytest.raises(ExperimentError, match=message):
        make_plan(experiment, "h200", read_benchmarks([]))


def test_synth_plans_no_sub_millisecond_steps_and_its_own_vocabulary(tmp_path):
    from xsyn.experiments.bench_figures import default_bench_paths

    plan = make_plan(load_experiment("synth", Overrides(runs_dir=str(tmp_path))), "h200",
                     read_benchmarks(default_bench_paths()))
    system = plan.tasks[0].systems[0]
    assert system.step_seconds.basis == UNKNOWN and "bound by fixed costs" in system.step_seconds.why
    # tiny: hidden 128, 2 layers, feed-forward 512, 512 positions: 128 V + 479,104 parameters; one saved state
    # (weights + two moments) and the best weights = 16 bytes a parameter
    parameters = 128 * len(vocabulary()) + 479_104
    assert system.disk_per_cell.value == 16 * parameters
    assert all(seconds.value == 0 for seconds in plan.tasks[0].parse_seconds.values())  # gold: nothing to parse
    assert not any("--parser gold" in note for note in plan.notes)
