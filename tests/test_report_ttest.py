"""`xsyn report --baseline`: the papers' t-test over seeds beside the bootstrap, in markdown, LaTeX,
CSV and JSON; paired by seed where both systems have the same seeds, Welch's otherwise."""

import csv
import json

import pytest
from click.testing import CliRunner
from scipy import stats
from test_report import labelled, write_run

from xsyn.cli import main

GAT = {1: {"en": 90.0, "de": 80.0}, 2: {"en": 92.0, "de": 81.0}, 3: {"en": 88.0, "de": 82.0}}
NONE = {1: {"en": 91.0, "de": 70.0}, 2: {"en": 89.0, "de": 72.0}, 3: {"en": 90.0, "de": 71.0}}


def runs(tmp_path, scores, variant, examples=None):
    return [write_run(tmp_path, f"{variant}{seed}", variant=variant, seed=seed, per_language=per_language,
                      examples=examples) for seed, per_language in scores.items()]


def report(tmp_path, systems, baselines, *extra):
    out = tmp_path / "out"
    args = ["report", *map(str, systems), *[f"--baseline={run}" for run in baselines], "--output-dir", str(out),
            "--resamples", "200", *extra]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return out


def test_same_seeds_are_paired_and_marked_beside_the_bootstrap(tmp_path):
    # de: gat is right on 160 of 200 examples in every seed, none on 140: the bootstrap marks it too
    gat = runs(tmp_path, GAT, "gat", examples={"de": labelled(set(range(160)))})
    none = runs(tmp_path, NONE, "none", examples={"de": labelled(set(range(140)))})
    out = report(tmp_path, gat, none, "--latex")
    markdown = (out / "report.md").read_text(encoding="utf-8")
    # de differences 10, 9, 11: t = 10 / (1 / sqrt 3) = 17.3, p = 0.003; en differences -1, 3, -2: mean 0
    # avg per seed 85, 86.5, 85 against 80.5 each: differences 4.5, 6, 4.5, t = 10, p = 0.01; gap 9 vs 19
    assert "| gat | +0.0 | +10.0*‡ | +5.0‡ | -10.0 |" in markdown
    assert "t-test over seeds: gat against none (baseline): paired t-test by seed (3 seeds)." in markdown
    assert "`‡` marks p < 0.05 in the papers' two-sided t-test over seeds" in markdown
    cell = json.loads((out / "report.json").read_text())["experiments"][0]["comparisons"][0]["per_language"]["de"]
    expected = stats.ttest_rel([80.0, 81.0, 82.0], [70.0, 72.0, 71.0])
    assert cell["ttest"]["kind"] == "paired" and cell["ttest_significant"] and cell["significant"]
    assert cell["ttest"]["p_value"] == pytest.approx(expected.pvalue)
    row = next(csv.DictReader((out / "pawsx-test-accuracy" / "deltas.csv").open()))
    assert float(row["de_ttest_p"]) == pytest.approx(expected.pvalue, abs=5e-5)  # 4 decimals
    assert float(row["en_ttest_p"]) == pytest.approx(1.0)
    tex = (out / "report.tex").read_text(encoding="utf-8")
    assert r"$\Delta$ gat & $+0.0$ & $+10.0^{*\ddagger}$ & $+5.0^{\ddagger}$ \\" in tex
    assert r"$^\ddagger$ $p < 0.05$ (two-sided t-test over seeds; gat against none (baseline): paired" in tex


def test_different_seeds_get_welchs_test_and_name_it(tmp_path):
    gat = runs(tmp_path, GAT, "gat")
    none = runs(tmp_path, {7: NONE[1], 8: NONE[2]}, "none")
    out = report(tmp_path, gat, none)
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "gat against none (baseline): Welch's t-test (3 vs 2 seeds)." in markdown
    cell = json.loads((out / "report.json").read_text())["experiments"][0]["comparisons"][0]["per_language"]["de"]
    expected = stats.ttest_ind([80.0, 81.0, 82.0], [70.0, 72.0], equal_var=False)
    assert cell["ttest"]["kind"] == "welch" and cell["ttest"]["df"] == pytest.approx(expected.df)
    assert cell["ttest"]["p_value"] == pytest.approx(expected.pvalue)


def test_one_seed_says_why_no_ttest(tmp_path):
    gat = runs(tmp_path, {1: GAT[1]}, "gat")
    none = runs(tmp_path, {1: NONE[1]}, "none")
    markdown = (report(tmp_path, gat, none) / "report.md").read_text(encoding="utf-8")
    assert "| gat | -1.0 | +10.0 | +4.5 | -11.0 |" in markdown  # no mark of either kind
    assert "gat: no t-test over seeds (1 seed on each side; a t-test needs at least 2)." in markdown
    cell = json.loads((tmp_path / "out" / "report.json").read_text())["experiments"][0]["comparisons"][0]
    assert cell["per_language"]["de"]["ttest"]["reason"] == "1 seed on each side; a t-test needs at least 2"


def test_a_difference_the_same_on_every_seed_is_pointed_out(tmp_path):
    """Scores move in steps of 1/n: two seeds that both differ by 0.2 (58.0 - 58.2 and 57.2 - 57.4, equal
    but for float rounding) give t = -inf, p = 0 (scipy's limit), marked; the notes say what that p rests on."""
    gat = runs(tmp_path, {1: {"en": 90.0, "de": 58.0}, 2: {"en": 92.0, "de": 57.2}}, "gat")
    none = runs(tmp_path, {1: {"en": 91.0, "de": 58.2}, 2: {"en": 90.0, "de": 57.4}}, "none")
    markdown = (report(tmp_path, gat, none) / "report.md").read_text(encoding="utf-8")
    assert "| gat | +0.5 | -0.2‡ |" in markdown
    assert "- de: the difference is the same on every seed (2 seeds), so the t-test's p is 0" in markdown
