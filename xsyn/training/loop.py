"""One optimiser step over a global batch, the same on 1 or N processes.

The batch of a step is chosen globally (a fixed function of seed and epoch), cut into `grad_accum`
micro-batches, and each micro-batch into the processes' contiguous shares. Each share's loss is
weighted so that the gradients Accelerate averages over processes and the loop sums over
micro-batches equal the gradient of the whole batch's mean loss. Three things make a step's result
independent of how it is split:

- the learning rate is a pure function of the optimiser step (`LinearSchedule`), set on the
  optimiser before each step; no scheduler object is handed to `accelerator.prepare`, which would
  step it once per process (Accelerate's `step_with_optimizer`, transformers PR #24088);
- before each share's forward pass the random generator is seeded from (seed, step, share number),
  so dropout draws depend on the share, not on the process that computes it: one process with
  `grad_accum` 2 draws exactly what two processes with `grad_accum` 1 draw;
- the losses logged are the global batch's (averaged over processes), on every process alike, so a
  non-finite value stops every process at the same step.

A token task's loss is a mean over labelled tokens, not rows, and shares of equal rows hold unequal
numbers of labelled tokens. Every process knows the whole step's rows, so the step's number of
labelled tokens is counted before any share runs (`count_items`), and each share's token loss is
divided by that count in the share's proportion of rows (`labelled_tokens`, handed to the model)
instead of by its own count: weighted by rows as above, the shares then sum to the step's mean per
labelled token however the step is split (transformers' `num_items_in_batch`). A sentence task
passes no counter and takes exactly the row-weighted path.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate
from typing import Any

import numpy as np
import torch

from xsyn.models.names import IGNORE_INDEX
from xsyn.training.device_rules import AUTO, adamw_flags, resolve_adamw_kernel
from xsyn.trees.batch import length_sorted_windows
from xsyn.trees.padding import PaddedLength, least_padded_cuts
from xsyn.utils.errors import InputError, XsynError
from xsyn.utils.progress import Progress


@dataclass(frozen=True)
class LinearSchedule:
    """Linear warmup from 0 to `peak` over `warmup_steps`, then linear decay to 0 at `total_steps`
    (transformers' `get_linear_schedule_with_warmup`, as the papers' code uses it)."""

    peak: float
    warmup_steps: int
    total_steps: int

    def __call__(self, done: int) -> float:
        """The learning rate of the optimiser step that follows `done` finished steps."""
        if done < self.warmup_steps:
            return self.peak * done / self.warmup_steps
        return self.peak * max(0.0, (self.total_steps - done) / max(1, self.total_steps - self.warmup_steps))


def remaining_batches(state: Any, total_steps: int, epoch_batches: Callable[[int], list[list[int]]]
                      ) -> Iterator[list[int]]:
    """The global batches still to take, epoch after epoch, from where `state` stands (its `step`,
    `epoch` and `step_in_epoch`, which a resumed run reads back). The loop counts `step` and
    `step_in_epoch` for each batch it takes; this moves `state` on to the next epoch when one is used up."""
    while state.step < total_steps:
        for batch in epoch_batches(state.epoch)[state.step_in_epoch:]:
            yield batch
            if state.step >= total_steps:
                return
        state.epoch += 1
        state.step_in_epoch = 0


def planned_batches(steps: int, epoch_batches: Callable[[int], list[list[int]]]) -> Iterator[list[int]]:
    """The first `steps` global batches of a run, epoch after epoch, as `remaining_batches` hands them out."""
    taken, epoch = 0, 0
    while taken < steps:
        batches = epoch_batches(epoch)[:steps - taken]
        if not batches:
            return
        yield from batches
        taken, epoch = taken + len(batches), epoch + 1


LENGTH_WINDOW = 50  # batches per window that length grouping sorts (as transformers' LengthGroupedSampler)


def epoch_batches(n_rows: int, batch_size: int, seed: int, epoch: int,
                  lengths: Sequence[int] | None = None) -> list[list[int]]:
    """The global batches of one epoch: a permutation fixed by (seed, epoch), cut into batches.

    With `lengths` (fine-tuning's `group_by_length`; pre-training always), each window of
    `LENGTH_WINDOW` batches of the permutation is sorted longest first before it is cut: a batch holds
    rows of similar length and pads less, while the order stays random between windows and a fixed
    function of (seed, epoch) (so resume works).
    """
    order = torch.randperm(n_rows, generator=torch.Generator().manual_seed(seed * 1000 + epoch)).tolist()
    if lengths is not None:
        order = length_sorted_windows(order, lengths, LENGTH_WINDOW * batch_size)
    # the same batches on any number of processes: a last batch with fewer rows than processes leaves some
    # without a row, and those take the step on a stand-in row of weight 0 (`Stepper.step`)
    return [list(order[i:i + batch_size]) for i in range(0, len(order), batch_size)]


# what one micro-batch costs beyond its tokens, in tokens: MiniLM's forward and backward on one CPU thread take
# ~20 ms a call besides 1.06 ms a token (74 ms for 1 row of 48 pieces, 1,625 ms for 32); a larger model spends more
# a token, so for it this cuts a little less often than would pay
MICRO_BATCH_TOKENS = 20
UNPADDED = PaddedLength()  # each micro-batch padded to its longest row


def micro_batches(batch: list[int], grad_accum: int, processes: int, lengths: Sequence[int] | None = None,
                  padded: Callable[[int], int] = UNPADDED) -> list[list[int]]:
    """A global batch cut into (at most) `grad_accum` micro-batches of equal size; a short last
    micro-batch with fewer rows than processes joins the one before it.

    With `lengths` (the rows' lengths: `micro_batch_split = "by-length"`), the rows sorted longest first and cut
    where the tokens computed (each micro-batch padded to `padded` of its longest row) plus MICRO_BATCH_TOKENS a
    micro-batch are least, each micro-batch no larger than the equal cut's (what grad_accum bounds: memory)
    and with a row for every process: a random batch's short rows then stop paying for its longest one."""
    size = max(processes, math.ceil(len(batch) / grad_accum))
    if lengths is not None:
        batch = sorted(batch, key=lambda i: -lengths[i])
        cuts = least_padded_cuts([lengths[i] for i in batch], padded, (processes, size), MICRO_BATCH_TOKENS)
        if cuts is not None:  # (None: no cut into such sizes, as 5 rows into 2 or 3 for 2 processes; cut equally)
            ends = list(accumulate(cuts))
            return [batch[end - n:end] for n, end in zip(cuts, ends)]
    micros = [batch[i:i + size] for i in range(0, len(batch), size)]
    if len(micros) > 1 and len(micros[-1]) < processes:
        rest = micros.pop()
        micros[-1] += rest
    return micros


def process_share(indices: list[int], processes: int, rank: int) -> tuple[list[int], float]:
    """This process's contiguous share of a micro-batch, and the loss weight that makes the
    processes' averaged gradients the gradient of the whole micro-batch's mean loss."""
    # the larger shares first, as `micro_batches` cuts: one process with grad_accum N*A then takes the shares of
    # N processes with A in the same order (and draws the same dropout), and a lone row is rank 0's
    bounds = [-(-len(indices) * r // processes) for r in range(processes + 1)]
    share = indices[bounds[rank]:bounds[rank + 1]]
    return share, len(share) * processes / len(indices)


def share_seed(seed: int, step: int, share: int) -> int:
    """The random seed of one share of one step: what dropout draws there, wherever it runs."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{step}/{share}".encode()).digest()[:8], "little") >> 1


def labelled_pieces(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]
                    ) -> Callable[[list[int]], int] | None:
    """The `count_items` of a task whose loss averages over pieces: the labelled values (not
    IGNORE_INDEX) of the rows' per-piece label `columns`; None for a task without any (one label per row)."""
    if not columns:
        return None
    counts = [sum(int((np.asarray(row[c]) != IGNORE_INDEX).sum()) for c in columns if c in row) for row in rows]
    return lambda indices: sum(counts[i] for i in indices)


class NonFiniteError(XsynError, ValueError):
    """The loss or the gradient became NaN or infinite; the message names the step and what to change."""


@dataclass
class StepRecord:
    """What one optimiser step did; `losses` are the global batch's means (the same on every process)."""

    lr: float
    grad_norm: float | None  # None without clipping, and where the engine does not report it (DeepSpeed)
    losses: dict[str, float]
    rows: int
    seconds: float
    data_seconds: float
    length: int = 0  # T, the padded length of the step's (longest) micro-batch on this process
    cpu_seconds: float = 0.0  # this process's CPU time in the step (its threads together)


@dataclass
class Stepper:
    """Takes optimiser steps for a training loop; see the module docstring.

    `forward(batch)` returns the model's losses: `loss` is back-propagated, every entry is logged.
    `hint` names the settings a non-finite loss most likely comes from, for the error message.
    `count_items(rows)` counts the labelled tokens of a token task's rows (`labelled_pieces`); the
    model is then given `labelled_tokens` with each share (see the module docstring).
    """

    accelerator: Any
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    schedule: LinearSchedule
    max_grad_norm: float | None
    seed: int
    grad_accum: int = 1
    hint: str = "lower the learning rate"
    count_items: Callable[[list[int]], int] | None = None
    split: Callable[[list[int], int], list[list[int]]] | None = None  # (batch, processes) -> micro-batches
    parameters: list[torch.nn.Parameter] = field(init=False)

    def __post_init__(self) -> None:
        self.parameters = [p for p in self.model.parameters() if p.requires_grad]

    def step(self, done: int, batch: list[int], collate: Callable[[list[int]], dict[str, torch.Tensor]],
             forward: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]) -> StepRecord:
        """Optimiser step number `done + 1` over the global `batch` (row indices)."""
        accelerator = self.accelerator
        processes, rank = accelerator.num_processes, accelerator.process_index
        started, cpu_started, data_seconds = time.perf_counter(), time.process_time(), 0.0
        lr = self.schedule(done)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        micros = (self.split or partial(micro_batches, grad_accum=self.grad_accum))(batch, processes=processes)
        step_items = max(1, self.count_items(batch)) if self.count_items is not None else None
        totals: dict[str, torch.Tensor] = {}
        length = 0
        for k, indices in enumerate(micros):
            share, weight = process_share(indices, processes, rank)
            fetched = time.perf_counter()
            # a process without a row (a last batch smaller than the processes) joins the step's gradient
            # exchange with a row of the batch at weight 0: it adds nothing, and no row is seen twice
            inputs = to_device(collate(share or indices[:1]), accelerator.device)
            data_seconds += time.perf_counter() - fetched
            length = max(length, inputs["input_ids"].shape[-1] if "input_ids" in inputs else 0)
            if step_items is not None:  # the share's rows' part of the step's labelled tokens (the stand-in: any)
                inputs["labelled_tokens"] = step_items * max(1, len(share)) / len(batch)
            # the micro-batch's part of the step's rows: micro-batches cut by length differ in size, as can
            # the last of an equal cut
            weight *= len(indices) / len(batch)
            torch.manual_seed(share_seed(self.seed, done, k * processes + rank))
            last = k == len(micros) - 1
            with nullcontext() if last else accelerator.no_sync(self.model):
                losses = forward(inputs)
                accelerator.backward(losses["loss"] * weight)
            for name, value in losses.items():
                if value is not None:
                    totals[name] = totals.get(name, 0.0) + value.detach().float() * weight
        # no clipping (max_grad_norm 0 or None): neither of its passes over the gradients (the norm, the scaling)
        # runs, and the step's one read returns the losses alone; the log then has no gradient norm
        norm = accelerator.clip_grad_norm_(self.parameters, self.max_grad_norm) if self.max_grad_norm else None
        means, grad_norm = read_step_values(totals, norm, accelerator)
        self._check(done + 1, lr, means, grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return StepRecord(lr, grad_norm, means, len(batch), time.perf_counter() - started, data_seconds, length,
                          time.process_time() - cpu_started)

    def _check(self, step: int, lr: float, losses: dict[str, float], grad_norm: float | None) -> None:
        """Stop before a non-finite update reaches the weights. Under fp16 an infinite gradient is
        the loss scaler's business (it skips the step and lowers the scale); a non-finite loss is not."""
        bad = {name: value for name, value in losses.items() if not math.isfinite(value)}
        fp16 = self.accelerator.mixed_precision == "fp16"
        if not bad and (grad_norm is None or math.isfinite(grad_norm) or fp16):
            return
        what = ", ".join(f"{name} {value}" for name, value in bad.items()) or f"gradient norm {grad_norm}"
        raise NonFiniteError(f"optimiser step {step}: {what} (learning rate {lr:.3g}); the run is stopped and "
                             f"nothing of this step is saved. Most likely fix: {self.hint}")


def read_step_values(totals: dict[str, torch.Tensor | float], norm: torch.Tensor | float | None, accelerator
                     ) -> tuple[dict[str, float], float | None]:
    """The losses averaged over processes (each holds its weighted share of the global batch) and the
    gradient norm (already global: the gradients are), read in one transfer: the step's one wait for the
    device, before the update is queued, so the host builds the next batch while the update runs."""
    values = [torch.as_tensor(v, dtype=torch.float32, device=accelerator.device) for v in totals.values()]
    stacked = torch.stack(values) if values else torch.zeros(0, device=accelerator.device)
    if accelerator.num_processes > 1 and values:
        stacked = accelerator.reduce(stacked, "mean")
    if norm is not None:
        norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm  # FSDP2's norm is a (replicated) DTensor
        stacked = torch.cat([stacked, torch.as_tensor(norm, dtype=torch.float32, device=stacked.device).reshape(1)])
    numbers = stacked.tolist()
    grad_norm = numbers.pop() if norm is not None else None
    return dict(zip(totals, numbers)), grad_norm


def parameters_finite(model: torch.nn.Module) -> bool:
    """Whether every weight is a finite number (checked before a checkpoint is kept as the best), read from
    the device once rather than once per parameter."""
    return bool(torch.stack([torch.isfinite(p).all() for p in model.parameters()]).all())


NO_DECAY = ("bias", "LayerNorm.weight", "layer_norm.weight")  # parameters AdamW leaves undecayed, as BERT's recipe


def make_optimizer(model: torch.nn.Module, learning_rate: float, weight_decay: float, kernel: str = AUTO,
                   device: torch.device | None = None) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters, with no weight decay on biases and LayerNorm weights, computed by
    `kernel` (`adamw_kernel`: `auto` is the fastest torch has for the parameters' device and dtypes, `device`
    where they are not there yet; `xsyn.training.device_rules`)."""
    trainable = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    groups = [{"params": [p for name, p in trainable if not name.endswith(NO_DECAY)], "weight_decay": weight_decay},
              {"params": [p for name, p in trainable if name.endswith(NO_DECAY)], "weight_decay": 0.0}]
    where = torch.device(device) if device is not None else (trainable[0][1].device if trainable else
                                                             torch.device("cpu"))
    dtypes = tuple(sorted({str(p.dtype).removeprefix("torch.") for _, p in trainable})) or ("float32",)
    try:
        resolved = resolve_adamw_kernel(kernel, where.type, dtypes)
    except ValueError as err:
        raise InputError(str(err)) from None
    return torch.optim.AdamW(groups, lr=learning_rate, eps=1e-8, **adamw_flags(resolved))


def to_device(batch: Mapping[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """A collated batch on the training device. To a GPU from page-locked memory without waiting (nanoGPT's
    get_batch): a copy from ordinary memory may first wait for the device's queue to drain, and the host
    could not build the next batch while the last update runs."""
    if torch.device(device).type != "cuda":
        return {key: value.to(device) for key, value in batch.items()}
    return {key: value.pin_memory().to(device, non_blocking=True) for key, value in batch.items()}


class StepProgress:
    """The step progress of a run on the main process (`xsyn.utils.progress`: a bar on a terminal, a line
    every LINE_SECONDS elsewhere). It shows the task loss where the task has one, not its sum with the
    auxiliary losses (which reads like divergence), and the examples per second (over the same recent window as
    the steps per second: one from the last step alone swung 9-204 beside a steady steps/s)."""

    LINE_SECONDS = 30.0

    def __init__(self, total: int, initial: int, enabled: bool, description: str):
        self.counter = Progress(total, description, "steps", enabled, interval=self.LINE_SECONDS, initial=initial,
                                also="examples")

    def update(self, record: StepRecord) -> None:
        name = "task_loss" if record.losses.get("task_loss") is not None else "loss"
        self.counter.postfix = {name: f"{record.losses.get(name, math.nan):.4f}"}
        self.counter.update(1, also=record.rows)  # examples/s from the steps' own window: the two rates agree

    def note(self, line: str) -> None:
        """A status line (a dev score), shown with -v."""
        logger = logging.getLogger("xsyn.training")
        if not logger.isEnabledFor(logging.INFO):
            return
        if self.counter.enabled:
            self.counter.write(line)  # above the bar
        else:
            logger.info(line)

    def close(self) -> None:
        self.counter.close()
