"""What the commands share: click types (a registry's names, a task, checkpointing steps, a parser), the command
classes (`xsyn`'s -v/-q after a command's name; the variants' own options), option decorators (the data options,
the parser options) and the Ctrl-C message. No command lives here, and nothing here imports a command module."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

import click

from xsyn.data.cards import list_tasks
from xsyn.models.variants import option_settings
from xsyn.syntax.parsing.registry import (
    PARSER_OPTIONS,
    ParserChoiceError,
    ParserOption,
    parsers_help,
    resolve_parser_choice,
)
from xsyn.training.folder import RunFolder
from xsyn.utils.errors import OptionError
from xsyn.utils.progress import NOTE
from xsyn.utils.schema import did_you_mean

COUNT, FOLDER = click.IntRange(min=1), click.Path(file_okay=False)  # the commonest option types


class RegistryChoice(click.Choice):
    """One of a registry's names (`xsyn.utils.registry`), read when a command line is parsed or its help shown, not
    when the command is defined: a variant another package adds through an entry point is a choice too."""

    def __init__(self, names: Callable[[], Iterable[str]]):
        self.names, self.case_sensitive = names, True

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self.names())


class TaskChoice(click.ParamType):
    """A shipped task card's name (see `xsyn tasks`) or a card file of one's own (`PATH.toml`)."""

    name = "TASK|PATH.toml"

    def convert(self, value, param, ctx):
        if str(value).endswith(".toml") or value in list_tasks():
            return value
        self.fail(f"{value!r} is neither a task ({', '.join(list_tasks())}) nor a card file (PATH.toml)"
                  f"{did_you_mean(value, list_tasks())}", param, ctx)

    def shell_complete(self, ctx, param, incomplete):
        return [click.shell_completion.CompletionItem(name) for name in list_tasks() if name.startswith(incomplete)]


class _CheckpointingSteps(click.ParamType):
    """`N` (optimiser steps, >= 1) or `epoch`."""

    name = "N|epoch"

    def convert(self, value, param, ctx):
        if isinstance(value, int) or value == "epoch":
            return value
        try:
            steps = int(value)
        except ValueError:
            steps = 0
        if steps < 1:
            self.fail(f"{value!r}: give a number of optimiser steps (>= 1) or 'epoch'", param, ctx)
        return steps


CHECKPOINTING_STEPS = _CheckpointingSteps()

LOUDNESS = {"-v": logging.INFO, "--verbose": logging.INFO, "-q": logging.ERROR}  # `xsyn`'s own options


def set_loudness(level: int) -> None:
    """What reaches stderr: the `xsyn` logger from `level` up; at errors only (`-q`), the libraries' warnings
    too are off (Python warnings; transformers' and datasets' loggers, here and in the processes started)."""
    logging.getLogger("xsyn").setLevel(level)
    if level >= logging.ERROR:
        warnings.simplefilter("ignore")
        for name in ("TRANSFORMERS_VERBOSITY", "DATASETS_VERBOSITY"):  # read when each library is imported
            os.environ.setdefault(name, "error")
        for library in ("transformers", "datasets"):
            if library in sys.modules:  # imported already
                logging.getLogger(library).setLevel(logging.ERROR)


def notes_off() -> None:
    """A command's --quiet: no notes (`xsyn.utils.progress.NOTE`: working offline, ...) on the `xsyn` logger's
    lines; warnings and errors show, and status lines where -v asks for them."""
    for handler in logging.getLogger("xsyn").handlers:
        handler.addFilter(_without_notes)


def _without_notes(record: logging.LogRecord) -> bool:
    return record.levelno != NOTE


def take_loudness(args: list[str]) -> tuple[list[str], set[int]]:
    """`args` without `xsyn`'s -v/--verbose/-q (given after the command name), and the levels they ask for."""
    end = args.index("--") if "--" in args else len(args)
    levels = {LOUDNESS[arg] for arg in args[:end] if arg in LOUDNESS}
    return [arg for arg in args[:end] if arg not in LOUDNESS] + args[end:], levels


class XsynCommand(click.Command):
    """A command that takes `xsyn`'s -v/-q after its name as well as before it (`xsyn finetune ... -v`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args, levels = take_loudness(args)
        if len(levels) > 1:
            raise click.UsageError("-v and -q contradict each other; give one")
        if levels and int(os.environ.get("RANK", "0")) == 0:  # (another rank stays at errors only)
            set_loudness(levels.pop())
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except OptionError as err:  # settings missing or at odds, found by the stage: a usage error, as click's
            raise click.UsageError(str(err), ctx) from None


class WithVariantOptions(XsynCommand):
    """A command that also takes the options the registered variants declare (`declared`: `SyntaxVariant.options`, or
    the pre-trained variant's), read when its command line is parsed or its help shown (as `RegistryChoice`)."""

    def __init__(self, *args, declared: Callable[[], dict] = option_settings, **kwargs):
        super().__init__(*args, **kwargs)
        self.declared = declared  # lists them: {setting: (its SettingField, the option's help)}

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        types = {bool: click.BOOL, int: click.INT, float: click.FLOAT, float | int: click.FLOAT}  # by type hint
        own = ctx.meta.setdefault(f"xsyn.variant_options.{self.name}", [  # one object each per invocation (click's)
            click.Option([f"--{name.replace('_', '-')}"], help=help, type=types.get(setting.hint, click.STRING))
            for name, (setting, help) in self.declared().items()])
        params = super().get_params(ctx)  # click puts --help last: the variants' options go before it
        return params[:-1] + own + params[-1:] if self.get_help_option(ctx) else params + own


def options(*decorators: Callable) -> Callable:
    """Several option decorators as one, applied in the order given (the first is listed first in the help)."""
    def apply(fn: Callable) -> Callable:
        for decorate in reversed(decorators):
            fn = decorate(fn)
        return fn
    return apply


# -- the parser options: made from the parser registry (`xsyn.syntax.parsing.registry`), `--parser` with the
# registered parsers' help and one flag per parser option, defined once for every command that parses

class ParserChoiceType(click.ParamType):
    """A parser choice (`stanza`, `udpipe:MODEL`, ...), checked against the registry."""

    name = "PARSER"

    def convert(self, value, param, ctx):
        try:
            resolve_parser_choice(value)
        except ParserChoiceError as err:
            self.fail(str(err), param, ctx)
        return value


def parser_option(default: str | None = None, purpose: str = "The parser", default_note: str = "") -> Callable:
    """`--parser`, with the registered parsers in its help."""
    shown = f" [default: {default}]" if default else (f" [default: {default_note}]" if default_note else "")
    return click.option("--parser", type=ParserChoiceType(), default=default,
                        help=f"{purpose}: {parsers_help()}.{shown}")


def _flag(option: ParserOption) -> Callable:
    if option.folder:
        kind: Any = click.Path(file_okay=False)
    elif option.choices:
        kind = click.Choice(option.choices)
    elif option.minimum is not None:
        kind = click.IntRange(min=option.minimum)
    else:
        kind = option.type
    shown = f" [default: {option.default}]" if option.default is not None else ""
    return click.option(option.flag, option.setting, type=kind, default=None, help=option.help + shown)


def parser_options(default: str | None = None, purpose: str = "The parser", default_note: str = "") -> Callable:
    """`--parser` and every parser option's flag (unset: None, so a run's saved settings or the
    option's default apply)."""
    return options(parser_option(default, purpose, default_note), *map(_flag, PARSER_OPTIONS))


def parser_settings(flags: dict[str, Any]) -> dict[str, Any]:
    """The parser options' values, taken out of a command's keyword arguments."""
    return {option.setting: flags.pop(option.setting) for option in PARSER_OPTIONS}


def data_options(fn: Callable) -> Callable:
    """Where a run's data comes from and how it is read and parsed (finetune, evaluate)."""
    return options(
        click.option("--data-dir", type=FOLDER, help="Folder with the task's files (default: $XSYN_DATA_DIR/<task> "
                     "or ~/.cache/xsyn/data/<task>; else the hub)."),
        click.option("--parse-workers", type=COUNT, help="Processes that parse side by side [default: the cores; 1 "
                     "for chain and for Stanza on a GPU]."),
        click.option("--cache-dir", type=FOLDER, help="xsyn's cache folder: parses/ and features/ (default: "
                     "$XSYN_CACHE or ~/.cache/xsyn)."),
        click.option("--num-proc", type=int, help="Processes for feature preparation (datasets.map)."),
        click.option("--skip-bad-rows", is_flag=True, default=None, help="Skip (and count) unreadable training and "
                     "validation rows instead of stopping at the first (test rows are never skipped)."),
        parser_options(default_note="finetune: stanza; evaluate: the run's parser"),
    )(fn)


def interrupted(stop: KeyboardInterrupt, folder: RunFolder, command: str) -> NoReturn:
    """Ctrl-C: say where the run stands and the command that continues it, then exit 130 (as a shell does)."""
    click.echo(f"\ninterrupted: {folder.where_stopped(getattr(stop, 'saved_step', None))}. Continue with:\n"
               f"  {command}", err=True)
    raise SystemExit(130)
