"""What a report shows a reader: counts, titles, caps, chance, one colour scale, the pair axes, bar charts."""

import json

import pytest
from test_report import edit_results, png_size, write_run

from xsyn.report import BootstrapSettings, build_report, write_report
from xsyn.utils import plots


def markdown_of(tmp_path, runs, baselines=()):
    write_report(build_report(runs, baselines, BootstrapSettings(resamples=20)), tmp_path / "out")
    return (tmp_path / "out" / "report.md").read_text(encoding="utf-8")


def test_one_run_is_singular_titles_do_not_repeat_the_task_and_one_language_has_no_gap(tmp_path):
    mlqa = write_run(tmp_path, "m", task="mlqa", metric="mlqa", split="validation", per_language={"en": 80.0})
    markdown = markdown_of(tmp_path, [mlqa])
    assert "1 run in 1 experiment." in markdown
    assert "## mlqa · validation\n" in markdown and "mlqa · validation · mlqa" not in markdown
    # a task of one language: no transfer gap sentence, column or value
    assert "gap" not in markdown.lower()
    assert "| system | seeds | en | avg |" in markdown
    two = write_run(tmp_path, "p", per_language={"en": 90.0, "de": 70.0})
    assert "| system | seeds | en | de | avg | gap |" in markdown_of(tmp_path / "b", [two])


def test_caps_that_shaped_the_numbers_are_listed_per_experiment(tmp_path):
    capped = write_run(tmp_path, "gat", per_language={"en": 90.0, "de": 70.0},
                       config={"train_lang": "en", "max_steps": 40, "epochs": 3, "max_train_examples": 500})
    edit_results(capped, max_eval_examples=64, missing_languages=["ko"])
    full = write_run(tmp_path, "none", variant="none", per_language={"en": 88.0, "de": 69.0})
    markdown = markdown_of(tmp_path, [capped], [full])
    assert "**Not the full benchmark:** 1 of 1 experiment ran with caps" in markdown
    caps = markdown.split("**Caps**")[1].split("\n\n")[1].splitlines()
    assert caps == ["- gat: scored on at most 64 examples per language or pair, label-balanced where they have class "
                    "labels (--max-eval-examples)",
                    "- gat: training stopped at 40 steps (max_steps), not the card's 3 epochs",
                    "- gat: trained on at most 500 examples (max_train_examples)",
                    "- gat: no data for ko: skipped (--skip-missing)"]
    uncapped = markdown_of(tmp_path / "b", [write_run(tmp_path, "x", per_language={"en": 1.0})])
    assert "Caps" not in uncapped and "Not the full benchmark" not in uncapped


@pytest.fixture
def heatmap_calls(monkeypatch) -> list[dict]:
    """The keyword arguments of every heatmap the report draws (drawn as well)."""
    calls = []
    real = plots.heatmap_png
    monkeypatch.setattr(plots, "heatmap_png", lambda *args, **kwargs: calls.append(kwargs) or real(*args, **kwargs))
    return calls


def test_heatmaps_of_one_report_share_one_scale_and_mark_chance(tmp_path, heatmap_calls):
    calls = heatmap_calls
    pawsx = write_run(tmp_path, "p", per_language={"en": 90.0, "de": 80.0},
                      pairs={"en": {"en": 90.0, "de": 60.0}, "de": {"en": 70.0, "de": 80.0}})
    xnli = write_run(tmp_path, "x", task="xnli", per_language={"en": 95.0, "de": 85.0},
                     pairs={"en": {"en": 95.0, "de": 75.0}, "de": {"en": 77.0, "de": 85.0}})
    markdown = markdown_of(tmp_path, [pawsx, xnli])
    assert [call["limits"] for call in calls] == [(100 / 3, 95.0)] * 2  # lowest: XNLI's chance; highest: 95
    assert [call["chance"] for call in calls] == [50.0, pytest.approx(100 / 3)]  # 2 and 3 labels
    assert "Chance: 50.0." in markdown and "Chance: 33.3." in markdown
    assert [call["row_label"] for call in calls] == ["sentence1 language", "premise language"]  # from the cards


def test_mlqa_pair_axes_name_the_context_language_for_rows(tmp_path):
    rows = [("q1", "a", ["a"])]
    gat = write_run(tmp_path, "gat", task="mlqa", metric="mlqa", per_language={"zh": 100.0},
                    pairs={"zh": {"en": 100.0}}, examples={"zh": rows, "zh-en": rows})
    none = write_run(tmp_path, "none", variant="none", task="mlqa", metric="mlqa", per_language={"zh": 100.0},
                     pairs={"zh": {"en": 100.0}}, examples={"zh": rows, "zh-en": rows})
    markdown = markdown_of(tmp_path, [gat], [none])
    assert "### Language pairs: gat (rows: context language, columns: question language; n: examples" in markdown
    assert "rows: context language, columns: question language)" in markdown.split("### Δ language pairs")[1]
    edit_results(gat, pair_axes=["question", "context"])  # what evaluate recorded wins over the card
    assert "gat (rows: question language" in markdown_of(tmp_path / "b", [gat])


def test_every_task_gets_a_bar_chart_with_error_bars_and_the_source_marked(tmp_path, monkeypatch):
    calls = []
    real = plots.language_bars_png
    monkeypatch.setattr(plots, "language_bars_png",
                        lambda *args, **kwargs: calls.append((args, kwargs)) or real(*args, **kwargs))
    seeds = [write_run(tmp_path, f"c{seed}", seed=seed, task="chnsenticorp", per_language={"zh": score},
                       config={"train_lang": "zh"}) for seed, score in ((1, 90.0), (2, 94.0))]
    markdown = markdown_of(tmp_path, seeds)
    (series,), kwargs = calls[0]
    assert series == {"gat": {"zh": 92.0}} and kwargs["errors"]["gat"]["zh"] == pytest.approx(2 ** 1.5)  # sd
    assert kwargs["marked"] == ["zh"] and kwargs["chance"] == 50.0
    assert "![accuracy per language](chnsenticorp-test-accuracy/per_language.png)" in markdown
    width, height = png_size(tmp_path / "out" / "chnsenticorp-test-accuracy" / "per_language.png")
    assert 400 <= width <= 2000 and 300 <= height <= 1000


def test_training_curves_of_the_run_folders_are_copied_into_the_report(tmp_path):
    run_dir = tmp_path / "runs" / "gat-seed1"
    evaluation = write_run(run_dir, "eval-test", per_language={"en": 90.0})
    edit_results(evaluation, run_dir=str(run_dir))
    (run_dir / "training_curves.png").write_bytes(b"\x89PNG curves")
    markdown = markdown_of(tmp_path, [evaluation])
    assert "### Training curves" in markdown and "(pawsx-test-accuracy/curves-gat-seed1.png)" in markdown
    assert (tmp_path / "out" / "pawsx-test-accuracy" / "curves-gat-seed1.png").read_bytes() == b"\x89PNG curves"
    json.loads((tmp_path / "out" / "report.json").read_text())


def test_gold_against_predicted_trees_names_each_parser_lists_every_language_and_draws_a_training_once(tmp_path):
    """One gat run trained on gold trees, evaluated with gold trees and with a parser's, beside a none baseline
    on gold trees: the baseline row said no parser, "Examples:" listed only the first system's languages, the
    run's curves were drawn once per evaluation, and nothing said train and test trees differed."""
    run_dir = tmp_path / "runs" / "gat-seed1"
    (run_dir / "training_curves.png").parent.mkdir(parents=True)
    (run_dir / "training_curves.png").write_bytes(b"\x89PNG curves")
    gold = write_run(run_dir, "eval-test", per_language={"en": 90.0}, config={"train_lang": "en", "parser": "gold"})
    predicted = write_run(run_dir, "eval-test-udpipe", per_language={"en": 85.0, "de": 70.0},
                          config={"train_lang": "en", "parser": "udpipe:models"})
    edit_results(gold, run_dir=str(run_dir), train_parser="gold", n_examples={"en": 200})
    edit_results(predicted, run_dir=str(run_dir), train_parser="gold", n_examples={"en": 200, "de": 180})
    none = write_run(tmp_path, "none", variant="none", per_language={"en": 88.0, "de": 60.0},
                     config={"train_lang": "en", "parser": "gold"})
    markdown = markdown_of(tmp_path, [gold, predicted], [none])
    rows = [line.split(" | ")[0] for line in markdown.splitlines() if line.startswith("| ")]
    assert {"| gat (parser=gold)", "| gat (parser=udpipe:models)", "| none (baseline, parser=gold)"} <= set(rows)
    # de: the gat runs scored 180 examples, the baseline 200 (write_run's default): said beside it
    assert "Examples: en 200, de 180 (none (baseline, parser=gold): 200)." in markdown
    assert markdown.count("![training curves]") == 1
    assert "gat (parser=gold), seed 1; gat (parser=udpipe:models), seed 1 (one training, evaluated each way):" \
        in markdown
    assert (f"trained on the trees of parser gold, tested on those of parser udpipe:models (`xsyn evaluate "
            f"--parser`): {predicted}") in markdown
    assert "tested on those of parser gold" not in markdown  # the gold evaluation is on the trees it trained on


def test_systems_scored_on_different_numbers_of_examples_are_said_so(tmp_path):
    """A system evaluated with --max-eval-examples 60 against a baseline capped at 30: the line gave the first
    system's counts alone, and the deltas compared scores on different examples without a word."""
    gat = write_run(tmp_path, "gat", per_language={"en": 60.0, "de": 63.3})
    edit_results(gat, n_examples={"en": 60, "de": 60})
    none = write_run(tmp_path, "none", variant="none", per_language={"en": 63.3, "de": 70.0})
    edit_results(none, n_examples={"en": 30, "de": 60})
    markdown = markdown_of(tmp_path, [gat], [none])
    assert ("Examples: en 60 (none (baseline): 30), de 60. **The systems were scored on different numbers of "
            "examples**") in markdown
    same = write_run(tmp_path, "none2", variant="none", per_language={"en": 63.3, "de": 70.0})
    edit_results(same, n_examples={"en": 60, "de": 60})
    markdown = markdown_of(tmp_path, [gat], [same])
    assert "Examples: en 60, de 60." in markdown and "different numbers" not in markdown


def test_training_curves_are_found_from_any_folder_or_named_as_not_found(tmp_path, monkeypatch):
    """results.json kept `run_dir` as typed (`../runs/...`), so a report run elsewhere lost the curves silently."""
    run_dir = tmp_path / "runs" / "gat-seed1"
    evaluation = write_run(run_dir, "eval-test", per_language={"en": 90.0})
    (run_dir / "training_curves.png").write_bytes(b"\x89PNG curves")
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    monkeypatch.chdir(elsewhere)  # the relative path as an older evaluation typed it no longer resolves
    edit_results(evaluation, run_dir="../runs/gat-seed1")
    assert markdown_of(tmp_path, [evaluation]).count("![training curves]") == 1  # found beside the evaluation
    moved = write_run(tmp_path / "copied", "eval-test", per_language={"en": 90.0})  # evaluation copied out alone
    edit_results(moved, run_dir="../runs/gat-seed1")
    markdown = markdown_of(tmp_path / "b", [moved])
    assert "![training curves]" not in markdown
    assert ("Training curves not found: gat, seed 1: none in ../runs/gat-seed1/training_curves.png or "
            f"{tmp_path / 'copied' / 'training_curves.png'}.") in markdown


def test_the_pair_table_and_heatmap_show_the_examples_behind_each_cell(tmp_path, heatmap_calls):
    """Generalized evaluation drops up to 43 of 100 pairs per cell; the heatmap did not show how many were left."""
    gat = write_run(tmp_path, "gat", per_language={"en": 90.0, "de": 80.0},
                    pairs={"en": {"en": 90.0, "de": 70.0}, "de": {"en": 60.0, "de": 80.0}})
    edit_results(gat, n_examples={"en": 100, "de": 98, "en-de": 57, "de-en": 61})
    markdown = markdown_of(tmp_path, [gat])
    assert "| en | 90.0 (n=100) | 70.0 (n=57) |" in markdown and "| de | 60.0 (n=61) | 80.0 (n=98) |" in markdown
    assert heatmap_calls[0]["counts"] == [[100, 57], [61, 98]]
