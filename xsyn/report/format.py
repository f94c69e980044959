"""The formatting the report's renderers share (Markdown and CSV in `render`, LaTeX in `latex`, the findings
in `findings_render`, the experiment report): which systems and languages an experiment shows, its title and
caps, how a mean, a delta and its significance marks, a number and a table are written."""

from __future__ import annotations

import csv
import hashlib
import io
import math
import re

from xsyn.report.aggregate import Comparison, Delta, Experiment, Stat, System


def experiment_systems(experiment: Experiment) -> list[System]:
    return [*experiment.systems, *([experiment.baseline] if experiment.baseline else [])]


def section_title(experiment: Experiment, separator: str = " · ") -> str:
    """Task and split, and the metric where it is not named after the task (`mlqa · validation`)."""
    parts = [experiment.task, experiment.split] + ([experiment.metric] if experiment.metric != experiment.task
                                                  else [])
    return separator.join(parts)


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
        caps.append(f"scored on at most {results['max_eval_examples']} examples per language or pair, "
                    "label-balanced where they have class labels (--max-eval-examples)")
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


_MARKDOWN = re.compile(r"([\\\[\]<>|&])")


def md(text: object) -> str:
    """Text read from a results file (a name, a seed, a language, a note, a path) as literal markdown: on one line,
    with the characters that would make it a link, an image, an autolink, raw HTML, an entity or a table cell's end
    escaped (a backtick is left: a code span shows its text as it is, and the notes name commands in them). Every
    such text passes here before it becomes markdown (and so the HTML page): a results field can never put a live
    link or a script in a report."""
    return _MARKDOWN.sub(r"\\\1", " ".join(str(text).split()))


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A table whose every cell is literal text (`md`): names and languages from results files, and numbers."""
    lines = ["| " + " | ".join(map(md, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(md, row)) + " |" for row in rows]
    return "\n".join(lines)


def format_stat(stat: Stat | None, missing: str = "–", plus_minus: str = " ± ", wrap: str = "{}") -> str:
    """`mean ± sd` (the mean alone for one seed); `wrap` places it (LaTeX: "${}$")."""
    if stat is None:
        return missing
    return wrap.format(f"{stat.mean:.1f}" if stat.std is None else f"{stat.mean:.1f}{plus_minus}{stat.std:.1f}")


def signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1f}"


BOOTSTRAP_MARK = "*"
SEED_TEST_MARK = "‡"


def format_delta(cell: Delta | None, missing: str = "–", marks: tuple[str, str] = (BOOTSTRAP_MARK, SEED_TEST_MARK),
                 wrap: str = "{}", superscript: str = "{}") -> str:
    """The signed delta with its marks: the bootstrap's (`marks[0]`) and the t-test over seeds' (`marks[1]`)
    where each is significant, together in one `superscript` (LaTeX: "^{{{}}}")."""
    if cell is None:
        return missing
    return wrap.format(f"{cell.delta:+.1f}" + marks_text(marks, (cell.significant, cell.seed_significant), superscript))


def format_average(comparison: Comparison, missing: str = "–", mark: str = SEED_TEST_MARK, wrap: str = "{}",
                   superscript: str = "{}") -> str:
    """The delta of the averages, marked where the t-test over the per-seed averages is significant."""
    if comparison.average is None:
        return missing
    return wrap.format(f"{comparison.average:+.1f}"
                       + marks_text((mark,), (comparison.average_seed_significant,), superscript))


def marks_text(marks: tuple[str, ...], significant: tuple[bool, ...], superscript: str) -> str:
    shown = "".join(mark for mark, on in zip(marks, significant, strict=True) if on)
    return superscript.format(shown) if shown else ""


def seed_test_line(comparison: Comparison) -> str:
    """Which t-test over seeds a comparison got (paired by seed or Welch's), with its seed counts."""
    tests = [cell.seed_test for cell in comparison.per_language.values() if cell.seed_test is not None]
    tests += [cell.seed_test for cols in comparison.pairs.values() for cell in cols.values() if cell.seed_test]
    done = [test for test in tests if test.kind is not None]
    if not done:
        reasons = sorted({test.reason for test in tests if test.reason})
        return f"{comparison.system}: no t-test over seeds ({'; '.join(reasons) or 'no shared language'})."
    kinds = ", ".join(sorted({f"{test.kind_name} ({seed_counts(test)})" for test in done}))
    return f"{comparison.system} against {comparison.baseline}: {kinds}."


def seed_counts(test) -> str:
    from xsyn.metrics.seeds import PAIRED

    if test.kind == PAIRED:
        return f"{test.n_system} seeds"
    return f"{test.n_system} vs {test.n_baseline} seeds"


def number(value: float | None, spec: str = ".1f") -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def experiment_folder(experiment: Experiment) -> str:
    return slug(f"{experiment.task}-{experiment.split}-{experiment.metric}")


def slug(text: str, most: int = 60) -> str:
    """A file name's part from any text (a task, a system's label, a seed read from results): letters, digits and
    `._-` only, at most `most` characters (a longer one is cut and ends in a hash of the whole, so two stay apart)."""
    found = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")
    if len(found) <= most:
        return found
    return f"{found[:most - 9]}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]}"


def csv_value(value: float | None) -> str:
    return "" if value is None or math.isnan(value) else f"{value:.4f}"


def csv_text(header: list[str], rows: list[list]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()
