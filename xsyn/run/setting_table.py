"""What `xsyn settings` lists: every key `--set` (and a --config file) takes for a variant's run, with its type,
its default and, given a task card, the card's value; and the check that a run is given no other variant's."""

from __future__ import annotations

import json
import typing
from collections.abc import Iterable
from dataclasses import MISSING, fields
from typing import Any

from xsyn.data.cards import TaskCard
from xsyn.models.variants import get_variant, model_settings, variant_names
from xsyn.run.settings import DERIVED_FIELDS, MODEL_SETTINGS, ConfigError, RunConfig, card_defaults
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


def settings_text(table: dict[str, dict[str, Any]], source: str, given: set[str], with_card: bool) -> str:
    """`settings_with_card`'s table as aligned columns: key, type, default and (`with_card`) the card's value from
    `source` where the card gives one."""
    header = ("key", "type", "default", f"card ({source})" if with_card else "")
    rows = [(name, row["type"], _shown(row["default"]), _shown(row["card"]) if name in given else "")
            for name, row in table.items()]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3]
                     for row in [header, *rows])


def _shown(value) -> str:
    return "-" if value is None else json.dumps(value) if not isinstance(value, str) else value
