"""Resumable training state: written whole or not at all, and read back with errors that name the
damaged file and the fix.

`state/` holds what Accelerate saves (model, optimiser, RNG per process, loss scaler) and
`trainer_state.json` (where the loop is). It is written into `state.tmp/` and swapped into place
(`replace_dir`), so a kill or a full disk mid-write leaves the previous state whole.
"""

from __future__ import annotations

import json
import math
import shutil
import zipfile
from pathlib import Path
from typing import Any, TypeVar

from safetensors import SafetensorError, safe_open

from xsyn.training.folder import TRAINER_STATE, RunFolder, staged
from xsyn.training.processes import wait_for_everyone
from xsyn.utils.errors import InputError, XsynError
from xsyn.utils.io import OutputError, atomic_write_json, existing_dir, removed_unless_swapped, replace_dir

State = TypeVar("State")


class CheckpointError(XsynError, ValueError):
    """A saved state that cannot be read back; the message names the file and the fix."""


def save_state(accelerator, folder: RunFolder, trainer_state: dict[str, Any], keep: int | None = None) -> None:
    """Save the resumable state of every process into `folder.state`, replacing the previous one,
    which is kept as `checkpoint-<step>/` while fewer than `keep` states are kept (default 1: only
    the latest)."""
    state_dir = folder.state
    staging = staged(state_dir)
    if accelerator.is_main_process:
        shutil.rmtree(staging, ignore_errors=True)  # what a kill mid-write left behind
    wait_for_everyone(accelerator)
    try:
        with removed_unless_swapped(staging):
            accelerator.save_state(str(staging), safe_serialization=True)
            if accelerator.is_main_process:
                atomic_write_json(staging / TRAINER_STATE, trainer_state)
                previous = folder.saved_step() if keep and keep > 1 else None
                replace_dir(staging, state_dir, keep_old_as=folder.checkpoint(previous) if previous else None)
        if accelerator.is_main_process:
            for old in folder.checkpoints()[:-(keep - 1)] if keep and keep > 1 else folder.checkpoints():
                shutil.rmtree(old, ignore_errors=True)
    except WRITE_ERRORS as err:
        kept = f"the last complete state, {state_dir}, is kept" if existing_dir(state_dir) else "no state is saved yet"
        raise OutputError(getattr(err, "errno", None) or 0,
                          f"cannot write the training state to {staging} ({first_line(err)}); {kept}. Free some "
                          "space or make the folder writable, then continue with --resume") from err
    wait_for_everyone(accelerator)


def _write_errors() -> tuple[type[BaseException], ...]:
    """What a failed write raises: OSError; torch reports a full disk as RuntimeError, safetensors its own error."""
    return OSError, RuntimeError, SafetensorError


WRITE_ERRORS = _write_errors()


def first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0][:300]


def load_state(accelerator, state_dir: Path, state_type: type[State]) -> State | None:
    """Load the saved state into the prepared objects and return `trainer_state.json` as a
    `state_type` (the loop's dataclass); None when there is no saved state."""
    found = existing_dir(state_dir)
    if found is None:
        return None
    restart = (f"delete {found} and run the same command without --resume to start the run again "
               "(or restore the file from a backup)")
    file = found / TRAINER_STATE
    try:
        saved = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{file} is missing or damaged ({err}): {restart}") from None
    try:
        state = state_type(**saved)
    except TypeError as err:  # not an object, or another loop's (or version's) fields
        raise CheckpointError(f"{file} is not a saved state of this run ({err}): {restart}") from None
    try:
        accelerator.load_state(str(found))
    except Exception as err:  # noqa: BLE001 - any failure to read a saved file means the same to the user
        raise CheckpointError(f"{_damaged_file(found)} cannot be read ({type(err).__name__}: "
                              f"{str(err)[:200]}): the saved state is damaged; {restart}") from None
    return state


def _damaged_file(folder: Path) -> Path:
    """The first file of a saved state that does not load (the folder itself if all of them do)."""
    for path in sorted(folder.iterdir()):
        try:
            if path.suffix == ".safetensors":
                with safe_open(str(path), "pt") as handle:
                    for key in handle.keys():
                        handle.get_tensor(key)
            elif path.suffix in (".bin", ".pkl"):  # torch.save's zip archives: checked, never unpickled
                with zipfile.ZipFile(path) as archive:
                    if archive.testzip() is not None:
                        return path
        except Exception:  # noqa: BLE001 - this is the file we are looking for
            return path
    return folder


def total_steps(settings: Any, n_rows: int) -> int:
    """The optimiser steps of a run (`LoopSettings`: max_steps, else its epochs over `n_rows` in batches);
    torch-free, so `xsyn experiment plan` and `status` count them without loading a model library."""
    return settings.max_steps or max(1, math.ceil(settings.epochs * math.ceil(n_rows / settings.batch_size)))


def checkpoint_interval(checkpointing_steps: int | str | None, steps_per_epoch: int, eval_every: int) -> int:
    """Steps between resumable states: `checkpointing_steps` (N, or `epoch`); by default at every evaluation."""
    if checkpointing_steps == "epoch":
        return steps_per_epoch
    return int(checkpointing_steps or eval_every)


def check_checkpointing_steps(value: int | str | None) -> None:
    """`checkpointing_steps` is a number of steps >= 1, `epoch`, or unset."""
    if value is None or value == "epoch" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return
    raise InputError(f"checkpointing_steps {value!r}: give a number of optimiser steps (>= 1) or 'epoch' "
                     "(--checkpointing-steps N|epoch)")
