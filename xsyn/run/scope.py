"""What an evaluation scores: its split (`default_split`), its languages, and, for a task without a dev set of
its own, the share of the training data its run held out (`evaluation_scope`). Decided before a model is loaded,
and for `finetune --eval-langs/--do-eval` before it trains (`xsyn.run.resources.finetune_resources`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from xsyn.data.cards import TaskCard
from xsyn.data.holdout import DevHoldout
from xsyn.run.settings import RunConfig
from xsyn.run.task_data import dev_holdout
from xsyn.training.folder import RunFolder
from xsyn.utils.errors import InputError, MissingInputError


def default_split(card: TaskCard) -> str:
    """`test`, unless the card's test split is missing or unlabelled (then `validation`)."""
    return "test" if "test" in card.splits and "test" not in card.unlabelled_splits else "validation"


def evaluation_scope(run_dir: str | Path, config: RunConfig, split: str, langs: Sequence[str] | None
                     ) -> tuple[DevHoldout | None, list[str]]:
    """The validation hold-out (of a task without a dev set of its own: the ids its run held out, in the
    training language only; else None) and the languages to evaluate, each checked against the card."""
    card = config.card
    langs = evaluation_languages(config, split, langs)
    if not held_out_split(card, split):
        return None, langs
    report = RunFolder(run_dir).data_report
    holdout = dev_holdout(card, config, report)
    if holdout.ids is None:
        raise MissingInputError(f"{report} records no validation hold-out: task {card.name!r} has no dev set of "
                                "its own, and its validation split is the share of the training data a run held "
                                "out; evaluate a run folder that has one")
    return holdout, langs


def held_out_split(card: TaskCard, split: str) -> bool:
    """Whether `split` is the share of the training data a run holds out (a task without a dev set of its own)."""
    return split == "validation" and "validation" not in card.splits and card.dev_fraction is not None


def evaluation_languages(config: RunConfig, split: str, langs: Sequence[str] | None) -> list[str]:
    """The languages to evaluate (default: the task's), each checked against the card and the split."""
    card = config.card
    if held_out_split(card, split):
        if langs and list(langs) != [config.train_lang]:
            raise InputError(f"the held-out validation split of task {card.name!r} is in the training language "
                             f"only; pass --langs {config.train_lang}")
        return [config.train_lang]
    card.check_split(split)
    langs = list(langs or card.languages)
    for lang in langs:
        card.check_lang(lang)
    return langs
