"""The training loop's faults: numbers that are not finite, settings a model cannot take, a run
killed during its first checkpoint, damaged or unwritable saved state; and mixed precision."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from xsyn.cli import main
from xsyn.data.synth import write_vocab

QUICK = ["--task", "synth", "--model", "tiny", "--train-lang", "svo", "--parser", "chain", "--quiet",
         "--max-train-examples", "64", "--set", "max_eval_examples=32", "--batch-size", "16", "--max-length", "48",
         "--variant", "none"]


@pytest.fixture(scope="module")
def common(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("training")
    return [*QUICK, "--tokenizer", str(write_vocab(root / "vocab.txt")), "--cache-dir", str(root / "cache")]


def finetune(*args: str):
    return CliRunner().invoke(main, ["finetune", *args])


# -- numbers ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("setting", "expected"), [
    ("learning_rate=Infinity", "--set: learning_rate: must be a finite number > 0, got inf"),
    ("learning_rate=NaN", "--set: learning_rate: must be a finite number > 0, got nan"),
    ("weight_decay=-Infinity", "--set: weight_decay: must be >= 0, got -inf"),
    ("hidden_dropout_prob=abc", "--set: hidden_dropout_prob: expected a number, got 'abc'"),
    ("hidden_dropout_prob=2", "hidden_dropout_prob must be a probability from 0 to 1, got 2"),
    ("num_hidden_layers=1.5", "--set: num_hidden_layers: expected an integer, got 1.5"),
])
def test_settings_that_cannot_train_are_refused_by_name_before_any_data_is_read(common, tmp_path, setting,
                                                                                  expected):
    out = tmp_path / "run"
    res = finetune(*common, "--output-dir", str(out), "--set", setting, "--data-dir", str(tmp_path / "absent"))
    assert res.exit_code != 0 and expected in res.output and "Traceback" not in res.output
    assert not out.exists()  # refused when the run was resolved, before it made its folder or read data


def test_a_max_length_beyond_the_models_positions_is_refused_naming_both_numbers(common, tmp_path):
    res = finetune(*common, "--output-dir", str(tmp_path / "run"), "--max-length", "600")
    assert res.exit_code != 0
    assert "--max-length 600 is longer than the 512 positions the model tiny has" in res.output
    res = finetune(*common, "--output-dir", str(tmp_path / "run"), "--max-length", "100", "--set",
                   "max_position_embeddings=64")
    assert "--max-length 100 is longer than the 64 positions" in res.output


def test_a_pad_to_multiple_of_past_the_models_positions_is_refused_before_training(common, tmp_path):
    """Batches of --max-length pieces rounded up to the multiple must fit the position table (it failed in the first
    forward pass): the installed command names the option, the length it pads to and the model's positions."""
    out = tmp_path / "run"
    xsyn = shutil.which("xsyn", path=str(Path(sys.executable).parent))
    res = subprocess.run([xsyn, "finetune", *common, "--output-dir", str(out), "--pad-to-multiple-of", "1024"],
                         capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert ("--pad-to-multiple-of 1024: a batch of --max-length 48 pieces is padded to 1024, beyond the 512 positions "
            "the model tiny has (max_position_embeddings): choose --pad-to-multiple-of 512 (the largest that fits) or "
            "a divisor of 512 such as 64") in res.stderr
    assert not out.exists()  # refused when the run was resolved, before its folder or data
    # any multiple that pads past them: 100 pieces to a multiple of 64 is 128, beyond 104 positions (52 pads to 104)
    res = finetune(*common, "--output-dir", str(out), "--max-length", "100", "--set", "max_position_embeddings=104",
                   "--pad-to-multiple-of", "64")
    assert res.exit_code != 0 and ("--pad-to-multiple-of 64: a batch of --max-length 100 pieces is padded to 128, "
                                   "beyond the 104 positions the model tiny has (max_position_embeddings): choose "
                                   "--pad-to-multiple-of 52 (the largest that fits) or a divisor of 104 such as 8"
                                   ) in res.output


def test_positions_that_start_after_padding_leave_fewer_for_the_input():
    """XLM-R counts positions from its padding index + 1: of 66, 64 hold pieces (65 failed in the forward pass);
    judged where the run's resources meet the checkpoint's configuration (settings resolution reads no file)."""
    from transformers import XLMRobertaConfig

    from xsyn.data.cards import load_card
    from xsyn.run.checks import check_model_settings
    from xsyn.run.settings import ConfigError, resolve

    base = XLMRobertaConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=32, max_position_embeddings=66, pad_token_id=1)

    def settings(**given):
        return resolve("synth", "none", load_card("synth"), {}, {"model": "xlmr-folder", "parser": "chain", **given})

    assert check_model_settings(settings(max_length=64), base) is not None
    with pytest.raises(ConfigError, match=r"--max-length 65 is longer than the 64 positions the model .* has "
                                          r"\(max_position_embeddings 66, less 2: its positions start after padding\)"):
        check_model_settings(settings(max_length=65), base)
    with pytest.raises(ConfigError, match="--pad-to-multiple-of 48: a batch of --max-length 60 pieces is padded to 96, "
                                          "beyond the 64 positions"):
        check_model_settings(settings(max_length=60, pad_to_multiple_of=48), base)


def test_a_diverging_run_stops_at_the_step_naming_the_learning_rate_and_never_keeps_a_nan_model(common, tmp_path):
    out = tmp_path / "run"
    res = finetune(*common, "--output-dir", str(out), "--set", "learning_rate=1e30", "--max-steps", "6",
                   "--eval-every", "1", "--set", "warmup_steps=0")  # step 1 at the full rate (the card warms up)
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "optimiser step 2: loss nan" in res.output or "optimiser step 2: loss inf" in res.output
    assert "lower --learning-rate (now 1e+30)" in res.output
    assert not (out / "train_results.json").exists()
    for folder in ("best", "state"):
        if (out / folder).exists():  # what was saved before the failure holds only finite numbers
            assert all(torch.isfinite(t).all() for t in load_file(out / folder / "model.safetensors").values())


# -- the run folder ---------------------------------------------------------------------------------

def two_steps(common: list[str], out: Path) -> list[str]:
    return [*common, "--output-dir", str(out), "--max-steps", "2", "--eval-every", "1"]


@pytest.fixture(scope="module")
def finished(common, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("finished") / "run"
    res = finetune(*two_steps(common, out))
    assert res.exit_code == 0, res.output
    return out


def test_a_run_killed_during_its_first_checkpoint_restarts_with_either_option_and_never_silently(common, finished,
                                                                                                 tmp_path):
    for extra in (["--overwrite-output-dir"], ["--resume"]):
        killed = tmp_path / extra[0].strip("-")
        shutil.copytree(finished, killed)
        shutil.rmtree(killed / "state")  # best/ written, no state/ yet
        (killed / "train_results.json").unlink()
        (killed / "validation_results.json").write_text('{"primary": 99.0}')  # the dead attempt's, to be replaced
        res = finetune(*two_steps(common, killed))  # the folder holds files: neither option given, nothing touched
        assert res.exit_code == 1 and f"continue it with --resume {killed}" in res.output
        assert "start afresh with --overwrite-output-dir" in res.output
        assert json.loads((killed / "validation_results.json").read_text())["primary"] == 99.0
        res = finetune(*two_steps(common, killed), *extra)
        assert res.exit_code == 0, res.output
        assert ("holds no saved state yet; the run starts from step 0" in res.output) == (extra == ["--resume"])
        assert json.loads((killed / "train_results.json").read_text())["steps"] == 2
        assert json.loads((killed / "validation_results.json").read_text())["primary"] != 99.0
    res = finetune(*two_steps(common, finished))  # a finished run is still never overwritten
    assert res.exit_code == 1 and "already holds a run that saved progress" in res.output


@pytest.mark.parametrize(("damage", "named"), [
    (lambda state: (state / "optimizer.bin").write_bytes((state / "optimizer.bin").read_bytes()[:100]),
     "optimizer.bin"),
    (lambda state: (state / "trainer_state.json").write_text('{"step": 2, "epo'), "trainer_state.json"),
    (lambda state: (state / "trainer_state.json").write_text('{"steps": 2}'), "trainer_state.json"),
])
def test_a_damaged_saved_state_is_named_with_the_fix(common, finished, tmp_path, damage, named):
    copy = tmp_path / "run"
    shutil.copytree(finished, copy)
    damage(copy / "state")
    # one step more than it trained: a finished run is returned as it is, without reading its state
    res = finetune(*two_steps(common, copy), "--max-steps", "3", "--resume")
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert str(copy / "state" / named) in res.output
    assert f"delete {copy / 'state'} and run the same command without --resume" in res.output


def test_a_checkpoint_that_cannot_be_written_is_named_and_leaves_nothing_half_written(common, tmp_path,
                                                                                      monkeypatch):
    import accelerate.checkpointing

    real_save = accelerate.checkpointing.save

    def full_disk(obj, path, *args, **kwargs):
        if Path(path).name == "optimizer.bin":  # the model is written, then the disk is full
            raise RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing "
                               "file data/3: file write failed")
        return real_save(obj, path, *args, **kwargs)

    out = tmp_path / "run"
    args = two_steps(common, out)
    monkeypatch.setattr(accelerate.checkpointing, "save", full_disk)
    res = finetune(*args)
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert f"cannot write the training state to {out / 'state.tmp'}" in res.output
    assert "no state is saved yet" in res.output and "continue with --resume" in res.output
    assert not (out / "state.tmp").exists() and not (out / "state").exists()
    monkeypatch.setattr(accelerate.checkpointing, "save", real_save)  # space freed: the advice works
    res = finetune(*args, "--resume")
    assert res.exit_code == 0, res.output
    assert json.loads((out / "train_results.json").read_text())["steps"] == 2


# -- mixed precision --------------------------------------------------------------------------------

def _losses(run: Path) -> list[float]:
    return [r["loss"] for r in map(json.loads, (run / "train_log.jsonl").read_text().splitlines()) if "loss" in r]


def _in_own_process(*args: str) -> None:
    """Mixed precision is fixed once per process (Accelerate's state), so such a run gets its own."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "xsyn", "finetune", *args], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_a_bf16_run_trains_and_its_loss_falls(common, tmp_path):
    out = tmp_path / "bf16"
    # 2e-3, not 3e-3: at 3e-3 with no warmup, seed 1111's run stalls at 0.38 once its batch of 15-piece rows is
    # padded to 16 (a multiple of 8: other dropout draws; the padded forward equals the unpadded one), while
    # seeds 2 and 3 reach 0.01. The test is about bf16 training, not about that trajectory.
    _in_own_process(*common, "--output-dir", str(out), "--mixed-precision", "bf16", "--max-steps", "30",
                    "--max-train-examples", "16", "--set", "log_every=1", "--set", "learning_rate=2e-3",
                    "--set", "warmup_steps=0")
    assert json.loads((out / "config.json").read_text())["mixed_precision"] == "bf16"
    losses = _losses(out)
    assert len(losses) == 30 and all(map(torch.isfinite, torch.tensor(losses)))
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5  # it learns its 16 examples by heart


@pytest.mark.skipif(not torch.cuda.is_available(), reason="fp16 mixed precision needs a CUDA device (its loss "
                    "scaler and half-precision kernels); this machine has none")
def test_an_fp16_run_trains_and_its_loss_falls(common, tmp_path):
    out = tmp_path / "fp16"
    _in_own_process(*common, "--output-dir", str(out), "--mixed-precision", "fp16", "--max-steps", "30",
                    "--max-train-examples", "16", "--set", "log_every=1", "--set", "learning_rate=2e-3",
                    "--set", "warmup_steps=0")
    losses = _losses(out)
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5


def test_a_best_checkpoint_that_cannot_be_written_is_named_and_the_same_command_then_works(common, tmp_path,
                                                                                           monkeypatch):
    import errno

    from transformers import PreTrainedModel

    real_save = PreTrainedModel.save_pretrained

    def full_disk(self, folder, *args, **kwargs):
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "model.safetensors").write_bytes(b"\0" * 64)  # cut short by the full disk
        raise OSError(errno.ENOSPC, "No space left on device")

    out = tmp_path / "run"
    monkeypatch.setattr(PreTrainedModel, "save_pretrained", full_disk)
    res = finetune(*two_steps(common, out))
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert f"cannot write the checkpoint {out / 'best.tmp'}" in res.output and "No space left" in res.output
    assert not (out / "best.tmp").exists() and not (out / "best").exists()
    monkeypatch.setattr(PreTrainedModel, "save_pretrained", real_save)
    res = finetune(*two_steps(common, out), "--resume")  # as the message says: nothing was saved, it starts again
    assert res.exit_code == 0, res.output
    assert (out / "best" / "model.safetensors").stat().st_size > 64


def test_remaining_batches_resume_where_a_saved_position_left_off_also_at_an_epoch_end():
    from types import SimpleNamespace

    from xsyn.training.loop import remaining_batches

    def batches_of_epoch(epoch):  # three batches an epoch, named by (epoch, index)
        return [[epoch, i] for i in range(3)]

    def take(state, total):
        taken = []
        for batch in remaining_batches(state, total, batches_of_epoch):
            taken.append(batch)
            state.step += 1
            state.step_in_epoch += 1
        return taken

    whole = take(SimpleNamespace(step=0, epoch=0, step_in_epoch=0), 7)
    assert whole == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2], [2, 0]]
    # a state saved after step 3 holds the used-up epoch 0 (3 of 3): the run goes on with epoch 1
    assert take(SimpleNamespace(step=3, epoch=0, step_in_epoch=3), 7) == whole[3:]
    assert take(SimpleNamespace(step=4, epoch=1, step_in_epoch=1), 7) == whole[4:]
    finished = SimpleNamespace(step=6, epoch=1, step_in_epoch=3)
    assert take(finished, 6) == [] and finished.epoch == 1  # a finished run does not move on an epoch
