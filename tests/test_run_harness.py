"""The harness end to end on the synthetic benchmark with the tiny model: finetune, resume after
SIGKILL, two processes, evaluate (zero-shot and generalized), and the errors a user can make."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from conftest import stopped_before_results
from safetensors.torch import load_file

import xsyn.run.evaluation as evaluation
from xsyn import provenance
from xsyn.cli import main
from xsyn.data.cards import load_card
from xsyn.data.synth import write_vocab
from xsyn.models.names import DEFAULT_SEED
from xsyn.models.variants.gat.layers import save_gat
from xsyn.training.folder import staged
from xsyn.training.loop import LENGTH_WINDOW, epoch_batches

QUICK = ["--task", "synth", "--model", "tiny", "--train-lang", "svo", "--parser", "chain", "--quiet",
         "--max-train-examples", "128", "--set", "max_eval_examples=64", "--batch-size", "16", "--max-length", "48"]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory) -> Path:
    return write_vocab(tmp_path_factory.mktemp("synth") / "vocab.txt")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def finetune_args(vocab: Path, cache: Path, out: Path, *extra: str) -> list[str]:
    return ["finetune", *QUICK, "--tokenizer", str(vocab), "--cache-dir", str(cache), "--output-dir", str(out),
            *extra]


@pytest.fixture(scope="module")
def run(vocab, cache, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "none-seed3"
    res = CliRunner().invoke(main, finetune_args(vocab, cache, out, "--variant", "none", "--seed", "3",
                                                 "--max-steps", "8", "--eval-every", "4"))
    assert res.exit_code == 0, res.output
    return out


def test_finetune_writes_config_logs_best_checkpoint_and_summary(run):
    config = json.loads((run / "config.json").read_text())
    assert (config["seed"], config["variant"], config["model"]) == (3, "none", "tiny")
    assert config["learning_rate"] == 3e-4 and "synth" in config["hyperparameter_source"]  # from the card
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if "dev" in r] == [4, 8]
    # on the CPU `auto` pads each batch to its longest row (no multiple, no cap), and the run records it so
    assert (config["pad_to_multiple_of"], config["max_batch_lengths"], config["adamw_kernel"]) == (1, None, "fused")
    assert config["micro_batch_split"] == "by-length"  # and cuts each batch where that pads least
    longest = {len(row["input_ids"]) for row in train_rows(run)}
    assert all(r["loss"] > 0 and r["seconds"] > 0 and r["length"] in longest for r in log if "loss" in r)
    summary = json.loads((run / "train_results.json").read_text())
    assert summary["steps"] == 8 and summary["train_examples"] == 128
    batches = summary["batches"]  # 8 steps of 16 rows: each training row once
    assert batches["real_tokens"] == sum(len(row["input_ids"]) for row in train_rows(run))
    assert 1 <= batches["distinct_shapes"] <= 8
    assert (summary["adamw_kernel"], summary["pad_to_multiple_of"], summary["max_batch_lengths"],
            summary["micro_batch_split"]) == ("fused", 1, None, "by-length")
    assert batches["padded_share"] == round(1 - batches["real_tokens"] / batches["padded_tokens"], 4)
    assert summary["versions"]["torch"] == torch.__version__ and "transformers" in summary["versions"]
    assert summary["platform"] == provenance()["platform"]  # CPU model, kernel libraries, threads beside them
    best = json.loads((run / "validation_results.json").read_text())
    assert summary["card"] == best["card"] == load_card("synth").stamp  # version + content hash of the card
    assert best["primary"] == summary["best_dev_score"] == max(r["dev_primary"] for r in log if "dev" in r)
    assert {p.name for p in (run / "best").iterdir()} >= {"config.json", "model.safetensors", "xsyn_task.json",
                                                          "tokenizer.json"}
    report = json.loads((run / "data_report.json").read_text())
    assert report["train"]["load"]["examples"] == 2000 and report["train"]["limit"] == 128
    assert report["train"]["parse"]["gold"] == 256  # both segments came with gold trees


def train_rows(run: Path) -> list[dict]:
    """The run's training rows, featurised again from its config.json (from the caches it filled)."""
    from xsyn.models.tokenizers import model_tokenizer
    from xsyn.run.settings import read_config_file, resolve
    from xsyn.run.task_data import load_task_data

    values = read_config_file(run / "config.json")
    config = resolve("synth", values["variant"], load_card("synth"), values, {})
    tokenizer = model_tokenizer(config.model, config.tokenizer)
    data, _ = load_task_data(config.card, config, tokenizer, "train", {"sentence1": "svo", "sentence2": "svo"},
                             limit=config.max_train_examples)
    return data.rows()


def test_a_second_run_into_a_run_folder_is_refused_and_overwritten_only_when_asked(vocab, cache, run, tmp_path):
    before = (run / "train_results.json").read_bytes()
    res = CliRunner().invoke(main, finetune_args(vocab, cache, run, "--variant", "none", "--seed", "4"))
    assert res.exit_code == 1 and "already holds a run that saved progress (state/ or train_results.json)" in res.output
    assert (run / "train_results.json").read_bytes() == before
    failed = tmp_path / "failed"  # what a run that stopped before its first save leaves
    failed.mkdir()
    (failed / "config.json").write_text("{}")
    (failed / "train_log.jsonl").write_text('{"step": 1, "loss": 9.0}\n')
    res = CliRunner().invoke(main, finetune_args(vocab, cache, failed, "--variant", "none", "--max-steps", "1"))
    assert res.exit_code == 1 and "start afresh with --overwrite-output-dir" in res.output  # never silently
    res = CliRunner().invoke(main, finetune_args(vocab, cache, failed, "--variant", "none", "--max-steps", "1",
                                                 "--overwrite-output-dir"))
    assert res.exit_code == 0, res.output
    assert "9.0" not in (failed / "train_log.jsonl").read_text()  # a fresh run starts a fresh log


def _dev_scores(run: Path) -> list[tuple[int, float]]:
    return [(r["step"], r["dev_primary"]) for r in map(json.loads, (run / "train_log.jsonl").read_text().splitlines())
            if "dev" in r]


def _cli(args: list[str], **kw) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "xsyn", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


@pytest.mark.slow
def test_sigkill_then_resume_gives_the_uninterrupted_result(vocab, cache, tmp_path):
    extra = ["--variant", "gat", "--seed", "5", "--max-steps", "12", "--eval-every", "4",
             "--set", "checkpointing_steps=2", "--set", "log_every=1"]
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    assert _cli(finetune_args(vocab, cache, whole, *extra)).wait(300) == 0
    proc = _cli(finetune_args(vocab, cache, broken, *extra))
    log = broken / "train_log.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and not (log.is_file() and log.read_text().count('"loss"') >= 6):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (broken / "train_results.json").exists()  # it really died mid-run
    resumed = _cli(finetune_args(vocab, cache, broken, *extra, "--resume"))
    assert resumed.wait(300) == 0, resumed.stdout.read()
    a, b = (json.loads((d / "train_results.json").read_text()) for d in (whole, broken))
    assert a["best_dev_score"] == b["best_dev_score"] and a["steps"] == b["steps"] == 12
    assert _dev_scores(whole) == _dev_scores(broken)  # the log holds each step once, as if never killed
    steps = [[json.loads(line)["step"] for line in (d / "train_log.jsonl").read_text().splitlines()]
             for d in (whole, broken)]
    assert steps[0] == steps[1]
    wa, wb = load_file(whole / "state" / "model.safetensors"), load_file(broken / "state" / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.slow
def test_evaluation_over_two_processes_gives_every_prediction_once(run, tmp_path, xsyn_on_cpu):
    # (training on two processes: tests/test_training_distributed.py)
    for processes in (1, 2):
        xsyn_on_cpu(["evaluate", "--model-dir", str(run), "--langs", "svo,sov", "--quiet", "--output-dir",
                     str(tmp_path / f"e{processes}")], processes)
    for lang in ("svo", "sov"):
        lines = [(tmp_path / e / "per_example" / f"test-{lang}.jsonl").read_text() for e in ("e1", "e2")]
        assert lines[0] == lines[1] and lines[0].count("\n") == 400


def test_evaluate_shows_its_progress_per_language_and_per_pair(run, tmp_path, monkeypatch):
    """Off a terminal (here), progress is plain lines, no bar redrawn with carriage returns into a log."""
    import xsyn.utils.progress

    monkeypatch.setattr(xsyn.utils.progress, "EVALUATION_LINE_SECONDS", 0.0)  # a line at every language and pair
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(run), "--langs", "svo,sov", "--generalized",
                                    "--output-dir", str(tmp_path / "e")])
    assert res.exit_code == 0, res.output
    lines = [line for line in res.output.splitlines() if line.startswith("synth test: ") and "evaluations" in line]
    assert lines[-1].startswith("synth test: 4/4 evaluations (100.0%), ")  # 2 languages, 2 pairs off the diagonal
    for key in ("svo", "sov", "svo-sov", "sov-svo"):  # each line names what is being computed
        assert any(line.endswith(f", now {key}") for line in lines), key
    assert "\r" not in res.output


@pytest.fixture(scope="module")
def evaluated(run) -> Path:
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(run), "--generalized", "--quiet"])
    assert res.exit_code == 0, res.output
    return run / "eval-test"


def test_evaluate_writes_per_language_and_pair_results(evaluated):
    results = json.loads((evaluated / "results.json").read_text())
    assert results["card"] == load_card("synth").stamp
    assert results["train_parser"] == results["config"]["parser"] == "chain"  # the report tells them apart
    assert results["versions"] == provenance()["versions"] and results["platform"] == provenance()["platform"]
    langs = ["svo", "sov", "vso", "ovs"]
    assert list(results["per_language"]) == langs
    assert results["n_examples"]["svo"] == 400 and results["dropped"]["svo"] == 0
    assert results["average"] == pytest.approx(sum(results["per_language"].values()) / 4)
    assert set(results["pairs"]) == set(langs) and all(set(row) == set(langs) for row in results["pairs"].values())
    for lang in langs:  # the diagonal is the per-language result
        assert results["pairs"][lang][lang] == results["per_language"][lang]
    for key, figures in results["batches"].items():  # 400 examples in 7 length-sorted batches of 64 (one of 16)
        assert 1 <= figures["distinct_shapes"] <= 7, key  # (the run's recorded length budget: the CPU's)
        assert figures["padded_share"] == round(1 - figures["real_tokens"] / figures["padded_tokens"], 4), key
    assert set(results["batches"]) == {*langs, *(f"{a}-{b}" for a in langs for b in langs)}  # the diagonal too
    with (evaluated / "pairs.csv").open() as fh:
        table = list(csv.reader(fh))
    assert table[0][1:] == langs and [r[0] for r in table[1:]] == langs
    assert float(table[2][3]) == pytest.approx(results["pairs"]["sov"]["vso"], abs=0.005)
    assert (evaluated / "pairs.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = (evaluated / "per_example" / "test-sov-vso.jsonl").read_text().splitlines()
    assert len(lines) == results["n_examples"]["sov-vso"] == 400  # parallel ids, synth labels never disagree
    first = json.loads(lines[0])
    assert set(first) == {"id", "prediction", "reference"}
    preds = (evaluated / "predictions" / "synth" / "test-svo.tsv").read_text().splitlines()
    correct = sum(p == json.loads(x)["reference"] for p, x in
                  zip(preds, (evaluated / "per_example" / "test-svo.jsonl").read_text().splitlines()))
    assert 100 * correct / 400 == pytest.approx(results["per_language"]["svo"])


def test_an_interrupted_evaluation_recomputes_only_what_is_missing_and_a_finished_one_keeps_no_partial(
        evaluated, run, tmp_path, monkeypatch):
    assert not (evaluated / "partial").exists()  # finished: only an interrupted evaluation needs it
    out = tmp_path / "eval"
    args = ["evaluate", "--model-dir", str(run), "--quiet", "--output-dir", str(out)]
    with monkeypatch.context() as patched:
        stopped_before_results(patched)
        assert CliRunner().invoke(main, args).exit_code != 0
    partial = staged(out) / "partial"  # (where an evaluation is written until it ends)
    assert sorted(p.name for p in partial.glob("*.json")) == [f"test-{lang}.json" for lang in
                                                              ("ovs", "sov", "svo", "vso")]
    (partial / "test-ovs.json").unlink()
    predicted = []
    real = evaluation.model_outputs
    monkeypatch.setattr(evaluation, "model_outputs", lambda *a, **k: predicted.append(1) or real(*a, **k))
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert len(predicted) == 1  # ovs alone is scored again
    assert "ovs" in json.loads((out / "results.json").read_text())["per_language"]
    assert not (out / "partial").exists()


def test_grouping_by_length_sorts_windows_of_the_epoch_order_keeps_every_row_and_pads_less():
    lengths = torch.randint(5, 129, (1000,), generator=torch.Generator().manual_seed(0)).tolist()
    plain = [i for batch in epoch_batches(1000, 8, seed=3, epoch=0) for i in batch]
    grouped_batches = epoch_batches(1000, 8, seed=3, epoch=0, lengths=lengths)
    grouped = [i for batch in grouped_batches for i in batch]
    assert sorted(grouped) == list(range(1000))
    window = LENGTH_WINDOW * 8  # rows [0, 400), [400, 800), [800, 1000)
    for start in range(0, 1000, window):
        assert [lengths[i] for i in grouped[start:start + window]] == sorted(
            (lengths[i] for i in plain[start:start + window]), reverse=True)
        assert set(grouped[start:start + window]) == set(plain[start:start + window])
    assert grouped_batches == epoch_batches(1000, 8, seed=3, epoch=0, lengths=lengths)  # resumable
    assert grouped_batches != epoch_batches(1000, 8, seed=3, epoch=1, lengths=lengths)

    def padded_tokens(batches):
        return sum(len(batch) * max(lengths[i] for i in batch) for batch in batches)

    assert padded_tokens(grouped_batches) < 0.6 * padded_tokens(epoch_batches(1000, 8, seed=3, epoch=0))


def test_a_run_of_random_batches_trains_and_records_the_setting_beside_the_default_grouped_one(vocab, cache, run,
                                                                                               tmp_path):
    out = tmp_path / "random"
    res = CliRunner().invoke(main, finetune_args(vocab, cache, out, "--variant", "none", "--max-steps", "2",
                                                 "--random-batches", "--pad-to-multiple-of", "1"))
    assert res.exit_code == 0, res.output
    config = json.loads((out / "config.json").read_text())
    assert (config["group_by_length"], config["pad_to_multiple_of"]) == (False, 1)
    assert json.loads((out / "train_results.json").read_text())["steps"] == 2
    assert json.loads((run / "config.json").read_text())["group_by_length"] is True  # the default


@pytest.mark.parametrize(("args", "expected"), [
    (["finetune", "--task", "pawz"], ["'pawz' is neither a task", "pawsx", "xnli", "nor a card file"]),
    (["finetune", "--task", "synth", "--variant", "syn"], ["'syn' is not one of", "gat", "sdoi"]),
    (["finetune", "--task", "synth", "--train-lang", "xx", "--model", "tiny"], ["'xx'", "training data in svo"]),
    (["evaluate", "--model-dir", "."], ["holds no checkpoint", "best/"]),
    (["finetune", "--task", "synth", "--model", "tiny", "--train-lang", "svo", "--set", "group_by_length=yes"],
     ["--set: group_by_length: expected true or false, got 'yes'"]),
])
def test_bad_input_gets_a_message_that_lists_the_valid_values(args, expected):
    res = CliRunner().invoke(main, args)
    assert res.exit_code != 0
    for text in expected:
        assert text in res.output


@pytest.mark.parametrize(("task_file", "expected"), [
    ("{", "xsyn_task.json is unreadable"),
    ('{"labels": []}', "xsyn_task.json: task, tags missing or of the wrong type"),
])
def test_a_damaged_checkpoint_is_named(tmp_path, task_file, expected):
    (tmp_path / "best").mkdir()
    (tmp_path / "best" / "xsyn_task.json").write_text(task_file)
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(tmp_path)])
    assert res.exit_code == 1 and expected in res.output and "Traceback" not in res.output


def test_missing_data_names_the_path_layout_and_hub_alternative(vocab, cache, tmp_path):
    empty = tmp_path / "pawsx-data"
    empty.mkdir()
    res = CliRunner().invoke(main, ["finetune", "--task", "pawsx", "--model", "tiny", "--tokenizer", str(vocab),
                                    "--data-dir", str(empty), "--cache-dir", str(cache), "--output-dir",
                                    str(tmp_path / "o"), "--quiet", "--parser", "chain"])  # (no Stanza models here)
    assert res.exit_code == 1
    assert str(empty / "x-final" / "en" / "train.tsv") in res.output
    assert "google-research-datasets/paws-x" in res.output


def test_a_full_disk_is_a_clear_error_and_leaves_no_partial_results(run, tmp_path, monkeypatch):
    import errno

    import xsyn.utils.io

    real_replace = os.replace

    def replace(src, dst):
        if Path(dst).name == "results.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(xsyn.utils.io.os, "replace", replace)
    out = tmp_path / "eval"
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(run), "--langs", "svo", "--quiet",
                                    "--output-dir", str(out)])
    assert res.exit_code == 1
    assert f"no space left on the device while writing {staged(out) / 'results.json'}" in res.output
    assert not (out / "results.json").exists() and not list(staged(out).glob(".results.json.*"))


def test_a_pretrained_gat_gives_its_shape_and_freezing_keeps_it(vocab, cache, tmp_path):
    from xsyn.models.factory import build_model
    from xsyn.models.tokenizers import load_tokenizer

    pretrained = build_model("tiny", "gat", None, tokenizer=load_tokenizer(vocab), gat_layers=2, gat_residual=True,
                             gat_position_embeddings=True)
    save_gat(pretrained, tmp_path / "gat")
    out = tmp_path / "run"
    res = CliRunner().invoke(main, finetune_args(vocab, cache, out, "--variant", "gat", "--max-steps", "2",
                                                 "--pretrained-syntax", str(tmp_path / "gat"), "--freeze-pretrained"))
    assert res.exit_code == 0, res.output
    config = json.loads((out / "config.json").read_text())
    assert (config["pretrained_syntax"], config["freeze_pretrained"]) == (str(tmp_path / "gat"), True)
    model = config["model_settings"]
    assert model["gat_layers"] == 2 and model["gat_residual"] is True and model["gat_position_embeddings"] is True
    saved = load_file(tmp_path / "gat" / "gat.safetensors")
    tuned = load_file(out / "best" / "model.safetensors")
    assert all(torch.equal(saved[k], tuned[f"bert.gat.{k}"]) for k in saved)  # frozen: unchanged by training
    # A GAT pre-trained with `--model tiny` comes with its own random tiny model (gat/model): a new one
    # would give it embeddings it has never seen.
    (tmp_path / "gat" / "model").mkdir()
    res = CliRunner().invoke(main, finetune_args(vocab, cache, tmp_path / "again", "--variant", "gat",
                                                 "--gat-init", str(tmp_path / "gat")))  # its former name
    assert res.exit_code != 0 and f"pass --model {tmp_path / 'gat' / 'model'}" in res.output


def test_a_tensorboard_tracker_gets_the_logged_numbers_and_the_config(vocab, cache, tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard is optional (pip install tensorboard)")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "tracked"
    res = CliRunner().invoke(main, finetune_args(vocab, cache, out, "--variant", "gat", "--max-steps", "8",
                                                 "--eval-every", "4", "--tracker", "tensorboard"))
    assert res.exit_code == 0, res.output
    events = EventAccumulator(str(out / "xsyn-synth"))
    events.Reload()
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    dev = [(e.step, e.value) for e in events.Scalars("dev_primary")]
    assert dev == [(r["step"], pytest.approx(r["dev_primary"])) for r in log if "dev" in r]
    losses = {e.step: e.value for e in events.Scalars("distance_loss")}
    assert losses == {r["step"]: pytest.approx(r["distance_loss"]) for r in log if "loss" in r}
    assert "step" not in events.Tags()["scalars"]  # the x axis, not a series
    hparams = next(out.glob("xsyn-synth/*/hparams.yml")).read_text()
    assert "variant: gat" in hparams and "model_settings/gat_delta:" in hparams


def test_a_wandb_tracker_gets_the_logged_numbers_and_the_config(vocab, cache, tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb", reason="wandb is optional (pip install wandb)")
    monkeypatch.setenv("WANDB_MODE", "offline")  # a real W&B run, written to disk only
    monkeypatch.delenv("WANDB_DIR", raising=False)
    logged, configs = [], []
    log = wandb.sdk.wandb_run.Run.log

    def recording_log(run, data, step=None, **kwargs):
        logged.append((step, dict(data)))
        configs.append(dict(run.config))
        return log(run, data, step=step, **kwargs)

    monkeypatch.setattr(wandb.sdk.wandb_run.Run, "log", recording_log)
    out = tmp_path / "gat-seed1"
    args = finetune_args(vocab, cache, out, "--variant", "gat", "--max-steps", "8", "--eval-every", "4",
                         "--tracker", "wandb")
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    log_lines = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    dev = [(step, values["dev_primary"]) for step, values in logged if "dev_primary" in values]
    assert dev == [(r["step"], pytest.approx(r["dev_primary"])) for r in log_lines if "dev" in r]
    assert configs[-1]["variant"] == "gat" and "syntax/gat_delta" in configs[-1]
    run_id = (out / "wandb_run_id.txt").read_text().strip()
    assert [p.name for p in out.glob("wandb/offline-run-*/run-*.wandb")] == [f"run-{run_id}.wandb"]  # not in the cwd
    assert CliRunner().invoke(main, [*args, "--resume"]).exit_code == 0
    resumed = [p.name for p in out.glob("wandb/offline-run-*/run-*.wandb")]
    assert resumed == [f"run-{run_id}.wandb"] * 2  # the resumed run logs to the same W&B run


def test_a_tracker_that_is_not_installed_stops_the_run_before_it_trains(vocab, cache, tmp_path):
    if importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed here")
    res = CliRunner().invoke(main, finetune_args(vocab, cache, tmp_path / "run", "--tracker", "wandb"))
    assert res.exit_code != 0
    assert "--tracker wandb: not installed; pip install wandb" in res.output
    assert not (tmp_path / "run").exists()


def test_demo_runs_every_stage_continues_after_ctrl_c_and_writes_the_report(tmp_path, monkeypatch):
    """Ctrl-C in the demo printed only `Aborted!` and a rerun was refused; now it names the command that
    continues, which does (the demo's config names the gold trees it trains on, not `chain`)."""
    from xsyn.training.loop import Stepper

    real_step, calls, stop_at = Stepper.step, [], [3]

    def counted(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == stop_at[0]:  # in none's third step, after the state of step 2 was saved
            raise KeyboardInterrupt
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(Stepper, "step", counted)
    args = ["demo", "--output-dir", str(tmp_path), "--max-steps", "4", "--set", "checkpointing_steps=1", "--quiet"]
    res = CliRunner().invoke(main, args)
    none, gat = (tmp_path / "runs" / f"{variant}-seed{DEFAULT_SEED}" for variant in ("none", "gat"))
    assert res.exit_code == 130, res.output
    assert f"interrupted: the state of step 2 is saved in {none / 'state'}. Continue with:" in res.output
    assert (f"xsyn demo --output-dir {tmp_path} --seed {DEFAULT_SEED} --max-steps 4 --set checkpointing_steps=1 "
            "--quiet") in res.output
    calls.clear()
    stop_at[0] = None
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert f"continuing the demo in {tmp_path} (none saved at step 2)" in res.output
    assert "zero-shot test accuracy (trained on svo)" in res.output
    assert len(calls) == 2 + 4  # none's steps 3 and 4, then gat's four: nothing trained twice
    assert json.loads((none / "train_results.json").read_text())["steps"] == 4
    config = json.loads((gat / "config.json").read_text())
    assert config["parser"] == "gold"
    assert json.loads((gat / "data_report.json").read_text())["train"]["parse"]["gold"] == 4000  # 2,000 pairs
    report = (tmp_path / "report" / "report.md").read_text()
    assert "## synth · test · accuracy" in report and "Δ against none (baseline)" in report
    for variant in ("none", "gat"):
        run = tmp_path / "runs" / f"{variant}-seed{DEFAULT_SEED}"
        results = json.loads((run / "eval-test" / "results.json").read_text())
        assert set(results["pairs"]) == {"svo", "sov", "vso", "ovs"} and results["variant"] == variant
    pngs = list((tmp_path / "report").rglob("*.png"))
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in pngs)
    figures = {p.name for p in pngs if not p.name.startswith("curves-")}  # (each run's training curves, if any)
    assert figures == {"per_language.png", "pairs-gat.png", "pairs-none_baseline.png", "pairs-delta-gat.png"}
    other = CliRunner().invoke(main, ["demo", "--output-dir", str(tmp_path), "--max-steps", "5", "--quiet"])
    assert other.exit_code != 0 and "already holds a demo of other options" in other.output  # never mixed


def test_cged_predictions_are_written_in_the_nlptea_scorers_input_format(tmp_path):
    from xsyn.data.cards import load_card
    from xsyn.data.example import Example

    card = load_card("cged")
    examples = [Example(id="A1", segments=[]), Example(id="B2", segments=[])]
    card.task_kind.write_predictions(tmp_path / "test-zh", examples, [{(8, 8, "R"), (2, 3, "S")}, set()], card.metric)
    written = (tmp_path / "test-zh.txt").read_text(encoding="utf-8")
    assert written == "A1, 2, 3, S\nA1, 8, 8, R\nB2, correct\n"


def test_evaluate_records_the_run_folder_absolute_whatever_path_was_typed(run, tmp_path, monkeypatch):
    """`xsyn report` run from another folder lost the training curves: run_dir was kept as typed."""
    monkeypatch.chdir(run.parent)
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", run.name, "--langs", "svo", "--quiet",
                                    "--output-dir", str(tmp_path / "e")])
    assert res.exit_code == 0, res.output
    results = json.loads((tmp_path / "e" / "results.json").read_text())
    assert results["run_dir"] == str(run.resolve()) and Path(results["checkpoint"]).is_absolute()


def test_evaluate_prints_each_score_with_its_metric_and_bootstrap_sd(run, tmp_path):
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(run), "--langs", "svo", "--quiet",
                                    "--output-dir", str(tmp_path / "e")])
    assert res.exit_code == 0, res.output
    line = next(line for line in res.output.splitlines() if line.startswith("svo\t"))
    name, score, plus_minus, sd = line.split("\t")[1].split()
    assert name == "accuracy" and plus_minus == "±"
    p = float(score) / 100
    assert float(sd) == pytest.approx(100 * math.sqrt(p * (1 - p) / 400), rel=0.2, abs=0.05)  # binomial s.e.


def test_evaluate_on_another_task_is_refused_with_the_reason_when_it_is_not_compatible(run):
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(run), "--task", "xnli", "--quiet"])
    assert res.exit_code != 0
    assert "cannot be evaluated on xnli: its labels contradiction, entailment, neutral" in res.output
