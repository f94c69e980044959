"""Damaged checkpoint files (cut short by a kill or a full disk) given to `xsyn finetune --model` and
`xsyn evaluate --model-dir`: an error that names the file and what to do, never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.data.synth import write_vocab


@pytest.fixture(scope="module")
def vocab(tmp_path_factory) -> Path:
    return write_vocab(tmp_path_factory.mktemp("synth") / "vocab.txt")


@pytest.fixture(scope="module")
def checkpoint(vocab, tmp_path_factory) -> Path:
    """What `xsyn finetune` saves as best/: a tiny synth classifier, its tokenizer and xsyn_task.json."""
    from xsyn.models.factory import build_model
    from xsyn.models.tokenizers import load_tokenizer

    folder = tmp_path_factory.mktemp("run") / "best"
    tokenizer = load_tokenizer(str(vocab))
    build_model("tiny", "none", "sequence", tokenizer=tokenizer, num_labels=2).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "xsyn_task.json").write_text(json.dumps({"task": "synth", "labels": ["0", "1"], "tags": []}))
    return folder


@pytest.fixture(scope="module")
def plain_bert(vocab, tmp_path_factory) -> Path:
    """A plain BERT checkpoint folder, as downloaded or saved by transformers."""
    from transformers import BertModel

    from xsyn.models.presets import tiny_config
    from xsyn.models.tokenizers import load_tokenizer

    folder = tmp_path_factory.mktemp("bert")
    tokenizer = load_tokenizer(str(vocab))
    BertModel(tiny_config(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def damaged_copy(source: Path, target: Path, name: str, keep: int | None) -> Path:
    """`source` copied to `target` with the file `name` cut to `keep` bytes (None: half)."""
    shutil.copytree(source, target)
    file = target / name
    data = file.read_bytes()
    file.write_bytes(data[:len(data) // 2 if keep is None else keep])
    return file


@pytest.mark.parametrize("keep", [None, 0, 50], ids=["half", "empty", "header cut"])
def test_evaluate_names_a_cut_short_model_file(checkpoint, tmp_path, keep):
    weights = damaged_copy(checkpoint, tmp_path / "best", "model.safetensors", keep)
    # --parser chain: the default Stanza has no models here, and the preflight would name that first
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(tmp_path), "--parser", "chain", "--quiet"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.startswith(f"Error: {weights} cannot be read (Error while deserializing header: ")
    assert res.output.rstrip().endswith("the file is damaged (cut short by a kill or a full disk?); restore the "
                                        "checkpoint (fine-tune again), or use another one")


@pytest.mark.parametrize("name", ["config.json", "tokenizer.json", "tokenizer_config.json"])
def test_evaluate_names_a_cut_short_json_file_of_the_checkpoint(checkpoint, tmp_path, name):
    file = damaged_copy(checkpoint, tmp_path / "best", name, None)
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(tmp_path / "best"), "--parser", "chain",
                                    "--quiet"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.startswith(f"Error: {file} cannot be read (")
    assert "is damaged" in res.output and "use another one" in res.output


def test_finetune_names_a_cut_short_model_file_given_as_model(plain_bert, vocab, tmp_path):
    weights = damaged_copy(plain_bert, tmp_path / "bert", "model.safetensors", None)
    res = CliRunner().invoke(main, ["finetune", "--task", "synth", "--model", str(tmp_path / "bert"), "--train-lang",
                                    "svo", "--parser", "chain", "--quiet", "--max-train-examples", "16", "--set",
                                    "max_eval_examples=16", "--max-steps", "1", "--cache-dir", str(tmp_path / "cache"),
                                    "--output-dir", str(tmp_path / "run")])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.startswith(f"Error: {weights} cannot be read (Error while deserializing header: ")
    assert res.output.rstrip().endswith("(cut short by a kill or a full disk?); copy the checkpoint again, or pass "
                                        "another --model")


def test_load_model_names_a_damaged_config(checkpoint, tmp_path):
    from xsyn.models.factory import DamagedCheckpointError, load_model

    config = damaged_copy(checkpoint, tmp_path / "best", "config.json", 40)
    with pytest.raises(DamagedCheckpointError, match=f"{config} cannot be read .*: the file is damaged; restore"):
        load_model(tmp_path / "best")


def test_a_damaged_download_is_named_in_the_hub_cache_with_the_fix(plain_bert, tmp_path, monkeypatch):
    """A hub model whose download was cut short: the file in the local hub cache is named, to delete."""
    import huggingface_hub.constants

    from xsyn.models.factory import DamagedCheckpointError, build_model

    snapshot = tmp_path / "hub" / "models--someone--tiny-bert" / "snapshots" / ("0" * 40)
    weights = damaged_copy(plain_bert, snapshot, "model.safetensors", None)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(DamagedCheckpointError, match=f"{weights} cannot be read .*delete it, and the next run "
                                                     "downloads it again"):
        build_model("someone/tiny-bert", "none", "sequence", num_labels=2)
