"""Running an experiment's cells through submitit: SLURM job arrays, one array task per cell (or per
`cells_per_gpu` of them, as worker processes on the node's GPU: `xsyn.experiments.local`). A job with several GPUs
runs its cell under `accelerate launch`. `experiment prepare` can go first as one CPU job the array waits for
(`afterok`). The same functions with `cluster="local"` run the jobs with submitit's local executor, which is how
the tests run the code that goes to SLURM.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import submitit
import torch

from xsyn.experiments.cells import FAILED, QUEUED_FILE, pending, run_cell
from xsyn.experiments.experiment_file import Cell, Experiment, Overrides, load_experiment
from xsyn.experiments.local import LocalOptions, run_local, visible_gpus
from xsyn.experiments.prepare import OFFLINE_ENV, prepare_job
from xsyn.syntax.parse import NO_PARSE_ENV
from xsyn.utils.io import atomic_write_json

SUBMITIT_FOLDER = "submitit"  # under runs_dir: submitit's job scripts, logs and its own job transport


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
