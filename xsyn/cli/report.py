"""The `xsyn report` command."""

from __future__ import annotations

from pathlib import Path

import click

from xsyn.cli.main import main
from xsyn.report.aggregate import (
    DEFAULT_ALPHA,
    DEFAULT_BOOTSTRAP_SEED,
    DEFAULT_RESAMPLES,
    BootstrapSettings,
    build_report,
)
from xsyn.report.render import write_report


@main.command(name="report")
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
@click.option("--latex", is_flag=True, help="Also write report.tex: one booktabs table per experiment (languages, "
              "average, mean ± sd over seeds, deltas with their significance marks) for a paper.")
@click.option("--html", is_flag=True, help="Also write report.html: the whole report in one self-contained page "
              "(figures inline, sortable tables, no network needed) to open in a browser or send.")
def report_command(run_dirs: tuple[Path, ...], baseline_dirs: tuple[Path, ...], output_dir: Path,
                   resamples: int, bootstrap_seed: int, alpha: float, latex: bool, html: bool) -> None:
    """Tables over runs and seeds, deltas against a baseline with significance, and heatmaps.

    \b
    Example:
      xsyn report runs/pawsx/gat-seed* --baseline runs/pawsx/none-seed1 \\
          --baseline runs/pawsx/none-seed2 --output-dir reports/pawsx
    """
    report = build_report(run_dirs, baseline_dirs, BootstrapSettings(resamples, bootstrap_seed, alpha))
    written = write_report(report, output_dir, latex=latex, html=html)
    click.echo(f"wrote {len(written)} files to {output_dir}; start with {output_dir / 'report.md'}")
