"""The `xsyn report` command."""

from __future__ import annotations

from pathlib import Path

import click

from xsyn.cli.options import XsynCommand
from xsyn.report.aggregate import (
    DEFAULT_ALPHA,
    DEFAULT_BOOTSTRAP_SEED,
    DEFAULT_RESAMPLES,
    BootstrapSettings,
    build_report,
)
from xsyn.report.findings import (
    DEFAULT_PERMUTATION_SEED,
    DEFAULT_PERMUTATIONS,
    AnalysisSettings,
    analyse,
    read_parser_scores,
)
from xsyn.report.render import write_report


@click.command(name="report", cls=XsynCommand)
@click.argument("run_dirs", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--baseline", "baseline_dirs", multiple=True,
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A baseline run directory (repeat for its seeds) or a folder holding them.")
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("xsyn-report"),
              show_default=True, help="Where report.md, report.json, the CSVs and PNGs go.")
@click.option("--resamples", type=click.IntRange(min=1), default=DEFAULT_RESAMPLES, show_default=True,
              help="Bootstrap resamples per language or pair.")
@click.option("--bootstrap-seed", type=int, default=DEFAULT_BOOTSTRAP_SEED, show_default=True,
              help="Seeds the bootstrap resamples.")
@click.option("--alpha", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=DEFAULT_ALPHA,
              show_default=True, help="Significance level of the marks.")
@click.option("--analysis", "analyses", default="", metavar="NAMES",
              help="Where syntax helps, comma-separated: family (gain per language grouped by language family), "
                   "typology (gain vs URIEL syntactic distance from the source, Spearman's rho with a permutation "
                   "p), parser (gain vs the parser's LAS; needs --parser-quality).")
@click.option("--parser-quality", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="LAS per language for --analysis parser: the JSON `xsyn parser-quality --output` writes, or "
                   "lines of `lang LAS`.")
@click.option("--permutations", type=click.IntRange(min=1), default=DEFAULT_PERMUTATIONS, show_default=True,
              help="Random pairings behind a correlation's p-value (every pairing where there are fewer).")
@click.option("--permutation-seed", type=int, default=DEFAULT_PERMUTATION_SEED, show_default=True,
              help="Seeds the random pairings.")
@click.option("--latex", is_flag=True, help="Also write report.tex: one booktabs table per experiment (languages, "
              "average, mean ± sd over seeds, deltas with their significance marks) for a paper.")
@click.option("--html", is_flag=True, help="Also write report.html: the whole report in one self-contained page "
              "(figures inline, sortable tables, no network needed) to open in a browser or send.")
def report_command(run_dirs: tuple[Path, ...], baseline_dirs: tuple[Path, ...], output_dir: Path,
                   resamples: int, bootstrap_seed: int, alpha: float, analyses: str, parser_quality: Path | None,
                   permutations: int, permutation_seed: int, latex: bool, html: bool) -> None:
    """Tables over runs and seeds, deltas against a baseline with significance, and heatmaps.

    \b
    Example:
      xsyn report runs/pawsx/gat-seed* --baseline runs/pawsx/none-seed1 \\
          --baseline runs/pawsx/none-seed2 --output-dir reports/pawsx --analysis family,typology
    """
    report = build_report(run_dirs, baseline_dirs, BootstrapSettings(resamples, bootstrap_seed, alpha))
    names = tuple(name.strip() for name in analyses.split(",") if name.strip())
    if names:
        scores = read_parser_scores(parser_quality) if parser_quality is not None else None
        report.analyses = analyse(report, AnalysisSettings(names, scores, str(parser_quality), permutations,
                                                           permutation_seed, alpha))
        for analysis in report.analyses:
            click.echo(f"{analysis.name} · {analysis.experiment} · {analysis.system}: {analysis.finding}")
    written = write_report(report, output_dir, latex=latex, html=html)
    start = output_dir / ("report.html" if html else "report.md")  # the page that holds the whole report
    click.echo(f"wrote {len(written)} files to {output_dir}; start with {start}")
