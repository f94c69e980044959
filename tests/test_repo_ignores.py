"""The folders the README's (and the documentation's) examples write into are ignored by git: a newcomer who
follows them in the checkout does not see models, runs and reports as changes to commit."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# an output an example names: a folder (--output-dir X) or a file inside one (--output models/x.udpipe)
OUTPUT = re.compile(r"--(?:output-dir|output)[ =]([A-Za-z0-9_.][A-Za-z0-9_./-]*)")


def example_folders() -> set[str]:
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    found = set()
    for page in pages:
        for path in OUTPUT.findall(page.read_text(encoding="utf-8")):
            folder = path.split("/")[0]
            if ("/" in path or "." not in path) and not folder.isupper():  # not records.jsonl, nor DIR or FILE
                found.add(folder)
    return found


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout")
def test_every_folder_the_examples_write_into_is_ignored_by_git():
    folders = example_folders()
    assert {"runs", "models", "reports"} <= folders  # what the README's examples use today
    check = subprocess.run(["git", "check-ignore", "--no-index", *[f"{folder}/x" for folder in sorted(folders)]],
                           cwd=REPO, capture_output=True, text=True)
    ignored = {line.split("/")[0] for line in check.stdout.splitlines()}
    assert ignored == folders, f"not ignored by .gitignore: {sorted(folders - ignored)}"


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout")
def test_the_run_blocks_write_nothing_but_ignored_files_into_the_checkout():
    """The documented walk-throughs run in a checkout: a log, an input or an output they write (a redirection,
    --output, --output-dir) beside the checkout's own files would show up as a change to commit."""
    from test_docs_commands import PAGES, shell_blocks

    written = {path for page in PAGES for _, _, mark, text in shell_blocks(page) if mark == "run"
               for path in re.findall(r"(?:>|--output(?:-dir)?[ =])\s*([^\s;|&]+)", text)}
    assert written, "no run block writes a file: the pattern no longer finds them"
    check = subprocess.run(["git", "check-ignore", "--no-index", *sorted(written)], cwd=REPO, capture_output=True,
                           text=True)
    ignored = set(check.stdout.split())
    assert ignored == written, f"not ignored by .gitignore: {sorted(written - ignored)}"
