"""Progress off a terminal: plain lines at most every `interval` seconds with the rate and ETA, and one at the
end after any of them."""

from __future__ import annotations

import io

from xsyn.utils.progress import Progress, duration


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_progress_writes_a_line_per_interval_with_rate_and_eta():
    stream, clock = io.StringIO(), Clock()
    progress = Progress(1000, "parsing", "sentences", interval=30, stream=stream, clock=clock)
    clock.now += 10
    progress.update(100)  # 10 s in: no line yet
    assert stream.getvalue() == ""
    clock.now += 30
    progress.update(300)  # 400 in 40 s: 10/s, 600 left -> 60 s
    clock.now += 5
    progress.update(50)  # 5 s after the last line: none
    progress.close()  # 450 in 45 s
    assert stream.getvalue().splitlines() == [
        "parsing: 400/1000 sentences (40.0%), 10 sentences/s, ETA 1m00s",
        "parsing: 450/1000 sentences (45.0%), 10 sentences/s, ETA 55s"]
    assert "\r" not in stream.getvalue()


def test_disabled_empty_or_short_progress_writes_nothing():
    stream, clock = io.StringIO(), Clock()
    for total, enabled in ((10, False), (0, True), (10, True)):
        progress = Progress(total, "parsing", "sentences", enabled=enabled, interval=30, stream=stream, clock=clock)
        clock.now += 29
        progress.update(10)
        progress.close()
    assert stream.getvalue() == ""


def test_durations_read_at_a_glance():
    assert [duration(s) for s in (42, 61, 900, 3 * 3600 + 125)] == ["42s", "1m01s", "15m00s", "3h02m"]
