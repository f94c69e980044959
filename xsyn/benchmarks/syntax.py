"""The syntax-layer benchmark behind `xsyn bench syntax`.

Three figures, each measured in this process on the given treebank:
- `tensor_sentences_per_s`: building every tree tensor (distances, depth, ancestors and the GAT,
  SLA, WLA, SDOI masks and SEPREM weights) from padded batches already in memory, batches of
  consecutive sentences in the treebank's order; `tensor_sentences_per_s_shuffled` is the same over
  batches of a seeded random order (as fine-tuning draws them: longer padding), and
  `tensor_sentences_per_s_length_bucketed` over batches of similar lengths (as evaluation draws them);
  `tree_kernel` says whether the CPU kernel ran ("c") or torch ops ("torch": not built), and
  `tensor_sentences_per_s_torch_ops` is the treebank-order figure with torch ops alone (as on GPU).
  With `device` a GPU, the batches are moved there first (untimed) and every tensor is built there
  by the torch ops (`tree_kernel` is then "torch"); each timed pass ends when the device is done;
- `pipeline_segments_per_s`: records -> tokenisation -> alignment -> padded batch tensors;
- `bytes_per_piece`: bytes of the stored O(n) syntax fields per wordpiece;
- `padded_pairs_per_pair`: per batch order, the (B, T, T) entries the tensor step fills per piece
  pair of a real sentence: the padding that each order makes it compute.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from xsyn.benchmarks.options import at_least
from xsyn.models.tokenizers import load_tokenizer
from xsyn.syntax.conllu import read_conllu
from xsyn.trees.batch import collate_trees
from xsyn.trees.tensors import TreeTensors, cpu_kernel_built
from xsyn.trees.wordpiece import WordpieceAligner


def build_all_tensors(batch: dict[str, torch.Tensor], cpu_kernel: bool = True) -> list[torch.Tensor]:
    """Every tree tensor the variants use, at their default settings."""
    tt = TreeTensors.from_batch(batch, cpu_kernel=cpu_kernel)
    return [tt.distances, tt.depth, tt.ancestors, tt.gat_mask(1), tt.sla_mask(3), tt.wla_mask(4),
            tt.sdoi_mask(), tt.sep_weights()]


def _synchronize(device: torch.device | None) -> None:
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


def _best_time(fn, repeats: int, device: torch.device | None = None) -> float:
    best = float("inf")
    for _ in range(repeats):
        _synchronize(device)
        start = time.perf_counter()
        fn()
        _synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best


def run_syntax_bench(conllu_path: str | Path, tokenizer: Any, batch_size: int = 32, repeats: int = 5,
                     device: str = "cpu") -> dict[str, Any]:
    """Measure the figures; `tokenizer` is a tokenizer object or a spec for `load_tokenizer`; the tree tensors
    are built on `device`."""
    at_least(1, batch_size=batch_size, repeats=repeats)
    if isinstance(tokenizer, (str, Path)):
        tokenizer = load_tokenizer(str(tokenizer))
    records = list(read_conllu(conllu_path))
    aligner = WordpieceAligner(tokenizer, max_length=512)
    target = torch.device(device)
    batching = _Batching(batch_size, tokenizer.pad_token_id or 0)

    def pipeline() -> list[dict[str, torch.Tensor]]:
        return batching.of([aligner.assemble([seg])[0] for seg in aligner.segment_pieces(records)])

    trees = [aligner.assemble([seg])[0] for seg in aligner.segment_pieces(records)]
    shuffled = [trees[i] for i in torch.randperm(len(trees), generator=torch.Generator().manual_seed(0))]
    orders = {"treebank_order": pipeline(), "shuffled": batching.of(shuffled),
              "length_bucketed": batching.of(sorted(trees, key=len))}
    seconds = _tensor_seconds({name: _on(target, batches) for name, batches in orders.items()}, repeats, target)
    pipeline_s = _best_time(pipeline, repeats)
    pieces = sum(len(t) for t in trees)
    pairs = sum(len(t) ** 2 for t in trees)
    return {
        "sentences": len(records),
        "pieces": pieces,
        "batch_size": batch_size,
        "torch_threads": torch.get_num_threads(),
        "device": str(target),
        "device_name": torch.cuda.get_device_name(target) if target.type == "cuda" else "cpu",
        "tree_kernel": "c" if cpu_kernel_built() and target.type == "cpu" else "torch",
        "tensor_sentences_per_s": len(records) / seconds["treebank_order"],
        "tensor_sentences_per_s_shuffled": len(records) / seconds["shuffled"],
        "tensor_sentences_per_s_length_bucketed": len(records) / seconds["length_bucketed"],
        "tensor_sentences_per_s_torch_ops": len(records) / seconds["torch_ops"],
        "pipeline_segments_per_s": len(records) / pipeline_s,
        "bytes_per_piece": sum(t.syntax_nbytes() for t in trees) / pieces,
        "padded_pairs_per_pair": {name: sum(b["tree_upos"].shape[0] * b["tree_upos"].shape[1] ** 2 for b in batches)
                                  / pairs for name, batches in orders.items()},
    }


@dataclass(frozen=True)
class _Batching:
    batch_size: int
    pad_id: int

    def of(self, ordered: list) -> list[dict[str, torch.Tensor]]:
        """The trees in this order, collated `batch_size` at a time."""
        return [collate_trees(ordered[i:i + self.batch_size], self.pad_id)
                for i in range(0, len(ordered), self.batch_size)]


def _on(target: torch.device, batches: list[dict[str, torch.Tensor]]) -> list[dict[str, torch.Tensor]]:
    return [{k: v.to(target) for k, v in batch.items()} for batch in batches]


def _tensor_seconds(placed: dict[str, list[dict[str, torch.Tensor]]], repeats: int, target: torch.device
                    ) -> dict[str, float]:
    """The best time to build every tree tensor of each order's batches (the C kernel on CPU), and with torch
    ops alone (`torch_ops`, in treebank order); each after a warm-up pass."""
    def tensors(batches: list[dict[str, torch.Tensor]], cpu_kernel: bool = True) -> None:
        with torch.inference_mode():
            for batch in batches:
                build_all_tensors(batch, cpu_kernel)

    tensors(placed["treebank_order"])  # warm-up
    seconds = {name: _best_time(lambda b=batches: tensors(b), repeats, target) for name, batches in placed.items()}
    tensors(placed["treebank_order"], cpu_kernel=False)  # warm-up
    seconds["torch_ops"] = _best_time(lambda: tensors(placed["treebank_order"], cpu_kernel=False), repeats, target)
    return seconds
