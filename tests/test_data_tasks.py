"""The task cards of the new kinds, end to end: a capped fine-tune of the tiny model on each card's data
(real UD treebanks for udpos; small files of our own in each benchmark's published format for the
others) trains, evaluates, and scores with the card's metric."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
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
    from xsyn.run.predict import predict

    predicted = predict(out / "best", [{"text": "Der Hund schläft ."}], lang="de", tokens="whitespace",
                        overrides={"cache_dir": str(tmp_path / "cache")})
    assert [t["text"] for t in predicted[0]["tokens"]] == ["Der", "Hund", "schläft", "."]
    assert {t["tag"] for t in predicted[0]["tokens"]} <= set(card.tags) and "entities" not in predicted[0]


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("task, keys", [
    ("stsb", {"pearson", "spearman"}),  # regression on a pair
    ("fce", {"precision", "recall", "f0.5"}),  # token-level binary detection
    ("squad_v2", {"exact", "f1", "HasAns_f1", "NoAns_f1", "best_exact", "best_f1", "best_f1_thresh"}),
    ("cola", {"mcc"}),
    ("mrpc", {"accuracy", "f1"}),
    ("race", {"accuracy", "accuracy_middle", "accuracy_high"}),  # multiple choice, RACE-M and RACE-H apart
])
def test_a_capped_run_of_each_new_task_trains_on_its_fixtures_evaluates_and_predicts(task, keys, tmp_path):
    from xsyn.data.loading import load_examples
    from xsyn.run.predict import predict

    data = FIXTURES / task
    out = finetune(task, data, tmp_path, "--train-lang", "en")
    card = load_card(task)
    results = evaluate(out, data, "validation", "en")
    dev, _ = load_examples(card, "en", "validation", data_dir=data)
    assert results["n_examples"] == {"en": len(dev)} and keys <= set(results["scores"]["en"])
    rows = [{s: " ".join(e.segments[k].tokens or []) if card.task_kind.tagged else e.segments[k].text
             for k, s in enumerate(("text",) if card.task_kind.tagged else card.segments)} for e in dev]
    if card.task_kind.choices:
        for row, e in zip(rows, dev):
            row["options"] = [s.text for s in e.segments[2:]]
    predicted = predict(out / "best", rows, overrides={"cache_dir": str(tmp_path / "cache")}, tokens="whitespace")
    assert len(predicted) == len(dev)
    first = predicted[0]
    if task == "stsb":
        assert isinstance(first["score"], float)
    elif task == "fce":
        assert [t["tag"] for t in first["tokens"]] and {t["tag"] for p in predicted for t in p["tokens"]} <= {"c", "i"}
        assert [t["text"] for t in first["tokens"]] == dev[0].segments[0].tokens
    elif task == "race":
        assert first["answer"] in card.labels and first["option"] == rows[0]["options"][
            card.labels.index(first["answer"])]
        assert sum(first["probabilities"].values()) == pytest.approx(1.0, abs=1e-4)
    elif task == "squad_v2":
        assert {p["no_answer"] for p in predicted} <= {True, False}
        assert all((p["answer"] == "") == p["no_answer"] for p in predicted)
    else:
        assert first["label"] in card.labels


def test_a_multiple_choice_input_cuts_the_passage_only_and_keeps_every_option_whole(tmp_path):
    from xsyn.data.features import option_sequences, prepare_features
    from xsyn.data.loading import load_examples
    from xsyn.models.tokenizers import load_tokenizer
    from xsyn.syntax.parse import parse_segments
    from xsyn.syntax.parsing import build_parser

    card = load_card("race")
    examples, _ = load_examples(card, "en", "train", data_dir=FIXTURES / "race")
    parse_segments([s for e in examples for s in e.segments], build_parser("chain"))
    tokenizer = load_tokenizer(vocab_of(FIXTURES / "race", tmp_path / "vocab.txt"))
    features, report = prepare_features(card, examples, tokenizer, 24, labels=card.labels)
    assert len(features) == len(examples) and report.truncated_inputs == len(examples)  # every passage is longer
    for example, feature in zip(examples, features):
        options = option_sequences([{k: np.asarray(v) for k, v in feature.items()}])
        assert len(options) == 4 and feature["labels"] == card.labels.index(example.label)
        question = tokenizer(example.segments[1].text, add_special_tokens=False)["input_ids"]
        for option, segment in zip(options, example.segments[2:]):
            ids = option["input_ids"].tolist()
            answer = tokenizer(segment.text, add_special_tokens=False)["input_ids"]
            assert len(ids) == 24 and ids[-1] == tokenizer.sep_token_id
            assert ids[-len(answer) - 1:-1] == answer
            assert ids[-len(answer) - len(question) - 2:-len(answer) - 2] == question
