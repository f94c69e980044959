"""`xsyn predict` and `xsyn.run.predict.predict` on real PAWS-X, PAN-X and XQuAD text: the predictions
equal evaluation's (same features, windows and decoding), offsets point into the input text, and
bad input is named by its line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.data.cards import load_card
from xsyn.data.loading import load_examples
from xsyn.run.predict import PredictInputError, predict
from xsyn.syntax.parsing.languages import LanguageParsers

N = 12  # examples per task: enough for both labels, entities and windowed contexts


def save_checkpoint(path: Path, task: str, head: str, tokenizer, labels=(), tags=(), variant: str = "gat",
                    train_on: tuple[Path, str, Path] | None = None) -> Path:
    """What `xsyn finetune` leaves in best/: a tiny model (seeded; trained for 3 steps on the first 16
    examples of `train_on` = (data folder, split, cache)), its tokenizer and xsyn_task.json."""
    import torch

    from xsyn.models import build_model, label_settings

    torch.manual_seed(0)
    model = build_model("tiny", variant, head, tokenizer=tokenizer, **label_settings(head, labels, tags))
    if train_on is not None:
        train_steps(model, task, tokenizer, labels, tags, *train_on)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    (path / "xsyn_task.json").write_text(json.dumps({"task": task, "labels": list(labels), "tags": list(tags),
                                                     "train_lang": "en", "step": 3}))
    return path


def train_steps(model, task: str, tokenizer, labels, tags, data_dir: Path, split: str, cache: Path) -> None:
    import torch

    from xsyn.data.features import collate_features
    from xsyn.run.inference import model_inputs
    from xsyn.run.settings import RunConfig
    from xsyn.run.task_data import LabelNames, load_task_data

    card = load_card(task)
    config = RunConfig(task=task, data_dir=str(data_dir), parser="chain", cache_dir=str(cache))
    data, _ = load_task_data(card, config, tokenizer, split, {s: "en" for s in card.segments},
                             names=LabelNames(list(labels), list(tags)), limit=16)
    rows = data.rows()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    for step in range(3):
        batch = collate_features(rows[step * 4:step * 4 + 4], tokenizer.pad_token_id)
        model(**model_inputs(batch, with_labels=True)).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()


def evaluation_predictions(checkpoint: Path, task: str, data_dir: Path, cache: Path, split: str = "validation"
                           ) -> tuple[list, dict]:
    """What `xsyn evaluate` predicts for the first N examples of a split (its own loading and decoding),
    and the model outputs per feature."""
    from accelerate import Accelerator

    from xsyn.data.decode import decode
    from xsyn.models import load_model, load_tokenizer
    from xsyn.run.evaluation import read_task_info
    from xsyn.run.inference import model_outputs
    from xsyn.run.settings import RunConfig
    from xsyn.run.task_data import LabelNames, load_task_data

    card = load_card(task)
    info = read_task_info(checkpoint)
    config = RunConfig(task=task, data_dir=str(data_dir), parser="chain", cache_dir=str(cache))
    tokenizer = load_tokenizer(checkpoint)
    vocab = LabelNames(info["labels"], info["tags"])
    data, _ = load_task_data(card, config, tokenizer, split, {s: "en" for s in card.segments}, names=vocab,
                             limit=N)
    accelerator = Accelerator()  # the process's device, as `xsyn predict` takes it
    outputs = model_outputs(accelerator.prepare(load_model(checkpoint)), data.rows(), accelerator, 4,
                            tokenizer.pad_token_id)
    predictions, _ = decode(card.task_kind, data.examples, data.features, outputs, metric=card.metric,
                            labels=vocab.labels, tags=vocab.tags)
    return predictions, outputs


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def first_examples(shared_data):
    def load(task: str, split: str = "validation"):
        examples, _ = load_examples(task, "en", split, shared_data / task)
        return examples[:N]
    return load


# -- classification: PAWS-X ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pawsx_model(mbert_tokenizer, shared_data, cache, tmp_path_factory) -> Path:
    return save_checkpoint(tmp_path_factory.mktemp("pawsx") / "best", "pawsx", "sequence", mbert_tokenizer,
                           labels=["0", "1"], train_on=(shared_data / "pawsx", "validation", cache))


def test_pair_classification_gives_evaluations_labels_with_probabilities(pawsx_model, first_examples, shared_data,
                                                                          cache):
    examples = first_examples("pawsx")
    rows = [{"id": f"p{i}", "sentence1": e.segments[0].text, "sentence2": e.segments[1].text}
            for i, e in enumerate(examples)]
    report: dict = {}
    got = predict(pawsx_model, rows, parser="chain", overrides={"cache_dir": str(cache)}, report=report)
    expected, outputs = evaluation_predictions(pawsx_model, "pawsx", shared_data / "pawsx", cache)
    names = {"0": "not paraphrase", "1": "paraphrase"}  # the card's label_names replace the raw labels
    assert [g["label"] for g in got] == [names[label] for label in expected]
    for g, logits in zip(got, outputs["logits"]):  # one feature per pair, in order
        softmax = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        assert list(g["probabilities"]) == ["not paraphrase", "paraphrase"]
        assert np.allclose(list(g["probabilities"].values()), softmax, atol=1e-5)
        assert g["label"] == max(g["probabilities"], key=g["probabilities"].get)
    assert len({g["probabilities"]["not paraphrase"] for g in got}) > N // 2  # not one answer for all pairs
    assert [(g["line"], g["id"], g["lang"]) for g in got[:2]] == [(1, "p0", "en"), (2, "p1", "en")]
    assert report["rows"] == N and report["features"]["features"] == N


def test_lang_is_always_a_string_and_each_segments_language_an_object(pawsx_model, cache):
    rows = [{"sentence1": "A dog.", "sentence2": "A cat."},
            {"sentence1": "Ein Hund.", "sentence2": "A cat.", "sentence1_lang": "de"}]
    got = predict(pawsx_model, rows, parser="chain", overrides={"cache_dir": str(cache)})
    assert [(g["lang"], g["segment_langs"]) for g in got] == [
        ("en", {"sentence1": "en", "sentence2": "en"}), ("de-en", {"sentence1": "de", "sentence2": "en"})]


def test_the_command_reads_json_lines_and_tsv_and_writes_json_lines(pawsx_model, first_examples, cache, tmp_path):
    examples = first_examples("pawsx")[:4]
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text("".join(json.dumps({"sentence1": e.segments[0].text, "sentence2": e.segments[1].text}) + "\n"
                             for e in examples) + "\n")  # a blank line is not a row
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("sentence2\tsentence1\n" + "".join(f"{e.segments[1].text}\t{e.segments[0].text}\n"
                                                      for e in examples))
    outputs = []
    for source in (jsonl, tsv):
        out = tmp_path / f"{source.suffix[1:]}-predictions.jsonl"
        res = CliRunner().invoke(main, ["predict", "--model-dir", str(pawsx_model.parent), "--input", str(source),
                                        "--parser", "chain", "--cache-dir", str(cache), "--output", str(out)])
        assert res.exit_code == 0, res.output
        outputs.append([json.loads(line) for line in out.read_text().splitlines()])
    from_json, from_tsv = outputs
    assert [r["line"] for r in from_json] == [1, 2, 3, 4] and [r["line"] for r in from_tsv] == [2, 3, 4, 5]
    assert [r["probabilities"] for r in from_json] == [r["probabilities"] for r in from_tsv]
    assert "4 rows, 4 features" in res.output  # the summary on standard error
    # off a terminal (CliRunner's stderr, a log file, a batch job) no bar: its redraws would be \r-lines
    assert "\r" not in res.output and "batch/s" not in res.output


# -- tagging: PAN-X --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def panx_model(mbert_tokenizer, shared_data, cache, tmp_path_factory) -> Path:
    tags = load_card("panx").tags
    return save_checkpoint(tmp_path_factory.mktemp("panx") / "best", "panx", "token", mbert_tokenizer, tags=tags,
                           variant="sla", train_on=(shared_data / "panx", "train", cache))


def test_tagging_whitespace_tokens_give_evaluations_tags_and_entity_offsets(panx_model, first_examples,
                                                                            shared_data, cache):
    examples = first_examples("panx")
    texts = [" ".join(e.segments[0].tokens) for e in examples]
    got = predict(panx_model, [{"text": t} for t in texts], parser="chain", tokens="whitespace",
                  overrides={"cache_dir": str(cache)})
    expected, _ = evaluation_predictions(panx_model, "panx", shared_data / "panx", cache)
    assert [[t["tag"] for t in g["tokens"]] for g in got] == expected
    assert [[t["text"] for t in g["tokens"]] for g in got] == [e.segments[0].tokens for e in examples]
    entities = [(text, entity) for text, g in zip(texts, got) for entity in g["entities"]]
    assert entities, "the random model tags some entities"
    for text, entity in entities:
        assert text[entity["start"]:entity["end"]] == entity["text"]
        assert entity["type"] in {"PER", "ORG", "LOC"}


def test_tagging_with_the_parsers_tokens_offsets_point_into_the_text(panx_model, cache, tmp_path):
    text = "Barack Obama visited Paris, France in 2009."
    got, = predict(panx_model, [{"text": text}], parser="chain", overrides={"cache_dir": str(cache)})
    tokens = [(t["text"], t["start"], t["end"]) for t in got["tokens"]]
    assert [t for t, _, _ in tokens] == ["Barack", "Obama", "visited", "Paris", ",", "France", "in", "2009", "."]
    assert all(text[s:e] == t for t, s, e in tokens)
    tsv = tmp_path / "tokens.tsv"
    tsv.write_text("id\ttokens\ns1\t" + " ".join(t for t, _, _ in tokens) + "\n")
    from_list, from_tsv = (predict(panx_model, source, parser="chain", overrides={"cache_dir": str(cache)})[0]
                           for source in ([{"tokens": [t for t, _, _ in tokens]}], tsv))
    assert [t["tag"] for t in from_list["tokens"]] == [t["tag"] for t in got["tokens"]]
    assert from_tsv["tokens"] == from_list["tokens"] and from_tsv["id"] == "s1"


# -- extractive QA: XQuAD --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def xquad_model(mbert_tokenizer, shared_data, cache, tmp_path_factory) -> Path:
    return save_checkpoint(tmp_path_factory.mktemp("xquad") / "best", "xquad", "qa", mbert_tokenizer,
                           train_on=(shared_data / "xquad", "test", cache))


def test_qa_gives_evaluations_answers_with_offsets_and_scores_over_windows(xquad_model, first_examples,
                                                                           shared_data, cache):
    examples = first_examples("xquad", "test")
    rows = [{"question": e.segments[0].text, "context": e.segments[1].text} for e in examples]
    report: dict = {}
    got = predict(xquad_model, rows, parser="chain", overrides={"cache_dir": str(cache)}, report=report)
    expected, _ = evaluation_predictions(xquad_model, "xquad", shared_data / "xquad", cache, "test")
    assert [g["answer"] for g in got] == expected
    assert report["features"]["windowed_examples"] > 0  # contexts longer than a window were cut and joined
    for g, row in zip(got, rows):
        assert row["context"][g["start"]:g["end"]] == g["answer"] != ""
        assert isinstance(g["score"], float) and np.isfinite(g["score"])


# -- intent and slots ------------------------------------------------------------------------------


def test_intent_slot_gives_an_intent_with_probabilities_and_slot_spans(mbert_tokenizer, cache, tmp_path):
    intents, slots = ["IN:GET_WEATHER", "IN:SET_ALARM"], ["O", "B-SL:DATE", "I-SL:DATE", "B-SL:LOCATION"]
    # no MTOP or mATIS++ data here: the joint head stays as initialised (seeded)
    model = save_checkpoint(tmp_path / "best", "mtop", "intent_slot", mbert_tokenizer, labels=intents, tags=slots)
    text = "wake me up at seven tomorrow in Berlin"
    got, = predict(model, [{"text": text}], parser="chain", tokens="whitespace", overrides={"cache_dir": str(cache)})
    assert got["intent"] in intents and abs(sum(got["intent_probabilities"].values()) - 1) < 1e-5
    assert [t["text"] for t in got["tokens"]] == text.split()
    assert all(t["tag"] in slots for t in got["tokens"])
    for slot in got["slots"]:
        assert text[slot["start"]:slot["end"]] == slot["text"] and slot["type"] in {"SL:DATE", "SL:LOCATION"}


# -- bad input -------------------------------------------------------------------------------------


def test_rows_without_a_segment_or_with_an_empty_one_are_named_by_line(pawsx_model, cache, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"sentence1": "A dog.", "sentence2": "A cat."}\n'
                   '{"sentence1": "A dog."}\n'
                   '{"sentence1": "  ", "sentence2": "A cat."}\n')
    res = CliRunner().invoke(main, ["predict", "--model-dir", str(pawsx_model), "--input", str(bad), "--parser",
                                    "chain", "--cache-dir", str(cache)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert (f"{bad}: 2 of 3 rows cannot be predicted: line 2: no 'sentence2'; line 3: 'sentence1' is empty. "
            "This model's task (pawsx) needs 'sentence1' and 'sentence2'") in res.output
    not_json = tmp_path / "bad2.jsonl"
    not_json.write_text('{"sentence1": "A", "sentence2": "B"}\n{"sentence1": "A", \n')
    with pytest.raises(PredictInputError, match=r"bad2.jsonl: line 2: not JSON"):
        predict(pawsx_model, not_json, parser="chain")
    ragged = tmp_path / "bad.tsv"
    ragged.write_text("sentence1\tsentence2\nA dog.\tA cat.\nonly one column\n")
    with pytest.raises(PredictInputError, match=r"bad.tsv: line 3: 1 columns, the header has 2"):
        predict(pawsx_model, ragged, parser="chain")


def test_a_language_the_parser_lacks_is_named_with_its_first_line(pawsx_model, cache, tmp_path):
    rows = [{"sentence1": "A dog.", "sentence2": "A cat."},
            {"sentence1": "Ein Hund.", "sentence2": "Eine Katze.", "lang": "de"}]
    no_models = tmp_path / "stanza-models"
    no_models.mkdir()
    with pytest.raises(PredictInputError, match=r"input: line 1: cannot parse language 'en' with parser 'stanza'"):
        predict(pawsx_model, rows, parser="stanza",
                overrides={"cache_dir": str(cache), "parser_model_dir": str(no_models), "parser_download": "none"})


def test_a_language_first_met_on_a_later_line_is_named_there(pawsx_model, cache, monkeypatch):
    import xsyn.run.predict
    from xsyn.syntax.parsing import ParserUnavailable
    from xsyn.syntax.parsing.chain import ChainParser

    class EnglishOnly(ChainParser):
        def parse_texts(self, texts, lang, *, sent_ids=None):
            if lang != "en":
                raise ParserUnavailable(f"no model for {lang!r}")
            return super().parse_texts(texts, lang)

    monkeypatch.setattr(xsyn.run.predict, "make_parsers",  # the run's parser
                        lambda config: LanguageParsers(config.parser, {}, lambda choice: EnglishOnly()))
    rows = [{"sentence1": "A dog.", "sentence2": "A cat."}, {"sentence1": "A bird.", "sentence2": "A fish."},
            {"sentence1": "Un chien.", "sentence2": "Un chat.", "lang": "fr"}]
    with pytest.raises(PredictInputError, match=r"input: line 3: cannot parse language 'fr' .*no model for 'fr'"):
        predict(pawsx_model, rows, overrides={"cache_dir": str(cache)})


def test_a_language_the_task_does_not_have_is_refused_naming_the_tasks(pawsx_model, cache, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"sentence1": "A dog.", "sentence2": "A cat."}) + "\n")
    res = CliRunner().invoke(main, ["predict", "--model-dir", str(pawsx_model), "--input", str(source), "--lang", "xx",
                                    "--parser", "chain", "--cache-dir", str(cache), "--quiet"])
    assert res.exit_code == 1
    assert "--lang 'xx': task pawsx has no such language; its languages are de, en, es, fr, ja, ko, zh" in res.output
    rows = [{"sentence1": "A dog.", "sentence2": "A cat."}, {"sentence1": "A.", "sentence2": "B.", "lang": "qq"}]
    with pytest.raises(PredictInputError, match=r"line 2: language 'qq' is not one of the task's \(de, en,"):
        predict(pawsx_model, rows, parser="chain", overrides={"cache_dir": str(cache)})


def test_a_row_longer_than_max_length_is_predicted_and_its_cut_is_counted(pawsx_model, cache, caplog):
    long = " ".join(["word"] * 400)  # 2,000 characters, over 128 word pieces (a 100,000-character row: README)
    rows = [{"sentence1": long, "sentence2": "A cat."}, {"sentence1": "A dog.", "sentence2": "A cat."}]
    report: dict = {}
    with caplog.at_level("WARNING", logger="xsyn.run.predict"):
        got = predict(pawsx_model, rows, parser="chain", overrides={"cache_dir": str(cache)}, report=report)
    assert len(got) == 2 and report["features"]["truncated_inputs"] == 1
    assert "input: 1 rows are longer than max_length (128 word pieces) and were cut" in caplog.text


def test_an_unwritable_output_names_the_option_that_exists(pawsx_model, cache, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"sentence1": "A dog.", "sentence2": "A cat."}) + "\n")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = CliRunner().invoke(main, ["predict", "--model-dir", str(pawsx_model), "--input", str(source), "--output",
                                    str(blocker / "out.jsonl"), "--parser", "chain", "--cache-dir", str(cache),
                                    "--quiet"])
    assert res.exit_code == 1 and f"{blocker} is a file, not a folder" in res.output
    assert "--output)" in res.output or "another --output" in res.output
    assert "--output-dir" not in res.output


def test_a_non_utf8_input_is_named_by_line_and_byte_and_a_bom_is_not_text(pawsx_model, cache, tmp_path):
    from xsyn.run.predict import read_input_file

    bad = tmp_path / "latin1.tsv"
    bad.write_bytes(b"sentence1\tsentence2\n" + "Un caf\xe9.\tA cat.\n".encode("latin-1"))
    with pytest.raises(PredictInputError, match=r"latin1.tsv: line 2, byte 7: not UTF-8 text \(byte 0xe9\)"):
        read_input_file(bad)
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps({"sentence1": "A dog.", "sentence2": "A cat."}).encode() + b"\r\n")
    assert [row.fields for row in read_input_file(bom)] == [{"sentence1": "A dog.", "sentence2": "A cat."}]


def test_a_multiple_choice_row_with_more_options_than_the_models_answer_labels_is_named_by_line():
    """A 5th option has no letter among the model's A-D: it was scored, its probability dropped from the output
    and, when it won, an IndexError; fewer options than labels are fine (lettered A, B, C)."""
    from xsyn.run.predict import InputRow, rows_to_examples

    card, base = load_card("race"), {"article": "Tom has a dog.", "question": "What?"}
    rows = [InputRow(1, {**base, "options": ["a", "b", "c"]}), InputRow(2, {**base, "options": list("abcde")})]
    with pytest.raises(PredictInputError, match=r"line 2: 5 options, but the model's answer labels name 4 "
                                                r"\(A, B, C, D\): give at most 4") as err:
        rows_to_examples(card, rows, "en", "in.jsonl", ("A", "B", "C", "D"))
    assert "line 1" not in str(err.value)
    three = rows_to_examples(card, rows[:1], "en", "in.jsonl", ("A", "B", "C", "D"))
    assert [s.text for s in three[0].segments[2:]] == ["a", "b", "c"]
    from_tsv = rows_to_examples(card, [InputRow(2, {**base, "options": '["red", "blue"]'})], "en", "in.tsv", "ABCD")
    assert [s.text for s in from_tsv[0].segments[2:]] == ["red", "blue"]  # a TSV column: the list as JSON text
    with pytest.raises(PredictInputError, match=r"line 2: 'options' must be a non-empty list of non-empty texts \(in "
                                                r"TSV, JSON text: \[\"red\", \"blue\"\]\)"):
        rows_to_examples(card, [InputRow(2, {**base, "options": "red, blue"})], "en", "in.tsv", "ABCD")


def test_a_rows_unknown_language_is_said_once_not_once_per_segment():
    from xsyn.run.predict import InputRow, rows_to_examples

    row = InputRow(3, {"question": "Who?", "context": "Ann.", "lang": "xx"})
    with pytest.raises(PredictInputError) as err:
        rows_to_examples(load_card("squad_v2"), [row], "en", "in.jsonl")
    assert str(err.value).count("language 'xx' is not one of the task's (en)") == 1


def test_predict_asked_for_no_progress_shows_no_featurisation_bar(pawsx_model, cache, capfd, monkeypatch):
    """`predict(..., progress=False)` in a notebook printed datasets' 'features pawsx: 100%|...' bar."""
    import importlib

    import datasets

    bars = importlib.import_module("datasets.utils.tqdm")  # the module (`datasets.utils.tqdm` is also a class)
    # bars on for this test whatever ran before it: an in-process command off a terminal sets
    # HF_DATASETS_DISABLE_PROGRESS_BARS, which datasets reads once, when imported (monkeypatch restores both)
    monkeypatch.setattr(bars, "HF_DATASETS_DISABLE_PROGRESS_BARS", None)  # as if unset (False: "0", which wins)
    monkeypatch.setattr(bars, "_hf_datasets_progress_bars_disabled", False)
    capfd.readouterr()
    predict(pawsx_model, [{"sentence1": "A new text.", "sentence2": "Another one."}], lang="en",
            parser="chain", overrides={"cache_dir": str(cache)})
    assert "features pawsx" not in capfd.readouterr().err
    assert datasets.is_progress_bar_enabled()  # as it was, for the rest of the session
