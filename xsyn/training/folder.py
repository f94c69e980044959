"""The layout of a run folder, named once: every module that reads or writes a run's files asks
`RunFolder` for the path (as transformers names its checkpoint files once, in `trainer_utils`).

A fine-tuning run (`xsyn finetune`):

    config.json              the resolved settings (`xsyn finetune --config` or `--resume DIR` reads it back)
    data_report.json         what loading, parsing and featurising kept, skipped or truncated
    train_log.jsonl          one line per logging step and per evaluation
    training_curves.png      task loss, auxiliary losses, learning rate and dev score against the step
    state/                   the latest resumable state (`trainer_state.json` + Accelerate's files)
    checkpoint-<step>/       earlier resumable states kept by --save-total-limit
    best/                    the best checkpoint so far (model, tokenizer, `xsyn_task.json`, README.md)
    validation_results.json  the best validation score and its step
    train_results.json       the summary, written last: the run is finished
    eval-<split>/            `xsyn evaluate`: results.json, and partial/ (one file per finished language)

A pre-training of a variant's syntax module (`xsyn pretrain-<variant>`) shares config-free parts of it (state/,
train_log.jsonl, the curves) and adds the module's files (`SyntaxVariant.pretrained_files`),
`probe_metrics.json`, `pretrain_config.json` and, for the tiny model, `model/`.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from xsyn.models.variants import all_variants
from xsyn.utils.errors import XsynError
from xsyn.utils.io import existing_dir

WRITER_LOCK = ".writer.lock"  # the lock `RunFolder.writing` holds; not a file of the run


class RunFolderBusy(XsynError):
    """Another live process is writing the same run folder."""


class RunFolderTaken(XsynError):
    """A fresh run was asked for in a folder that holds files (an earlier run's, or others)."""


def is_main_process() -> bool:
    """Whether this is the process that prints, writes and uploads under a distributed launch:
    global rank 0 (torchrun and `accelerate launch` set RANK), and always in a single process.
    Read from the environment: a `PartialState()` made here, before the run's Accelerator, would
    fix Accelerate's state without ACCELERATE_USE_CPU's cpu flag and split a CPU launch into
    independent single processes."""
    return int(os.environ.get("RANK", "0")) == 0


def launched_processes() -> int:
    """How many processes the launch runs (torchrun and `accelerate launch` set WORLD_SIZE; 1 alone), read from
    the environment for the reason `is_main_process` gives."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)

RESULTS_FILE = "results.json"  # an evaluation's results, in eval-<split>/ (or any folder `xsyn report` reads)
PROBE_FILE = "probe_metrics.json"  # a pre-trained syntax module's probe scores
TASK_FILE = "xsyn_task.json"  # beside a checkpoint's weights: what a model needs to be evaluated
TRAINER_STATE = "trainer_state.json"  # in a saved state: where the loop stood
STAGED = ".tmp"  # a folder being written beside its final name (`replace_dir` swaps it in)
_CHECKPOINT = re.compile(r"checkpoint-(\d+)")


@dataclass(frozen=True)
class RunFolder:
    """The files of one run folder (see the module docstring)."""

    path: Path

    def __init__(self, path: str | Path):
        object.__setattr__(self, "path", Path(path))

    def claim(self, resume: bool, overwrite: bool, continue_with: str) -> None:
        """The rules for a run to start or continue here, one set for fine-tuning and pre-training:
        `resume` continues whatever the folder holds; a fresh run needs an empty folder, and with `overwrite`
        the run files in it are deleted first. Otherwise it is refused, naming what is there and the three
        ways on (`continue_with`: the command that continues it). Judged under the writer lock: a run that
        another process is writing is named, never deleted."""
        if resume or not self.entries():
            return  # (a folder not made yet is made by the preflight, which names a path that cannot be one)
        with self.writing():
            present = self.entries()
            if not present:
                return
            if not overwrite:
                raise RunFolderTaken(f"{self.path} already holds {self._held(present)}: continue it with "
                                     f"{continue_with}, start afresh with --overwrite-output-dir, or choose another "
                                     "--output-dir (or --seed)")
            self.clear()

    def _held(self, present: list[str]) -> str:
        """What a folder that a fresh run would mix with holds, in words."""
        module = [path.name for path in self.pretrained_files if path.is_file()]
        if module:
            return f"a pre-trained syntax module ({', '.join(module)})"
        if self.has_progress():
            return f"a run that saved progress ({self.state.name}/ or {self.train_results.name})"
        return f"{len(present)} entries ({', '.join(present[:4])}{', ...' if len(present) > 4 else ''})"

    # -- settings and records ----------------------------------------------------------------------

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Held while one process writes this run, so that a second writer (another `finetune` or a second
        `--resume` into the same folder) is refused at once instead of mixing its files with the first's.
        An OS lock (flock) on `.writer.lock`: the OS drops it when its process dies, so it is never stale.
        Under a distributed launch only the main process (RANK 0) takes it: the other ranks write nothing."""
        if not is_main_process():
            yield
            return
        self.path.mkdir(parents=True, exist_ok=True)
        handle = (self.path / WRITER_LOCK).open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise RunFolderBusy(f"{self.path} is being written by {holder}: wait for it to finish (or stop it), "
                                "or choose another --output-dir") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        try:
            yield
        finally:
            handle.close()  # releases the lock

    @property
    def config(self) -> Path:
        return self.path / "config.json"

    @property
    def data_report(self) -> Path:
        return self.path / "data_report.json"

    @property
    def train_log(self) -> Path:
        return self.path / "train_log.jsonl"

    @property
    def curves(self) -> Path:
        return self.path / "training_curves.png"

    @property
    def validation_results(self) -> Path:
        return self.path / "validation_results.json"

    @property
    def train_results(self) -> Path:
        return self.path / "train_results.json"

    @property
    def wandb_run_id(self) -> Path:
        return self.path / "wandb_run_id.txt"

    # -- checkpoints ---------------------------------------------------------------------------------
    @property
    def state(self) -> Path:
        return self.path / "state"

    @property
    def best(self) -> Path:
        return self.path / "best"

    def checkpoint(self, step: int) -> Path:
        """An earlier resumable state, kept under `--save-total-limit`."""
        return self.path / f"checkpoint-{step}"

    def checkpoints(self) -> list[Path]:
        """The kept earlier states, oldest first."""
        found = [(int(m.group(1)), p) for p in self.path.glob("checkpoint-*")
                 if p.is_dir() and (m := _CHECKPOINT.fullmatch(p.name))]
        return [p for _, p in sorted(found)]

    def unfinished(self) -> list[Path]:
        """What a run that stopped before its first complete save may have left (removed on a fresh start)."""
        return [staged(self.best), self.best.with_name(self.best.name + ".old"), self.best, staged(self.state),
                self.validation_results]

    # -- evaluations -------------------------------------------------------------------------------------
    def eval_dir(self, split: str) -> Path:
        return self.path / f"eval-{split}"

    def eval_results(self) -> list[Path]:
        """Every evaluation's results file, oldest first."""
        return sorted(self.path.glob(f"eval-*/{RESULTS_FILE}"), key=lambda p: p.stat().st_mtime)

    # -- a pre-trained syntax module ----------------------------------------------------------------
    @property
    def pretrained_files(self) -> list[Path]:
        """The files a registered variant's pre-trained syntax module is saved in, here."""
        return [self.path / name for variant in all_variants() for name in variant.pretrained_files]

    @property
    def probe_metrics(self) -> Path:
        return self.path / PROBE_FILE

    @property
    def pretrain_config(self) -> Path:
        return self.path / "pretrain_config.json"

    @property
    def tiny_model(self) -> Path:
        """A tiny-model pre-training's own encoder and tokenizer (its syntax module reads their random embeddings)."""
        return self.path / "model"

    # -- what the folder holds ------------------------------------------------------------------------
    def has_progress(self) -> bool:
        """Whether the folder holds a state to continue from or a finished run. A run that stopped
        before its first complete save (even with `best/` written) holds neither: the same command
        starts it again."""
        return existing_dir(self.state) is not None or self.is_finished()

    def is_finished(self) -> bool:
        return self.train_results.is_file()

    def entries(self) -> list[str]:
        """The names in the folder, but for the writer lock (a folder that holds only it is empty)."""
        return sorted(p.name for p in self.path.iterdir() if p.name != WRITER_LOCK) if self.path.is_dir() else []

    def run_files(self) -> list[Path]:
        """Everything a run writes here (what `--overwrite-output-dir` deletes; other files are left alone)."""
        folders = [self.state, self.best]
        files = [self.config, self.data_report, self.train_log, self.curves, self.validation_results,
                 self.train_results, self.wandb_run_id, self.probe_metrics, self.pretrain_config]
        files += self.pretrained_files
        return [*files, *folders, *map(staged, folders), *(f.with_name(f.name + ".old") for f in folders),
                *self.checkpoints(), *self.path.glob("eval-*"), self.tiny_model]

    def clear(self) -> None:
        """Delete the run's files, so that a fresh run starts in an empty folder."""
        for path in self.run_files():
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)

    def where_stopped(self, saved: int | None = None) -> str:
        """Where a stopped run stands, in words: the step its saved state has done (`saved`, else read)."""
        saved = self.saved_step() if saved is None else saved
        return f"the state of step {saved} is saved in {self.state}" if saved else "no training state was saved yet"

    def saved_step(self) -> int | None:
        """The optimiser steps the saved state has done (None: no readable state)."""
        found = existing_dir(self.state)
        try:
            return int(json.loads((found / TRAINER_STATE).read_text(encoding="utf-8"))["step"]) if found else None
        except (OSError, ValueError, KeyError, TypeError):
            return None


def staged(folder: Path) -> Path:
    """Where `folder` is written before it is swapped into place."""
    return folder.with_name(folder.name + STAGED)


def eval_partial(eval_dir: Path) -> Path:
    """An evaluation's finished languages and pairs, one file each (what a resumed evaluation keeps)."""
    return eval_dir / "partial"


def eval_results(eval_dir: Path) -> Path:
    return eval_dir / RESULTS_FILE


def task_file(checkpoint: Path) -> Path:
    return checkpoint / TASK_FILE
