"""The run-folder layout is named once (`xsyn.training.folder.RunFolder`): what it says a folder holds,
and that no other module spells a run file's name."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from xsyn.training.folder import RunFolder, RunFolderTaken, staged
from xsyn.training.log import read_step_log

PACKAGE = Path(__file__).resolve().parents[1] / "xsyn"
FOLDER_MODULE = PACKAGE / "training" / "folder.py"
# A run's files: a module that spells one of these as a string is reading or writing the layout itself.
RUN_FILES = {"config.json", "data_report.json", "train_log.jsonl", "training_curves.png", "validation_results.json",
             "train_results.json", "wandb_run_id.txt", "results.json", "probe_metrics.json", "pretrain_config.json",
             "xsyn_task.json", "trainer_state.json"}
RUN_DIRS = {"state", "best", "partial"}  # flagged where a path is built from them (`folder / "state"`)
RUN_PREFIXES = ("eval-", "checkpoint-")


def layout_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string in `source` that names a run file or folder, docstrings aside."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    path_parts = {id(node.right) for node in ast.walk(tree) if isinstance(node, ast.BinOp)
                  and isinstance(node.op, ast.Div)}
    found = set()
    for node in ast.walk(tree):  # an f-string's literal parts are constants too
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docstrings:
            continue
        text = node.value
        if text in RUN_FILES or text.startswith(RUN_PREFIXES) or (id(node) in path_parts
                                                                   and text.split("/")[0] in RUN_DIRS):
            found.add((node.lineno, text))
    return sorted(found)


def test_the_scan_finds_a_run_file_spelled_in_a_path_an_fstring_or_a_glob():
    source = ('"""Writes state/ and train_results.json."""\n'
              'def f(out, split):\n'
              '    """best/ too."""\n'
              '    a = out / "state" / "x"\n'
              '    b = out / "train_results.json"\n'
              '    c = out / f"eval-{split}"\n'
              '    d = out.glob("checkpoint-*")\n'
              '    e = {"state": 1, "help": "see train_results.json"}\n')
    assert layout_literals(source) == [(4, "state"), (5, "train_results.json"), (6, "eval-"), (7, "checkpoint-*")]


def test_no_module_but_the_folder_module_spells_the_run_folder_layout():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        # xsyn/models reads model folders, whose config.json is transformers' file, not the run's
        if path == FOLDER_MODULE or path.is_relative_to(PACKAGE / "models"):
            continue
        offenders += [f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r}"
                      for line, text in layout_literals(path.read_text(encoding="utf-8"))]
    assert offenders == [], "ask xsyn.training.folder.RunFolder for these paths:\n" + "\n".join(offenders)


def test_progress_and_finish_are_read_from_the_folder(tmp_path):
    folder = RunFolder(tmp_path / "run")
    assert not folder.has_progress() and not folder.is_finished() and folder.saved_step() is None
    staged(folder.state).mkdir(parents=True)  # a state being written is no progress yet
    assert not folder.has_progress()
    folder.state.mkdir()
    (folder.state / "trainer_state.json").write_text(json.dumps({"step": 7}))
    assert folder.has_progress() and folder.saved_step() == 7 and not folder.is_finished()
    folder.state.rename(folder.state.with_name("state.old"))  # a kill inside the swap: the previous state counts
    assert folder.has_progress() and folder.saved_step() == 7
    folder.train_results.write_text("{}")
    assert folder.is_finished()


def test_checkpoints_are_listed_by_step_and_clear_leaves_foreign_files(tmp_path):
    folder = RunFolder(tmp_path)
    for step in (10, 2, 100):
        folder.checkpoint(step).mkdir()
    (tmp_path / "checkpoint-x").mkdir()  # not a step: not a checkpoint
    assert [p.name for p in folder.checkpoints()] == ["checkpoint-2", "checkpoint-10", "checkpoint-100"]
    folder.config.write_text("{}")
    folder.eval_dir("test").mkdir()
    (tmp_path / "notes.txt").write_text("mine")
    folder.clear()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-x", "notes.txt"]


def test_a_fresh_run_claims_an_empty_folder_and_is_told_what_any_other_holds(tmp_path):
    """One set of rules for finetune and pretrain-gat (`RunFolder.claim`)."""
    folder = RunFolder(tmp_path / "run")
    folder.claim(resume=False, overwrite=False, continue_with="--resume")  # not made yet: nothing there
    folder.path.mkdir()
    (folder.path / ".writer.lock").write_text("")  # a folder that holds only the writer lock is empty
    folder.claim(resume=False, overwrite=False, continue_with="--resume")
    (folder.path / "notes.txt").write_text("mine")
    ways_on = "continue it with --resume R, start afresh with --overwrite-output-dir, or choose another --output-dir"
    with pytest.raises(RunFolderTaken, match=rf"already holds 1 entries \(notes.txt\): {ways_on}"):
        folder.claim(resume=False, overwrite=False, continue_with="--resume R")
    folder.state.mkdir()
    with pytest.raises(RunFolderTaken, match=r"already holds a run that saved progress \(state/ or train_results"):
        folder.claim(resume=False, overwrite=False, continue_with="--resume R")
    for name in ("gat_config.json", "gat.safetensors"):  # the gat variant's (`pretrained_files`)
        (folder.path / name).write_text("{}")
    with pytest.raises(RunFolderTaken, match=r"already holds a pre-trained syntax module \(gat_config.json, "
                                             r"gat.safetensors\)"):
        folder.claim(resume=False, overwrite=False, continue_with="--resume R")
    folder.claim(resume=True, overwrite=False, continue_with="--resume R")  # resuming takes the folder as it is
    assert (folder.path / "gat.safetensors").is_file() and folder.state.is_dir()
    folder.claim(resume=False, overwrite=True, continue_with="--resume R")  # the run files go, the others stay
    assert folder.entries() == ["notes.txt"]


def test_the_step_log_is_read_in_order_without_a_line_cut_short(tmp_path):
    log = tmp_path / "train_log.jsonl"
    log.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.5}\n{"step": 3, "lo')  # killed mid-line
    assert read_step_log(log) == [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.5}]


@pytest.mark.parametrize("split", ["test", "validation"])
def test_eval_results_are_found_per_split_oldest_first(tmp_path, split):
    import os

    folder = RunFolder(tmp_path)
    for k, name in enumerate((split, "other")):
        folder.eval_dir(name).mkdir()
        (folder.eval_dir(name) / "results.json").write_text("{}")
        os.utime(folder.eval_dir(name) / "results.json", (1000 + k, 1000 + k))
    assert [p.parent.name for p in folder.eval_results()] == [f"eval-{split}", "eval-other"]


def test_a_second_writer_of_a_run_folder_is_refused_until_the_first_is_gone(tmp_path):
    """Two finetunes (or two --resume) into one folder would mix their files: the second is refused at once,
    naming the first; the OS drops the lock when the first dies (kill -9 included), so it is never stale."""
    import subprocess
    import sys

    from click.testing import CliRunner

    from xsyn.cli import main
    from xsyn.data.synth import write_vocab
    from xsyn.training.folder import RunFolder, RunFolderBusy

    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from xsyn.training.folder import RunFolder\n"
        f"with RunFolder({str(tmp_path / 'run')!r}).writing():\n"
        "    print('held', flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunFolderBusy, match=f"is being written by pid {holder.pid} on"):
            with RunFolder(tmp_path / "run").writing():
                pass
        vocab = write_vocab(tmp_path / "vocab.txt")
        result = CliRunner().invoke(main, ["finetune", "--task", "synth", "--variant", "none", "--model", "tiny",
                                           "--tokenizer", str(vocab), "--output-dir", str(tmp_path / "run"),
                                           "--max-steps", "1", "--parser", "chain"])  # (Stanza has no models here)
        assert result.exit_code == 1 and f"is being written by pid {holder.pid}" in result.output
        assert "Traceback" not in result.output
    finally:
        holder.kill()
        holder.wait()
    with RunFolder(tmp_path / "run").writing():  # the killed holder's lock is gone with it
        assert RunFolder(tmp_path / "run").entries() == []


def test_only_the_main_rank_takes_the_writer_lock(tmp_path, monkeypatch):
    """Under a distributed launch the other ranks write nothing: they hold no lock, so they never refuse
    their own main process, while a second main process is refused as before."""
    from xsyn.training.folder import RunFolder, RunFolderBusy

    with RunFolder(tmp_path / "run").writing():
        monkeypatch.setenv("RANK", "1")
        with RunFolder(tmp_path / "run").writing():
            pass
        monkeypatch.setenv("RANK", "0")
        with pytest.raises(RunFolderBusy, match=f"is being written by pid {os.getpid()}"):
            with RunFolder(tmp_path / "run").writing():
                pass
