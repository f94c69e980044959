"""What `xsyn settings` lists: every key `--set` (and a --config file) takes for a variant's run, with its type,
its default and, given a task card, the card's value."""

from __future__ import annotations

import typing
from dataclasses import MISSING, fields
from typing import Any

from xsyn.data.cards import TaskCard
from xsyn.models.variants import get_variant, model_settings
from xsyn.run.settings import DERIVED_FIELDS, MODEL_SETTINGS, RunConfig, card_defaults
from xsyn.utils.schema import describe


def setting_table(variant: str) -> dict[str, dict[str, Any]]:
    """Every key `--set` takes for a `variant` run, with its type and default: the run settings, then the
    variant's model settings (its `XsynBertConfig` fields; none for the baseline)."""
    table: dict[str, dict[str, Any]] = {}
    hints = typing.get_type_hints(RunConfig)
    for f in fields(RunConfig):
        if f.name in (*DERIVED_FIELDS, MODEL_SETTINGS):
            continue
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        table[f.name] = {"type": describe(hints[f.name]), "default": default}
    own = get_variant(variant).setting_names()
    for name, (hint, default) in model_settings().items():
        if name in own:
            table[name] = {"type": describe(hint), "default": default}
    return table


def settings_with_card(variant: str, card: TaskCard | None = None
                       ) -> tuple[dict[str, dict[str, Any]], str, set[str]]:
    """`setting_table` with each setting's value in the card's section for the variant under `card` (None where
    the card gives none), the section's name ("" without a card) and the settings the card gives."""
    values, source = {}, ""
    if card is not None:
        run_values, source, _ = card_defaults(card, variant)
        values = {**{k: v for k, v in run_values.items() if k != MODEL_SETTINGS}, **run_values.get(MODEL_SETTINGS, {})}
    table = {name: {**row, "card": values.get(name)} for name, row in setting_table(variant).items()}
    return table, source, set(values)
