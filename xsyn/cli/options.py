"""Option names that changed: the old ones keep working for one release, with a warning.

    @main.command()
    @renamed({"--steps": "--max-steps"}, values={"--split": {"dev": "validation"}})
    @click.option("--max-steps", ...)
    def pretrain_gat(...): ...

Every command of `xsyn` (and of `xsyn bench`) is an `XsynCommand`, which rewrites an old name (or an
old value of an option) in its arguments to the new one before click parses them, and logs a
warning that names both. Old names are not shown in `--help`; the README lists them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

import click

log = logging.getLogger("xsyn.cli")

_RENAMES = "__xsyn_renamed__"


def renamed(options: Mapping[str, str], values: Mapping[str, Mapping[str, str]] | None = None) -> Callable:
    """Declare a command's old option names ({old: new}) and old option values ({option: {old: new}})."""
    def mark(fn: Callable) -> Callable:  # adds to what shared option sets (e.g. parser_options) declared
        known_options, known_values = getattr(fn, _RENAMES, ({}, {}))
        setattr(fn, _RENAMES, ({**known_options, **options},
                               {**known_values, **{k: dict(v) for k, v in (values or {}).items()}}))
        return fn
    return mark


def rewrite_renamed(args: list[str], options: Mapping[str, str], values: Mapping[str, Mapping[str, str]]
                    ) -> list[str]:
    """`args` with old option names and values replaced by the new ones; each replacement is logged."""
    out: list[str] = []
    for arg in args:
        if arg == "--":
            out += args[len(out):]
            break
        name, eq, value = arg.partition("=")
        if name in options:
            log.warning(f"{name} is now {options[name]}; the old name goes in the next release")
            name = options[name]
            arg = f"{name}{eq}{value}"
        if eq and value in values.get(name, {}):
            arg = f"{name}={_new_value(name, value, values)}"
        elif out and out[-1] in values and arg in values[out[-1]]:
            arg = _new_value(out[-1], arg, values)
        out.append(arg)
    return out


def _new_value(option: str, old: str, values: Mapping[str, Mapping[str, str]]) -> str:
    new = values[option][old]
    log.warning(f"{option} {old} is now {option} {new}; the old value goes in the next release")
    return new


LOUDNESS = {"-v": logging.INFO, "--verbose": logging.INFO, "-q": logging.ERROR}  # `xsyn`'s own options


def take_loudness(args: list[str]) -> tuple[list[str], set[int]]:
    """`args` without `xsyn`'s -v/--verbose/-q (given after the command name), and the levels they ask for."""
    end = args.index("--") if "--" in args else len(args)
    levels = {LOUDNESS[arg] for arg in args[:end] if arg in LOUDNESS}
    return [arg for arg in args[:end] if arg not in LOUDNESS] + args[end:], levels


class XsynCommand(click.Command):
    """A command that accepts the old option names its callback declares with `renamed`, and `xsyn`'s
    -v/-q after its name as well as before it (`xsyn finetune ... -v`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args, levels = take_loudness(args)
        if len(levels) > 1:
            raise click.UsageError("-v and -q contradict each other; give one")
        if levels:
            logging.getLogger("xsyn").setLevel(levels.pop())
        options, values = getattr(self.callback, _RENAMES, ({}, {}))
        if options or values:
            args = rewrite_renamed(args, options, values)
        return super().parse_args(ctx, args)
