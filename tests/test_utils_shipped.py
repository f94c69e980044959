"""The shipped folders (tasks/, treebanks/): found at the top of a checkout and inside an installed wheel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import xsyn
from xsyn.data.cards import list_tasks, load_card
from xsyn.syntax.treebanks import TreebankError, load_registry, read_treebank_table
from xsyn.utils.shipped import TASKS, TREEBANKS, shipped_folder

CHECKOUT = Path(__file__).resolve().parent.parent


def test_a_checkout_reads_the_top_level_folders():
    assert Path(xsyn.__file__).resolve().parent == CHECKOUT / "xsyn"
    assert shipped_folder(TASKS) == CHECKOUT / "tasks"
    assert shipped_folder(TREEBANKS) == CHECKOUT / "treebanks"
    assert not (CHECKOUT / "xsyn" / "tasks").exists()  # one copy of the cards in a checkout, not two
    assert list_tasks() == sorted(p.stem for p in (CHECKOUT / "tasks").glob("*.toml") if not p.stem.startswith("_"))
    assert load_card("pawsx").path == "tasks/pawsx.toml"
    assert load_registry()["en"][0].name == "UD_English-EWT"


def test_a_language_in_two_treebank_files_is_refused(tmp_path):
    extra = tmp_path / "more.toml"
    extra.write_text('[en]\nlanguage = "English"\n[[en.treebanks]]\nname = "UD_English-GUM"\ncode = "en_gum"\n'
                     'splits = ["train"]\nlicence = "CC BY-SA 4.0"\n', encoding="utf-8")
    assert read_treebank_table(extra, {})["en"][0].code == "en_gum"
    with pytest.raises(TreebankError, match=r"treebanks/more.toml: language 'en' is already defined"):
        read_treebank_table(extra, load_registry())


@pytest.mark.slow
def test_an_installed_wheel_carries_the_cards_and_the_treebank_table(tmp_path):
    """Build the wheel from a copy of the checkout, install it into a folder, and read a card from there."""
    source = tmp_path / "src"
    for name in ("xsyn", "tasks", "treebanks"):
        shutil.copytree(CHECKOUT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(CHECKOUT / name, source / name)
    env = {**os.environ, "PYTHONPATH": ""}
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), str(source)],
                   check=True, env=env, cwd=tmp_path)
    wheel = next((tmp_path / "dist").glob("xsyn-*.whl"))
    target = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], check=True, env=env)
    probe = ("import json, xsyn\nfrom xsyn.data.cards import list_tasks, load_card\n"
             "from xsyn.syntax.treebanks import load_registry\nfrom xsyn.utils.shipped import shipped_folder\n"
             "print(json.dumps({'package': xsyn.__file__, 'tasks': str(shipped_folder('tasks')),\n"
             "  'names': list_tasks(), 'pawsx': load_card('pawsx').languages, 'en': load_registry()['en'][0].name}))")
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True, cwd=tmp_path,
                         env={**env, "PYTHONPATH": str(target)})
    found = json.loads(out.stdout)
    assert Path(found["package"]).parent == target / "xsyn"
    assert found["tasks"] == str(target / "xsyn" / "tasks")
    assert found["names"] == list_tasks()
    assert found["pawsx"] == list(load_card("pawsx").languages)
    assert found["en"] == "UD_English-EWT"
