"""Progress of a long count (sentences parsed, ...) with its rate and an ETA.

On a terminal it is a tqdm bar on stderr; elsewhere (a log file, a batch job, CI) a bar's redraws would
fill the log with carriage returns, so a plain line goes to the stream instead at most every
`interval` seconds, and one at the end if any was written (a count over within the first
interval leaves the log alone): `parsing: 12000/786000 sentences (1.5%), 850 sentences/s,
ETA 15m0s`.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

# The libraries' own switches for their tqdm bars: datasets' (`map`, featurisation) and the hub's, which
# transformers follows ("Writing model shards", downloads). Read when each library is imported.
LIBRARY_BAR_SWITCHES = ("HF_DATASETS_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_PROGRESS_BARS")
# A note: what xsyn tells a user by the way (working offline, the table of a run's languages, data and parsers),
# between a status line (INFO, shown with -v) and a warning; shown by default, hidden by a command's --quiet
# (warnings still show) and by `xsyn -q` (errors only).
NOTE = 25
logging.addLevelName(NOTE, "NOTE")


def quiet_library_bars_off_terminal(stream: TextIO | None = None) -> bool:
    """Off a terminal (a log file, a batch job), each redraw of a library's bar is a carriage-return line in
    the log: switch their bars off, in this process and in those it starts (a setting the user made wins).
    Returns whether it did. xsyn's own progress writes plain lines there instead."""
    if on_terminal(stream if stream is not None else sys.stderr):
        return False
    for name in LIBRARY_BAR_SWITCHES:
        os.environ.setdefault(name, "1")
    if "datasets" in sys.modules:  # imported already: its switch was read
        sys.modules["datasets"].disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging

        logging.disable_progress_bar()
    return True


@contextmanager
def library_bars(enabled: bool) -> Iterator[None]:
    """datasets' bars (featurisation's `map`) switched off for a block where `enabled` is false, and back as
    they were after it: a library call asked for no progress (`predict(..., progress=False)`) shows none."""
    import datasets

    was = datasets.is_progress_bar_enabled()
    if not enabled:
        datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was and not enabled:
            datasets.enable_progress_bars()


def on_terminal(stream) -> bool:
    """Whether `stream` is a terminal (where a bar redraws in place; elsewhere each redraw is a line)."""
    return bool(getattr(stream, "isatty", None) and stream.isatty())


def duration(seconds: float) -> str:
    """`3h02m`, `15m00s`, `42s`: an ETA a person reads at a glance."""
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class Progress:
    """Counts `done` of `total` `unit`s (from `initial`, where a resumed job starts); `update(n)` after each
    piece of work, `close()` at the end. `postfix` (name -> shown value, e.g. the training loss) follows
    the count on the bar and in the lines. `also` names a second count the work carries (a step's examples:
    `update(1, also=32)`), whose rate is shown beside the first's.

    Rates are over the last `window` seconds (from the start until then): smoothed over many pieces of work,
    yet following a speed that changes, and the two rates over one span of time, so they agree (examples/s
    is steps/s times the examples of those steps)."""

    def __init__(self, total: int, description: str, unit: str, enabled: bool = True, interval: float = 30.0,
                 stream: TextIO | None = None, clock=time.monotonic, initial: int = 0, also: str | None = None,
                 window: float = 120.0):
        self.total, self.description, self.unit, self.interval = total, description, unit, interval
        self.done, self.initial, self._clock, self._lines, self._said = initial, initial, clock, 0, None
        self.also, self.also_done, self.window = also, 0, window
        self.postfix: dict[str, str] = {}
        self._start = self._last_line = clock()
        self._history: deque[tuple[float, int, int]] = deque([(self._start, initial, 0)])  # (time, done, also)
        self._stream = stream if stream is not None else sys.stderr
        self._bar = None
        self.enabled = enabled and total > 0
        if self.enabled and on_terminal(self._stream):
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, initial=initial, desc=description, unit=f" {unit}", file=self._stream,
                             dynamic_ncols=True)

    def rate(self) -> float:
        """Units per second over the window."""
        return self._rates()[0]

    def also_rate(self) -> float:
        """The second count's units per second, over the same window."""
        return self._rates()[1]

    def _rates(self) -> tuple[float, float]:
        now, (then, done, also) = self._clock(), self._history[0]
        seconds = max(now - then, 1e-9)
        return (self.done - done) / seconds, (self.also_done - also) / seconds

    def line(self) -> str:
        rate = self.rate()
        eta = duration((self.total - self.done) / rate) if rate > 0 else "?"
        also = f", {self.also_rate():.0f} {self.also}/s" if self.also else ""
        return (f"{self.description}: {self.done}/{self.total} {self.unit} ({100 * self.done / self.total:.1f}%), "
                f"{self.speed(rate)}{also}, ETA {eta}" + "".join(f", {k} {v}" for k, v in self.postfix.items()))

    def speed(self, rate: float) -> str:
        """`850 sentences/s`; under one a second, seconds per unit (`0 steps/s` said nothing): `3.2 s/step`."""
        if 0 < rate < 1:
            return f"{1 / rate:.1f} s/{self.unit.removesuffix('s')}"
        return f"{rate:.0f} {self.unit}/s"

    def set_total(self, total: int) -> None:
        """A total learnt on the way (evaluation's pairs, known once the languages with data are)."""
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def write(self, line: str) -> None:
        """A line of its own (above the bar, when there is one)."""
        if self._bar is not None:
            self._bar.write(line, file=self._stream)
        else:
            print(line, file=self._stream, flush=True)

    def update(self, n: int, also: int = 0) -> None:
        self.done += n
        self.also_done += also
        now = self._clock()
        self._history.append((now, self.done, self.also_done))
        while len(self._history) > 2 and self._history[1][0] <= now - self.window:
            self._history.popleft()  # the oldest point still at least `window` before now stays the start
        if not self.enabled:
            return
        if self._bar is not None:
            shown = {**({f"{self.also}/s": f"{self.also_rate():.0f}"} if self.also else {}), **self.postfix}
            if shown:
                self._bar.set_postfix(shown, refresh=False)
            self._bar.update(n)
        elif self._clock() - self._last_line >= self.interval:
            self._last_line = self._clock()
            self._say()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.enabled and self._lines and self._said != self.done:
            self._say()

    def _say(self) -> None:
        print(self.line(), file=self._stream, flush=True)
        self._said = self.done
        self._lines += 1


EVALUATION_LINE_SECONDS = 30.0  # off a terminal, evaluation's progress line comes at most this often


def progress_bar(total: int, initial: int, enabled: bool, description: str):
    """Evaluation's count of languages and pairs: a bar on a terminal, elsewhere a plain line at most every
    30 s (a bar's redraws would be carriage-return lines in a log file)."""
    return Progress(total, description, "evaluations", enabled=enabled, interval=EVALUATION_LINE_SECONDS,
                    initial=initial)  # an evaluation: a language or a pair


def quiet_libraries() -> None:
    """No progress bars from datasets and transformers (xsyn's own are switched off separately)."""
    import datasets
    from transformers.utils import logging

    datasets.disable_progress_bars()
    logging.disable_progress_bar()
