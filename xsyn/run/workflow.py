"""A fine-tuning run from the settings a researcher gives to its evaluation and upload: what `xsyn finetune`
does, callable from Python with the same behaviour.

    from xsyn.run.workflow import finetune_settings, finetune_evaluate_push

    config, resume = finetune_settings(task="pawsx", variant="sla", seed=1, sets=["sla_distance=2"])
    outcome = finetune_evaluate_push(config, resume=resume, eval_langs=[])  # [] : every language of the task
    outcome["summary"]["best"], outcome["evaluation"]["per_language"]

Before anything is read, `finetune` (and `evaluate_run`) log the readiness table of the run's languages (each one's
data source and parser, what is missing and the fix: `xsyn.run.readiness`) at the NOTE level; its rows, without
running anything:

    from xsyn.run.resources import readiness_of
    from xsyn.run.readiness import finetune_needs
    rows = readiness_of(config, finetune_needs(config.card, config.train_lang))  # [row.as_dict() for row in rows]

Settings are merged as the command line merges them: the card's hyperparameters, then a settings file
(`config_file`, or with `resume_dir` the run's own config.json), then the keyword settings, then `sets`
(`KEY=VALUE`, model settings included).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xsyn.data.cards import load_card
from xsyn.models.variants import check_pretrained, option_settings
from xsyn.run.evaluation import evaluate_run, locate_checkpoint
from xsyn.run.publish import check_hub_push, push_checkpoint
from xsyn.run.resources import finetune_resources
from xsyn.run.settings import (
    MODEL_SETTINGS,
    RunConfig,
    check_flags,
    check_variant_settings,
    other_variants_settings,
    parse_overrides,
    read_config_file,
    resolve,
)
from xsyn.run.train import finetune, finished_summary
from xsyn.training.folder import RunFolder, is_main_process
from xsyn.utils.errors import OptionError

log = logging.getLogger(__name__)


def finetune_settings(task: str | None = None, variant: str | None = None, config_file: str | Path | None = None,
                      sets: tuple[str, ...] | list[str] = (), resume_dir: str | Path | None = None,
                      **flags: Any) -> tuple[RunConfig, bool]:
    """The run's resolved settings, and whether it continues a run. `resume_dir`: None (a fresh run), ""
    (continue the run in `output_dir`) or the folder of the run to continue, whose config.json then gives
    the settings unless `config_file` does. `flags` are `RunConfig` fields (None: not given)."""
    if resume_dir:
        config_file = _resumed_config(str(resume_dir), flags, config_file)
    file_values = _without_other_variants(read_config_file(config_file), variant, config_file) if config_file else {}
    task = task or file_values.get("task_card") or file_values.get("task")
    if task is None:
        raise OptionError("Missing option '--task' (or a --config file that names it).")
    card = load_card(task)
    saved = RunFolder(resume_dir).config if resume_dir else None
    if saved is not None and str(config_file) == str(saved) and file_values.get("task", card.name) != card.name:
        raise OptionError(f"--resume {resume_dir} is a run of task {file_values['task']!r} (its {saved.name}), but "
                          f"--task names {card.name!r}: leave out --task to continue that run, or give --resume the "
                          "folder of a run of this task")
    flags["trackers"] = list(flags.get("trackers") or ()) or None
    model_flags = _variant_options(flags)
    overrides = parse_overrides(sets)
    overrides[MODEL_SETTINGS] = {**{k: v for k, v in model_flags.items() if v is not None},
                                 **overrides.get(MODEL_SETTINGS, {})}
    flags = {**{k: v for k, v in flags.items() if v is not None}, **overrides}
    config = resolve(task, variant, card, file_values, flags)
    if config.freeze_pretrained:
        check_pretrained(config.variant, "--freeze-pretrained")
    check_variant_settings(config.variant, [*file_values.get(MODEL_SETTINGS, {}), *overrides[MODEL_SETTINGS]])
    return config, resume_dir is not None


def _without_other_variants(file_values: dict[str, Any], variant: str | None, config_file: str | Path
                            ) -> dict[str, Any]:
    """A settings file of another variant's run (a saved config.json) given with --variant brings that variant's
    model settings along: those `variant` does not take are dropped, with a note (BERT's own are kept)."""
    saved = file_values.get("variant")
    model = file_values.get(MODEL_SETTINGS, {})
    dropped = other_variants_settings(variant, model) if variant and saved not in (None, variant) else {}
    if not dropped:
        return file_values
    log.warning(f"{config_file} is a run of variant {saved}: its model settings {', '.join(dropped)} are not "
                f"settings of variant {variant}, so this run drops them")
    return {**file_values, MODEL_SETTINGS: {name: value for name, value in model.items() if name not in dropped}}


def _variant_options(flags: dict[str, Any]) -> dict[str, Any]:
    """The model settings given by the options the variants declare (`SyntaxVariant.options`; `--set` wins over
    them), taken out of `flags` and checked by their schemas, named as the option."""
    given = {name: (setting, flags.pop(name)) for name, (setting, _) in option_settings().items()
             if flags.get(name) is not None}
    return {name: check_flags(setting.owner, {name: value})[name] for name, (setting, value) in given.items()}


def _resumed_config(resume_dir: str, flags: dict[str, Any], config_file: str | Path | None) -> str | Path:
    """`--resume DIR`: the run folder is DIR, and its saved settings are read unless a file is given too."""
    if flags.get("output_dir") and Path(flags["output_dir"]) != Path(resume_dir):
        raise OptionError(f"--resume {resume_dir} and --output-dir {flags['output_dir']} name different folders; "
                          "give one")
    flags["output_dir"] = resume_dir
    saved = RunFolder(resume_dir).config
    if config_file is None and not saved.is_file():
        raise OptionError(f"--resume {resume_dir}: {saved} does not exist, so there is no run there to continue (a "
                          "run writes it when it starts)")
    return config_file if config_file is not None else str(saved)


def finetune_evaluate_push(config: RunConfig, resume: bool = False, overwrite: bool = False,
                           eval_langs: list[str] | None = None, push_to_hub: str | None = None,
                           progress: bool = True, continue_with: str | None = None,
                           on_trained: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Fine-tune (claiming the output folder first: see `RunFolder.claim`), then with `eval_langs` evaluate
    the best checkpoint (`[]`: every language of the task), then with `push_to_hub` upload it (checked
    before training starts). Returns {"summary", "evaluation" (None without eval_langs), "pushed" (the
    repository's URL, or None)}; every process runs it, the main one alone uploads. `on_trained` is given the
    summary as soon as training ends (the command line prints it before the evaluation starts)."""
    folder = RunFolder(config.resolved_output_dir())
    finished = resume and finished_summary(folder, config) is not None  # (said by `finetune`; nothing reloaded)
    # every input checked, and built once, before the folder is claimed: a misspelt --eval-langs language or a
    # missing test file is named now, not after the training
    run = config if finished else finetune_resources(config, eval_langs)
    folder.claim(resume, overwrite, continue_with or f"resume_dir={str(folder.path)!r}")
    token = check_hub_push(push_to_hub) if push_to_hub else None
    outcome: dict[str, Any] = {"summary": finetune(run, resume=resume, progress=progress), "evaluation": None,
                               "pushed": None}
    if on_trained is not None:
        on_trained(outcome["summary"])
    if eval_langs is not None:
        outcome["evaluation"] = evaluate_run(locate_checkpoint(folder.path), langs=eval_langs or None,
                                             progress=progress)
    if push_to_hub and is_main_process():
        outcome["pushed"] = push_checkpoint(folder.best, push_to_hub, token)
    return outcome
