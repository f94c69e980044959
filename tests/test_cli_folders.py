"""The installed commands name the folders they write, and a run folder is read from any folder: its settings
that name paths are stored absolute, and a run saved with relative ones says which and relative to what."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import cpu_process_env
from test_training_driver import QUICK

from xsyn.data.synth import write_vocab

XSYN = Path(sys.executable).with_name("xsyn")  # the installed console script


def xsyn(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(XSYN), *args], cwd=cwd, env=cpu_process_env(), capture_output=True, text=True,
                          timeout=600)


def test_finetune_and_evaluate_name_their_folders_and_the_run_is_read_from_elsewhere(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    write_vocab(project / "vocab.txt")
    trained = xsyn(["finetune", *QUICK, "--tokenizer", "vocab.txt", "--cache-dir", "cache", "--max-steps", "2",
                    "--output-dir", "runs/gat"], project)
    assert trained.returncode == 0, trained.stderr
    run = project / "runs" / "gat"
    assert "trained: 2 steps in " in trained.stdout and "{" not in trained.stdout  # not train_results.json's lines
    assert f"run folder: {run} (train_results.json: the whole summary; best/: the best checkpoint)" in trained.stdout
    config = json.loads((run / "config.json").read_text())
    assert (config["cache_dir"], config["tokenizer"]) == (str(project / "cache"), str(project / "vocab.txt"))

    evaluated = xsyn(["evaluate", "--model-dir", "runs/gat", "--langs", "svo,sov", "--generalized",
                      "--max-eval-examples", "8", "--quiet"], project)
    assert evaluated.returncode == 0, evaluated.stderr
    assert f"language pairs: 4 (the matrix: {run / 'eval-test' / 'pairs.csv'})" in evaluated.stdout
    assert f"results: {run / 'eval-test'} (results.json" in evaluated.stdout

    # a run saved before paths were stored absolute, with a parser the user never names, read from elsewhere
    config.update(parser="udpipe:models", output_dir="runs/gat")
    (run / "config.json").write_text(json.dumps(config))
    (tmp_path / "text.txt").write_text("a b c\n")
    predicted = xsyn(["predict", "--model-dir", str(run), "--input", "text.txt", "--tokens", "whitespace",
                      "--quiet"], tmp_path)
    assert predicted.returncode != 0 and "Traceback" not in predicted.stderr
    assert (f"{run / 'config.json'}: parser 'udpipe:models' is relative to the folder it was trained from, {project}, "
            f"and there is no models here; run from that folder, or pass --parser udpipe:{project / 'models'}"
            ) in predicted.stderr
