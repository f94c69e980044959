"""Temp files of atomic writes that a killed process leaves: the next process to write in the folder removes
those of dead writers, and never a live writer's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import cpu_process_env
from test_report import write_run

from xsyn.utils import io

XSYN = Path(sys.executable).with_name("xsyn")  # the installed console script


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: no process has its pid (until the system hands it out again)
    return child.pid


def age(path: Path, seconds: float) -> Path:
    os.utime(path, (time.time() - seconds,) * 2)
    return path


def test_a_dead_writers_temp_goes_and_live_or_recent_others_stay(tmp_path):  # a fresh folder: unswept
    host, other = io.host_tag(), "0123abcd" if io.host_tag() != "0123abcd" else "4567cdef"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        names = {"dead": f".report.json.{dead_pid()}-{host}.k2j4h5g6.tmp",
                 "live": f".report.json.{sleeper.pid}-{host}.a1b2c3d4.tmp",
                 "mine": f"{io.temp_prefix('report.md')}zz9y8x7w.tmp",
                 "other host, recent": f".report.json.{sleeper.pid}-{other}.a1b2c3d4.tmp",
                 "other host, old": f".report.json.{sleeper.pid}-{other}.q1w2e3r4.tmp",
                 "unnamed owner, recent": ".report.json.abcd1234.tmp",
                 "unnamed owner, old": ".per_language.csv.abcd1234.tmp",
                 "dead probe": f".xsyn-preflight.{dead_pid()}-{host}.abcdefgh",
                 "not a temp": ".report.json.notes", "old, not a temp": "report.json.tmp"}
        for name in names.values():
            (tmp_path / name).write_text("partial")
        for key in ("other host, old", "unnamed owner, old", "old, not a temp"):
            age(tmp_path / names[key], io.STALE_TEMP_SECONDS + 60)
        staging = tmp_path / f".staging.{dead_pid()}-{host}.x8y7z6w5.tmp"  # a killed feature build's folder
        (staging / "cache.arrow").parent.mkdir()
        (staging / "cache.arrow").write_bytes(b"\0" * 10)
        assert io.clear_leftover_temps(tmp_path) == 5
        kept = {key for key, name in names.items() if (tmp_path / name).exists()}
        assert kept == {"live", "mine", "other host, recent", "unnamed owner, recent", "not a temp",
                        "old, not a temp"}
        assert not staging.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_each_folder_is_cleared_once_a_process_on_its_first_write(tmp_path):  # a fresh folder: unswept
    leftover = tmp_path / f".a.json.{dead_pid()}-{io.host_tag()}.abcdefgh.tmp"
    leftover.write_text("{")
    io.atomic_write_text(tmp_path / "b.json", "{}")
    assert not leftover.exists() and (tmp_path / "b.json").read_text() == "{}"
    leftover.write_text("{")  # once a folder: later writes cost no listing of it
    io.atomic_write_text(tmp_path / "c.json", "{}")
    assert leftover.exists()


def test_report_killed_mid_write_leaves_no_temp_file_once_rerun(tmp_path):
    """kill -9 while `report` writes (its first fsync holds it there), then the installed command again."""
    runs = [write_run(tmp_path / "runs", f"gat-{seed}", seed=seed, per_language={"en": 80.0 + seed, "de": 70.0})
            for seed in (1, 2)]
    out = tmp_path / "out"
    args = ["report", *map(str, runs), "--output-dir", str(out)]
    held = ("import os, sys, time\n"
            "def hold(fd):\n    print('writing', flush=True)\n    time.sleep(120)\n"
            "os.fsync = hold\nfrom xsyn.cli import main\nmain(sys.argv[1:])\n")
    killed = subprocess.Popen([sys.executable, "-c", held, *args], env=cpu_process_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        assert killed.stdout.readline() == "writing\n"
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
    left = [p.name for p in out.rglob(".*.tmp")]
    assert len(left) == 1 and f".{killed.pid}-" in left[0]  # what the issue found
    rerun = subprocess.run([str(XSYN), *args], env=cpu_process_env(), capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert [p.name for p in out.rglob(".*.tmp")] == [] and (out / "report.json").is_file()
