"""A content-addressed parse cache that several processes may write at once, and that survives kills.

Each entry is addressed by a hash of what determines a parse: the segment's text (or gold
tokens), its language, and the parser's name, version and settings. So a sentence that recurs
across tasks, splits, pairs and languages is parsed once.

Layout: a folder of append-only JSON Lines shards, one per writing process, so writers never
share a file (Accelerate ranks, several nodes on a shared file system). A line is
`key <TAB> crc32 <TAB> record-json`, the key 64 hex digits. A line whose key or checksum is wrong,
or that is not a valid record, is skipped and counted once; its segment is simply parsed again. A
shard's unfinished last line (a writer killed mid-line, or one still busy) counts as corrupt until
its newline arrives; the unfinished line of a writer that is gone (killed on this host) is cut off
its shard by the first process that meets it, and counted there once. A write that fails (full
disk, no permission) is undone and named with the fix (`--cache-dir`), so no partial line is left
for the next run. No pickle anywhere.

At corpus scale (a million entries) the index is what a run holds: per entry its key and one
integer packing (shard, offset, length). Appends are flushed to the file at once (a killed process
loses nothing written) and fsynced at most every `SYNC_SECONDS` and by `sync()` (a machine crash
loses at most that much, parsed again at the next run). Reads keep the shards open.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import time
import uuid
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from xsyn.syntax.record import SyntaxRecord
from xsyn.utils.io import ensure_dir, explain_write_error

_KEY = re.compile(rb"[0-9a-f]{64}")  # what `cache_key` makes
SYNC_SECONDS = 1.0  # at most this long between an append and its fsync (see `sync`)
OPEN_SHARDS = 64  # shards kept open for reading at once
_OFFSET_BITS, _LENGTH_BITS = 40, 24  # an index entry: shard number | offset in the shard | line length


def cache_key(content: str | list[str], lang: str, parser_name: str, parser_version: str,
              settings: Mapping[str, Any], sent_id: str | None = None) -> str:
    """Hash of everything a parse depends on. `content` is raw text, or a list of gold tokens;
    `sent_id` is given for parsers whose parse depends on it (a pre-parsed source)."""
    kind = "text" if isinstance(content, str) else "tokens"
    fields = [kind, content, lang, parser_name, parser_version, dict(settings)]
    if sent_id is not None:
        fields.append(sent_id)
    blob = json.dumps(fields,
                      ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def default_cache_dir() -> Path:
    return Path(os.environ.get("XSYN_CACHE", Path.home() / ".cache" / "xsyn")) / "parses"


class ParseCache:
    def __init__(self, directory: str | Path | None = None):
        self.directory = ensure_dir(Path(directory) if directory is not None else default_cache_dir(),
                                    option="--cache-dir")
        self._index: dict[str, int] = {}  # key -> where (`_where`: shard number, offset, length)
        self._shards: list[Path] = []  # shard number -> shard
        self._numbers: dict[Path, int] = {}
        self._open: dict[int, int] = {}  # shard number -> file descriptor, for reading
        self._scanned: dict[Path, int] = {}  # shard -> bytes indexed so far (whole lines)
        self._synced_at = 0.0  # when this process's shard was last fsynced (time.monotonic)
        self._unsynced = False  # whether appends since then await their fsync
        self._unfinished: set[Path] = set()  # shards whose last line had no newline at the last look
        self._shard: Path | None = None
        self._bad = 0  # whole lines skipped: bad key or checksum, or not a valid record
        self._reported = 0  # corrupt entries already handed to a report (`unreported_corrupt`)
        self.refresh()

    @property
    def corrupt(self) -> int:
        """Entries skipped, each counted once: bad lines, and shards' unfinished last lines."""
        return self._bad + len(self._unfinished)

    def unreported_corrupt(self) -> int:
        """Corrupt entries met since the last call (all so far at the first): what one load reports,
        so that loads sharing this cache count each entry once between them."""
        new = max(0, self.corrupt - self._reported)
        self._reported = max(self._reported, self.corrupt)
        return new

    def __contains__(self, key: str) -> bool:
        return key in self._index

    def __len__(self) -> int:
        return len(self._index)

    def refresh(self) -> None:
        """Index what other writers appended since the last look."""
        for shard in sorted(self.directory.glob("*.jsonl")):
            if shard.is_file():  # (a folder of that name is none of the cache's: left alone, as other files are)
                self._scan(shard)

    def _scan(self, shard: Path) -> None:
        start = self._scanned.get(shard, 0)
        try:
            with shard.open("rb") as fh:
                if os.fstat(fh.fileno()).st_size < start:  # cut or replaced since: index it afresh
                    self._forget(shard)
                    start = 0
                fh.seek(start)
                data = fh.read()
        except FileNotFoundError:  # deleted since the folder was listed
            self._forget(shard)
            return
        number = self._number(shard)
        index, lines = self._index, data.split(b"\n")
        unfinished = lines.pop()  # after the last newline: b"", or a line still being written
        pos = start
        base = number << (_OFFSET_BITS + _LENGTH_BITS)
        for line in lines:
            parts = line.split(b"\t", 2)
            if len(parts) == 3 and _KEY.fullmatch(parts[0]) and parts[1] == b"%08x" % zlib.crc32(parts[2]):
                index[parts[0].decode("ascii")] = base | pos << _LENGTH_BITS | len(line)
            else:
                self._bad += 1
            pos += len(line) + 1
        self._scanned[shard] = pos
        if unfinished and _writer_gone(shard) and _cut(shard, pos):  # killed mid-line: the part line goes
            self._bad += 1
            unfinished = b""
        if unfinished:  # an unfinished last line: a writer is busy, or was killed mid-line
            self._unfinished.add(shard)
        else:
            self._unfinished.discard(shard)

    def get(self, key: str) -> SyntaxRecord | None:
        """The cached record, or None (also when the entry turns out unreadable or not a tree: its
        segment is then parsed again)."""
        where = self._index.get(key)
        if where is None:
            return None
        number, offset = where >> (_OFFSET_BITS + _LENGTH_BITS), where >> _LENGTH_BITS & ((1 << _OFFSET_BITS) - 1)
        try:
            parts = os.pread(self._descriptor(number), where & ((1 << _LENGTH_BITS) - 1), offset).split(b"\t", 2)
        except FileNotFoundError:  # the shard was deleted (the cache cleaned): parse again
            self._forget(self._shards[number])
            return None
        try:
            if len(parts) != 3 or parts[1] != b"%08x" % zlib.crc32(parts[2]):
                raise ValueError("checksum mismatch")
            record = SyntaxRecord.from_dict(json.loads(parts[2].decode("utf-8")))
            record.validate()
            return record
        except (ValueError, KeyError, TypeError):  # TreeError is a ValueError
            self._bad += 1
            del self._index[key]
            return None

    def _descriptor(self, number: int) -> int:
        """An open descriptor of shard `number` (at most `OPEN_SHARDS` stay open)."""
        fd = self._open.get(number)
        if fd is None:
            if len(self._open) >= OPEN_SHARDS:
                self._close_all()
            fd = self._open[number] = os.open(self._shards[number], os.O_RDONLY)
        return fd

    def _close_all(self) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()

    def __del__(self) -> None:
        try:
            self.sync()
            self._close_all()
        except (OSError, AttributeError):  # at interpreter exit, or a half-built cache
            pass

    def _forget(self, shard: Path) -> None:
        number = self._numbers.get(shard)
        if number is not None:
            self._index = {key: where for key, where in self._index.items()
                           if where >> (_OFFSET_BITS + _LENGTH_BITS) != number}
            fd = self._open.pop(number, None)
            if fd is not None:
                os.close(fd)
        self._scanned.pop(shard, None)
        self._unfinished.discard(shard)

    def put_many(self, items: Iterable[tuple[str, SyntaxRecord]]) -> int:
        """Append entries to this process's own shard (fsynced within `SYNC_SECONDS`). Returns how many.

        A failed write (full disk, no permission) is cut back off the shard, so the next run finds
        no partial line, and raised as an `OutputError` naming the shard."""
        keys, lines = [], []
        for key, record in items:
            if not _KEY.fullmatch(key.encode("ascii", "replace")):
                raise ValueError(f"parse cache key {key!r} is not a cache_key (64 hex digits)")
            payload = json.dumps(record.to_dict(), ensure_ascii=False, separators=(",", ":")).encode()
            keys.append(key)
            lines.append(b"%s\t%08x\t%s\n" % (key.encode("ascii"), zlib.crc32(payload), payload))
        if not lines:
            return 0
        if self._shard is None:
            name = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
            self._shard = self.directory / name
        ensure_dir(self.directory, option="--cache-dir")  # again: it may have been deleted since
        shard = self._shard
        try:
            fd = os.open(shard, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                size = os.lseek(fd, 0, os.SEEK_END)
                try:
                    _write_all(fd, b"".join(lines))
                    self._unsynced = True
                    if time.monotonic() - self._synced_at >= SYNC_SECONDS:
                        self._fsync(fd)
                except OSError:
                    self._undo(fd, size)
                    raise
            finally:
                os.close(fd)
        except OSError as err:
            raise explain_write_error(err, shard, "--cache-dir") from err
        if self._scanned.get(shard, 0) == size:  # indexed up to here: index the new lines as written
            self._index_appended(shard, size, keys, lines)
        else:
            self._scan(shard)
        return len(lines)

    def _number(self, shard: Path) -> int:
        """The shard's number in the index entries."""
        number = self._numbers.get(shard)
        if number is None:
            number = self._numbers[shard] = len(self._shards)
            self._shards.append(shard)
        return number

    def _index_appended(self, shard: Path, offset: int, keys: list[str], lines: list[bytes]) -> None:
        base = self._number(shard) << (_OFFSET_BITS + _LENGTH_BITS)
        for key, line in zip(keys, lines):
            self._index[key] = base | offset << _LENGTH_BITS | (len(line) - 1)
            offset += len(line)
        self._scanned[shard] = offset

    def sync(self) -> None:
        """fsync this process's shard: what was appended survives a machine crash from now on."""
        if self._shard is None or not self._unsynced:
            return
        try:
            fd = os.open(self._shard, os.O_RDONLY)
        except FileNotFoundError:  # deleted since: nothing left to keep
            self._unsynced = False
            return
        try:
            self._fsync(fd)
        finally:
            os.close(fd)

    def _fsync(self, fd: int) -> None:
        os.fsync(fd)
        self._synced_at, self._unsynced = time.monotonic(), False

    def _undo(self, fd: int, size: int) -> None:
        """Cut a failed append back off the shard; if even that fails, write later entries to a new
        shard (the partial line left behind is skipped and counted, never joined to the next one)."""
        try:
            os.ftruncate(fd, size)
        except OSError:
            self._shard = None


def _writer_gone(shard: Path) -> bool:
    """Whether the process that wrote `shard` (named HOST-PID-ID by `put_many`) has ended: it ran on
    this host and no process has its id now. Unknown (another host, another naming) is not gone."""
    host, pid, _ = (shard.stem.rsplit("-", 2) + ["", ""])[:3]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process has the id: alive
        return False
    return False


def _cut(shard: Path, size: int) -> bool:
    """Cut a dead writer's unfinished last line off its shard (so that no later run meets it);
    False where the shard cannot be written (a read-only cache keeps counting it)."""
    try:
        os.truncate(shard, size)
    except OSError:
        return False
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_SHARED: dict[Path, ParseCache] = {}


def shared_cache(directory: str | Path | None = None) -> ParseCache:
    """This process's `ParseCache` of a folder, brought up to date: the shards are indexed once, not
    again for every split, language and pair a run loads, and each corrupt entry is reported once."""
    folder = (Path(directory) if directory is not None else default_cache_dir()).resolve()
    cache = _SHARED.get(folder)
    if cache is None or not folder.is_dir():
        cache = _SHARED[folder] = ParseCache(folder)
    else:
        cache.refresh()
    return cache
