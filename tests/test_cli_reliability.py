"""Bad inputs and faults, as a user meets them through the installed `xsyn` (issue 56): each ends in one clear
error naming the file, field or option and the fix, before any expensive step, and never in a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from console import CONSOLE_TIMEOUT_S, console_env, xsyn_script
from test_experiments_prepare import _grid, _options


def xsyn_fails(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """`xsyn ARGS` from the console script; asserts it fails with exit status 1 and a message, not a traceback."""
    proc = subprocess.run([str(xsyn_script()), *args], cwd=cwd, env=console_env(**env), capture_output=True,
                          text=True, timeout=CONSOLE_TIMEOUT_S)
    shown = f"xsyn {' '.join(args)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode in (1, 2) and "Traceback" not in proc.stderr + proc.stdout, shown
    assert proc.stderr.startswith("Error") or "\nError" in proc.stderr, shown
    return proc


def test_a_missing_model_folder_is_named_by_prepare_and_by_run_offline(tmp_path):
    grid = _grid(tmp_path, "chain")
    missing = str(tmp_path / "models" / "mbert")
    for command in (["prepare"], ["run", "--offline"]):
        failed = xsyn_fails("experiment", *command[:1], str(grid), *_options(tmp_path), "--model", missing,
                            *command[1:], cwd=tmp_path)
        assert f"model {missing} (--model): no such folder, and not a hub name" in failed.stderr, failed.stderr
    assert not (tmp_path / "runs" / "pawsx").exists()  # nothing was started


def test_a_mistyped_relative_model_path_is_not_taken_for_a_hub_name(tmp_path):
    grid = _grid(tmp_path, "chain")
    (tmp_path / "models").mkdir()
    failed = xsyn_fails("experiment", "run", str(grid), *_options(tmp_path), "--model", "models/mbrt", cwd=tmp_path)
    assert "model models/mbrt (--model): no such folder" in failed.stderr, failed.stderr


def test_prepare_on_slurm_without_slurm_says_so_and_how_to_prepare_here(tmp_path):
    grid = _grid(tmp_path, "chain")
    failed = xsyn_fails("experiment", "prepare", str(grid), *_options(tmp_path), "--launcher", "slurm", cwd=tmp_path)
    assert "submitting `experiment prepare` to SLURM failed" in failed.stderr, failed.stderr
    assert "run it here with --launcher local" in failed.stderr


def test_a_manifest_of_another_shape_is_named_with_the_fix(tmp_path):
    grid = _grid(tmp_path, "chain")
    (tmp_path / "runs").mkdir()
    manifest = tmp_path / "runs" / "prepared.json"
    manifest.write_text(json.dumps({"units": ["a", "b"], "models": {}}), encoding="utf-8")
    for offline in ([], ["--offline"]):
        failed = xsyn_fails("experiment", "run", str(grid), *_options(tmp_path), *offline, cwd=tmp_path)
        assert f"{manifest}: units is a JSON list, not an object" in failed.stderr, failed.stderr
        assert "delete it, then run `xsyn experiment prepare` again" in failed.stderr


def test_bench_eval_refuses_a_step_time_that_is_not_a_number(tmp_path):
    for value in ("nan", "inf"):
        failed = xsyn_fails("bench", "eval", "--step-ms", value, cwd=tmp_path)
        assert f"Invalid value for '--step-ms': {value!r} is not a finite number" in failed.stderr, failed.stderr
    assert not list(tmp_path.iterdir())  # refused before it trained anything


def test_fp16_without_a_gpu_is_refused_before_any_data_is_read(tmp_path):
    """Accelerate takes fp16 on the CPU, computes in float32 and the run would record fp16."""
    failed = xsyn_fails("finetune", "--task", "synth", "--model", "tiny", "--mixed-precision", "fp16", "--output-dir",
                        str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"), cwd=tmp_path,
                        CUDA_VISIBLE_DEVICES="")
    assert "--mixed-precision fp16 computes in float16 on a CUDA GPU only" in failed.stderr, failed.stderr
    assert "choose --mixed-precision no (float32) or bf16" in failed.stderr
    assert not (tmp_path / "run" / "config.json").exists() and not (tmp_path / "cache").exists()


def test_an_option_and_a_set_that_contradict_each_other_are_refused(tmp_path):
    failed = xsyn_fails("finetune", "--task", "synth", "--model", "tiny", "--random-batches", "--set",
                        "group_by_length=true", "--output-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert "--random-batches and --set group_by_length=true contradict each other: give one" in failed.stderr
    assert not (tmp_path / "run").exists()


def test_gpus_asked_for_that_are_not_there_and_options_the_launcher_ignores_are_refused(tmp_path):
    out = ["--output-dir", str(tmp_path / "runs"), "--max-steps", "1"]
    cases = [
        (["run", "synth", *out, "--cells-per-gpu", "100000"], "--cells-per-gpu 100000: 0 visible GPUs"),
        (["run", "synth", *out, "--gpus", "4"], "--gpus 4: this machine has 0 visible GPUs"),
        (["run", "synth", *out, "--partition", "gpu"],
         "--partition: an option of --launcher slurm, and the launcher is local, which would ignore it"),
        (["run", "synth", *out, "--prepare", "--prepare-partition", "cpu", "--time", "30"],
         "--time, --prepare-partition: options of --launcher slurm"),
        (["prepare", "synth", *out, "--partition", "cpu", "--cpus", "4"],
         "--partition, --cpus: options of --launcher slurm, and the launcher is local"),
        (["run", "synth", *out, "--launcher", "slurm", "--gpus", "2"],
         "--gpus: an option of --launcher local, and the launcher is slurm"),
    ]
    for args, said in cases:
        failed = xsyn_fails("experiment", *args, cwd=tmp_path, CUDA_VISIBLE_DEVICES="")
        assert said in failed.stderr, (args, failed.stderr)
    assert not (tmp_path / "runs" / "synth").exists()  # no cell started


def test_a_resume_that_changes_the_batching_is_refused_naming_the_saved_value(tmp_path):
    from xsyn.data.synth import write_vocab

    vocab = write_vocab(tmp_path / "vocab.txt")
    run = tmp_path / "run"
    trained = subprocess.run([str(xsyn_script()), "finetune", "--task", "synth", "--model", "tiny", "--tokenizer",
                              str(vocab), "--max-steps", "2", "--output-dir", str(run), "--cache-dir",
                              str(tmp_path / "cache"), "--set", "max_train_examples=32", "--set",
                              "max_eval_examples=16", "--quiet"], cwd=tmp_path, env=console_env(),
                             capture_output=True, text=True, timeout=CONSOLE_TIMEOUT_S)
    assert trained.returncode == 0, trained.stderr
    saved = (run / "config.json").read_bytes()
    for change, said in ((["--random-batches"], "group_by_length false (saved: true)"),
                         # (on the CPU `auto` resolves to each batch's own longest row and no length budget)
                         (["--pad-to-multiple-of", "8"], "pad_to_multiple_of 8 (saved: 1)"),
                         (["--set", "max_batch_lengths=8"], "max_batch_lengths 8 (saved: null)")):
        failed = xsyn_fails("finetune", "--resume", str(run), "--max-steps", "4", *change, cwd=tmp_path)
        assert f"the run was trained with other batches than this command gives ({said}" in failed.stderr, \
            failed.stderr
        assert "a run keeps its batching to the end" in failed.stderr
    assert (run / "config.json").read_bytes() == saved  # nothing rewritten
    resumed = subprocess.run([str(xsyn_script()), "finetune", "--resume", str(run), "--max-steps", "4", "--quiet"],
                             cwd=tmp_path, env=console_env(), capture_output=True, text=True,
                             timeout=CONSOLE_TIMEOUT_S)  # `auto` batching given again: what the start resolved
    assert resumed.returncode == 0 and "trained: 4 steps" in resumed.stdout, resumed.stderr


def test_an_evaluation_replaces_the_earlier_one_whole_and_says_so(tmp_path):
    """A narrower rerun of `xsyn evaluate` on a run folder: eval-test/ then holds this evaluation's files alone (no
    pairs.png, no per-example file of a language it did not score), and the command says what it replaced; a
    folder that holds other files is refused before the model is loaded."""
    from xsyn.data.synth import write_vocab

    vocab, run = write_vocab(tmp_path / "vocab.txt"), tmp_path / "run"
    common = ["--cache-dir", str(tmp_path / "cache"), "--quiet"]
    trained = subprocess.run([str(xsyn_script()), "finetune", "--task", "synth", "--model", "tiny", "--tokenizer",
                              str(vocab), "--max-steps", "1", "--output-dir", str(run), "--set",
                              "max_train_examples=16", "--set", "max_eval_examples=8", *common], cwd=tmp_path,
                             env=console_env(), capture_output=True, text=True, timeout=CONSOLE_TIMEOUT_S)
    assert trained.returncode == 0, trained.stderr
    evaluate = [str(xsyn_script()), "evaluate", "--model-dir", str(run), "--max-eval-examples", "8", *common]
    wide = subprocess.run([*evaluate, "--langs", "svo,sov", "--generalized"], cwd=tmp_path, env=console_env(),
                          capture_output=True, text=True, timeout=CONSOLE_TIMEOUT_S)
    assert wide.returncode == 0, wide.stderr
    out = run / "eval-test"
    assert (out / "pairs.png").is_file() and (out / "per_example" / "test-sov.jsonl").is_file()
    narrow = subprocess.run([*evaluate, "--langs", "svo"], cwd=tmp_path, env=console_env(), capture_output=True,
                            text=True, timeout=CONSOLE_TIMEOUT_S)
    assert narrow.returncode == 0, narrow.stderr
    assert f"replaced the earlier evaluation in {out} (6 languages and pairs: sov, sov-sov, sov-svo, svo, svo-sov, " \
        "svo-svo)" \
        in narrow.stderr, narrow.stderr
    assert sorted(p.name for p in (out / "per_example").iterdir()) == ["test-svo.jsonl"]
    assert not (out / "pairs.png").exists() and not (out / "partial").exists()
    assert list(json.loads((out / "results.json").read_text(encoding="utf-8"))["per_language"]) == ["svo"]
    assert not (run / "eval-test.tmp").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes\n", encoding="utf-8")
    failed = xsyn_fails("evaluate", "--model-dir", str(run), "--langs", "svo", "--output-dir", str(mine), cwd=tmp_path)
    assert f"{mine} holds files that are not an evaluation's (notes.txt)" in failed.stderr, failed.stderr
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "my notes\n"


def test_a_mistyped_model_path_is_named_as_the_model_not_as_a_tokenizer(tmp_path):
    missing = str(tmp_path / "modles" / "mbert")
    failed = xsyn_fails("bench", "loop", "--task", "synth", "--model", missing, "--steps", "2", cwd=tmp_path)
    assert f"cannot load the model {missing!r} (--model)" in failed.stderr, failed.stderr
    assert "--tokenizer" not in failed.stderr  # bench loop has no such option


def test_prepare_lists_what_is_not_ready_with_its_error_on_stderr(tmp_path):
    grid = _grid(tmp_path, "chain")
    (tmp_path / "data" / "pawsx" / "x-final" / "de" / "test_2k.tsv").unlink()
    failed = xsyn_fails("experiment", "prepare", str(grid), *_options(tmp_path), cwd=tmp_path)
    cause = "- pawsx · tiny · parser chain: "
    assert "not every input is ready; each with its fix:\n" + cause in failed.stderr, failed.stderr
    assert "fix what it names, then prepare again" in failed.stderr
    assert cause not in failed.stdout and "prepared: 0 of 1 data units ready" in failed.stdout
