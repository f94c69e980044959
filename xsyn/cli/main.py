"""The `xsyn` command group and its `bench` subgroup; the commands themselves live beside this module."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Iterable

import click

from xsyn import __version__
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


class WithVariantOptions(XsynCommand):
    """A command that also takes the options the registered variants declare (`SyntaxVariant.options`), read when its
    command line is parsed or its help shown (as `RegistryChoice`): another package's variant brings its own."""

    def declared_options(self) -> dict:
        """{setting: (its `SettingField`, the option's help)}: the options this command takes from the variants."""
        from xsyn.models.variants import option_settings

        return option_settings()

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        types = {bool: click.BOOL, int: click.INT, float: click.FLOAT, float | int: click.FLOAT}  # by type hint
        own = ctx.meta.setdefault(f"xsyn.variant_options.{self.name}", [  # one object each per invocation (click's)
            click.Option([f"--{name.replace('_', '-')}"], help=help, type=types.get(setting.hint, click.STRING))
            for name, (setting, help) in self.declared_options().items()])
        params = super().get_params(ctx)  # click puts --help last: the variants' options go before it
        return params[:-1] + own + params[-1:] if self.get_help_option(ctx) else params + own


class XsynGroup(click.Group):
    """Every command's error in what the user gave (`XsynError`: a setting, file, folder, model, data; a
    failed write such as a full disk) ends in its message, which names the cause and the fix; any other
    exception is a bug and keeps its traceback. A command named by the registry (`add_named_later`) is looked up
    under its name when a command line is parsed or the help shown."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.named_later: list[tuple[Callable[[], str], click.Command]] = []

    def add_named_later(self, command: click.Command, name: Callable[[], str]) -> None:
        """Add `command` under the name `name()` gives when asked (`pretrain-<variant>`: a registered variant's)."""
        self.named_later.append((name, command))

    def later_commands(self) -> dict[str, click.Command]:
        named = {}
        for name, command in self.named_later:
            command.name = name()  # what its usage line and errors say
            named[command.name] = command
        return named

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.later_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name) or self.later_commands().get(cmd_name)

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
