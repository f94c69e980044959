"""The device's `auto`: AdamW's kernel and the length budget (`xsyn.training.device_rules`), what a run records of
them, and that the fast kernels update the weights as today's for-loop does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from xsyn.data.synth import write_vocab
from xsyn.run.settings import RunConfig
from xsyn.training.device_rules import (
    kernel_of,
    resolve_adamw_kernel,
    resolve_length_budget,
    resolve_micro_batch_split,
    same_resolution,
)
from xsyn.training.folder import RunFolder
from xsyn.trees.padding import PaddedLength


def test_auto_is_the_fused_kernel_where_torch_has_one_else_foreach_else_the_for_loop():
    assert resolve_adamw_kernel("auto", "cpu") == resolve_adamw_kernel("auto", "cuda") == "fused"
    assert resolve_adamw_kernel("for-loop", "cpu") == "for-loop"
    assert resolve_adamw_kernel("foreach", "cuda") == "foreach"
    assert resolve_adamw_kernel("auto", "meta") == "foreach"  # a device torch has no fused kernel for
    with pytest.raises(ValueError, match=r"adamw_kernel 'fused'.*meta; give --set adamw_kernel=foreach"):
        resolve_adamw_kernel("fused", "meta")
    assert resolve_adamw_kernel("auto", "cpu", ("int64",)) == "for-loop"


def test_the_length_budget_is_few_lengths_where_shapes_cost_and_the_least_padding_where_not():
    assert resolve_length_budget("auto", "auto", "cuda") == (8, 8)
    assert resolve_length_budget("auto", "auto", "cpu") == (1, None)
    assert resolve_length_budget(16, None, "cuda") == (16, None) and resolve_length_budget("auto", 4, "cpu") == (1, 4)
    assert same_resolution("max_batch_lengths", None, "auto") and same_resolution("pad_to_multiple_of", 8, "auto")
    assert not same_resolution("pad_to_multiple_of", 16, "auto")
    assert not same_resolution("adamw_kernel", "fused", "foreach")


def test_batches_are_cut_by_length_where_shapes_cost_nothing_and_evenly_where_they_cost():
    assert resolve_micro_batch_split("auto", "cpu") == "by-length"
    assert resolve_micro_batch_split("auto", "cuda") == "even"
    assert resolve_micro_batch_split("by-length", "cuda") == "by-length" and resolve_micro_batch_split("even", "cpu")
    assert same_resolution("micro_batch_split", "even", "auto") and not same_resolution("micro_batch_split", "even",
                                                                                          "by-length")


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 16), torch.nn.LayerNorm(16),
                                torch.nn.Linear(16, 3))
    model[2].weight.data.uniform_(0.5, 1.5)  # not all ones: its (undecayed) update shows
    return model


def _trained(kernel: str, steps: int = 6) -> list[torch.Tensor]:
    from xsyn.training.loop import make_optimizer

    model = _model(0)
    optimizer = make_optimizer(model, 1e-2, 0.1, kernel, torch.device("cpu"))
    assert kernel_of(optimizer) == kernel  # what the optimiser runs is what it was asked for
    data = torch.Generator().manual_seed(1)
    for _ in range(steps):
        inputs = torch.randint(0, 50, (8, 5), generator=data)
        loss = model(inputs).mean(1).logsumexp(-1).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("kernel", ["fused", "foreach"])
def test_the_fast_kernels_update_the_weights_as_the_for_loop_does_over_several_steps(kernel):
    reference, fast = _trained("for-loop"), _trained(kernel)
    start = [p.detach() for p in _model(0).parameters()]
    for before, ref, got in zip(start, reference, fast):
        assert not torch.equal(ref, before)  # the steps moved every weight
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)


def test_random_batches_get_a_ladder_fitted_to_the_longest_row_of_each_random_batch():
    from xsyn.run.train import TrainingBatches
    from xsyn.trees.padding import batch_figures

    lengths = np.clip(np.random.default_rng(5).lognormal(3.3, 0.5, 400).astype(int), 4, 128).tolist()  # a long tail
    rows = [{"input_ids": np.ones(n)} for n in lengths]
    settings = {"batch_size": 8, "seed": 3, "grad_accum": 1, "pad_to_multiple_of": 8, "max_batch_lengths": 4,
                "micro_batch_split": "even"}
    random = TrainingBatches(SimpleNamespace(group_by_length=False, **settings), rows)
    grouped = TrainingBatches(SimpleNamespace(group_by_length=True, **settings), rows)
    batches = random.of_epoch(0)
    longest = [max(lengths[i] for i in batch) for batch in batches]  # worked out apart from the class
    assert random.pad_to == PaddedLength.fit(longest, 8, 4) and grouped.pad_to == PaddedLength.fit(lengths, 8, 4)
    assert random.pad_to != grouped.pad_to and len(random.pad_to.ladder) == 4
    as_rows = batch_figures(([lengths[i] for i in batch] for batch in batches), grouped.pad_to)
    assert random.figures(batches)["padded_tokens"] < as_rows["padded_tokens"]  # the rows' ladder pads more


def test_a_resumed_run_keeps_what_its_start_resolved_auto_to(tmp_path):
    from xsyn.run.train import saved_settings, with_device_rules

    folder = RunFolder(tmp_path)
    config = RunConfig(task="synth")
    fresh = with_device_rules(config, {}, "cpu")
    assert (fresh.adamw_kernel, fresh.pad_to_multiple_of, fresh.max_batch_lengths, fresh.micro_batch_split) == (
        "fused", 1, None, "by-length")
    (tmp_path / "config.json").write_text(json.dumps({"adamw_kernel": "foreach", "pad_to_multiple_of": 8,
                                                      "max_batch_lengths": 8, "micro_batch_split": "even"}))
    resumed = with_device_rules(config, saved_settings(folder), "cpu")  # started on a GPU, continued on the CPU
    assert (resumed.adamw_kernel, resumed.pad_to_multiple_of, resumed.max_batch_lengths,
            resumed.micro_batch_split) == ("foreach", 8, 8, "even")
    given = with_device_rules(RunConfig(task="synth", max_batch_lengths=None), saved_settings(folder), "cpu")
    assert given.max_batch_lengths is None  # a value given is the run's, not the saved one


def test_a_run_saved_before_the_length_cap_existed_resumes_without_one(tmp_path):
    from xsyn.run.train import saved_settings, with_device_rules

    # its config.json has pad_to_multiple_of and no max_batch_lengths: it ran with every length its rows had, and
    # a GPU's `auto` (8 lengths) would switch its batches mid-run
    (tmp_path / "config.json").write_text(json.dumps({"adamw_kernel": "foreach", "pad_to_multiple_of": 8}))
    resumed = with_device_rules(RunConfig(task="synth"), saved_settings(RunFolder(tmp_path)), "cuda")
    assert (resumed.pad_to_multiple_of, resumed.max_batch_lengths) == (8, None)
    on_cpu = with_device_rules(RunConfig(task="synth"), saved_settings(RunFolder(tmp_path)), "cpu")
    assert on_cpu.micro_batch_split == "even"  # nor did it cut its batches by length, as the CPU's `auto` now does


@pytest.mark.slow
def test_finetune_records_the_kernel_and_length_budget_it_ran_with(tmp_path):
    """`xsyn finetune` as users run it, twice: the CPU's `auto` (fused AdamW, batches padded to their longest row)
    and the settings given instead, each recorded in config.json and train_results.json as it ran."""
    xsyn = shutil.which("xsyn", path=str(Path(sys.executable).parent))
    assert xsyn, "the xsyn console script is not installed next to this Python"
    vocab = write_vocab(tmp_path / "vocab.txt")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "true"}
    common = ["finetune", "--task", "synth", "--model", "tiny", "--tokenizer", str(vocab), "--train-lang", "svo",
              "--parser", "chain", "--quiet", "--max-train-examples", "24", "--set", "max_eval_examples=8",
              "--batch-size", "8", "--max-steps", "3", "--set", "log_every=1", "--cache-dir", str(tmp_path / "cache")]
    for name, extra, expected in [("auto", [], ("fused", 1, None, "by-length")),
                                  ("given", ["--set", "adamw_kernel=for-loop", "--pad-to-multiple-of", "8", "--set",
                                             "micro_batch_split=even"], ("for-loop", 8, None, "even"))]:
        out = tmp_path / name
        proc = subprocess.run([xsyn, *common, *extra, "--output-dir", str(out)], capture_output=True, text=True,
                              env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        config = json.loads((out / "config.json").read_text())
        summary = json.loads((out / "train_results.json").read_text())
        keys = ("adamw_kernel", "pad_to_multiple_of", "max_batch_lengths", "micro_batch_split")
        assert tuple(config[k] for k in keys) == tuple(summary[k] for k in keys) == expected
        saved = json.loads((out / "state" / "trainer_state.json").read_text())
        assert saved["adamw_kernel"] == expected[0]  # read back from the optimiser that ran
        lengths = [r["length"] for r in map(json.loads, (out / "train_log.jsonl").read_text().splitlines())
                   if "loss" in r]
        assert len(lengths) == 3 and all(t % expected[1] == 0 for t in lengths)
