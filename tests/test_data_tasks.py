"""The task cards of the new kinds, end to end: a capped fine-tune of the tiny model on each card's data
(real UD treebanks for udpos; small files of our own in each benchmark's published format for the
others) trains, evaluates, and scores with the card's metric."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.data.cards import load_card

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def vocab_of(folder: Path, out: Path) -> Path:
    """A wordpiece vocabulary of every whitespace-separated word in the files under `folder` (a small
    tiny model whose pieces are the data's words)."""
    words: set[str] = set()
    for path in folder.rglob("*"):
        if path.is_file():
            words |= set(path.read_text(encoding="utf-8").replace("\t", " ").split())
    out.write_text("\n".join([*SPECIALS, *sorted(words)]) + "\n", encoding="utf-8")
    return out


def first_sentences(source: Path, target: Path, n: int) -> int:
    """The first `n` sentence blocks of a CoNLL-U file, copied unchanged; returns their word count."""
    blocks = source.read_text(encoding="utf-8").split("\n\n")[:n]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    return sum(1 for block in blocks for line in block.splitlines()
               if line and not line.startswith("#") and line.split("\t")[0].isdigit())


def finetune(task: str, data_dir: Path, tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / "run"
    res = CliRunner().invoke(main, [
        "finetune", "--task", task, "--variant", "none", "--model", "tiny", "--tokenizer",
        str(vocab_of(data_dir, tmp_path / "vocab.txt")), "--data-dir", str(data_dir), "--parser", "chain",
        "--quiet", "--max-steps", "3", "--batch-size", "4", "--max-length", "64", "--cache-dir",
        str(tmp_path / "cache"), "--output-dir", str(out), *extra])
    assert res.exit_code == 0, res.output
    return out


def evaluate(out: Path, data_dir: Path, split: str, langs: str) -> dict:
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(out), "--split", split, "--langs", langs,
                                    "--data-dir", str(data_dir), "--quiet"])
    assert res.exit_code == 0, res.output
    return json.loads((out / f"eval-{split}" / "results.json").read_text())


def test_udpos_fine_tunes_on_english_ewt_and_scores_words_zero_shot_on_other_treebanks(shared_data, tmp_path):
    card = load_card("udpos")
    ud = shared_data / "ud"
    data = tmp_path / "ud"
    words = {}
    for lang, split, n in (("en", "train", 24), ("en", "validation", 8), ("de", "test", 6), ("ja", "test", 6)):
        name = card.local[0].resolve(lang, split)[0]
        if not (ud / name).is_file():
            pytest.skip(f"{ud / name} is not in the shared data")
        words[lang, split] = first_sentences(ud / name, data / name, n)
    out = finetune("udpos", data, tmp_path, "--train-lang", "en")
    dev = json.loads((out / "validation_results.json").read_text())
    assert dev["metric"] == "word_accuracy" and 0 <= dev["primary"] <= 100
    results = evaluate(out, data, "test", "de,ja")
    assert results["n_examples"] == {"de": 6, "ja": 6}
    for lang in ("de", "ja"):
        predictions = (out / "eval-test" / "predictions" / "udpos" / f"test-{lang}.tsv").read_text().split("\n\n")
        tags = [t for sentence in predictions for t in sentence.split()]
        assert len(tags) == words[lang, "test"]  # one tag per syntactic word, none dropped
        assert set(tags) <= set(card.tags)
