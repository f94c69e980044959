"""SIGTERM as Ctrl-C: one mechanism, so that every cleanup Ctrl-C runs runs on a `kill`, a `timeout` and SLURM's end
of time too.

Python ends a process on SIGTERM at once: no `finally`, no context manager's exit, so a benchmark's temporary
folder, a staging folder of the feature cache or a cell's lock stayed behind, where Ctrl-C removed them. Every
`xsyn` command (and each experiment worker process) installs `terminate_as_interrupt` first: SIGTERM then raises
`Terminated`, a KeyboardInterrupt, where the process is, and every `except KeyboardInterrupt` and `finally` runs as
on Ctrl-C. A second SIGTERM while that cleanup runs is ignored (SIGKILL still ends the process). The exit status is
128 + the signal's number, as a shell reports a process the signal ended: 143 for SIGTERM, 130 for Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import threading


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process was when it came."""

    signum = signal.SIGTERM


_INSTALLED_IN: list[int] = []  # the process that installed the handler (a forked child inherits it)


def _raise_terminated(signum, frame) -> None:
    if os.getpid() not in _INSTALLED_IN:  # a forked worker (a parse pool's): it ends as SIGTERM ends it
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the cleanup this starts is not cut short by a second one
    raise Terminated()


def terminate_as_interrupt() -> None:
    """From now on SIGTERM raises `Terminated` in this process (only the main thread can take signals:
    elsewhere, nothing); a child it forks ends on SIGTERM as Python's default has it."""
    if threading.current_thread() is threading.main_thread():
        _INSTALLED_IN.append(os.getpid())
        signal.signal(signal.SIGTERM, _raise_terminated)


def exit_status(stop: BaseException) -> int:
    """The exit status of a process `stop` ended: 143 for SIGTERM, 130 for Ctrl-C (and any other interrupt)."""
    return 128 + int(getattr(stop, "signum", signal.SIGINT))


def stop_name(stop: BaseException) -> str:
    """How the user stopped the process, in a word for the message that follows."""
    return "terminated (SIGTERM)" if getattr(stop, "signum", signal.SIGINT) == signal.SIGTERM else "interrupted"
