"""What the peak memory of one training step is made of, per variant, on the CPU.

For each variant at bert-base shape (random weights, the synthetic batch of `xsyn bench model`), after one
warm-up step:

- `peak`: the peak bytes of the step's own tensors, as `xsyn bench model` measures them on the CPU
  (`xsyn.benchmarks.model.peak_bytes`), and its ratio to `none`'s;
- `gradients`: the bytes of the gradients the step makes (trainable parameters' sizes): a floor of the
  peak, since every gradient is alive at the end of the backward. Where they make the peak (float32, small
  batches), a variant's ratio is about its share of parameters, whatever its activations;
- the allocations alive at the peak, grouped by the ATen op that made them (its nearest backward node in
  the backward), forward (F) or backward (B): which tensors a variant adds at its peak.

    python scripts/step_memory.py --variants none,gat,sep --dtype bfloat16 --batch-size 8

Reads torch's profiler event tree (`experimental_event_tree`, a private interface): a diagnostic, not part
of the package.
"""

from __future__ import annotations

import argparse
import collections

import torch
from torch._C._profiler import _EventType
from torch.profiler import ProfilerActivity, profile

from xsyn.benchmarks.model import build, gradient_bytes, peak_bytes, synthetic_batch, train_step

BERT_BASE = {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072,
             "max_position_embeddings": 512}


def _allocations(prof) -> list:
    """The profiler's allocation and free events, in time order."""
    found, stack = [], list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        if event.tag == _EventType.Allocation:
            found.append(event)
        stack.extend(event.children)
    return sorted(found, key=lambda e: e.start_time_ns)


def _origin(event) -> str:
    """'F op' or 'B op <- backward node': the op that made an allocation, and the backward node it ran in."""
    ops = []
    while event is not None:
        if event.tag == _EventType.TorchOp:
            ops.append(event.name)
        event = event.parent
    nodes = [name for name in ops if "Backward" in name]
    return f"B {ops[0]} <- {nodes[0]}" if nodes else f"F {ops[0] if ops else '?'}"


def live_at_peak(model, batch: dict, dtype: str) -> collections.Counter:
    """By `_origin`, the bytes of the allocations alive at the step's peak."""
    model.zero_grad(set_to_none=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        train_step(model, batch, dtype)
    live, current, peak, at_peak = {}, 0, 0, {}
    for event in _allocations(prof):
        size = event.extra_fields.alloc_size
        if size > 0:
            live[event.extra_fields.ptr] = event
        else:
            live.pop(event.extra_fields.ptr, None)
        current += size
        if current > peak:
            peak, at_peak = current, dict(live)
    groups = collections.Counter()
    for event in at_peak.values():
        groups[_origin(event)] += event.extra_fields.alloc_size
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default="none,gat,sla,wla,sdoi,sep")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--vocab-size", type=int, default=2000)
    parser.add_argument("--top", type=int, default=10, help="groups of live allocations to list per variant")
    args = parser.parse_args()
    torch.set_num_threads(1)
    shape = {**BERT_BASE, "vocab_size": args.vocab_size}
    batch = synthetic_batch(args.batch_size, args.seq_len, args.vocab_size, 0)
    base = None
    for variant in args.variants.split(","):
        model = build(variant, shape, 0, "cpu")
        train_step(model, batch, args.dtype)
        peak = peak_bytes(model, batch, "cpu", args.dtype)
        base = base or peak
        gradients = gradient_bytes(model)
        print(f"{variant}: peak {peak / 2**20:.1f} MiB ({peak / base:.3f}x the first row), "
              f"gradients {gradients / 2**20:.1f} MiB ({gradients / base:.3f}x)")
        groups = live_at_peak(model, batch, args.dtype)
        for origin, size in groups.most_common(args.top):
            print(f"    {size / 2**20:9.2f} MiB  {origin}")


if __name__ == "__main__":
    main()
