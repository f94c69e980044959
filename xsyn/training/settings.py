"""The settings of a training run that the loop reads, one rule each: `LoopSettings`, which fine-tuning's
`RunConfig` (`xsyn.run.settings`) and pre-training's `PretrainSettings` (`xsyn.pretraining.trainer`) extend.
Its defaults are fine-tuning's; a schema that extends it changes a default with `loop_default`, never a rule.
(No `from __future__ import annotations`: `@strict` checks the real annotations' types on assignment.)"""

from dataclasses import dataclass, replace
from typing import Any, TypeVar

from xsyn.models.names import DEFAULT_MODEL, DEFAULT_SEED
from xsyn.training.checkpoint import check_checkpointing_steps, total_steps
from xsyn.training.device_rules import ADAMW_KERNELS, AUTO
from xsyn.utils.schema import at_least, finite_above_zero, one_of, same_rule, setting, strict

WARMUP_SHARE = 0.05  # of the steps, where warmup_steps is None


def count(default: int | None, help: str) -> Any:
    """A field that counts (examples, steps, sizes): at least 1 (None where it allows none); `help` says what."""
    return setting(default, check=at_least(1), help=help)


@strict
@dataclass(kw_only=True)
class LoopSettings:
    model: str = setting(DEFAULT_MODEL, help="a hub name, a checkpoint folder, or tiny (a random 2-layer model)")
    tokenizer: str | None = setting(None, help="a vocab.txt, tokenizer folder or hub name; default: the model's own")
    seed: int = setting(DEFAULT_SEED, check=at_least(0), help="seeds initialisation, data order and dropout")
    epochs: float = setting(3.0, check=finite_above_zero, help="passes over the training data")
    max_steps: int | None = count(None, "stop after this many optimiser steps (overrides epochs)")
    learning_rate: float = setting(2e-5, check=finite_above_zero, help="peak learning rate (linear warmup, then linear "
                                   "decay)")
    batch_size: int = count(32, "examples per optimiser step, over all processes and accumulation steps")
    grad_accum: int = count(1, "micro-batches per optimiser step (the batch stays batch_size)")
    warmup_steps: int | None = setting(0, check=at_least(0), help="steps over which the learning rate warms up (none: "
                                       "a twentieth of the steps)")
    weight_decay: float = setting(0.0, check=at_least(0), help="AdamW's weight decay (not on biases and LayerNorm)")
    adamw_kernel: str = setting(AUTO, check=one_of(ADAMW_KERNELS), help="AdamW's kernel: auto (fused wherever "
                                "torch has it for the device, else foreach, else for-loop; recorded as chosen), "
                                "fused, foreach or for-loop")
    max_grad_norm: float | None = setting(1.0, check=at_least(0), help="clip the gradient's global norm to this (0 or "
                                          "none: no clipping)")
    max_length: int = count(128, "word pieces per input; longer inputs are cut (and counted)")
    max_train_examples: int | None = count(None, "use only the first N training examples (pre-training: a seeded "
                                           "sample of N sentences per treebank)")
    max_eval_examples: int | None = count(None, "use only the first N dev examples (or probed sentences); an "
                                          "experiment's and the demo's tests too, N of each language or pair, as "
                                          "many of each label as N allows")
    eval_every: int | None = count(None, "optimiser steps between dev evaluations (default: once an epoch)")
    checkpointing_steps: int | str | None = setting(None, check=check_checkpointing_steps, help="N steps or epoch "
                                                    "between resumable states (default: at every evaluation, and at "
                                                    "the end)")
    save_total_limit: int | None = count(None, "resumable states kept: state/ and checkpoint-<step>/ (default: 1)")
    log_every: int = count(10, "optimiser steps between logged losses")


def loop_default(name: str, default: Any) -> Any:
    """`LoopSettings`' field `name` with another default, its rule unchanged (declared in a schema that extends it,
    under the same annotation)."""
    return same_rule(LoopSettings, name, default)


S = TypeVar("S", bound=LoopSettings)


def with_warmup(settings: S, n_rows: int) -> S:
    """The settings with their warmup in steps: None becomes a twentieth of the run's steps over `n_rows`."""
    if settings.warmup_steps is not None:
        return settings
    return replace(settings, warmup_steps=int(WARMUP_SHARE * total_steps(settings, n_rows)))
