"""The report's figures as a reader sees them: a title that fits its figure, no error caps where there is no
error (one seed), and the family names under a gains chart alike in size and slant."""

from __future__ import annotations

import pytest

from xsyn.utils import plots

LONG = "pawsx · gat − none (baseline) · Δ accuracy (* bootstrap, ‡ t-test over seeds: p < 0.05)"


@pytest.fixture
def figures(monkeypatch):
    """The matplotlib figures the plots draw, kept (drawn) as well as written."""
    drawn, real = [], plots._png
    monkeypatch.setattr(plots, "_png", lambda figure: drawn.append(figure) or real(figure))
    return drawn


def test_a_heatmaps_long_title_is_wrapped_inside_the_figure(figures):
    plots.heatmap_png([[1.0, -2.0], [0.5, 3.0]], ["en", "de"], ["en", "de"], title=LONG, value_label="Δ",
                      diverging=True)
    (figure,) = figures
    title = figure._suptitle  # (an axes title ran past both sides of the 4.5-inch figure)
    assert title is not None and title.get_text().replace("\n", " ") == LONG
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    box, frame = title.get_window_extent(FigureCanvasAgg(figure).get_renderer()), figure.bbox
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1


def test_bars_of_one_seed_draw_no_error_caps_and_several_seeds_do(figures):
    plots.language_bars_png({"gat": {"en": 80.0, "de": 70.0}}, errors={"gat": {"en": None, "de": None}},
                            title="t", value_label="v")
    plots.language_bars_png({"gat": {"en": 80.0, "de": 70.0}}, errors={"gat": {"en": 1.5, "de": None}},
                            title="t", value_label="v")
    one, two = ([line for line in figure.axes[0].lines if line.get_marker() == "_"] for figure in figures)
    assert one == [] and len(two) == 2  # the two caps of en's bar, none at de's (an sd of one seed: none)


def test_family_names_are_alike_in_size_and_slant(figures):
    groups = {"Indo-European.Germanic": ["de", "nl"], "Japonic": ["ja"], "Sino-Tibetan": ["zh"]}
    plots.grouped_gains_png(groups, {"de": 1.0, "nl": 2.0, "ja": 3.0, "zh": -1.0}, {}, title="family",
                            value_label="gain")
    (figure,) = figures
    names = [text for text in figure.axes[0].texts if text.get_text() in groups]
    ticks = figure.axes[0].get_xticklabels()
    assert len(names) == 3 and len({(t.get_fontsize(), t.get_rotation()) for t in names}) == 1
    assert names[0].get_fontsize() == ticks[0].get_fontsize()
    assert [line for line in figure.axes[0].lines if line.get_marker() == "_"] == []  # no sd known: no caps


@pytest.mark.parametrize("logged", [[1], [1, 2], [20, 40, 60]])
def test_a_short_runs_curves_mark_each_point_on_whole_steps_around_them(figures, logged):
    """One or two logged steps (a quick look) are a readable curve: marked points, integer step ticks (not 1.2,
    1.4), an axis wider than the points; the dev score too."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    records = [{"step": step, "loss": 0.7 - step / 1000, "lr": 1e-4} for step in logged]
    records.append({"step": logged[-1], "dev_primary": 50.0})
    plots.training_curves_png(records, title="a short run")
    (figure,) = figures
    FigureCanvasAgg(figure).draw()
    for axes in figure.axes:
        (line,) = axes.lines
        assert line.get_marker() == "o" and len(line.get_xdata()) >= 1
        low, high = axes.get_xlim()
        assert low < logged[0] and logged[-1] < high
        ticks = [tick for tick in axes.get_xticks() if low <= tick <= high]
        assert ticks and all(float(tick).is_integer() for tick in ticks), ticks
