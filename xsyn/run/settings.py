"""The resolved configuration of a run: defaults < task card (papers' values) < --config file < flags.

A `RunConfig` is saved as `config.json` next to every result, with where each value came from,
so a run can be repeated exactly (`xsyn finetune --config runs/x/config.json`).
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import tomllib
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import Any

from xsyn.data.cards import MODEL_HYPERPARAMETERS, PAPER_NAMES, TaskCard, load_card
from xsyn.models.defaults import DEFAULT_MODEL, DEFAULT_SEED, GAT_CONFIG, TINY
from xsyn.models.variants import get_variant
from xsyn.syntax.parsing.registry import (
    BATCH_SIZE,
    DOWNLOAD,
    PARSER_OPTIONS,
    ParserChoiceError,
    resolve_parser_choice,
)
from xsyn.utils.errors import XsynError
from xsyn.utils.typecheck import type_mismatch

log = logging.getLogger(__name__)
BASELINE_SECTIONS = ("none", "mbert")  # where a card keeps the plain-model hyperparameters
MIXED_PRECISIONS = ("no", "fp16", "bf16")
TRACKERS = ("tensorboard", "wandb")  # Accelerate's trackers a run may log to


class ConfigError(XsynError, ValueError):
    """A configuration value that cannot work; the message names the key and the fix."""


@dataclass
class RunConfig:
    task: str
    variant: str = "gat"
    model: str = DEFAULT_MODEL
    tokenizer: str | None = None  # default: the model's own (for `tiny`: mBERT's)
    train_lang: str = "en"
    data_dir: str | None = None
    output_dir: str | None = None  # default: runs/{task}/{variant}-seed{seed}
    seed: int = DEFAULT_SEED
    # optimisation
    epochs: float = 3.0
    max_steps: int | None = None  # overrides epochs
    learning_rate: float = 2e-5
    batch_size: int = 32  # examples per optimiser step, over all processes and accumulation steps
    grad_accum: int = 1
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    mixed_precision: str = "no"  # MIXED_PRECISIONS
    # data
    max_length: int = 128
    doc_stride: int | None = None
    max_query_length: int | None = None  # QA: question pieces kept (cards: 64); None: all
    max_answer_length: int = 30
    n_best: int = 20
    max_train_examples: int | None = None  # use only the first N training examples (quick runs)
    group_by_length: bool = False  # training batches of similar lengths (less padding, faster; off in the papers)
    max_eval_examples: int | None = None  # first N dev examples in training; an experiment caps its test sets too
    dev_fraction: float | None = None  # tasks without a dev set: share of train held out (default: the card's)
    dev_seed: int = 0  # ... and the seed that draws it (fixed, so runs of every seed share one dev set)
    skip_bad_rows: bool = False
    num_proc: int | None = None
    eval_batch_size: int = 64  # examples per prediction batch, over all processes
    # parsing
    parser: str = "stanza"  # a registered parser choice (xsyn.syntax.parsing.registry): stanza, udpipe:MODEL, ...
    # the parser options (registry.PARSER_OPTIONS); each parser reads those it declares
    parser_model_dir: str | None = None
    parser_download: str = DOWNLOAD.default
    parser_device: str | None = None
    parser_batch_size: int = BATCH_SIZE.default
    parse_workers: int | None = None  # processes that parse side by side; default: the cores
    cache_dir: str | None = None  # parse + feature caches; default $XSYN_CACHE or ~/.cache/xsyn
    # bookkeeping
    eval_every: int | None = None  # optimiser steps between dev evaluations (default: once an epoch)
    checkpointing_steps: int | str | None = None  # N steps or "epoch" between resumable states (default: at
    # every evaluation)
    save_total_limit: int | None = None  # resumable states kept: state/ and checkpoint-<step>/ (default: 1)
    log_every: int = 10
    trackers: list[str] = field(default_factory=list)  # tensorboard, wandb (accelerate trackers)
    # model variant
    syntax: dict[str, Any] = field(default_factory=dict)  # XsynBertConfig fields
    gat_init: str | None = None  # a `xsyn pretrain-gat` output directory
    freeze_gat: bool = False
    hyperparameter_source: str = ""  # which card section the defaults came from
    hyperparameter_grid: dict[str, Any] = field(default_factory=dict)  # card grids whose first value is used

    @cached_property
    def card(self) -> TaskCard:
        """The run's task card, loaded once per run (`resolve` hands over the card it checked the
        settings against); not a setting, so not saved."""
        return load_card(self.task)

    def resolved_output_dir(self) -> Path:
        return Path(self.output_dir or f"runs/{self.task}/{self.variant}-seed{self.seed}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, path: str | Path) -> None:
        from xsyn.utils.io import atomic_write_text

        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")


FIELD_NAMES = {f.name for f in fields(RunConfig)}
# Settings renamed in 0.2 (one name per concept on every command): config files and --set still take
# the old names for one release, with a warning.
RENAMED_SETTINGS = {"train_examples": "max_train_examples", "eval_examples": "max_eval_examples",
                    "save_every": "checkpointing_steps"}
# Derived when a run is resolved: a config file that carries them (a saved config.json) does not set them.
DERIVED_FIELDS = ("task", "hyperparameter_source", "hyperparameter_grid")
# Settings that never change what a run computes (seed aside): runs that differ only in these are
# seeds of one system in `xsyn report`.
BOOKKEEPING_FIELDS = ("output_dir", "data_dir", "cache_dir", "num_proc", "eval_batch_size",
                      *(option.setting for option in PARSER_OPTIONS), "parse_workers", "checkpointing_steps",
                      "save_total_limit", "log_every",
                      "trackers", "hyperparameter_source", "hyperparameter_grid")
LIST_SETTINGS = {"trackers", "syntax_layers"}  # settings whose value is a list, not a search grid


def card_defaults(card: TaskCard, variant: str) -> tuple[dict[str, Any], str, dict[str, list]]:
    """The papers' hyperparameters for `variant` from the card, as RunConfig values; the card's
    section; and its search grids (a list where the paper searched values, e.g. Li et al.'s
    learning rates), of which the first value is taken."""
    values: dict[str, Any] = {"train_lang": card.train_languages[0]}
    section = variant if variant in card.hyperparameters else next(
        (s for s in BASELINE_SECTIONS if s in card.hyperparameters), None)
    if section is None:
        return values, "", {}
    syntax: dict[str, Any] = {}
    grids: dict[str, list] = {}
    for key, value in card.hyperparameters[section].items():
        if isinstance(value, list) and value and key not in LIST_SETTINGS:
            grids[key], value = value, value[0]
        if key in MODEL_HYPERPARAMETERS:
            if not get_variant(variant).is_baseline:
                syntax[key] = value
        elif key in FIELD_NAMES and key != "seed":
            values[key] = value
    if syntax:
        values["syntax"] = syntax
    used = {**values, **syntax}
    return values, f"{card.path or card.name} [hyperparameters.{section}]", {k: v for k, v in grids.items()
                                                                            if k in used}


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A JSON (e.g. a saved config.json) or TOML file of RunConfig keys."""
    data = read_settings_file(path)
    data = {current_setting_name(key, str(path)): value for key, value in data.items()}
    unknown = sorted(set(data) - FIELD_NAMES)
    if unknown:
        raise ConfigError(f"{path}: unknown keys {', '.join(unknown)}; valid keys: {', '.join(sorted(FIELD_NAMES))}")
    if not isinstance(data.get("syntax", {}), dict):
        raise ConfigError(f"{path}: syntax must be a table of model settings, got {data['syntax']!r}")
    return data


def read_settings_file(path: str | Path) -> dict[str, Any]:
    """The table of a JSON or TOML settings file (by its suffix); a file that is not one is a ConfigError."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start}); save it as UTF-8") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'} ({err})") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a table of settings, got {type(data).__name__}")
    return data


def current_setting_name(key: str, where: str) -> str:
    """A setting's name now (a renamed one's old name is taken, with a warning naming `where`)."""
    if key in RENAMED_SETTINGS:
        log.warning(f"{where}: setting {key} is now {RENAMED_SETTINGS[key]}; the old name goes in the next release")
        return RENAMED_SETTINGS[key]
    return key


def parse_overrides(pairs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """`--set key=value` pairs: values are JSON when they parse as JSON, else strings.

    A key that is not a RunConfig field is a syntax setting (an XsynBertConfig field), e.g.
    `--set gat_delta=2` or `--set sla_punct_visible=true`. A list setting also takes a comma list
    or one string: `--set syntax_layers=0,1`, `--set trackers=wandb` (`syntax_layers=2` is a count:
    the first two layers, as in the cards).
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {pair!r}: expected key=value")
        key = current_setting_name(key, "--set")
        value = _json_or_text(raw)
        if key in LIST_SETTINGS and "," in raw and not raw.lstrip().startswith("["):
            value = [_json_or_text(item.strip()) for item in raw.split(",")]
        elif key in LIST_SETTINGS and isinstance(value, str):
            value = [value]
        if key in FIELD_NAMES:
            out[key] = value
        else:
            out.setdefault("syntax", {})[key] = value
    return out


def _json_or_text(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def gat_shape(gat_init: str | Path) -> dict[str, Any]:
    """The shape settings a pre-trained GAT (an `xsyn pretrain-gat` folder) was built with."""
    from xsyn.models.gat import GAT_SHAPE_FIELDS

    path = Path(gat_init) / GAT_CONFIG
    if not path.is_file():
        raise ConfigError(f"--gat-init {gat_init}: {path} not found; point it at an `xsyn pretrain-gat` "
                          "output folder")
    saved = json.loads(path.read_text(encoding="utf-8"))
    return {k: saved[k] for k in GAT_SHAPE_FIELDS if k in saved and k != "hidden_size"}


def resolve(task: str, variant: str | None, card: TaskCard, file_values: dict[str, Any], flags: dict[str, Any]
            ) -> RunConfig:
    """Merge, in order of precedence: RunConfig defaults, the card, the shape of a pre-trained GAT
    (`gat_init`), a config file, flags.

    The variant is `variant`, else the config file's, else `gat`; the source language is the card's
    first training language (`card_defaults`) unless the file or a flag says. A config file of another task
    is refused; what a run derives (its card section and grids) is never taken from a file.
    """
    if file_values.get("task", task) != task:
        raise ConfigError(f"the --config file is a run of task {file_values['task']!r}, not {task!r}: "
                          f"pass --task {file_values['task']}, or delete `task` from the file")
    variant = variant or file_values.get("variant") or "gat"
    flags = {current_setting_name(key, "settings"): value for key, value in flags.items()}
    file_values = {k: v for k, v in file_values.items() if k not in (*DERIVED_FIELDS, "variant")}
    defaults, source, grid = card_defaults(card, variant)
    gat_init = flags.get("gat_init") or file_values.get("gat_init")
    if gat_init:
        defaults = {**defaults, "syntax": {**defaults.get("syntax", {}), **gat_shape(gat_init)}}
    merged: dict[str, Any] = {"task": task, "variant": variant}
    syntax: dict[str, Any] = {}
    for layer in (defaults, file_values, flags):
        for key, value in layer.items():
            if value is None:
                continue
            if key == "syntax":
                syntax.update(value)
            else:
                merged[key] = value
    merged["syntax"] = syntax
    merged["hyperparameter_source"] = source
    chosen = {*file_values, *flags, *file_values.get("syntax", {}), *flags.get("syntax", {})}
    merged["hyperparameter_grid"] = {name: values for name, values in grid.items() if name not in chosen}
    config = RunConfig(**merged)
    config.card = card
    _check(config, card)
    for name, values in config.hyperparameter_grid.items():
        log.warning(f"{source} searches {name} over {values}; this run takes {values[0]} (choose another with "
                 f"--set {name}=VALUE)")
    return config


# Lower bounds of numeric settings (None is always allowed where the field allows it).
_AT_LEAST = {
    "batch_size": 1, "grad_accum": 1, "max_length": 1, "eval_batch_size": 1, "log_every": 1, "max_steps": 1,
    "max_query_length": 1, "max_answer_length": 1, "n_best": 1, "doc_stride": 1, "max_train_examples": 1,
    "max_eval_examples": 1, "num_proc": 1, "parser_batch_size": 1, "parse_workers": 1, "eval_every": 1,
    "save_total_limit": 1,
    "warmup_steps": 0, "weight_decay": 0,
}
_POSITIVE = ("epochs", "learning_rate", "max_grad_norm")
_CHOICES = {"mixed_precision": MIXED_PRECISIONS, DOWNLOAD.setting: DOWNLOAD.choices}


def _check(config: RunConfig, card: TaskCard) -> None:
    """Every setting against its type, range and choices; the message names the setting and the fix."""
    hints = typing.get_type_hints(RunConfig)
    for name in FIELD_NAMES:
        value = getattr(config, name)
        expected = type_mismatch(value, hints[name])
        if expected:
            raise ConfigError(f"{name} must be {expected}, got {value!r} (--set {name}=...)")
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{name} must be a finite number, got {value} (--set {name}=...)")
    if config.gat_init and config.model == TINY:
        from xsyn.training.folder import RunFolder

        own = RunFolder(config.gat_init).tiny_model
        if own.is_dir():
            raise ConfigError(f"--gat-init {config.gat_init} was pre-trained on its own random tiny model ({own}); "
                              "`--model tiny` would build another, whose word-piece embeddings the GAT has never "
                              f"seen: pass --model {own}")
    if config.train_lang not in card.train_languages:
        raise ConfigError(f"--train-lang {config.train_lang!r}: task {card.name!r} has training data in "
                          f"{', '.join(card.train_languages)}")
    for name, choices in _CHOICES.items():
        if getattr(config, name) not in choices:
            raise ConfigError(f"{name} {getattr(config, name)!r}: choose one of {', '.join(choices)}")
    try:
        missing = resolve_parser_choice(config.parser).missing_path()
    except ParserChoiceError as err:
        raise ConfigError(f"{err} (--parser or --set parser=...)") from None
    if missing:
        raise ConfigError(missing)
    unknown = [name for name in config.trackers if name not in TRACKERS]
    if unknown:
        raise ConfigError(f"trackers: {unknown[0]!r} is not a tracker; choose from {', '.join(TRACKERS)}")
    for name, least in _AT_LEAST.items():
        value = getattr(config, name)
        if value is not None and value < least:
            raise ConfigError(f"{name} must be >= {least}, got {value}")
    from xsyn.training.checkpoint import check_checkpointing_steps

    check_checkpointing_steps(config.checkpointing_steps)
    for name in _POSITIVE:
        if not getattr(config, name) > 0:
            raise ConfigError(f"{name} must be > 0, got {getattr(config, name)}")
    if config.dev_fraction is not None:
        if "validation" in card.splits:
            raise ConfigError(f"--dev-fraction: task {card.name!r} ships a validation split; the option is for "
                              "tasks without one (they hold that share of the training data out)")
        if not 0 < config.dev_fraction < 1:
            raise ConfigError(f"dev_fraction must lie strictly between 0 and 1, got {config.dev_fraction}")
    if config.batch_size % config.grad_accum:
        raise ConfigError(f"batch_size {config.batch_size} is not divisible by grad_accum {config.grad_accum}")
    check_model_settings(config.syntax)
    positions = model_positions(config)
    if positions is not None and config.max_length > positions:
        raise ConfigError(f"--max-length {config.max_length} is longer than the {positions} positions the model "
                          f"{config.model} has (max_position_embeddings): choose --max-length {positions} or less")


def model_positions(config: RunConfig) -> int | None:
    """How many positions the run's model embeds (a `--set max_position_embeddings` included); None
    where its config cannot be read here (a hub model not downloaded: loading it will say so)."""
    if "max_position_embeddings" in config.syntax:
        return config.syntax["max_position_embeddings"]
    from xsyn.models.defaults import TINY_SHAPE

    if config.model == TINY:
        return TINY_SHAPE["max_position_embeddings"]
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(config.model).max_position_embeddings
    except (OSError, ValueError, AttributeError):
        return None


HEAD_SIZES = ("num_intents", "num_slot_labels")  # model fields a run sets from its label sets, not settings


def setting_table(variant: str) -> dict[str, dict[str, Any]]:
    """Every key `--set` takes, with its type and default: the run settings, then the model settings
    (`XsynBertConfig` fields; their defaults as a `variant` model has them)."""
    from xsyn.models.variants import model_settings  # (their dataclasses: no transformers, no torch)

    hints = typing.get_type_hints(RunConfig)
    table: dict[str, dict[str, Any]] = {}
    for f in fields(RunConfig):
        if f.name in (*DERIVED_FIELDS, "syntax"):
            continue
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        table[f.name] = {"type": _type_name(hints[f.name]), "default": default}
    for name, (hint, default) in model_settings().items():
        if name not in (*HEAD_SIZES, "variant"):
            table[name] = {"type": _type_name(hint), "default": default}
    return table


def _type_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) and not typing.get_args(hint) else str(hint)


def check_model_settings(syntax: dict[str, Any]) -> None:
    """Model settings are `XsynBertConfig` fields (its own, checked for type here, or BERT's); a
    misspelt one would otherwise be carried along unused."""
    from xsyn.models.variants import model_settings

    types = {name: hint for name, (hint, _) in model_settings().items()}
    types["syntax_layers"] = list[int] | int | None  # a card may give a count
    for name, value in syntax.items():
        if name not in types and name not in _bert_setting_names():
            close = [PAPER_NAMES[name]] if name in PAPER_NAMES else difflib.get_close_matches(
                name, sorted(set(types) | _bert_setting_names() | FIELD_NAMES), n=1)  # a paper's name, or a typo
            hint = f"; did you mean {close[0]}?" if close else ""
            raise ConfigError(f"{name!r} is neither a run setting nor a model setting{hint} (run settings: "
                              "`xsyn finetune --help`; model settings: the table in xsyn/models/configuration.py)")
        expected = type_mismatch(value, types[name]) if name in types else _bert_mismatch(name, value)
        if expected:
            raise ConfigError(f"{name} must be {expected}, got {value!r} (--set {name}=...)")


def _bert_setting_names() -> set[str]:
    """BERT's own config fields (transformers is imported only for a setting that is not xsyn's)."""
    from xsyn.models.configuration import XsynBertConfig

    return {f.name for f in fields(XsynBertConfig)}


def _bert_mismatch(name: str, value: Any) -> str | None:
    """What a BERT setting must be, when `value` is not that: the type of BertConfig's default
    (numbers finite), probabilities in [0, 1], sizes and counts >= 1."""
    from transformers import BertConfig

    default = getattr(BertConfig(), name, None)
    if isinstance(default, bool) or default is None:
        return type_mismatch(value, bool) if isinstance(default, bool) else None
    if isinstance(default, (int, float)):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if isinstance(default, int) and not (number and float(value).is_integer()):
            return "a whole number"
        if not number or not math.isfinite(value):
            return "a finite number"
        if name.endswith(("_prob", "dropout")) and not 0 <= value <= 1:
            return "a probability from 0 to 1"
        if name.endswith(("_size", "_layers", "_heads", "_embeddings")) and value < 1:
            return "a whole number >= 1"
    return None
