"""`xsyn experiment run|status|report`: a grid of fine-tunes and evaluations from one file (`xsyn.experiments`)."""

from __future__ import annotations

from pathlib import Path

import click

from xsyn.cli.main import XsynCommand, main
from xsyn.experiments.plan import DEVICES
from xsyn.experiments.status import SHORT_LIST

LAUNCHERS = ("local", "slurm")


def _load(source: str, data_dir: str | None = None, model: str | None = None, max_steps: int | None = None,
          output_dir: str | None = None, sets: tuple[str, ...] = (), as_last_run: bool = False):
    """The experiment with the command line's overrides (`experiments.launch.load_with_overrides`), saying so
    where the last run's recorded settings chose its cells."""
    from xsyn.experiments.launch import load_with_overrides

    experiment, recorded = load_with_overrides(source, data_dir, model, max_steps, output_dir, sets, as_last_run)
    if recorded:
        click.echo(f"as last run: {recorded} (give options to look at other cells)", err=True)
    return experiment


def experiment_options(fn):
    """What selects an experiment's cells: `status` and `report` take them too, to find the same folders."""
    for option in reversed([
        click.argument("source", metavar="FILE|RECIPE"),
        click.option("--output-dir", type=click.Path(file_okay=False), default=None,
                     help="Where the cells' run folders go [default: the file's runs_dir, else experiments/<name>]."),
        click.option("--model", default=None, help="Run every cell on this model instead of the file's models."),
        click.option("--max-steps", type=click.IntRange(min=1), default=None,
                     help="Cap every cell's training at N optimiser steps (recorded in each cell's config and "
                          "folder name, and shown in the report)."),
        click.option("--data-dir", type=click.Path(file_okay=False), default=None,
                     help="A folder with one folder per task (DATA_DIR/<task>), as $XSYN_DATA_DIR."),
        click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                     help="A setting for every cell, as `xsyn finetune --set` (repeatable)."),
    ]):
        fn = option(fn)
    return fn


class _ExperimentGroup(click.Group):
    """Its help names the bundled recipes as the package holds them, read only when the help is shown."""

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from xsyn.experiments.experiment_file import recipe_names

        template = self.help
        self.help = template.replace("{recipes}", ", ".join(recipe_names()))
        try:
            super().format_help_text(ctx, formatter)
        finally:
            self.help = template


@main.group(cls=_ExperimentGroup)
def experiment() -> None:
    """A paper's table in one command: a grid of runs from a TOML file, resumable, with one report.

    \b
    FILE|RECIPE is an experiment file or a bundled recipe: {recipes}.
      xsyn experiment plan ahmad2021             # what it will cost, before any download
      xsyn experiment prepare ahmad2021          # data, models and parses ready, where the network is
      xsyn experiment run synth                  # every cell that is not finished, in order
      xsyn experiment status synth               # done / running / failed / to do
      xsyn experiment report synth               # index.md + a report per task
      xsyn experiment run ahmad2021 --launcher slurm --partition gpu --gpus-per-node 1 --time 720
    """


experiment.command_class = XsynCommand  # as every xsyn command: -v/-q after its name too


@experiment.command(name="run")
@experiment_options
@click.option("--launcher", type=click.Choice(LAUNCHERS), default="local", show_default=True,
              help="local: on this machine (one cell per GPU at a time); slurm: a job array through submitit.")
@click.option("--gpus", type=click.IntRange(min=0), default=None,
              help="local: GPUs to use at once, one cell each [default: every visible GPU].")
@click.option("--cell", "cell_patterns", multiple=True, metavar="PATTERN",
              help="Run only the cells whose names match (a glob, e.g. 'pawsx/*-seed1'; repeatable).")
@click.option("--partition", default=None, help="slurm: the partition.")
@click.option("--gpus-per-node", type=click.IntRange(min=0), default=1, show_default=True,
              help="slurm: GPUs per cell; more than one runs the cell under `accelerate launch`.")
@click.option("--time", "time_min", type=click.IntRange(min=1), default=24 * 60, show_default=True,
              help="slurm: time limit per cell, in minutes.")
@click.option("--cpus-per-task", type=click.IntRange(min=1), default=None, help="slurm: CPU cores per cell.")
@click.option("--mem-gb", type=click.FloatRange(min=0, min_open=True), default=None, help="slurm: memory per cell.")
@click.option("--array-parallelism", type=click.IntRange(min=1), default=None,
              help="slurm: cells of the array that may run at once.")
@click.option("--account", default=None, help="slurm: the account to charge.")
@click.option("--qos", default=None, help="slurm: the quality of service.")
@click.option("--constraint", default=None, help="slurm: a node feature constraint.")
@click.option("--wait", is_flag=True, help="Wait for the cells other processes are running (local) or for the "
              "jobs (slurm), and print each cell's outcome.")
@click.option("--progress", is_flag=True, help="local: progress bars for each cell's training and evaluation.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="xsyn's cache folder for every cell: parses/ and features/ (default: $XSYN_CACHE or ~/.cache/xsyn); "
                   "as --set cache_dir=DIR.")
@click.option("--offline", is_flag=True, help="The cells neither download nor parse: every input must be ready "
              "(`xsyn experiment prepare`), checked before any cell starts; they run with the hub offline. After a "
              "complete prepare, cells run offline without the flag.")
@click.option("--cells-per-gpu", type=click.IntRange(min=1), default=1, show_default=True,
              help="Cells at once on each GPU, each its own process (CUDA MPS where installed), as many as the "
                   "device's memory holds by the plan's estimate; one that runs out of memory is retried alone.")
@click.option("--prepare", "prepare_first", is_flag=True,
              help="Run `experiment prepare` first (slurm: as a CPU job the cells' array waits for), then the "
                   "cells offline.")
@click.option("--prepare-partition", default=None, help="slurm --prepare: the CPU job's partition.")
@click.option("--prepare-cpus", type=click.IntRange(min=1), default=8, show_default=True,
              help="slurm --prepare: the CPU job's cores (its parse workers).")
@click.option("--prepare-time", type=click.IntRange(min=1), default=6 * 60, show_default=True,
              help="slurm --prepare: the CPU job's time limit, in minutes.")
@click.option("--prepare-mem-gb", type=click.FloatRange(min=0, min_open=True), default=None,
              help="slurm --prepare: the CPU job's memory.")
def run_command(source, output_dir, model, max_steps, data_dir, sets, launcher, gpus, cell_patterns, partition,
                gpus_per_node, time_min, cpus_per_task, mem_gb, array_parallelism, account, qos, constraint,
                wait, progress, cache_dir, offline, cells_per_gpu, prepare_first, prepare_partition, prepare_cpus,
                prepare_time, prepare_mem_gb) -> None:
    """Run every cell that is not finished: a killed cell resumes from its state, a failed one is kept
    (its error in its folder, shown by `status`) and does not stop the others."""
    from xsyn.experiments.launch import (
        ClusterOptions,
        LocalOptions,
        PrepareJob,
        record_run,
        run_here,
        run_on_slurm,
    )
    from xsyn.experiments.prepare import decide_offline, manifest_lines, prepare
    from xsyn.utils.progress import quiet_libraries

    if not progress:
        quiet_libraries()
    spec = _load(source, data_dir, model, max_steps, output_dir, (*sets, *([f"cache_dir={cache_dir}"] if cache_dir
                                                                           else [])))
    cells = spec.select(cell_patterns)
    record_run(spec)
    if launcher == "slurm":
        job = PrepareJob(prepare_partition or partition, prepare_cpus, prepare_time, prepare_mem_gb, account, qos)
        offline = prepare_first or decide_offline(spec, cells, offline, echo=click.echo)
        run_on_slurm(spec, cells, ClusterOptions(
            partition=partition, gpus_per_node=gpus_per_node, time_min=time_min, cpus_per_task=cpus_per_task,
            mem_gb=mem_gb, array_parallelism=array_parallelism, account=account, qos=qos, constraint=constraint,
            cells_per_gpu=cells_per_gpu, offline=offline), source, wait, echo=click.echo,
            prepare=job if prepare_first else None)
        return
    if prepare_first:
        for line in manifest_lines(prepare(spec, echo=click.echo, progress=progress)):
            click.echo(line)
    offline = decide_offline(spec, cells, offline or prepare_first, echo=click.echo)
    run_here(spec, cells, gpus, progress, wait, source, echo=click.echo,
             options=LocalOptions(cells_per_gpu=cells_per_gpu, offline=offline))


@experiment.command(name="prepare")
@experiment_options
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="xsyn's cache folder for every cell: parses/ and features/ (as `run --cache-dir`).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Parse worker processes [default: this machine's cores].")
@click.option("--progress", is_flag=True, help="Progress bars for the parsing.")
@click.option("--launcher", type=click.Choice(LAUNCHERS), default="local", show_default=True,
              help="local: here; slurm: as one CPU job through submitit.")
@click.option("--partition", default=None, help="slurm: the CPU job's partition.")
@click.option("--cpus-per-task", type=click.IntRange(min=1), default=8, show_default=True,
              help="slurm: the CPU job's cores (its parse workers).")
@click.option("--time", "time_min", type=click.IntRange(min=1), default=6 * 60, show_default=True,
              help="slurm: the CPU job's time limit, in minutes.")
@click.option("--mem-gb", type=click.FloatRange(min=0, min_open=True), default=None, help="slurm: its memory.")
@click.option("--account", default=None, help="slurm: the account to charge.")
@click.option("--qos", default=None, help="slurm: the quality of service.")
def prepare_command(source, output_dir, model, max_steps, data_dir, sets, cache_dir, workers, progress, launcher,
                    partition, cpus_per_task, time_min, mem_gb, account, qos) -> None:
    """Make ready everything the cells read, once, where the network is: each model's files, each task's
    splits, every segment parsed with the cells' parser (into the parse cache) and their features. Resumable:
    a killed prepare parses again only what was in flight. Ends with what is ready and what is not, with the
    fix; then `xsyn experiment run --offline` needs no network and parses nothing."""
    from xsyn.experiments.launch import PrepareJob, submit_prepare
    from xsyn.experiments.prepare import PREPARED_FILE, NotReady, manifest_lines, prepare
    from xsyn.utils.progress import quiet_libraries

    if not progress:
        quiet_libraries()
    spec = _load(source, data_dir, model, max_steps, output_dir, (*sets, *([f"cache_dir={cache_dir}"] if cache_dir
                                                                           else [])))
    if launcher == "slurm":
        job = submit_prepare(spec, PrepareJob(partition, workers or cpus_per_task, time_min, mem_gb, account, qos))
        click.echo(f"submitted `experiment prepare` as SLURM job {job.job_id} (its manifest: "
                   f"{spec.runs_dir / PREPARED_FILE})")
        return
    manifest = prepare(spec, workers, echo=click.echo, progress=progress)
    lines = manifest_lines({**manifest, "path": str(spec.runs_dir / PREPARED_FILE)})
    for line in lines:
        click.echo(line)
    if any(not record.get("ready") for part in ("units", "models") for record in manifest[part].values()):
        raise NotReady("not every input is ready (listed above, with the fix for each)")


@experiment.command(name="status")
@experiment_options
@click.option("--cells", "every_cell", is_flag=True,
              help=f"List every cell [default: every cell up to {SHORT_LIST}, else the running and failed ones].")
@click.option("--device", type=click.Choice(DEVICES), default=None,
              help="The device of the plan the progress is shown against (`xsyn experiment plan`) [default: this "
                   "machine's: its GPU, else cpu].")
def status_command(source, output_dir, model, max_steps, data_dir, sets, every_cell, device) -> None:
    """The cells by state per task (done / running / failed / to do), a failure's last line, what is missing
    (once per task), the paper's published averages beside ours so far; then the plan's total, the hours the
    finished cells took, and the hours left at their pace."""
    from xsyn.experiments.status import status_lines

    spec = _load(source, data_dir, model, max_steps, output_dir, sets, as_last_run=True)
    for line in status_lines(spec, device, every_cell):
        click.echo(line)


@experiment.command(name="plan")
@experiment_options
@click.option("--device", type=click.Choice(DEVICES), default="h200", show_default=True,
              help="The device the cells will train on: its step times come from the benchmarks measured on it.")
@click.option("--bench", "bench_paths", multiple=True, type=click.Path(exists=True, path_type=Path),
              help="A benchmark JSON file or a folder of them (repeatable) [default: the repository's benchmarks/].")
@click.option("--examples", "given", multiple=True, metavar="TASK=N",
              help="Training examples of a task whose data is not on this machine (repeatable).")
@click.option("--parse-workers", type=click.IntRange(min=1), default=None,
              help="Parse worker processes [default: this machine's cores].")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as one JSON object.")
def plan_command(source, output_dir, model, max_steps, data_dir, sets, device, bench_paths, given, parse_workers,
                 as_json) -> None:
    """What the experiment will cost before it runs: per task the cells, training examples and optimiser steps
    per cell, hours per cell and in all, parse time per language, and checkpoint disk; each figure marked
    measured, extrapolated, counted, given or unknown."""
    import json

    from xsyn.experiments.bench_figures import default_bench_paths, read_benchmarks
    from xsyn.experiments.plan import given_examples, make_plan, plan_json, plan_lines

    spec = _load(source, data_dir, model, max_steps, output_dir, sets)
    examples = given_examples(given, spec.tasks)
    plan = make_plan(spec, device, read_benchmarks(bench_paths or default_bench_paths()), examples, parse_workers)
    click.echo(json.dumps(plan_json(plan), indent=2) if as_json else "\n".join(plan_lines(plan)))


@experiment.command(name="report")
@experiment_options
@click.option("--report-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where index.md and the task reports go [default: <runs dir>/report].")
@click.option("--resamples", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Bootstrap resamples per language or pair.")
@click.option("--html", is_flag=True, help="Also write index.html: the index (with the paper's numbers) and every "
              "task's report in one self-contained page (figures inline, sortable tables, no network needed).")
def report_command(source, output_dir, model, max_steps, data_dir, sets, report_dir, resamples, html) -> None:
    """The combined report of the finished cells: per task, tables, deltas with significance, pair
    matrices, heatmaps and the transfer gap, with the paper's published scores beside ours."""
    from xsyn.experiments.report import write_experiment_report
    from xsyn.report import BootstrapSettings

    spec = _load(source, data_dir, model, max_steps, output_dir, sets, as_last_run=True)
    target = report_dir or spec.runs_dir / "report"
    index = write_experiment_report(spec, target, BootstrapSettings(resamples=resamples), html=html)
    click.echo(f"report: {index}" + (f" and {index.with_suffix('.html')}" if html else ""))
