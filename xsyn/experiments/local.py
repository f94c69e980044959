"""Running an experiment's cells on this machine (`run_local`): with no GPU or one, one cell after another in this
process; with several, or several cells per GPU (`--cells-per-gpu N`), or offline, each cell a worker process
(`python -m xsyn.experiments.worker`) that sees only its GPU (CUDA_VISIBLE_DEVICES).

A grid of short fine-tunes leaves most of a GPU idle (one eager mBERT step keeps an H200 busy about 10 ms of
22), so N cells may share one GPU, each in its own process:

- **Memory first.** Before packing, the plan's estimate of a cell's device memory at its peak
  (`xsyn.experiments.plan.device_memory`: weights, gradients, AdamW's moments, the benchmark's
  activations scaled to the cell, a CUDA context) is checked against the device's memory: N is lowered to
  what fits, and said. With no estimate (no benchmark for the device) the N asked for is used, and said.
- **Out of memory: alone.** A cell that fails with CUDA's out-of-memory error while it shared its GPU is
  run again alone on a GPU (it resumes from its saved state); nothing else starts there while it runs.
- **CUDA MPS** (the Multi-Process Service) lets the processes of one GPU run their kernels side by side
  instead of taking turns. Where `nvidia-cuda-mps-control` is on the PATH and N > 1, the launcher starts a
  daemon of its own (pipe and log folders under `<runs_dir>/mps/`), hands its pipe folder to the workers
  (CUDA_MPS_PIPE_DIRECTORY) and stops it when the cells are done; a daemon already running (the default
  pipe folder /tmp/nvidia-mps has its `control` socket) is used and left running. Without MPS the cells
  still share the GPU, time-sliced by the driver. On SLURM, MPS may need the node's `--gres=mps` or an
  exclusive node, as the site configures it.

Each worker gets the environment its cell needs: CUDA_VISIBLE_DEVICES (its GPU), and for an offline cell
the hub's offline switches and `XSYN_NO_PARSE=1` (it may neither download nor parse).

Every cell runs `run_cell`, so a finished cell is skipped, a killed one resumes, and a failed one is kept in its
folder without stopping the others.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from xsyn.experiments.bench_figures import default_bench_paths, read_benchmarks
from xsyn.experiments.cells import (
    DONE,
    ERROR_FILE,
    FAILED,
    LOG_FILE,
    RUNNING,
    CellState,
    cell_state,
    cell_states,
    run_cell,
)
from xsyn.experiments.experiment_file import Cell, Experiment
from xsyn.experiments.plan import device_memory, local_device, tokenizer_vocab_size
from xsyn.experiments.prepare import OFFLINE_ENV
from xsyn.experiments.worker import EXIT_BUSY
from xsyn.syntax.parse import NO_PARSE_ENV

CPU = ""  # the device name of a worker that sees no GPU
POLL_S = 1.0
OUT_OF_MEMORY = ("OutOfMemoryError", "CUDA out of memory", "CUBLAS_STATUS_ALLOC_FAILED")
MPS_DEFAULT_PIPE = Path("/tmp/nvidia-mps")
WAIT_POLL_S = 30.0  # how often `experiment run --wait` looks at the cells other processes hold


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them."""
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
    as worker processes (`run_packed`), else one after another in this process."""
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
    device = local_device()
    bench = next((b for b in read_benchmarks(default_bench_paths()).steps if device in b.device.lower()), None)
    figures = []
    for cell in cells:
        config = experiment.config(cell)
        figures.append(device_memory(bench, config, cell.variant, tokenizer_vocab_size(experiment, config)).value)
    return None if not figures or None in figures else max(figures)


def gpu_memory_bytes(gpus: list[str]) -> float | None:
    """The memory of the first GPU this process sees (None without one)."""
    if not gpus or not torch.cuda.is_available():
        return None
    return float(torch.cuda.get_device_properties(0).total_memory)


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

# --------------------------------------------------------------------------- cells as worker processes


def cells_that_fit(asked: int, cell_bytes: float | None, device_bytes: float | None) -> tuple[int, str]:
    """How many cells to run at once on one device, and why: `asked`, lowered to what the device's memory
    holds by the cells' estimated peak (at least one: a cell alone may still fit, and runs out of memory
    itself if not)."""
    if asked <= 1:
        return 1, ""
    if not cell_bytes or not device_bytes:
        return asked, (f"{asked} cells per GPU as asked: no estimate of a cell's device memory to check it against "
                       "(`xsyn experiment plan` says why); a cell that runs out of memory is retried alone")
    fits = int(device_bytes // cell_bytes)
    shown = f"a cell needs about {cell_bytes / 1e9:.3g} GB at its peak, the device has {device_bytes / 1e9:.3g} GB"
    if fits >= asked:
        return asked, f"{asked} cells per GPU ({shown})"
    return max(1, fits), f"{max(1, fits)} cells per GPU, not {asked}: {shown}"


def ran_out_of_memory(folder: Path) -> bool:
    """Whether a cell's last failure was the device running out of memory."""
    error = folder / ERROR_FILE
    text = error.read_text(encoding="utf-8", errors="replace") if error.is_file() else ""
    return any(mark in text for mark in OUT_OF_MEMORY)


@dataclass
class _Slot:
    """One device's running workers: (process, cell, whether it started beside others)."""

    device: str
    running: list[tuple[subprocess.Popen, Cell, bool]] = field(default_factory=list)
    alone: bool = False  # a cell that ran out of memory beside others is running here by itself


def run_packed(experiment: Experiment, cells: list[Cell], devices: list[str], per_device: int,
               env: dict[str, str], echo: Callable[[str], None] = print,
               start: Callable[[Experiment, Cell, dict[str, str]], subprocess.Popen] | None = None
               ) -> list[CellState]:
    """Run `cells` as worker processes, up to `per_device` at once on each device (`CPU`: none visible); each
    outcome as it comes, in the order they end."""
    start = start or worker_process
    waiting, retry_alone = list(cells), set()
    slots = [_Slot(device) for device in devices]
    outcomes: list[CellState] = []
    try:
        while waiting or any(slot.running for slot in slots):
            for slot in slots:
                _fill(experiment, slot, waiting, retry_alone, per_device, env, echo, start)
            time.sleep(POLL_S)
            for slot in slots:
                outcomes += _collect(experiment, slot, waiting, retry_alone, echo)
    finally:
        for slot in slots:  # our own workers only; they keep their saved state
            for process, _, _ in slot.running:
                process.terminate()
    return outcomes


def _fill(experiment: Experiment, slot: _Slot, waiting: list[Cell], retry_alone: set[str], per_device: int,
          env: dict[str, str], echo: Callable[[str], None], start) -> None:
    while waiting and not slot.alone and len(slot.running) < per_device:
        if slot.running:  # beside others: the next cell that need not run alone
            cell = next((c for c in waiting if c.name not in retry_alone), None)
            if cell is None:
                return
        else:
            cell = waiting[0]
        waiting.remove(cell)
        slot.alone = cell.name in retry_alone
        shared = per_device > 1 and not slot.alone  # others may start beside it while it runs
        visible = {"CUDA_VISIBLE_DEVICES": slot.device} if slot.device != CPU else {}
        echo(f"{cell.name} -> {'GPU ' + slot.device if slot.device != CPU else 'CPU'}"
             + (" (alone)" if slot.alone else f" ({len(slot.running) + 1} of {per_device})" if per_device > 1 else ""))
        slot.running.append((start(experiment, cell, {**env, **visible}), cell, shared))


def _collect(experiment: Experiment, slot: _Slot, waiting: list[Cell], retry_alone: set[str],
             echo: Callable[[str], None]) -> list[CellState]:
    outcomes = []
    for entry in list(slot.running):
        process, cell, shared = entry
        if process.poll() is None:
            continue
        slot.running.remove(entry)
        if cell.name in retry_alone:
            slot.alone = False
        outcome = cell_state(experiment, cell)
        folder = experiment.cell_dir(cell)
        if outcome.state == FAILED and shared and cell.name not in retry_alone and ran_out_of_memory(folder):
            echo(f"{cell.name}: out of memory beside other cells; run again alone (it resumes from its saved state)")
            retry_alone.add(cell.name)
            (folder / ERROR_FILE).unlink(missing_ok=True)
            waiting.insert(0, cell)
            continue
        if process.returncode not in (0, 1, EXIT_BUSY) and outcome.state != "done":
            outcome = CellState(cell, FAILED, f"worker exited with {process.returncode}; its output: "
                                              f"{folder / LOG_FILE}")
        echo(f"{cell.name}: {outcome.state}" + (f": {outcome.detail}" if outcome.state == FAILED else ""))
        outcomes.append(outcome)
    return outcomes

# --------------------------------------------------------------------------- CUDA MPS


@dataclass
class Mps:
    """A CUDA MPS daemon the workers use: its environment, and whether this launcher started it (and stops it)."""

    env: dict[str, str]
    started: bool
    note: str


def start_mps(runs_dir: Path, echo: Callable[[str], None] = print) -> Mps | None:
    """The MPS daemon for packed cells: one already running, or one started here; None where MPS is not
    installed or will not start (the cells then share the GPU time-sliced)."""
    control = shutil.which("nvidia-cuda-mps-control")
    if control is None:
        echo("CUDA MPS is not installed here (no nvidia-cuda-mps-control): the cells share each GPU time-sliced")
        return None
    pipe = Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY") or MPS_DEFAULT_PIPE)
    if (pipe / "control").exists():
        echo(f"using the CUDA MPS daemon already running ({pipe})")
        return Mps({"CUDA_MPS_PIPE_DIRECTORY": str(pipe)}, False, "running")
    pipe, logs = runs_dir / "mps" / "pipe", runs_dir / "mps" / "log"
    pipe.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    env = {"CUDA_MPS_PIPE_DIRECTORY": str(pipe), "CUDA_MPS_LOG_DIRECTORY": str(logs)}
    done = subprocess.run([control, "-d"], env={**os.environ, **env}, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        echo(f"CUDA MPS did not start ({(done.stderr or done.stdout).strip() or done.returncode}; its log: {logs}): "
             "the cells share each GPU time-sliced")
        return None
    echo(f"started a CUDA MPS daemon for the cells (pipe {pipe}); it is stopped when they are done")
    return Mps(env, True, "started")


def stop_mps(mps: Mps | None) -> None:
    """Stop the daemon this launcher started (one it found running is left alone)."""
    control = shutil.which("nvidia-cuda-mps-control")
    if mps is None or not mps.started or control is None:
        return
    subprocess.run([control], input="quit\n", env={**os.environ, **mps.env}, capture_output=True, text=True,
                   check=False)
