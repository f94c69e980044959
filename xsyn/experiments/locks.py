"""The lock a process holds on a cell (or a shared pre-training) while it works on it.

A lock names its owner by host, pid and the process's start time (a pid alone is reused), and the
owner touches the file every HEARTBEAT_S seconds. The rule that makes a lock stale:
  - on this host: its process is gone, or the pid now belongs to a process started at another time;
  - on another host (a shared filesystem), where no process can be checked: no heartbeat for LOCK_TTL_S;
  - a file that is not a lock xsyn wrote (damaged, truncated, edited): stale at once, and said so.
So no lock can keep a cell waiting forever, and a live owner is never overtaken.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xsyn.utils.errors import XsynError
from xsyn.utils.io import temp_prefix

LOCK_FILE = "lock.json"
log = logging.getLogger("xsyn")


class CellBusy(RuntimeError):
    """Another live process holds the cell's lock."""


class LockInTheWay(XsynError):
    """Something that is not a lock file sits where a cell's lock goes."""


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
        return f"{where}, since {self.owner.get('started')}, heartbeat {format_age(self.heartbeat_age_s)} ago"


def format_age(seconds: float) -> str:
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
        stale = f"no heartbeat for {format_age(age)} (over {format_age(LOCK_TTL_S)})" if age > LOCK_TTL_S else ""
        return LockHolder(owner, age, stale)
    started = process_start_time(owner["pid"])
    if started is None:
        return LockHolder(owner, age, f"process {owner['pid']} is gone")
    recorded = owner.get("process_start")
    if not isinstance(recorded, (int, float)):
        # A lock without a start time (written by an older xsyn): only its heartbeat can tell.
        return LockHolder(owner, age, f"no heartbeat for {format_age(age)}" if age > LOCK_TTL_S else "")
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
    staged = folder / f"{temp_prefix(LOCK_FILE)}{token[:12]}.tmp"  # a killed taker's is cleared as a dead writer's
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
                _remove_stale(path)
        raise CellBusy(f"{path} keeps changing hands")
    finally:
        staged.unlink(missing_ok=True)


def clear_stale_lock(folder: Path) -> None:
    """Remove a stale lock (its owner killed after or during the cell, a damaged file)."""
    holder = lock_holder(folder / LOCK_FILE)
    if holder is not None and holder.stale:
        log.warning("%s: removing a stale lock (%s)", folder / LOCK_FILE, holder.stale_reason)
        _remove_stale(folder / LOCK_FILE)


def _remove_stale(path: Path) -> None:
    """Delete a stale lock file; a folder in its place is none xsyn wrote, so it is named, never deleted."""
    if path.is_dir() and not path.is_symlink():
        raise LockInTheWay(f"{path} is a folder where the cell's lock file goes (xsyn never makes one): move it "
                           "away, then run the experiment again")
    path.unlink(missing_ok=True)
