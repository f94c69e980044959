"""The evaluation's result fingerprint: an edited task card never reuses `partial/` results of the old one."""

from __future__ import annotations

from pathlib import Path

from xsyn.data.cards import load_card, parse_card
from xsyn.run.evaluation import _fingerprint
from xsyn.run.settings import RunConfig


class _Parser:
    name, version = "chain", "1"

    def settings(self) -> dict:
        return {}


TOY = {"name": "toy", "version": 1, "kind": "single-classification", "languages": ["en"], "splits": ["test"],
       "segments": ["text"], "labels": ["a", "b"], "metric": "accuracy",
       "local": [{"layout": "plain", "format": "tsv", "path": "{split}.tsv", "splits": {"test": "test"},
                  "options": {"columns": {"text": "text", "label": "label"}}}]}


def test_the_fingerprint_changes_with_the_cards_content_and_version_only():
    def fingerprint(card):
        return _fingerprint(Path("/no/checkpoint"), RunConfig(task="toy"), card, "test", _Parser(), None)

    base = fingerprint(parse_card(TOY, "toy.toml"))
    assert fingerprint(parse_card(TOY, "elsewhere/toy.toml")) == base  # where the card lies is not its content
    assert fingerprint(parse_card({**TOY, "labels": ["a", "c"]}, "toy.toml")) != base
    assert fingerprint(parse_card({**TOY, "version": 2}, "toy.toml")) != base
    assert fingerprint(load_card("pawsx")) != base
