"""`xsyn report --latex`: booktabs tables with languages, average, mean ± sd and marked deltas."""

from click.testing import CliRunner
from test_report import labelled, write_run

from xsyn.cli import main


def test_latex_tables_hold_seed_statistics_and_marked_deltas(tmp_path):
    gat = [write_run(tmp_path, f"gat{seed}", seed=seed, per_language={"en": en, "de": de},
                     examples={"de": labelled(set(range(160)))}) for seed, en, de in ((1, 90.0, 80.0),
                                                                                      (2, 92.0, 80.0))]
    none = write_run(tmp_path, "none_base", variant="none", per_language={"en": 89.0, "de": 60.0},
                     examples={"de": labelled(set(range(120)))})
    args = ["report", *map(str, gat), "--baseline", str(none), "--output-dir", str(tmp_path / "out"),
            "--resamples", "200", "--latex"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    tex = (tmp_path / "out" / "report.tex").read_text(encoding="utf-8")
    lines = tex.splitlines()
    assert lines[:7] == [r"\begin{table}[t]", r"\centering", r"\small", r"\begin{tabular}{lrrr}", r"\toprule",
                         r"System & en$^\dagger$ & de & Avg. \\", r"\midrule"]
    # gat: en 91 ± sqrt(2), de 80 ± 0, average of (85, 86) = 85.5 ± 0.7; the baseline has one seed
    assert r"gat & $91.0 \pm 1.4$ & $80.0 \pm 0.0$ & $85.5 \pm 0.7$ \\" in lines
    assert r"none (baseline) & $89.0$ & $60.0$ & $74.5$ \\" in lines
    # de: 40 examples right only for gat in each seed, so p ~ 0; en has no per-example files: no mark
    assert r"$\Delta$ gat & $+2.0$ & $+20.0^{*}$ & $+11.0$ \\" in lines
    assert r"\bottomrule" in lines and r"\end{table}" in lines and r"\label{tab:pawsx-test-accuracy}" in lines


def test_latex_escapes_what_labels_may_hold():
    from xsyn.report.latex import escape

    assert escape("gat (gat_delta=2) 50% & #1") == r"gat (gat\_delta=2) 50\% \& \#1"
