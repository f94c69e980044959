"""Where an experiment's cells run: `run_experiment` (`xsyn experiment run`) records the command line's settings,
then runs the cells here (`run_here`: `xsyn.experiments.local`) or submits them to SLURM (`run_on_slurm`:
`xsyn.experiments.slurm`), offline where asked or where a complete `prepare` (`xsyn.experiments.prepare`) made
every input they read; `prepare_here_or_on_slurm` (`xsyn experiment prepare`) makes that choice for `prepare`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from xsyn.experiments.cells import FAILED, RUNNING
from xsyn.experiments.experiment_file import Cell, Experiment
from xsyn.experiments.last_run import record_run
from xsyn.experiments.local import LocalOptions, run_local, visible_gpus, wait_for_held
from xsyn.experiments.prepare import (
    PREPARED_FILE,
    NotReady,
    decide_offline,
    manifest_lines,
    not_ready_lines,
    prepare,
    require_models,
    require_parseable,
)
from xsyn.experiments.slurm import SUBMITIT_FOLDER, ClusterOptions, PrepareJob, job_outcomes, submit, submit_prepare
from xsyn.utils.errors import OptionError, XsynError
from xsyn.utils.progress import quiet_libraries


@dataclass(frozen=True)
class RunChoices:
    """How `experiment run` runs its cells (its options): where, how many at once, offline, prepared first."""

    launcher: str = "local"
    gpus: int | None = None
    partition: str | None = None
    gpus_per_node: int = 1
    time_min: int = 24 * 60
    cpus_per_task: int | None = None
    mem_gb: float | None = None
    array_parallelism: int | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    wait: bool = False
    progress: bool = False
    offline: bool = False
    cells_per_gpu: int = 1
    prepare_first: bool = False
    prepare_partition: str | None = None
    prepare_cpus: int = 8
    prepare_time: int = 6 * 60
    prepare_mem_gb: float | None = None


# RunChoices' fields only one launcher reads, and the option of each (`--NAME` where not named here)
SLURM_ONLY = ("partition", "gpus_per_node", "time_min", "cpus_per_task", "mem_gb", "array_parallelism", "account",
              "qos", "constraint", "prepare_partition", "prepare_cpus", "prepare_time", "prepare_mem_gb")
LOCAL_ONLY = ("gpus",)
OPTION_NAMES = {"time_min": "time"}


def check_launcher_options(launcher: str, given: dict[str, Any], defaults: dict[str, Any],
                           others: tuple[str, ...] | None = None) -> None:
    """Options the chosen launcher does not read (`others`, default: `--partition` ... under the local one,
    `--gpus` under SLURM), given with a value other than their default: refused, as the run would ignore them
    without a word."""
    others = others or (SLURM_ONLY if launcher == "local" else LOCAL_ONLY)
    named = [f"--{OPTION_NAMES.get(name, name).replace('_', '-')}" for name in others
             if name in given and given[name] != defaults.get(name)]
    if named:
        other = "slurm" if launcher == "local" else "local"
        raise OptionError(f"{', '.join(named)}: {'an option' if len(named) == 1 else 'options'} of --launcher "
                          f"{other}, and the launcher is {launcher}, which would ignore "
                          f"{'it' if len(named) == 1 else 'them'}: add --launcher {other}, or leave "
                          f"{'it' if len(named) == 1 else 'them'} out")


def run_experiment(experiment: Experiment, cells: list[Cell], choices: RunChoices, source: str,
                   echo: Callable[[str], None] = print) -> None:
    """`xsyn experiment run`: record the command line's settings, then run the cells here (after `prepare` with
    `prepare_first`) or submit them to SLURM (after a `prepare` CPU job); offline where asked, or where a
    complete `prepare` made every input they read."""
    check_launcher_options(choices.launcher, asdict(choices), asdict(RunChoices()))
    if not choices.progress:
        quiet_libraries()
    require_models(experiment)  # before anything: a mistyped model path
    require_parseable(experiment)  # and a language no download makes parseable
    record_run(experiment)
    if choices.launcher == "slurm":
        job = PrepareJob(choices.prepare_partition or choices.partition, choices.prepare_cpus, choices.prepare_time,
                         choices.prepare_mem_gb, choices.account, choices.qos)
        offline = choices.prepare_first or decide_offline(experiment, cells, choices.offline, echo=echo)
        cluster = {name: getattr(choices, name) for name in ClusterOptions.__dataclass_fields__ if name != "offline"}
        run_on_slurm(experiment, cells, ClusterOptions(**cluster, offline=offline), source, choices.wait, echo=echo,
                     prepare=job if choices.prepare_first else None)
        return
    if choices.prepare_first:
        for line in manifest_lines(prepare(experiment, echo=echo, progress=choices.progress)):
            echo(line)
    offline = decide_offline(experiment, cells, choices.offline or choices.prepare_first, echo=echo)
    run_here(experiment, cells, choices.gpus, choices.progress, choices.wait, source, echo=echo,
             options=LocalOptions(cells_per_gpu=choices.cells_per_gpu, offline=offline))


class CellsFailed(XsynError):
    """Cells of an `experiment run` failed (the others ran), or their submission did; the message says where."""


def run_here(experiment: Experiment, cells: list[Cell], gpus: int | None, progress: bool, wait: bool,
             source: str, echo: Callable[[str], None] = print, options: LocalOptions | None = None) -> None:
    """Run the cells on this machine's GPUs (`gpus` of them, default every visible one; `options.cells_per_gpu`
    workers each; none: on the CPU); with `wait`, then wait for the cells other processes hold. `CellsFailed`
    where any failed (a cell another process is running is not one)."""
    devices = visible_gpus()
    check_gpus(gpus, (options or LocalOptions()).cells_per_gpu, devices)
    if gpus is not None:
        devices = devices[:gpus]
    outcomes = run_local(experiment, devices, cells, echo=echo, progress=progress, options=options or LocalOptions())
    held = [o for o in outcomes if o.state == RUNNING]
    if held and wait:
        echo(f"waiting for {len(held)} cells other processes are running ...")
        outcomes = [o for o in outcomes if o.state != RUNNING] + wait_for_held(experiment, held, echo, progress)
        held = []
    failed = [o for o in outcomes if o.state == FAILED]
    if failed:
        raise CellsFailed(f"{len(failed)} of {len(outcomes)} cells failed (the others ran); "
                          f"`xsyn experiment status {source}` shows why, each cell's error.txt the traceback")
    if held:
        echo(f"{len(held)} of {len(outcomes)} cells are being run by other processes (each named above with "
             f"its owner), the rest are finished; `--wait` waits for them, `xsyn experiment status {source}` "
             "follows them")
        return
    echo(f"finished; `xsyn experiment report {source}` writes the report")


def check_gpus(gpus: int | None, cells_per_gpu: int, visible: list[str]) -> None:
    """GPUs asked for that this machine does not have: `--gpus N` beyond the visible ones, or `--cells-per-gpu N`
    with none (the cells would all start at once on the CPU). Refused, saying what is there."""
    seen = f"{len(visible)} visible GPU{'s' if len(visible) != 1 else ''}" + (
        f" ({', '.join(visible)})" if visible else "") + " (CUDA_VISIBLE_DEVICES and torch see them)"
    if gpus is not None and gpus > len(visible):
        raise OptionError(f"--gpus {gpus}: this machine has {seen}: give --gpus {len(visible)} or fewer, or leave it "
                          "out (every visible GPU)" + ("; without a GPU the cells run on the CPU, one after "
                                                       "another" if not visible else ""))
    if cells_per_gpu > 1 and (not visible or gpus == 0):
        raise OptionError(f"--cells-per-gpu {cells_per_gpu}: {'--gpus 0 uses no GPU' if visible else seen}, so "
                          "the cells would all start at once on the CPU: leave it out (on the CPU the cells run one "
                          "after another), or run on a machine with a GPU")


def run_on_slurm(experiment: Experiment, cells: list[Cell], options: ClusterOptions, source: str, wait: bool,
                 echo: Callable[[str], None] = print, prepare: PrepareJob | None = None) -> None:
    """Submit the cells as one job array (after a `prepare` CPU job, with `prepare`); with `wait`, say each cell's
    outcome as its job ends (`CellsFailed` where any failed)."""
    try:
        submitted = submit(experiment, options, cells=cells, prepare=prepare)
    except Exception as err:  # submitit's own errors (no sbatch, a rejected submission): a message, not a traceback
        raise CellsFailed(slurm_failed("the cells", err)) from None
    if not submitted:
        echo("every cell is finished or running; nothing to submit")
        return
    if prepare is not None:
        echo("submitted `experiment prepare` as a CPU job; the cells' array starts when it succeeds (afterok)")
    echo(f"submitted {len(submitted)} cells as SLURM job array {submitted[0][1].job_id.split('_')[0]} "
         f"(scripts and logs: {experiment.runs_dir / SUBMITIT_FOLDER}); `xsyn experiment status {source}` follows "
         "them")
    if not wait:
        return
    failed = 0
    for outcome in job_outcomes(submitted):
        failed += outcome["state"] == FAILED
        echo(f"{outcome['cell']}: {outcome['state']}" + (f": {outcome['detail']}" if outcome["state"] == FAILED
                                                          else ""))
    if failed:
        raise CellsFailed(f"{failed} cells failed; `xsyn experiment status {source}` shows why")


def slurm_failed(what: str, err: Exception) -> str:
    """Why submitting `what` to SLURM failed, with the way out where this machine has no SLURM at all."""
    message = f"submitting {what} to SLURM failed: {' '.join(str(err).split())}"
    if shutil.which("sbatch") is None:
        message += " (this machine has no SLURM: no sbatch on the PATH; run it here with --launcher local)"
    return message


def prepare_here_or_on_slurm(experiment: Experiment, workers: int | None, progress: bool,
                             job: dict[str, Any] | None = None, echo: Callable[[str], None] = print,
                             on_slurm: bool = True) -> None:
    """`xsyn experiment prepare`: here, ending with the manifest's lines (`NotReady` where an input is not
    ready), or with `job` (`slurm.PrepareJob`'s fields) as one SLURM CPU job; `job` with `on_slurm` off: the
    options of such a job given to a prepare here, refused where they differ from their defaults."""
    if not progress:
        quiet_libraries()
    if job is not None and not on_slurm:  # the CPU job's options, given to a prepare that runs here
        check_launcher_options("local", job, asdict(PrepareJob()), tuple(job))
        job = None
    if job is not None:
        require_models(experiment)
        require_parseable(experiment)
        try:
            submitted = submit_prepare(experiment, PrepareJob(**{**job, "cpus": workers or job.get("cpus", 8)}))
        except Exception as err:  # submitit's own errors (no sbatch, a rejected submission): a message, as `run`'s
            raise CellsFailed(slurm_failed("`experiment prepare`", err)) from None
        echo(f"submitted `experiment prepare` as SLURM job {submitted.job_id} (its manifest: "
             f"{experiment.runs_dir / PREPARED_FILE})")
        return
    manifest = prepare(experiment, workers, echo=echo, progress=progress)
    for line in manifest_lines({**manifest, "path": str(experiment.runs_dir / PREPARED_FILE)}, with_causes=False):
        echo(line)
    causes = not_ready_lines(manifest)  # on stderr with the error, not among the lines above
    if causes:
        raise NotReady("not every input is ready; each with its fix:\n" + "\n".join(causes))
