"""What `xsyn settings` lists: every key `--set` (and a --config file) takes for a variant's run, with its type,
its default and, given a task card, the card's value."""

from __future__ import annotations

import json
import typing
from dataclasses import MISSING, fields
from typing import Any

from xsyn.data.cards import TaskCard
from xsyn.models.variants import VARIANTS, get_variant, setting_fields
from xsyn.run.settings import DERIVED_FIELDS, MODEL_SETTINGS, RunConfig, card_defaults
from xsyn.utils.schema import describe, help_text


def setting_table(variant: str) -> dict[str, dict[str, Any]]:
    """Every key `--set` takes for a `variant` run, with its type, default and help (from the schema that declares
    it): the run settings, then the variant's model settings (its `XsynBertConfig` fields; none for the baseline)."""
    table: dict[str, dict[str, Any]] = {}
    hints = typing.get_type_hints(RunConfig)
    for f in fields(RunConfig):
        if f.name in (*DERIVED_FIELDS, MODEL_SETTINGS):
            continue
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        table[f.name] = {"type": describe(hints[f.name]), "default": default, "help": f.metadata.get("help", "")}
    own = get_variant(variant).setting_names()
    for name, declared in setting_fields().items():
        if name in own:
            table[name] = {"type": describe(declared.hint), "default": declared.default,
                           "help": help_text(declared.owner, name)}
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


def settings_text(table: dict[str, dict[str, Any]], source: str, given: set[str], with_card: bool) -> str:
    """`settings_with_card`'s table as aligned columns: key, type, default, (`with_card`) the card's value from
    `source` where the card gives one, and what the setting means."""
    header = ("key", "type", "default", *([f"card ({source})"] if with_card else []), "meaning")
    rows = [(name, row["type"], _shown(row["default"]), *([_shown(row["card"]) if name in given else ""]
                                                          if with_card else []), row["help"])
            for name, row in table.items()]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1]
                     for row in [header, *rows])


SETTINGS_PAGE_INTRO = """# Settings

Every key `xsyn finetune --set KEY=VALUE` (and a `--config` TOML or JSON file, an experiment file's
`[settings]` and `[grid]`, a task card's `[hyperparameters.<variant>]`) takes, with its type, its default and
what it means. Each is checked for its type and range before anything runs; a misspelt key is refused with
the closest valid one, and a model setting of another variant is refused naming the variants that take it.
A setting whose meaning says what "none" does takes null (`--set max_grad_norm=null`, `null` in a JSON file):
given as null it is none, whatever the default or the card says; not given, it keeps its default.

This page is generated from the schemas that declare the settings (`xsyn/run/settings.py` for the run,
each variant's settings class for its model): `xsyn settings --markdown` prints it, and a test fails when
the two differ. `xsyn settings --task T --variant V` adds a task card's values; a setting given no value
by the card takes the default here. A variant installed from another package lists its own settings the
same way (`xsyn settings --variant NAME`).
"""


def settings_markdown() -> str:
    """The documentation's settings page: the run settings, then each built-in variant's model settings."""
    run = {name: row for name, row in setting_table(VARIANTS[0]).items()}
    parts = [SETTINGS_PAGE_INTRO, "## Run settings (every variant)\n", _markdown_rows(run)]
    for variant in VARIANTS:
        own = {name: row for name, row in setting_table(variant).items() if name not in run}
        if own:
            parts += [f"## Model settings of `{variant}`\n", _markdown_rows(own)]
    return "\n".join(parts)


def _markdown_rows(table: dict[str, dict[str, Any]]) -> str:
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    lines += [f"| `{name}` | {row['type']} | `{_shown(row['default'])}` | {_cell(row['help'])} |".replace("`-`", "-")
              for name, row in table.items()]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _shown(value) -> str:
    return "-" if value is None else json.dumps(value) if not isinstance(value, str) else value
