"""The `xsyn` command line: the only package that imports click, and the only one that imports the others
to drive them. `cli/main.py` holds the `xsyn` group and adds the commands, one module per group of commands;
`cli/options.py` what the commands share.

Heavy libraries (torch, transformers, datasets) are imported inside the command bodies, so `xsyn --help`
and the commands that need no model answer at once.
"""

from xsyn.cli.main import main

__all__ = ["main"]
