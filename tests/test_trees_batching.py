"""Few shapes and little padding by default (issue 44): the padded length of a batch, the figures a run
records about its batches, evaluation in length order with outputs back in row order, and `xsyn bench loop`."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from xsyn.benchmarks.loop import first_shape_costs, percentile
from xsyn.data.synth import write_vocab
from xsyn.run.settings import RunConfig, current_names
from xsyn.trees.batch import collate_trees
from xsyn.trees.padding import PaddedLength, batch_figures
from xsyn.trees.wordpiece import SYNTAX_FIELDS


def padding_of(ladder: PaddedLength, lengths: list[int]) -> int:
    return sum(ladder(n) - n for n in lengths)


def test_a_batch_length_rounds_up_to_its_multiple_then_to_the_first_length_of_the_ladder_that_holds_it():
    assert [PaddedLength()(n) for n in (1, 7, 8)] == [1, 7, 8]
    assert [PaddedLength(8)(n) for n in (1, 8, 9, 17)] == [8, 8, 16, 24]
    ladder = PaddedLength(8, (32, 64))
    assert [ladder(n) for n in (3, 32, 33, 64, 65)] == [32, 32, 64, 64, 72]  # above the ladder: its multiple


def test_the_ladder_caps_the_lengths_and_picks_those_that_pad_least():
    # multiples of 8: 16, 24, 32, 64; with 2 lengths, 64 (the longest) and one of 16 (138 padded pieces),
    # 24 (66) or 32 (58): 32
    lengths = [10, 17, 17, 30, 60]
    assert PaddedLength.fit(lengths, 8, 2) == PaddedLength(8, (32, 64))
    assert padding_of(PaddedLength(8, (32, 64)), lengths) == 58
    assert PaddedLength.fit(lengths, 8, 4) == PaddedLength(8)  # no more multiples than the cap: no ladder
    assert PaddedLength.fit(lengths, None, None) == PaddedLength(1)  # the longest row, as before issue 44


def test_the_ladder_is_the_least_padding_of_every_choice():
    rng = np.random.default_rng(0)
    for _ in range(60):
        lengths = rng.integers(1, 70, rng.integers(1, 30)).tolist()
        multiple, most = int(rng.choice([1, 4, 8])), int(rng.integers(1, 5))
        fitted = PaddedLength.fit(lengths, multiple, most)
        candidates = sorted({-(-n // multiple) * multiple for n in lengths})
        best = min(padding_of(PaddedLength(multiple, (*chosen, candidates[-1])), lengths)
                   for k in range(min(most, len(candidates))) for chosen in itertools.combinations(candidates[:-1], k))
        assert len(fitted.ladder) <= most and padding_of(fitted, lengths) == best


def test_a_collated_batch_takes_the_padded_length():
    rows = [{"input_ids": np.arange(1, n + 1), "token_type_ids": np.zeros(n, dtype=np.int64)} for n in (5, 11)]
    batch = collate_trees(rows, tree_fields=(), pad_to=PaddedLength(8, (16, 40)))
    assert batch["input_ids"].shape == (2, 16) and batch["attention_mask"].sum().item() == 16
    assert collate_trees(rows, tree_fields=())["input_ids"].shape == (2, 11)


def test_batch_figures_count_real_and_padded_tokens_and_distinct_shapes():
    figures = batch_figures([[10, 17], [30], [20, 3]], PaddedLength(8))  # (2, 24), (1, 32), (2, 24)
    assert figures == {"real_tokens": 80, "padded_tokens": 128, "padded_share": 0.375, "distinct_shapes": 2}


def test_the_defaults_group_by_length_with_the_devices_length_budget_while_saved_configs_keep_what_they_ran_with():
    config = RunConfig(task="synth")
    assert (config.group_by_length, config.pad_to_multiple_of, config.max_batch_lengths) == (True, "auto", "auto")
    old = current_names({"group_by_length": False, "pad_to_multiple_of": None})  # a config.json of before
    assert old == {"group_by_length": False, "pad_to_multiple_of": None, "max_batch_lengths": None,
                   "micro_batch_split": "even"}
    assert current_names({"pad_to_multiple_of": 8, "max_batch_lengths": 8})["max_batch_lengths"] == 8


def test_a_run_records_the_figures_of_the_batches_it_took_cut_into_micro_batches():
    from xsyn.run.train import TrainingBatches
    from xsyn.training.loop import epoch_batches, planned_batches

    lengths = [5, 30, 12, 9, 22, 17, 3]
    rows = [{"input_ids": np.ones(n)} for n in lengths]
    task = TrainingBatches(SimpleNamespace(batch_size=4, seed=2, grad_accum=2, group_by_length=True,
                                           pad_to_multiple_of=8, max_batch_lengths=None, micro_batch_split="even"),
                           rows)
    assert task.pad_to == PaddedLength(8)
    batches = epoch_batches(7, 4, 2, 0, lengths) + epoch_batches(7, 4, 2, 1, lengths)[:1]  # 3 steps
    micros = [batch[i:i + 2] for batch in batches for i in range(0, len(batch), 2)]
    padded = [len(m) * -(-max(lengths[i] for i in m) // 8) * 8 for m in micros]
    figures = task.figures(planned_batches(3, task.of_epoch))
    assert figures["real_tokens"] == 98 + sum(lengths[i] for i in batches[2])  # an epoch (98), then one batch
    assert figures["padded_tokens"] == sum(padded)
    assert figures["distinct_shapes"] == len({(len(m), -(-max(lengths[i] for i in m) // 8) * 8) for m in micros})


class _SumModel(torch.nn.Module):
    """Per row, the sum of its input ids (padding adds 0) as its logit; it records the shapes it was given."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(1))
        self.shapes: list[tuple[int, int]] = []

    def batch_tree_fields(self) -> tuple[str, ...]:  # it reads no syntax field
        return ()

    def forward(self, input_ids, attention_mask, **_):
        self.shapes.append(tuple(input_ids.shape))
        return SimpleNamespace(logits=(input_ids * attention_mask).sum(-1, keepdim=True).float() * self.weight)


def test_evaluation_runs_length_sorted_padded_batches_and_gives_every_output_back_in_row_order():
    from xsyn.run.inference import model_outputs, prediction_figures

    rng = np.random.default_rng(3)
    lengths = rng.integers(3, 60, 50).tolist()
    rows = [{"input_ids": rng.integers(5, 100, n), "token_type_ids": np.zeros(n, dtype=np.int64), "label": 0,
             **{field.name: np.zeros(n, dtype=np.int64) for field in SYNTAX_FIELDS}} for n in lengths]
    accelerator = SimpleNamespace(num_processes=1, is_main_process=True, prepare_data_loader=lambda loader, **_: loader)
    model = _SumModel()
    outputs = model_outputs(model, rows, accelerator, 8, 0, pad_to_multiple_of=8, max_batch_lengths=3)
    assert [float(x[0]) for x in outputs["logits"]] == [float(row["input_ids"].sum()) for row in rows]
    lengths_run = {t for _, t in model.shapes}
    assert len(model.shapes) == 7 and len(lengths_run) <= 3 and all(t % 8 == 0 for t in lengths_run)
    longest = [max(sorted(lengths, reverse=True)[i:i + 8]) for i in range(0, 50, 8)]
    assert [t for _, t in model.shapes] == [PaddedLength.fit(lengths, 8, 3)(n) for n in longest]  # longest first
    figures = prediction_figures(rows, 8, 1, pad_to_multiple_of=8, max_batch_lengths=3)
    assert figures["real_tokens"] == sum(lengths) and figures["padded_tokens"] == sum(b * t for b, t in model.shapes)
    assert figures["distinct_shapes"] == len(set(model.shapes))


def test_the_first_occurrence_of_a_shape_costs_its_step_less_the_median_of_its_later_steps():
    shapes = [(32, 64), (32, 64), (32, 48), (32, 64), (32, 48), (16, 40)]
    costs = first_shape_costs(shapes, [1.5, 0.5, 0.9, 0.7, 0.4, 0.3])
    assert costs == {"median": pytest.approx(0.7), "total": pytest.approx(0.9 + 0.5), "shapes": 3, "recurring": 2}
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.9) == pytest.approx(3.7)  # numpy's default
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.9) == pytest.approx(float(np.percentile([4, 1, 3, 2], 90)))


def test_bench_loop_through_the_console_script_times_both_batchings_on_the_same_batches(tmp_path):
    """`xsyn bench loop` as users run it, on the tiny model and the synthetic task (two steps timed)."""
    import shutil

    xsyn = shutil.which("xsyn", path=str(Path(sys.executable).parent))
    assert xsyn, "the xsyn console script is not installed next to this Python"
    vocab = write_vocab(tmp_path / "vocab.txt")
    temp = tmp_path / "tmp"  # the bench's own work folder goes here, and must be gone at the end (runs: 0.5 GB each)
    temp.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "true",
           "TMPDIR": str(temp)}
    out = subprocess.run([xsyn, "bench", "loop", "--task", "synth", "--model", "tiny", "--set", f"tokenizer={vocab}",
                          "--steps", "2", "--set", "batch_size=8", "--set", "train_lang=svo", "--set", "warmup_steps=0",
                          "--set", "max_train_examples=40", "--set", "max_eval_examples=24", "--json"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert list(result["batchings"]) == ["default", "random"] and result["steps"] == 2
    assert "workdir" not in result and not list(temp.glob("xsyn-bench-loop-*"))
    default, random = result["batchings"]["default"], result["batchings"]["random"]
    # the CPU's length budget: each batch padded to its own longest row
    assert default["settings"] == {"group_by_length": True, "pad_to_multiple_of": 1, "max_batch_lengths": None}
    assert random["settings"] == {"group_by_length": False, "pad_to_multiple_of": 1, "max_batch_lengths": None}
    for scheme in (default, random):
        assert len(scheme["loop"]["step_seconds"]) == len(scheme["bare"]["step_seconds"]) == 2
        assert scheme["loop_over_bare"] == pytest.approx(sum(scheme["loop"]["step_seconds"])
                                                         / sum(scheme["bare"]["step_seconds"]))
        assert scheme["batches"]["real_tokens"] <= scheme["batches"]["padded_tokens"]
        assert scheme["evaluation"]["real_tokens"] > 0 and scheme["epoch"]["distinct_shapes"] >= 1
    assert default["batches"]["padded_share"] <= random["batches"]["padded_share"]
    assert result["default_over_random"]["examples_per_second"] == pytest.approx(
        default["loop"]["examples_per_second"] / random["loop"]["examples_per_second"])


def test_least_padded_cuts_weigh_the_padding_saved_against_what_a_micro_batch_costs():
    from xsyn.trees.padding import least_padded_cuts

    lengths = [100, 30, 29, 28]  # longest first; worked out by hand below
    # one group: 4 x 100 + 20 = 420; [100] [30 29 28]: 100 + 90 + 2 x 20 = 230; [100] [30] [29 28]: 248
    assert least_padded_cuts(lengths, PaddedLength(), (1, 4), 20) == [1, 3]
    assert least_padded_cuts(lengths, PaddedLength(), (1, 4), 0) == [1, 1, 1, 1]  # no cost: every row alone
    assert least_padded_cuts(lengths, PaddedLength(), (2, 4), 20) == [2, 2]  # 2 x 100 + 2 x 29 + 40 = 298 < 420
    assert least_padded_cuts(lengths, PaddedLength(), (1, 2), 1000) == [2, 2]  # at most 2 a group
    # padded to multiples of 8: [104] [32 32 32] 104 + 96 + 40 = 240 against 4 x 104 + 20 = 436 for one group
    assert least_padded_cuts([100, 30, 29, 28], PaddedLength(8), (1, 4), 20) == [1, 3]
    assert least_padded_cuts([9, 8, 7, 6, 5], PaddedLength(), (2, 2), 0) is None  # 5 rows into groups of 2


def test_least_padded_cuts_are_the_cheapest_of_every_cut_into_allowed_sizes():
    from xsyn.trees.padding import least_padded_cuts

    def cost(lengths, groups, padded, per_group):
        total, start = 0, 0
        for size in groups:
            total += size * padded(lengths[start]) + per_group
            start += size
        return total

    rng = np.random.default_rng(7)
    for _ in range(40):
        lengths = sorted(rng.integers(3, 129, int(rng.integers(1, 10))).tolist(), reverse=True)
        fewest, most = int(rng.integers(1, 3)), int(rng.integers(2, 6))
        padded, per_group = PaddedLength(int(rng.choice([1, 8]))), float(rng.choice([0, 20, 200]))
        sizes = range(fewest, most + 1)
        every = [list(g) for k in range(1, len(lengths) + 1) for g in itertools.product(sizes, repeat=k)
                 if sum(g) == len(lengths)]
        got = least_padded_cuts(lengths, padded, (fewest, most), per_group)
        if not every:
            assert got is None
            continue
        assert sum(got) == len(lengths) and all(fewest <= g <= most for g in got)
        assert cost(lengths, got, padded, per_group) == min(cost(lengths, g, padded, per_group) for g in every)


def test_a_batch_cut_by_length_keeps_every_row_once_and_each_micro_batch_within_its_sizes():
    from xsyn.training.loop import MICRO_BATCH_TOKENS, micro_batches

    lengths = [12, 90, 15, 14, 88, 13, 40, 11]
    batch = [6, 0, 1, 2, 3, 4, 5, 7]
    micros = micro_batches(batch, 1, 1, lengths)
    assert sorted(i for m in micros for i in m) == sorted(batch)
    assert [[lengths[i] for i in m] for m in micros] == [[90, 88], [40], [15, 14, 13, 12, 11]]
    tokens = sum(len(m) * max(lengths[i] for i in m) + MICRO_BATCH_TOKENS for m in micros)
    assert tokens < 8 * 90 + MICRO_BATCH_TOKENS  # 180 + 40 + 75 + 60 = 355 against 740
    assert all(len(m) <= 4 for m in micro_batches(batch, 2, 1, lengths))  # grad_accum 2: at most 4 rows
    assert all(len(m) >= 2 for m in micro_batches(batch, 1, 2, lengths))  # a row for each of 2 processes
    assert micro_batches(batch, 2, 1) == [batch[:4], batch[4:]]  # without lengths: equal parts, in order
