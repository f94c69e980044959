"""One source for settings: each setting's help text lives in the schema that declares it, and `xsyn settings`
and the documentation's settings page are made from it."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner
from console import REPO
from huggingface_hub.errors import StrictDataclassFieldValidationError

from xsyn.cli import main
from xsyn.models.variants import VARIANTS, get_variant
from xsyn.run.settings_table import setting_table, settings_markdown
from xsyn.utils.schema import at_least, help_text, setting, strict

PAGE = REPO / "docs" / "settings.md"


def test_the_settings_page_is_the_one_the_schemas_make():
    assert PAGE.read_text(encoding="utf-8") == settings_markdown(), \
        "docs/settings.md differs from the schemas: regenerate it with `xsyn settings --markdown > docs/settings.md`"


def test_every_setting_xsyn_settings_lists_has_help_and_is_on_the_page():
    page = PAGE.read_text(encoding="utf-8")
    for variant in VARIANTS:
        for name, row in setting_table(variant).items():
            assert row["help"], f"{name} ({variant}) has no help in its schema: declare it with setting(..., help=)"
            assert f"| `{name}` |" in page, f"{name} ({variant}) is not on docs/settings.md"
    sep = page.split("## Model settings of `sep`", 1)[1]
    assert "| `sep_alpha` | a number | `0.1` | H' = (1 - alpha) H + alpha sigmoid(W1 H + W2 D~ H)" in sep


def test_xsyn_settings_shows_each_settings_meaning_from_its_schema():
    shown = CliRunner().invoke(main, ["settings", "--variant", "wla"]).output.splitlines()
    assert shown[0].split() == ["key", "type", "default", "meaning"]
    window = next(line for line in shown if line.startswith("wla_window "))
    assert window.endswith(help_text(get_variant("wla").settings, "wla_window"))
    assert window.endswith("k: word j is local to word i iff abs(i - j) <= k")


def test_a_setting_carries_its_help_and_its_rule():
    @strict
    @dataclasses.dataclass
    class Toy:
        size: int = setting(2, help="how many", check=at_least(1))
        name: str = setting("x", help="what it is called")

    assert help_text(Toy, "size") == "how many" and help_text(Toy, "name") == "what it is called"
    assert help_text(Toy, "other") == ""
    assert Toy().size == 2
    with pytest.raises(StrictDataclassFieldValidationError, match="must be >= 1"):
        Toy(size=0)
