"""Running one cell of an experiment, and telling what state each cell is in.

A cell is a normal run folder, made by the code `xsyn finetune` and `xsyn evaluate` run
(`xsyn.run.train.finetune`, `xsyn.run.evaluation.evaluate_run`). Beside the run's own files the
experiment keeps, in the same folder:

    lock.json    while a process works on the cell: its host, pid, process start time and a heartbeat
                 (the file's mtime); the stale rule is at `lock_holder`
    error.txt    the full traceback of the cell's last failure (removed when the cell succeeds)
    cell.log     the output of a cell run as a subprocess (several GPUs: `accelerate launch`)
    queued.json  the cluster job the cell was submitted as
    cell.json    what the cell's last run did: the segments it parsed (0 when `experiment prepare` parsed them),
                 and whether it ran offline

A cell is done when each of its evaluations has written its results.json with every language
(and the language pairs, when generalized) it asks for; a cell whose folder holds a run with other
settings (the file was edited since) counts as failed, with a message that says what to do. A killed
cell continues from its saved state (`finetune(resume=True)`); a killed evaluation from its finished
languages (`partial/`).
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xsyn.data.loading import default_data_dir
from xsyn.data.synth import write_vocab
from xsyn.experiments.experiment_file import SYNTH_VOCAB, Cell, Experiment, ExperimentError
from xsyn.experiments.locks import (
    LOCK_FILE,
    LOCK_TTL_S,
    CellBusy,
    acquire_lock,
    clear_stale_lock,
    format_age,
    lock_holder,
)
from xsyn.experiments.pretrain import ensure_pretrained
from xsyn.run.settings import BOOKKEEPING_FIELDS, current_names
from xsyn.syntax.parse import NO_PARSE_ENV, segments_parsed
from xsyn.training.device_rules import same_resolution
from xsyn.training.folder import RunFolder, eval_results
from xsyn.training.precision import same_precision
from xsyn.utils.errors import XsynError
from xsyn.utils.io import atomic_write_json, atomic_write_text, saved_json_object

ERROR_FILE = "error.txt"
LOG_FILE = "cell.log"
QUEUED_FILE = "queued.json"
CELL_FILE = "cell.json"  # what the cell's last run did: segments it parsed (0 after `experiment prepare`), offline
DONE, RUNNING, FAILED, TODO = "done", "running", "failed", "to do"
STATES = (DONE, RUNNING, FAILED, TODO)

log = logging.getLogger("xsyn")


@dataclass(frozen=True)
class CellState:
    cell: Cell
    state: str  # done | running | failed | to do
    detail: str = ""  # the failure's last line, who runs it, how far it got
    needs: str = ""  # an input it cannot run without (data, a parser's models), shared by the task's cells


@dataclass
class TaskTally:
    """A task's cells by state, and what its cells need, once (`xsyn experiment status`)."""

    task: str
    states: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    needs: dict[str, int] = field(default_factory=dict)  # missing input -> cells that need it


def tally_by_task(states: list[CellState]) -> list[TaskTally]:
    tallies: dict[str, TaskTally] = {}
    for state in states:
        tally = tallies.setdefault(state.cell.task, TaskTally(state.cell.task))
        tally.states[state.state] += 1
        if state.needs:
            tally.needs[state.needs] = tally.needs.get(state.needs, 0) + 1
    return list(tallies.values())


# --------------------------------------------------------------------------- state


def evaluation_done(folder: Path, split: str, langs: tuple[str, ...], generalized: bool,
                    max_examples: int | None = None) -> bool:
    file = eval_results(RunFolder(folder).eval_dir(split))
    results = saved_json_object(file)
    if results is None:
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
            f" (another host: stale after {format_age(LOCK_TTL_S)} without a heartbeat)")
        return CellState(cell, RUNNING, f"locked by {holder.describe()}; {_progress(folder)}{note}")
    if cell.name in experiment.cell_needs:  # found when the file was read: no settings resolved per cell here
        return CellState(cell, TODO, needs=experiment.cell_needs[cell.name])
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
        job = saved_json_object(queued) or {}
        detail = "; ".join(filter(None, [detail, f"submitted as {job.get('cluster')} job {job.get('job_id')} "
                                                 f"at {job.get('submitted')}"]))
    return CellState(cell, TODO, detail, missing_data(experiment.cards[cell.task], config.data_dir))


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


def missing_data(card, data_dir: str | None) -> str:
    """What to do when a cell's task reads only files xsyn cannot download (no hub copy: MTOP, MultiATIS++)
    and its data folder is not there; empty otherwise."""
    if card.hub or not all(source.paths for source in card.local):  # downloadable, or generated (synth)
        return ""
    folder = Path(data_dir) if data_dir else default_data_dir(card)
    if folder.is_dir():
        return ""
    return (f"{card.title} data, which is not on the hub ({card.download or card.homepage}); put it in "
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
    from xsyn.run.resources import finetune_resources
    from xsyn.run.train import finetune

    folder = experiment.cell_dir(cell)
    if cell.variant in experiment.pretrained_variants():
        ensure_pretrained(experiment, cell.model, progress=progress)  # first: the cell's config reads its GAT
    config = experiment.config(cell)
    ensure_synth_vocab(experiment, config)
    check_same_run(folder, config.to_dict())
    parsed_before = segments_parsed()
    run = RunFolder(folder)
    if not run.is_finished():  # the cell's resources, built and checked once, then trained on
        finetune(finetune_resources(config), resume=run.saved_step() is not None, progress=progress)
    evaluation = experiment.evaluation_of(cell.task)
    current = {key: getattr(config, key) for key in ("data_dir", "cache_dir", "parser_model_dir", "num_proc")}
    for split in evaluation.splits:  # max_eval_examples caps the test languages and pairs as it caps the dev set
        if not evaluation_done(folder, split, evaluation.langs, evaluation.generalized, config.max_eval_examples):
            evaluate_run(folder, split=split, langs=list(evaluation.langs), generalized=evaluation.generalized,
                         overrides=current, progress=progress, max_examples=config.max_eval_examples)
    if os.environ.get("RANK", "0") == "0":  # under accelerate launch: the first process's share
        atomic_write_json(folder / CELL_FILE, {"segments_parsed": segments_parsed() - parsed_before,
                                               "offline": os.environ.get(NO_PARSE_ENV) == "1",
                                               "finished": time.strftime("%Y-%m-%d %H:%M:%S")})


def ensure_synth_vocab(experiment: Experiment, config) -> None:
    """The synthetic benchmark's vocabulary file, written where the cells' tiny model reads it."""
    if config.tokenizer == str(experiment.runs_dir / SYNTH_VOCAB) and not Path(config.tokenizer).is_file():
        write_vocab(config.tokenizer)


def check_same_run(folder: Path, config: dict[str, Any]) -> None:
    """A folder that holds a run with other settings (the file was edited since) is never mixed with
    this cell's; bookkeeping (folders, caches, logging) may change."""
    run = RunFolder(folder)
    saved_file = run.config
    if not run.state.is_dir() and not run.best.is_dir():
        return  # nothing saved yet: a fresh start overwrites nothing of value
    saved = saved_json_object(saved_file)
    if saved is None:
        return
    saved = current_names(saved)
    # A runs folder moved or copied whole keeps its cells: a path inside it (the synth vocabulary, the
    # pre-trained GAT) is compared by where it lies in the folder, not by the old absolute path.
    then, now = _moved_from(saved.get("output_dir"), folder)
    saved = {key: _moved(value, then, now) for key, value in saved.items()}
    differ = sorted(key for key in set(saved) | set(config) if key not in BOOKKEEPING_FIELDS
                    and saved.get(key) != config.get(key)
                    # a run records what `auto` precision resolved to where it ran
                    and not (key == "mixed_precision" and same_precision(saved.get(key), config.get(key)))
                    and not same_resolution(key, saved.get(key), config.get(key)))  # its optimiser, length budget
    if differ:
        shown = "; ".join(f"{key}: {saved.get(key)!r} there, {config.get(key)!r} now" for key in differ[:3])
        raise ExperimentError(f"{folder} holds a run with other settings ({shown}): the experiment file or the "
                              "options given (--set, --model, --data-dir) changed since it ran. Give the options it "
                              "ran with, delete the folder to run the cell again, or give the experiment another "
                              "runs_dir")


def _moved_from(saved_output_dir: Any, folder: Path) -> tuple[Path | None, Path]:
    """Where the folder tree holding a cell was when its run was written, and where it is now: the two
    paths less the trailing parts they share (the cell's name under the runs folder)."""
    if not isinstance(saved_output_dir, str):
        return None, folder
    then, now = Path(saved_output_dir), folder.absolute()
    while then.name and then.name == now.name:
        then, now = then.parent, now.parent
    return then, now


def _moved(value: Any, then: Path | None, now: Path) -> Any:
    """`value`, if it is a path inside the runs folder `then` (where a saved run was written), as the same
    path inside `now` (where the folder is now)."""
    if then is None or then == now or not isinstance(value, str):
        return value
    try:
        return str(now / Path(value).relative_to(then))
    except ValueError:  # not inside the runs folder: a setting of its own
        return value


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
