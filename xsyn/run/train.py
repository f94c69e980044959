"""Fine-tuning on the source language: `xsyn finetune`, readable top to bottom.

One run = one task, variant, model and seed. It trains on the source language's training split
with AdamW, a linear schedule with warmup, gradient accumulation and clipping, under Accelerate
(one or many processes, fp16/bf16), evaluates on the source language's dev set every
`eval_every` optimiser steps, and keeps the best checkpoint. Everything a run writes lives in its
output folder, laid out by `xsyn.training.folder.RunFolder`.

The loop is `xsyn.training.driver.train`, which pre-training runs too; fine-tuning is the
`FinetuneTask` it is given (the task's data, model, losses and dev evaluation). A step's batch,
shares and random draws are fixed functions of the seed, so one process and N processes, or one
micro-batch and several, train the same run. `--resume` continues from `state/` and ends with
exactly the result of an uninterrupted run; a folder without a complete state (a run killed before
or during its first save) is started again by the same command.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed

from xsyn import provenance
from xsyn.data.features import sequence_lengths
from xsyn.models.compiled import compile_model, compiled_graphs
from xsyn.models.factory import build_model
from xsyn.models.variants import get_variant
from xsyn.run.inference import batch_collate, decode_and_score, model_outputs, padding
from xsyn.run.publish import write_model_card
from xsyn.run.resources import RunResources, finetune_resources
from xsyn.run.settings import ConfigError, RunConfig, current_names
from xsyn.run.task_data import LabelNames, TaskData, dev_holdout, load_task_data
from xsyn.training.checkpoint import WRITE_ERRORS, first_line, total_steps
from xsyn.training.device_rules import AUTO, resolve_adamw_kernel, resolve_length_budget, resolve_micro_batch_split
from xsyn.training.driver import TrainState, train, warn_fewer_processes
from xsyn.training.folder import RunFolder, staged, task_file
from xsyn.training.log import flat
from xsyn.training.loop import (
    NonFiniteError,
    epoch_batches,
    labelled_pieces,
    micro_batches,
    parameters_finite,
    planned_batches,
)
from xsyn.training.precision import AUTO_RESOLUTIONS, run_precision
from xsyn.training.processes import wait_for_everyone
from xsyn.trees.conventions import InputConventions
from xsyn.trees.padding import PaddedLength, batch_figures
from xsyn.utils.io import (
    OutputError,
    atomic_write_json,
    atomic_write_text,
    ensure_dir,
    removed_unless_swapped,
    replace_dir,
    saved_json_object,
)
from xsyn.utils.progress import duration

logger = logging.getLogger(__name__)
# The settings that make a step's batch (which rows, padded to which length): a resumed run keeps them
BATCHING = ("batch_size", "group_by_length", "pad_to_multiple_of", "max_batch_lengths", "micro_batch_split")


class TrainingBatches:
    """A run's training batches: each epoch a fixed function of (seed, epoch), length-grouped with
    `group_by_length`, each padded to `pad_to` (at most `max_batch_lengths` lengths, fitted to the rows), and cut
    into micro-batches as `micro_batch_split` says."""

    def __init__(self, config: RunConfig, rows: Sequence[dict[str, Any]]):
        self.config, self.rows = config, rows
        self.lengths = [max(sequence_lengths(row)) for row in rows]
        self.by_length = config.micro_batch_split == "by-length"
        self.pad_to = PaddedLength.fit(self.padded_from(), config.pad_to_multiple_of, config.max_batch_lengths)

    def padded_from(self) -> list[int]:
        """The lengths batches are padded from, which the ladder of lengths is fitted to: grouped batches hold
        rows of similar lengths, so the rows' own; a random batch's longest row is longer than most rows, so the
        longest row of each micro-batch of the first epoch (its batches: a function of the seed, as on resume)."""
        if self.config.group_by_length:
            return self.lengths
        # (a cut by length is made under the multiple alone here: the ladder is what is being fitted)
        multiple = PaddedLength(self.config.pad_to_multiple_of or 1)
        return [max(self.lengths[i] for i in micro) for batch in self.of_epoch(0)
                for micro in self.micros(batch, 1, multiple)]

    def of_epoch(self, epoch: int) -> list[list[int]]:
        return epoch_batches(len(self.rows), self.config.batch_size, self.config.seed, epoch,
                             self.lengths if self.config.group_by_length else None)

    def micros(self, batch: list[int], processes: int, padded: PaddedLength | None = None) -> list[list[int]]:
        """`batch` cut into the micro-batches a step computes (`micro_batches`; `by-length`: sorted and cut where
        the tokens padded to `padded`, by default `pad_to`, are least)."""
        if not self.by_length:
            return micro_batches(batch, self.config.grad_accum, processes)
        return micro_batches(batch, self.config.grad_accum, processes, self.lengths, padded or self.pad_to)

    def figures(self, batches: Iterable[list[int]]) -> dict[str, Any]:
        """The real and padded tokens and the distinct shapes of these global batches, each cut into its
        micro-batches as one process computes them (a function of the plan: the same on N processes)."""
        micros = (micro for batch in batches for micro in self.micros(batch, 1))
        return batch_figures(([n for i in micro for n in sequence_lengths(self.rows[i])] for micro in micros),
                             self.pad_to)


class FinetuneTask:
    """Fine-tuning as the loop sees it: the task's training rows in seeded batches, the head's
    losses, the dev evaluation, and the best checkpoint kept in `best/`."""

    def __init__(self, config: RunConfig, accelerator, folder: RunFolder, model, tokenizer, names: LabelNames,
                 train_data: TaskData, dev: TaskData):
        self.config, self.accelerator, self.folder = config, accelerator, folder
        self.model, self.tokenizer, self.names, self.dev = model, tokenizer, names, dev
        self.rows, self.dev_rows = train_data.rows(), dev.rows()
        self.n_rows = len(self.rows)
        self.description = f"{config.task} {config.variant}"
        self.hint = _numeric_hint(config)
        self.count_items = labelled_pieces(self.rows, config.card.task_kind.piece_label_columns)
        self.batching = TrainingBatches(config, self.rows)
        self._collate = batch_collate(model, tokenizer.pad_token_id or 0, self.batching.pad_to, with_labels=True)
        self._compiled: tuple[Any, Any] | None = None  # (model, its compiled training forward)

    def batches_of_epoch(self, epoch: int) -> list[list[int]]:
        return self.batching.of_epoch(epoch)

    def batch_figures(self, batches: Iterable[list[int]]) -> dict[str, Any]:
        return self.batching.figures(batches)

    def micro_batches(self, batch: list[int], processes: int) -> list[list[int]]:
        return self.batching.micros(batch, processes)

    def collate(self, indices: list[int]) -> dict[str, torch.Tensor]:
        """The model's inputs of the rows, and nothing else: all of it is copied to the device."""
        return self._collate([self.rows[i] for i in indices])

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | None]:
        output = self._training_model()(**batch)
        return {"loss": output.loss, "task_loss": output.task_loss, **(output.syntax_losses or {})}

    def _training_model(self):
        """The model, or with `torch_compile` its compiled form (made once per prepared model; the dev
        evaluation runs eager: its lengths vary without bound)."""
        if not self.config.torch_compile:
            return self.model
        if self._compiled is None or self._compiled[0] is not self.model:
            self._compiled = (self.model, compile_model(self.model, self.config.torch_compile))
        return self._compiled[1]

    def evaluate(self) -> dict[str, Any]:
        config = self.config
        outputs = model_outputs(self.model, self.dev_rows, self.accelerator, config.eval_batch_size,
                                self.tokenizer.pad_token_id or 0, **padding(config, self.accelerator.device.type))
        return decode_and_score(config.card, self.dev.examples, self.dev.features, outputs, self.names.labels,
                                self.names.tags, config.n_best, config.max_answer_length)

    def on_best(self, state: TrainState, result: dict[str, Any]) -> None:
        _save_best(self.accelerator, self.model, self.tokenizer, self.folder, self.config, self.names, state, result)


def finetune(run: RunConfig | RunResources, resume: bool = False, progress: bool = True) -> dict[str, Any]:
    """Train, evaluating on the dev set at intervals; returns the run summary (`train_results.json`). `run`: the
    run's resources (`finetune_resources`), or its settings, which are resolved into them here, checking every
    input before any work. The main process holds the run folder's writer lock throughout (the other ranks write
    nothing)."""
    config = run.config if isinstance(run, RunResources) else run
    folder = RunFolder(config.resolved_output_dir())
    finished = finished_summary(folder, config) if resume else None
    if finished is not None:
        return finished
    resources = run if isinstance(run, RunResources) else finetune_resources(config)
    with folder.writing():  # (first: a run another process is writing is named as such, whatever its settings)
        saved = saved_settings(folder) if resume else {}  # read once, under the lock, for the three checks below
        check_same_batching(config, saved, folder)
        return _finetune(resources, saved, resume, progress)


def _finetune(resources: RunResources, saved: dict[str, Any], resume: bool, progress: bool) -> dict[str, Any]:

    # -- setup -----------------------------------------------------------------------------------
    folder, tokenizer, parsers = resources.folder, resources.tokenizer, resources.parsers
    config = with_run_precision(resources.config, saved)
    accelerator = Accelerator(mixed_precision=config.mixed_precision, log_with=config.trackers or None,
                              project_dir=str(folder.path))
    config = with_device_rules(config, saved, accelerator.device.type)
    main = accelerator.is_main_process
    warn_fewer_processes(accelerator.num_processes)
    if main:
        ensure_dir(folder.path)
        config.save(folder.config)
    set_seed(config.seed)
    card = config.card
    langs = {name: config.train_lang for name in card.segments}
    holdout = dev_holdout(card, config, folder.data_report if resume else None)
    train_data, names = load_task_data(card, config, tokenizer, "train", langs, parsers=parsers,
                                       distributed=accelerator, limit=config.max_train_examples, holdout=holdout,
                                       progress=progress, warn_truncation=True)
    dev, _ = load_task_data(card, config, tokenizer, "validation", langs, names=names, parsers=parsers,
                            distributed=accelerator, limit=config.max_eval_examples, holdout=holdout,
                            progress=progress, warn_truncation=True)
    if main:
        atomic_write_json(folder.data_report, {"train": train_data.report, "validation": dev.report})
    set_seed(config.seed)
    task = FinetuneTask(config, accelerator, folder, build_run_model(config, card, tokenizer, names,
                                                                     resources.base_config),
                        tokenizer, names, train_data, dev)
    if config.trackers:
        accelerator.init_trackers(f"xsyn-{config.task}", config=flat(config.to_dict()),
                                  init_kwargs=_tracker_settings(config.trackers, folder, resume) if main else {})

    # -- the loop --------------------------------------------------------------------------------
    state = train(config, task, accelerator, folder, resume=resume, show_progress=progress)

    # -- finish ----------------------------------------------------------------------------------
    summary = {"task": config.task, "card": config.card.stamp, "variant": config.variant, "model": config.model,
               "seed": config.seed, "metric": card.metric, "best_dev_score": state.best_score,
               "best_step": state.best_step,
               "steps": state.step, "epochs_started": state.epoch + 1, "train_examples": len(train_data.examples),
               "train_features": task.n_rows, "train_seconds": state.train_seconds,
               "train_cpu_seconds": state.train_cpu_seconds,
               "data_wait_fraction": state.data_wait_seconds / max(state.train_seconds, 1e-9),
               "batches": task.batch_figures(planned_batches(state.step, task.batches_of_epoch)),
               "parsers": parsers.choices([config.train_lang]),
               "mixed_precision": config.mixed_precision, "adamw_kernel": state.adamw_kernel,
               "pad_to_multiple_of": config.pad_to_multiple_of, "max_batch_lengths": config.max_batch_lengths,
               "micro_batch_split": config.micro_batch_split,
               "batch_lengths": list(task.batching.pad_to.ladder) or None, **_compile_summary(config),
               "processes": accelerator.num_processes, **provenance()}
    if main:
        atomic_write_json(folder.train_results, summary)
    if config.trackers:
        accelerator.end_training()
    wait_for_everyone(accelerator)
    return summary


def trained_lines(summary: dict[str, Any], folder: str | Path) -> list[str]:
    """What `xsyn finetune` prints when training ends: the run folder, and the few figures a person reads (the
    whole summary is `train_results.json` there)."""
    best = summary.get("best_dev_score")
    found = (f"best dev {summary['metric']} {best:.2f} at step {summary['best_step']}" if best is not None
             else "no dev score (no evaluation ran)")
    return [f"trained: {summary['steps']} steps in {duration(summary.get('train_seconds') or 0)}; {found}",
            f"run folder: {Path(folder).resolve()} ({RunFolder(folder).train_results.name}: the whole summary; "
            f"{RunFolder(folder).best.name}/: the best checkpoint)"]


def saved_settings(folder: RunFolder) -> dict[str, Any]:
    """The settings a run folder's config.json saved, under today's names; {} where there is none to trust."""
    return current_names(saved_json_object(folder.config) or {})


def with_run_precision(config: RunConfig, saved: dict[str, Any]) -> RunConfig:
    """The run's settings with `mixed_precision` as it computes (`auto` resolved on this device), which
    config.json records. A resumed run (`saved`: its start's settings, `saved_settings`; {} for a fresh start)
    keeps what its start resolved `auto` to, on whatever device it continues: one run, one arithmetic."""
    was = saved.get("mixed_precision")
    chosen = was if config.mixed_precision == "auto" and was in AUTO_RESOLUTIONS else config.mixed_precision
    resolved = replace(config, mixed_precision=run_precision(chosen))
    resolved.card = config.card  # the card the settings were checked against, not read again
    return resolved


def check_same_batching(config: RunConfig, saved: dict[str, Any], folder: RunFolder) -> None:
    """A resumed run whose batching (`BATCHING`) differs from what its saved state was trained with (`saved`, its
    config.json) would switch batches mid-run, and its config.json would then claim the new batching for the whole
    run: refused, naming each setting with the saved and the given value (both as resolved and recorded)."""
    if not saved or not folder.has_progress():  # nothing trained yet: the run starts with what it is given
        return
    changed = [(name, saved[name], getattr(config, name)) for name in BATCHING  # (`auto` keeps what was saved:
               if name in saved and getattr(config, name) != AUTO and saved[name] != getattr(config, name)]  # below)
    if changed:
        listed = "; ".join(f"{name} {json.dumps(now)} (saved: {json.dumps(was)})" for name, was, now in changed)
        keep = " ".join(f"--set {name}={json.dumps(was)}" for name, was, _ in changed)
        raise ConfigError(f"--resume {folder.path}: the run was trained with other batches than this command gives "
                          f"({listed}; {folder.config}): a run keeps its batching to the end. Leave out the option "
                          f"that changes it (or give {keep}) to continue it, or start a new run in another "
                          "--output-dir")


# whose `auto` the device resolves
DEVICE_RULED = ("adamw_kernel", "pad_to_multiple_of", "max_batch_lengths", "micro_batch_split")


def with_device_rules(config: RunConfig, saved: dict[str, Any], device_type: str) -> RunConfig:
    """The run's settings with the `auto` of its AdamW kernel and length budget resolved on `device_type`
    (`xsyn.training.device_rules`), which config.json records. A resumed run (`saved`: its start's settings) keeps
    what its start resolved them to: one run, one batching and one arithmetic."""
    given = {name: saved[name] if getattr(config, name) == AUTO and saved.get(name, AUTO) != AUTO
             else getattr(config, name) for name in DEVICE_RULED}
    multiple, most = resolve_length_budget(given["pad_to_multiple_of"], given["max_batch_lengths"], device_type)
    try:
        kernel = resolve_adamw_kernel(given["adamw_kernel"], device_type)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    resolved = replace(config, adamw_kernel=kernel, pad_to_multiple_of=multiple, max_batch_lengths=most,
                       micro_batch_split=resolve_micro_batch_split(given["micro_batch_split"], device_type))
    resolved.card = config.card
    return resolved


def finished_summary(folder: RunFolder, config: RunConfig) -> dict[str, Any] | None:
    """A finished run's summary, where `--resume` asks for no more steps than it trained: said, and nothing
    reloaded, featurised or rewritten. None where there is something to continue (a longer schedule given
    with --resume, or one an interrupted resume asked for)."""
    summary = saved_json_object(folder.train_results)
    if summary is None or not isinstance(summary.get("train_features"), int):
        return None
    if summary.get("steps", 0) < total_steps(config, summary["train_features"]):
        return None
    logger.warning(f"{folder.path} is a finished run ({summary['steps']} steps, {folder.train_results.name}): "
                   f"nothing to continue, nothing reloaded or rewritten; `xsyn evaluate --model-dir {folder.path}` "
                   "scores it, --overwrite-output-dir (without --resume) trains it again")
    return summary


def build_run_model(config: RunConfig, card, tokenizer, names: LabelNames, base=None):
    """The variant on the card's head, its pre-trained syntax module loaded, and frozen, as the settings say;
    `base`: the checkpoint's configuration, read already (`RunResources.base_config`)."""
    model = build_model(config.model, config.variant, card.task_kind.head, tokenizer=tokenizer,
                        tiny_family=config.tiny_family, base=base,
                        **card.task_kind.head_settings(names.labels, names.tags), **config.model_settings)
    variant = get_variant(config.variant)
    if config.pretrained_syntax:
        variant.load_pretrained(model, config.pretrained_syntax)
    if config.freeze_pretrained:
        variant.freeze_pretrained(model)
    return model


def _compile_summary(config: RunConfig) -> dict[str, Any]:
    """With `torch_compile`: the graphs compiled in training (1 + its recompiles: every variant's forward is one
    graph), for the run summary."""
    if not config.torch_compile:
        return {}

    return {"torch_compile": config.torch_compile, "compiled_graphs": compiled_graphs(),
            "recompiles": max(0, compiled_graphs() - 1)}


def _numeric_hint(config: RunConfig) -> str:
    """The settings a non-finite loss most likely comes from, as the user would change them."""
    clip = (f"--max-grad-norm (now {config.max_grad_norm:g})" if config.max_grad_norm
            else "clip the gradient (max_grad_norm is 0: no clipping; 1.0 is the default)")
    hint = f"lower --learning-rate (now {config.learning_rate:g}) or {clip}"
    if config.mixed_precision == "fp16":
        hint += "; or train in bf16 or full precision (--mixed-precision bf16|no)"
    return hint + ", and start the run again in a new --output-dir"


def _tracker_settings(trackers: list[str], folder: RunFolder, resume: bool) -> dict[str, dict[str, str]]:
    """W&B names the run after its folder and writes its files beside the run's other outputs, not
    in the working directory (unless WANDB_DIR says where). The W&B run id is kept in the folder, so
    that `--resume` continues the same W&B run instead of starting a second one."""
    if "wandb" not in trackers:
        return {}
    id_file = folder.wandb_run_id
    if resume and id_file.is_file():
        run_id = id_file.read_text(encoding="utf-8").strip()
    else:
        run_id = secrets.token_hex(6)
        atomic_write_text(id_file, run_id + "\n")
    settings = {"name": folder.path.name, "id": run_id, "resume": "allow"}
    return {"wandb": settings | ({} if os.environ.get("WANDB_DIR") else {"dir": str(folder.path)})}


def _save_best(accelerator, model, tokenizer, folder: RunFolder, config: RunConfig, names: LabelNames,
               state: TrainState, result: dict[str, Any]) -> None:
    wait_for_everyone(accelerator)
    if not parameters_finite(model):  # the same weights on every process: all stop here together
        raise NonFiniteError(f"step {state.step}: the model's weights are no longer finite numbers, so it is not "
                             f"saved as {folder.best}. Most likely fix: {_numeric_hint(config)}")
    if accelerator.is_main_process:
        staging = staged(folder.best)
        try:
            with removed_unless_swapped(staging):
                accelerator.unwrap_model(model).save_pretrained(staging, safe_serialization=True)
                tokenizer.save_pretrained(staging)
                conventions = InputConventions.of(config).changed()  # how its inputs are built, where not xsyn's
                atomic_write_json(task_file(staging), {"task": config.card.name, "labels": names.labels,
                                                       "tags": names.tags, "train_lang": config.train_lang,
                                                       "step": state.step,
                                                       **({"input_conventions": conventions} if conventions else {})})
                replace_dir(staging, folder.best)
        except WRITE_ERRORS as err:
            kept = (f"the best checkpoint so far, {folder.best}, is kept" if folder.best.is_dir()
                    else "no checkpoint is saved yet")
            raise OutputError(getattr(err, "errno", None) or 0, f"cannot write the checkpoint {staging} "
                              f"({first_line(err)}); {kept}. Free some space or make the folder writable, then "
                              "continue with --resume") from err
        atomic_write_json(folder.validation_results, {"step": state.step, "card": config.card.stamp,
                                                      "metric": config.card.metric, "primary": result["primary"],
                                                      "scores": result["scores"]})
        write_model_card(folder.best, folder.path)
    wait_for_everyone(accelerator)
