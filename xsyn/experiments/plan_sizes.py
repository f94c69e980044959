"""What a cell's model takes: its shape, its parameters, the disk its checkpoints hold and the device memory it
trains in (`xsyn experiment plan`; `experiment run --cells-per-gpu` packs cells by the last)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xsyn.experiments.bench_figures import (
    EXTRAPOLATED,
    MEASURED,
    UNKNOWN,
    Benchmarks,
    Figure,
    StepBench,
    bench_dtype,
)
from xsyn.experiments.experiment_file import Experiment

OPTIMIZER_MOMENTS = 2  # AdamW keeps two float32 tensors per weight
FLOAT_BYTES = 4


def model_shape(model: str) -> dict[str, Any] | None:
    """A model's config: a published checkpoint xsyn knows, the `tiny` preset, a local folder's config.json,
    or the hub cache's copy; None where none is on this machine."""
    from xsyn.benchmarks.model import ENCODER_SHAPES
    from xsyn.models.names import MODEL_CONFIG, TINY, TINY_SHAPE

    known = {TINY: TINY_SHAPE, **{shape.checkpoint: shape.config for shape in ENCODER_SHAPES.values()}}
    if model in known:
        return known[model]
    file: Path | str | None = Path(model) / MODEL_CONFIG
    if not Path(file).is_file():
        from huggingface_hub import try_to_load_from_cache

        file = try_to_load_from_cache(model, MODEL_CONFIG)
    if isinstance(file, (str, Path)) and Path(file).is_file():
        return json.loads(Path(file).read_text(encoding="utf-8"))
    return None


def tokenizer_vocab_size(experiment: Experiment, config) -> int | None:
    """The vocabulary a cell's model gets from its tokenizer, where the model's config gives none (the tiny
    preset): the synthetic benchmark's own vocabulary, or a local vocab.txt's lines; None: mBERT's."""
    from xsyn.data.synth import vocabulary
    from xsyn.experiments.experiment_file import SYNTH_VOCAB

    tokenizer = config.tokenizer
    if not tokenizer:
        return None
    if tokenizer == str(experiment.runs_dir / SYNTH_VOCAB):
        return len(vocabulary())
    file = Path(tokenizer)
    if file.is_dir():
        file = file / "vocab.txt"
    if file.is_file() and file.suffix == ".txt":
        return sum(1 for line in file.read_text(encoding="utf-8").splitlines() if line.strip())
    return None


def checkpoint_disk(model: str, keep: int, benchmarks: Benchmarks, vocab: int | None = None) -> Figure:
    """Bytes a finished cell holds: `keep` resumable states (weights + AdamW moments) and the best weights."""
    from xsyn.benchmarks.model import ENCODER_SHAPES

    shape = model_shape(model)
    if shape is None:
        return Figure(None, UNKNOWN, f"the shape of {model} is not known here")
    measured = next((benchmarks.sizes[name] for name, known in ENCODER_SHAPES.items()
                     if known.config == shape and name in benchmarks.sizes), None)
    if measured:
        weights = FLOAT_BYTES * measured["parameters"]
        return Figure(keep * (weights + measured["optimizer_state_bytes"]) + weights, MEASURED,
                      f"save_total_limit {keep}")
    weights = FLOAT_BYTES * parameter_count(shape, vocab)
    return Figure(weights * (keep * (1 + OPTIMIZER_MOMENTS) + 1), EXTRAPOLATED,
                  f"save_total_limit {keep}, parameters counted from {model}'s config")


TRAINING_BYTES_PER_PARAMETER = FLOAT_BYTES * (2 + OPTIMIZER_MOMENTS)  # float32 weights, gradients, AdamW moments
CUDA_CONTEXT_BYTES = 512 * 2 ** 20  # a process's CUDA context and allocator slack beside its tensors (assumed)


def device_memory(bench: StepBench | None, config, variant: str, vocab: int | None = None) -> Figure:
    """Device bytes one training cell holds at its peak: weights, gradients and AdamW's moments of its own
    model, the activations the benchmark measured (its peak less its model's own 16 bytes a parameter) scaled
    to the cell's tokens and layer sizes, and a CUDA context. What `--cells-per-gpu` packs by."""
    shape = model_shape(config.model)
    if bench is None or shape is None:
        return Figure(None, UNKNOWN, "unmeasured device" if bench is None else f"the shape of {config.model} is "
                                                                             "not known here")
    dtype = bench_dtype(config.mixed_precision, bench.device)
    dtype = dtype if dtype in bench.rows else next(iter(bench.rows), dtype)
    row = bench.rows.get(dtype, {}).get(variant, {})
    peak = row.get("peak_bytes")
    if not isinstance(peak, (int, float)) or not peak > 0:
        return Figure(None, UNKNOWN, f"{bench.source.name} has no peak memory for {variant} ({dtype})")
    tokens = round(row["tokens_per_second"] * row["step_seconds"])
    activations = max(0.0, peak - TRAINING_BYTES_PER_PARAMETER * parameter_count(bench.shape))
    scale = _activation_cost(shape, config.batch_size * config.max_length) / _activation_cost(bench.shape, tokens)
    held = TRAINING_BYTES_PER_PARAMETER * parameter_count(shape, vocab)
    why = (f"device memory: {bench.device} {dtype} peaks, activations x{scale:.3g} for "
           f"{config.batch_size} x {config.max_length} tokens on {config.model}, "
           f"{CUDA_CONTEXT_BYTES / 2 ** 30:g} GiB CUDA context")
    return Figure(held + activations * scale + CUDA_CONTEXT_BYTES, EXTRAPOLATED, why)


def _activation_cost(shape: Mapping[str, Any], tokens: int) -> float:
    """What a step's saved activations take, up to a constant: per token and layer, the hidden and
    feed-forward widths (attention's n^2 scores left out)."""
    hidden = shape["hidden_size"]
    return shape["num_hidden_layers"] * (hidden + shape.get("intermediate_size", 4 * hidden)) * tokens


def parameter_count(shape: Mapping[str, Any], vocab: int | None = None) -> int:
    """BERT's parameter count from its config (embeddings, layers, pooler); a config without a vocabulary (the
    tiny preset) takes its tokenizer's, `vocab`, by default mBERT's."""
    from xsyn.benchmarks.model import ENCODER_SHAPES

    h = shape["hidden_size"]
    inner = shape.get("intermediate_size", 4 * h)
    vocab = shape.get("vocab_size", vocab or ENCODER_SHAPES["mbert"].config["vocab_size"])
    embeddings = (vocab + shape.get("max_position_embeddings", 512) + shape.get("type_vocab_size", 2)) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h * inner + inner + h + 4 * h  # attention, feed-forward, two layer norms
    return embeddings + shape["num_hidden_layers"] * layer + h * h + h
