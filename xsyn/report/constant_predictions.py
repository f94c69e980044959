"""Runs that predicted the same for every example somewhere (`predicted_nothing` in results.json: one label
everywhere, no entity, no error): a score, delta or finding they feed can be high or significant for that
reason alone, so the report names them beside every such number: a reference `!1` in the number's cell,
and under the table the run it stands for, with what it predicted and where.

A run's flag at a language feeds its system's score there, the system's average and transfer gap (over
every language), and the deltas of both against each other; at a pair, the pair's score and delta."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xsyn.report.aggregate import Experiment, System
from xsyn.report.format import md

MARK = "!"


@dataclass(frozen=True)
class AlikeRun:
    number: int  # its reference, `!number`
    system: str
    seed: Any
    where: dict[str, str]  # language or pair ("de", "de-en") -> what it predicted there

    def describe(self) -> str:
        said: dict[str, list[str]] = {}
        for key, what in self.where.items():
            said.setdefault(what, []).append(key)
        return (f"{MARK}{self.number}: {self.system}, seed {self.seed}, predicted "
                + "; ".join(f"{what} in {', '.join(keys)}" for what, keys in said.items()))


class AlikeRuns:
    """An experiment's runs that predicted alike, numbered in the report's order of systems and seeds."""

    def __init__(self, systems: list[System]):
        self.by_system: dict[str, list[AlikeRun]] = {}
        count = 0
        for system in systems:
            for run in system.runs:
                where = run.results.get("predicted_nothing") or {}
                if where:
                    count += 1
                    self.by_system.setdefault(system.label, []).append(
                        AlikeRun(count, system.label, run.seed, {str(k): str(v) for k, v in where.items()}))

    @classmethod
    def of(cls, experiment: Experiment) -> AlikeRuns:
        return cls([*experiment.systems, *([experiment.baseline] if experiment.baseline else [])])

    def __bool__(self) -> bool:
        return bool(self.by_system)

    def at(self, labels: list[str], keys: list[str]) -> list[AlikeRun]:
        """The flagged runs of the systems `labels` at any of `keys`."""
        return [run for label in labels for run in self.by_system.get(label, [])
                if any(key in run.where for key in keys)]

    def mark(self, labels: list[str], keys: list[str]) -> str:
        """` !1,3` for the runs behind a number (the systems `labels` at `keys`), or ""."""
        found = self.at(labels, keys)
        return f" {MARK}{','.join(str(run.number) for run in found)}" if found else ""

    def legend(self, labels: list[str] | None = None) -> list[str]:
        """A line per flagged run (of the systems `labels`, else all), and what it means for the numbers."""
        runs = [run for label, found in self.by_system.items() if labels is None or label in labels
                for run in found]
        if not runs:
            return []
        return [f"**{MARK}n: a run that predicted the same for every example there**; a score, Δ or `*` it feeds "
                "can be high or significant for that reason alone:", "", *[f"- {md(run.describe())}" for run in runs]]


def pair_key(row: str, col: str) -> str:
    """How results.json keys a pair: the diagonal by its language."""
    return row if row == col else f"{row}-{col}"
