"""`xsyn bench model`: the JSON it prints, the synthetic batch it times, and its memory measure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from xsyn.benchmarks.model import (
    bert_step_flops,
    build,
    model_batch,
    peak_bytes,
    peak_tflops,
    step_flops,
    synthetic_batch,
)
from xsyn.cli import main
from xsyn.data.synth import write_vocab
from xsyn.models.variants import VARIANTS
from xsyn.trees.tensors import TreeTensors

TINY_SHAPE = ["--layers", "2", "--hidden", "32", "--heads", "2", "--seq-len", "16", "--batch-size", "2",
              "--vocab-size", "50", "--repeats", "1"]


def test_bench_model_prints_one_json_object_with_both_ratios_for_every_variant_and_plain_bert():
    result = CliRunner().invoke(main, ["bench", "model", *TINY_SHAPE, "--peak-tflops", "2", "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert list(figures) == [*VARIANTS, "plain_bert"]
    assert all({"step_time_ratio", "peak_memory_ratio"} <= set(f) for f in figures.values())  # the keys of old
    assert figures["none"]["step_time_ratio"] == 1.0 and figures["none"]["peak_memory_ratio"] == 1.0
    assert all(f["step_time_ratio"] > 0 and f["peak_memory_ratio"] > 0 for f in figures.values())
    for f in figures.values():
        assert f["tokens_per_second"] == pytest.approx(2 * 16 / f["step_seconds"])
        assert f["mfu"] == pytest.approx(f["flops_per_step"] / f["step_seconds"] / 2e12)
    # the gradients of plain BERT's 44,642 parameters at this shape, float32: embeddings 50 x 32 + 512 x 32 +
    # 2 x 32 + LayerNorm 64; per layer 4 (32 x 32 + 32) + 2 x 64 + (32 x 128 + 128) + (128 x 32 + 32); the pooler
    # 32 x 32 + 32; the classifier 32 x 2 + 2. A variant adds its trainable syntax parameters (sep's and sdoi's
    # alpha is fixed by default)
    assert figures["plain_bert"]["gradient_bytes"] == figures["none"]["gradient_bytes"] == 4 * 44642
    assert figures["gat"]["gradient_bytes"] == 4 * (44642 + figures["gat"]["syntax_parameters"])
    assert figures["sep"]["gradient_bytes"] == 4 * (44642 + figures["sep"]["syntax_parameters"] - 2)
    assert all(f["peak_bytes"] >= f["gradient_bytes"] for f in figures.values())
    # plain BERT and `none` do the same products: 2 layers, hidden 32, feed-forward 128, 2 x 16 pieces
    assert figures["plain_bert"]["flops_per_step"] == figures["none"]["flops_per_step"] == bert_step_flops(
        2, 32, 128, 16, 2)
    assert figures["gat"]["flops_per_step"] > figures["none"]["flops_per_step"]


def test_bert_step_flops_by_hand_and_as_counted_from_the_products():
    # one layer, hidden 4, feed-forward 8, one sequence of 2 pieces, 2 labels:
    # per token and layer 2 (4 * 16 + 2 * 32) + 4 * 2 * 4 = 288, times 2 tokens = 576;
    # pooler and classifier 2 * 16 + 2 * 8 = 48; forward 624, the step three times that
    assert bert_step_flops(1, 4, 8, 2, 1) == 3 * 624
    shape = {"num_hidden_layers": 3, "hidden_size": 48, "num_attention_heads": 4, "intermediate_size": 96,
             "vocab_size": 60}
    batch = synthetic_batch(batch_size=3, seq_len=10, vocab_size=60, seed=0)
    for row, dtype in (("none", "float32"), ("plain_bert", "float32"), ("none", "bfloat16")):
        model = build(row, shape, 0, "cpu")
        assert step_flops(model, model_batch(row, batch), dtype) == bert_step_flops(3, 48, 96, 10, 3)


def test_a_gpus_dense_peak_is_known_by_its_name_and_only_for_half_precision(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    assert peak_tflops("cuda", "bfloat16") == peak_tflops("cuda:0", "float16") == 989.0
    assert peak_tflops("cuda", "float32") is None and peak_tflops("cpu", "bfloat16") is None
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 PCIe")
    assert peak_tflops("cuda", "bfloat16") == 756.0
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    assert peak_tflops("cuda", "bfloat16") == 989.0
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla T4")
    assert peak_tflops("cuda", "bfloat16") is None


def test_bench_model_on_a_missing_gpu_is_a_clear_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = CliRunner().invoke(main, ["bench", "model", *TINY_SHAPE, "--device", "cuda"])
    assert result.exit_code == 1 and "torch sees no CUDA device" in result.output
    result = CliRunner().invoke(main, ["bench", "model", *TINY_SHAPE, "--device", "gpu"])
    assert result.exit_code == 2 and "choose cpu, cuda or cuda:N" in result.output


def test_bench_model_refuses_an_unknown_variant():
    result = CliRunner().invoke(main, ["bench", "model", *TINY_SHAPE, "--variants", "gat,tree"])
    assert result.exit_code == 2 and "unknown variant(s) tree" in result.output


def test_synthetic_batch_holds_one_tree_per_input_rooted_at_cls():
    batch = synthetic_batch(batch_size=3, seq_len=12, vocab_size=40, seed=0)
    tree = TreeTensors(batch["tree_parent"], batch["tree_upos"], batch["tree_word"], batch["tree_segment"])
    assert batch["input_ids"].shape == (3, 12) and bool(batch["attention_mask"].all())
    assert (tree.distances < 12).all()  # every piece is connected to every other within the tree
    assert (tree.depth[:, 0] == 0).all() and (tree.depth[:, 1:] >= 1).all()
    roots = (batch["tree_parent"][:, 1:-1] == 0).sum(1)
    assert roots.tolist() == [1, 1, 1]  # one sentence root under [CLS]; [SEP] hangs from [CLS] too


def test_peak_memory_grows_with_the_batch():
    shape = {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64,
             "vocab_size": 50}
    model = build("sla", shape, seed=0, device="cpu")
    small, large = (peak_bytes(model, synthetic_batch(b, 32, 50, 0), "cpu") for b in (1, 8))
    assert 0 < small < large
    activations = 8 * 32 * 32 * 4  # one (8, 32, 32) float32 hidden state: the peak holds many of these
    assert large > activations


def test_bench_model_measures_each_encoder_shape_with_its_own_plain_row_and_embedding_costs(monkeypatch):
    from xsyn.benchmarks import model as bench
    from xsyn.models.names import EncoderShape

    tiny = {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64}
    monkeypatch.setattr(bench, "ENCODER_SHAPES", {  # mBERT's and XLM-R's shapes, shrunk: a large vocabulary each
        "mbert": EncoderShape("bert", {**tiny, "vocab_size": 12000, "max_position_embeddings": 512,
                                             "type_vocab_size": 2}),
        "xlmr-base": EncoderShape("xlm-roberta", {**tiny, "vocab_size": 25000, "max_position_embeddings": 514,
                                                        "type_vocab_size": 1, "pad_token_id": 1})})
    result = CliRunner().invoke(main, ["bench", "model", "--encoders", "mbert,xlmr-base", "--variants", "none",
                                       "--seq-len", "16", "--batch-size", "2", "--repeats", "1", "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert list(figures["mbert"]["rows"]) == ["none", "plain_bert"]
    assert list(figures["xlmr-base"]["rows"]) == ["none", "plain_xlm-roberta"]
    for name, positions, types in (("mbert", 512, 2), ("xlmr-base", 514, 1)):
        rows, costs = figures[name]["rows"], figures[name]["embedding"]
        vocab = bench.ENCODER_SHAPES[name].config["vocab_size"]
        assert rows[next(r for r in rows if r.startswith("plain_"))]["flops_per_step"] == rows["none"]["flops_per_step"]
        # word, position and token-type tables plus the LayerNorm, by hand
        assert costs["embedding_parameters"] == (vocab + positions + types) * 32 + 2 * 32
        assert costs["optimizer_state_bytes"] == 8 * costs["parameters"]
        assert costs["word_embedding_bytes"] == vocab * 32 * 4
        # the dense gradient of the word embeddings is what freezing them saves
        assert costs["peak_bytes"] - costs["peak_bytes_frozen_embeddings"] >= 0.9 * costs["word_embedding_bytes"]
    result = CliRunner().invoke(main, ["bench", "model", "--encoders", "gpt2"])
    assert result.exit_code == 2 and "choose from mbert, xlmr-base" in result.output


class StepClocks:
    """Injected clocks for the bench's timings: each step advances them by the work (and wait) set for its row,
    so the figures' arithmetic is checked without asserting a speed (which another process's load would move)."""

    def __init__(self):
        self.wall = self.cpu = 0.0

    def step(self, work: float, wait: float = 0.0) -> None:
        self.cpu += work  # this process computes
        self.wall += work + wait  # and waits (for another process, a sleep): wall time alone passes


def test_on_a_cpu_a_step_slowed_by_waiting_keeps_its_cpu_time_ratio(monkeypatch):
    """What another process's load does to a step (wall time passes, this process computes nothing) leaves
    `cpu_time_ratio` where the step's own work puts it: here sep's steps each wait 30 ms, then 50 ms."""
    from xsyn.benchmarks import model as bench

    clocks, step, waits = StepClocks(), bench.train_step, iter([0.0, 0.03, 0.05])  # the warm-up, the timed two

    def timed(model, batch, dtype="float32"):
        step(model, batch, dtype)
        if getattr(model.config, "variant", None) == "sep":
            clocks.step(0.012, next(waits, 0.0))
        else:
            clocks.step(0.010)

    monkeypatch.setattr(bench, "train_step", timed)
    monkeypatch.setattr(bench, "wall_clock", lambda: clocks.wall)
    monkeypatch.setattr(bench, "cpu_clock", lambda: clocks.cpu)
    rows = bench.run_model_bench(["sep"], layers=2, hidden=32, heads=2, seq_len=16, batch_size=2, vocab_size=50,
                                 repeats=2, plain_bert=False)["rows"]
    none, sep = rows["none"], rows["sep"]
    assert (none["step_seconds"], none["cpu_seconds"], none["cpu_time_ratio"]) == pytest.approx((0.010, 0.010, 1.0))
    assert sep["step_seconds"] == pytest.approx(0.042) and sep["median_seconds"] == pytest.approx(0.052)  # min, median
    assert sep["cpu_seconds"] == pytest.approx(0.012) and sep["cpu_time_ratio"] == pytest.approx(1.2)
    assert sep["step_time_ratio"] == pytest.approx(4.2) and sep["tokens_per_second"] == pytest.approx(2 * 16 / 0.042)


SHAPE = {"--layers": "1", "--hidden": "16", "--heads": "2", "--seq-len": "8", "--vocab-size": "50",
         "--batch-size": "1"}


def _with(**changed):
    options = {**SHAPE, **{f"--{name.replace('_', '-')}": value for name, value in changed.items()}}
    return [part for option, value in options.items() if value is not None for part in (option, value)]


@pytest.mark.parametrize("path", [["--repeats", "1"], ["--count-ops"]])
@pytest.mark.parametrize("changed, error", [
    ({"heads": "3"}, "--hidden 16 is not a multiple of --heads 3: each head takes an equal share"),
    ({"layers": "0"}, "--layers 0: give an integer of at least 1"),
    ({"layers": "-1"}, "--layers -1: give an integer of at least 1"),
    ({"hidden": "0"}, "--hidden 0: give an integer of at least 1"),
    ({"heads": "0"}, "--heads 0: give an integer of at least 1"),
    ({"vocab_size": "1"}, "--vocab-size 1: give an integer of at least 6"),
    ({"vocab_size": "5"}, "--vocab-size 5: give an integer of at least 6"),
    ({"batch_size": "0"}, "--batch-size 0: give an integer of at least 1"),
    ({"seq_len": "2"}, "--seq-len 2: give an integer of at least 3"),
    ({"seed": "-1"}, "--seed -1: give an integer of at least 0"),
])
def test_every_shape_option_is_checked_on_every_path_before_a_model_is_built(path, changed, error):
    result = CliRunner().invoke(main, ["bench", "model", "--variants", "gat", *_with(**changed), *path])
    assert result.exit_code == 2 and f"Error: {error}" in result.output, result.output


@pytest.mark.parametrize("extra, unused", [
    (["--compile"], "--compile"), (["--repeats", "3"], "--repeats"), (["--peak-tflops", "100"], "--peak-tflops"),
    (["--encoders", "mbert"], "--encoders"), (["--skip-plain-bert"], "--skip-plain-bert"),
])
def test_an_option_count_ops_would_not_use_is_refused(extra, unused):
    result = CliRunner().invoke(main, ["bench", "model", *_with(), "--count-ops", *extra])
    assert result.exit_code == 2 and f"{unused} would not be used: drop it, or drop --count-ops" in result.output


def test_a_shape_option_beside_encoders_is_refused_and_a_variants_own_rule_is_named_at_the_shape():
    result = CliRunner().invoke(main, ["bench", "model", "--encoders", "mbert", "--layers", "2"])
    assert result.exit_code == 2 and "--encoders measures each published shape as it is; --layers would not be used" \
        in result.output
    result = CliRunner().invoke(main, ["bench", "model", *_with(layers="2"), "--variants", "sla", "--count-ops"])
    assert result.exit_code == 0, result.output  # a shape the variant takes runs


def test_bench_options_through_the_installed_command(tmp_path):
    xsyn = shutil.which("xsyn", path=str(Path(sys.executable).parent))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([xsyn, "bench", "model", *_with(heads="3"), "--count-ops"], capture_output=True, text=True,
                          env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "Error: --hidden 16 is not a multiple of --heads 3" in done.stderr
    conllu = Path(__file__).parents[1] / "xsyn" / "examples" / "example.conllu"
    vocab = write_vocab(tmp_path / "vocab.txt")
    for option, value in (("--batch-size", "0"), ("--repeats", "0"), ("--batch-size", "-3")):
        done = subprocess.run([xsyn, "bench", "syntax", "--conllu", str(conllu), "--tokenizer", str(vocab), option,
                               value], capture_output=True, text=True, env=env)
        assert done.returncode == 2 and f"Error: {option} {value}: give an integer of at least 1" in done.stderr
    done = subprocess.run([xsyn, "bench", "eval", "--langs", "svo,sox", "--max-steps", "1"], capture_output=True,
                          text=True, env=env)
    assert done.returncode == 2 and ("Error: --langs: task 'synth' has no language sox (it has svo, sov, vso, ovs); "
                                     "did you mean 'vso'?") in done.stderr
