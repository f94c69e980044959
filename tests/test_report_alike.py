"""What `xsyn report` says of runs that predicted the same label for every example (evaluate's warning, kept in
results.json as `predicted_nothing`), of stars over one seed, and of its pair tables' corner."""

import json
import subprocess
import sys
from pathlib import Path

from conftest import cpu_process_env
from test_report import labelled, write_run

XSYN = Path(sys.executable).with_name("xsyn")  # the installed console script
SAME = "the same prediction, 'yes', for every example"


def _majority_runs(root):
    """One seed of gat that says 'yes' to every German example (160 of 200 are 'yes': 80%), one of none
    that gets 140 right there; both alike elsewhere. The pairs: gat says 'yes' for every de-en example too."""
    de_gat = [(f"q{i}", "yes", "yes" if i < 160 else "no") for i in range(200)]
    de_none = [(f"q{i}", "yes" if i < 140 else "no", "yes" if i < 160 else "no") for i in range(200)]
    pairs = {"en": {"en": 80.0, "de": 61.0}, "de": {"en": 70.0, "de": 75.0}}
    gat = write_run(root, "gat", variant="gat", seed=1, per_language={"en": 80.0, "de": 80.0}, pairs=pairs,
                    examples={"en": labelled(set(range(160))), "de": de_gat})
    none = write_run(root, "none", variant="none", seed=1, per_language={"en": 80.0, "de": 70.0}, pairs=pairs,
                     examples={"en": labelled(set(range(160))), "de": de_none})
    results = json.loads((gat / "results.json").read_text())
    results["predicted_nothing"] = {"de": SAME, "de-en": SAME}
    (gat / "results.json").write_text(json.dumps(results))
    return gat, none


def test_a_run_at_the_majority_label_is_named_beside_every_number_it_feeds_in_md_and_html(tmp_path):
    gat, none = _majority_runs(tmp_path / "runs")
    out = tmp_path / "out"
    done = subprocess.run([str(XSYN), "report", str(gat), "--baseline", str(none), "--resamples", "200", "--html",
                           "--output-dir", str(out)], env=cpu_process_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    markdown = (out / "report.md").read_text()
    # gat's de, its avg and gap (both over de), and the deltas there; en alone is not fed by it
    assert "| gat | 1 | 80.0 | 80.0 !1 | 80.0 !1 | 0.0 !1 |" in markdown
    assert "| none (baseline) | 1 | 80.0 | 70.0 | 75.0 | 10.0 |" in markdown
    assert "| gat | +0.0 | +10.0* !1 | +5.0 !1 | -10.0 !1 |" in markdown  # starred, and named
    assert f"- !1: gat, seed 1, predicted {SAME} in de, de-en" in markdown
    assert "| de | 70.0 !1 | 75.0 (n=200) !1 |" in markdown  # gat's pairs: de-en, and de-de (results' "de")
    assert "| de | +0.0 !1 | +0.0 !1 |" in markdown  # their deltas
    page = (out / "report.html").read_text()
    assert "<td>+10.0* !1</td>" in page and f"!1: gat, seed 1, predicted {SAME} in de, de-en" in page
    report = json.loads((out / "report.json").read_text())
    assert report["experiments"][0]["systems"][0]["runs"][0]["predicted_alike"] == {"de": SAME, "de-en": SAME}


def test_one_seed_says_its_stars_measure_test_sampling_only(tmp_path):
    gat, none = _majority_runs(tmp_path / "runs")
    out = tmp_path / "out"
    done = subprocess.run([str(XSYN), "report", str(gat), "--baseline", str(none), "--resamples", "50",
                           "--output-dir", str(out)], env=cpu_process_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    markdown = (out / "report.md").read_text()
    assert ("**One seed** (gat, none (baseline)): `*` measures the sampling of the test examples only, not the "
            "variance between training seeds") in markdown
    assert "| sentence1 ↓ sentence2 → | en | de |" in markdown  # a pair table's corner says what it holds


def test_a_finding_resting_on_such_a_run_says_so_and_names_it(tmp_path):
    from xsyn.report import build_report
    from xsyn.report.findings import AnalysisSettings, analyse

    gat, none = _majority_runs(tmp_path / "runs")
    (parser,) = analyse(build_report([gat], [none]), AnalysisSettings(("parser",), parser_scores={"en": 90, "de": 80}))
    assert parser.alike == {"de": [f"gat, seed 1, predicted {SAME}"]}
    assert parser.finding.endswith("(de: a run there predicted the same for every example, which alone can make a "
                                   "gain)")
