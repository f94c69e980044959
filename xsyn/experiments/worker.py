"""One cell in a process of its own: `python -m xsyn.experiments.worker SOURCE CELL --overrides JSON`.

The local launcher starts one per GPU (CUDA_VISIBLE_DEVICES set for it); a cell on several GPUs
runs `accelerate launch -m xsyn.experiments.worker --train-only ...`, whose processes train and
evaluate together while the process that launched them keeps the cell's lock and error file.
Exit status: 0 done, 1 failed (error.txt in the cell's folder), 3 held by another live process.
"""

from __future__ import annotations

import argparse
import os
import socket

from xsyn.experiments.cells import DONE, FAILED, run_cell, train_and_evaluate
from xsyn.experiments.experiment_file import Overrides, load_experiment
from xsyn.utils.signals import Terminated, exit_status, terminate_as_interrupt

EXIT_CODES = {DONE: 0, FAILED: 1}
EXIT_BUSY = 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xsyn.experiments.worker", description=__doc__)
    parser.add_argument("source", help="The experiment file or bundled recipe name.")
    parser.add_argument("cell", help="The cell's name (as `xsyn experiment status` shows it).")
    parser.add_argument("--overrides", default="{}", help="The command line's settings for every cell, as JSON.")
    parser.add_argument("--train-only", action="store_true",
                        help="Train and evaluate without the lock and error bookkeeping (inside accelerate launch).")
    args = parser.parse_args(argv)
    terminate_as_interrupt()  # the launcher's terminate(): the cell's lock released, its staging folders removed
    try:
        return _run(args)
    except Terminated as stop:
        return exit_status(stop)


def _run(args: argparse.Namespace) -> int:
    experiment = load_experiment(args.source, Overrides.from_json(args.overrides))
    cell = experiment.cell(args.cell)
    if args.train_only:
        train_and_evaluate(experiment, cell)
        return 0
    print(f"{cell.name} on {socket.gethostname()}, CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}",
          flush=True)
    state = run_cell(experiment, cell)
    print(f"{cell.name}: {state.state}" + (f": {state.detail}" if state.detail else ""), flush=True)
    return EXIT_CODES.get(state.state, EXIT_BUSY)


if __name__ == "__main__":
    raise SystemExit(main())
