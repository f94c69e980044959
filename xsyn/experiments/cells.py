"""Running one cell of an experiment, and telling what state each cell is in.

A cell is a normal run folder, made by the code `xsyn finetune` and `xsyn evaluate` run
(`xsyn.run.train.finetune`, `xsyn.run.evaluation.evaluate_run`). Beside the run's own files the
experiment keeps, in the same folder:

    lock.json    while a process works on the cell: its host, pid, process start time and a heartbeat
                 (the file's mtime); the stale rule is at `lock_holder`
    error.txt    the full traceback of the cell's last failure (removed when the cell succeeds)
    cell.log     the output of a cell run as a subprocess (several GPUs: `accelerate launch`)
    queued.json  the cluster job the cell was submitted as

A cell is done when each of its evaluations has written its results.json with every language
(and the language pairs, when generalized) it asks for; a cell whose folder holds a run with other
settings (the file was edited since) counts as failed, with a message that says what to do. A killed
cell continues from its saved state (`finetune(resume=True)`); a killed evaluation from its finished
languages (`partial/`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xsyn.experiments.experiment_file import SYNTH_VOCAB, Cell, Experiment, ExperimentError
from xsyn.run.settings import BOOKKEEPING_FIELDS, current_names
from xsyn.training.folder import RunFolder, eval_results
from xsyn.utils.errors import XsynError
from xsyn.utils.io import atomic_write_text

LOCK_FILE = "lock.json"
ERROR_FILE = "error.txt"
LOG_FILE = "cell.log"
QUEUED_FILE = "queued.json"
DONE, RUNNING, FAILED, TODO = "done", "running", "failed", "to do"

log = logging.getLogger("xsyn")


class CellBusy(RuntimeError):
    """Another live process holds the cell's lock."""


@dataclass(frozen=True)
class CellState:
    cell: Cell
    state: str  # done | running | failed | to do
    detail: str = ""  # the failure's last line, who runs it, how far it got


# --------------------------------------------------------------------------- the lock
#
# A lock names its owner by host, pid and the process's start time (a pid alone is reused), and the
# owner touches the file every HEARTBEAT_S seconds. The rule that makes a lock stale:
#   - on this host: its process is gone, or the pid now belongs to a process started at another time;
#   - on another host (a shared filesystem), where no process can be checked: no heartbeat for LOCK_TTL_S;
#   - a file that is not a lock xsyn wrote (damaged, truncated, edited): stale at once, and said so.
# So no lock can keep a cell waiting forever, and a live owner is never overtaken.

HEARTBEAT_S = 30.0
LOCK_TTL_S = 10 * 60.0


@dataclass(frozen=True)
class LockHolder:
    """Who holds a cell's lock, and whether that owner is still there (`stale_reason` empty when it is)."""

    owner: dict[str, Any]
    heartbeat_age_s: float
    stale_reason: str = ""

    @property
    def stale(self) -> bool:
        return bool(self.stale_reason)

    def describe(self) -> str:
        where = f"pid {self.owner.get('pid')} on {self.owner.get('host')}"
        if self.owner.get("slurm_job"):
            where += f", SLURM job {self.owner['slurm_job']}"
        return f"{where}, since {self.owner.get('started')}, heartbeat {_age(self.heartbeat_age_s)} ago"


def _age(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def process_start_time(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch), or None when there is no such process."""
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except psutil.AccessDenied:
        return float("nan")  # it exists; its start time is not ours to read


def lock_holder(path: Path) -> LockHolder | None:
    """The lock at `path` (None when there is none), judged by the stale rule above."""
    try:
        text = path.read_text(encoding="utf-8")
        age = max(0.0, time.time() - path.stat().st_mtime)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        return LockHolder({}, 0.0, f"unreadable lock file ({err})")
    try:
        owner = json.loads(text)
    except json.JSONDecodeError:
        owner = None
    if not isinstance(owner, dict) or not isinstance(owner.get("pid"), int) or not isinstance(owner.get("host"), str):
        return LockHolder({}, age, "damaged lock file (not a lock xsyn wrote)")
    if owner["host"] != socket.gethostname():
        stale = f"no heartbeat for {_age(age)} (over {_age(LOCK_TTL_S)})" if age > LOCK_TTL_S else ""
        return LockHolder(owner, age, stale)
    started = process_start_time(owner["pid"])
    if started is None:
        return LockHolder(owner, age, f"process {owner['pid']} is gone")
    recorded = owner.get("process_start")
    if not isinstance(recorded, (int, float)):
        # A lock without a start time (written by an older xsyn): only its heartbeat can tell.
        return LockHolder(owner, age, f"no heartbeat for {_age(age)}" if age > LOCK_TTL_S else "")
    if started == started and abs(started - recorded) > 1.0:  # NaN (access denied) counts as the same process
        return LockHolder(owner, age, f"pid {owner['pid']} now belongs to another process")
    return LockHolder(owner, age)


class _Heartbeat:
    """Touches the lock file every HEARTBEAT_S seconds while its owner works on the cell."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"xsyn-lock-{path.parent.name}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except OSError:  # the lock was taken away or the disk is gone: the owner's own work will say so
                return

    def stop(self) -> None:
        self._stop.set()


@dataclass
class CellLock:
    """A held cell lock; `release()` stops its heartbeat and removes it (only if it is still ours)."""

    path: Path
    token: str
    heartbeat: _Heartbeat

    def release(self) -> None:
        self.heartbeat.stop()
        try:
            if json.loads(self.path.read_text(encoding="utf-8")).get("token") == self.token:
                self.path.unlink(missing_ok=True)
        except (OSError, ValueError):
            pass  # gone, or replaced by someone who judged ours stale: not ours to remove


def acquire_lock(folder: Path) -> CellLock:
    """Take the cell's lock, or raise CellBusy naming its live owner; a stale lock is taken over."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_FILE
    token = uuid.uuid4().hex
    owner = {"pid": os.getpid(), "host": socket.gethostname(), "process_start": process_start_time(os.getpid()),
             "started": time.strftime("%Y-%m-%d %H:%M:%S"), "slurm_job": os.environ.get("SLURM_JOB_ID"),
             "token": token}
    staged = folder / f".{LOCK_FILE}.{token}"
    staged.write_text(json.dumps(owner) + "\n", encoding="utf-8")
    try:
        for _ in range(3):
            try:
                os.link(staged, path)  # atomic, and fails when the lock exists
                return CellLock(path, token, _Heartbeat(path))
            except FileExistsError:
                current = lock_holder(path)
                if current is not None and not current.stale:
                    raise CellBusy(current.describe()) from None
                if current is not None:
                    log.warning("%s: taking over a stale lock (%s)", path, current.stale_reason)
                path.unlink(missing_ok=True)
        raise CellBusy(f"{path} keeps changing hands")
    finally:
        staged.unlink(missing_ok=True)


def clear_stale_lock(folder: Path) -> None:
    """Remove a stale lock (its owner killed after or during the cell, a damaged file)."""
    holder = lock_holder(folder / LOCK_FILE)
    if holder is not None and holder.stale:
        log.warning("%s: removing a stale lock (%s)", folder / LOCK_FILE, holder.stale_reason)
        (folder / LOCK_FILE).unlink(missing_ok=True)


# --------------------------------------------------------------------------- state


def evaluation_done(folder: Path, split: str, langs: tuple[str, ...], generalized: bool,
                    max_examples: int | None = None) -> bool:
    file = eval_results(RunFolder(folder).eval_dir(split))
    try:
        results = json.loads(file.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return False
    if not set(langs) <= set(results.get("per_language") or {}):
        return False
    if results.get("max_eval_examples") != max_examples:  # scored under another cap
        return False
    return not generalized or bool(results.get("pairs"))


def cell_state(experiment: Experiment, cell: Cell) -> CellState:
    folder = experiment.cell_dir(cell)
    evaluation = experiment.evaluation_of(cell.task)
    holder = lock_holder(folder / LOCK_FILE)
    if holder is not None and not holder.stale:
        note = "" if holder.owner.get("host") == socket.gethostname() else (
            f" (another host: stale after {_age(LOCK_TTL_S)} without a heartbeat)")
        return CellState(cell, RUNNING, f"locked by {holder.describe()}; {_progress(folder)}{note}")
    config = experiment.config(cell)
    try:
        check_same_run(folder, config.to_dict())
    except ExperimentError as conflict:
        return CellState(cell, FAILED, str(conflict))
    if all(evaluation_done(folder, split, evaluation.langs, evaluation.generalized, config.max_eval_examples)
           for split in evaluation.splits):
        return CellState(cell, DONE, _progress(folder))
    error = folder / ERROR_FILE
    if error.is_file():
        return CellState(cell, FAILED, last_line(error.read_text(encoding="utf-8", errors="replace")))
    queued = folder / QUEUED_FILE
    detail = _progress(folder) if RunFolder(folder).state.is_dir() else ""
    if queued.is_file():
        job = json.loads(queued.read_text(encoding="utf-8"))
        detail = "; ".join(filter(None, [detail, f"submitted as {job.get('cluster')} job {job.get('job_id')} "
                                                 f"at {job.get('submitted')}"]))
    missing = missing_data(experiment.cards[cell.task], config.data_dir)
    return CellState(cell, TODO, "; ".join(filter(None, [detail, missing])))


def missing_data(card, data_dir: str | None) -> str:
    """What to do when a cell's task reads only files xsyn cannot download (no hub copy: MTOP, MultiATIS++)
    and its data folder is not there; empty otherwise."""
    from xsyn.data.loading import default_data_dir

    if card.hub or not all(source.paths for source in card.local):  # downloadable, or generated (synth)
        return ""
    folder = Path(data_dir) if data_dir else default_data_dir(card)
    if folder.is_dir():
        return ""
    return (f"needs {card.title} data, which is not on the hub ({card.download or card.homepage}); put it in "
            f"{folder} or pass --data-dir DIR with DIR/{card.name}")


def _progress(folder: Path) -> str:
    run = RunFolder(folder)
    step = run.saved_step()
    if step is None:
        return "not started"
    trained = run.is_finished()
    return f"trained, {step} steps" if trained else f"saved at step {step}"


def one_line(err: BaseException) -> str:
    """An exception as one line: xsyn's own errors by their message, others with their type."""
    message = " ".join(str(err).split())
    return message if isinstance(err, XsynError) else f"{type(err).__name__}: {message}"


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no message)"


# --------------------------------------------------------------------------- running


def run_cell(experiment: Experiment, cell: Cell, processes: int = 1, progress: bool = False) -> CellState:
    """Train (or resume) and evaluate one cell under its lock. A failure is kept in the cell's folder and
    returned, never raised: the other cells go on. An interrupt (Ctrl-C, SIGTERM) propagates; the cell
    keeps its saved state and the next run resumes it."""
    folder = experiment.cell_dir(cell)
    try:
        lock = acquire_lock(folder)
    except CellBusy as busy:
        return CellState(cell, RUNNING, str(busy))
    failed = False
    try:
        if processes > 1:
            _run_in_processes(experiment, cell, processes)
        else:
            train_and_evaluate(experiment, cell, progress=progress)
    except Exception as err:  # noqa: BLE001 - kept in the folder and shown by `status`; the other cells go on
        # The traceback, then the error on one line: the line `status` and the terminal show (a message
        # may span lines, and its last line alone is often a library's generic advice).
        atomic_write_text(folder / ERROR_FILE, traceback.format_exc() + "\n" + one_line(err) + "\n")
        failed = True
    finally:
        lock.release()
    if not failed:
        (folder / ERROR_FILE).unlink(missing_ok=True)
    return cell_state(experiment, cell)


def train_and_evaluate(experiment: Experiment, cell: Cell, progress: bool = False) -> None:
    """The cell's fine-tune (fresh, resumed from its saved state, or already finished) and its
    evaluations, by the functions `xsyn finetune` and `xsyn evaluate` call."""
    from xsyn.run.evaluation import evaluate_run
    from xsyn.run.train import finetune

    folder = experiment.cell_dir(cell)
    config = experiment.config(cell)
    if config.tokenizer == str(experiment.runs_dir / SYNTH_VOCAB) and not Path(config.tokenizer).is_file():
        from xsyn.data.synth import write_vocab

        write_vocab(config.tokenizer)
    check_same_run(folder, config.to_dict())
    run = RunFolder(folder)
    if not run.is_finished():
        finetune(config, resume=run.saved_step() is not None, progress=progress)
    evaluation = experiment.evaluation_of(cell.task)
    current = {key: getattr(config, key) for key in ("data_dir", "cache_dir", "parser_model_dir", "num_proc")}
    for split in evaluation.splits:  # max_eval_examples caps the test languages and pairs as it caps the dev set
        if not evaluation_done(folder, split, evaluation.langs, evaluation.generalized, config.max_eval_examples):
            evaluate_run(folder, split=split, langs=list(evaluation.langs), generalized=evaluation.generalized,
                         overrides=current, progress=progress, max_examples=config.max_eval_examples)


def check_same_run(folder: Path, config: dict[str, Any]) -> None:
    """A folder that holds a run with other settings (the file was edited since) is never mixed with
    this cell's; bookkeeping (folders, caches, logging) may change."""
    run = RunFolder(folder)
    saved_file = run.config
    if not run.state.is_dir() and not run.best.is_dir():
        return  # nothing saved yet: a fresh start overwrites nothing of value
    try:
        saved = current_names(json.loads(saved_file.read_text(encoding="utf-8")))
    except (FileNotFoundError, json.JSONDecodeError):
        return
    differ = sorted(key for key in set(saved) | set(config) if key not in BOOKKEEPING_FIELDS
                    and saved.get(key) != config.get(key))
    if differ:
        shown = "; ".join(f"{key}: {saved.get(key)!r} there, {config.get(key)!r} now" for key in differ[:3])
        raise ExperimentError(f"{folder} holds a run with other settings ({shown}): the experiment file changed "
                              "since it ran. Delete the folder to run the cell again, or give the experiment another "
                              "runs_dir")


def _run_in_processes(experiment: Experiment, cell: Cell, processes: int) -> None:
    """The cell under `accelerate launch` (one process per GPU), its output kept in cell.log."""
    folder = experiment.cell_dir(cell)
    command = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(processes),
               "--multi_gpu", "-m", "xsyn.experiments.worker", "--train-only", experiment.source, cell.name,
               "--overrides", experiment.overrides.to_json()]
    with (folder / LOG_FILE).open("w", encoding="utf-8") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
        text = (folder / LOG_FILE).read_text(encoding="utf-8", errors="replace")
        raise RuntimeError(f"accelerate launch exited with {code} (full output: {folder / LOG_FILE}): "
                           f"{last_line(text)}")
