"""Atomic, crash-safe file writes: a reader never sees a partial file.

A write that fails for a reason the user can fix (full disk, no permission, a folder that cannot be
created because a file stands in its path) raises `OutputError`, whose message names the path and
the option that chooses another place (`option`, e.g. `--output-dir`, `--output`, `--cache-dir`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from xsyn.utils.errors import XsynError

log = logging.getLogger(__name__)

# A temp file (or staging folder) of an atomic write is `.<target>.<pid>-<host>.<random>.tmp` (a preflight probe:
# `.xsyn-preflight.<pid>-<host>.<random>`): a later process can tell whose it is. One left by a process that
# is gone (killed mid-write: kill -9, a lost node) is removed the first time a process writes in its folder.
# Whose-is-it decides, not age alone, so a concurrent writer's live temp file is never taken: the owner's pid
# is checked where its host is this one; a temp of another host (a shared filesystem), or one named before
# owners were (mkstemp's bare 8 characters), is removed only once untouched for STALE_TEMP_SECONDS, far longer
# than any single write takes. A pid reused by a live process keeps its file until then too.
STALE_TEMP_SECONDS = 3600
_TEMP = re.compile(r"\.(?:.+?\.(?P<pid>\d+)-(?P<host>[0-9a-f]{8})\.[a-z0-9_]+\.tmp"
                   r"|xsyn-preflight\.(?P<probe_pid>\d+)-(?P<probe_host>[0-9a-f]{8})\.[a-z0-9_]+"
                   r"|.+\.[a-z0-9_]{8}\.tmp|xsyn-preflight\.[a-z0-9_]{8})")
_swept: set[str] = set()  # folders this process has cleared of leftovers


class OutputError(XsynError, OSError):
    """A write failed for a reason the user can fix (disk full, no permission)."""

    def __str__(self) -> str:
        return self.strerror  # the explanation alone, without "[Errno 28]"


def atomic_write_bytes(path: str | Path, data: bytes, *, option: str = "--output-dir") -> None:
    """Write `data` to a temp file in the target's folder, fsync it, then rename it into place."""
    path = Path(path)
    ensure_dir(path.parent, option=option)
    clear_leftover_temps(path.parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(path.name), suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file normal permissions
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as err:
        raise explain_write_error(err, path, option) from err


def ensure_dir(folder: str | Path, *, option: str = "--output-dir") -> Path:
    """`folder`, created with its parents; an `OutputError` naming the folder (and the file that
    stands in its way, if one does) when it cannot be."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise explain_write_error(err, folder, option, creating=True) from err
    return folder


@contextmanager
def work_folder(folder: str | Path | None, prefix: str, *, option: str = "--workdir") -> Iterator[Path]:
    """`folder` (created, and kept), or with None a new temporary folder removed when the block ends, however
    it ends (a benchmark's runs, checkpoints and caches: hundreds of MB each time)."""
    if folder is not None:
        yield ensure_dir(folder, option=option)
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as temporary:
        yield Path(temporary)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str, *, option: str = "--output-dir") -> None:
    atomic_write_bytes(path, text.encode("utf-8"), option=option)


def explain_write_error(err: OSError, path: Path, option: str, creating: bool = False) -> OSError:
    """`err` as an `OutputError` that names `path` and the fix, where the user can fix it; else `err`."""
    if isinstance(err, OutputError):
        return err
    what = f"create the folder {path}" if creating else f"write {path}"
    if err.errno == errno.ENOSPC:
        return OutputError(err.errno, f"no space left on the device while writing {path}; "
                                      f"free some space or choose another {option}")
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return OutputError(err.errno, f"cannot {what}: permission denied; "
                                      f"choose a folder you can write to ({option})")
    if err.errno in (errno.EDQUOT, errno.EFBIG):  # over the disk quota, or the file size limit
        return OutputError(err.errno, f"cannot write {path}: {(err.strerror or 'too large').lower()}; "
                                      f"free some space or choose another {option}")
    if err.errno == errno.EISDIR:
        return OutputError(err.errno, f"cannot write {path}: it is a folder; name a file ({option})")
    if err.errno in (errno.ENOTDIR, errno.EEXIST):
        blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
        where = f"{blocker} is a file, not a folder" if blocker is not None else "a part of the path is not a folder"
        return OutputError(err.errno, f"cannot {what}: {where}; move that file away or choose another {option}")
    return err


def write_error_of(err: BaseException) -> OSError | None:
    """The OSError a failure comes from: `err` itself or one in its chain. A library that fails while cleaning
    up after a refused write (datasets closing a file the full disk cut short: "I/O operation on closed
    file") raises its own error on top of the OSError that says what happened."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, OSError):
            return err
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return None


def atomic_write_json(path: str | Path, data) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def replace_dir(staged: str | Path, final: str | Path, keep_old_as: str | Path | None = None) -> None:
    """Swap a fully written folder into place; the previous one is deleted, or kept as `keep_old_as`.
    A crash mid-swap leaves `final` or `final.old`, which `existing_dir` recovers; never a half-written
    `final`."""
    staged, final = Path(staged), Path(final)
    old = final.with_name(final.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        os.replace(final, old)
    os.replace(staged, final)
    if keep_old_as is not None and old.exists():
        shutil.rmtree(keep_old_as, ignore_errors=True)
        os.replace(old, keep_old_as)
    shutil.rmtree(old, ignore_errors=True)


@contextmanager
def removed_unless_swapped(staging: str | Path) -> Iterator[Path]:
    """The writing of a folder `replace_dir` will swap in: stopped before the swap (an error, Ctrl-C, or SIGTERM
    raised as one), the half-written `staging` is removed and the stop goes on; the final folder keeps its last
    whole version (or `final.old` mid-swap, which `existing_dir` recovers)."""
    try:
        yield Path(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def existing_dir(final: str | Path) -> Path | None:
    """`final`, or the previous version a crash in `replace_dir` left as `final.old`, or None."""
    final = Path(final)
    old = final.with_name(final.name + ".old")
    if final.is_dir():
        return final
    return old if old.is_dir() else None


def not_utf8_at(data: bytes, err: UnicodeDecodeError) -> str:
    """Where `data` stops being UTF-8, as an editor shows it (a line and a byte in it), not as a file offset."""
    line, column = data.count(b"\n", 0, err.start) + 1, err.start - data.rfind(b"\n", 0, err.start)
    return f"line {line}, byte {column}: not UTF-8 text (byte 0x{data[err.start]:02x})"


def saved_json_object(path: Path) -> dict | None:
    """A JSON object xsyn saved, or None where there is none to trust: missing, or damaged (cut short by a kill,
    not UTF-8, not JSON, not an object). For files whose absence means "not done yet", so damage means the same."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # (UnicodeDecodeError and JSONDecodeError are ValueErrors)
        return None
    return data if isinstance(data, dict) else None


def check_writable(folder: str | Path, option: str) -> Path:
    """`folder`, created if need be, with a file written in it and removed; else an `OutputError` naming the
    folder (or the file that stands in its path) and `option`."""
    folder = ensure_dir(folder, option=option)
    try:
        clear_leftover_temps(folder)
        handle, probe = tempfile.mkstemp(prefix=f".xsyn-preflight.{os.getpid()}-{host_tag()}.", dir=folder)
        os.close(handle)
        os.unlink(probe)
    except OSError as err:
        raise explain_write_error(err, folder, option) from err
    return folder


def host_tag() -> str:
    return hashlib.sha1(socket.gethostname().encode("utf-8")).hexdigest()[:8]  # short, and no dots to parse


def temp_prefix(target: str) -> str:
    """The start of the name of a temp file (or staging folder, ending `.tmp` too) that becomes `target`:
    hidden, and naming its writer, so `clear_leftover_temps` can tell a dead writer's from a live one's."""
    return f".{target}.{os.getpid()}-{host_tag()}."


def clear_leftover_temps(folder: str | Path) -> int:
    """Remove the temp files that writers who are gone left in `folder` (see STALE_TEMP_SECONDS), once per
    folder and process; returns how many were removed."""
    folder = Path(folder)
    key = str(folder.resolve())
    if key in _swept:
        return 0
    _swept.add(key)
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        match = _TEMP.fullmatch(entry.name)
        if match is None or entry.is_symlink() or not _abandoned(entry, match):
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed += 1
        except OSError:
            pass  # gone already (another process cleared it), or not ours to remove
    if removed:
        log.info("%s: removed %d temp file(s) or folder(s) left by interrupted writes", folder, removed)
    return removed


def _abandoned(entry: os.DirEntry, match: re.Match) -> bool:
    pid, host = match["pid"] or match["probe_pid"], match["host"] or match["probe_host"]
    if pid is not None and host == host_tag():
        return not _alive(int(pid))
    try:
        return time.time() - entry.stat(follow_symlinks=False).st_mtime > STALE_TEMP_SECONDS
    except OSError:
        return False


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # (PermissionError: another user's live process)
        return True
    return True
