"""The resolved configuration of a run: defaults < task card (papers' values) < --config file < flags.

A `RunConfig` is saved as `config.json` next to every result, with where each value came from,
so a run can be repeated exactly (`xsyn finetune --config runs/x/config.json`). It is a schema
(`xsyn.utils.schema`): every layer (card section, --config file, --set, options) is checked against its
fields where it is read, so a mistake names its file or option and key, even when a later layer overrides it.
"""

import json
import logging
import tomllib
import typing
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass, field, fields
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from xsyn.data.cards import TaskCard, load_card
from xsyn.models.families import FAMILIES
from xsyn.models.names import COMPILE_MODES, TINY
from xsyn.models.variants import (
    DEFAULT_VARIANT,
    PAPER,
    check_pretrained,
    get_variant,
    paper_names,
    released_codes,
    released_settings,
    reproduce_choices,
    setting_fields,
    variant_names,
)
from xsyn.models.variants.base import SyntaxConfigError
from xsyn.run.paths import absolute_paths
from xsyn.syntax.parsing.registry import (
    BATCH_SIZE,
    DOWNLOAD,
    PARSER_OPTIONS,
    WORDS,
    ParserChoiceError,
    resolve_parser_choice,
)
from xsyn.training.device_rules import AUTO, MICRO_BATCH_SPLITS, check_length_setting
from xsyn.training.folder import RunFolder
from xsyn.training.precision import DEFAULT_PRECISION, PRECISIONS
from xsyn.training.settings import LoopSettings, count
from xsyn.trees.conventions import InputConventions
from xsyn.utils.errors import MissingInputError
from xsyn.utils.io import atomic_write_text, not_utf8_at
from xsyn.utils.schema import (
    SchemaError,
    at_least,
    between,
    check_value,
    check_values,
    construct,
    did_you_mean,
    one_of,
    same_rule,
    setting,
    strict,
)

log = logging.getLogger(__name__)
BASELINE_SECTIONS = ("none", "mbert")  # where a card keeps the plain-model hyperparameters
MIXED_PRECISIONS = PRECISIONS  # auto: bf16 on a GPU that has it, float32 elsewhere (xsyn.training.precision)
TRACKERS = ("tensorboard", "wandb")  # Accelerate's trackers a run may log to
MODEL_SETTINGS = "model_settings"
OLD_MODEL_SETTINGS = "syntax"  # the key of MODEL_SETTINGS in config.json files written before its rename
# Former names that config files, `--set` and experiment files may still give (options: `--gat-init`, `--freeze-gat`)
RENAMED = {OLD_MODEL_SETTINGS: MODEL_SETTINGS, "gat_init": "pretrained_syntax", "freeze_gat": "freeze_pretrained"}


class ConfigError(SchemaError):
    """A configuration value that cannot work; the message names the file or option, the key and the fix."""


def _compile_mode(value: Any) -> None:
    if value is not None:
        one_of(COMPILE_MODES)(value)


@strict
@dataclass
class RunConfig(LoopSettings):
    """A fine-tuning run's settings: the loop's (`LoopSettings`, with its defaults) and these."""

    task: str = setting(help="the task card's name, or a card file (--task PATH.toml)")
    task_card: str | None = setting(None, help="the card file of a task given as one; none for a shipped card")
    variant: str = setting(DEFAULT_VARIANT, check=one_of(variant_names), help="the model variant")
    tiny_family: str | None = setting(None, check=one_of(FAMILIES), help="tiny's family; default: the tokenizer's")
    train_lang: str = setting("en", help="the source language trained on; default: the card's first")
    data_dir: str | None = setting(None, help="the task's data folder; default: $XSYN_DATA_DIR/<task>, else the hub")
    output_dir: str | None = setting(None, help="the run's folder; default: runs/<task>/<variant>-seed<seed>")
    # optimisation (beside the loop's settings, `LoopSettings`)
    mixed_precision: str = setting(DEFAULT_PRECISION, check=one_of(MIXED_PRECISIONS), help="auto (bf16 autocast on a "
                                   "GPU with native bfloat16, else float32), no, bf16 or fp16 (CUDA only)")
    torch_compile: str | None = setting(None, check=_compile_mode, help="a torch.compile mode to train in; none: eager")
    # the length budget; auto: few lengths where shapes cost (a GPU: 8 and 8), none where not (the CPU: 1 and none)
    pad_to_multiple_of: int | str | None = setting(AUTO, check=check_length_setting, help="lengths of training and "
                                                   "evaluation batches rounded up to a multiple of this (1: none); "
                                                   "auto: 8 on a GPU, 1 on the CPU; recorded as chosen")
    max_batch_lengths: int | str | None = setting(AUTO, check=check_length_setting, help="at most this many batch "
                                                  "lengths per run and language, those that pad least (none: any); "
                                                  "auto: 8 on a GPU, none on the CPU; recorded as chosen")
    micro_batch_split: str = setting(AUTO, check=one_of(MICRO_BATCH_SPLITS), help="how a step's batch is cut into "
                                     "micro-batches: even (grad_accum equal parts) or by-length (sorted by length, "
                                     "cut where that pads least, each part at most an even part's size; the same "
                                     "step); auto: even on a GPU, by-length on the CPU; recorded as chosen")
    # data
    doc_stride: int | None = count(None, "QA: overlap of a long context's windows, in pieces")
    max_query_length: int | None = count(None, "QA: question pieces kept (cards: 64); none: all")
    max_answer_length: int = count(30, "QA: the longest answer span decoded, in pieces")
    n_best: int = count(20, "QA: start and end candidates decoded per window")
    group_by_length: bool = setting(True, help="training batches of similar lengths (the papers: false)")
    dev_fraction: float | None = setting(None, check=between(0, 1, open_interval=True), help="train share held as dev")
    dev_seed: int = setting(0, check=at_least(0), help="the held-out dev set's seed (fixed: every seed shares it)")
    skip_bad_rows: bool = setting(False, help="skip and count bad training and dev rows instead of stopping")
    # how inputs are built (xsyn.trees.conventions): the papers' text, or a released code's (docs/variants.md)
    reproduce: str = setting(PAPER, check=one_of(reproduce_choices), help="paper: xsyn's reading of the papers' "
                             "text; or a released code (ahmad2021, li2021, sgnet), whose inputs, masks and initial "
                             "weights the run then builds as that code does: it sets each setting where the code "
                             "differs, unless the run gives that setting")
    sep_attachment: str = same_rule(InputConventions, "sep_attachment", "cls")
    tokenize_by: str = same_rule(InputConventions, "tokenize_by", "text")
    truncation_tie: str = same_rule(InputConventions, "truncation_tie", "first")
    truncation: str = same_rule(InputConventions, "truncation", "segments")
    punctuation: str = same_rule(InputConventions, "punctuation", "upos")
    carry_cut_dependents: bool = same_rule(InputConventions, "carry_cut_dependents", False)
    qa_context_first: bool = same_rule(InputConventions, "qa_context_first", False)
    num_proc: int | None = count(None, "processes that featurise the data (datasets.map)")
    eval_batch_size: int = count(64, "examples per prediction batch, over all processes")
    # parsing
    parser: str = setting("stanza", help="the trees: stanza, chain, conllu:PATH, udpipe:MODEL, spacy:PIPELINE, gold")
    parsers: dict[str, str] = setting(default_factory=dict, help="a parser per language over --parser, e.g. "
                                      "--set parsers.sw=udpipe:models/sw.udpipe (language: parser choice)")
    # the parser options (registry.PARSER_OPTIONS); each parser reads those it declares
    parser_model_dir: str | None = setting(None, help="the parser's models folder (Stanza: default its own)")
    parser_download: str = setting(DOWNLOAD.default, check=one_of(DOWNLOAD.choices), help="whether Stanza may download "
                                   "its models: none, reuse or download")
    parser_device: str | None = setting(None, help="the parser's device (cpu, cuda, cuda:1)")
    parser_batch_size: int = count(BATCH_SIZE.default, "documents per parser call")
    parser_words: str = setting(WORDS.default, check=one_of(WORDS.choices), help="how spaCy cuts raw text into words: "
                                "own (its tokenizer) or whitespace (one word per space-separated token, as Li et al. "
                                "parse, in their paper and their code)")
    parse_workers: int | None = count(None, "processes that parse side by side; default: the cores")
    cache_dir: str | None = setting(None, help="parse and feature caches; default $XSYN_CACHE or ~/.cache/xsyn")
    # bookkeeping
    trackers: list[str] = setting(check=one_of(TRACKERS), default_factory=list, help="also log to: tensorboard, wandb")
    # model variant
    model_settings: dict[str, Any] = field(default_factory=dict)  # XsynBertConfig fields (checked by resolve)
    pretrained_syntax: str | None = setting(None, help="start the variant's pre-trained syntax module (gat: the GAT) "
                                            "from this xsyn pretrain-gat output folder")
    freeze_pretrained: bool = setting(False, help="keep the pre-trained syntax module's weights fixed (with "
                                      "pretrained_syntax)")
    hyperparameter_source: str = ""  # which card section the defaults came from
    hyperparameter_grid: dict[str, Any] = field(default_factory=dict)  # card grids whose first value is used

    def validate_batch(self) -> None:
        if self.batch_size % self.grad_accum:
            raise ValueError(f"batch_size {self.batch_size} is not divisible by grad_accum {self.grad_accum}")

    @cached_property
    def card(self) -> TaskCard:
        """The run's task card, loaded once per run (`resolve` hands over the card it checked the
        settings against); not a setting, so not saved."""
        return load_card(self.task_card or self.task)

    def parser_of(self, lang: str) -> str:
        """The parser choice that parses `lang`: its own (`parsers`), else the run's (`parser`)."""
        return self.parsers.get(lang, self.parser)

    def parser_choices(self, langs: Iterable[str]) -> dict[str, str]:
        """Each language's parser choice: the plain mapping a table of a run's languages reads."""
        return {lang: self.parser_of(lang) for lang in langs}

    def resolved_output_dir(self) -> Path:
        return Path(self.output_dir or f"runs/{self.task}/{self.variant}-seed{self.seed}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, path: str | Path) -> None:
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")


FIELD_NAMES = {f.name for f in fields(RunConfig)}
# Derived when a run is resolved: a config file that carries them (a saved config.json) does not set them.
DERIVED_FIELDS = ("task", "task_card", "hyperparameter_source", "hyperparameter_grid")
# Settings that never change what a run computes (seed aside): runs that differ only in these are
# seeds of one system in `xsyn report`.
BOOKKEEPING_FIELDS = ("output_dir", "data_dir", "cache_dir", "num_proc", "eval_batch_size",
                      *(option.setting for option in PARSER_OPTIONS if not option.changes_parses), "parse_workers",
                      "checkpointing_steps",
                      "save_total_limit", "log_every",
                      "trackers", "hyperparameter_source", "hyperparameter_grid")
PER_LANGUAGE_PARSER = "parsers."  # `--set parsers.LANG=CHOICE`: the parser of one language
LIST_SETTINGS = {"trackers", "syntax_layers"}  # settings whose value is a list, not a search grid
CARD_NOTES = ("selection", "source")  # what a card's hyperparameter section documents, beside its settings
# Model fields a run sets itself (from the task's label sets, or the variant), never a setting.
NOT_MODEL_SETTINGS = ("variant", "num_intents", "num_slot_labels", "intent_labels", "slot_labels", "id2label",
                      "label2id", "architectures", "transformers_version")


def card_defaults(card: TaskCard, variant: str) -> tuple[dict[str, Any], str, dict[str, list]]:
    """The papers' hyperparameters for `variant` from the card, as RunConfig values (checked: a mistake names
    the card and the key); the card's section; and its search grids (a list where the paper searched values,
    e.g. Li et al.'s learning rates), of which the first value is taken. Every section is checked, not only
    the one this variant takes: a mistake in a card is named whichever variant runs first."""
    values: dict[str, Any] = {"train_lang": card.train_languages[0]}
    section = variant if variant in card.hyperparameters else next(
        (s for s in BASELINE_SECTIONS if s in card.hyperparameters), None)
    checked = {name: _checked_section(card, name) for name in card.hyperparameters}
    if section is None:
        return values, "", {}
    model: dict[str, Any] = {}
    settings, grids = checked[section]
    for name, value in settings.items():
        if name not in FIELD_NAMES:
            if not get_variant(variant).is_baseline:
                model[name] = value
        else:
            values[name] = value
    if model:
        values[MODEL_SETTINGS] = model
    used = {**values, **model}
    return values, f"{card.path or card.name} [hyperparameters.{section}]", {k: v for k, v in grids.items()
                                                                             if k in used}


def _checked_section(card: TaskCard, section: str) -> tuple[dict[str, Any], dict[str, list]]:
    """One hyperparameter section of a card: its settings checked (a grid's first value), and its grids."""
    where, key = card.path or card.name, f"hyperparameters.{section}"
    settings: dict[str, Any] = {}
    grids: dict[str, list] = {}
    for name, value in card.hyperparameters[section].items():
        if name in CARD_NOTES:
            if not isinstance(value, str):
                raise ConfigError(where, f"{key}.{name}", f"expected a string, got {value!r}")
            continue
        if name == "seed":
            raise ConfigError(where, f"{key}.seed", "a card states the papers' hyperparameters; the seed is each "
                              "run's own (--seed): delete it from the card")
        if isinstance(value, list) and value and name not in LIST_SETTINGS:
            grids[name] = [_check_setting(name, v, where, f"{key}.{name}[{i}]") for i, v in enumerate(value)]
            value = grids[name][0]
        settings[name] = _check_setting(name, value, where, f"{key}.{name}")
    return settings, grids


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A JSON (e.g. a saved config.json) or TOML file of RunConfig keys, each checked against its field."""
    data = current_names(read_settings_file(path))
    values = check_values(RunConfig, data, str(path), required=False, error=ConfigError)
    values[MODEL_SETTINGS] = check_model_settings(values.get(MODEL_SETTINGS, {}), str(path), MODEL_SETTINGS)
    return values


def current_names(saved: dict[str, Any]) -> dict[str, Any]:
    """A saved config's keys as RunConfig names them now (`RENAMED`: files written before); the current name wins.
    A config saved before `max_batch_lengths` existed ran with none; one saved before `micro_batch_split` existed
    cut its batches evenly."""
    saved = {**{RENAMED[k]: v for k, v in saved.items() if k in RENAMED}, **{k: v for k, v in saved.items()
                                                                            if k not in RENAMED}}
    if "pad_to_multiple_of" in saved and "max_batch_lengths" not in saved:  # (a run folder's config.json)
        saved = {**saved, "max_batch_lengths": None}
    if "pad_to_multiple_of" in saved and "micro_batch_split" not in saved:
        saved = {**saved, "micro_batch_split": "even"}
    return saved


def read_settings_file(path: str | Path) -> dict[str, Any]:
    """The table of a JSON or TOML settings file (by its suffix); a file that is not one is a ConfigError."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} not found")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: {not_utf8_at(data, err)}; save it as UTF-8") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'} ({err})") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a table of settings, got {type(data).__name__}")
    return data


def parse_overrides(pairs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """`--set key=value` pairs, checked: values are JSON when they parse as JSON, else strings.

    A key that is not a RunConfig field is a model setting (an XsynBertConfig field), e.g.
    `--set sla_distance=2` or `--set sla_punct_visible=true`. A list setting also takes a comma list
    or one string: `--set syntax_layers=0,1`, `--set trackers=wandb` (`syntax_layers=2` is a count:
    the first two layers, as in the cards).
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, value = setting_pair(pair)
        key = RENAMED.get(key, key)
        if key.startswith(PER_LANGUAGE_PARSER):  # parsers.sw=udpipe:sw.udpipe: one language's parser
            lang = key.removeprefix(PER_LANGUAGE_PARSER)
            out.setdefault("parsers", {}).update(_check_setting("parsers", {lang: value}, "--set", key))
            continue
        value = _check_setting(key, value, "--set", key)
        if key in FIELD_NAMES:
            out[key] = value
        else:
            out.setdefault(MODEL_SETTINGS, {})[key] = value
    return out


def setting_pair(pair: str, lists: Collection[str] = LIST_SETTINGS) -> tuple[str, Any]:
    """One `--set key=value`, unchecked: the key, and the value as JSON where it parses as JSON, else as text; a
    key in `lists` also takes a comma list or one string."""
    key, sep, raw = pair.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set {pair!r}: expected key=value")
    value = _json_or_text(raw)
    if key in lists and "," in raw and not raw.lstrip().startswith("["):
        value = [_json_or_text(item.strip()) for item in raw.split(",")]
    elif key in lists and isinstance(value, str):
        value = [value]
    return key, value


def check_flags(schema: type, flags: dict[str, Any], error: type[SchemaError] = ConfigError) -> dict[str, Any]:
    """Command-line options, each checked against its field of `schema` and named as the option (`--max-length`)."""
    hints = typing.get_type_hints(schema)
    return {name: check_value(schema, name, hints[name], value, "", f"--{name.replace('_', '-')}", error=error)
            for name, value in flags.items()}


def split_settings(settings: dict[str, Any], where: str, key: str, error: type[SchemaError] = ConfigError
                   ) -> dict[str, Any]:
    """A table of settings as a file writes them (run and model settings side by side, as `--set` takes them),
    checked: run settings stay, model settings go under MODEL_SETTINGS."""
    out: dict[str, Any] = {}
    for name, value in current_names(settings).items():
        value = _check_setting(name, value, where, f"{key}.{name}" if key else name, error)
        if name in FIELD_NAMES:
            out[name] = value
        else:
            out.setdefault(MODEL_SETTINGS, {})[name] = value
    return out


def _check_setting(name: str, value: Any, where: str, key: str, error: type[SchemaError] = ConfigError) -> Any:
    """One run or model setting, by name; a name that is neither is an error with a did-you-mean."""
    if name == MODEL_SETTINGS and isinstance(value, dict):
        return check_model_settings(value, where, key, error)
    if name in FIELD_NAMES and name not in DERIVED_FIELDS:
        return check_value(RunConfig, name, _run_hints()[name], value, where, key, error=error)
    field = _model_field(name)
    if field is not None:
        return check_value(*field, value, where, key, error=error)
    known = {*FIELD_NAMES, *model_setting_names()} - set(DERIVED_FIELDS)
    raise error(where, key, "neither a run setting nor a model setting" + did_you_mean(name, known, paper_names())
                      + " (`xsyn settings` lists them)")


def check_model_settings(values: Any, where: str, key: str, error: type[SchemaError] = ConfigError
                         ) -> dict[str, Any]:
    """Model settings (XsynBertConfig fields, BERT's included): each name known, each value of its type."""
    if not isinstance(values, dict):
        raise error(where, key, f"expected a table of model settings, got {values!r}")
    for name, value in values.items():
        field = _model_field(name)
        if field is None:
            raise error(where, f"{key}.{name}" if key else name, "not a model setting" + did_you_mean(
                name, model_setting_names(), paper_names()) + " (`xsyn settings` lists them)")
        values = {**values, name: check_value(*field, value, where, f"{key}.{name}" if key else name, error=error)}
    return values


def _model_field(name: str) -> tuple[type, str, Any] | None:
    """(the schema declaring it, its name, its type) for a model setting, None for an unknown name. xsyn's own
    settings are read from the registry's schemas when asked (so `xsyn settings` and `experiment status` load no
    model library, and a variant registered late is known); only BERT's own fields need transformers' config."""
    declared = setting_fields()
    if name in declared and name not in NOT_MODEL_SETTINGS:
        field = declared[name]
        return field.owner, name, LAYERS_HINT if name == "syntax_layers" else field.hint
    hints = _bert_hints()
    return (_model_config_class(), name, hints[name]) if name in hints else None


LAYERS_HINT = list[int] | int | None  # `syntax_layers`: the layer ids, or a count as the cards give it (the first n)


@cache
def _run_hints() -> dict[str, Any]:
    return typing.get_type_hints(RunConfig)


def _model_config_class() -> type:
    from xsyn.models.configuration import XsynBertConfig

    return XsynBertConfig


@cache
def _bert_hints() -> dict[str, Any]:
    """The type of each of BERT's own config fields a run may set."""
    import torch

    hints = typing.get_type_hints(_model_config_class(), localns={"torch": torch})  # BertConfig's hints name torch
    return {f.name: hints[f.name] for f in fields(_model_config_class()) if f.name not in NOT_MODEL_SETTINGS}


def model_setting_names() -> set[str]:
    return {*_bert_hints(), *setting_fields()} - set(NOT_MODEL_SETTINGS)


def _json_or_text(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def pretrained_settings(variant: str, directory: str | Path) -> dict[str, Any]:
    """The model settings (shapes) of the variant's pre-trained syntax module in `directory`, which the run adopts."""
    try:
        check_pretrained(variant, "--pretrained-syntax")
        return get_variant(variant).pretrained_settings(directory)
    except SyntaxConfigError as err:
        raise ConfigError(str(err)) from None
    except MissingInputError as err:
        raise ConfigError(f"--pretrained-syntax {err}") from None


def check_variant_settings(variant: str, names: Iterable[str]) -> None:
    """A model setting given for one run (--set, a variant's option) that only other variants take would be saved in
    its config and ignored by its model: refused, naming the variants that take it. (An experiment's settings
    apply to the cells of every variant, so its cells are not checked.)"""
    for name, takers in other_variants_settings(variant, names).items():
        raise ConfigError(f"{name} is a setting of {', '.join(takers)}, not of variant {variant!r}, whose "
                          f"model would ignore it: drop it, or choose --variant {takers[0]}")


def other_variants_settings(variant: str, names: Iterable[str]) -> dict[str, list[str]]:
    """The model settings among `names` that `variant` does not take but other variants do, with those variants
    (BERT's own settings, which every variant takes, are none of them)."""
    own = get_variant(variant).setting_names()
    takers = {name: [v for v in variant_names() if name in get_variant(v).setting_names()] for name in names
              if name not in own}
    return {name: variants for name, variants in takers.items() if variants}


def resolve(task: str, variant: str | None, card: TaskCard, file_values: dict[str, Any], flags: dict[str, Any]
            ) -> RunConfig:
    """Merge, in order of precedence: RunConfig defaults, the card, the shape of the variant's pre-trained
    syntax module (`pretrained_syntax`), a config file (read by `read_config_file`, so checked),
    flags (each checked here). A key a layer does not hold is not given; one it holds as None is given as null
    (`--set max_grad_norm=null`: no clipping; a saved config's null: what its run used), and wins as any value
    does: callers leave options the user did not give out of `flags`.

    The variant is `variant`, else the config file's, else `DEFAULT_VARIANT`; the source language is the card's
    first training language (`card_defaults`) unless the file or a flag says. A config file of another task
    is refused; what a run derives (its card section and grids) is never taken from a file. The settings are
    checked against each other and the card here, reading no file (listing or planning an experiment resolves
    every cell); what they name (the model, the parsers' models, the data, the folders) is checked when the run
    is resolved into its resources (`xsyn.run.resources`), before anything expensive starts.
    """
    task = card.name  # `task` may be the card's file (--task PATH.toml)
    if file_values.get("task", task) != task:
        raise ConfigError(f"the --config file is a run of task {file_values['task']!r}, not {task!r}: "
                          f"pass --task {file_values['task']}, or delete `task` from the file")
    variant = variant or file_values.get("variant") or DEFAULT_VARIANT
    flags = {name: _check_setting(name, value, "", f"--{name.replace('_', '-')}") if value is not None else None
             for name, value in flags.items()}
    file_values = {k: v for k, v in file_values.items() if k not in (*DERIVED_FIELDS, "variant")}
    defaults, source, grid = card_defaults(card, variant)
    pretrained_syntax = (flags if "pretrained_syntax" in flags else file_values).get("pretrained_syntax")
    if pretrained_syntax:
        pretrained = pretrained_settings(variant, pretrained_syntax)
        defaults = {**defaults, MODEL_SETTINGS: {**defaults.get(MODEL_SETTINGS, {}), **pretrained}}
    merged: dict[str, Any] = {"task": task, "task_card": card.file or None, "variant": variant}
    model: dict[str, Any] = {}
    for layer in (defaults, file_values, flags):  # a key given as None is given as null ("none"): it wins too
        for key, value in layer.items():
            if key == MODEL_SETTINGS:
                model.update(value or {})
            elif key == "parsers" and value is not None:  # per language: a later layer names its languages
                merged["parsers"] = {**merged.get("parsers", {}), **value}
            else:
                merged[key] = value
    chosen = {*file_values, *flags, *file_values.get(MODEL_SETTINGS, {}), *flags.get(MODEL_SETTINGS, {})}
    source = _reproduced(merged, model, chosen, variant, source)
    merged[MODEL_SETTINGS] = model
    merged["hyperparameter_source"] = source
    merged["hyperparameter_grid"] = {name: values for name, values in grid.items() if name not in chosen}
    config = construct(RunConfig, absolute_paths(merged), "settings", error=ConfigError)  # read from any folder
    config.card = card
    _check(config, card)
    for name, values in config.hyperparameter_grid.items():
        log.warning(f"{source} searches {name} over {values}; this run takes {values[0]} (choose another with "
                 f"--set {name}=VALUE)")
    return config


def _reproduced(merged: dict[str, Any], model: dict[str, Any], chosen: set[str], variant: str, source: str) -> str:
    """Set, in place, what `reproduce` (a released code) sets for `variant` (`released_settings`), over the card's
    values and under the run's own (`chosen`); the run's source, saying so."""
    name = merged.get("reproduce", PAPER)
    check_value(RunConfig, "reproduce", str, name, "settings", "reproduce", error=ConfigError)
    if name == PAPER:
        return source
    inputs, own = released_settings(name, variant)
    merged.update({key: value for key, value in inputs.items() if key not in chosen})
    model.update({key: value for key, value in own.items() if key not in chosen})
    owner, code = released_codes()[name]
    return f"{source} + the released code {name} ({code.repository} {code.commit}" + (
        ")" if owner == variant else f"; its inputs: {owner}'s code)")


def _check(config: RunConfig, card: TaskCard) -> None:
    """What the fields' own rules cannot see: the settings against each other and against the card."""
    if config.pretrained_syntax and config.model == TINY:
        own = RunFolder(config.pretrained_syntax).tiny_model
        if own.is_dir():
            raise ConfigError(f"--pretrained-syntax {config.pretrained_syntax} was pre-trained on its own random tiny "
                              f"model ({own}); `--model tiny` would build another, whose word-piece embeddings the "
                              f"pre-trained module has never seen: pass --model {own}")
    if config.tiny_family is not None and config.model != TINY:
        raise ConfigError(f"tiny_family is the family of `--model tiny`; {config.model} has its own (drop "
                          "--set tiny_family)")
    if config.train_lang not in card.train_languages:
        raise ConfigError(f"--train-lang {config.train_lang!r}: task {card.name!r} has training data in "
                          f"{', '.join(card.train_languages)}")
    for name, choice in parser_settings(config).items():
        try:
            resolve_parser_choice(choice)
        except ParserChoiceError as err:
            raise ConfigError(f"{err} ({'--parser or --set parser=...' if name == 'parser' else f'--set {name}=...'})"
                              ) from None
    for lang in config.parsers:
        if lang not in card.languages:
            raise ConfigError(f"parsers.{lang}: task {card.name!r} has no language {lang!r} (its languages: "
                              f"{', '.join(card.languages)}); correct the language, or drop --set parsers.{lang}")
    if config.dev_fraction is not None:
        if "validation" in card.splits:
            raise ConfigError(f"--dev-fraction: task {card.name!r} ships a validation split; the option is for "
                              "tasks without one (they hold that share of the training data out)")


def parser_settings(config: RunConfig) -> dict[str, str]:
    """Every parser choice of a run by the setting that makes it: `parser`, then each language's (`parsers.sw`)."""
    return {"parser": config.parser, **{f"parsers.{lang}": choice for lang, choice in config.parsers.items()}}


def missing_parser_file(config: RunConfig) -> str | None:
    """What is missing where a parser choice of the run names a file or folder that is not there (a UDPipe model, a
    CoNLL-U source), with the setting where it is a language's own; None where all are there."""
    for name, choice in parser_settings(config).items():
        missing = resolve_parser_choice(choice).missing_path()
        if missing:
            return missing if name == "parser" else f"{missing} ({name})"
    return None
