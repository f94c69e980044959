"""A GAT pre-training from the settings a researcher gives: what `xsyn pretrain-gat` does, callable from
Python with the same behaviour.

    from xsyn.run.pretrain import pretrain_gat, pretrain_settings

    settings = pretrain_settings("strong", treebanks=["en"], treebank_dir="ud", output_dir="runs/gat")
    summary = pretrain_gat(settings)  # summary["probe_metrics"]["en_ewt"]["uuas"]

Settings are merged in one order: the recipe (`xsyn.pretraining.recipes`), then a settings file (TOML or
JSON; an earlier run's pretrain_config.json), then the keyword settings, then `sets` (`KEY=VALUE` model
settings of the GAT).

The output directory is a GAT checkpoint (`gat.safetensors` + `gat_config.json`, which
`xsyn.models.variants.gat.layers.load_gat` and so `xsyn finetune --pretrained-syntax DIR` read), with
`probe_metrics.json` ({lang: {uuas, dist_spearman, root_acc, norm_spearman, n_sentences}}, shown by `xsyn report`)
and `pretrain_config.json` (settings, seed, versions, data counts, loss curve). With `--model tiny` the
GAT only makes sense over the random embeddings it was trained with, so the tiny encoder and its
tokenizer are saved as well (`model/`): fine-tune from that directory.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from xsyn.models.defaults import DEFAULT_MODEL, TINY
from xsyn.pretraining.recipes import RECIPES, RENAMED
from xsyn.pretraining.trainer import PretrainSettings
from xsyn.run.settings import (
    MODEL_SETTINGS,
    ConfigError,
    check_flags,
    check_model_settings,
    parse_overrides,
    read_settings_file,
)
from xsyn.training.folder import RunFolder
from xsyn.utils.errors import OptionError
from xsyn.utils.schema import check_values, construct

RECIPE_KEYS = ("gat_delta", "gat_attention", "learning_rate")  # a recipe's settings beside its `gat` table
REQUIRED = ("treebanks", "treebank_dir", "output_dir")


def pretrain_settings(recipe: str = "paper", config_file: str | Path | None = None,
                      sets: tuple[str, ...] | list[str] = (), **flags: Any) -> PretrainSettings:
    """The pre-training's settings (see the module docstring); `flags` are `PretrainSettings` fields
    (None: not given; paths may be `Path`s)."""
    chosen = RECIPES[recipe]
    values = {name: chosen[name] for name in RECIPE_KEYS}
    file_values = read_pretrain_config(config_file) if config_file else {}
    gat = {**chosen["gat"], **file_values.pop("gat", {}), **parse_overrides(sets).get(MODEL_SETTINGS, {})}
    values.update(file_values)
    values.update(check_flags(PretrainSettings, {k: str(v) if isinstance(v, Path) else v for k, v in flags.items()
                                                 if v is not None}))
    missing = [f"--{name.replace('_', '-')}" for name in REQUIRED if not values.get(name)]
    if missing:
        raise OptionError(f"Missing option(s) {', '.join(missing)} (or a --config file that names them).")
    if values.get("model", DEFAULT_MODEL) == TINY and not values.get("tokenizer"):
        raise OptionError(f"--model {TINY} needs --tokenizer (a vocab.txt or tokenizer directory)")
    return construct(PretrainSettings, {**values, "gat": gat}, "settings", error=ConfigError)


def pretrain_gat(settings: PretrainSettings, resume: bool = False, overwrite: bool = False, progress: bool = False,
                 continue_with: str = "resume=True") -> dict:
    """Claim the output folder (`RunFolder.claim`: the rules of a fine-tuning run), check what the run
    needs before any work, then pre-train and probe; returns the run summary (`pretrain_config.json`)."""
    from xsyn.pretraining.trainer import run_pretraining
    from xsyn.run.preflight import preflight_pretraining

    RunFolder(settings.output_dir).claim(resume, overwrite, continue_with)
    preflight_pretraining(settings)
    return run_pretraining(settings, progress=progress, resume=resume)


def probe_text(summary: dict) -> str:
    """The probes' scores on each evaluation treebank, a line each (from `pretrain_gat`'s summary)."""
    return "\n".join(f"{data['lang']:>3} {data['treebank']:<22} {data['split']:<5} UUAS {row['uuas']:.3f}  "
                     f"DSpr {row['dist_spearman']:.3f}  root {row['root_acc']:.3f}  NSpr {row['norm_spearman']:.3f}  "
                     f"({row['n_sentences']} sentences, {data['too_long_not_scored']} too long)"
                     for row, data in zip(summary["probe_metrics"].values(), summary["evaluation"]))


def read_pretrain_config(path: str | Path) -> dict:
    """Settings from a TOML or JSON file: `PretrainSettings` fields at the top, or under `settings` (as in
    a run's pretrain_config.json), each checked against its field; `gat` holds model settings. A run folder
    saved before the settings took finetune's names is read under the new names."""
    data = read_settings_file(path)
    data = data.get("settings", data) if isinstance(data.get("settings"), dict) else data
    for old, new in RENAMED.items():
        if old in data:
            logging.getLogger("xsyn.cli").warning(f"{path}: setting {old} is now {new}")
            data[new] = data.pop(old)
    if "warmup" in data:
        raise ConfigError(path, "warmup", "a fraction of the steps is now warmup_steps (a number of steps); write "
                          "warmup_steps = N instead")
    values = check_values(PretrainSettings, data, str(path), required=False, error=ConfigError)
    if "gat" in values:
        values["gat"] = check_model_settings(values["gat"], str(path), "gat")
    return values
