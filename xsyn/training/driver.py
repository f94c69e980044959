"""The one training loop: fine-tuning (`xsyn.run.train`) and a syntax module's
pre-training (`xsyn.pretraining.trainer`) are two `TrainingTask`s it runs; their objectives differ, their loop
does not.

    state = train(settings, task, accelerator, RunFolder(out), resume=..., progress=...)

It reads top to bottom, as nanoGPT's does: setup (optimiser, schedule, saved state, step log),
the loop (one optimiser step per global batch; logging, evaluation, checkpoints at their
intervals), finish (the curves). The step itself is `Stepper`'s (`loop.py`), so a run means the same
on 1 or N processes and with any number of accumulation steps; the batches are the task's
`batches_of_epoch`, a fixed function of (seed, epoch), so a resumed run takes exactly the batches
the uninterrupted one would.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import signal
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import torch

from xsyn.training.checkpoint import checkpoint_interval, load_state, save_state, total_steps
from xsyn.training.device_rules import kernel_of
from xsyn.training.folder import RunFolder
from xsyn.training.log import StepLog, read_step_log
from xsyn.training.loop import LinearSchedule, Stepper, StepProgress, StepRecord, make_optimizer, remaining_batches
from xsyn.training.processes import wait_for_everyone
from xsyn.training.settings import LoopSettings, with_warmup
from xsyn.utils.errors import InputError
from xsyn.utils.io import atomic_write_bytes
from xsyn.utils.plots import training_curves_png

logger = logging.getLogger(__name__)

Batch = dict[str, torch.Tensor]


class TrainingTask(Protocol):
    """What differs between fine-tuning and pre-training.

    `model` is the module to train (the loop prepares it for Accelerate and puts the prepared one
    back); `n_rows` the training inputs; `hint` the settings a non-finite loss most likely comes from.
    """

    model: torch.nn.Module
    n_rows: int
    description: str
    hint: str
    count_items: Callable[[list[int]], int] | None  # a token task's labelled tokens of rows (`labelled_pieces`)

    def batches_of_epoch(self, epoch: int) -> list[list[int]]:
        """The global batches (row indices) of one epoch, a fixed function of (seed, epoch)."""

    def micro_batches(self, batch: list[int], processes: int) -> list[list[int]]:
        """A global batch cut into the micro-batches a step computes one after another (`loop.micro_batches`),
        each with a row for every one of the `processes`."""

    def collate(self, indices: list[int]) -> Batch:
        """One share of a batch as tensors (on the host)."""

    def forward(self, batch: Batch) -> dict[str, torch.Tensor | None]:
        """The losses of a batch: `loss` is back-propagated, every entry is logged."""

    def evaluate(self) -> dict[str, Any] | None:
        """{"primary": float, "scores": {...}} on the dev data; None where the task evaluates only at the end."""

    def on_best(self, state: TrainState, result: dict[str, Any]) -> None:
        """Keep the model that scored `result`, the best so far."""


@dataclass
class TrainState:
    """Where training is; saved with every resumable state."""

    step: int = 0  # optimiser steps done
    epoch: int = 0
    step_in_epoch: int = 0
    best_score: float | None = None
    best_step: int | None = None
    train_seconds: float = 0.0
    data_wait_seconds: float = 0.0
    train_cpu_seconds: float = 0.0
    adamw_kernel: str | None = None  # the AdamW kernel the optimiser runs (`xsyn.training.device_rules`)

    def took(self, record: StepRecord) -> None:
        """Count one more optimiser step, and its seconds."""
        self.step += 1
        self.step_in_epoch += 1
        self.train_seconds += record.seconds
        self.data_wait_seconds += record.data_seconds
        self.train_cpu_seconds += record.cpu_seconds


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM: `signum`) during training; `saved_step` is what a resumed run continues from (None:
    nothing saved)."""

    def __init__(self, saved_step: int | None, signum: int = signal.SIGINT):
        super().__init__(saved_step)
        self.saved_step, self.signum = saved_step, signum


def warn_fewer_processes(processes: int, environ: dict[str, str] | None = None) -> None:
    """A launch that asked for more processes than run: a launcher's WORLD_SIZE above them, or the rendezvous
    address (MASTER_ADDR) a launcher sets for several processes where only this one runs, as `accelerate
    launch --cpu --num_processes 2` starts one. Warned once, by the main process: the run goes on, slower."""
    env = os.environ if environ is None else environ
    asked = int(env.get("WORLD_SIZE", "0") or 0)
    if asked > processes or (not asked and processes == 1 and env.get("MASTER_ADDR")):
        logger.warning(f"the launcher asked for {asked or 'several'} processes, but {processes} runs"
                       + ("" if asked else " (MASTER_ADDR is set, WORLD_SIZE is not)")
                       + ": `accelerate launch --cpu` starts one process whatever --num_processes says; for N CPU "
                       "processes: ACCELERATE_USE_CPU=true torchrun --nproc_per_node N -m xsyn ...")


def check_micro_batches(settings: LoopSettings, processes: int) -> None:
    """Every process needs a row of every micro-batch to take the step with the others (checked by the
    tasks' setups before any data is read)."""
    micro = settings.batch_size // settings.grad_accum
    if micro < processes:
        raise InputError(f"--batch-size {settings.batch_size} over --grad-accum {settings.grad_accum} gives "
                         f"micro-batches of {micro} examples, fewer than the {processes} processes: raise "
                         "--batch-size or lower --grad-accum")


def warn_long_warmup(settings: LoopSettings, steps: int) -> None:
    """A warmup as long as the run never reaches the peak learning rate (a card's warmup under a capped run).

    Warned, not rescaled: the value is the paper's (or the user's), and a run that changed it
    silently would no longer be the configured experiment; the warning names the fix."""
    if settings.warmup_steps >= steps:
        logger.warning(f"warmup_steps {settings.warmup_steps} is not shorter than the run's {steps} steps: the "
                       f"learning rate never reaches its peak {settings.learning_rate:g} (at the last step it is "
                       f"{settings.learning_rate * (steps - 1) / settings.warmup_steps:.3g}); for a short run "
                       f"give --set warmup_steps={max(1, steps // 10)} (a tenth of the steps) or more steps")


def train(settings: LoopSettings, task: TrainingTask, accelerator, folder: RunFolder, *, resume: bool = False,
          show_progress: bool = True) -> TrainState:
    """Train `task` for the settings' steps; returns the final state (the run's bookkeeping).

    With `resume`, it continues from `folder.state` and ends as the uninterrupted run would; without
    it, what an unfinished earlier attempt left in the folder is removed first."""
    # -- setup -----------------------------------------------------------------------------------
    settings = with_warmup(settings, task.n_rows)
    steps_per_epoch = math.ceil(task.n_rows / settings.batch_size)
    steps = total_steps(settings, task.n_rows)
    warn_long_warmup(settings, steps)
    optimizer = make_optimizer(task.model, settings.learning_rate, settings.weight_decay, settings.adamw_kernel,
                               accelerator.device)
    kernel = kernel_of(optimizer)
    model, optimizer = accelerator.prepare(task.model, optimizer)
    task.model = model
    stepper = Stepper(accelerator, model, optimizer, LinearSchedule(settings.learning_rate, settings.warmup_steps,
                                                                    steps),
                      settings.max_grad_norm, settings.seed, settings.grad_accum, hint=task.hint,
                      count_items=task.count_items, split=task.micro_batches)
    eval_every = settings.eval_every or steps_per_epoch
    save_every = checkpoint_interval(settings.checkpointing_steps, steps_per_epoch, eval_every)
    state = load_state(accelerator, folder.state, TrainState) if resume else None
    if state is None:
        if resume and accelerator.is_main_process:
            logger.warning(f"--resume: {folder.path} holds no saved state yet; the run starts from step 0")
        _clear_unfinished(accelerator, folder)
        state = TrainState()
    state.adamw_kernel = kernel
    log = StepLog(folder.train_log, accelerator, keep_until_step=state.step)
    bar = StepProgress(steps, state.step, accelerator.is_main_process and show_progress, task.description)
    saved = state.step if state.step else None

    # -- the loop --------------------------------------------------------------------------------
    model.train()
    try:
        for batch in remaining_batches(state, steps, task.batches_of_epoch):
            record = stepper.step(state.step, batch, task.collate, task.forward)
            state.took(record)
            bar.update(record)
            last = state.step == steps
            if state.step % settings.log_every == 0 or last:
                norm = {} if record.grad_norm is None else {"grad_norm": record.grad_norm}  # none unless computed
                log.write({"step": state.step, "epoch": state.epoch, **record.losses, "lr": record.lr, **norm,
                           "length": record.length, "seconds": round(record.seconds, 6)})
            if state.step % eval_every == 0 or last:
                _evaluate(task, state, log, bar)
            if state.step % save_every == 0 or last:
                save_state(accelerator, folder, asdict(state), keep=settings.save_total_limit)
                saved = state.step
    except KeyboardInterrupt as stop:
        raise Interrupted(saved, getattr(stop, "signum", signal.SIGINT)) from None
    finally:
        bar.close()
        log.close()
    # -- finish: the curves, drawn once from the whole log (a picture per save cost a run 0.4-0.6 s each, and
    # loading matplotlib, for a file nothing reads before the run ends)
    if accelerator.is_main_process:
        write_curves(folder)
    return state


def _evaluate(task: TrainingTask, state: TrainState, log: StepLog, bar) -> None:
    result = task.evaluate()
    if result is None:
        return
    log.write({"step": state.step, "dev": result["scores"], "dev_primary": result["primary"]})
    better = state.best_score is None or result["primary"] > state.best_score
    bar.note(f"step {state.step}: dev {result['primary']:.4g}" + (" (best so far)" if better else
                                                                 f" (best {state.best_score:.4g})"))
    if better:
        state.best_score, state.best_step = result["primary"], state.step
        task.on_best(state, result)


def _clear_unfinished(accelerator, folder: RunFolder) -> None:
    """A fresh start: drop what a run that stopped before its first complete save left (a `best/`
    and its dev result from an earlier attempt would otherwise outlive this run's)."""
    if accelerator.is_main_process:
        for path in folder.unfinished():
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    wait_for_everyone(accelerator)


def write_curves(folder: RunFolder) -> None:
    """`training_curves.png` from the step log: the picture of the run so far, replaced atomically."""
    records = read_step_log(folder.train_log)
    if records:
        atomic_write_bytes(folder.curves, training_curves_png(records, title=folder.path.name))
