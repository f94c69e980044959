"""What a command prints as a user runs it (the installed `xsyn`, in a subprocess): a command's --quiet hides notes
(the offline note) as well as progress bars, `xsyn -q` shows errors only, and `--model tiny` offline without
--tokenizer names the local vocabularies that serve."""

from __future__ import annotations

import subprocess

import pytest
from console import CONSOLE_TIMEOUT_S, console_env, xsyn_script

NOTE = "no network: 127.0.0.1:9 cannot be reached, so xsyn works offline"
TOKENIZER_ERROR = "cannot load the tokenizer 'missing-vocab.txt'"


def _unreachable_hub(*args: str, cwd) -> subprocess.CompletedProcess:
    """`xsyn ARGS` where the hub cannot be reached (a closed local port) and no offline switch is set."""
    env = {key: value for key, value in console_env(HF_ENDPOINT="http://127.0.0.1:9").items()
           if key not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    return subprocess.run([str(xsyn_script()), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=CONSOLE_TIMEOUT_S)


FINETUNE = ("finetune", "--task", "synth", "--model", "tiny", "--tokenizer", "missing-vocab.txt", "--max-steps", "1",
            "--output-dir", "run")


@pytest.mark.parametrize(("before", "after", "noted"), [
    ((), (), True),  # the note by default
    ((), ("--quiet",), False),  # the command's --quiet: no notes either
    (("-q",), (), False),  # errors only
    ((), ("-q",), False),  # xsyn's -q after the command's name
])
def test_quiet_hides_the_offline_note_and_the_error_still_shows(tmp_path, before, after, noted):
    done = _unreachable_hub(*before, *FINETUNE, *after, cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert (NOTE in done.stderr) is noted, done.stderr
    assert TOKENIZER_ERROR in done.stderr


def test_tiny_offline_without_a_tokenizer_names_a_local_vocabulary_and_how_to_write_it(tmp_path):
    done = subprocess.run([str(xsyn_script()), "finetune", "--task", "synth", "--model", "tiny", "--max-steps", "1",
                           "--output-dir", "run"], cwd=tmp_path, env=console_env(HF_HOME=str(tmp_path / "hf")),
                          capture_output=True, text=True, timeout=CONSOLE_TIMEOUT_S)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    said = " ".join(done.stderr.split())
    assert "--model tiny takes bert-base-multilingual-cased's tokenizer unless --tokenizer names one" in said
    assert "xsyn-demo/vocab.txt" in said
    command = "from xsyn.data.synth import write_vocab; write_vocab('vocab.txt')"
    assert command in said
    # the advice works: the line it gives writes a vocabulary the same command then runs with
    subprocess.run([str(xsyn_script().parent / "python"), "-c", command], cwd=tmp_path, check=True, timeout=120)
    assert len((tmp_path / "vocab.txt").read_text(encoding="utf-8").split()) > 10
