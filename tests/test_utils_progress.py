"""Progress off a terminal: plain lines at most every `interval` seconds with the rate and ETA, and one at the
end after any of them."""

from __future__ import annotations

import io
import os
import sys

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


def test_a_rate_under_one_a_second_is_shown_as_seconds_per_unit():
    """A training step of 3.2 s showed as `0 steps/s`."""
    stream, clock = io.StringIO(), Clock()
    progress = Progress(100, "pawsx gat", "steps", interval=30, stream=stream, clock=clock)
    clock.now += 32
    progress.update(10)
    assert stream.getvalue() == "pawsx gat: 10/100 steps (10.0%), 3.2 s/step, ETA 4m48s\n"
    assert progress.speed(1.0) == "1 steps/s" and progress.speed(0.0) == "0 steps/s"


def test_evaluations_progress_off_a_terminal_is_lines_with_its_total_set_on_the_way(capsys):
    """evaluate drew a tqdm bar into log files (a carriage return per redraw)."""
    from xsyn.utils.progress import progress_bar

    bar = progress_bar(4, 0, True, "synth test")
    bar.interval = 0.0
    bar.postfix["now"] = "svo"
    bar.update(1)
    bar.set_total(16)
    bar.update(1)
    bar.close()
    err = capsys.readouterr().err
    assert "\r" not in err and err.startswith("synth test: 1/4 evaluations (25.0%), ")
    assert "synth test: 2/16 evaluations (12.5%), " in err and err.rstrip().endswith(", now svo")


def test_library_bars_are_switched_off_away_from_a_terminal_for_this_process_and_its_children(monkeypatch):
    """datasets' featurisation bars and transformers' "Writing model shards" wrote carriage returns into logs."""
    import datasets
    from transformers.utils import logging as hf_logging

    from xsyn.utils.progress import LIBRARY_BAR_SWITCHES, quiet_library_bars_off_terminal

    for name in LIBRARY_BAR_SWITCHES:
        monkeypatch.delenv(name, raising=False)
    # as read when datasets was imported (an earlier in-process command of the suite may have set it)
    monkeypatch.setattr(sys.modules["datasets.utils.tqdm"], "HF_DATASETS_DISABLE_PROGRESS_BARS", None)

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    datasets.enable_progress_bars()
    hf_logging.enable_progress_bar()
    try:
        assert not quiet_library_bars_off_terminal(Terminal())
        assert datasets.is_progress_bar_enabled() and hf_logging.is_progress_bar_enabled()
        assert quiet_library_bars_off_terminal(io.StringIO())
        assert not datasets.is_progress_bar_enabled() and not hf_logging.is_progress_bar_enabled()
        assert all(os.environ[name] == "1" for name in LIBRARY_BAR_SWITCHES)  # for the cells it runs
    finally:
        datasets.enable_progress_bars()
        hf_logging.enable_progress_bar()


def test_steps_and_examples_per_second_agree_and_follow_the_recent_speed():
    """Training showed 2 steps/s at batch 32 beside 'examples/s 21' (the last step alone, swinging 9-204):
    both rates are now over the same recent window."""
    stream, clock = io.StringIO(), Clock()
    progress = Progress(1000, "pawsx gat", "steps", interval=30, stream=stream, clock=clock, also="examples",
                        window=60)
    for _ in range(120):  # 2 steps/s of 32 examples for a minute, one step slowed by a dev evaluation
        clock.now += 0.5
        progress.update(1, also=32)
    clock.now += 10  # the evaluation
    progress.update(1, also=32)
    for _ in range(240):  # then 4 steps/s
        clock.now += 0.25
        progress.update(1, also=32)
    assert progress.rate() == 4.0 and progress.also_rate() == 128.0  # the last minute alone, and 32 a step
    progress.close()
    assert stream.getvalue().splitlines()[-1].startswith("pawsx gat: 361/1000 steps (36.1%), 4 steps/s, "
                                                         "128 examples/s, ETA 2m40s")
