"""The papers' published scores (`papers/*.toml`), shown as a "paper" row beside an experiment's own.

Each file names the paper's rows for xsyn's variants (`systems`), then tables of scores per task
(`[[scores]]`: languages, one list per variant, the printed averages) and of generalized-transfer
differences (`[[pair_deltas]]`: a variant minus the baseline over language pairs). Every table keeps
its place in the paper (`table`, and `page` or `section`) and the score it is (`score`, a key of
xsyn's metric, e.g. `f1`, `exact_match`, `detection_f1`). A task may have several score tables (one per
score, or per model size: `models` lists the checkpoints a table is about, `split` the split it reports).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

from xsyn.experiments.experiment_file import RECIPE_PACKAGE, ExperimentError

PAPER_FOLDER = "papers"


@dataclass(frozen=True)
class PaperScores:
    task: str
    table: str
    where: str  # "page 4543" or the section
    score: str
    languages: tuple[str, ...]
    systems: dict[str, dict[str, float]]  # variant -> language -> score
    average: dict[str, float]  # variant -> the printed average
    models: tuple[str, ...] = ()  # the checkpoints this table reports (empty: any)
    split: str | None = None  # the split it reports (None: any)


@dataclass(frozen=True)
class PaperPairDeltas:
    task: str
    table: str
    where: str
    score: str
    axes: tuple[str, str]  # the segments of rows and columns
    languages: tuple[str, ...]
    delta: dict[str, dict[str, float]]  # row -> column -> difference (no diagonal)
    average: float | None


@dataclass(frozen=True)
class Paper:
    name: str
    citation: str
    system_names: dict[str, str]  # variant -> the paper's row name
    tables: tuple[PaperScores, ...]
    pair_deltas: dict[str, PaperPairDeltas]

    @property
    def scores(self) -> dict[str, PaperScores]:
        """Task -> its first score table."""
        first: dict[str, PaperScores] = {}
        for table in self.tables:
            first.setdefault(table.task, table)
        return first

    def scores_for(self, task: str, model: str, split: str | None = None) -> list[PaperScores]:
        """The task's score tables that report `model` (and `split`, when given)."""
        return [table for table in self.tables if table.task == task and (not table.models or model in table.models)
                and (split is None or table.split in (None, split))]


def paper_names() -> list[str]:
    folder = resources.files(RECIPE_PACKAGE) / PAPER_FOLDER
    return sorted(item.name.removesuffix(".toml") for item in folder.iterdir() if item.name.endswith(".toml"))


def load_paper(name: str) -> Paper:
    file = resources.files(RECIPE_PACKAGE) / PAPER_FOLDER / f"{name}.toml"
    if not file.is_file():
        raise ExperimentError(f"paper = {name!r}: no published scores of that name; bundled: "
                              f"{', '.join(paper_names())}")
    where = f"{PAPER_FOLDER}/{name}.toml"
    data = tomllib.loads(file.read_text(encoding="utf-8"))
    names = dict(data["systems"])
    tables = []
    for table in data.get("scores", []):
        languages = tuple(table["languages"])
        systems = {}
        for variant in names:
            if variant in table:
                if len(table[variant]) != len(languages):
                    raise ExperimentError(f"{where}: {table['task']} {variant}: {len(table[variant])} scores for "
                                          f"{len(languages)} languages")
                systems[variant] = dict(zip(languages, map(float, table[variant])))
        tables.append(PaperScores(table["task"], table["table"], _where(table), table["score"], languages, systems,
                                  dict(table.get("average", {})), tuple(table.get("models", ())), table.get("split")))
    pairs = {}
    for table in data.get("pair_deltas", []):
        languages = tuple(table["languages"])
        delta = {row: {col: float(value) for col, value in zip(languages, values) if not math.isnan(value)}
                 for row, values in zip(languages, table["delta"], strict=True)}
        pairs[table["task"]] = PaperPairDeltas(table["task"], table["table"], _where(table), table["score"],
                                               (table["rows"], table["columns"]), languages, delta,
                                               table.get("average"))
    return Paper(name, data["citation"], names, tuple(tables), pairs)


def _where(table: dict[str, Any]) -> str:
    return f"page {table['page']}" if "page" in table else str(table["section"])
