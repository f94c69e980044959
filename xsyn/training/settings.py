"""The settings of a training run that the loop reads, one rule each: `LoopSettings`, which fine-tuning's
`RunConfig` (`xsyn.run.settings`) and pre-training's `PretrainSettings` (`xsyn.pretraining.trainer`) extend.
Its defaults are fine-tuning's; a schema that extends it changes a default with `loop_default`, never a rule.
(No `from __future__ import annotations`: `@strict` checks the real annotations' types on assignment.)"""

from dataclasses import Field, dataclass, field, replace
from typing import Any, TypeVar

from xsyn.models.defaults import DEFAULT_MODEL, DEFAULT_SEED
from xsyn.training.checkpoint import check_checkpointing_steps, total_steps
from xsyn.utils.schema import at_least, finite_above_zero, strict, validated_field

WARMUP_SHARE = 0.05  # of the steps, where warmup_steps is None


def count(default: int | None) -> Any:
    """A field that counts (examples, steps, sizes): at least 1 (None where it allows none)."""
    return validated_field(at_least(1), default=default)


@strict
@dataclass(kw_only=True)
class LoopSettings:
    model: str = DEFAULT_MODEL  # a hub name or a checkpoint folder
    tokenizer: str | None = None  # default: the model's own
    seed: int = validated_field(at_least(0), default=DEFAULT_SEED)
    epochs: float = validated_field(finite_above_zero, default=3.0)
    max_steps: int | None = count(None)  # overrides epochs
    learning_rate: float = validated_field(finite_above_zero, default=2e-5)  # the peak of the linear schedule
    batch_size: int = count(32)  # examples per optimiser step, over all processes and accumulation steps
    grad_accum: int = count(1)  # micro-batches per optimiser step
    warmup_steps: int | None = validated_field(at_least(0), default=0)  # None: a twentieth of the steps
    weight_decay: float = validated_field(at_least(0), default=0.0)  # AdamW's, on all but biases and LayerNorm
    max_grad_norm: float | None = validated_field(at_least(0), default=1.0)  # clipping (0 or None: none, no pass)
    max_length: int = count(128)  # word pieces per input
    # Quick runs: fine-tuning takes the first N examples; pre-training a seeded sample of N sentences per treebank.
    max_train_examples: int | None = count(None)
    max_eval_examples: int | None = count(None)  # ... of dev (an experiment caps its tests too) or probed treebanks
    eval_every: int | None = count(None)  # optimiser steps between dev evaluations (default: once an epoch)
    checkpointing_steps: int | str | None = validated_field(check_checkpointing_steps, default=None)  # N steps or
    # "epoch" between resumable states (default: at every evaluation, and at the end)
    save_total_limit: int | None = count(None)  # resumable states kept: state/ and checkpoint-<step>/ (default: 1)
    log_every: int = count(10)  # optimiser steps between logged (mean) losses


def loop_default(name: str, default: Any) -> Any:
    """`LoopSettings`' field `name` with another default, its rule unchanged (declared in a schema that extends it,
    under the same annotation)."""
    declared: Field = LoopSettings.__dataclass_fields__[name]
    return field(default=default, metadata=declared.metadata, kw_only=True)


S = TypeVar("S", bound=LoopSettings)


def with_warmup(settings: S, n_rows: int) -> S:
    """The settings with their warmup in steps: None becomes a twentieth of the run's steps over `n_rows`."""
    if settings.warmup_steps is not None:
        return settings
    return replace(settings, warmup_steps=int(WARMUP_SHARE * total_steps(settings, n_rows)))
