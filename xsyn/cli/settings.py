"""`xsyn settings`: every key `--set` takes, with its type, its default and what a task card makes of it."""

from __future__ import annotations

import json

import click

from xsyn.cli.options import RegistryChoice, TaskChoice, XsynCommand
from xsyn.data.cards import load_card
from xsyn.models.variants import DEFAULT_VARIANT, variant_names


@click.command(name="settings", cls=XsynCommand)
@click.option("--task", type=TaskChoice(), default=None,
              help="Also show this task card's value of each setting (its papers' hyperparameters).")
@click.option("--variant", type=RegistryChoice(variant_names), default=DEFAULT_VARIANT, show_default=True,
              help="The variant whose card section (--task) and model settings are shown.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object {key: {type, default, help, card}}.")
@click.option("--markdown", is_flag=True, help="Print the documentation's settings page (every built-in variant).")
def settings_command(task: str | None, variant: str, as_json: bool, markdown: bool) -> None:
    """List every setting `finetune --set KEY=VALUE` (and a --config file) takes: type, default, card value, meaning.

    Run settings come first, then the model settings of the variant's syntax path.
    """
    from xsyn.run.settings_table import settings_markdown, settings_text, settings_with_card

    card = load_card(task) if task else None
    table, source, given = settings_with_card(variant, card)
    shown = (settings_markdown().rstrip("\n") if markdown else json.dumps(table, default=str) if as_json
             else settings_text(table, source, given, with_card=card is not None))
    click.echo(shown)
