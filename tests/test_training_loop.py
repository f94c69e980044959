"""A token task's step is the mean per labelled token of the whole step, however it is split.

Rows hold 1 to 12 labelled tokens, so shares of equal rows hold unequal numbers of them: averaged per
share (the old way), one process with batch 32, two with 16 each, and one with --grad-accum 2 end
with weights about 1e-3 apart after a few Adam steps. Normalised by the step's labelled tokens they
agree to float reassociation: for a token head, for a sentence head (rows, as before), and for the
intent-and-slots head, whose loss is a mean per row plus a mean per token. The two processes are
real ones (torchrun, gloo on the CPU, as the README launches them); this file is also the script
they run. The one-process runs are processes of their own too, on the CPU as well (ACCELERATE_USE_CPU),
also on a GPU machine: the comparison is of splits, not devices. Dropout is off: a forward pass over 32
rows draws other masks than two over 16.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import cpu_process_env
from safetensors.torch import load_file, save_file
from torch.utils._python_dispatch import TorchDispatchMode

from xsyn.models.names import IGNORE_INDEX
from xsyn.models.variants import variant_names
from xsyn.training.loop import LinearSchedule, Stepper, labelled_pieces

# Float reassociation moves the weights by up to 1.2e-6 (torch 2.11, AVX-512); the per-share mean it
# guards against moves them by about 1e-3.
BATCH, STEPS, BOUND = 32, 3, 2e-6
SHAPE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
         "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
HEADS = {"token": ("token", ("labels",)), "sentence": ("sequence", ()), "slots": ("intent_slot", ("slot_labels",))}


def rows(task: str) -> list[dict[str, np.ndarray]]:
    """STEPS batches of rows 12 pieces long; a token row labels 1 to 12 of its pieces, a slot row too
    and has an intent (a loss per row and one per token in one step)."""
    rng = np.random.default_rng(0)
    out = []
    for _ in range(STEPS * BATCH):
        row = {"input_ids": rng.integers(5, 60, 12), "attention_mask": np.ones(12, dtype=np.int64)}
        labels = np.full(12, IGNORE_INDEX)
        labelled = rng.choice(12, size=rng.integers(1, 13), replace=False)
        labels[labelled] = rng.integers(0, 3, len(labelled))
        if task == "token":
            row["labels"] = labels
        elif task == "slots":
            row["slot_labels"], row["intent_labels"] = labels, np.asarray(rng.integers(0, 3))
        else:
            row["labels"] = np.asarray(rng.integers(0, 3))
        out.append(row)
    return out


def collator(data: list[dict[str, np.ndarray]]):
    def collate(indices: list[int]) -> dict[str, torch.Tensor]:
        return {key: torch.as_tensor(np.stack([data[i][key] for i in indices])) for key in data[0]}
    return collate


def varied(data: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """The rows cut to 3 to 12 pieces (a per-piece label column with them), so that batches need padding."""
    cut = []
    for i, row in enumerate(data):
        n = 3 + (7 * i) % 10
        cut.append({key: value[:n] if value.ndim else value for key, value in row.items()})
    return cut


def padding_collator(data: list[dict[str, np.ndarray]]):
    def collate(indices: list[int]) -> dict[str, torch.Tensor]:
        longest = max(len(data[i]["input_ids"]) for i in indices)
        fill = {"input_ids": 0, "attention_mask": 0, "labels": IGNORE_INDEX, "slot_labels": IGNORE_INDEX}
        return {key: torch.as_tensor(np.stack([np.pad(data[i][key], (0, longest - len(data[i][key])),
                                                      constant_values=fill[key]) if data[i][key].ndim
                                               else data[i][key] for i in indices])) for key in data[0]}
    return collate


def train(task: str, grad_accum: int, exact: bool = True, data: list[dict[str, np.ndarray]] | None = None,
          split=None, batch: int = BATCH) -> dict[str, torch.Tensor]:
    """STEPS Adam steps of a tiny model on `rows(task)` (or `data`, padded) on this process's Accelerator, each
    step's batch cut by `split` (None: `grad_accum` equal parts); the weights."""
    from accelerate import Accelerator

    from xsyn.models.configuration import XsynBertConfig
    from xsyn.models.heads import HEAD_CLASSES

    accelerator = Accelerator()
    head, columns = HEADS[task]
    torch.manual_seed(0)
    model = HEAD_CLASSES[head](XsynBertConfig(vocab_size=64, variant="none", num_labels=3, num_intents=3,
                                              num_slot_labels=3, **SHAPE))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    collate = collator(rows(task)) if data is None else padding_collator(data)
    data = rows(task) if data is None else data
    stepper = Stepper(accelerator, model, optimizer, LinearSchedule(1e-3, 0, STEPS), 1.0, seed=1,
                      grad_accum=grad_accum, count_items=labelled_pieces(data, columns) if exact else None,
                      split=split)

    for step in range(STEPS):
        stepper.step(step, list(range(step * batch, (step + 1) * batch)), collate,
                     lambda inputs: {"loss": model(**inputs).loss})
    return {name: p.detach().clone() for name, p in accelerator.unwrap_model(model).state_dict().items()}


def largest_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max((a[name] - b[name]).abs().max().item() for name in a)


@pytest.fixture(scope="module")
def splits(tmp_path_factory) -> dict[str, dict[str, dict[str, torch.Tensor]]]:
    """Every task trained on the CPU by one process, one with --grad-accum 2 and two (batch 16 each)."""
    # torchrun --standalone takes a free rendezvous port: parallel test workers do not meet. One process trains
    # both one-process splits, one after the other (each on an Accelerator of its own): one start-up less.
    folders = {name: tmp_path_factory.mktemp(name) for name in ("one", "accumulated", "two")}
    launches = [([], [folders["one"], 1, folders["accumulated"], 2]),
                (["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"], [folders["two"], 1])]
    for launch, runs in launches:
        proc = subprocess.run([sys.executable, *launch, __file__, *map(str, runs)], env=cpu_process_env(),
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return {name: {task: load_file(out / f"{task}.safetensors") for task in HEADS} for name, out in folders.items()}


@pytest.mark.slow
@pytest.mark.parametrize("task", list(HEADS))
def test_one_process_two_processes_and_accumulation_train_the_same_weights(task, splits):
    one, accumulated, two = (splits[name][task] for name in ("one", "accumulated", "two"))
    assert largest_difference(one, two) <= BOUND
    assert largest_difference(one, accumulated) <= BOUND
    assert largest_difference(accumulated, two) <= BOUND


@pytest.mark.slow
def test_averaging_a_token_loss_per_share_would_not_be_the_same():
    """What the count guards against: each half of the batch averaged over its own tokens."""
    assert largest_difference(train("token", 1), train("token", 2, exact=False)) > 100 * BOUND


@pytest.mark.parametrize("task", list(HEADS))
def test_a_batch_cut_by_length_takes_the_step_of_the_whole_batch(task):
    """Micro-batches of unequal sizes, each weighted by its share of the step's rows (and of its labelled tokens)."""
    from xsyn.training.loop import micro_batches

    data = varied(rows(task))
    lengths = [len(row["input_ids"]) for row in data]
    by_length = partial(micro_batches, grad_accum=1, lengths=lengths)
    cuts = [by_length(list(range(s * BATCH, (s + 1) * BATCH)), processes=1) for s in range(STEPS)]
    assert all(len(set(map(len, micros))) > 1 for micros in cuts)  # unequal parts: the weights matter
    assert largest_difference(train(task, 1, data=data), train(task, 1, data=data, split=by_length)) <= BOUND


@pytest.mark.parametrize("task", list(HEADS))
def test_a_short_last_micro_batch_counts_for_its_rows_only(task):
    """10 rows in 4 parts are 3, 3, 3 and 1: the lone row is a tenth of the step, not a quarter of it (weighted a
    quarter, a sentence head's weights move by 4e-3). Weights in tenths round where quarters did not: the token
    head, whose share of labelled tokens was right before, moves by up to 4.1e-6."""
    data = varied(rows(task))
    assert largest_difference(train(task, 1, data=data, batch=10), train(task, 4, data=data, batch=10)) <= 4 * BOUND


def test_labelled_pieces_counts_the_per_piece_labels_of_the_rows_asked_for():
    data = [{"labels": np.array([1, IGNORE_INDEX, 0])}, {"labels": np.array([IGNORE_INDEX] * 3)},
            {"labels": np.array([2, 2, 2])}]
    count = labelled_pieces(data, ("labels",))
    assert count([0, 1, 2]) == 5 and count([1]) == 0 and count([2, 0]) == 5
    assert labelled_pieces(data, ()) is None  # a sentence task: the row-weighted path


if __name__ == "__main__":  # the runs of `splits`: FOLDER GRAD_ACCUM [FOLDER GRAD_ACCUM ...]
    from accelerate import PartialState

    for folder, grad_accum in zip(sys.argv[1::2], sys.argv[2::2]):
        for name in HEADS:
            weights = train(name, grad_accum=int(grad_accum))
            if PartialState().is_main_process:
                save_file(weights, Path(folder) / f"{name}.safetensors")


class HostReads(TorchDispatchMode):
    """Counts what makes the host wait for the device on a GPU: `.item()`, `float()` and `bool()` of a tensor
    (they dispatch `_local_scalar_dense`) and `.tolist()` (patched by the test), except inside `paused`."""

    def __init__(self):
        super().__init__()
        self.reads, self.paused = 0, False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.reads += func is torch.ops.aten._local_scalar_dense.default and not self.paused
        return func(*args, **(kwargs or {}))


@pytest.fixture
def host_reads(monkeypatch):
    counter, tolist = HostReads(), torch.Tensor.tolist

    def counted(tensor):
        counter.reads += not counter.paused
        return tolist(tensor)

    monkeypatch.setattr(torch.Tensor, "tolist", counted)
    return counter


def paused(counter: HostReads, function):
    """`function`, its reads not counted."""
    def run(*args, **kwargs):
        counter.paused = True
        try:
            return function(*args, **kwargs)
        finally:
            counter.paused = False
    return run


def sentence_stepper(max_grad_norm: float, counter: HostReads):
    """A tiny `none` sentence classifier's Stepper on the CPU, with 8 rows, and its forward (which logs the loss
    twice); AdamW's reads are not counted: its step counters live on the host on any device (unless fused), so
    reading them makes no wait."""
    from accelerate import Accelerator

    from xsyn.models.configuration import XsynBertConfig
    from xsyn.models.heads import HEAD_CLASSES

    accelerator = Accelerator(cpu=True)
    model = HEAD_CLASSES["sequence"](XsynBertConfig(vocab_size=64, variant="none", num_labels=3, **SHAPE))
    model, optimizer = accelerator.prepare(model, torch.optim.AdamW(model.parameters(), lr=1e-3))
    optimizer.step = paused(counter, optimizer.step)

    def forward(inputs):
        losses = model(**inputs)
        return {"loss": losses.loss, "twice": 2 * losses.loss.detach()}

    stepper = Stepper(accelerator, model, optimizer, LinearSchedule(1e-3, 0, 2), max_grad_norm, seed=1)
    return stepper, collator(rows("sentence")[:8]), forward


def test_a_step_reads_the_device_once(host_reads):
    """The losses and the gradient norm come back in one transfer (they were two: `.tolist()` and `float(norm)`);
    on a GPU each read waits for every queued kernel."""
    stepper, collate, forward = sentence_stepper(1.0, host_reads)
    with host_reads:
        record = stepper.step(0, list(range(8)), collate, forward)
    assert host_reads.reads == 1
    assert record.losses["twice"] == pytest.approx(2 * record.losses["loss"])
    assert record.grad_norm is not None and record.grad_norm > 0


def test_without_clipping_the_step_makes_no_clipping_pass_and_reports_no_norm(host_reads, monkeypatch):
    """max_grad_norm 0: neither the norm nor the scaling runs (clipping to infinity ran both); the one read
    still brings the losses."""
    stepper, collate, forward = sentence_stepper(0.0, host_reads)
    monkeypatch.setattr(stepper.accelerator, "clip_grad_norm_", lambda *a, **k: pytest.fail("a clipping pass ran"))
    with host_reads:
        record = stepper.step(0, list(range(8)), collate, forward)
    assert host_reads.reads == 1 and record.grad_norm is None
    assert record.losses["twice"] == pytest.approx(2 * record.losses["loss"]) and record.losses["loss"] > 0


def test_a_run_without_clipping_logs_its_losses_and_no_gradient_norm(tmp_path):
    from types import SimpleNamespace

    from accelerate import Accelerator

    from xsyn.training.driver import train
    from xsyn.training.folder import RunFolder

    torch.manual_seed(0)
    data = torch.randn(8, 3)
    task = SimpleNamespace(model=torch.nn.Linear(3, 1), n_rows=8, description="linear", hint="", count_items=None,
                           batches_of_epoch=lambda epoch: [[0, 1, 2, 3], [4, 5, 6, 7]],
                           micro_batches=lambda batch, processes: [batch],
                           collate=lambda indices: {"x": data[indices]}, evaluate=lambda: None,
                           on_best=lambda state, result: None)
    task.forward = lambda batch: {"loss": task.model(batch["x"]).pow(2).mean()}
    settings = SimpleNamespace(seed=1, epochs=1.0, max_steps=None, batch_size=4, grad_accum=1, learning_rate=0.1,
                               warmup_steps=0, weight_decay=0.0, max_grad_norm=0.0, log_every=1, eval_every=None,
                               checkpointing_steps=None, save_total_limit=None, adamw_kernel="auto")
    train(settings, task, Accelerator(cpu=True), RunFolder(tmp_path), show_progress=False)
    lines = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2]
    assert all(line["loss"] > 0 and "grad_norm" not in line for line in lines)  # absent, not a made-up number


TINY_SHAPE = {"num_hidden_layers": 1, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64,
              "vocab_size": 100, "max_position_embeddings": 64}


def tree_rows(lengths: list[int]) -> list[dict]:
    """Feature rows of random trees, `lengths` pieces long (so batches of them are padded), as the data gives
    them: a label and the row's `example_index`."""
    from xsyn.benchmarks.model import synthetic_batch

    out = []
    for index, length in enumerate(lengths):
        row = synthetic_batch(1, length, TINY_SHAPE["vocab_size"], index)
        out.append({**{k: v[0].numpy() for k, v in row.items() if k not in ("attention_mask", "labels")},
                    "labels": index % 2, "example_index": index})
    return out


@pytest.mark.parametrize("variant", variant_names())  # the registry's: a variant added later is checked too
def test_an_eager_step_of_every_variant_reads_the_device_once_and_copies_only_what_it_reads(host_reads, variant,
                                                                                            monkeypatch):
    """One eager training step of each variant on a padded batch, as fine-tuning takes it (its collate, the
    copy, the forward with the variant's losses, the backward, clipping, the update): the loop's one read and
    nothing else. transformers' padding check (`padding_mask.all()`) was a second read in every variant's step.
    The copy to the device holds the model's inputs and the variant's tree fields, never `example_index`."""
    from accelerate import Accelerator

    import xsyn.training.loop as loop
    from xsyn.benchmarks.model import build
    from xsyn.run.inference import batch_collate

    accelerator = Accelerator(cpu=True)
    model = build(variant, TINY_SHAPE, 0, "cpu")
    model, optimizer = accelerator.prepare(model, torch.optim.AdamW(model.parameters(), lr=1e-3))
    optimizer.step = paused(host_reads, optimizer.step)  # host step counters: no wait (see sentence_stepper)
    data, collate = tree_rows([9, 14, 6, 12]), batch_collate(model, 0, with_labels=True)
    copied, to_device = [], loop.to_device
    monkeypatch.setattr(loop, "to_device", lambda batch, device: copied.append(set(batch)) or to_device(batch, device))

    def forward(inputs):
        out = model(**inputs)
        return {"loss": out.loss, **(out.syntax_losses or {})}

    stepper = Stepper(accelerator, model, optimizer, LinearSchedule(1e-3, 0, 2), 1.0, seed=1)
    with host_reads:
        record = stepper.step(0, [0, 1, 2, 3], lambda indices: collate([data[i] for i in indices]), forward)
    assert host_reads.reads == 1 and record.grad_norm > 0
    tree_fields = model.batch_tree_fields()
    assert tree_fields is not None  # every variant xsyn ships declares what it reads
    assert copied == [{"input_ids", "attention_mask", "token_type_ids", "labels", *tree_fields}]


def test_a_variant_that_does_not_declare_its_tree_fields_gets_them_all_and_none_gets_none():
    from xsyn.models.configuration import XsynBertConfig
    from xsyn.models.variants import get_variant
    from xsyn.models.variants.base import SyntaxVariant
    from xsyn.run.inference import make_collate
    from xsyn.trees.wordpiece import SYNTAX_FIELDS

    class Undeclared(SyntaxVariant):  # a plug-in written before `tree_fields`
        name = "undeclared"

    config = XsynBertConfig(variant="none")
    everything = {field.name for field in SYNTAX_FIELDS}
    assert Undeclared().collated_fields(config) is None and Undeclared().batch_fields(config) == ()
    assert everything <= set(make_collate(0, tree_fields=None)(tree_rows([5, 7])))
    assert get_variant("none").collated_fields(config) == ()
    assert not everything & set(make_collate(0, tree_fields=())(tree_rows([5, 7])))


def test_a_batch_without_padding_reaches_the_model_without_an_attention_mask():
    """Read on the host from the collated batch: the model then builds no mask (on a GPU: the Flash kernel)."""
    from xsyn.run.inference import make_collate, model_inputs

    padded, full = (make_collate(0, tree_fields=())(tree_rows(lengths)) for lengths in ([5, 7], [6, 6]))
    assert "attention_mask" in model_inputs(padded, with_labels=True)
    assert "attention_mask" not in model_inputs(full, with_labels=True)
    assert "example_index" not in model_inputs(full, with_labels=True)
    assert "labels" not in model_inputs(full, with_labels=False)


def test_parameters_are_checked_finite_by_one_read(host_reads):
    from xsyn.training.loop import parameters_finite

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    with host_reads:
        assert parameters_finite(model)
    assert host_reads.reads == 1
    with torch.no_grad():
        model[1].bias[1] = float("inf")
    assert not parameters_finite(model)


def test_the_optimizer_runs_the_kernel_the_rule_chooses_or_the_one_asked_for():
    from xsyn.training.device_rules import kernel_of
    from xsyn.training.loop import make_optimizer
    from xsyn.utils.errors import InputError

    model = torch.nn.Linear(3, 2)
    assert make_optimizer(model, 1e-3, 0.01, "auto", torch.device("cpu")).defaults["fused"] is True
    assert make_optimizer(model, 1e-3, 0.01, "auto", torch.device("cuda")).defaults["fused"] is True
    assert make_optimizer(model, 1e-3, 0.01).defaults["fused"] is True  # the weights' own device (the CPU)
    loop = make_optimizer(model, 1e-3, 0.01, "for-loop", torch.device("cpu"))
    assert (loop.defaults["fused"], loop.defaults["foreach"], kernel_of(loop)) == (False, False, "for-loop")
    assert kernel_of(make_optimizer(model, 1e-3, 0.01, "foreach", torch.device("cpu"))) == "foreach"
    with pytest.raises(InputError, match="adamw_kernel 'fused'"):
        make_optimizer(torch.nn.Linear(3, 2), 1e-3, 0.01, "fused", torch.device("meta"))


def test_a_batch_reaches_the_cpu_as_collated():
    from xsyn.training.loop import to_device

    batch = {"input_ids": torch.arange(6).reshape(2, 3), "labels": torch.tensor([0, 1])}
    moved = to_device(batch, torch.device("cpu"))
    assert all(torch.equal(moved[k], batch[k]) for k in batch)


def test_a_gradient_norm_that_is_a_dtensor_is_read_as_a_number(one_process_group):
    """FSDP2's parameters are DTensors and so is the norm `clip_grad_norm_` returns: it is read as a number, in
    the same transfer as the losses (a real one-process gloo group and device mesh)."""
    from types import SimpleNamespace

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, distribute_tensor

    from xsyn.training.loop import read_step_values

    mesh = init_device_mesh("cpu", (1,))
    weight = torch.nn.Parameter(distribute_tensor(torch.zeros(2, 2), mesh, [Replicate()]))
    weight.grad = distribute_tensor(torch.tensor([[3.0, 0.0], [0.0, 4.0]]), mesh, [Replicate()])
    norm = torch.nn.utils.clip_grad_norm_([weight], 10.0)
    accelerator = SimpleNamespace(device=torch.device("cpu"), num_processes=1)
    losses, grad_norm = read_step_values({"loss": torch.tensor(0.5)}, norm, accelerator)
    assert losses == {"loss": 0.5} and grad_norm == 5.0 and type(grad_norm) is float
