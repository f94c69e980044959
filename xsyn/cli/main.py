"""The `xsyn` command group and its `bench` subgroup; the commands themselves live beside this module."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Iterable

import click

from xsyn import __version__
from xsyn.models.variants import option_settings, pretraining_command
from xsyn.utils.errors import OptionError, XsynError
from xsyn.utils.progress import quiet_library_bars_off_terminal


class RegistryChoice(click.Choice):
    """One of a registry's names (`xsyn.utils.registry`), read when a command line is parsed or its help shown, not
    when the command is defined: a variant another package adds through an entry point is a choice too."""

    def __init__(self, names: Callable[[], Iterable[str]]):
        self.names, self.case_sensitive = names, True

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self.names())


class _ClickHandler(logging.Handler):
    """Log records as lines on stderr, through click (so they reach whatever stream click writes to)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(self.format(record), err=True)
        except Exception:  # a log line must never end a run
            self.handleError(record)


def configure_logging(verbose: bool, quiet: bool) -> None:
    """The `xsyn` logger on stderr: warnings by default, status lines too with -v, errors only with -q."""
    logger = logging.getLogger("xsyn")
    for handler in [h for h in logger.handlers if isinstance(h, _ClickHandler)]:
        logger.removeHandler(handler)
    handler = _ClickHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    # under a distributed launch only the main process (global rank 0) prints status and warnings: every
    # rank meets them alike, and N copies of each say nothing more; errors stay on every rank
    main_process = int(os.environ.get("RANK", "0")) == 0
    logger.setLevel(logging.ERROR if quiet or not main_process else logging.INFO if verbose else logging.WARNING)
    if not main_process:
        warnings.simplefilter("ignore")  # the libraries' Python warnings too


LOUDNESS = {"-v": logging.INFO, "--verbose": logging.INFO, "-q": logging.ERROR}  # `xsyn`'s own options


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
            logging.getLogger("xsyn").setLevel(levels.pop())
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except OptionError as err:  # settings missing or at odds, found by the stage: a usage error, as click's
            raise click.UsageError(str(err), ctx) from None


COUNT, FOLDER = click.IntRange(min=1), click.Path(file_okay=False)  # table_options' common types


def table_options(*specs: tuple) -> Callable:
    """Options from (flag, name, type, default, help) rows; `bool`: a flag; `[type]`: repeatable (metavar: default)."""
    def apply(fn):
        for flag, name, kind, default, text in reversed(specs):
            flags = (flag, name) if name else (flag,)
            many = {"multiple": True, "metavar": default} if isinstance(kind, list) else {}
            fn = (click.option(*flags, is_flag=True, help=text) if kind is bool else click.option(
                *flags, type=kind[0] if many else kind, default=None if many else default, help=text,
                show_default=default is not None and not many, **many))(fn)
        return fn
    return apply


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


class XsynGroup(click.Group):
    """Every command's error in what the user gave (`XsynError`: a setting, file, folder, model, data; a
    failed write such as a full disk) ends in its message, which names the cause and the fix; any other
    exception is a bug and keeps its traceback. The pre-training command is named by the registry when asked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), pretraining_command()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        from xsyn.cli.pretrain import pretrain_command  # (the registry is read for no other command's name)
        return super().get_command(ctx, cmd_name) or (pretrain_command if cmd_name == pretraining_command() else None)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except XsynError as err:
            raise click.ClickException(str(err)) from None


@click.group(cls=XsynGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="xsyn")
@click.option("-v", "--verbose", is_flag=True, help="Also show status lines (data loaded, parsed and featurised; "
              "each language's score).")
@click.option("-q", "--quiet", is_flag=True, help="Show errors only, no warnings (progress bars are switched off "
              "per command, with its own --quiet).")
def main(verbose: bool, quiet: bool) -> None:
    """xsyn: syntax in cross-lingual transfer.

    Fine-tune multilingual BERT with dependency syntax in its attention on English task data and
    measure zero-shot transfer per language and over language pairs.
    """
    if verbose and quiet:
        raise click.UsageError("-v and -q contradict each other; give one")
    configure_logging(verbose, quiet)
    quiet_library_bars_off_terminal()  # every command, and the processes it starts (experiment cells)


main.command_class = XsynCommand


@main.group()
def bench() -> None:
    """Benchmarks (speed and memory); each prints figures, `--json` prints one JSON object."""


bench.command_class = XsynCommand
