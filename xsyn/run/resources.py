"""A run resolved once: its settings turned into the objects its stages use, every input checked in one place.

    config, resume = finetune_settings(task="pawsx", variant="gat")   # settings: merged and checked, no file read
    run = finetune_resources(config, eval_langs=[])                  # the checks below; the built objects
    finetune(run)                                                    # reads no name again
    run.parser_choices                                               # {"en": "stanza", "sw": "udpipe:...", ...}

Settings are names (a model, a tokenizer, a parser per language, folders); a stage that turned a name into its
object again would read its files again and check it again. Here each is built once, in this order, the cheapest
and most basic first, before anything expensive (reading data, parsing, loading weights) starts; each failure
names its setting or file and the fix:

    1. the settings   the trackers are installed; the languages evaluated after training (--eval-langs) are the
                      task's; then the readiness table of the run's languages is logged (each one's data source and
                      parser, what is missing and the fix: `xsyn.run.readiness`; information, the checks decide)
    2. the parsers    each parser choice's file (a UDPipe model, a CoNLL-U source) is there, and each language's
                      own parser can parse it (its models there or downloadable: the network is probed once, here)
    3. the model      the checkpoint's config.json, read once; the tokenizer, loaded once, fits it; the run's model
                      settings build on it; --max-length within its positions
    4. the batches    every process has a row of every micro-batch
    5. the data       every split x language the run reads has local files or a hub source
    6. the folders    the output and cache folders are writable; the output's disk holds a checkpoint

An evaluation resolves its own (`evaluation_resources`): the checkpoint's tokenizer, its scope (split, languages,
held-out ids), each language's parser, the data and the output folder.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xsyn.data.cards import TaskCard
from xsyn.data.holdout import DevHoldout
from xsyn.data.loading import default_data_dir
from xsyn.models.factory import parameter_count
from xsyn.models.tokenizers import load_tokenizer
from xsyn.run.checks import (
    CHECKPOINT_BYTES_PER_PARAMETER,
    check_data,
    check_evaluation_data,
    check_free_space,
    check_model,
    check_model_settings,
    check_trackers,
)
from xsyn.run.readiness import (
    LanguageNeed,
    ReadinessRow,
    evaluation_needs,
    finetune_needs,
    readiness_rows,
    readiness_text,
)
from xsyn.run.scope import default_split, evaluation_languages, evaluation_scope, held_out_split
from xsyn.run.settings import ConfigError, RunConfig, missing_parser_file
from xsyn.run.task_data import cache_root, make_parsers
from xsyn.syntax.parsing.languages import LanguageParsers
from xsyn.training.driver import check_micro_batches
from xsyn.training.folder import RunFolder, launched_processes
from xsyn.training.precision import check_training_precision
from xsyn.utils.io import check_writable
from xsyn.utils.network import offline_unless_reachable
from xsyn.utils.progress import NOTE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvaluationScope:
    """What an evaluation scores: its split, its languages, and the training share a run held out as that split
    (a task without a dev set of its own; None otherwise, or where the training has not drawn it yet)."""

    split: str
    langs: list[str]
    holdout: DevHoldout | None = None


@dataclass
class RunResources:
    """A run's objects, built and checked once (`finetune_resources`, `evaluation_resources`).

    `base_config` is the checkpoint's configuration (its config.json, read once; `tiny`: its preset) and
    `model_config` the run's model on it (None for an evaluation: the checkpoint's own is loaded with its weights);
    `evaluation` is what the run scores (a fine-tuning's: what --eval-langs scores after training, or None)."""

    config: RunConfig
    tokenizer: Any
    parsers: LanguageParsers
    folder: RunFolder
    languages: list[str]  # every language the run reads, the training language first
    base_config: Any = None
    model_config: Any = None
    evaluation: EvaluationScope | None = None

    @property
    def card(self) -> TaskCard:
        return self.config.card

    @property
    def parser_choices(self) -> dict[str, str]:
        """Each language the run reads and its parser choice (`--parser`, or its own `parsers.LANG`)."""
        return self.parsers.choices(self.languages)


def finetune_resources(config: RunConfig, eval_langs: Sequence[str] | None = None,
                       processes: int | None = None) -> RunResources:
    """A fine-tuning run's resources, checked in the module's order; `eval_langs` as `finetune_evaluate_push`
    takes them (None: no evaluation after training; []: every language of the task); `processes`: the run's
    (default: those it is launched with)."""
    check_trackers(config.trackers or [])  # 1. the settings
    check_training_precision(config.mixed_precision)
    after = _evaluation_after_training(config, eval_langs)
    langs = list(dict.fromkeys([config.train_lang, *(after.langs if after else [])]))
    parsers = make_parsers(config)
    log_readiness(config, parsers, finetune_needs(config.card, config.train_lang),  # (the network decided here)
                  f"the language this run trains on ({config.train_lang}) and those `xsyn evaluate` scores after it")
    checked_parsers(config, langs, parsers)  # 2. (first: the network decided once, for the model and data too)
    tokenizer, base = check_model(config.model, config.tokenizer, config.tiny_family)  # 3.
    model = check_model_settings(config, base)
    check_micro_batches(config, processes or launched_processes())  # 4. (no PartialState before the run's Accelerator)
    _check_training_data(config)  # 5.
    if after is not None and not held_out_split(config.card, after.split):
        check_evaluation_data(config.card, config, after.split, after.langs, False, (
            "--eval-langs and --do-eval score this split after training: choose languages that have data, or leave "
            "the option out and score the best checkpoint with `xsyn evaluate` (its --split, --skip-missing)"))
    folder = RunFolder(check_writable(config.resolved_output_dir(), "--output-dir"))  # 6.
    check_writable(cache_root(config), "--cache-dir")
    if config.pretrained_syntax is None:  # (a pre-trained module sets the shape; the estimate stays close)
        check_free_space(folder.path, parameter_count(base) * CHECKPOINT_BYTES_PER_PARAMETER, "--output-dir")
    return RunResources(config, tokenizer, parsers, folder, langs, base, model, after)


def evaluation_resources(checkpoint_dir: Path, run_dir: Path, config: RunConfig, split: str | None,
                         langs: Sequence[str] | None, generalized: bool, out: Path, skip_missing: bool
                         ) -> RunResources:
    """An evaluation's resources: its scope (the split, default the card's; the languages, each the task's; a
    held-out split's ids, as its run recorded them), each language's parser, the data of every language (and,
    with `generalized`, every pair read from files of its own; with `skip_missing` those without are left to be
    skipped), the output folder, then the checkpoint's tokenizer: all before the model is loaded."""
    split = split or default_split(config.card)
    holdout, langs = evaluation_scope(run_dir, config, split, langs)
    parsers = make_parsers(config)
    log_readiness(config, parsers, evaluation_needs(config.card, [split], langs),
                  f"the languages this evaluation scores ({split})")
    checked_parsers(config, langs, parsers)
    check_evaluation_data(config.card, config, split, langs, generalized, None if skip_missing else (
        "pass --langs to choose languages, or --skip-missing to evaluate those that have data"))
    check_writable(out, "--output-dir")
    return RunResources(config, load_tokenizer(checkpoint_dir), parsers, RunFolder(run_dir), langs,
                        evaluation=EvaluationScope(split, langs, holdout))


def checked_parsers(config: RunConfig, langs: Sequence[str], parsers: LanguageParsers | None = None
                    ) -> LanguageParsers:
    """The run's parser of each language (`parsers`, default: made here), built once per choice: every choice's
    file (a UDPipe model, a CoNLL-U source) is there, and each of `langs` is one its own parser can parse (its
    models there, or downloadable: whether the network is there is decided here, once, for the checks that follow
    too)."""
    missing = missing_parser_file(config)
    if missing:
        raise ConfigError(missing)
    online = not offline_unless_reachable()
    parsers = parsers or make_parsers(config)
    parsers.require(langs, online)
    return parsers


def readiness_of(config: RunConfig, needs: Sequence[LanguageNeed], parsers: LanguageParsers | None = None
                 ) -> list[ReadinessRow]:
    """The readiness table's rows of a run's languages (`xsyn.run.readiness`), each with its own parser of
    `parsers` (default: the run's, `parsers` over `parser`, made here; each choice built once). Whether the network
    is there is decided here, once."""
    online = not offline_unless_reachable()
    parsers = parsers or make_parsers(config)
    choices = parsers.choices(need.lang for need in needs)
    a_language_of = {choice: lang for lang, choice in reversed(choices.items())}
    return readiness_rows(config.card, needs, choices, lambda choice: parsers[a_language_of[choice]],
                          config.data_dir, online)


def log_readiness(config: RunConfig, parsers: LanguageParsers, needs: Sequence[LanguageNeed], which: str
                  ) -> list[ReadinessRow]:
    """The readiness table of `which` languages, logged (NOTE: shown by default, not with -q); its rows."""
    rows = readiness_of(config, needs, parsers)
    folder = config.data_dir or default_data_dir(config.card)
    log.log(NOTE, readiness_text(f"{config.card.name}: {which}, before anything is read (data folder {folder}):",
                                   rows))
    return rows


def _evaluation_after_training(config: RunConfig, langs: Sequence[str] | None) -> EvaluationScope | None:
    """What `finetune --eval-langs/--do-eval` evaluates after training, its languages checked against the card: a
    misspelt language is named at once, not after the training (a held-out dev set is drawn by the training)."""
    if langs is None:
        return None
    split = default_split(config.card)
    return EvaluationScope(split, evaluation_languages(config, split, langs))


def _check_training_data(config: RunConfig) -> None:
    """The training language has data in the splits fine-tuning reads (train, and validation unless the task holds
    a share of train out as its dev set)."""
    card = config.card
    held_out = "validation" not in card.splits and card.dev_fraction is not None
    same_language = {segment: config.train_lang for segment in card.segments}
    for split in ["train"] if held_out else ["train", "validation"]:
        for _, err in check_data(card, split, [same_language], config.data_dir):
            raise err
