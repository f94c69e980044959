"""The corpus-parsing benchmark behind `xsyn bench parse`.

Three measurements:
- parse throughput: the same sentences parsed from scratch (no cache) by `parse_segments` with 1, 2, ...
  worker processes, the pool's start and the parser's model loads included, as a corpus run pays them;
  with `repeats` the worker counts take turns (1, 2, 1, 2, ...) and each row holds the median rate
  (and every run's), so a burst of other work does not decide the ratio.
  `speedup` is the rate over the 1-worker rate; `efficiency` the speedup per worker (1.0: perfect), and
  `added_core_efficiency` what each worker beyond the first adds, in units of the first
  ((speedup - 1) / (workers - 1)). `sentences_per_cpu_s` counts the CPU time of this process and its
  workers: the rate one core gives when nothing else runs on it, and, compared across worker counts,
  what the workers cost besides parsing (their start, the model loads, sending records back); unlike
  the wall-clock figures it holds on a busy machine;
- the machine's own ceiling (`machine_ceiling`): the same pure-Python loop in 1, 2, ... processes at
  once, timed the same way. A virtual machine's cores are not always whole ones (a host's hyperthreads,
  other guests): what N independent CPU-bound processes get there is the most N parse workers can get,
  and `speedup_vs_machine` puts the parse speedup against it;
- the parse cache at `cache_entries` entries: appending them in the chunks parsing writes (as
  parsing fsyncs them), opening the cache (indexing every shard, as each run does first), and looking up
  `lookups` random keys (reading, checking and decoding each record).

The machine's load average is recorded before and after: a parallel figure means little on a machine
that other work keeps busy.
"""

from __future__ import annotations

import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xsyn.syntax.cache import ParseCache, cache_key
from xsyn.syntax.parse import MIN_CHUNK, default_workers, parse_segments
from xsyn.syntax.parsing import Parser, build_parser
from xsyn.syntax.segment import Segment
from xsyn.utils.errors import InputError, OptionError


def parse_throughput(parser: Parser, sentences: Sequence[str], lang: str, workers: Sequence[int],
                     batch_size: int = 256, repeats: int = 1) -> list[dict[str, Any]]:
    """Sentences/s parsing `sentences` (distinct) from scratch with each number of `workers`; with
    `repeats`, the counts take turns and each row gives the median run (`runs`: every run's rate)."""
    if len(sentences) < max(workers) * MIN_CHUNK:
        raise ValueError(f"{len(sentences)} sentences cannot keep {max(workers)} workers busy (chunks of at least "
                         f"{MIN_CHUNK}): give at least {max(workers) * MIN_CHUNK}")
    runs: dict[int, list[dict[str, Any]]] = {count: [] for count in workers}
    for _ in range(repeats):
        for count in workers:
            segments = [Segment(lang, text=text) for text in sentences]
            cpu_before = _cpu_seconds()
            start = time.perf_counter()
            parse_segments(segments, parser, None, workers=count, batch_size=batch_size)
            seconds = time.perf_counter() - start
            cpu = _cpu_seconds() - cpu_before
            runs[count].append({"workers": count, "sentences": len(segments), "seconds": seconds,
                                "sentences_per_s": len(segments) / seconds, "cpu_seconds": cpu,
                                "sentences_per_cpu_s": len(segments) / cpu})
    rows = []
    for count in workers:
        ranked = sorted(runs[count], key=lambda run: run["sentences_per_s"])
        rows.append({**ranked[(len(ranked) - 1) // 2],
                     "runs": [run["sentences_per_s"] for run in runs[count]]})  # the median (lower, if even)
    return with_speedups(rows, "sentences_per_s")


def with_speedups(rows: list[dict[str, Any]], rate: str) -> list[dict[str, Any]]:
    """`speedup` over the first row's rate per worker, `efficiency` per worker, `added_core_efficiency`."""
    base = rows[0][rate] / rows[0]["workers"]
    for row in rows:
        speedup = row[rate] / base
        row["speedup"] = speedup
        row["efficiency"] = speedup / row["workers"]
        row["added_core_efficiency"] = (speedup - 1) / (row["workers"] - 1) if row["workers"] > 1 else None
    return rows


CEILING_LOOP = "s = 0\nfor i in range({n}):\n    s += i * i\n"  # pure CPU: no memory traffic, no I/O


def machine_ceiling(workers: Sequence[int], loop: int = 20_000_000, repeats: int = 1) -> list[dict[str, Any]]:
    """What this machine gives N independent CPU-bound processes: the same loop in each of N processes
    started at once, the median wall time of `repeats` turns; `speedup` as for parsing."""
    code = CEILING_LOOP.format(n=loop)
    times: dict[int, list[float]] = {count: [] for count in workers}
    for _ in range(repeats):
        for count in workers:
            start = time.perf_counter()
            processes = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]
            if any(process.wait() != 0 for process in processes):
                raise RuntimeError("the ceiling loop failed in a subprocess")
            times[count].append(time.perf_counter() - start)
    rows = [{"workers": count, "loops_per_s": count / statistics.median(times[count])} for count in workers]
    return with_speedups(rows, "loops_per_s")


def _cpu_seconds() -> float:
    """CPU time of this process and of its ended children (the pool's workers, once it is closed)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def cache_rates(records: Sequence[Any], entries: int, lookups: int, chunk: int = 256,
                folder: str | Path | None = None, seed: int = 0) -> dict[str, Any]:
    """Writes/s, open seconds and lookups/s of a parse cache of `entries` entries (the `records`
    repeated under distinct keys), in a temporary folder (under `folder`); each also in CPU time."""
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        cache = ParseCache(tmp)
        keys = [cache_key(f"sentence {i}", "en", "bench", "1", {}) for i in range(entries)]
        start, cpu = time.perf_counter(), time.process_time()
        for lo in range(0, entries, chunk):
            cache.put_many((keys[i], records[i % len(records)]) for i in range(lo, min(entries, lo + chunk)))
        cache.sync()
        write_seconds, write_cpu = time.perf_counter() - start, time.process_time() - cpu
        size = sum(path.stat().st_size for path in Path(tmp).glob("*.jsonl"))
        start, cpu = time.perf_counter(), time.process_time()
        reopened = ParseCache(tmp)
        open_seconds, open_cpu = time.perf_counter() - start, time.process_time() - cpu
        assert len(reopened) == entries, (len(reopened), entries)
        sample = random.Random(seed).sample(keys, min(lookups, entries))
        start, cpu = time.perf_counter(), time.process_time()
        found = sum(reopened.get(key) is not None for key in sample)
        read_seconds, read_cpu = time.perf_counter() - start, time.process_time() - cpu
        assert found == len(sample)
    return {"entries": entries, "bytes": size, "write_chunk": chunk, "writes_per_s": entries / write_seconds,
            "writes_per_cpu_s": entries / write_cpu, "open_seconds": open_seconds, "open_cpu_seconds": open_cpu,
            "lookups": len(sample), "lookups_per_s": len(sample) / read_seconds,
            "lookups_per_cpu_s": len(sample) / read_cpu}


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, where the system reports them."""
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def run_parse_bench(parser_name: str, input_path: str | Path, lang: str = "en", workers: Sequence[int] | None = None,
                    max_sentences: int | None = None, cache_entries: int = 1_000_000, cache_lookups: int = 100_000,
                    repeats: int = 3, ceiling_loop: int = 20_000_000) -> dict[str, Any]:
    """`xsyn bench parse`: the distinct lines of `input_path` parsed at each worker count [default: 1, 2 and
    the cores] against the machine's ceiling, and the parse cache's rates at `cache_entries` entries.
    Returns {"parser", "sentences", "cores", "load_average_before"/"_after", "repeats", "parse" (one row
    per worker count), "machine_ceiling", "cache"}."""
    counts = list(workers) if workers is not None else sorted({1, 2, default_workers()})
    if not counts or min(counts) < 1:
        raise OptionError(f"--workers {','.join(map(str, counts))}: worker counts are 1 or more")
    lines = Path(input_path).read_text(encoding="utf-8-sig").splitlines()
    sentences = list(dict.fromkeys(line.strip() for line in lines if line.strip()))[:max_sentences]
    if not sentences:
        raise InputError(f"{input_path}: no sentences (one per line)")
    parser = build_parser(parser_name, parser_download="none", parser_device="cpu")
    before = load_average()
    try:
        rows = parse_throughput(parser, sentences, lang, counts, repeats=repeats)
    except ValueError as err:
        raise InputError(f"{input_path}: {err}") from None
    ceiling = machine_ceiling(counts, ceiling_loop, repeats)
    for row, machine in zip(rows, ceiling):
        row["machine_speedup"] = machine["speedup"]
        row["speedup_vs_machine"] = row["speedup"] / machine["speedup"]
    cache = cache_rates([s.record for s in _parsed(parser, sentences[:1000], lang)], cache_entries, cache_lookups)
    return {"parser": parser_name, "sentences": len(sentences), "cores": default_workers(),
            "load_average_before": before, "load_average_after": load_average(), "repeats": repeats, "parse": rows,
            "machine_ceiling": ceiling, "cache": cache}


def _parsed(parser: Parser, sentences: list[str], lang: str) -> list[Segment]:
    """The sentences as segments, parsed (in this process): real records for the cache's rates."""
    segments = [Segment(lang, text=text) for text in sentences]
    parse_segments(segments, parser, None)
    return segments
