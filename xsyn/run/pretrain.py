"""A pre-training of a variant's syntax module from the settings a researcher gives: what `xsyn pretrain-<variant>`
does (the variant that declares `pretraining`: `xsyn.models.variants.pretraining_variant`), callable from Python
with the same behaviour.

    from xsyn.run.pretrain import pretrain_settings, pretrain_syntax

    settings = pretrain_settings("strong", treebanks=["en"], treebank_dir="ud", output_dir="runs/pretrained")
    summary = pretrain_syntax(settings)  # summary["probe_metrics"]["en_ewt"]["uuas"]

Settings are merged in one order: the recipe (`xsyn.pretraining.recipes`), then a settings file (TOML or
JSON; an earlier run's pretrain_config.json), then the keyword settings, then `sets` (`KEY=VALUE`: pre-training
settings, and model settings of the pre-trained variant; another variant's settings and fine-tuning's are refused).

The output directory holds the pre-trained module (the variant's `pretrained_files`, which its `load_pretrained`
hook, and so `xsyn finetune --pretrained-syntax DIR`, reads), with `probe_metrics.json`
({lang: {uuas, dist_spearman, root_acc, norm_spearman, n_sentences}}, shown by `xsyn report`) and
`pretrain_config.json` (settings, seed, versions, data counts, loss curve). With `--model tiny` the
module only makes sense over the random embeddings it was trained with, so the tiny encoder and its
tokenizer are saved as well (`model/`): fine-tune from that directory.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

from xsyn.models.names import DEFAULT_MODEL, TINY
from xsyn.models.variants import pretraining_command, pretraining_variant
from xsyn.pretraining.recipes import MODEL_SETTINGS, RECIPES, current_names
from xsyn.pretraining.trainer import PretrainSettings, run_pretraining
from xsyn.run.checks import preflight_pretraining
from xsyn.run.settings import (
    FIELD_NAMES,
    ConfigError,
    check_flags,
    check_model_settings,
    model_setting_names,
    other_variants_settings,
    read_settings_file,
    setting_pair,
)
from xsyn.training.folder import RunFolder
from xsyn.utils.errors import OptionError
from xsyn.utils.schema import check_value, check_values, construct, did_you_mean

REQUIRED = ("treebanks", "treebank_dir", "output_dir")


def pretrain_settings(recipe: str = "paper", config_file: str | Path | None = None,
                      sets: tuple[str, ...] | list[str] = (), **flags: Any) -> PretrainSettings:
    """The pre-training's settings (see the module docstring); `flags` are `PretrainSettings` fields
    (None: not given; paths may be `Path`s)."""
    chosen = RECIPES[recipe]
    values = {name: value for name, value in chosen.items() if name != MODEL_SETTINGS}
    file_values = read_pretrain_config(config_file) if config_file else {}
    set_values, set_model = pretrain_sets(sets)
    model = {**chosen[MODEL_SETTINGS], **file_values.pop(MODEL_SETTINGS, {}), **set_model}
    variant = pretraining_variant().name
    for name, takers in other_variants_settings(variant, model).items():
        raise ConfigError(f"{name} is a setting of {', '.join(takers)}, not of {variant}, the syntax module "
                          f"{pretraining_command()} trains, which would ignore it: drop it")
    values.update(file_values)
    values.update(check_flags(PretrainSettings, {k: str(v) if isinstance(v, Path) else v for k, v in flags.items()
                                                 if v is not None}))
    values.update(set_values)
    missing = [f"--{name.replace('_', '-')}" for name in REQUIRED if not values.get(name)]
    if missing:
        raise OptionError(f"Missing option(s) {', '.join(missing)} (or a --config file that names them).")
    if values.get("model", DEFAULT_MODEL) == TINY and not values.get("tokenizer"):
        raise OptionError(f"--model {TINY} needs --tokenizer (a vocab.txt or tokenizer directory)")
    return construct(PretrainSettings, {**values, MODEL_SETTINGS: model}, "settings", error=ConfigError)


def pretrain_sets(pairs: tuple[str, ...] | list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`--set KEY=VALUE` pairs, each checked: pre-training's own settings (`PretrainSettings` fields, as the options
    give them), and model settings. A fine-tuning setting that pre-training does not have is refused."""
    hints = typing.get_type_hints(PretrainSettings)
    lists = [name for name, hint in hints.items() if typing.get_origin(hint) is list or list in typing.get_args(hint)]
    values: dict[str, Any] = {}
    model: dict[str, Any] = {}
    command = pretraining_command()
    for pair in pairs:
        key, value = setting_pair(pair, lists)
        if key in hints and key != MODEL_SETTINGS:
            values[key] = check_value(PretrainSettings, key, hints[key], value, "--set", key, error=ConfigError)
        elif key in FIELD_NAMES:  # a fine-tuning run's
            raise ConfigError("--set", key, "a setting of fine-tuning runs (`xsyn finetune --set`), which pre-training "
                              f"does not have: drop it (`xsyn {command} --help` lists pre-training's settings)")
        elif key not in model_setting_names():
            raise ConfigError("--set", key, "neither a pre-training setting nor a model setting" + did_you_mean(
                key, {*hints, *model_setting_names()} - {MODEL_SETTINGS})
                              + " (`xsyn settings` lists the model settings)")
        else:
            model.update(check_model_settings({key: value}, "--set", ""))
    return values, model


def pretrain_syntax(settings: PretrainSettings, resume: bool = False, overwrite: bool = False,
                    progress: bool = False, continue_with: str = "resume=True") -> dict:
    """Claim the output folder (`RunFolder.claim`: the rules of a fine-tuning run), check what the run
    needs before any work, then pre-train and probe; returns the run summary (`pretrain_config.json`)."""
    RunFolder(settings.output_dir).claim(resume, overwrite, continue_with)
    preflight_pretraining(settings)
    return run_pretraining(settings, progress=progress, resume=resume)


def probe_text(summary: dict) -> str:
    """The probes' scores on each evaluation treebank, a line each (from `pretrain_syntax`'s summary)."""
    return "\n".join(f"{data['lang']:>3} {data['treebank']:<22} {data['split']:<5} UUAS {row['uuas']:.3f}  "
                     f"DSpr {row['dist_spearman']:.3f}  root {row['root_acc']:.3f}  NSpr {row['norm_spearman']:.3f}  "
                     f"({row['n_sentences']} sentences, {data['too_long_not_scored']} too long)"
                     for row, data in zip(summary["probe_metrics"].values(), summary["evaluation"]))


def read_pretrain_config(path: str | Path) -> dict:
    """Settings from a TOML or JSON file: `PretrainSettings` fields at the top, or under `settings` (as in
    a run's pretrain_config.json), each checked against its field; MODEL_SETTINGS holds model settings. A run folder
    saved before the settings took finetune's names is read under the new names."""
    data = read_settings_file(path)
    data = data.get("settings", data) if isinstance(data.get("settings"), dict) else data
    data = current_names(data, str(path))
    if "warmup" in data:
        raise ConfigError(path, "warmup", "a fraction of the steps is now warmup_steps (a number of steps); write "
                          "warmup_steps = N instead")
    values = check_values(PretrainSettings, data, str(path), required=False, error=ConfigError)
    if MODEL_SETTINGS in values:
        values[MODEL_SETTINGS] = check_model_settings(values[MODEL_SETTINGS], str(path), MODEL_SETTINGS)
    return values
