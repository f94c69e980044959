"""A validation split held out of the training data, for benchmarks that ship none (CGED, MSRA NER)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.data.cards import CardError, load_card, parse_card
from xsyn.data.example import Example
from xsyn.data.holdout import DevHoldout, HoldoutError


def examples(n: int) -> list[Example]:
    return [Example(id=f"s{i}", segments=(), tags=["O"]) for i in range(n)]


def test_a_seeded_share_is_held_out_disjoint_in_file_order_and_recorded():
    data = examples(50)
    train, dev = DevHoldout(0.1, seed=7).split(data)
    assert len(dev) == 5 and len(train) == 45
    assert {e.id for e in train}.isdisjoint(e.id for e in dev)
    assert [int(e.id[1:]) for e in dev] == sorted(int(e.id[1:]) for e in dev)  # file order kept
    again = DevHoldout(0.1, seed=7)
    assert again.split(data)[1] == dev  # the seed fixes the draw
    assert DevHoldout(0.1, seed=8).split(data)[1] != dev
    record = again.as_dict()
    assert record["ids"] == [e.id for e in dev] and record["of"] == 50 and record["examples"] == 5


def test_a_recorded_hold_out_is_reused_not_drawn_again():
    first = DevHoldout(0.2, seed=1)
    first.split(examples(30))
    recorded = DevHoldout.recorded(json.loads(json.dumps(first.as_dict())), 0.2, 1)
    assert recorded.split(examples(30))[1] == first.split(examples(30))[1]
    with pytest.raises(HoldoutError, match="does not match the training data now read"):
        recorded.split(examples(29))
    with pytest.raises(HoldoutError, match="other settings than this run's"):
        DevHoldout.recorded(first.as_dict(), 0.3, 1)


def test_at_least_one_example_on_each_side():
    train, dev = DevHoldout(0.01, seed=0).split(examples(3))
    assert len(dev) == 1 and len(train) == 2
    train, dev = DevHoldout(0.99, seed=0).split(examples(3))
    assert len(dev) == 2 and len(train) == 1
    with pytest.raises(HoldoutError, match="too few"):
        DevHoldout(0.5, seed=0).split(examples(1))


def test_cards_without_a_dev_set_state_the_share_they_hold_out():
    assert load_card("cged").dev_fraction == 0.1 and load_card("msra_ner").dev_fraction == 0.1
    assert load_card("chnsenticorp").dev_fraction is None  # its release ships dev.tsv
    card = {"name": "t", "version": 1, "kind": "single-classification", "languages": ["en"],
            "splits": ["train", "test"], "labels": ["a", "b"], "metric": "accuracy",
            "local": [{"layout": "x", "format": "conll", "path": "{split}.txt", "splits": {"train": "train"}}]}
    with pytest.raises(CardError, match="needs dev_fraction"):
        parse_card(card, "t.toml")
    with pytest.raises(CardError, match="t.toml: dev_fraction: is for benchmarks without a validation split"):
        parse_card({**card, "splits": ["train", "validation"], "dev_fraction": 0.1}, "t.toml")


@pytest.fixture(scope="module")
def msra_slice(shared_data, tmp_path_factory) -> tuple[Path, Path]:
    """The first 40 sentences of the shared MSRA test file placed as a training file, and a vocabulary."""
    lines = (shared_data / "msra_ner" / "msra_test_bio.txt").read_text(encoding="utf-8").splitlines()
    kept, sentences = [], 0
    for line in lines:
        kept.append(line)
        sentences += not line.strip()
        if sentences == 40:
            break
    folder = tmp_path_factory.mktemp("msra")
    (folder / "msra_train_bio.txt").write_text("\n".join(kept) + "\n", encoding="utf-8")
    chars = sorted({line.split("\t")[0] for line in kept if line.strip()})
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars]) + "\n", encoding="utf-8")
    return folder, vocab


def test_msra_trains_on_a_placed_slice_and_resume_reuses_the_recorded_hold_out(msra_slice, tmp_path):
    data, vocab = msra_slice
    out = tmp_path / "run"
    args = ["finetune", "--task", "msra_ner", "--variant", "sep", "--model", "tiny", "--tokenizer", str(vocab),
            "--train-lang", "zh", "--data-dir", str(data), "--parser", "chain", "--quiet", "--batch-size", "8",
            "--max-length", "64", "--dev-fraction", "0.25", "--cache-dir", str(tmp_path / "cache"),
            "--output-dir", str(out), "--eval-every", "2"]
    first = CliRunner().invoke(main, [*args, "--max-steps", "2"])
    assert first.exit_code == 0, first.output
    report = json.loads((out / "data_report.json").read_text())
    held = report["validation"]["load"]["holdout"]
    assert held["fraction"] == 0.25 and held["seed"] == 0 and held["of"] == 40 and held["examples"] == 10
    assert report["validation"]["load"]["examples"] == 10 and report["train"]["load"]["examples"] == 30
    assert report["train"]["load"]["holdout"]["ids"] == held["ids"]
    # a resumed run reads the ids it recorded (here, a hand-changed record shows it does not draw again)
    changed = held["ids"][1:] + [next(i for i in (f"#{n}" for n in range(40)) if i not in held["ids"])]
    for split in ("train", "validation"):
        report[split]["load"]["holdout"]["ids"] = changed
    (out / "data_report.json").write_text(json.dumps(report))
    resumed = CliRunner().invoke(main, [*args, "--max-steps", "4", "--resume"])
    assert resumed.exit_code == 0, resumed.output
    again = json.loads((out / "data_report.json").read_text())
    assert again["validation"]["load"]["holdout"]["ids"] == changed


def test_dev_fraction_is_refused_for_a_task_with_a_dev_set(tmp_path):
    res = CliRunner().invoke(main, ["finetune", "--task", "chnsenticorp", "--model", "tiny", "--train-lang", "zh",
                                    "--dev-fraction", "0.1", "--output-dir", str(tmp_path / "x")])
    assert res.exit_code != 0 and "ships a validation split" in res.output


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(("task", "fixture", "lang"), [("mtop", "mtop", "en"), ("matis", "matis", "en")])
def test_a_fixture_trained_intent_slot_model_evaluates_every_split_its_card_declares(task, fixture, lang, tmp_path):
    """MTOP ships train/eval/test; mATIS++ (LDC2021T04) train/test only, so its validation is held out."""
    words = set()
    for path in (FIXTURES / fixture).rglob("*"):
        if path.is_file():
            words |= set(path.read_text(encoding="utf-8").replace("\t", " ").split())
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(words)]) + "\n")
    out = tmp_path / "run"
    trained = CliRunner().invoke(main, [
        "finetune", "--task", task, "--variant", "none", "--model", "tiny", "--tokenizer", str(vocab),
        "--train-lang", lang, "--data-dir", str(FIXTURES / fixture), "--parser", "chain", "--quiet",
        "--max-steps", "2", "--batch-size", "2", "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(out)])
    assert trained.exit_code == 0, trained.output
    card = load_card(task)
    for split in ("validation", "test"):
        assert split in card.splits or (split == "validation" and card.dev_fraction)
        res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(out), "--split", split, "--langs", lang,
                                        "--data-dir", str(FIXTURES / fixture), "--quiet"])
        assert res.exit_code == 0, res.output
        results = json.loads((out / f"eval-{split}" / "results.json").read_text())
        expected = (json.loads((out / "data_report.json").read_text())["validation"]["load"]["examples"]
                    if split == "validation" else 4 if task == "mtop" else 2)
        assert results["split"] == split and results["n_examples"] == {lang: expected}
    default = CliRunner().invoke(main, ["evaluate", "--model-dir", str(out), "--langs", lang,
                                        "--data-dir", str(FIXTURES / fixture), "--quiet", "--output-dir",
                                        str(tmp_path / "default")])
    assert default.exit_code == 0 and json.loads((tmp_path / "default" / "results.json").read_text())["split"] == "test"


def test_evaluate_defaults_to_validation_where_the_test_split_has_no_labels():
    from xsyn.run.evaluation import default_split

    assert default_split(load_card("chnsenticorp")) == "validation"
    assert default_split(load_card("cged")) == default_split(load_card("pawsx")) == "test"
