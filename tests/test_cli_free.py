"""What the commands do is callable from Python (issue 38: the CLI only parses and prints): each library function
gives the lines its command prints, and `experiment run`'s outcome rules hold without the command line."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.experiments import launch
from xsyn.experiments.cells import DONE, FAILED, RUNNING, CellState
from xsyn.experiments.experiment_file import Overrides, load_experiment
from xsyn.utils.errors import XsynError


@pytest.fixture
def synth(tmp_path):
    return load_experiment("synth", Overrides(runs_dir=str(tmp_path / "runs")))


def test_status_lines_are_the_lines_experiment_status_prints(synth, tmp_path):
    from xsyn.experiments.status import status_lines

    lines = list(status_lines(synth))  # the command's default: this machine's device
    printed = CliRunner().invoke(main, ["experiment", "status", "synth", "--output-dir", str(tmp_path / "runs")])
    assert printed.exit_code == 0, printed.output
    assert printed.output == "".join(f"{line}\n" for line in lines)
    # synth has fewer cells than SHORT_LIST: every cell is listed under the header, each still to do
    cells = [line.split() for line in lines[1:1 + len(synth.cells)]]
    assert lines[0].split() == ["cell", "state", "detail"] and [c[0] for c in cells] == [c.name for c in synth.cells]
    assert {" ".join(c[1:3]) for c in cells} == {"to do"}
    assert f"\n{len(synth.cells)} cells in {synth.runs_dir}: 0 done, 0 running, 0 failed, {len(synth.cells)} to do" \
        in lines


def _states(synth, *states):
    return [CellState(cell, state, "RuntimeError: out of memory" if state == FAILED else "")
            for cell, state in zip(synth.cells, states)]


@pytest.mark.parametrize("outcome, raised, said", [
    ((DONE, DONE), None, "finished; `xsyn experiment report synth` writes the report"),
    ((DONE, RUNNING), None, "1 of 2 cells are being run by other processes (each named above with its owner)"),
    ((DONE, FAILED), "1 of 2 cells failed (the others ran); `xsyn experiment status synth` shows why", None),
    ((FAILED, RUNNING), "1 of 2 cells failed (the others ran)", None),  # a held cell is not a failed one
])
def test_run_here_says_how_the_cells_ended_and_fails_only_for_a_failed_cell(synth, monkeypatch, outcome, raised,
                                                                            said):
    monkeypatch.setattr(launch, "visible_gpus", lambda: ["0", "1", "2"])
    seen = {}

    def fake_run_local(experiment, devices, cells, echo, progress, **options):
        seen["devices"] = devices
        return _states(synth, *outcome)

    monkeypatch.setattr(launch, "run_local", fake_run_local)
    echoed: list[str] = []
    if raised:
        with pytest.raises(launch.CellsFailed, match=re.escape(raised)) as failed:
            launch.run_here(synth, synth.cells[:2], 2, False, False, "synth", echo=echoed.append)
        assert isinstance(failed.value, XsynError)  # the command shows its message, no traceback
    else:
        launch.run_here(synth, synth.cells[:2], 2, False, False, "synth", echo=echoed.append)
        assert echoed[-1].startswith(said)
    assert seen["devices"] == ["0", "1"]  # --gpus 2 of the three visible


def test_run_on_slurm_turns_a_failed_submission_into_one_message(synth, monkeypatch):
    def refused(*args, **kwargs):
        raise RuntimeError("sbatch: command not found")

    monkeypatch.setattr(launch, "submit", refused)
    with pytest.raises(launch.CellsFailed, match="^submitting the cells to SLURM failed: sbatch: command not found"):
        launch.run_on_slurm(synth, synth.cells, launch.ClusterOptions(), "synth", wait=False, echo=print)


def test_model_json_rounds_the_two_ratios_and_keeps_every_other_figure():
    from xsyn.benchmarks.text import model_json

    rows = {"none": {"step_time_ratio": 1.0, "peak_memory_ratio": 1.0, "step_seconds": 0.123456789},
            "gat": {"step_time_ratio": 1.234567, "peak_memory_ratio": 0.99995, "step_seconds": 0.15}}
    assert model_json({"rows": rows}) == {
        "none": {"step_time_ratio": 1.0, "peak_memory_ratio": 1.0, "step_seconds": 0.123456789},
        "gat": {"step_time_ratio": 1.2346, "peak_memory_ratio": 1.0, "step_seconds": 0.15}}
    assert model_json({"ops": {"none": {"ops_per_step": 7}}, "rows": rows}) == {"none": {"ops_per_step": 7}}
    assert model_json({"encoders": {"mbert": {"rows": rows}}}) == {"mbert": {"rows": rows}}


def test_card_text_adds_splits_labels_and_hyperparameters_only_for_one_card():
    from xsyn.data.cards import card_text, load_card

    card = load_card("pawsx")
    short, detailed = card_text(card).splitlines(), card_text(card, detailed=True).splitlines()
    assert short[0] == f"pawsx: {card.title} ({card.kind}, metric {card.metric})" and len(short) == 5
    assert detailed[:5] == short and detailed[5] == f"  splits: {', '.join(card.splits)}"
    assert f"  labels: {' '.join(card.labels)}" in detailed
    assert len(detailed) == 6 + 1 + len(card.hyperparameters)  # splits, labels (no tags), a line per section


def test_settings_text_aligns_its_columns_and_shows_the_card_only_where_it_gives_a_value():
    from xsyn.run.settings_table import settings_text

    table = {"seed": {"type": "int", "default": 42, "card": None, "help": "the seed"},
             "learning_rate": {"type": "float", "default": None, "card": 2e-05, "help": "peak rate"},
             "parser": {"type": "str", "default": "stanza", "card": "stanza", "help": "the parser"}}
    assert settings_text(table, "gat", {"learning_rate"}, with_card=True).splitlines() == [
        "key            type   default  card (gat)  meaning",
        "seed           int    42                   the seed",
        "learning_rate  float  -        2e-05       peak rate",
        "parser         str    stanza               the parser",
    ]
    assert settings_text(table, "", set(), with_card=False).splitlines()[:2] == [
        "key            type   default  meaning", "seed           int    42       the seed"]
