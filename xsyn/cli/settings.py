"""`xsyn settings`: every key `--set` takes, with its type, its default and what a task card makes of it."""

from __future__ import annotations

import json

import click

from xsyn.cli.main import RegistryChoice, main
from xsyn.cli.run import TaskChoice
from xsyn.models.variants import DEFAULT_VARIANT, variant_names


@main.command(name="settings")
@click.option("--task", type=TaskChoice(), default=None,
              help="Also show this task card's value of each setting (its papers' hyperparameters).")
@click.option("--variant", type=RegistryChoice(variant_names), default=DEFAULT_VARIANT, show_default=True,
              help="The variant whose card section (--task) and model settings are shown.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object {key: {type, default, card}}.")
def settings_command(task: str | None, variant: str, as_json: bool) -> None:
    """List every setting `finetune --set KEY=VALUE` (and a --config file) takes: its type, default and card value.

    Run settings come first, then the model settings of the variant's syntax path.
    """
    from xsyn.data.cards import load_card
    from xsyn.run.setting_table import settings_with_card

    card = load_card(task) if task else None
    table, source, given = settings_with_card(variant, card)
    if as_json:
        click.echo(json.dumps(table, default=str))
        return
    header = ("key", "type", "default", f"card ({source})" if card is not None else "")
    rows = [(name, row["type"], _show(row["default"]), _show(row["card"]) if name in given else "")
            for name, row in table.items()]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3])


def _show(value) -> str:
    return "-" if value is None else json.dumps(value) if not isinstance(value, str) else value
