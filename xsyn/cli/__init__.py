"""The `xsyn` command line: the only package that imports click, and the only one that imports the others
to drive them. One module per group of commands registers them on `main` (or `bench`) when imported.

Heavy libraries (torch, transformers, datasets) are imported inside the commands, so `xsyn --help`
and the commands that need no model answer at once.
"""

# each module registers its commands when imported
from xsyn.cli import bench, demo, experiment, predict, pretrain, report, run, settings, syntax, tasks  # noqa: F401
from xsyn.cli.main import main

__all__ = ["main"]
