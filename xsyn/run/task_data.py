"""The data of one run, one language (or language pair) and one split: examples -> records -> features.

    data = load_task_data(card, config, tokenizer, split="validation", langs={"sentence1": "en", ...},
                          names=names, distributed=accelerator)

Loading reads the task card's local layouts (else its hub sources); parsing attaches a syntax
record to every segment through the shared parse cache, each process parsing its own share;
featurising goes through `datasets.map` with a disk cache. Everything skipped, truncated or
windowed on the way is counted in `data.report`, which runs save next to their results.

A task whose benchmark ships no validation split (its card's `dev_fraction`) gets one held out of
its training data (`dev_holdout`, `xsyn.data.holdout`): the train and validation loads of a run
share one `DevHoldout`, and a resumed run reads the ids its first start recorded.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from xsyn.data.cards import TaskCard
from xsyn.data.example import Example, label_balanced
from xsyn.data.features import prepare_features
from xsyn.data.holdout import DevHoldout
from xsyn.data.loading import label_names, load_examples, tag_names
from xsyn.data.pairs import load_pair_examples
from xsyn.run.settings import RunConfig
from xsyn.syntax.cache import default_cache_dir, shared_cache
from xsyn.syntax.parse import default_workers, parse_by_language
from xsyn.syntax.parsing import Parser, build_parser
from xsyn.syntax.parsing.languages import LanguageParsers
from xsyn.syntax.parsing.registry import PARSER_OPTIONS
from xsyn.training.processes import wait_for_everyone
from xsyn.trees.conventions import InputConventions

log = logging.getLogger(__name__)


@dataclass
class LabelNames:
    """The class label (or intent) names and tag names of a task, in id order (fixed by the training run)."""

    labels: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)

    @classmethod
    def for_task(cls, card: TaskCard, train_examples: Sequence[Example]) -> LabelNames:
        label_sets = card.task_kind.gold.label_sets
        return cls(labels=label_names(card, list(train_examples)) if "labels" in label_sets else [],
                   tags=tag_names(card, list(train_examples)) if "tags" in label_sets else [])


@dataclass
class TaskData:
    card: TaskCard
    split: str
    langs: dict[str, str]  # segment name -> language
    examples: list[Example]
    features: Any  # datasets.Dataset
    report: dict[str, Any]

    def rows(self) -> list[dict[str, np.ndarray]]:
        return feature_rows(self.features)


def feature_rows(features) -> list[dict[str, np.ndarray]]:
    """Every feature of a `datasets.Dataset` as a dict of numpy arrays, in memory (fast batching).

    Read column by column: the dataset's own row iterator formats each row separately and is two
    orders of magnitude slower."""
    columns = features[:]  # dict of lists, converted once
    return [{name: np.asarray(values[i]) if isinstance(values[i], list) else values[i]
             for name, values in columns.items()} for i in range(len(features))]


def cache_root(config: RunConfig) -> Path:
    return Path(config.cache_dir) if config.cache_dir else default_cache_dir().parent


def make_parser(config: RunConfig, choice: str | None = None) -> Parser:
    """The parser of `choice` (default: the run's `parser`), given the run's parser options (those it declares:
    model folder, device, ...)."""
    return build_parser(choice or config.parser, **{option.setting: getattr(config, option.setting)
                                                    for option in PARSER_OPTIONS})


def make_parsers(config: RunConfig) -> LanguageParsers:
    """The run's parser of each language (its `parsers`, over `parser`), each choice built once, at first use."""
    return LanguageParsers(config.parser, config.parsers, lambda choice: make_parser(config, choice))


def parse_workers(config: RunConfig) -> int:
    """The run's parse processes (`parse_workers`), by default one per core."""
    return config.parse_workers or default_workers()


def dev_holdout(card: TaskCard, config: RunConfig, recorded_report: Path | None = None) -> DevHoldout | None:
    """The validation hold-out of a task without a dev set (None for the others). `recorded_report`
    is a resumed run's `data_report.json`: the hold-out it recorded is reused, not drawn again."""
    if "validation" in card.splits or card.dev_fraction is None:
        return None
    fraction = config.dev_fraction if config.dev_fraction is not None else card.dev_fraction
    if recorded_report is not None and recorded_report.is_file():
        report = json.loads(recorded_report.read_text(encoding="utf-8"))
        record = report.get("validation", {}).get("load", {}).get("holdout")
        if record:
            return DevHoldout.recorded(record, fraction, config.dev_seed)
    return DevHoldout(fraction, config.dev_seed)


def load_task_data(card: TaskCard, config: RunConfig, tokenizer, split: str, langs: Mapping[str, str],
                   names: LabelNames | None = None, parsers: LanguageParsers | None = None, distributed=None,
                   limit: int | None = None, loaded: dict[str, list[Example]] | None = None,
                   holdout: DevHoldout | None = None, progress: bool = False, warn_truncation: bool = False,
                   balanced: bool = False) -> tuple[TaskData, LabelNames]:
    """Load, parse and featurise one split. `names` None: take them from these (training) examples.

    `distributed` is an `accelerate.Accelerator` (or None): ranks parse disjoint shares of the
    segments and meet at a barrier; only then are features built (from the shared cache).
    `loaded` (language -> parsed examples of this split) is filled by single-language loads and
    reused by language pairs joined by id (generalized evaluation reads and parses nothing twice).
    `holdout` (see `dev_holdout`): the train and validation splits are both cut from the training data.
    `parsers`: each language's parser (default: the run's, `make_parsers`); the report records which parsed it.
    `progress`: show the parsing's sentences/s and ETA (on the main process). `warn_truncation`: inputs cut to
    max_length are a warning (training's data), not only a status line. `balanced`: `limit` keeps as many of each
    class label as it allows (`label_balanced`), not the first N.
    """
    langs = dict(langs)
    held = holdout is not None and split in ("train", "validation")
    if len(set(langs.values())) == 1:
        lang = next(iter(langs.values()))
        examples, load = load_examples(card, lang, "train" if held else split, config.data_dir,
                                       config.skip_bad_rows)
        load_report, summary = load.as_dict(), load.summary()
        if held:
            examples = holdout.split(examples)[split == "validation"]
            load_report.update(split=split, examples=len(examples), holdout=holdout.as_dict())
            summary += f"; {len(examples)} held out of train as {split}" if split == "validation" else \
                f"; {len(examples)} left after the validation hold-out"
        if loaded is not None:
            loaded[lang] = examples
    else:
        examples, pair = load_pair_examples(card, split, langs, config.data_dir, config.skip_bad_rows,
                                            loaded=loaded)
        load_report, summary = pair.as_dict(), pair.summary()
    if limit is not None and limit < len(examples):
        examples = label_balanced(examples, limit) if balanced else examples[:limit]
        summary += f"; {limit} used, label-balanced" if balanced else f"; the first {limit} used"
    names = names or LabelNames.for_task(card, examples)
    rank, world = (distributed.process_index, distributed.num_processes) if distributed else (0, 1)
    barrier = partial(wait_for_everyone, distributed) if distributed else None
    parsers = parsers or make_parsers(config)
    parsed = parse_by_language([s for e in examples for s in e.segments], parsers.__getitem__,
                               shared_cache(cache_root(config) / "parses"), rank=rank, world_size=world,
                               barrier=barrier, workers=parse_workers(config), progress=progress and rank == 0)

    with distributed.main_process_first() if distributed else nullcontext():  # others reuse its cache
        features, feature_report = prepare_features(
            card, examples, tokenizer, config.max_length, doc_stride=config.doc_stride,
            max_query_length=config.max_query_length, labels=names.labels,
            tags=names.tags, cache_dir=cache_root(config) / "features", num_proc=config.num_proc,
            conventions=InputConventions.of(config))
    report = {"load": load_report, "parse": parsed.as_dict(), "parsers": parsers.choices(langs.values()),
              "features": feature_report.as_dict(), "limit": limit,
              **({"limit_label_balanced": True} if balanced and limit is not None else {})}
    if rank == 0:
        log.info(summary)
        log.info(f"parsing: {parsed}")
        log.info(f"features: {feature_report.features} from {feature_report.examples} examples"
                 + (" (from the cache)" if feature_report.cache_hit else f" in {feature_report.seconds:.1f}s"))
        if cut := feature_report.truncation(config.max_length):
            (log.warning if warn_truncation else log.info)(f"{card.name} {split}: {cut} (data_report.json)")
    return TaskData(card, split, langs, examples, features, report), names

