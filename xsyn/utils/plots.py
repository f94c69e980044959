"""Figures of the report: language-pair heatmaps, per-language bar charts, the probe chart, and the
analyses' charts (gains grouped by family, gains against a per-language quantity).

Built on matplotlib's object API with the Agg canvas (no pyplot state, no display needed); each
function returns PNG bytes so the caller writes them atomically.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Mapping, Sequence

_CELL_INCHES = 0.62
_LABEL_SIZE = 8  # tick labels and the group names under them: one size


def _title(figure, title: str, width_inches: float, fontsize: float = 9) -> None:
    """The figure's title, wrapped to its width and centred on the figure (an axes title runs past both
    sides of a narrow figure and is clipped)."""
    per_line = max(20, int(width_inches * 72 / (0.55 * fontsize)))  # characters of a line at this size
    figure.suptitle(textwrap.fill(title, per_line), fontsize=fontsize)


def heatmap_png(matrix: Sequence[Sequence[float]], rows: Sequence[str], cols: Sequence[str], *, title: str,
                value_label: str, diverging: bool = False, marks: Sequence[Sequence[str]] | None = None,
                row_label: str = "first-segment language",
                col_label: str = "second-segment language", limits: tuple[float, float] | None = None,
                chance: float | None = None, counts: Sequence[Sequence[int | None]] | None = None) -> bytes:
    """A labelled, annotated heatmap; `diverging` centres a red-blue map at 0 (for deltas). `limits`
    fixes the colour scale (the figures of one report share it); `chance` is marked on the colour bar;
    `counts`, the examples behind each cell, are written under its value."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    values = np.asarray(matrix, dtype=float)
    finite = values[np.isfinite(values)]
    if limits is not None:
        low, high = limits
        if chance is not None:  # room below chance, so its mark on the colour bar is not on the edge
            low = min(low, chance - 0.03 * (high - chance))
    elif diverging:
        high = float(np.abs(finite).max()) if finite.size and np.abs(finite).max() > 0 else 1.0
        low = -high
    else:
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    norm = Normalize(low, high if high > low else low + 1.0)
    cmap = colormaps["RdBu" if diverging else "viridis"]  # diverging: red = loss, blue = gain
    width = max(4.5, _CELL_INCHES * len(cols) + 2.5)
    height = max(3.5, _CELL_INCHES * len(rows) + 1.8)
    figure = Figure(figsize=(width, height), dpi=110, layout="constrained")
    axes = figure.add_subplot()
    image = axes.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm, aspect="auto")
    bar = figure.colorbar(image, ax=axes, label=value_label + (f"  (- - chance: {chance:.1f})" if chance is not None
                                                                  else ""))
    if chance is not None:
        bar.ax.axhline(chance, color="black", linewidth=2, linestyle="--")
    axes.set_xticks(range(len(cols)), labels=list(cols))
    axes.set_yticks(range(len(rows)), labels=list(rows))
    axes.set_xlabel(col_label)
    axes.set_ylabel(row_label)
    _title(figure, title, width)
    for i in range(len(rows)):
        for j in range(len(cols)):
            value = values[i, j]
            if not math.isfinite(value):
                continue
            red, green, blue, _ = cmap(norm(value))
            dark = 0.299 * red + 0.587 * green + 0.114 * blue < 0.5
            text = (f"{value:+.1f}" if diverging else f"{value:.1f}") + (marks[i][j] if marks else "")
            if counts is not None and counts[i][j] is not None:
                text += f"\nn={counts[i][j]}"
            axes.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
    return _png(figure)


def probe_png(table: Mapping[str, Mapping[str, Mapping[str, float]]], metrics: Sequence[str]) -> bytes:
    """Grouped bars: one panel per probe metric, languages on the x axis, one bar per run."""
    from matplotlib.figure import Figure

    runs = list(table)
    languages = list(dict.fromkeys(lang for per_language in table.values() for lang in per_language))
    width = max(6.0, 0.5 * len(languages) * len(metrics))
    figure = Figure(figsize=(width, 3.6), dpi=110, layout="constrained")
    panels = figure.subplots(1, len(metrics), squeeze=False)[0]
    for panel, metric in zip(panels, metrics, strict=True):
        _grouped_bars(panel, {run: {lang: values.get(metric, math.nan) for lang, values in table[run].items()}
                              for run in runs}, languages)
        panel.set_title(metric, fontsize=10)
    panels[0].set_ylabel("probe score")
    if len(runs) > 1:
        panels[-1].legend(fontsize=7)
    return _png(figure)


def language_bars_png(series: Mapping[str, Mapping[str, float]], *, title: str, value_label: str,
                      limits: tuple[float, float] | None = None,
                      errors: Mapping[str, Mapping[str, float]] | None = None, marked: Sequence[str] = (),
                      chance: float | None = None) -> bytes:
    """Grouped bars in one panel: languages on the x axis, one bar per series (a missing value is no bar);
    `errors` draws error bars (e.g. sd over seeds), `marked` languages (the source) are labelled and
    shaded, `chance` is a dashed line; `limits` fixes the value axis (charts compared side by side)."""
    from matplotlib.figure import Figure

    languages = list(dict.fromkeys(lang for values in series.values() for lang in values))
    width = max(5.0, 0.45 * len(languages) * max(1, len(series)) + 1.5)
    figure = Figure(figsize=(width, 3.6), dpi=110, layout="constrained")
    axes = figure.add_subplot()
    _grouped_bars(axes, series, languages, errors)
    for position, lang in enumerate(languages):
        if lang in marked:
            axes.axvspan(position - 0.45, position + 0.45, color="0.9", zorder=0)
    axes.set_xticks(range(len(languages)), labels=[f"{lang}\n(source)" if lang in marked else lang
                                                   for lang in languages])
    axes.set_xlim(-0.5 - 0.5 / len(languages), len(languages) - 0.5 + 0.5 / len(languages))
    if chance is not None:
        axes.axhline(chance, color="black", linewidth=1, linestyle="--", label=f"chance ({chance:.1f})")
    if limits is not None:
        axes.set_ylim(*limits)
    axes.set_ylabel(value_label)
    _title(figure, title, width)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(figure)


def _grouped_bars(axes, series: Mapping[str, Mapping[str, float]], languages: Sequence[str],
                  errors: Mapping[str, Mapping[str, float]] | None = None) -> None:
    """One bar per series beside each other at every language (a missing value is no bar; an error that is
    missing or None, e.g. an sd of one seed, is no error bar: not a cap at zero)."""
    import numpy as np

    bar = 0.8 / max(1, len(series))
    positions = np.arange(len(languages))
    for k, (name, values) in enumerate(series.items()):
        heights = [values.get(lang, math.nan) for lang in languages]
        spread = _spread([(errors or {}).get(name, {}).get(lang) for lang in languages])
        axes.bar(positions + (k - (len(series) - 1) / 2) * bar, heights, bar, label=name, yerr=spread,
                 capsize=3 if spread else 0, zorder=2)
    axes.set_xticks(positions, labels=list(languages))
    axes.set_xlabel("language")


def _spread(errors: Sequence[float | None]) -> list[float] | None:
    """Error bar lengths for matplotlib (nan: none there), or None where no bar has one."""
    if all(error is None for error in errors):
        return None
    return [math.nan if error is None else error for error in errors]


def grouped_gains_png(groups: Mapping[str, Sequence[str]], gains: Mapping[str, float],
                      errors: Mapping[str, float | None], *, title: str, value_label: str) -> bytes:
    """One bar per language, its error bar where known, the languages in their groups (families) from left
    to right, each group named under its languages and set off by a line; a line at 0."""
    from matplotlib.figure import Figure

    order = [lang for members in groups.values() for lang in members]
    width = max(5.0, 0.5 * len(order) + 2.0)
    figure = Figure(figsize=(width, 3.8), dpi=110, layout="constrained")
    axes = figure.add_subplot()
    spread = _spread([errors.get(lang) for lang in order])
    colours = [f"C{k % 10}" for k, members in enumerate(groups.values()) for _ in members]
    axes.bar(range(len(order)), [gains[lang] for lang in order], 0.7, yerr=spread, capsize=3 if spread else 0,
             color=colours, zorder=2)
    axes.axhline(0.0, color="black", linewidth=0.8)
    axes.set_xticks(range(len(order)), labels=order, fontsize=_LABEL_SIZE)
    rotation = 20 if any(len(group) > 8 for group in groups) else 0  # one slant for all, as one row of names
    start = 0
    for k, (group, members) in enumerate(groups.items()):
        if k:
            axes.axvline(start - 0.5, color="0.6", linewidth=0.8, linestyle=":")
        axes.annotate(group, ((start + start + len(members) - 1) / 2, 0), xycoords=("data", "axes fraction"),
                      xytext=(0, -18), textcoords="offset points", ha="right" if rotation else "center",
                      va="top", fontsize=_LABEL_SIZE, rotation=rotation, rotation_mode="anchor")
        start += len(members)
    axes.set_ylabel(value_label)
    _title(figure, title, width)
    return _png(figure)


def labelled_scatter_png(points: Sequence[tuple[str, float, float, float | None]], *, title: str, x_label: str,
                         y_label: str) -> bytes:
    """(label, x, y, y error) points, each labelled, with error bars where known and a line at y = 0."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 4.4), dpi=110, layout="constrained")
    axes = figure.add_subplot()
    for label, x, y, error in points:
        axes.errorbar(x, y, yerr=error, fmt="o", color="C0", capsize=3, markersize=4, zorder=2)
        axes.annotate(label, (x, y), xytext=(4, 3), textcoords="offset points", fontsize=7)
    axes.axhline(0.0, color="black", linewidth=0.8)
    axes.set_xlabel(x_label)
    axes.set_ylabel(y_label)
    axes.set_title(title, fontsize=8)
    return _png(figure)


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def training_curves_png(records: Sequence[Mapping], *, title: str) -> bytes:
    """A run's curves against the optimiser step, from its step log (`train_log.jsonl` records): the task
    loss and each auxiliary loss, the learning rate, and the dev score where the run evaluated."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    panels = curve_panels(records)
    figure = Figure(figsize=(7.5, 2.0 * len(panels)), dpi=110, layout="constrained")
    axes_list = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for axes, (label, points, evaluated) in zip(axes_list, panels):
        if points:  # each point marked where there are few (a short run's one or two are a curve too)
            few = evaluated or len(points) <= CURVE_MARKED_POINTS
            axes.plot(*zip(*points), marker="o" if few else None, markersize=4 if len(points) <= 2 else 3)
        axes.set_ylabel(label)
        axes.grid(alpha=0.3)
    steps = [step for _, points, _ in panels for step, _ in points]
    if steps:  # whole steps on the axis, and a margin round a run of one step (its axis is not a point wide)
        axes_list[-1].xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        low, high = min(steps), max(steps)
        margin = max(0.5, (high - low) * 0.05)
        axes_list[-1].set_xlim(low - margin, high + margin)
    axes_list[0].set_title(title)
    axes_list[-1].set_xlabel("optimiser step")
    return _png(figure)


CURVE_MARKED_POINTS = 50  # up to this many logged steps, each is marked on its curve


def curve_panels(records: Sequence[Mapping]) -> list[tuple[str, list[tuple[int, float]], bool]]:
    """(label, (step, value) points, at evaluations) per panel: each loss its own, for their scales differ
    (a task loss near 0.7 beside a distance loss near 10 looked flat), then the learning rate and dev score."""
    steps = [r for r in records if "lr" in r]
    evaluations = [r for r in records if "dev_primary" in r]
    losses = [k for k in dict.fromkeys(k for r in steps for k in r)
              if k.endswith("loss") or k in ("distance", "depth", "seprem")]
    if "task_loss" in losses or len(losses) > 1:  # the sum is drawn only where it is the only loss
        losses = [k for k in losses if k != "loss"] or losses
    panels = [(key, key, steps) for key in losses] + [("learning rate", "lr", steps)]
    panels += [("dev score", "dev_primary", evaluations)] if evaluations else []
    return [(label, [(r["step"], r[key]) for r in source if isinstance(r.get(key), (int, float))
                     and math.isfinite(r[key])], source is evaluations) for label, key, source in panels]
