"""`xsyn demo`: the whole harness on a benchmark xsyn generates itself (`xsyn.experiments.demo`)."""

from __future__ import annotations

import shlex

import click

from xsyn.cli.options import XsynCommand, interrupted, notes_off
from xsyn.models.names import DEFAULT_SEED
from xsyn.run.settings import parse_overrides
from xsyn.training.folder import RunFolder
from xsyn.utils.progress import quiet_libraries


@click.command(cls=XsynCommand)
@click.option("--output-dir", type=click.Path(file_okay=False), default="xsyn-demo", show_default=True,
              help="Where the benchmark, the two runs and the report go.")
@click.option("--seed", type=int, default=DEFAULT_SEED, show_default=True, help="Seeds both runs.")
@click.option("--max-steps", type=int, default=None, help="Stop each training early (a quick look; the "
              "card's full schedule is in `xsyn settings --task synth`).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="A setting for both runs, as `xsyn finetune --set` (e.g. --set warmup_steps=4; repeatable).")
@click.option("--overwrite-output-dir", is_flag=True, help="Replace an earlier demo in --output-dir (without "
              "it, a demo of the same options is continued, one of other options refused).")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="xsyn's cache folder: parses/ and features/ [default: OUTPUT_DIR/cache].")
@click.option("--quiet", is_flag=True, help="No progress bars, no notes (warnings and errors still show).")
def demo(output_dir: str, seed: int, max_steps: int | None, sets: tuple[str, ...], overwrite_output_dir: bool,
         cache_dir: str | None, quiet: bool) -> None:
    """Generate the synthetic typology benchmark, train none and gat, evaluate, report.

    Interrupted (Ctrl-C), the same command continues it from the runs' saved states."""
    from xsyn.experiments.demo import demo_text, run_demo

    if quiet:
        quiet_libraries()
        notes_off()
    settings = {**parse_overrides(sets), **({"cache_dir": cache_dir} if cache_dir else {})}
    try:
        summary = run_demo(output_dir, seed, progress=not quiet, max_steps=max_steps, overwrite=overwrite_output_dir,
                           settings=settings)
    except KeyboardInterrupt as stop:
        again = ["xsyn", "demo", "--output-dir", output_dir, "--seed", str(seed),
                 *(["--max-steps", str(max_steps)] if max_steps is not None else []),
                 *(arg for value in sets for arg in ("--set", value)),
                 *(["--cache-dir", cache_dir] if cache_dir else []), *(["--quiet"] if quiet else [])]
        interrupted(stop, RunFolder(getattr(stop, "run_dir", output_dir)), shlex.join(again))
    click.echo(demo_text(summary))
