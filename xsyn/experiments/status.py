"""`xsyn experiment status`: the cells by state per task, what they miss, the paper's averages beside ours so far,
and the progress against the plan, as the lines the command prints."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from xsyn.experiments.bench_figures import (
    EXTRAPOLATED,
    MEASURED,
    Figure,
    combine,
    default_bench_paths,
    figure_sum,
    read_benchmarks,
)
from xsyn.experiments.cells import DONE, FAILED, RUNNING, STATES, TaskTally, cell_state, tally_by_task
from xsyn.experiments.experiment_file import Cell, Experiment
from xsyn.experiments.plan import Plan, human_hours, local_device, make_plan
from xsyn.experiments.pretrain import pretrain_states
from xsyn.experiments.report import PaperStatus, paper_status
from xsyn.training.folder import RunFolder
from xsyn.utils.io import saved_json_object

SHORT_LIST = 30  # status lists every cell of an experiment this small; of a larger one, those running or failed


def status_lines(experiment: Experiment, device: str | None = None, every_cell: bool = False) -> Iterator[str]:
    """The cells (every one, or of more than `SHORT_LIST` the running and failed ones) and the pretraining units
    with their state and detail; the tally per task, what is missing, the paper's averages; the counts, and the
    progress against the plan for `device` (default: this machine's)."""
    states = [cell_state(experiment, cell) for cell in experiment.cells]
    listed = states if every_cell or len(states) <= SHORT_LIST else [s for s in states if s.state in (RUNNING, FAILED)]
    width = max(len(s.cell.name) for s in states)
    if listed:
        yield f"{'cell':<{width}}  {'state':<7}  detail"
    for state in listed:
        yield f"{state.cell.name:<{width}}  {state.state:<7}  {state.detail}".rstrip()
    for unit in pretrain_states(experiment):
        yield f"{'pretrain/' + unit.model:<{width}}  {unit.state:<7}  {unit.detail} ({unit.folder})".rstrip()
    tallies = tally_by_task(states)
    yield from _tally_lines(tallies, STATES)
    yield from _needs_lines(tallies)
    yield from _paper_lines(paper_status(experiment, {s.cell.name: s for s in states}))
    counts = {name: sum(s.state == name for s in states) for name in STATES}
    yield (f"\n{len(states)} cells in {experiment.runs_dir}: " + ", ".join(f"{n} {name}" for name, n in counts.items())
           + (f" ({len(states) - len(listed)} not listed; --cells lists every one)" if len(listed) < len(states)
              else ""))
    chosen = device or local_device()
    plan = make_plan(experiment, chosen, read_benchmarks(default_bench_paths()))
    where = "" if device else " (this machine's device; --device plans for another)"
    yield progress_line(plan, progress(experiment, plan, [s.cell for s in states if s.state == DONE]), where)


def _tally_lines(tallies: list[TaskTally], states: tuple[str, ...]) -> Iterator[str]:
    """A row per task: its cells, and how many are in each state."""
    width = max(len("task"), *(len(t.task) for t in tallies))
    yield f"\n{'task':<{width}}  {'cells':>5}  " + "  ".join(f"{name:>7}" for name in states)
    for tally in tallies:
        yield (f"{tally.task:<{width}}  {sum(tally.states.values()):>5}  "
               + "  ".join(f"{tally.states[name]:>7}" for name in states))


def _needs_lines(tallies: list[TaskTally]) -> Iterator[str]:
    """Each missing input once, with the tasks (and how many of their cells) that need it."""
    needed: dict[str, list[str]] = {}
    for tally in tallies:
        for message, n in tally.needs.items():
            needed.setdefault(message, []).append(f"{tally.task}: {n} cells")
    for message, where in needed.items():
        yield f"missing ({'; '.join(where)}): needs {message}"


def _paper_lines(rows: list[PaperStatus]) -> Iterator[str]:
    """Per task, model and published score: each system's published average, ours so far in brackets."""
    tables: dict[tuple, list[str]] = {}
    for row in rows:
        ours = (f"{row.ours:.1f}, {row.seeds}/{row.seeds_planned} seeds, {row.languages}/{row.paper_languages} langs"
                if row.ours is not None else "–")
        tables.setdefault((row.task, row.model, row.score, row.table), []).append(
            f"{row.paper_system} ({row.label}) {row.paper:.1f} [{ours}]")
    if tables:
        yield "\npublished averages, ours over the finished cells in [brackets]:"
    for (task, model, score, table), systems in tables.items():
        yield f"  {task} {model} {score} ({table}): " + ", ".join(systems)


# --------------------------------------------------------------------------- progress against the plan


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    spent_hours: float  # training hours of the finished cells (their train_results.json)
    eta: Figure  # training hours left, one cell at a time


def progress(experiment: Experiment, plan: Plan, done: Sequence[Cell]) -> Progress:
    """How far the cells are, and the hours left: the plan's hours of the cells not done, scaled by how the
    finished cells' real training time compares with their planned time (their mean where the plan has none)."""
    spent = {}
    for cell in done:
        seconds = (saved_json_object(RunFolder(experiment.cell_dir(cell)).train_results) or {}).get("train_seconds")
        if isinstance(seconds, (int, float)):
            spent[cell.name] = seconds / 3600
    names = {cell.name for cell in done}
    left = [figure for name, figure in plan.cell_hours.items() if name not in names]
    planned = [plan.cell_hours[name] for name in spent if name in plan.cell_hours]
    eta = combine(figure_sum(*left), *left) if left else Figure(0.0, MEASURED)
    eta = Figure(eta.value, eta.basis, "the plan's hours of the cells left" if left else "")
    if spent and planned and None not in [f.value for f in planned] and sum(f.value for f in planned) > 0:
        ratio = sum(spent.values()) / sum(f.value for f in planned)
        eta = eta.times(ratio, EXTRAPOLATED, f"the plan x {ratio:.2f}: the pace of the {len(spent)} cells done")
    elif spent:
        mean = sum(spent.values()) / len(spent)
        eta = Figure(mean * len(left), EXTRAPOLATED, f"the mean of the {len(spent)} cells done")
    return Progress(len(names), len(plan.cell_hours), sum(spent.values()), eta)


def progress_line(plan: Plan, state: Progress, where: str = "") -> str:
    """One line for `experiment status`: the plan's total beside the progress and the time left, each estimate
    with what it rests on in words."""
    def said(figure: Figure) -> str:
        return human_hours(figure.value) + ("" if figure.basis == MEASURED and figure.value is not None
                                            else f" ({figure.basis})")

    return (f"plan on {plan.device}{where}: {said(plan.hours)} of training for {state.total} cells; {state.done} done "
            f"({human_hours(state.spent_hours)} spent); left: {said(state.eta)}"
            + (f", {state.eta.why}" if state.eta.why else "") + ", one cell at a time")
