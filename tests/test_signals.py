"""SIGTERM cleans up as Ctrl-C does (`xsyn.utils.signals`): a `kill`, `timeout` or SLURM's end of time leaves no
temporary folder, and a stopped training says where it stands and how to continue, with a shell's exit status."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from console import console_env, xsyn_script

from xsyn.data.synth import write_vocab


def _terminate_when(proc: subprocess.Popen, ready, timeout_s: float = 300) -> tuple[str, str]:
    """Send SIGTERM to `proc` once `ready()` holds; its output once it has ended."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the command never reached the point to stop it at"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    return proc.communicate(timeout=120)


def test_sigterm_removes_bench_loops_temporary_folder_as_ctrl_c_does(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    vocab = write_vocab(tmp_path / "vocab.txt")
    proc = subprocess.Popen([str(xsyn_script()), "bench", "loop", "--task", "synth", "--model", "tiny", "--steps",
                             "100000", "--set", f"tokenizer={vocab}"], cwd=tmp_path, env=console_env(TMPDIR=str(temp)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # stopped once the bench works in its temporary folder (its caches and runs), long before its 100000 steps
    _, err = _terminate_when(proc, lambda: any(temp.glob("xsyn-bench-loop-*/*/*")))
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err and err.rstrip().endswith("terminated (SIGTERM)"), err
    assert not list(temp.glob("xsyn-*"))  # its runs, checkpoints and caches are gone (torch's own caches may stay)


def test_sigterm_stops_a_training_that_says_where_it_stands_and_resumes(tmp_path):
    vocab = write_vocab(tmp_path / "vocab.txt")
    run = tmp_path / "run"
    proc = subprocess.Popen([str(xsyn_script()), "finetune", "--task", "synth", "--model", "tiny", "--tokenizer",
                             str(vocab), "--max-steps", "100000", "--checkpointing-steps", "1", "--output-dir",
                             str(run), "--cache-dir", str(tmp_path / "cache"), "--quiet"], cwd=tmp_path,
                            env=console_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = _terminate_when(proc, lambda: (run / "state").is_dir())
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err and "\nterminated (SIGTERM): the state of step " in err, err
    assert f"Continue with:\n  xsyn finetune --resume {run}" in err
    assert not [p.name for p in Path(run).iterdir() if p.name.endswith(".tmp")]  # no staging folder left


def test_a_stop_in_the_middle_of_a_save_leaves_no_staging_and_keeps_the_last_whole_state(tmp_path):
    """The SIGTERM test above can land anywhere; here the stop (Ctrl-C, or SIGTERM raised as one) lands inside the
    save itself, after part of the new state is written."""
    import pytest

    from xsyn.training.checkpoint import save_state
    from xsyn.training.folder import RunFolder, staged
    from xsyn.utils.signals import Terminated

    class HalfSaving:  # a one-process Accelerator whose save stops after writing one file
        is_main_process, num_processes = True, 1

        def save_state(self, path, safe_serialization):
            Path(path).mkdir(parents=True)
            (Path(path) / "model.safetensors").write_bytes(b"half")
            raise Terminated()

        def wait_for_everyone(self):
            pass

    folder = RunFolder(tmp_path / "run")
    folder.state.mkdir(parents=True)
    (folder.state / "trainer_state.json").write_text('{"step": 3}', encoding="utf-8")
    with pytest.raises(KeyboardInterrupt):
        save_state(HalfSaving(), folder, {"step": 4})
    assert not staged(folder.state).exists()
    assert (folder.state / "trainer_state.json").read_text(encoding="utf-8") == '{"step": 3}'


def test_a_stop_in_the_middle_of_saving_the_best_checkpoint_leaves_no_staging_and_keeps_the_last_best(tmp_path):
    """The same stop inside the save of `best/` (the other folder the loop stages and swaps in)."""
    from types import SimpleNamespace

    import pytest
    import torch

    from xsyn.run.train import _save_best
    from xsyn.training.folder import RunFolder, staged
    from xsyn.utils.signals import Terminated

    class HalfSavedModel(torch.nn.Linear):  # its save stops after writing one file
        def save_pretrained(self, path, safe_serialization):
            Path(path).mkdir(parents=True)
            (Path(path) / "model.safetensors").write_bytes(b"half")
            raise Terminated()

    accelerator = SimpleNamespace(is_main_process=True, num_processes=1, wait_for_everyone=lambda: None,
                                  unwrap_model=lambda model: model)
    folder = RunFolder(tmp_path / "run")
    folder.best.mkdir(parents=True)
    (folder.best / "task.json").write_text('{"step": 3}', encoding="utf-8")
    with pytest.raises(KeyboardInterrupt):
        _save_best(accelerator, HalfSavedModel(2, 2), None, folder, None, None, SimpleNamespace(step=4), {})
    assert not staged(folder.best).exists()
    assert (folder.best / "task.json").read_text(encoding="utf-8") == '{"step": 3}'
