"""Bad inputs and faults, as a user meets them through the installed `xsyn` (issue 56): each ends in one clear
error naming the file, field or option and the fix, before any expensive step, and never in a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from console import CONSOLE_TIMEOUT_S, console_env, xsyn_script
from test_experiments_prepare import _grid, _options


def xsyn_fails(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """`xsyn ARGS` from the console script; asserts it fails with exit status 1 and a message, not a traceback."""
    proc = subprocess.run([str(xsyn_script()), *args], cwd=cwd, env=console_env(**env), capture_output=True,
                          text=True, timeout=CONSOLE_TIMEOUT_S)
    shown = f"xsyn {' '.join(args)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode in (1, 2) and "Traceback" not in proc.stderr + proc.stdout, shown
    assert proc.stderr.startswith("Error") or "\nError" in proc.stderr, shown
    return proc


def test_a_missing_model_folder_is_named_by_prepare_and_by_run_offline(tmp_path):
    grid = _grid(tmp_path, "chain")
    missing = str(tmp_path / "models" / "mbert")
    for command in (["prepare"], ["run", "--offline"]):
        failed = xsyn_fails("experiment", *command[:1], str(grid), *_options(tmp_path), "--model", missing,
                            *command[1:], cwd=tmp_path)
        assert f"model {missing} (--model): no such folder, and not a hub name" in failed.stderr, failed.stderr
    assert not (tmp_path / "runs" / "pawsx").exists()  # nothing was started


def test_a_mistyped_relative_model_path_is_not_taken_for_a_hub_name(tmp_path):
    grid = _grid(tmp_path, "chain")
    (tmp_path / "models").mkdir()
    failed = xsyn_fails("experiment", "run", str(grid), *_options(tmp_path), "--model", "models/mbrt", cwd=tmp_path)
    assert "model models/mbrt (--model): no such folder" in failed.stderr, failed.stderr


def test_prepare_on_slurm_without_slurm_says_so_and_how_to_prepare_here(tmp_path):
    grid = _grid(tmp_path, "chain")
    failed = xsyn_fails("experiment", "prepare", str(grid), *_options(tmp_path), "--launcher", "slurm", cwd=tmp_path)
    assert "submitting `experiment prepare` to SLURM failed" in failed.stderr, failed.stderr
    assert "run it here with --launcher local" in failed.stderr


def test_a_manifest_of_another_shape_is_named_with_the_fix(tmp_path):
    grid = _grid(tmp_path, "chain")
    (tmp_path / "runs").mkdir()
    manifest = tmp_path / "runs" / "prepared.json"
    manifest.write_text(json.dumps({"units": ["a", "b"], "models": {}}), encoding="utf-8")
    for offline in ([], ["--offline"]):
        failed = xsyn_fails("experiment", "run", str(grid), *_options(tmp_path), *offline, cwd=tmp_path)
        assert f"{manifest}: units is a JSON list, not an object" in failed.stderr, failed.stderr
        assert "delete it, then run `xsyn experiment prepare` again" in failed.stderr


def test_bench_eval_refuses_a_step_time_that_is_not_a_number(tmp_path):
    for value in ("nan", "inf"):
        failed = xsyn_fails("bench", "eval", "--step-ms", value, cwd=tmp_path)
        assert f"Invalid value for '--step-ms': {value!r} is not a finite number" in failed.stderr, failed.stderr
    assert not list(tmp_path.iterdir())  # refused before it trained anything
