"""Cells as worker processes on this machine's devices: several at once per GPU (`--cells-per-gpu N`), offline.

A grid of short fine-tunes leaves most of a GPU idle (one eager mBERT step keeps an H200 busy about 10 ms of
22), so N cells may share one GPU, each in its own process (`python -m xsyn.experiments.worker`):

- **Memory first.** Before packing, the plan's estimate of a cell's device memory at its peak
  (`xsyn.experiments.plan_sizes.device_memory`: weights, gradients, AdamW's moments, the benchmark's
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
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from xsyn.experiments.cells import ERROR_FILE, FAILED, LOG_FILE, CellState, cell_state
from xsyn.experiments.experiment_file import Cell, Experiment
from xsyn.experiments.worker import EXIT_BUSY

CPU = ""  # the device name of a worker that sees no GPU
POLL_S = 1.0
OUT_OF_MEMORY = ("OutOfMemoryError", "CUDA out of memory", "CUBLAS_STATUS_ALLOC_FAILED")
MPS_DEFAULT_PIPE = Path("/tmp/nvidia-mps")


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
    from xsyn.experiments.launch import worker_process

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
