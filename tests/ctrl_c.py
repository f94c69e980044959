"""A Ctrl-C stops the suite at once, even in a test that runs an xsyn command in-process.

Such a command takes a KeyboardInterrupt as its own (finetune prints "interrupted: ... Continue with"
and exits 130), so the test would end and the suite go on: a second Ctrl-C was needed. The handler here
remembers the user's Ctrl-C before it reaches the command, and the suite stops after that test.
(A plugin of its own so that its test can load it alone: `python -m pytest -p ctrl_c`.)
"""

from __future__ import annotations

import signal
import threading

import pytest

_PRESSED: list[int] = []


def _on_ctrl_c(signum, frame):
    _PRESSED.append(signum)
    raise KeyboardInterrupt


def install() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_ctrl_c)


def pytest_configure(config) -> None:
    install()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    yield
    if _PRESSED:
        pytest.exit(f"interrupted (Ctrl-C) during {item.nodeid}", returncode=2)
