"""Model selection on dev, as the papers tune: of the search points of one system (a task, model, variant
and grid point), keep the one whose runs have the best mean dev score over their seeds.

The dev score is the one each fine-tune chose its best checkpoint on: the primary score on the dev set
of the training language (`validation_results.json`; Li et al. tune on the English or Chinese dev set of
each task, a held-out share of train where a task has none; a cross-lingual task is tuned on its source
language, as zero-shot transfer allows no target-language dev data). A search point counts only once
every one of its seeds has finished, so that a partly run grid never wins with fewer, luckier seeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xsyn.experiments.experiment_file import Cell, Experiment
from xsyn.training.folder import RunFolder
from xsyn.utils.io import saved_json_object


@dataclass(frozen=True)
class Selection:
    """The search point chosen for one system, and what it was chosen from."""

    task: str
    model: str
    variant: str
    system: tuple[tuple[str, Any], ...]  # the grid point that makes the system (without searched settings)
    chosen: tuple[tuple[str, Any], ...]  # the searched settings' chosen values
    dev_score: float
    dev_language: str
    candidates: dict[str, float]  # each complete search point, shown as "k=v, ...", -> its mean dev score
    incomplete: int  # search points with seeds still to finish (not candidates yet)
    cells: tuple[Cell, ...]  # the chosen point's cells: these are reported

    def describe(self) -> str:
        chosen = ", ".join(f"{key}={value}" for key, value in self.chosen)
        return (f"{chosen} (dev {self.dev_score:.2f} in {self.dev_language}, best of {len(self.candidates)} points"
                + (f"; {self.incomplete} still running or to do" if self.incomplete else "") + ")")


def select(experiment: Experiment, task: str, finished: list[Cell],
           dev_score: Callable[[Path], float | None] | None = None) -> tuple[list[Cell], list[Selection]]:
    """The finished cells of `task` that the report shows, and the choice made for each searched system.
    Without a search, every finished cell is shown."""
    if not experiment.searched(task):
        return list(finished), []
    dev_score = dev_score or read_dev_score
    language = experiment.cards[task].train_languages[0]
    expected = _points(c for c in experiment.cells if c.task == task)
    done = _points(finished)
    shown: list[Cell] = []
    selections = []
    for system, points in done.items():
        candidates, incomplete = {}, 0
        for point, cells in points.items():
            if len(cells) < len(expected[system][point]):
                incomplete += 1
                continue
            scores = [dev_score(experiment.cell_dir(cell)) for cell in cells]
            if any(score is None for score in scores):
                incomplete += 1
                continue
            candidates[point] = math.fsum(scores) / len(scores)
        incomplete += len(expected[system]) - len(points)
        if not candidates:
            continue
        best = max(candidates, key=lambda point: (candidates[point], _order(expected[system], point)))
        (model, variant, grid) = system
        selections.append(Selection(task, model, variant, grid, best, candidates[best], language,
                                    {_shown(p): score for p, score in candidates.items()}, incomplete,
                                    tuple(points[best])))
        shown.extend(points[best])
    return shown, selections


def read_dev_score(folder: Path) -> float | None:
    """The dev score a finished fine-tune kept its best checkpoint on (None while there is none)."""
    value = (saved_json_object(RunFolder(folder).validation_results) or {}).get("primary")
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


SystemKey = tuple[str, str, tuple[tuple[str, Any], ...]]
PointKey = tuple[tuple[str, Any], ...]


def _points(cells) -> dict[SystemKey, dict[PointKey, list[Cell]]]:
    """System -> search point -> its cells (one per seed)."""
    grouped: dict[SystemKey, dict[PointKey, list[Cell]]] = {}
    for cell in cells:
        point = tuple((key, value) for key, value in cell.grid if key in cell.searched)
        grouped.setdefault((cell.model, cell.variant, cell.system), {}).setdefault(point, []).append(cell)
    return grouped


def _order(points: dict[PointKey, list[Cell]], point: PointKey) -> int:
    """Ties go to the point listed first in the file (the smaller learning rate or budget in the papers' grids)."""
    return -list(points).index(point)


def _shown(point: PointKey) -> str:
    return ", ".join(f"{key}={value}" for key, value in point)
