"""The formatting the report's renderers share (Markdown and CSV in `render`, LaTeX in `latex`): which
systems and languages an experiment shows, its title, its caps, and how a mean, a delta and a number
are written."""

from __future__ import annotations

import math
import re

from xsyn.report.aggregate import Delta, Experiment, Stat, System


def experiment_systems(experiment: Experiment) -> list[System]:
    return [*experiment.systems, *([experiment.baseline] if experiment.baseline else [])]


def section_title(experiment: Experiment) -> str:
    """Task and split, and the metric where it is not named after the task (`mlqa · validation`)."""
    parts = [experiment.task, experiment.split] + ([experiment.metric] if experiment.metric != experiment.task
                                                  else [])
    return " · ".join(parts)


def experiment_languages(experiment: Experiment) -> list[str]:
    return list(dict.fromkeys(lang for system in experiment_systems(experiment) for lang in system.languages))


def experiment_caps(experiment: Experiment) -> list[str]:
    """What limited the runs behind the numbers, one line per cap and the systems it applies to:
    capped evaluation examples, capped training steps or examples, languages skipped for lack of data."""
    found: dict[str, list[str]] = {}
    for system in experiment_systems(experiment):
        for run in system.runs:
            for cap in run_caps(run.results):
                labels = found.setdefault(cap, [])
                if system.label not in labels:
                    labels.append(system.label)
    everyone = [system.label for system in experiment_systems(experiment)]
    return [f"{'all systems' if labels == everyone else ', '.join(labels)}: {cap}" for cap, labels in found.items()]


def run_caps(results: dict) -> list[str]:
    config = results.get("config") or {}
    caps = []
    if results.get("max_eval_examples") is not None:
        caps.append(f"scored on at most {results['max_eval_examples']} examples per language or pair "
                    "(--max-eval-examples)")
    if config.get("max_steps") is not None:
        caps.append(f"training stopped at {config['max_steps']} steps (max_steps), not the card's "
                    f"{number(config.get('epochs'), 'g')} epochs")
    if config.get("max_train_examples") is not None:
        caps.append(f"trained on at most {config['max_train_examples']} examples (max_train_examples)")
    if config.get("max_eval_examples") is not None:
        caps.append(f"dev set for model selection capped at {config['max_eval_examples']} examples "
                    "(max_eval_examples)")
    missing = results.get("missing_languages") or []
    if missing:
        caps.append(f"no data for {', '.join(missing)}: skipped (--skip-missing)")
    return caps


def format_stat(stat: Stat | None, missing: str = "–", plus_minus: str = " ± ", wrap: str = "{}") -> str:
    """`mean ± sd` (the mean alone for one seed); `wrap` places it (LaTeX: "${}$")."""
    if stat is None:
        return missing
    return wrap.format(f"{stat.mean:.1f}" if stat.std is None else f"{stat.mean:.1f}{plus_minus}{stat.std:.1f}")


def signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1f}"


def format_delta(cell: Delta | None, missing: str = "–", mark: str = "*", wrap: str = "{}") -> str:
    """The signed delta, with `mark` when it is significant."""
    return missing if cell is None else wrap.format(f"{cell.delta:+.1f}" + (mark if cell.significant else ""))


def number(value: float | None, spec: str = ".1f") -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def experiment_folder(experiment: Experiment) -> str:
    return slug(f"{experiment.task}-{experiment.split}-{experiment.metric}")


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
