"""The pre-training of a syntax module an experiment runs before its fine-tunes (`[pretrain]`): the module of the
variant that declares one (`SyntaxVariant.pretraining`; built in: gat, as Ahmad et al. pre-train the GAT on UD
treebanks and then fine-tune syntax-augmented mBERT from it).

One pre-training per model, in `<runs dir>/pretrain/<model>`, shared by every cell of the variants it
names (all seeds, tasks and grid points: the paper pre-trains once). It runs under the same lock as a
cell, so workers on several GPUs or cluster nodes never pre-train the same model twice: one runs it, the
others wait for it (a lock's stale rule ends any wait on a dead owner), and a killed pre-training resumes
from its saved state. Its settings are those of `xsyn pretrain-<variant>` (a recipe, then the table's
values).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xsyn.experiments.experiment_file import Experiment, ExperimentError
from xsyn.experiments.locks import LOCK_FILE, CellBusy, acquire_lock, lock_holder
from xsyn.models.variants import PAPER, pretraining_variant, released_settings
from xsyn.pretraining.recipes import RECIPES, current_names
from xsyn.training.folder import RunFolder
from xsyn.utils.schema import check_values, construct, did_you_mean

MODEL_SETTINGS = "model_settings"  # PretrainSettings' table of further model settings

log = logging.getLogger("xsyn")
WAIT_S = 30.0  # how often a worker that waits for another's pre-training looks again
ENGINE_KEYS = ("variants", "recipe")  # the table's keys that are not pre-training settings


@dataclass(frozen=True)
class PretrainState:
    model: str
    folder: Path
    state: str  # done | running | to do
    detail: str = ""


def pretrain_settings(experiment: Experiment, model: str):
    """The pre-training's settings for `model`: its recipe, the table's values, then the experiment's own
    (the model, the folder, and with --data-dir its udpos folder as the treebanks' home)."""
    from xsyn.pretraining.trainer import PretrainSettings

    table = experiment.pretrain
    where = str(experiment.path)
    recipe_name = table.get("recipe", "paper")
    if recipe_name not in RECIPES:
        raise ExperimentError(where, "pretrain.recipe", f"{recipe_name!r} is not one of {', '.join(sorted(RECIPES))}"
                              + did_you_mean(recipe_name, RECIPES))
    values: dict[str, Any] = dict(RECIPES[recipe_name])
    own = current_names({key: value for key, value in table.items() if key not in ENGINE_KEYS}, f"{where}: pretrain")
    values.update(check_values(PretrainSettings, own, where, "pretrain", required=False, error=ExperimentError))
    values.update(_reproduced(experiment, PretrainSettings, own, values.get(MODEL_SETTINGS, {})))
    if experiment.overrides.data_dir:
        values["treebank_dir"] = str(Path(experiment.overrides.data_dir) / "udpos")
    values["treebank_dir"] = str(Path(values.get("treebank_dir", "ud")).absolute())
    values.update(model=model, output_dir=str(experiment.pretrain_dir(model)))
    return construct(PretrainSettings, values, where, "pretrain", error=ExperimentError)


def _reproduced(experiment: Experiment, schema: type, own: dict[str, Any], model: dict[str, Any]) -> dict[str, Any]:
    """What the experiment's `reproduce` (a released code, in [settings] or --set) sets in the pre-trained module:
    the code's model settings of the variant pre-trained (gat's additive attention and xavier draws: the module
    its cells load must be the code's), under the [pretrain] table's own values (`own`); `model`: the model
    settings so far (the recipe's, or the table's)."""
    name = experiment.overrides.settings.get("reproduce", experiment.settings.get("reproduce", PAPER))
    _, code = released_settings(name, pretraining_variant().name)
    fields = {f.name for f in dataclasses.fields(schema)}
    given = own.get(MODEL_SETTINGS, {})
    values = {key: value for key, value in code.items() if key in fields and key not in own}
    further = {key: value for key, value in code.items() if key not in fields and key not in given}
    return {**values, MODEL_SETTINGS: {**model, **further}} if further else values


def ensure_pretrained(experiment: Experiment, model: str, progress: bool = False) -> Path:
    """The model's pre-trained syntax module's folder, pre-training it first (or waiting for the worker that
    does)."""
    folder = experiment.pretrain_dir(model)
    while not experiment.pretrained(model):
        settings = pretrain_settings(experiment, model)  # checked before the lock and before any work
        try:
            lock = acquire_lock(folder)
        except CellBusy as busy:
            log.info("the %s pre-training for %s is running elsewhere (%s); waiting for it", pretraining_variant().name,
                     model, busy)
            time.sleep(WAIT_S)
            continue
        try:
            if not experiment.pretrained(model):
                from xsyn.pretraining.trainer import run_pretraining

                log.info("pre-training the %s syntax module for %s in %s before its fine-tunes",
                         pretraining_variant().name, model, folder)
                run_pretraining(settings, progress=progress, resume=RunFolder(folder).has_progress())
                missing = [name for name in pretraining_variant().pretrained_files if not (folder / name).is_file()]
                if missing:  # (else the loop would pre-train again and again)
                    raise ExperimentError(f"{folder}: the pre-training ended without writing {', '.join(missing)}; "
                                          "its train_log.jsonl and the output above say why")
        finally:
            lock.release()
    return folder


def pretrain_states(experiment: Experiment) -> list[PretrainState]:
    """Each model's pre-training, for `xsyn experiment status`."""
    if not experiment.pretrain:
        return []
    models = list(dict.fromkeys(cell.model for cell in experiment.cells
                                if cell.variant in experiment.pretrained_variants()))
    states = []
    for model in models:
        folder = experiment.pretrain_dir(model)
        holder = lock_holder(folder / LOCK_FILE)
        if experiment.pretrained(model):
            states.append(PretrainState(model, folder, "done"))
        elif holder is not None and not holder.stale:
            states.append(PretrainState(model, folder, "running", f"locked by {holder.describe()}"))
        else:
            states.append(PretrainState(model, folder, "to do", "saved state, resumes"
                                        if RunFolder(folder).has_progress() else
                                        "runs before the first cell that needs it"))
    return states
