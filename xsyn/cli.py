"""The `xsyn` command line. Each command lives next to the code it drives and registers itself here.

Heavy libraries (torch, transformers, datasets) are imported inside commands, so `xsyn --help`
answers at once.
"""

from __future__ import annotations

import importlib

import click

from xsyn import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="xsyn")
def main() -> None:
    """xsyn: syntax in cross-lingual transfer.

    Fine-tune multilingual BERT with dependency syntax in its attention on English task data and
    measure zero-shot transfer per language and over language pairs.
    """


@main.group()
def bench() -> None:
    """Benchmarks (speed and memory); each prints figures, `--json` prints one JSON object."""


# Modules that add commands to `main` or `bench` when imported.
_COMMAND_MODULES = (
    "xsyn.data.commands",
    "xsyn.syntax.commands",
    "xsyn.models.bench",
    "xsyn.syntax.evaluation",
    "xsyn.pretraining.command",
    "xsyn.report.command",
    "xsyn.commands",
    "xsyn.demo",
    "xsyn.harness_bench",
)
for _module in _COMMAND_MODULES:
    importlib.import_module(_module)
