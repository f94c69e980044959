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
from xsyn.experiments.worker import EXIT_BUSY
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


def run_local(experiment: Experiment, gpus: list[str], cells: list[Cell] | None = None,
              echo: Callable[[str], None] = print, progress: bool = False) -> list[CellState]:
    """Every pending cell (of `cells`, default all); with two or more GPUs, one worker process per GPU."""
    experiment.require_inputs()
    chosen = experiment.cells if cells is None else cells
    states = cell_states(experiment, chosen)  # once: each state resolves the cell's settings and reads its folder
    cells = [state.cell for state in states if state.state not in (DONE, RUNNING)]
    busy = [state for state in states if state.state == RUNNING]
    echo(f"{len(cells)} of {len(chosen)} cells to run" + (f" on GPUs {','.join(gpus)}" if len(gpus) > 1
                                                                      else ""))
    for state in busy:
        echo(f"{state.cell.name}: held by another process, not run here ({state.detail})")
    if len(gpus) > 1:
        return busy + _run_on_gpus(experiment, cells, gpus, echo)
    outcomes = list(busy)
    for number, cell in enumerate(cells, start=1):
        echo(f"[{number}/{len(cells)}] {cell.name}")
        outcome = run_cell(experiment, cell, progress=progress)
        echo(f"[{number}/{len(cells)}] {cell.name}: {outcome.state}" + (f": {outcome.detail}"
                                                                        if outcome.state == FAILED else ""))
        outcomes.append(outcome)
    return outcomes


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


def _run_on_gpus(experiment: Experiment, cells: list[Cell], gpus: list[str],
                 echo: Callable[[str], None]) -> list[CellState]:
    waiting = list(cells)
    running: dict[str, tuple[subprocess.Popen, Cell]] = {}
    outcomes = []
    try:
        while waiting or running:
            for gpu in [g for g in gpus if g not in running]:
                if not waiting:
                    break
                cell = waiting.pop(0)
                echo(f"{cell.name} -> GPU {gpu}")
                running[gpu] = (worker_process(experiment, cell, {"CUDA_VISIBLE_DEVICES": gpu}), cell)
            time.sleep(1.0)
            for gpu, (process, cell) in list(running.items()):
                if process.poll() is None:
                    continue
                del running[gpu]
                outcome = cell_state(experiment, cell)
                if process.returncode not in (0, 1, EXIT_BUSY) and outcome.state != DONE:
                    outcome = CellState(cell, FAILED, f"worker exited with {process.returncode}; its output: "
                                                      f"{experiment.cell_dir(cell) / 'cell.log'}")
                echo(f"{cell.name}: {outcome.state}" + (f": {outcome.detail}" if outcome.state == FAILED else ""))
                outcomes.append(outcome)
    finally:
        for process, _ in running.values():  # our own workers only; they keep their saved state
            process.terminate()
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

    def parameters(self, cluster: str, job_name: str) -> dict[str, Any]:
        """submitit's AutoExecutor parameters: generic ones, and slurm_* ones that only SLURM reads."""
        params: dict[str, Any] = {"name": job_name, "timeout_min": self.time_min, "nodes": 1, "tasks_per_node": 1,
                                  "gpus_per_node": self.gpus_per_node if cluster != "local" or _has_gpu() else 0}
        if self.cpus_per_task:
            params["cpus_per_task"] = self.cpus_per_task
        if self.mem_gb:
            params["mem_gb"] = self.mem_gb
        for name in ("partition", "array_parallelism", "account", "qos", "constraint"):
            if getattr(self, name) is not None:
                params[f"slurm_{name}"] = getattr(self, name)
        return params


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def cell_job(source: str, overrides_json: str, cell_name: str, processes: int) -> dict[str, str]:
    """What one array task runs (submitit imports it by name on the node): the cell, under its lock."""
    experiment = load_experiment(source, Overrides.from_json(overrides_json))
    outcome = run_cell(experiment, experiment.cell(cell_name), processes=processes)
    return {"cell": cell_name, "state": outcome.state, "detail": outcome.detail}


def submit(experiment: Experiment, options: ClusterOptions, cluster: str = "slurm",
           cells: list[Cell] | None = None) -> list[tuple[Cell, Any]]:
    """One job array, one task per pending cell; returns each cell with its submitit job, which its folder
    records."""
    import submitit

    experiment.require_inputs()
    cells = pending(experiment, cells)
    if not cells:
        return []
    executor = submitit.AutoExecutor(folder=experiment.runs_dir / SUBMITIT_FOLDER / "%j", cluster=cluster)
    executor.update_parameters(**options.parameters(cluster, f"xsyn-{experiment.name}"))
    count = len(cells)
    processes = options.gpus_per_node if options.gpus_per_node > 1 else 1
    jobs = executor.map_array(cell_job, [experiment.source] * count, [experiment.overrides.to_json()] * count,
                              [cell.name for cell in cells], [processes] * count)
    submitted = time.strftime("%Y-%m-%d %H:%M:%S")
    for job, cell in zip(jobs, cells, strict=True):
        atomic_write_json(experiment.cell_dir(cell) / QUEUED_FILE, {"cluster": cluster, "job_id": job.job_id,
                                                                    "submitted": submitted})
    return list(zip(cells, jobs, strict=True))


def job_outcomes(submitted: list[tuple[Cell, Any]]) -> Iterator[dict[str, str]]:
    """Each submitted cell's outcome ({cell, state, detail}) as its job ends, in submission order; a job that
    itself died (a time limit, a node failure) is a failed cell whose detail is the error (its log says why)."""
    for cell, job in submitted:
        try:
            yield job.result()
        except Exception as err:  # submitit raises whatever ended the job
            yield {"cell": cell.name, "state": FAILED, "detail": f"{type(err).__name__}: {err}"}
