"""`xsyn tasks`: what the task cards say (kinds, languages, metrics, where the data comes from)."""

from __future__ import annotations

import click

from xsyn.cli.main import main


@main.command(name="tasks")
@click.argument("name", required=False)
@click.option("--markdown", is_flag=True, help="Print all tasks as one Markdown table.")
def tasks_command(name: str | None, markdown: bool) -> None:
    """List the task cards, or show one (NAME) with its splits, labels and hyperparameters."""
    from xsyn.data.cards import card_sources, list_tasks, load_card, tasks_markdown

    cards = [load_card(name)] if name else [load_card(n) for n in list_tasks()]
    if markdown:
        click.echo(tasks_markdown(cards))
        return
    for card in cards:
        local, hub = card_sources(card)
        click.echo(f"{card.name}: {card.title} ({card.kind}, metric {card.metric})")
        click.echo(f"  languages: {' '.join(card.languages)} (train on {' '.join(card.train_languages)})")
        click.echo(f"  local: {local}")
        click.echo(f"  hub: {hub}")
        click.echo(f"  dev set: {card.dev_set}")
        if name:
            click.echo(f"  splits: {', '.join(card.splits)}")
            for key in ("labels", "tags"):
                value = getattr(card, key)
                if value is not None:
                    click.echo(f"  {key}: {value if isinstance(value, str) else ' '.join(value)}")
            for variant, values in card.hyperparameters.items():
                click.echo(f"  [{variant}] " + ", ".join(f"{k}={v}" for k, v in values.items()))
