"""`xsyn bench model`: step time, peak memory and FLOP utilisation of every syntax variant against
plain BERT.

One training step (forward + backward of the sequence head with its loss, the GAT's structural
loss included) on a synthetic batch of random dependency trees, at bert-base shape by default
(12 layers, hidden 768, sequence 128). All variants, and transformers' own
`BertForSequenceClassification` (sdpa attention, the `plain_bert` row: the target `none` must
meet), are built first and timed in interleaved rounds (none, gat, ..., plain_bert, none, ...), so
machine noise hits them alike. A row's time is its fastest round: other processes only ever add
time, so the minimum is the steadiest estimate of the step's own cost on a shared machine (the
median is kept too). On a CPU each row also has `cpu_seconds`, the median CPU time the process spent on
a step, and `cpu_time_ratio`: another process's load takes wall time from a step but adds no CPU time to
it, so on a shared machine (run with OMP_NUM_THREADS=1: idle OpenMP threads spin, and count) these ratios
hold where the timed ones scatter. In `bfloat16` (or `float16`) the forward pass runs under autocast, as
`--mixed-precision` trains; the weights stay float32.

Peak memory is the peak, over one step, of the bytes held by tensors allocated during that step
(activations kept for backward, temporaries, gradients; parameters and the batch are excluded):
on CPU from the allocation/free events of torch's profiler (`profile_memory=True`), on CUDA from
`torch.cuda.max_memory_allocated` above the level before the step. A row's `gradient_bytes` (the trainable
parameters' sizes) is a floor of that peak: every gradient is alive at the end of the backward, and where
they make the peak (float32, small batches on CPU) the ratio is the variant's share of parameters.

FLOPs are those of the step's matrix products and attention, counted from their shapes by
torch's `FlopCounterMode` (one extra, untimed step per row); for plain BERT they equal the
analytic count of `bert_step_flops` (6 x parameters x tokens plus the attention terms). Model
FLOP utilisation is FLOPs / step time / the device's peak rate: `--peak-tflops`, or the dense
bf16/fp16 peak of the GPU's data sheet where `PEAK_TFLOPS` knows its name.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoModelForSequenceClassification

from xsyn.benchmarks import options
from xsyn.benchmarks.device import check_device
from xsyn.models.compiled import compile_model, compiled_graphs
from xsyn.models.encoders import family_classes
from xsyn.models.families import family_of, resolve
from xsyn.models.names import ENCODER_SHAPES
from xsyn.models.variants import baseline_name, variant_names
from xsyn.run.inference import model_inputs
from xsyn.syntax.vocab import UPOS_SPECIAL_ID, UPOS_VOCAB_SIZE
from xsyn.trees.batch import collate_trees
from xsyn.trees.wordpiece import ROOT
from xsyn.utils.errors import OptionError

# The clocks the step timings read (module attributes, so a test can inject clocks and check the figures'
# arithmetic without asserting a speed): wall seconds, and this process's CPU seconds.
wall_clock = time.perf_counter
cpu_clock = time.process_time

if TYPE_CHECKING:
    import torch


def synthetic_batch(batch_size: int, seq_len: int, vocab_size: int, seed: int) -> dict[str, torch.Tensor]:
    """A collated batch of single-segment inputs over random trees (one word per piece)."""
    rng = np.random.default_rng(seed)
    n = seq_len - 2  # pieces between [CLS] and [SEP]
    features = []
    for _ in range(batch_size):
        order = rng.permutation(n) + 1  # tree nodes 1..n in random insertion order
        parent = np.zeros(seq_len, dtype=np.int64)
        parent[0] = ROOT
        for k in range(1, n):
            parent[order[k]] = order[rng.integers(0, k)]
        parent[order[0]] = 0  # the sentence root hangs from [CLS], as does [SEP] (parent 0)
        upos = np.concatenate([[UPOS_SPECIAL_ID], rng.integers(1, UPOS_VOCAB_SIZE - 2, n), [UPOS_SPECIAL_ID]])
        features.append({"input_ids": rng.integers(5, vocab_size, seq_len), "token_type_ids": np.zeros(seq_len),
                         "tree_parent": parent, "tree_upos": upos, "tree_deprel": upos,
                         "tree_word": np.concatenate([[-1], np.arange(n), [-1]]),
                         "tree_segment": np.concatenate([[-1], np.zeros(n), [-1]])})
    batch = collate_trees(features)
    batch["labels"] = torch.as_tensor(rng.integers(0, 2, batch_size))
    return batch


# Dense (no sparsity) bf16/fp16 tensor-core peaks from NVIDIA's data sheets, TFLOP/s; the first name
# contained in `torch.cuda.get_device_name()` counts (so the longer names come first).
PEAK_TFLOPS = (("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.0), ("H200", 989.0), ("A100", 312.0))
HALF_DTYPES = ("bfloat16", "float16")
PLAIN = "plain_"  # + family name: the row of transformers' own model of the family
PLAIN_BERT = PLAIN + "bert"


def peak_tflops(device: str, dtype: str) -> float | None:
    """The device's dense peak for `dtype` where known (bf16/fp16 on the GPUs of `PEAK_TFLOPS`), else None."""
    if not device.startswith("cuda") or dtype not in HALF_DTYPES:
        return None
    name = torch.cuda.get_device_name(torch.device(device))
    return next((peak for key, peak in PEAK_TFLOPS if key in name), None)


def bert_step_flops(layers: int, hidden: int, intermediate: int, seq_len: int, batch_size: int,
                    num_labels: int = 2) -> int:
    """FLOPs of one training step of BERT with a sequence head, from the shapes alone.

    Per token and layer the forward pass multiplies by the Q, K, V, output and two feed-forward
    matrices (2 x their 4 H^2 + 2 H I weights) and attends over T keys (QK^T and PV: 4 T H); the
    pooler and classifier run once per sequence. Backward costs twice the forward (a product with
    respect to each operand): 3x in all, i.e. 6 x (non-embedding) parameters x tokens + 12 L H T^2 B.
    """
    tokens = batch_size * seq_len
    per_token_layer = 2 * (4 * hidden * hidden + 2 * hidden * intermediate) + 4 * seq_len * hidden
    forward = tokens * layers * per_token_layer + batch_size * (2 * hidden * hidden + 2 * hidden * num_labels)
    return 3 * forward


def build(variant: str, shape: dict, seed: int, device: str, family: str = "bert"):
    """A sequence classifier of `variant` at `shape` on the `family`'s encoder, or for its plain row
    (`plain_bert`, `plain_xlm-roberta`) transformers' own model of the family."""
    encoder = family_of(family)
    torch.manual_seed(seed)
    with torch.device(device):  # initialised where it runs: a GPU draws bert-base's weights in moments
        if variant == PLAIN + encoder.name:
            return AutoModelForSequenceClassification.from_config(
                resolve(encoder.config)(num_labels=2, **shape), attn_implementation="sdpa").train()
        classes = family_classes(encoder)
        return classes.heads["sequence"](classes.config(variant=variant, num_labels=2, **shape)).train()


def step_batch(batch_size: int, seq_len: int, vocab_size: int, seed: int, device: str) -> dict[str, torch.Tensor]:
    """`synthetic_batch` on `device`, as a training step hands a batch to the model (`model_inputs`: its inputs,
    and no attention mask where no row is padded)."""
    batch = model_inputs(synthetic_batch(batch_size, seq_len, vocab_size, seed), with_labels=True)
    return {k: v.to(device) for k, v in batch.items()}


def model_batch(variant: str, batch: dict) -> dict:
    """A plain row takes only the encoder's own inputs."""
    if not variant.startswith(PLAIN):
        return batch
    return {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids", "labels") if k in batch}


def _autocast(device: str, dtype: str):
    if dtype == "float32":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=getattr(torch, dtype))


def train_step(model, batch: dict, dtype: str = "float32") -> None:
    model.zero_grad(set_to_none=True)
    with _autocast(str(next(model.parameters()).device), dtype):
        loss = model(**batch).loss
    loss.backward()


def step_seconds(model, batch: dict, device: str, dtype: str = "float32") -> float:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = wall_clock()
    train_step(model, batch, dtype)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return wall_clock() - start


def peak_bytes(model, batch: dict, device: str, dtype: str = "float32") -> int:
    """Peak bytes of the tensors allocated during one step (see the module docstring)."""
    model.zero_grad(set_to_none=True)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        train_step(model, batch, dtype)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        train_step(model, batch, dtype)
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    live = peak = 0
    for event in events:
        live += event.nbytes()
        peak = max(peak, live)
    return peak


def gradient_bytes(model) -> int:
    """The bytes of the gradients a step makes (the trainable parameters' sizes): a floor of its peak."""
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


def step_flops(model, batch: dict, dtype: str = "float32") -> int:
    """FLOPs of one step's matrix products and attention, counted from their shapes."""
    with FlopCounterMode(display=False) as counter:
        train_step(model, batch, dtype)
    return counter.get_total_flops()


def step_ops(model, batch: dict, dtype: str = "float32") -> dict[str, int]:
    """The ATen ops one step dispatches, by op, views left out (they launch no kernel): a proxy, on any
    device, for the kernels an eager GPU step launches, on whose issue a small step waits."""
    class OpCounter(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops: Counter[str] = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not func.is_view:
                self.ops[str(func.overloadpacket)] += 1
            return func(*args, **(kwargs or {}))

    with OpCounter() as counter:
        train_step(model, batch, dtype)
    return dict(counter.ops.most_common())


def count_ops(variants: list[str], shape: dict, batch_size: int, seq_len: int, seed: int, device: str,
              dtype: str = "float32", family: str = "bert") -> dict[str, dict[str, Any]]:
    """Per variant (eager, after one warm-up step): the ops of one training step, in all and by op, and their
    ratio to the baseline's (`none`)."""
    batch = step_batch(batch_size, seq_len, shape["vocab_size"], seed, device)
    results = {}
    for variant in variants:
        model = build(variant, shape, seed, device, family)
        train_step(model, batch, dtype)
        by_op = step_ops(model, batch, dtype)
        results[variant] = {"ops_per_step": sum(by_op.values()), "ops": by_op}
    for result in results.values():
        result["ops_ratio"] = result["ops_per_step"] / results[baseline_name()]["ops_per_step"]
    return results


def measure(variants: list[str], shape: dict, batch_size: int, seq_len: int, repeats: int, seed: int,
            device: str, dtype: str = "float32", peak: float | None = None, warmup: int = 1,
            plain_bert: bool = True, family: str = "bert", compile_mode: str | None = None
            ) -> dict[str, dict[str, float]]:
    """Per row (the variants, then the family's plain row, `plain_bert` for BERT): fastest and median step
    seconds, peak bytes, tokens per second, FLOPs and (given a peak rate in TFLOP/s) FLOP utilisation, the
    ops of an eager step, syntax parameters, ratios to the baseline (`none`). With `compile_mode` every row is
    timed compiled (`torch.compile` in that mode), with the seconds of its first (compiling) step and its
    compiled graphs (1 + recompiles: every variant's forward is one graph)."""
    batch = step_batch(batch_size, seq_len, shape["vocab_size"], seed, device)
    rows = list(variants) + ([PLAIN + family] if plain_bert else [])
    models = {v: build(v, shape, seed, device, family) for v in rows}
    runners = {v: compile_model(m, compile_mode) if compile_mode else m for v, m in models.items()}
    first_step, graphs = {}, dict.fromkeys(rows, 0)
    for _ in range(warmup):  # first-call allocations, kernel selection, compiling
        for row, runner in runners.items():
            before, start = compiled_graphs(), wall_clock()
            train_step(runner, model_batch(row, batch), dtype)
            first_step.setdefault(row, wall_clock() - start)
            graphs[row] += compiled_graphs() - before
    times: dict[str, list[float]] = {v: [] for v in rows}
    cpu_times: dict[str, list[float]] = {v: [] for v in rows}  # this process's CPU seconds: others' load adds none
    for _ in range(repeats):
        for row, runner in runners.items():
            before, cpu = compiled_graphs(), cpu_clock()
            times[row].append(step_seconds(runner, model_batch(row, batch), device, dtype))
            cpu_times[row].append(cpu_clock() - cpu)
            graphs[row] += compiled_graphs() - before
    results = {}
    for row, model in models.items():
        inputs = model_batch(row, batch)
        seconds = min(times[row])
        flops = step_flops(model, inputs, dtype)
        results[row] = {"step_seconds": seconds, "median_seconds": statistics.median(times[row]),
                        "peak_bytes": peak_bytes(runners[row], inputs, device, dtype),
                        "gradient_bytes": gradient_bytes(model),
                        "tokens_per_second": batch_size * seq_len / seconds, "flops_per_step": flops,
                        "mfu": flops / seconds / (peak * 1e12) if peak else None,
                        "ops_per_step": sum(step_ops(model, inputs, dtype).values()),
                        "syntax_parameters": (0 if row.startswith(PLAIN) else
                                              sum(p.numel() for _, p in model.base_model.syntax_parameters()))}
        if not device.startswith("cuda"):
            results[row]["cpu_seconds"] = statistics.median(cpu_times[row])
        if compile_mode:
            results[row].update(compile_mode=compile_mode, compile_seconds=first_step[row],
                                compiled_graphs=graphs[row], recompiles=max(0, graphs[row] - 1))
    base = results[baseline_name()]
    for result in results.values():
        result["step_time_ratio"] = result["step_seconds"] / base["step_seconds"]
        result["peak_memory_ratio"] = result["peak_bytes"] / base["peak_bytes"]
        result["ops_ratio"] = result["ops_per_step"] / base["ops_per_step"]
        if "cpu_seconds" in result:
            result["cpu_time_ratio"] = result["cpu_seconds"] / base["cpu_seconds"]
    return results


def embedding_costs(shape: dict, family: str, batch_size: int, seq_len: int, repeats: int, seed: int,
                    device: str, dtype: str = "float32") -> dict[str, float]:
    """What the embedding matrix costs the `none` model at `shape`: its parameters and share, the step
    with it trained and frozen (fastest of `repeats` interleaved rounds; peak step bytes, its gradient
    included), AdamW's update of all parameters (fastest of `repeats`) and its state (two float32 moments
    per parameter)."""
    model = build(baseline_name(), shape, seed, device, family)
    batch = step_batch(batch_size, seq_len, shape["vocab_size"], seed, device)
    embeddings = model.base_model.embeddings
    words = embeddings.word_embeddings.weight
    total = sum(p.numel() for p in model.parameters())
    embedding = sum(p.numel() for p in embeddings.parameters())
    peaks, times = {}, {True: [], False: []}
    for trained in (True, False):  # a warm-up step, then the peak of one
        words.requires_grad_(trained)
        train_step(model, batch, dtype)
        peaks[trained] = peak_bytes(model, batch, device, dtype)
    for _ in range(repeats):
        for trained in (True, False):
            words.requires_grad_(trained)
            times[trained].append(step_seconds(model, batch, device, dtype))
    words.requires_grad_(True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    train_step(model, batch, dtype)
    updates = []
    for _ in range(repeats + 1):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = wall_clock()
        optimizer.step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        updates.append(wall_clock() - start)
    return {"parameters": total, "embedding_parameters": embedding, "embedding_share": embedding / total,
            "word_embedding_bytes": words.numel() * words.element_size(),
            "step_seconds": min(times[True]), "step_seconds_frozen_embeddings": min(times[False]),
            "peak_bytes": peaks[True], "peak_bytes_frozen_embeddings": peaks[False],
            "optimizer_step_seconds": min(updates[1:]),
            "optimizer_state_bytes": 2 * 4 * sum(p.numel() for p in model.parameters() if p.requires_grad)}



def run_model_bench(variants: Sequence[str] | None = None, layers: int | None = None, hidden: int | None = None,
                    heads: int | None = None, seq_len: int = 128, batch_size: int | None = None,
                    vocab_size: int | None = None,
                    repeats: int | None = None, seed: int = 0, device: str = "cpu", dtype: str = "float32",
                    peak: float | None = None, plain_bert: bool = True, encoders: Sequence[str] | None = None,
                    compile_mode: str | None = None, ops_only: bool = False) -> dict[str, Any]:
    """`xsyn bench model`: the variants [default: every registered one] and the baseline (`none`,
    always) at a random model of the given shape (timed compiled with `compile_mode`; with `ops_only` the ops
    of one eager step are counted instead, `ops`), or with
    `encoders` at each published shape in turn with what its embedding matrix costs; `peak`: the device's
    peak TFLOP/s for `dtype` [default: `peak_tflops`'s]. The shape's options left None take bert-base's
    (`options.DEFAULT_SHAPE`); every option is checked first (`xsyn.benchmarks.options`). Returns the settings it
    ran at (device, dtype, batch_size, seq_len, repeats, peak_tflops, and the shape: layers, hidden) and `rows`
    ({row: `measure`'s figures}) or `encoders` ({name: {"rows", "embedding"}})."""
    baseline, registered = baseline_name(), variant_names()
    named = registered if variants is None else variants
    chosen = [baseline] + [v for v in dict.fromkeys(named) if v and v != baseline]
    unknown = [v for v in chosen if v not in registered]
    if unknown:
        raise OptionError(f"--variants: unknown variant(s) {', '.join(unknown)}; choose from {', '.join(registered)}")
    options.check_path(ops_only, repeats=repeats, peak=peak, compile_mode=compile_mode, encoders=encoders,
                       plain_bert=plain_bert)
    options.at_least(1, batch_size=batch_size, repeats=repeats)
    options.at_least(3, seq_len=seq_len)  # [CLS], a word, [SEP]
    options.at_least(0, seed=seed)
    size = options.model_shape(layers, hidden, heads, vocab_size, encoders)
    shape = size and {"num_hidden_layers": size["layers"], "hidden_size": size["hidden"],
                      "num_attention_heads": size["heads"], "intermediate_size": 4 * size["hidden"],
                      "vocab_size": size["vocab_size"], "max_position_embeddings": max(512, seq_len)}
    shapes = [("bert", shape)] if shape else [(family, config) for _, family, config in _encoder_shapes(encoders,
                                                                                                      seq_len)]
    options.check_variant_shapes(chosen, shapes)
    device = check_device(device)
    gpu = device.startswith("cuda")
    batch_size, repeats = batch_size or (32 if gpu else 2), repeats or (20 if gpu else 5)
    ran = {"device": device, "dtype": dtype, "batch_size": batch_size, "seq_len": seq_len, "repeats": repeats,
           "peak_tflops": peak or peak_tflops(device, dtype), **(size or {})}
    timing = {"batch_size": batch_size, "seq_len": seq_len, "repeats": repeats, "seed": seed, "device": device,
              "dtype": dtype}
    measured = {**timing, "peak": ran["peak_tflops"], "warmup": 3 if gpu else 1, "plain_bert": plain_bert,
                "compile_mode": compile_mode}
    if ops_only:
        return {**ran, "ops": count_ops(chosen, shape, batch_size, seq_len, seed, device, dtype)}
    if encoders is None:
        return {**ran, "rows": measure(chosen, shape, **measured)}
    return {**ran, "encoders": {name: {"rows": measure(chosen, shape, family=family, **measured),
                                       "embedding": embedding_costs(shape, family, **timing)}
                                for name, family, shape in _encoder_shapes(encoders, seq_len)}}


def _encoder_shapes(names: Sequence[str], seq_len: int) -> list[tuple[str, str, dict]]:
    """(name, family, shape) of each published encoder named, its positions stretched to `seq_len`."""
    unknown = [name for name in names if name not in ENCODER_SHAPES]
    if unknown or not names:
        raise OptionError(f"--encoders: unknown encoder(s) {', '.join(unknown)}; choose from "
                          f"{', '.join(ENCODER_SHAPES)}")
    return [(name, ENCODER_SHAPES[name].family,
             {**ENCODER_SHAPES[name].config,
              "max_position_embeddings": max(ENCODER_SHAPES[name].config["max_position_embeddings"], seq_len + 2)})
            for name in names]
