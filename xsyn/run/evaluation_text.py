"""An evaluation's summary as the lines `xsyn evaluate` prints: the scores, and what was not scored and why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DROP_REASONS = {"no_counterpart": "ids without a counterpart in the other language",
                "labels_disagree": "pairs whose languages disagree on the label",
                "skipped_rows": "rows skipped as bad (--skip-bad-rows)"}


def dropped_lines(summary: dict[str, Any]) -> list[str]:
    """What an evaluation did not score: a line per reason, with its total, the languages or pairs it hit
    and the one it hit most (of that key's examples before dropping)."""
    by_key = summary.get("dropped_by_reason") or {}
    lines = []
    for reason, meaning in DROP_REASONS.items():
        counts = {key: reasons[reason] for key, reasons in by_key.items() if reasons.get(reason)}
        if counts:
            # of what the source held: under --max-eval-examples n_examples is the cap, the drops the source's
            read = {key: (summary.get("n_read") or {}).get(key, summary["n_examples"][key] + summary["dropped"][key])
                    for key in counts}
            lines.append(f"not scored: {sum(counts.values())} {meaning}, {_where(counts, read, summary)}")
    return lines + (["(per language and pair: dropped_by_reason in results.json)"] if lines else [])


def _where(counts: dict[str, int], totals: dict[str, int], summary: dict[str, Any]) -> str:
    """`in K of N languages and pairs; most in W: c of t`, for counts per language or pair of what they held."""
    worst = max(counts, key=counts.__getitem__)
    return (f"in {len(counts)} of {len(summary['n_examples'])} languages and pairs; most in {worst}: "
            f"{counts[worst]} of {totals[worst]}")


def split_lines(summary: dict[str, Any], split_chosen: bool) -> list[str]:
    """Why a split other than test was scored, where the user did not choose it."""
    if split_chosen or summary["split"] == "test":
        return []
    return [f"note: scoring the {summary['split']} split: {summary['task']}'s test split is missing or has no labels "
            "(pass --split to choose)"]


def scores_text(summary: dict[str, Any]) -> str:
    """An evaluation's scores as text: each language's with the metric's name and its bootstrap sd, then the
    average."""
    spread = summary.get("bootstrap_sd") or {}
    lines = [f"{summary['task']} {summary['split']}: {summary['primary']} (± sd over bootstrap resamples of the "
             "examples)"]
    for lang, value in summary["per_language"].items():
        sd = spread.get(lang)
        lines.append(f"{lang}\t{summary['primary']} {value:.2f}" + (f" ± {sd:.2f}" if sd is not None else ""))
    if summary["average"] is not None:
        lines.append(f"average\t{summary['primary']} {summary['average']:.2f}")
    return "\n".join(lines)


def nothing_predicted_lines(summary: dict[str, Any]) -> list[str]:
    """A warning per thing the model predicted everywhere in some languages or pairs (the same label for every
    example, no entity, ...), naming them all on its line: a generalized evaluation's 49 pairs are one line,
    not 49 alike."""
    keys_by_what: dict[str, list[str]] = {}
    for key, what in (summary.get("predicted_nothing") or {}).items():
        keys_by_what.setdefault(what, []).append(key)
    return [f"warning: {', '.join(keys)}: the model predicted {what}; scores that count correct silence or the "
            "majority label can be high for that reason alone" for what, keys in keys_by_what.items()]


def after_scores_lines(summary: dict[str, Any], folder: Path) -> list[str]:
    """What `xsyn evaluate` prints after the scores: the language pairs scored, what was not scored and why
    (`dropped_lines`), the languages skipped for want of data, and the folder the results are in."""
    folder = Path(folder).resolve()
    lines = [f"language pairs: {sum(map(len, summary['pairs'].values()))} (the matrix: {folder / 'pairs.csv'})"
             ] if summary.get("pairs") else []
    lines += dropped_lines(summary)
    if truncated := summary.get("truncated"):
        lines.append(f"cut to max_length ({summary['config']['max_length']} word pieces): {sum(truncated.values())} "
                     f"inputs, {_where(truncated, summary['n_examples'], summary)} (truncated in results.json)")
    if summary["missing_languages"]:
        lines.append(f"skipped (no data): {', '.join(summary['missing_languages'])}")
    return [*lines, f"results: {folder} (results.json; per_example/ for `xsyn report`)"]
