"""Fine-tuning on the source language: `xsyn finetune`, readable top to bottom.

One run = one task, variant, model and seed. It trains on the source language's training split
with AdamW, a linear schedule with warmup, gradient accumulation and clipping, under Accelerate
(one or many processes, fp16/bf16), evaluates on the source language's dev set every
`eval_every` optimiser steps, and keeps the best checkpoint. Everything a run writes lives in its
output folder:

    config.json          the resolved configuration (seed included)
    train_log.jsonl      one line per logging step and per evaluation
    data_report.json     what loading, parsing and featurising kept, skipped or truncated
    best/                the best checkpoint (model, tokenizer, xsyn_task.json)
    validation_results.json  the best validation score and its step
    state/               the last resumable state (model, optimiser, RNG, data position)
    train_results.json   the summary, written last

The steps themselves are `xsyn.training`'s: the learning rate is a function of the step, and a
step's batch, shares and random draws are fixed functions of the seed, so one process and N
processes, or one micro-batch and several, train the same run. `--resume` continues from
`state/` and ends with exactly the result of an uninterrupted run; a folder without a complete
state (a run killed before or during its first save) is started again by the same command.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from xsyn import versions
from xsyn.run.inference import make_collate, model_inputs, predict, score
from xsyn.run.publish import write_model_card
from xsyn.run.settings import ConfigError, RunConfig
from xsyn.run.task_data import Vocab, dev_holdout, load_task_data, make_parser
from xsyn.training.checkpoint import load_state, save_state
from xsyn.training.log import StepLog, flat
from xsyn.training.loop import (
    LinearSchedule,
    NonFiniteError,
    Stepper,
    global_batches,
    labelled_pieces,
    parameters_finite,
    progress_bar,
    remaining_batches,
)
from xsyn.trees.batch import length_sorted_windows
from xsyn.utils.io import OutputError, atomic_write_json, atomic_write_text, existing_dir, replace_dir

logger = logging.getLogger(__name__)

TASK_FILE = "xsyn_task.json"  # next to a checkpoint: what a model needs to be evaluated


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


def has_progress(out: Path) -> bool:
    """Whether a run folder holds a state to continue from or a finished run. A run that stopped
    before its first complete save (even with `best/` written) holds neither: the same command
    starts it again."""
    return existing_dir(out / "state") is not None or (out / "train_results.json").is_file()


LENGTH_WINDOW = 50  # batches per window that `group_by_length` sorts (as transformers' LengthGroupedSampler)


def epoch_batches(n_rows: int, batch_size: int, seed: int, epoch: int, processes: int = 1,
                  lengths: Sequence[int] | None = None) -> list[list[int]]:
    """The global batches of one epoch: a permutation fixed by (seed, epoch), cut into batches.

    With `lengths` (`group_by_length`), each window of `LENGTH_WINDOW` batches of the permutation is
    sorted longest first before it is cut: a batch holds rows of similar length and pads less, while
    the order stays random between windows and a fixed function of (seed, epoch) (so resume works).
    """
    order = torch.randperm(n_rows, generator=torch.Generator().manual_seed(seed * 1000 + epoch)).tolist()
    if lengths is not None:
        order = length_sorted_windows(order, lengths, LENGTH_WINDOW * batch_size)
    return global_batches(order, batch_size, processes)


def resolve_tokenizer(config: RunConfig):
    from xsyn.models.defaults import DEFAULT_MODEL, TINY
    from xsyn.models.presets import load_tokenizer

    return load_tokenizer(config.tokenizer or (DEFAULT_MODEL if config.model == TINY else config.model))


def finetune(config: RunConfig, resume: bool = False, progress: bool = True) -> dict[str, Any]:
    """Train, evaluating on the dev set at intervals; returns the run summary (`train_results.json`)."""
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    # -- setup -----------------------------------------------------------------------------------
    _check_trackers(config.trackers or [])
    out = config.resolved_output_dir()
    accelerator = Accelerator(mixed_precision=config.mixed_precision, log_with=config.trackers or None,
                              project_dir=str(out))
    main = accelerator.is_main_process
    _check_processes(config, accelerator.num_processes)
    if main:
        out.mkdir(parents=True, exist_ok=True)
        config.save(out / "config.json")
    set_seed(config.seed)
    card = config.card
    tokenizer = resolve_tokenizer(config)
    langs = {name: config.train_lang for name in card.segments}
    parser = make_parser(config)
    holdout = dev_holdout(card, config, out / "data_report.json" if resume else None)
    train, vocab = load_task_data(card, config, tokenizer, "train", langs, parser=parser, distributed=accelerator,
                                  limit=config.max_train_examples, holdout=holdout, progress=progress)
    dev, _ = load_task_data(card, config, tokenizer, "validation", langs, vocab=vocab, parser=parser,
                            distributed=accelerator, limit=config.max_eval_examples, holdout=holdout,
                            progress=progress)
    train_rows, dev_rows = train.rows(), dev.rows()
    if main:
        atomic_write_json(out / "data_report.json", {"train": train.report, "validation": dev.report})

    set_seed(config.seed)
    model, optimizer = accelerator.prepare(*_model_and_optimizer(config, card, tokenizer, vocab))
    steps_per_epoch = math.ceil(len(train_rows) / config.batch_size)
    total_steps = config.max_steps or math.ceil(config.epochs * steps_per_epoch)
    stepper = Stepper(accelerator, model, optimizer, LinearSchedule(config.learning_rate, config.warmup_steps,
                                                                    total_steps),
                      config.max_grad_norm, config.seed, config.grad_accum, hint=_numeric_hint(config),
                      count_items=labelled_pieces(train_rows, card.spec.piece_label_columns))
    eval_every = config.eval_every or steps_per_epoch
    save_every = config.save_every or eval_every
    state_dir = out / "state"
    state = load_state(accelerator, state_dir, TrainState) if resume else None
    if state is None:
        if resume and accelerator.is_main_process:
            logger.warning(f"--resume: {out} holds no saved state yet; the run starts from step 0")
        _clear_unfinished(accelerator, out)
        state = TrainState()
    if config.trackers:
        accelerator.init_trackers(f"xsyn-{config.task}", config=flat(config.to_dict()),
                                  init_kwargs=_tracker_settings(config.trackers, out, resume) if main else {})
    log = StepLog(out / "train_log.jsonl", accelerator, keep_until_step=state.step)
    bar = progress_bar(total_steps, state.step, main and progress, f"{config.task} {config.variant}")
    collate = make_collate(tokenizer.pad_token_id or 0)
    lengths = [len(row["input_ids"]) for row in train_rows] if config.group_by_length else None

    def collate_rows(indices: list[int]) -> dict[str, torch.Tensor]:
        return collate([train_rows[i] for i in indices])

    def forward(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        output = model(**model_inputs(batch, with_labels=True))
        return {"loss": output.loss, "task_loss": output.task_loss, **(output.syntax_losses or {})}

    # -- the loop --------------------------------------------------------------------------------
    model.train()

    def batches_of_epoch(epoch: int) -> list[list[int]]:
        return epoch_batches(len(train_rows), config.batch_size, config.seed, epoch, accelerator.num_processes,
                             lengths)

    for batch in remaining_batches(state, total_steps, batches_of_epoch):
        record = stepper.step(state.step, batch, collate_rows, forward)
        state.step += 1
        state.step_in_epoch += 1
        state.train_seconds += record.seconds
        state.data_wait_seconds += record.data_seconds
        bar.update(1)
        bar.set_postfix(loss=f"{record.losses['loss']:.4f}", examples_per_s=f"{record.rows / record.seconds:.0f}")
        if state.step % config.log_every == 0 or state.step == total_steps:
            log.write({"step": state.step, "epoch": state.epoch, **record.losses, "lr": record.lr,
                       "grad_norm": record.grad_norm})
        if state.step % eval_every == 0 or state.step == total_steps:
            result = score(card, dev.examples, dev.features, predict(
                model, dev_rows, accelerator, config.eval_batch_size, tokenizer.pad_token_id or 0),
                vocab.labels, vocab.tags, config.n_best, config.max_answer_length)
            log.write({"step": state.step, "dev": result["scores"], "dev_primary": result["primary"]})
            if state.best_score is None or result["primary"] > state.best_score:
                state.best_score, state.best_step = result["primary"], state.step
                _save_best(accelerator, model, tokenizer, out, config, vocab, card, state, result)
        if state.step % save_every == 0 or state.step == total_steps:
            save_state(accelerator, state_dir, asdict(state))
    bar.close()

    # -- finish ----------------------------------------------------------------------------------
    summary = {"task": config.task, "card": card.stamp, "variant": config.variant, "model": config.model,
               "seed": config.seed, "metric": card.metric, "best_dev_score": state.best_score,
               "best_step": state.best_step,
               "steps": state.step, "epochs_started": state.epoch + 1, "train_examples": len(train.examples),
               "train_features": len(train_rows), "train_seconds": state.train_seconds,
               "data_wait_fraction": state.data_wait_seconds / max(state.train_seconds, 1e-9),
               "processes": accelerator.num_processes, "versions": versions()}
    if main:
        atomic_write_json(out / "train_results.json", summary)
    log.close()
    if config.trackers:
        accelerator.end_training()
    accelerator.wait_for_everyone()
    return summary


def _check_processes(config: RunConfig, processes: int) -> None:
    """Every process needs a row of every micro-batch to take the step with the others."""
    micro = config.batch_size // config.grad_accum
    if micro < processes:
        raise ConfigError(f"--batch-size {config.batch_size} over --grad-accum {config.grad_accum} gives micro-batches "
                          f"of {micro} examples, fewer than the {processes} processes: raise --batch-size or lower "
                          "--grad-accum")


def _model_and_optimizer(config: RunConfig, card, tokenizer, vocab: Vocab):
    """The variant on the card's head, and AdamW (no weight decay on biases and LayerNorm weights)."""
    from xsyn.models.factory import build_model, label_settings

    head = card.spec.head
    model = build_model(config.model, config.variant, head, tokenizer=tokenizer,
                        **label_settings(head, vocab.labels, vocab.tags), **config.model_settings)
    if config.gat_init:
        model.base_model.load_gat(config.gat_init)
    if config.freeze_gat:
        model.base_model.freeze_gat()
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if p.requires_grad and not n.endswith(no_decay)],
         "weight_decay": config.weight_decay},
        {"params": [p for n, p in model.named_parameters() if p.requires_grad and n.endswith(no_decay)],
         "weight_decay": 0.0},
    ]
    return model, torch.optim.AdamW(groups, lr=config.learning_rate, eps=1e-8)


def _numeric_hint(config: RunConfig) -> str:
    """The settings a non-finite loss most likely comes from, as the user would change them."""
    hint = f"lower --learning-rate (now {config.learning_rate:g}) or --max-grad-norm (now {config.max_grad_norm:g})"
    if config.mixed_precision == "fp16":
        hint += "; or train in bf16 or full precision (--mixed-precision bf16|no)"
    return hint + ", and start the run again in a new --output-dir"


def _clear_unfinished(accelerator, out: Path) -> None:
    """A fresh start: drop what a run that stopped before its first complete save left (a `best/`
    and its dev result from an earlier attempt would otherwise outlive this run's)."""
    if accelerator.is_main_process:
        for name in ("best", "best.old", "best.tmp", "state.tmp"):
            shutil.rmtree(out / name, ignore_errors=True)
        (out / "validation_results.json").unlink(missing_ok=True)
    accelerator.wait_for_everyone()


_TRACKER_PACKAGES = {"tensorboard": ("tensorboard", "tensorboardX"), "wandb": ("wandb",)}  # as Accelerate checks


def _check_trackers(trackers: list[str]) -> None:
    """Accelerate drops a tracker whose package is missing without a word; a run that was asked to
    log somewhere must not train unlogged."""
    missing = [name for name in trackers
               if not any(importlib.util.find_spec(p) for p in _TRACKER_PACKAGES.get(name, (name,)))]
    if missing:
        raise ConfigError(f"--tracker {' '.join(missing)}: not installed; pip install {' '.join(missing)} "
                          "or leave the option out")


def _tracker_settings(trackers: list[str], out: Path, resume: bool) -> dict[str, dict[str, str]]:
    """W&B names the run after its folder and writes its files beside the run's other outputs, not
    in the working directory (unless WANDB_DIR says where). The W&B run id is kept in the folder, so
    that `--resume` continues the same W&B run instead of starting a second one."""
    if "wandb" not in trackers:
        return {}
    id_file = out / "wandb_run_id.txt"
    if resume and id_file.is_file():
        run_id = id_file.read_text(encoding="utf-8").strip()
    else:
        run_id = secrets.token_hex(6)
        atomic_write_text(id_file, run_id + "\n")
    settings = {"name": out.name, "id": run_id, "resume": "allow"}
    return {"wandb": settings | ({} if os.environ.get("WANDB_DIR") else {"dir": str(out)})}


def _save_best(accelerator, model, tokenizer, out: Path, config: RunConfig, vocab: Vocab, card, state: TrainState,
               result: dict[str, Any]) -> None:
    accelerator.wait_for_everyone()
    if not parameters_finite(model):  # the same weights on every process: all stop here together
        raise NonFiniteError(f"step {state.step}: the model's weights are no longer finite numbers, so it is not "
                             f"saved as {out / 'best'}. Most likely fix: {_numeric_hint(config)}")
    if accelerator.is_main_process:
        staged = out / "best.tmp"
        try:
            accelerator.unwrap_model(model).save_pretrained(staged, safe_serialization=True)
            tokenizer.save_pretrained(staged)
            atomic_write_json(staged / TASK_FILE, {"task": card.name, "labels": vocab.labels, "tags": vocab.tags,
                                                   "train_lang": config.train_lang, "step": state.step})
            replace_dir(staged, out / "best")
        except (OSError, RuntimeError) as err:  # safetensors and torch report a full disk as RuntimeError
            shutil.rmtree(staged, ignore_errors=True)
            raise OutputError(getattr(err, "errno", None) or 0, f"cannot write the checkpoint {staged} ({err}); "
                              "free some space or make the folder writable, then continue with --resume") from err
        atomic_write_json(out / "validation_results.json", {"step": state.step, "card": card.stamp,
                                                            "metric": card.metric, "primary": result["primary"],
                                                            "scores": result["scores"]})
        write_model_card(out / "best", out)
    accelerator.wait_for_everyone()
