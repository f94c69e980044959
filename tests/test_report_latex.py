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


def test_the_caption_keeps_option_hyphens_and_has_no_middle_dot_or_seed_s(tmp_path):
    """`--max-eval-examples` was typeset as an en dash, the title's `·` is not LaTeX, and "1 seed(s)" read badly."""
    import json

    run = write_run(tmp_path, "gat1", per_language={"en": 90.0, "de": 80.0})
    results = json.loads((run / "results.json").read_text())
    (run / "results.json").write_text(json.dumps({**results, "max_eval_examples": 50}))
    result = CliRunner().invoke(main, ["report", str(run), "--output-dir", str(tmp_path / "out"), "--latex"])
    assert result.exit_code == 0, result.output
    tex = (tmp_path / "out" / "report.tex").read_text(encoding="utf-8")
    caption = next(line for line in tex.splitlines() if line.startswith(r"\caption{"))
    assert caption.startswith(r"\caption{pawsx, test, accuracy: accuracy (\%), mean $\pm$ sd over 1 seed; ")
    assert r"(-{}-max-eval-examples)" in caption
    assert "--" not in caption and "·" not in caption and "seed(s)" not in caption


def test_latex_escape_breaks_double_hyphens_and_writes_symbols_as_math():
    from xsyn.report.latex import escape

    assert escape("--set a---b") == "-{}-set a-{}-{}-b"
    assert escape("gat · none − 1 ± 2 Δ") == r"gat $\cdot$ none $-$ 1 $\pm$ 2 $\Delta$"
