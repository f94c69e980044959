"""The settings of an experiment's last `experiment run` (its command line's --max-steps, --model, --set,
--data-dir), recorded beside the cells, so that `status` and `report` find the same cells without the user typing
them again."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from xsyn.experiments.experiment_file import Experiment, Overrides, load_experiment
from xsyn.run.settings import parse_overrides
from xsyn.utils.io import atomic_write_json

log = logging.getLogger("xsyn")

LAST_RUN_FILE = "last_run.json"  # under runs_dir: the command line's settings of the last `experiment run`


def record_run(experiment: Experiment) -> None:
    """Remember the command line's settings (--max-steps, --model, --set, --data-dir) beside the cells, so that
    `status` and `report` find the same cells without the user typing them again."""
    atomic_write_json(experiment.runs_dir / LAST_RUN_FILE, json.loads(experiment.overrides.to_json()))


def load_as_last_run(source: str, runs_dir: str | None) -> tuple[Experiment, Overrides | None]:
    """The experiment as its last `experiment run` ran it (its recorded settings, if any), and those settings."""
    experiment = load_experiment(source, Overrides(runs_dir=runs_dir))
    try:
        recorded = json.loads((experiment.runs_dir / LAST_RUN_FILE).read_text(encoding="utf-8"))
        overrides = Overrides(**{**recorded, "runs_dir": str(experiment.runs_dir)})
    except FileNotFoundError:
        return experiment, None
    except (ValueError, TypeError) as err:  # damaged or from another version: the plain file is still right
        log.warning("%s: ignored (%s); showing the experiment as its file states it",
                    experiment.runs_dir / LAST_RUN_FILE, err)
        return experiment, None
    return load_experiment(source, overrides), overrides


def load_with_overrides(source: str, data_dir: str | None = None, model: str | None = None,
                        max_steps: int | None = None, runs_dir: str | None = None, sets: Sequence[str] = (),
                        as_last_run: bool = False) -> tuple[Experiment, str]:
    """The experiment with these overrides (`sets`: `KEY=VALUE` settings for every cell); a file or setting
    that cannot run is an `XsynError`. With `as_last_run` (status, report) and no cell-selecting override,
    the settings the last `experiment run` recorded select the cells, and the second value names them as
    options (empty where none were recorded)."""
    if not (as_last_run and data_dir is None and model is None and max_steps is None and not sets):
        overrides = Overrides(data_dir=data_dir, model=model, max_steps=max_steps, runs_dir=runs_dir,
                              settings=parse_overrides(sets))
        return load_experiment(source, overrides), ""
    experiment, recorded = load_as_last_run(source, runs_dir)
    if recorded is None:
        return experiment, ""
    shown = [f"--model {recorded.model}" if recorded.model else "",
             f"--max-steps {recorded.max_steps}" if recorded.max_steps else "",
             *(f"--set {key}={value}" for key, value in recorded.settings.items())]
    return experiment, " ".join(filter(None, shown))
