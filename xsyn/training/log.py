"""The step records of a run: `train_log.jsonl` (one JSON object a line), written by the main
process only, and mirrored to Accelerate's trackers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from xsyn.utils.io import atomic_write_text


class StepLog:
    """Appends records to `path` on the main process; a resumed run first cuts the file back to the
    steps its saved state has done, so each step is logged once, as if the run had never stopped."""

    def __init__(self, path: Path, accelerator, keep_until_step: int = 0):
        self.accelerator = accelerator
        self.file = None
        if accelerator.is_main_process:
            path.parent.mkdir(parents=True, exist_ok=True)
            _keep_log_until(path, keep_until_step)
            self.file = path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        if self.file is not None:
            self.file.write(json.dumps(record) + "\n")
            self.file.flush()
        numbers = {k: v for k, v in flat(record).items() if isinstance(v, (int, float)) and k != "step"}
        self.accelerator.log(numbers, step=record["step"])  # the step is the x axis, not a series

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


TIMING_FIELDS = ("seconds",)  # a step record's wall time: the one value a resumed or repeated run does not repeat


def untimed(record: dict[str, Any]) -> dict[str, Any]:
    """A step record without its timing: what the same run, resumed or repeated, logs again exactly."""
    return {key: value for key, value in record.items() if key not in TIMING_FIELDS}


def read_step_log(path: Path) -> list[dict[str, Any]]:
    """The records of a step log, in order; a line cut short by a kill is left out."""
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def _keep_log_until(path: Path, step: int) -> None:
    """Cut the log back to the lines of steps <= `step` (none for a fresh run)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True) if path.is_file() else []
    kept = []
    for line in lines:
        try:
            if json.loads(line).get("step", 0) <= step:
                kept.append(line if line.endswith("\n") else line + "\n")
        except (json.JSONDecodeError, AttributeError):
            continue  # a line cut short by a kill
    if kept != lines:
        atomic_write_text(path, "".join(kept))


def flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested records as one level of `a/b` keys (trackers take scalars and strings only)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}/"))
        else:
            out[prefix + key] = value if isinstance(value, (int, float, str, bool)) else str(value)
    return out
