"""Launchers: where the cells of an experiment run.

- `run_local`: on this machine, in a stable order. With no GPU or one, one cell after another in
  this process; with several, one cell per GPU at a time, each in a worker process that sees only
  its GPU (CUDA_VISIBLE_DEVICES).
- `submit`: through submitit (SLURM job arrays: one array task per cell). A job with several GPUs
  runs its cell under `accelerate launch`. The same function with `cluster="local"` runs the jobs
  with submitit's local executor, which is how the tests run the code that goes to SLURM.

Every launcher runs `run_cell`, so a finished cell is skipped, a killed one resumes, and a failed
one is kept in its folder without stopping the others.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from xsyn.experiments.cells import (
    DONE,
    FAILED,
    QUEUED_FILE,
    RUNNING,
    CellState,
    cell_state,
    run_cell,
)
from xsyn.experiments.experiment_file import Cell, Experiment, Overrides, load_experiment
from xsyn.experiments.locks import clear_stale_lock
from xsyn.utils.errors import XsynError
from xsyn.utils.io import atomic_write_json

log = logging.getLogger("xsyn")

SUBMITIT_FOLDER = "submitit"  # under runs_dir: submitit's job scripts, logs and its own job transport
LAST_RUN_FILE = "last_run.json"  # under runs_dir: the command line's settings of the last `experiment run`


def record_run(experiment: Experiment) -> None:
    """Remember the command line's settings (--max-steps, --model, --set, --data-dir) beside the cells, so that
    `status` and `report` find the same cells without the user typing them again."""
    atomic_write_json(experiment.runs_dir / LAST_RUN_FILE, json.loads(experiment.overrides.to_json()))


def load_as_last_run(source: str, runs_dir: str | None) -> tuple[Experiment, Overrides | None]:
    """The experiment as its last `experiment run` ran it (its recorded settings, if any), and those settings."""
    experiment = load_experiment(source, Overrides(runs_dir=runs_dir))
    try:
        recorded = json.loads((experiment.runs_dir / LAST_RUN_FILE).read_text(encoding="utf-8"))
        overrides = Overrides(**{**recorded, "runs_dir": str(experiment.runs_dir)})
    except FileNotFoundError:
        return experiment, None
    except (ValueError, TypeError) as err:  # damaged or from another version: the plain file is still right
        log.warning("%s: ignored (%s); showing the experiment as its file states it",
                    experiment.runs_dir / LAST_RUN_FILE, err)
        return experiment, None
    return load_experiment(source, overrides), overrides


def load_with_overrides(source: str, data_dir: str | None = None, model: str | None = None,
                        max_steps: int | None = None, runs_dir: str | None = None, sets: Sequence[str] = (),
                        as_last_run: bool = False) -> tuple[Experiment, str]:
    """The experiment with these overrides (`sets`: `KEY=VALUE` settings for every cell); a file or setting
    that cannot run is an `XsynError`. With `as_last_run` (status, report) and no cell-selecting override,
    the settings the last `experiment run` recorded select the cells, and the second value names them as
    options (empty where none were recorded)."""
    from xsyn.run.settings import parse_overrides

    if not (as_last_run and data_dir is None and model is None and max_steps is None and not sets):
        overrides = Overrides(data_dir=data_dir, model=model, max_steps=max_steps, runs_dir=runs_dir,
                              settings=parse_overrides(sets))
        return load_experiment(source, overrides), ""
    experiment, recorded = load_as_last_run(source, runs_dir)
    if recorded is None:
        return experiment, ""
    shown = [f"--model {recorded.model}" if recorded.model else "",
             f"--max-steps {recorded.max_steps}" if recorded.max_steps else "",
             *(f"--set {key}={value}" for key, value in recorded.settings.items())]
    return experiment, " ".join(filter(None, shown))


def cell_states(experiment: Experiment, cells: list[Cell] | None = None) -> list[CellState]:
    """The state of each cell (default: all), in the experiment's order; the locks of processes that are gone
    are removed on the way."""
    chosen = experiment.cells if cells is None else cells
    for cell in chosen:
        clear_stale_lock(experiment.cell_dir(cell))
    return [cell_state(experiment, cell) for cell in chosen]


def pending(experiment: Experiment, cells: list[Cell] | None = None) -> list[Cell]:
    """The cells (default: all) that are neither done nor held by a live process, in the experiment's order."""
    return [state.cell for state in cell_states(experiment, cells) if state.state not in (DONE, RUNNING)]


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    named = [g.strip() for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    return named[:count] if named else [str(i) for i in range(count)]


@dataclass(frozen=True)
class LocalOptions:
    """How `run_local` runs its cells: `cells_per_gpu` at once per GPU (each a process), `offline` (a process
    each, with no network and no parsing), `device_bytes` (a GPU's memory, for the packing check; default: the
    first visible GPU's)."""

    cells_per_gpu: int = 1
    offline: bool = False
    device_bytes: float | None = None


def run_local(experiment: Experiment, gpus: list[str], cells: list[Cell] | None = None,
              echo: Callable[[str], None] = print, progress: bool = False,
              options: LocalOptions = LocalOptions()) -> list[CellState]:
    """Every pending cell (of `cells`, default all); with two or more GPUs, several cells per GPU or offline,
    as worker processes (`xsyn.experiments.packing`), else one after another in this process."""
    experiment.require_inputs()
    chosen = experiment.cells if cells is None else cells
    states = cell_states(experiment, chosen)  # once: each state resolves the cell's settings and reads its folder
    cells = [state.cell for state in states if state.state not in (DONE, RUNNING)]
    busy = [state for state in states if state.state == RUNNING]
    echo(f"{len(cells)} of {len(chosen)} cells to run" + (f" on GPUs {','.join(gpus)}" if len(gpus) > 1
                                                                      else ""))
    for state in busy:
        echo(f"{state.cell.name}: held by another process, not run here ({state.detail})")
    if len(gpus) > 1 or options.cells_per_gpu > 1 or options.offline:
        return busy + _run_in_workers(experiment, cells, gpus, options, echo)
    outcomes = list(busy)
    for number, cell in enumerate(cells, start=1):
        echo(f"[{number}/{len(cells)}] {cell.name}")
        outcome = run_cell(experiment, cell, progress=progress)
        echo(f"[{number}/{len(cells)}] {cell.name}: {outcome.state}" + (f": {outcome.detail}"
                                                                        if outcome.state == FAILED else ""))
        outcomes.append(outcome)
    return outcomes


def _run_in_workers(experiment: Experiment, cells: list[Cell], gpus: list[str], options: LocalOptions,
                    echo: Callable[[str], None]) -> list[CellState]:
    """The cells as worker processes: packed by memory, offline if asked, under CUDA MPS where it helps."""
    from xsyn.experiments.packing import CPU, cells_that_fit, run_packed, start_mps, stop_mps
    from xsyn.experiments.prepare import OFFLINE_ENV
    from xsyn.syntax.parse import NO_PARSE_ENV

    per_device, why = cells_that_fit(options.cells_per_gpu, cell_device_bytes(experiment, cells),
                                     options.device_bytes or gpu_memory_bytes(gpus))
    if why:
        echo(why)
    env = {**OFFLINE_ENV, NO_PARSE_ENV: "1"} if options.offline else {}
    mps = start_mps(experiment.runs_dir, echo) if per_device > 1 and gpus else None
    try:
        return run_packed(experiment, cells, gpus or [CPU], per_device, {**env, **(mps.env if mps else {})}, echo)
    finally:
        stop_mps(mps)


def cell_device_bytes(experiment: Experiment, cells: list[Cell]) -> float | None:
    """The largest device memory the plan estimates for one of the cells at its peak, on this machine's GPU
    (None: no estimate, e.g. no benchmark for the device)."""
    from xsyn.experiments.bench_figures import default_bench_paths, read_benchmarks
    from xsyn.experiments.plan import local_device
    from xsyn.experiments.plan_sizes import device_memory, tokenizer_vocab_size

    device = local_device()
    bench = next((b for b in read_benchmarks(default_bench_paths()).steps if device in b.device.lower()), None)
    figures = []
    for cell in cells:
        config = experiment.config(cell, check_model=False, check_paths=False)
        figures.append(device_memory(bench, config, cell.variant, tokenizer_vocab_size(experiment, config)).value)
    return None if not figures or None in figures else max(figures)


def gpu_memory_bytes(gpus: list[str]) -> float | None:
    """The memory of the first GPU this process sees (None without one)."""
    import torch

    if not gpus or not torch.cuda.is_available():
        return None
    return float(torch.cuda.get_device_properties(0).total_memory)


WAIT_POLL_S = 30.0  # how often `experiment run --wait` looks at the cells other processes hold


def wait_for_held(experiment: Experiment, held: list[CellState], echo: Callable[[str], None] = print,
                  progress: bool = False, poll_s: float | None = None) -> list[CellState]:
    """Block until every cell another live process holds is done or failed; each outcome as it comes. A cell
    whose owner stopped before finishing it (its lock gone stale) is run here, resuming from its state."""
    waiting = {state.cell.name: state.cell for state in held}
    outcomes: list[CellState] = []
    while waiting:
        time.sleep(WAIT_POLL_S if poll_s is None else poll_s)
        for name, cell in list(waiting.items()):
            outcome = cell_state(experiment, cell)
            if outcome.state == RUNNING:
                continue
            del waiting[name]
            if outcome.state not in (DONE, FAILED):
                echo(f"{name}: its owner stopped before finishing it; running it here")
                outcome = run_cell(experiment, cell, progress=progress)
            echo(f"{name}: {outcome.state}" + (f": {outcome.detail}" if outcome.state == FAILED else ""))
            outcomes.append(outcome)
    return outcomes


def worker_process(experiment: Experiment, cell: Cell, env: dict[str, str]) -> subprocess.Popen:
    folder = experiment.cell_dir(cell)
    folder.mkdir(parents=True, exist_ok=True)
    log = (folder / "cell.log").open("w", encoding="utf-8")
    command = [sys.executable, "-m", "xsyn.experiments.worker", experiment.source, cell.name,
               "--overrides", experiment.overrides.to_json()]
    with log:
        return subprocess.Popen(command, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)


# --------------------------------------------------------------------------- submitit (SLURM)


@dataclass(frozen=True)
class ClusterOptions:
    partition: str | None = None
    gpus_per_node: int = 1
    time_min: int = 24 * 60
    cpus_per_task: int | None = None
    mem_gb: float | None = None
    array_parallelism: int | None = None  # array tasks that may run at once
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    cells_per_gpu: int = 1  # cells that share one GPU, each a process: one array task runs this many
    offline: bool = False  # the cells may neither download nor parse (`experiment prepare` made their inputs)

    def parameters(self, cluster: str, job_name: str) -> dict[str, Any]:
        """submitit's AutoExecutor parameters: generic ones, and slurm_* ones that only SLURM reads."""
        gpus = self.gpus_per_node if cluster != "local" or _has_gpu() else 0
        return job_parameters(self, job_name, self.time_min, self.cpus_per_task, {"gpus_per_node": gpus},
                              ("partition", "array_parallelism", "account", "qos", "constraint"))


def job_parameters(options, job_name: str, time_min: int, cpus: int | None, extra: dict[str, Any],
                   slurm: tuple[str, ...]) -> dict[str, Any]:
    """A job's submitit parameters: its name, time limit, one task on one node, its cores and memory (where set),
    `extra`, and the `slurm` fields of `options` that are set, as the slurm_* ones only SLURM reads."""
    params: dict[str, Any] = {"name": job_name, "timeout_min": time_min, "nodes": 1, "tasks_per_node": 1, **extra}
    if cpus:
        params["cpus_per_task"] = cpus
    if options.mem_gb:
        params["mem_gb"] = options.mem_gb
    params.update({f"slurm_{name}": getattr(options, name) for name in slurm if getattr(options, name) is not None})
    return params


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


@dataclass(frozen=True)
class PrepareJob:
    """`experiment prepare` as one SLURM CPU job (`prepare --launcher slurm`, `run --prepare`): its partition,
    cores (its parse workers), time limit in minutes and memory."""

    partition: str | None = None
    cpus: int = 8
    time: int = 6 * 60
    mem_gb: float | None = None
    account: str | None = None
    qos: str | None = None

    def parameters(self, job_name: str) -> dict[str, Any]:
        return job_parameters(self, job_name, self.time, self.cpus, {}, ("partition", "account", "qos"))  # no GPU


def cell_job(source: str, overrides_json: str, cell_name: str, processes: int, offline: bool = False
             ) -> dict[str, str]:
    """What one array task runs (submitit imports it by name on the node): the cell, under its lock."""
    if offline:
        return cells_job(source, overrides_json, [cell_name], processes, 1, offline)[0]
    experiment = load_experiment(source, Overrides.from_json(overrides_json))
    outcome = run_cell(experiment, experiment.cell(cell_name), processes=processes)
    return {"cell": cell_name, "state": outcome.state, "detail": outcome.detail}


def cells_job(source: str, overrides_json: str, cell_names: list[str], processes: int, cells_per_gpu: int,
              offline: bool) -> list[dict[str, str]]:
    """What an array task of packed or offline cells runs: its cells as worker processes on the node's GPU
    (`run_local`), the offline ones with the hub switched off and no parsing; a cell on several GPUs under
    `accelerate launch`, whose processes inherit the offline switches."""
    from xsyn.experiments.prepare import OFFLINE_ENV
    from xsyn.syntax.parse import NO_PARSE_ENV

    experiment = load_experiment(source, Overrides.from_json(overrides_json))
    cells = [experiment.cell(name) for name in cell_names]
    if processes > 1:
        if offline:
            os.environ.update({**OFFLINE_ENV, NO_PARSE_ENV: "1"})  # read by the processes accelerate starts
        outcomes = [run_cell(experiment, cell, processes=processes) for cell in cells]
    else:
        outcomes = run_local(experiment, visible_gpus(), cells, echo=print,
                             options=LocalOptions(cells_per_gpu=cells_per_gpu, offline=offline))
    return [{"cell": o.cell.name, "state": o.state, "detail": o.detail} for o in outcomes]


def submit(experiment: Experiment, options: ClusterOptions, cluster: str = "slurm",
           cells: list[Cell] | None = None, prepare: PrepareJob | None = None) -> list[tuple[Cell, Any]]:
    """One job array: one task per pending cell, or per `cells_per_gpu` of them; with `prepare`, after a CPU job
    that runs `experiment prepare` (the array depends on it with `afterok`). Returns each cell with its submitit
    job, which its folder records."""
    import submitit

    experiment.require_inputs()
    cells = pending(experiment, cells)
    if not cells:
        return []
    folder = experiment.runs_dir / SUBMITIT_FOLDER / "%j"
    params = options.parameters(cluster, f"xsyn-{experiment.name}")
    if prepare is not None:
        job = submit_prepare(experiment, prepare, cluster)
        params["slurm_additional_parameters"] = {"dependency": f"afterok:{job.job_id}"}
        if cluster != "slurm":  # submitit's local and debug executors know no dependencies: wait here
            job.result()
    executor = submitit.AutoExecutor(folder=folder, cluster=cluster)
    executor.update_parameters(**params)
    processes = options.gpus_per_node if options.gpus_per_node > 1 else 1
    overrides = experiment.overrides.to_json()
    if options.cells_per_gpu > 1 and processes == 1:
        groups = [cells[i:i + options.cells_per_gpu] for i in range(0, len(cells), options.cells_per_gpu)]
        jobs = executor.map_array(cells_job, *zip(*[(experiment.source, overrides, [c.name for c in group], processes,
                                                     options.cells_per_gpu, options.offline) for group in groups]))
        jobs = [job for job, group in zip(jobs, groups, strict=True) for _ in group]
    else:
        count = len(cells)
        jobs = executor.map_array(cell_job, [experiment.source] * count, [overrides] * count,
                                  [cell.name for cell in cells], [processes] * count, [options.offline] * count)
    submitted = time.strftime("%Y-%m-%d %H:%M:%S")
    for job, cell in zip(jobs, cells, strict=True):
        atomic_write_json(experiment.cell_dir(cell) / QUEUED_FILE, {"cluster": cluster, "job_id": job.job_id,
                                                                    "submitted": submitted})
    return list(zip(cells, jobs, strict=True))


def submit_prepare(experiment: Experiment, options: PrepareJob, cluster: str = "slurm"):
    """`experiment prepare` as one CPU job (its parse workers: the job's cores); the submitit job."""
    import submitit

    from xsyn.experiments.prepare import prepare_job

    executor = submitit.AutoExecutor(folder=experiment.runs_dir / SUBMITIT_FOLDER / "%j", cluster=cluster)
    executor.update_parameters(**options.parameters(f"xsyn-{experiment.name}-prepare"))
    return executor.submit(prepare_job, experiment.source, experiment.overrides.to_json(), options.cpus)


def job_outcomes(submitted: list[tuple[Cell, Any]]) -> Iterator[dict[str, str]]:
    """Each submitted cell's outcome ({cell, state, detail}) as its job ends, in submission order; a job that
    itself died (a time limit, a node failure) fails each of its cells, the error as their detail (its log says
    why)."""
    by_job: dict[int, tuple[Any, list[Cell]]] = {}
    for cell, job in submitted:
        by_job.setdefault(id(job), (job, []))[1].append(cell)
    for job, cells in by_job.values():
        try:
            result = job.result()
            yield from (result if isinstance(result, list) else [result])
        except Exception as err:  # submitit raises whatever ended the job
            for cell in cells:
                yield {"cell": cell.name, "state": FAILED, "detail": f"{type(err).__name__}: {err}"}


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


def run_experiment(experiment: Experiment, cells: list[Cell], choices: RunChoices, source: str,
                   echo: Callable[[str], None] = print) -> None:
    """`xsyn experiment run`: record the command line's settings, then run the cells here (after `prepare` with
    `prepare_first`) or submit them to SLURM (after a `prepare` CPU job); offline where asked, or where a
    complete `prepare` made every input they read."""
    from xsyn.experiments.prepare import decide_offline, manifest_lines, prepare, require_parseable
    from xsyn.utils.progress import quiet_libraries

    if not choices.progress:
        quiet_libraries()
    require_parseable(experiment)  # before anything: a language no download makes parseable
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
             source: str, echo: Callable[[str], None] = print, options: LocalOptions = LocalOptions()) -> None:
    """Run the cells on this machine's GPUs (`gpus` of them, default every visible one; `options.cells_per_gpu`
    workers each; none: on the CPU); with `wait`, then wait for the cells other processes hold. `CellsFailed`
    where any failed (a cell another process is running is not one)."""
    devices = visible_gpus()
    if gpus is not None:
        devices = devices[:gpus]
    outcomes = run_local(experiment, devices, cells, echo=echo, progress=progress, options=options)
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


def run_on_slurm(experiment: Experiment, cells: list[Cell], options: ClusterOptions, source: str, wait: bool,
                 echo: Callable[[str], None] = print, prepare: PrepareJob | None = None) -> None:
    """Submit the cells as one job array (after a `prepare` CPU job, with `prepare`); with `wait`, say each cell's
    outcome as its job ends (`CellsFailed` where any failed)."""
    try:
        submitted = submit(experiment, options, cells=cells, prepare=prepare)
    except Exception as err:  # submitit's own errors (no sbatch, a rejected submission): a message, not a traceback
        raise CellsFailed(f"submitting to SLURM failed: {err}") from None
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
