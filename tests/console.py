"""Run xsyn as a user runs it: the `xsyn` console script the install put beside this Python, in a subprocess.

A console script is not `python -m xsyn`: it puts its own `bin/` first on `sys.path` (where other packages
install scripts of their own, such as lang2vec's `lang2vec.py`), and it runs without this checkout on the path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONSOLE_TIMEOUT_S = 600


def xsyn_script() -> Path:
    """The installed `xsyn` of this environment (beside its python), else the one on PATH."""
    beside = Path(sys.executable).parent / "xsyn"
    found = beside if beside.is_file() else (shutil.which("xsyn") and Path(shutil.which("xsyn")))
    if not found:
        pytest.fail(f"no `xsyn` console script beside {sys.executable} or on PATH: install xsyn (pip install -e .)")
    return found


def console_env(**extra: str) -> dict[str, str]:
    """The user's environment, offline and on one CPU thread, without the test run's own PYTHONPATH."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
                "TOKENIZERS_PARALLELISM": "false", "PATH": os.pathsep.join([str(xsyn_script().parent),
                                                                           env.get("PATH", "")])})
    env.update(extra)
    return env


def run_xsyn(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """`xsyn ARGS` from the console script in `cwd`; asserts exit status 0 and no traceback."""
    proc = subprocess.run([str(xsyn_script()), *args], cwd=cwd, env=console_env(**env), capture_output=True,
                          text=True, timeout=CONSOLE_TIMEOUT_S)
    shown = f"xsyn {' '.join(args)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, shown
    return proc
