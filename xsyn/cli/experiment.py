"""`xsyn experiment run|status|report`: a grid of fine-tunes and evaluations from one file (`xsyn.experiments`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import click

from xsyn.cli.options import COUNT, FOLDER, XsynCommand, options
from xsyn.experiments.bench_figures import default_bench_paths, read_benchmarks
from xsyn.experiments.experiment_file import recipe_names
from xsyn.experiments.last_run import load_with_overrides
from xsyn.experiments.plan import DEVICES, PLAN_GPUS, given_examples, make_plan, plan_json, plan_lines
from xsyn.experiments.report import write_experiment_report
from xsyn.experiments.status import SHORT_LIST, status_lines
from xsyn.report import BootstrapSettings

LAUNCHERS = ("local", "slurm")


def _load(source: str, data_dir: str | None = None, model: str | None = None, max_steps: int | None = None,
          output_dir: str | None = None, sets: tuple[str, ...] = (), as_last_run: bool = False,
          cache_dir: str | None = None):
    """The experiment with the command line's overrides (`experiments.last_run.load_with_overrides`; `cache_dir` as
    `--set cache_dir=DIR`), saying so where the last run's recorded settings chose its cells."""
    sets = (*sets, *([f"cache_dir={cache_dir}"] if cache_dir else []))
    experiment, recorded = load_with_overrides(source, data_dir, model, max_steps, output_dir, sets, as_last_run)
    if recorded:
        click.echo(f"as last run: {recorded} (give options to look at other cells)", err=True)
    return experiment


GB = click.FloatRange(min=0, min_open=True)


def experiment_options(fn):
    """What selects an experiment's cells: `status` and `report` take them too, to find the same folders."""
    return options(
        click.argument("source", metavar="FILE|RECIPE"),
        click.option("--output-dir", type=FOLDER, help="The cells' run folders [default: runs_dir, or "
                                                       "experiments/<name>]."),
        click.option("--model", help="Run every cell on this model instead of the file's models."),
        click.option("--max-steps", type=COUNT, help="Cap every cell's training at N optimiser steps (recorded in "
                                                     "each cell's config and folder name, and shown in the report)."),
        click.option("--data-dir", type=FOLDER, help="A folder with one folder per task (DATA_DIR/<task>), as "
                                                     "$XSYN_DATA_DIR."),
        click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="A setting for every cell, as `xsyn "
                                                                               "finetune --set` (repeatable)."),
    )(fn)


class _ExperimentGroup(click.Group):
    """Its help names the bundled recipes as the package holds them, read only when the help is shown."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        template = self.help
        self.help = template.replace("{recipes}", ", ".join(recipe_names()))
        try:
            super().format_help_text(ctx, formatter)
        finally:
            self.help = template


@click.group(cls=_ExperimentGroup)
def experiment() -> None:
    """A paper's table in one command: a grid of runs from a TOML file, resumable, with one report.

    \b
    FILE|RECIPE is an experiment file or a bundled recipe: {recipes}.
      xsyn experiment prepare ahmad2021          # data, models and parses ready, where the network is
      xsyn experiment run synth                  # every cell that is not finished, in order
      xsyn experiment status synth               # done / running / failed / to do
      xsyn experiment report synth               # index.md + a report per task
      xsyn experiment run ahmad2021 --launcher slurm --partition gpu --gpus-per-node 1 --time 720
    """


experiment.command_class = XsynCommand  # as every xsyn command: -v/-q after its name too


cache_dir_option = click.option("--cache-dir", type=FOLDER, help="xsyn's cache folder for every cell: parses/ and "
                                                                 "features/ (default: $XSYN_CACHE or ~/.cache/xsyn); "
                                                                 "as --set cache_dir=DIR.")


def prepare_job_options(prefix: str = "") -> Callable:
    """`experiment prepare` as one SLURM CPU job (`prepare --launcher slurm`; `run --prepare`: `prefix` prepare-)."""
    return options(
        click.option(f"--{prefix}partition", help="slurm: the CPU job's partition."),
        click.option(f"--{prefix}cpus", type=COUNT, default=8, show_default=True,
                     help="slurm: the CPU job's cores (its parse workers)."),
        click.option(f"--{prefix}time", type=COUNT, default=6 * 60, show_default=True,
                     help="slurm: the CPU job's time limit, in minutes."),
        click.option(f"--{prefix}mem-gb", type=GB, help="slurm: the CPU job's memory."),
    )


@experiment.command(name="run")
@experiment_options
@click.option("--launcher", type=click.Choice(LAUNCHERS), default="local", show_default=True,
              help="local: on this machine; slurm: a job array (submitit).")
@click.option("--gpus", type=click.IntRange(min=0), help="local: GPUs to use at once [default: every visible GPU].")
@click.option("--cell", "cell_patterns", multiple=True, metavar="PATTERN",
              help="Only the cells whose names match (a glob: 'pawsx/*-seed1').")
@click.option("--gpus-per-node", type=click.IntRange(min=0), default=1, show_default=True,
              help="slurm: GPUs per cell; over 1: `accelerate launch`.")
@click.option("--time", "time_min", type=COUNT, default=24 * 60, show_default=True,
              help="slurm: time limit per cell, in minutes.")
@click.option("--partition", help="slurm: the partition.")
@click.option("--cpus-per-task", type=COUNT, help="slurm: cores.")
@click.option("--array-parallelism", type=COUNT, help="slurm: cells of the array that may run at once.")
@click.option("--mem-gb", type=GB, help="slurm: memory per cell.")
@click.option("--account", help="slurm: the account.")
@click.option("--qos", help="slurm: the QOS.")
@click.option("--constraint", help="slurm: a node feature.")
@click.option("--wait", is_flag=True,
              help="Wait for the cells other processes run (local) or the jobs (slurm); say each.")
@click.option("--progress", is_flag=True, help="local: progress bars for each cell's training and evaluation.")
@cache_dir_option
@click.option("--offline", is_flag=True,
              help="Cells that neither download nor parse: every input ready (`experiment prepare`), checked first. "
                   "After a complete prepare, cells run offline anyway.")
@click.option("--cells-per-gpu", type=COUNT, default=1, show_default=True,
              help="Cells at once per GPU, a process each (CUDA MPS where installed), as many as its memory holds by "
                   "the plan's estimate; one out of memory is retried alone.")
@click.option("--prepare", "prepare_first", is_flag=True,
              help="`experiment prepare` first (slurm: a CPU job the array waits for).")
@prepare_job_options("prepare-")
def run_command(source, output_dir, model, max_steps, data_dir, sets, cell_patterns, cache_dir, **options) -> None:
    """Run every cell that is not finished: a killed cell resumes from its state, a failed one is kept
    (its error in its folder, shown by `status`) and does not stop the others."""
    from xsyn.experiments.launch import RunChoices, run_experiment

    spec = _load(source, data_dir, model, max_steps, output_dir, sets, cache_dir=cache_dir)
    run_experiment(spec, spec.select(cell_patterns), RunChoices(**options), source, echo=click.echo)


@experiment.command(name="prepare")
@experiment_options
@cache_dir_option
@click.option("--workers", type=COUNT, help="Parse worker processes [default: this machine's cores].")
@click.option("--progress", is_flag=True, help="Parse progress bars.")
@click.option("--account", help="slurm: account.")
@click.option("--launcher", type=click.Choice(LAUNCHERS), default="local", show_default=True,
              help="local: here; slurm: as one CPU job (submitit).")
@prepare_job_options()
def prepare_command(source, output_dir, model, max_steps, data_dir, sets, cache_dir, workers, progress, launcher,
                    **job) -> None:
    """Make ready, where the network is, all the cells read: models, data, parses, features (resumable); then
    say what is ready and what is not, with the fix. `xsyn experiment run --offline` then needs neither."""
    from xsyn.experiments.launch import prepare_here_or_on_slurm

    spec = _load(source, data_dir, model, max_steps, output_dir, sets, cache_dir=cache_dir)
    prepare_here_or_on_slurm(spec, workers, progress, job if launcher == "slurm" else None, click.echo)


@experiment.command(name="status")
@experiment_options
@click.option("--cells", "every_cell", is_flag=True,
              help=f"List every cell [default: every cell up to {SHORT_LIST}, else the running and failed ones].")
@click.option("--device", type=click.Choice(DEVICES),
              help="The device of the plan the progress is shown against (`xsyn experiment plan`) [default: this "
                   "machine's: its GPU, else cpu].")
def status_command(source, output_dir, model, max_steps, data_dir, sets, every_cell, device) -> None:
    """The cells by state per task (done / running / failed / to do), a failure's last line, what is missing
    (once per task), the paper's published averages beside ours so far; then the plan's total, the hours the
    finished cells took, and the hours left at their pace."""
    spec = _load(source, data_dir, model, max_steps, output_dir, sets, as_last_run=True)
    for line in status_lines(spec, device, every_cell):
        click.echo(line)


@experiment.command(name="plan")
@experiment_options
@click.option("--device", type=click.Choice(DEVICES), default="h200", show_default=True,
              help="The device the cells will train on: its step times come from the benchmarks measured on it.")
@click.option("--bench", "bench_paths", type=click.Path(exists=True, path_type=Path), multiple=True, metavar="PATH",
              help="A benchmark JSON file or a folder of them (repeatable) [default: the repository's benchmarks/].")
@click.option("--examples", "given", multiple=True, metavar="TASK=N",
              help="Training examples of a task whose data is not here (repeatable).")
@click.option("--parse-workers", type=COUNT, help="Parse worker processes [default: this machine's cores].")
@click.option("--gpus", type=COUNT, default=PLAN_GPUS, show_default=True,
              help="Also say how long the cells take on N GPUs at once, one cell each (as `experiment run --gpus N`).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as one JSON object.")
def plan_command(source, output_dir, model, max_steps, data_dir, sets, device, bench_paths, given, parse_workers,
                 gpus, as_json) -> None:
    """What the experiment will cost before it runs: per task the cells, training examples and optimiser steps
    per cell, hours per cell and in all (one GPU, and N at once), parse time per language, and checkpoint disk;
    each figure marked measured, extrapolated, counted, given or unknown."""
    spec = _load(source, data_dir, model, max_steps, output_dir, sets)
    examples = given_examples(given, spec.tasks)
    shipped = default_bench_paths()  # with --bench FILE, what a precision FILE lacks is derived by (ratios)
    ratios = read_benchmarks([path for path in shipped if path.exists()]).steps if bench_paths else ()
    plan = make_plan(spec, device, read_benchmarks(bench_paths or shipped), examples, parse_workers,
                     ratios_from=ratios, gpus=gpus)
    click.echo(json.dumps(plan_json(plan), indent=2) if as_json else "\n".join(plan_lines(plan)))


@experiment.command(name="report")
@experiment_options
@click.option("--report-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where index.md and the task reports go [default: <runs dir>/report].")
@click.option("--resamples", type=COUNT, default=1000, show_default=True,
              help="Bootstrap resamples per language or pair.")
@click.option("--html", is_flag=True,
              help="Also write index.html: the index (with the paper's numbers) and every task's report in one "
                   "self-contained page (figures inline, sortable tables, no network needed).")
def report_command(source, output_dir, model, max_steps, data_dir, sets, report_dir, resamples, html) -> None:
    """The combined report of the finished cells: per task, tables, deltas with significance, pair
    matrices, heatmaps and the transfer gap, with the paper's published scores beside ours."""
    spec = _load(source, data_dir, model, max_steps, output_dir, sets, as_last_run=True)
    target = report_dir or spec.runs_dir / "report"
    index = write_experiment_report(spec, target, BootstrapSettings(resamples=resamples), html=html)
    click.echo(f"report: {index}" + (f" and {index.with_suffix('.html')}" if html else ""))
