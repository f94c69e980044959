"""An evaluation's summary as the lines `xsyn evaluate` prints: the scores, and what was not scored and why."""

from __future__ import annotations

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
            worst = max(counts, key=counts.__getitem__)
            # of what the source held: under --max-eval-examples n_examples is the cap, the drops the source's
            before = (summary.get("n_read") or {}).get(worst, summary["n_examples"][worst] + summary["dropped"][worst])
            lines.append(f"not scored: {sum(counts.values())} {meaning}, in {len(counts)} of "
                         f"{len(summary['n_examples'])} languages and pairs; most in {worst}: {counts[worst]} of "
                         f"{before}")
    return lines + (["(per language and pair: dropped_by_reason in results.json)"] if lines else [])


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


def after_scores_lines(summary: dict[str, Any]) -> list[str]:
    """What `xsyn evaluate` prints after the scores: the language pairs scored, what was not scored and why
    (`dropped_lines`), and the languages skipped for want of data."""
    lines = [f"language pairs: {sum(map(len, summary['pairs'].values()))} (the matrix: pairs.csv in the output "
             "folder)"] if summary.get("pairs") else []
    lines += dropped_lines(summary)
    if truncated := summary.get("truncated"):
        worst = max(truncated, key=truncated.__getitem__)
        lines.append(f"cut to max_length ({summary['config']['max_length']} word pieces): {sum(truncated.values())} "
                     f"inputs, in {len(truncated)} of {len(summary['n_examples'])} languages and pairs; most in "
                     f"{worst}: {truncated[worst]} of {summary['n_examples'][worst]} (truncated in results.json)")
    if summary["missing_languages"]:
        lines.append(f"skipped (no data): {', '.join(summary['missing_languages'])}")
    return lines
