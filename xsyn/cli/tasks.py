"""`xsyn tasks`: what the task cards say (kinds, languages, metrics, where the data comes from)."""

from __future__ import annotations

import click

from xsyn.cli.options import XsynCommand
from xsyn.data.cards import card_text, list_tasks, load_card, tasks_markdown


@click.command(name="tasks", cls=XsynCommand)
@click.argument("name", required=False)
@click.option("--markdown", is_flag=True, help="Print all tasks as one Markdown table.")
def tasks_command(name: str | None, markdown: bool) -> None:
    """List the task cards, or show one (NAME) with its splits, labels and hyperparameters."""
    cards = [load_card(name)] if name else [load_card(n) for n in list_tasks()]
    if markdown:
        click.echo(tasks_markdown(cards))
        return
    for card in cards:
        click.echo(card_text(card, detailed=bool(name)))
