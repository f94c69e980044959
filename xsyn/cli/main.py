"""The `xsyn` command group and its `bench` subgroup, with every command added: the commands live beside this module
(one module per group of commands), which imports them; none of them imports this module."""

from __future__ import annotations

import logging
import os

import click

from xsyn import __version__
from xsyn.cli import bench, demo, experiment, predict, report, run, settings, syntax, tasks
from xsyn.cli.options import set_loudness
from xsyn.cli.pretrain import pretrain_command
from xsyn.models.variants import pretraining_command
from xsyn.utils.errors import XsynError
from xsyn.utils.progress import NOTE, quiet_library_bars_off_terminal
from xsyn.utils.signals import Terminated, exit_status, stop_name, terminate_as_interrupt


class _ClickHandler(logging.Handler):
    """Log records as lines on stderr, through click (so they reach whatever stream click writes to)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(self.format(record), err=True)
        except Exception:  # a log line must never end a run
            self.handleError(record)


def configure_logging(verbose: bool, quiet: bool) -> None:
    """The `xsyn` logger on stderr: notes and warnings by default, status lines too with -v, errors only with -q
    (no warnings of the libraries either)."""
    logger = logging.getLogger("xsyn")
    for handler in [h for h in logger.handlers if isinstance(h, _ClickHandler)]:
        logger.removeHandler(handler)
    handler = _ClickHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    # under a distributed launch only the main process (global rank 0) prints status and warnings: every
    # rank meets them alike, and N copies of each say nothing more; errors stay on every rank
    main_process = int(os.environ.get("RANK", "0")) == 0
    set_loudness(logging.ERROR if quiet or not main_process else logging.INFO if verbose else NOTE)


class XsynGroup(click.Group):
    """Every command's error in what the user gave (`XsynError`: a setting, file, folder, model, data; a
    failed write such as a full disk) ends in its message, which names the cause and the fix; any other
    exception is a bug and keeps its traceback. The pre-training command is named by the registry when asked."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), pretraining_command()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        # the registry is read for no other command's name
        return super().get_command(ctx, cmd_name) or (pretrain_command if cmd_name == pretraining_command() else None)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except XsynError as err:
            raise click.ClickException(str(err)) from None
        except Terminated as stop:  # (Ctrl-C: click's own "Aborted!")
            click.echo(f"\n{stop_name(stop)}", err=True)
            raise SystemExit(exit_status(stop)) from None


@click.group(cls=XsynGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="xsyn")
@click.option("-v", "--verbose", is_flag=True, help="Also show status lines (data loaded, parsed and featurised; "
              "each language's score).")
@click.option("-q", "--quiet", is_flag=True, help="Show errors only: no notes, no warnings (xsyn's or its libraries'); "
              "progress bars are switched off per command, with its own --quiet.")
def main(verbose: bool, quiet: bool) -> None:
    """xsyn: syntax in cross-lingual transfer.

    Fine-tune multilingual BERT with dependency syntax in its attention on English task data and
    measure zero-shot transfer per language and over language pairs.
    """
    if verbose and quiet:
        raise click.UsageError("-v and -q contradict each other; give one")
    terminate_as_interrupt()  # SIGTERM cleans up as Ctrl-C does, in every command
    configure_logging(verbose, quiet)
    quiet_library_bars_off_terminal()  # every command, and the processes it starts (experiment cells)


@main.group(name="bench")
def bench_group() -> None:
    """Benchmarks (speed and memory); each prints figures, `--json` prints one JSON object."""


for command in (run.finetune, run.evaluate, predict.predict, syntax.parse_command, syntax.parser_quality_command,
                experiment.experiment, report.report_command, settings.settings_command, tasks.tasks_command,
                demo.demo):
    main.add_command(command)
for command in (bench.bench_syntax, bench.bench_model, bench.bench_eval, bench.bench_parse, bench.bench_loop,
                bench.bench_peer):
    bench_group.add_command(command)
