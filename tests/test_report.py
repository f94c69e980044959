"""`xsyn report` on small hand-made run directories: tables, gap, deltas, significance, heatmaps."""

import csv
import json
import math
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.report import BootstrapSettings, ReportError, build_report, write_report


def write_run(root, name, *, variant="gat", seed=1, task="pawsx", metric="accuracy", split="test",
              per_language=None, pairs=None, examples=None, config=None, metric_options=None):
    """A run directory as `xsyn evaluate` writes it; `examples`: "de" or "de-en" -> (id, pred, ref) rows."""
    run = root / name
    (run / "per_example").mkdir(parents=True)
    results = {"task": task, "variant": variant, "model": "bert-base-multilingual-cased", "seed": seed,
               "metric": metric, "primary": "accuracy", "split": split, "per_language": per_language,
               "average": sum(per_language.values()) / len(per_language),
               "n_examples": dict.fromkeys(per_language, 200), "dropped": dict.fromkeys(per_language, 0),
               "scores": {}, "config": config or {"train_lang": "en"}}
    if pairs:
        results["pairs"] = pairs
    if metric_options:
        results["metric_options"] = metric_options
    (run / "results.json").write_text(json.dumps(results), encoding="utf-8")
    for key, rows in (examples or {}).items():
        lines = [json.dumps({"id": i, "prediction": p, "reference": r}, ensure_ascii=False)
                 for i, p, r in rows]
        (run / "per_example" / f"{split}-{key}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return run


def edit_results(run, **fields):
    """Overwrite fields of a run's results.json, e.g. with values `xsyn evaluate` would never write."""
    file = run / "results.json"
    file.write_text(json.dumps({**json.loads(file.read_text()), **fields}), encoding="utf-8")
    return run


def labelled(correct_ids, n=200):
    """Accuracy rows: example i is predicted right when i is in `correct_ids`."""
    return [(f"q{i}", "yes" if i in correct_ids else "no", "yes") for i in range(n)]


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def test_seeds_give_mean_sample_std_average_and_transfer_gap(tmp_path):
    seed1 = write_run(tmp_path, "gat-1", seed=1, per_language={"en": 80.0, "de": 70.0, "fr": 60.0})
    seed2 = write_run(tmp_path, "gat-2", seed=2, per_language={"en": 84.0, "de": 72.0, "fr": 62.0})
    report = build_report([seed1, seed2])
    write_report(report, tmp_path / "out")
    system = json.loads((tmp_path / "out" / "report.json").read_text())["experiments"][0]["systems"][0]
    assert system["per_language"]["en"]["mean"] == pytest.approx(82.0)
    assert system["per_language"]["en"]["std"] == pytest.approx(math.sqrt(8))  # ((-2)^2 + 2^2) / (2 - 1)
    # per seed: average 70 and 72.667; gap = en - mean(de, fr) = 15 and 17
    assert system["average"]["mean"] == pytest.approx((70 + 218 / 3) / 2)
    assert system["transfer_gap"]["mean"] == pytest.approx(16.0)
    assert system["transfer_gap"]["std"] == pytest.approx(math.sqrt(2))
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| gat | 2 | 82.0 ± 2.8 | 71.0 ± 1.4 | 61.0 ± 1.4 | 71.3 ± 1.9 | 16.0 ± 1.4 |" in markdown
    assert "no --baseline runs for this experiment" in markdown
    rows = list(csv.DictReader((tmp_path / "out" / "pawsx-test-accuracy" / "per_language.csv").open()))
    assert rows[0]["system"] == "gat" and float(rows[0]["transfer_gap"]) == pytest.approx(16.0)


def test_runs_that_differ_in_a_setting_are_separate_systems_and_bookkeeping_is_not_a_difference(tmp_path):
    def run(name, seed, delta, score, **config):
        return write_run(tmp_path, name, seed=seed, per_language={"de": score},
                         config={"train_lang": "en", "seed": seed, "output_dir": f"runs/{name}", "trackers": [],
                                 "gat_init": f"pre/{name}", "model_settings": {"gat_delta": delta}, **config})

    runs = [run("d1-s1", 1, 1, 60.0), run("d1-s2", 2, 1, 64.0, trackers=["tensorboard"], log_every=5),
            run("d2-s1", 1, 2, 70.0), run("d2-s2", 2, 2, 74.0)]
    report = build_report(runs)
    systems = {system.label: [r.path.name for r in system.runs] for system in report.experiments[0].systems}
    assert systems == {"gat (gat_delta=1)": ["d1-s1", "d1-s2"], "gat (gat_delta=2)": ["d2-s1", "d2-s2"]}
    means = {system.label: system.per_language["de"].mean for system in report.experiments[0].systems}
    assert means == {"gat (gat_delta=1)": 62.0, "gat (gat_delta=2)": 72.0}
    chain = run("chain", 1, 1, 50.0, parser="chain")
    stanza = run("stanza", 2, 1, 60.0, parser="stanza")
    with pytest.raises(ReportError, match=r"several systems \(none \(parser=chain\); none \(parser=stanza\)\)"):
        build_report(runs[:1], baseline_dirs=[edit_results(chain, variant="none"),
                                              edit_results(stanza, variant="none")])


def test_the_source_language_of_the_gap_comes_from_the_run_config(tmp_path):
    run = write_run(tmp_path, "zh-run", per_language={"en": 50.0, "zh": 90.0, "ja": 70.0},
                    config={"train_lang": "zh"})
    system = build_report([run]).experiments[0].systems[0]
    assert system.transfer_gap.mean == pytest.approx(90 - 60)
    assert system.transfer_gap.std is None  # one seed


def exact_p_value(n, system_only, baseline_only):
    """P(A <= B), (A, B, rest) ~ Multinomial(n; a/n, b/n, rest): the one-sided bootstrap p of a gain."""
    pa, pb = system_only / n, baseline_only / n
    total = 0.0
    for a in range(40):
        for b in range(a, 40):
            log = (math.lgamma(n + 1) - math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(n - a - b + 1)
                   + a * math.log(pa) + b * math.log(pb) + (n - a - b) * math.log(1 - pa - pb))
            total += math.exp(log)
    return total


def test_deltas_against_the_baseline_with_paired_bootstrap_marks(tmp_path):
    # de: gat right on all 200, none on 150 -> +25 and clearly significant.
    # fr: gat alone right on q0-q2, none alone on q3-q4, both on q5-q99 -> +0.5, p = P(A <= B) ~ 0.3
    de_gat, de_none = set(range(200)), set(range(150))
    fr_gat, fr_none = {0, 1, 2, *range(5, 100)}, set(range(3, 100))
    gat = write_run(tmp_path, "gat", per_language={"de": 100.0, "fr": 50.5},
                    examples={"de": labelled(de_gat), "fr": labelled(fr_gat)})
    none = write_run(tmp_path, "none", variant="none", per_language={"de": 75.0, "fr": 50.0},
                     examples={"de": labelled(de_none), "fr": labelled(fr_none)})
    report = build_report([gat], [none], BootstrapSettings(resamples=2000, seed=5))
    write_report(report, tmp_path / "out")
    comparison = report.experiments[0].comparisons[0]
    assert comparison.per_language["de"].delta == pytest.approx(25.0)
    assert comparison.per_language["de"].p_value == 0.0 and comparison.per_language["de"].significant
    assert comparison.per_language["fr"].delta == pytest.approx(0.5)
    assert comparison.per_language["fr"].p_value == pytest.approx(exact_p_value(200, 3, 2), abs=0.04)
    assert not comparison.per_language["fr"].significant
    assert comparison.per_language["fr"].paired_examples == 200
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| gat | +25.0* | +0.5 | +12.8 | – |" in markdown  # no English, so no gap
    assert "| none (baseline) | 1 | 75.0 | 50.0 | 62.5 | – |" in markdown
    assert "avg and gap deltas are over" not in markdown  # same languages: the avg delta is the plain one
    deltas = list(csv.DictReader((tmp_path / "out" / "pawsx-test-accuracy" / "deltas.csv").open()))
    assert float(deltas[0]["de"]) == pytest.approx(25.0) and float(deltas[0]["de_p"]) == 0.0


def test_average_and_gap_deltas_use_only_the_languages_both_sides_have(tmp_path):
    # gat has de, the baseline fr: only en is shared, so avg delta = 90 - 85 and no gap delta (the gap
    # needs a shared language besides the source), not (90 + 80) / 2 - (85 + 20) / 2 = +32.5
    gat = write_run(tmp_path, "gat", per_language={"en": 90.0, "de": 80.0})
    none = write_run(tmp_path, "none", variant="none", per_language={"en": 85.0, "fr": 20.0})
    report = build_report([gat], [none])
    write_report(report, tmp_path / "out")
    comparison = report.experiments[0].comparisons[0]
    assert comparison.average == pytest.approx(5.0) and comparison.transfer_gap is None
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| gat | +5.0 | – | – | +5.0 | – |" in markdown  # columns en, de, fr, avg, gap
    assert "gat: the avg and gap deltas are over the languages it and none (baseline) both have: en" in markdown


def test_shared_language_deltas_come_from_the_seed_means(tmp_path):
    # gat seeds: en 90 and 92, de 80 and 84 (means 91, 82); fr only in gat, es only in the baseline.
    # Over en, de: avg delta = (91 + 82) / 2 - (85 + 60) / 2 = 14; gap delta = (91 - 82) - (85 - 60) = -16
    gat1 = write_run(tmp_path, "gat-1", seed=1, per_language={"en": 90.0, "de": 80.0, "fr": 70.0})
    gat2 = write_run(tmp_path, "gat-2", seed=2, per_language={"en": 92.0, "de": 84.0, "fr": 50.0})
    none = write_run(tmp_path, "none", variant="none", per_language={"en": 85.0, "de": 60.0, "es": 10.0})
    experiment = build_report([gat1, gat2], [none]).experiments[0]
    assert experiment.comparisons[0].average == pytest.approx(14.0)
    assert experiment.comparisons[0].transfer_gap == pytest.approx(-16.0)
    assert "gat: the avg and gap deltas are over the languages it and none (baseline) both have: en, de" \
        in experiment.notes
    assert "gat: no baseline score for fr; no delta there" in experiment.notes


def test_baselines_of_another_split_are_named_in_the_notes(tmp_path):
    gat = write_run(tmp_path, "gat", split="test", per_language={"en": 90.0})
    none = write_run(tmp_path, "none", variant="none", split="validation", per_language={"en": 85.0})
    report = build_report([gat], [none])
    write_report(report, tmp_path / "out")
    test, validation = report.experiments
    assert test.comparisons == [] and validation.systems == []
    assert test.notes == ["the --baseline runs are of another split (pawsx/validation/accuracy), none of "
                          "pawsx/test/accuracy: no deltas (a baseline is compared with runs of its own task, split "
                          "and metric)"]
    assert validation.notes == ["only --baseline runs for pawsx/validation/accuracy (the runs are of another split: "
                                "pawsx/test/accuracy): no deltas"]
    assert "runs are of another split (pawsx/validation/accuracy)" in (tmp_path / "out" / "report.md").read_text()


def test_a_baseline_of_another_task_is_named_as_such_not_as_a_missing_baseline(tmp_path):
    gat = write_run(tmp_path, "gat", per_language={"en": 90.0, "de": 80.0, "fr": 78.0, "zh": 70.0})
    xnli = write_run(tmp_path, "xnli-none", variant="none", task="xnli",
                     per_language={"en": 85.0, "de": 75.0, "fr": 74.0, "zh": 65.0})
    result = subprocess.run([shutil.which("xsyn", path=str(Path(sys.executable).parent)), "report", str(gat),
                             "--baseline", str(xnli), "--analysis", "family", "--output-dir", str(tmp_path / "out")],
                            capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert ("Error: --analysis family reads gains over a baseline, and no run has one: the --baseline runs are of "
            "xnli/test/accuracy, the runs of pawsx/test/accuracy; give baseline runs of the runs' task, split and "
            "metric") in result.stderr
    pawsx, _ = build_report([gat], [xnli]).experiments
    assert pawsx.notes == ["the --baseline runs are of another task (xnli/test/accuracy), none of pawsx/test/accuracy: "
                           "no deltas (a baseline is compared with runs of its own task, split and metric)"]


def test_a_baseline_seed_passed_as_a_run_is_pointed_out(tmp_path):
    # `--baseline runs/none-seed*` in a shell: the second seed arrives as a run, not as a baseline
    seed1 = write_run(tmp_path, "none-seed1", variant="none", per_language={"en": 85.0})
    seed2 = write_run(tmp_path, "none-seed2", variant="none", seed=2, per_language={"en": 86.0})
    (experiment,) = build_report([seed2], [seed1]).experiments
    assert any(note.startswith("none: the same variant and model as the baseline") for note in experiment.notes)


def test_seed_groups_are_paired_by_example_id_and_averaged(tmp_path):
    ids = ["a", "b", "c", "d"]
    rows = lambda right: [(i, "yes" if i in right else "no", "yes") for i in ids]  # noqa: E731
    gat1 = write_run(tmp_path, "gat-1", seed=1, per_language={"de": 75.0}, examples={"de": rows("abc")})
    gat2 = write_run(tmp_path, "gat-2", seed=2, per_language={"de": 100.0}, examples={"de": rows("abcd")})
    # the baseline lists its examples in another order and has one the others lack
    none = write_run(tmp_path, "none", variant="none", per_language={"de": 40.0},
                     examples={"de": [("e", "yes", "yes"), *reversed(rows("a")), ]})
    report = build_report([gat1, gat2], [none], BootstrapSettings(resamples=100))
    cell = report.experiments[0].comparisons[0].per_language["de"]
    assert cell.delta == pytest.approx(87.5 - 40.0)  # from results.json means
    assert (cell.paired_examples, cell.unpaired_examples) == (4, 1)
    assert any("1 example ids are not in every run" in note for note in report.experiments[0].notes)


def test_language_pair_matrices_deltas_and_heatmaps(tmp_path):
    pairs_gat = {"en": {"en": 90.0, "de": 80.0}, "de": {"en": 78.0, "de": 85.0}}
    pairs_none = {"en": {"en": 89.0, "de": 70.0}, "de": {"en": 79.0, "de": 85.0}}
    examples_gat = {"en-de": labelled(set(range(160))), "en-en": labelled(set(range(180)))}
    examples_none = {"en-de": labelled(set(range(140))), "en-en": labelled(set(range(2, 180)))}
    gat = write_run(tmp_path, "gat", per_language={"en": 90.0, "de": 85.0}, pairs=pairs_gat,
                    examples=examples_gat)
    none = write_run(tmp_path, "none", variant="none", per_language={"en": 88.0, "de": 85.0},
                     pairs=pairs_none, examples=examples_none)
    report = build_report([gat], [none], BootstrapSettings(resamples=300))
    write_report(report, tmp_path / "out")
    folder = tmp_path / "out" / "pawsx-test-accuracy"
    matrix = list(csv.reader((folder / "pairs-gat.csv").open()))
    assert matrix == [["row\\col", "en", "de"], ["en", "90.0000", "80.0000"], ["de", "78.0000", "85.0000"]]
    delta = list(csv.reader((folder / "pairs-delta-gat.csv").open()))
    assert delta[1:] == [["en", "1.0000", "10.0000"], ["de", "-1.0000", "0.0000"]]
    pairs = report.experiments[0].comparisons[0].pairs
    assert pairs["en"]["de"].significant  # 20 examples right only for gat: p = (1 - 20/200)^200
    assert not pairs["en"]["en"].significant  # 2 examples right only for gat: p = (1 - 2/200)^200 = 0.13
    assert pairs["de"]["en"].p_value is None  # no per-example file for de-en
    assert any("de-en: no bootstrap test" in note for note in report.experiments[0].notes)
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| en | +1.0 | +10.0* |" in markdown
    for name in ("pairs-gat.png", "pairs-none_baseline.png", "pairs-delta-gat.png"):
        width, height = png_size(folder / name)
        assert 400 <= width <= 2000 and 300 <= height <= 2000


def test_mlqa_scores_answers_with_the_context_language_of_the_row(tmp_path):
    zh_rows = [("q1", "北京大学", ["北京"]), ("q2", "上海", ["上海"])]  # zh F1: 2/3 and 1
    gat = write_run(tmp_path, "gat", task="mlqa", metric="mlqa", per_language={"zh": 250 / 3},
                    pairs={"zh": {"en": 250 / 3}}, examples={"zh": zh_rows, "zh-en": zh_rows})
    none = write_run(tmp_path, "none", variant="none", task="mlqa", metric="mlqa", per_language={"zh": 10.0},
                     pairs={"zh": {"en": 100.0}}, examples={"zh": zh_rows[1:], "zh-en": zh_rows[1:]})
    experiment = build_report([gat], [none], BootstrapSettings(resamples=50)).experiments[0]
    assert experiment.primary == "f1"
    # gat's zh-en agrees only when scored as zh (as en, q1 would score 0: 50 overall); none's stated
    # 10.0 for zh disagrees with its per-example 100.0 and is flagged
    flagged = [note for note in experiment.notes if "scores" in note]
    assert len(flagged) == 1 and "none/per_example/test-zh.jsonl scores 100.00" in flagged[0]


def test_experiments_are_grouped_by_task_split_and_metric(tmp_path):
    pawsx = write_run(tmp_path, "p", per_language={"en": 90.0})
    xnli = write_run(tmp_path, "x", task="xnli", per_language={"en": 80.0})
    written = write_report(build_report([tmp_path]), tmp_path / "out")  # a folder of runs is searched
    assert {path.parent.name for path in written if path.suffix == ".csv"} == {"pawsx-test-accuracy",
                                                                              "xnli-test-accuracy"}
    assert pawsx.exists() and xnli.exists()


def test_probe_metrics_become_a_table_and_a_chart(tmp_path):
    probe = tmp_path / "gat-pretrain"
    probe.mkdir()
    (probe / "probe_metrics.json").write_text(json.dumps({
        "en": {"uuas": 0.81, "dist_spearman": 0.85, "root_acc": 0.9, "norm_spearman": 0.88,
               "n_sentences": 2001},
        "de": {"uuas": 0.7, "dist_spearman": float("nan"), "root_acc": 0.8, "norm_spearman": 0.8,
               "n_sentences": 799}}))
    write_report(build_report([probe]), tmp_path / "out")
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| gat-pretrain | de | 0.700 | – | 0.800 | 0.800 | 799 |" in markdown
    assert json.loads((tmp_path / "out" / "report.json").read_text())["probes"][0]["per_language"]["de"][
        "dist_spearman"] is None
    width, height = png_size(tmp_path / "out" / "probe.png")
    assert width >= 600 and height >= 300


@pytest.mark.parametrize("setup, message", [
    (lambda root: [root / "empty"], "no results.json or probe_metrics.json in or below"),
    (lambda root: [write_run(root, "a", seed=1, per_language={"en": 1.0}),
                   write_run(root, "b", seed=1, per_language={"en": 2.0})], "same system with the same seed"),
    (lambda root: [write_run(root, "a", seed=1, per_language={"en": 1.0, "de": 1.0}),
                   write_run(root, "b", seed=2, per_language={"en": 2.0})], "cover different languages"),
    (lambda root: [write_run(root, "a", metric="bleu", per_language={"en": 1.0})],
     r"a/results.json: unknown metric 'bleu'; choose one of accuracy, .*seqeval"),
    (lambda root: [write_run(root, "a", per_language={"en": 1.0}, pairs={"en": {"de": None}})],
     r"a/results.json: the score of en-de is None, not a number"),
    (lambda root: [edit_results(write_run(root, "a", per_language={"en": 1.0}), per_language={})],
     r"a/results.json: per_language is empty; a run needs the score of at least one language"),
    (lambda root: [edit_results(write_run(root, "a", per_language={"en": 1.0}), seed=[1])],
     r"a/results.json: seed must be an integer or a string, got \[1\]"),
    (lambda root: [edit_results(write_run(root, "a", per_language={"en": 1.0}), variant=None)],
     r"a/results.json: variant must be a non-empty string, got None"),
    (lambda root: [edit_results(write_run(root, "a", per_language={"en": 1.0}), split=5)],
     r"a/results.json: split must be a non-empty string, got 5"),
    (lambda root: [write_run(root, "a", per_language={"en": 1.0}, pairs={"en": 5})],
     r"a/results.json: pairs must be \{row language: \{column language: score\}\}, but pairs\['en'\] is 5"),
])
def test_unreportable_runs_are_explained(tmp_path, setup, message):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match=message):
        build_report(setup(tmp_path))


def test_baseline_must_be_one_system_and_per_example_lines_must_parse(tmp_path):
    gat = write_run(tmp_path, "gat", per_language={"de": 50.0}, examples={"de": labelled({0})})
    none = write_run(tmp_path, "none", variant="none", per_language={"de": 50.0},
                     examples={"de": labelled({0})})
    sla = write_run(tmp_path, "sla", variant="sla", per_language={"de": 50.0})
    with pytest.raises(ReportError, match=r"--baseline runs of pawsx/test/accuracy are several systems"):
        build_report([gat], [none, sla])
    with (none / "per_example" / "test-de.jsonl").open("a") as handle:
        handle.write("{not json\n")
    with pytest.raises(ReportError, match=r"none/per_example/test-de.jsonl:201: expected a JSON object"):
        build_report([gat], [none])


def test_command_line_writes_the_report_and_reports_errors(tmp_path):
    gat = write_run(tmp_path, "gat", per_language={"de": 100.0}, examples={"de": labelled(set(range(200)))})
    none = write_run(tmp_path, "none", variant="none", per_language={"de": 75.0},
                     examples={"de": labelled(set(range(150)))})
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["report", str(gat), "--baseline", str(none), "--output-dir", str(out),
                                       "--resamples", "100"])
    assert result.exit_code == 0, result.output
    assert (out / "report.md").is_file() and (out / "report.json").is_file()
    assert json.loads((out / "report.json").read_text())["bootstrap"]["resamples"] == 100
    failed = CliRunner().invoke(main, ["report", str(gat), "--baseline", str(gat), "--output-dir", str(out)])
    assert failed.exit_code == 1 and "is given both as a run and as a baseline" in failed.output
