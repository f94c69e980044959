"""Evaluating on another task of the same kind, the bootstrap ± and the warnings `xsyn evaluate` prints;
the result fingerprint (an edited task card never reuses `partial/` results of the old one)."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.data.cards import load_card, parse_card
from xsyn.metrics import get_metric
from xsyn.run.evaluation import check_transferable, result_fingerprint
from xsyn.run.settings import RunConfig
from xsyn.syntax.parsing.languages import LanguageParsers
from xsyn.utils.errors import InputError


def test_a_model_for_mlqa_may_be_scored_on_xquad_but_not_on_another_kind_or_label_set():
    check_transferable(load_card("mlqa"), load_card("xquad"))  # both extractive QA: accepted
    check_transferable(load_card("pawsx"), load_card("synth"))  # pair classification, labels 0/1 in both
    with pytest.raises(InputError, match="mlqa .extractive-qa. cannot be evaluated on pawsx .pair-classification"):
        check_transferable(load_card("mlqa"), load_card("pawsx"))
    with pytest.raises(InputError, match="its labels contradiction, entailment, neutral are not among the model's"):
        check_transferable(load_card("pawsx"), load_card("xnli"))


def test_a_model_that_predicts_no_error_anywhere_is_recognised():
    cged, fce = (get_metric(load_card(name).metric) for name in ("cged", "fce"))  # as the evaluation asks them
    assert cged.nothing_predicted([set(), frozenset(), set()]) == (
        "no error in any sentence (every sentence predicted correct)")
    assert cged.nothing_predicted([set(), {(1, 2, "R")}]) is None
    assert cged.nothing_predicted([]) is None
    assert fce.nothing_predicted([["c", "c"], ["c"]]) == "no token flagged as an error ('i') in any sentence"


def summary(**fields):
    return {"task": "chnsenticorp", "split": "test", "primary": "accuracy", "per_language": {"zh": 91.25},
            "average": 91.25, "bootstrap_sd": {"zh": 1.3}, "missing_languages": [], "output_dir": "eval", **fields}


def evaluate(monkeypatch, tmp_path, summary: dict, *options: str):
    """`xsyn evaluate` as users run it, printing what an evaluation that returned `summary` says."""
    monkeypatch.setattr("xsyn.run.evaluation.evaluate_run", lambda *args, **kwargs: summary)
    result = CliRunner().invoke(main, ["evaluate", "--model-dir", str(tmp_path), "--quiet", *options])
    assert result.exit_code == 0, result.output
    return result


def test_evaluate_prints_the_metric_and_its_bootstrap_sd_and_says_why_validation(monkeypatch, tmp_path):
    out = evaluate(monkeypatch, tmp_path, summary()).stdout
    assert "zh\taccuracy 91.25 ± 1.30" in out.splitlines() and "note:" not in out
    assert ("note: scoring the validation split: chnsenticorp's test split is missing or has no labels"
            in evaluate(monkeypatch, tmp_path, summary(split="validation")).stdout)
    chosen = evaluate(monkeypatch, tmp_path, summary(split="validation"), "--split", "validation")
    assert "note:" not in chosen.stdout  # asked for: nothing to explain


def test_evaluate_warns_beside_the_scores_of_a_model_that_predicts_nothing(monkeypatch, tmp_path):
    nothing = {"zh": "no error in any sentence (every sentence predicted correct)"}
    said = evaluate(monkeypatch, tmp_path, summary(task="cged", primary="position_f1", predicted_nothing=nothing))
    assert "warning: zh: the model predicted no error in any sentence (every sentence predicted correct)" in said.stderr


def test_languages_and_pairs_where_the_model_said_the_same_are_one_warning(monkeypatch, tmp_path):
    """A generalized evaluation of a model that says '0' everywhere in Japanese printed a warning per pair."""
    same = "the same prediction, '0', for every example"
    nothing = {"ja": same, "ja-de": same, "de-ja": "the same prediction, '1', for every example", "zh-ja": same}
    said = evaluate(monkeypatch, tmp_path, summary(task="pawsx", predicted_nothing=nothing))
    assert said.stderr.splitlines() == [
        f"warning: ja, ja-de, zh-ja: the model predicted {same}; scores that count correct silence or the majority "
        "label can be high for that reason alone",
        "warning: de-ja: the model predicted the same prediction, '1', for every example; scores that count correct "
        "silence or the majority label can be high for that reason alone"]


@pytest.mark.parametrize("metric, options, silent, says, reference", [
    # issue 39, point 10: FCE and QA models that say nothing got no warning (only set-valued kinds did)
    ("detection", {}, [["c", "c"], ["c"]], [["c", "i"], ["c"]], [["c", "i"], ["i"]]),
    ("squad", {}, ["", " "], ["", "Ann"], [["Ann"], ["Bo"]]),
    ("mlqa", {"lang": "de"}, ["", ""], ["Ann", ""], [["Ann"], ["Bo"]]),
    ("squad_v2", {}, [("", 0.9), ("", 0.2)], [("", 0.9), ("Ann", 0.1)], [[], ["Ann"]]),
    ("seqeval", {}, [["O", "O"], ["O"]], [["B-PER", "O"], ["O"]], [["B-PER", "O"], ["B-LOC"]]),
    ("intent_slot", {}, [("a", ["O"]), ("b", ["O", "O"])], [("a", ["B-x"]), ("b", ["O", "O"])],
     [("a", ["B-x"]), ("b", ["O", "B-y"])]),
    ("cged", {}, [set(), set()], [set(), {(1, 2, "S")}], [{(1, 2, "S")}, set()]),
    ("accuracy", {}, ["pos", "pos"], ["pos", "neg"], ["pos", "neg"]),
    ("correlation", {}, [2.5, 2.5], [2.5, 3.0], [1.0, 4.0]),
    ("word_accuracy", {}, [["NOUN", "NOUN"], ["NOUN"]], [["NOUN", "VERB"], ["NOUN"]], [["NOUN", "VERB"], ["ADJ"]]),
])
def test_every_metric_says_what_a_model_that_predicts_nothing_predicted(metric, options, silent, says, reference):
    from xsyn.metrics import get_metric

    scorer = get_metric(metric, **options)
    scorer.compute(silent, reference)  # the silent predictions are well-formed: the metric scores them
    assert scorer.nothing_predicted(silent)
    assert scorer.nothing_predicted(says) is None


def test_one_example_is_no_model_that_always_says_the_same():
    from xsyn.metrics import get_metric

    assert get_metric("accuracy").nothing_predicted(["pos"]) is None
    assert get_metric("accuracy").nothing_predicted(["pos", "pos"]) == "the same prediction, 'pos', for every example"
    assert get_metric("word_accuracy").nothing_predicted([["NOUN"]]) is None




class _Parser:
    name, version = "chain", "1"

    def cache_identity(self) -> dict:
        return {}


TOY = {"name": "toy", "version": 1, "kind": "single-classification", "languages": ["en"], "splits": ["test"],
       "segments": ["text"], "labels": ["a", "b"], "metric": "accuracy",
       "local": [{"layout": "plain", "format": "tsv", "path": "{split}.tsv", "splits": {"test": "test"},
                  "options": {"columns": {"text": "text", "label": "label"}}}]}


def test_the_fingerprint_changes_with_the_cards_content_and_version_only():
    def fingerprint(card):
        return result_fingerprint(Path("/no/checkpoint"), RunConfig(task="toy"), card, "test",
                                  LanguageParsers("stanza", {}, lambda choice: _Parser()), ["en"], None)

    base = fingerprint(parse_card(TOY, "toy.toml"))
    assert fingerprint(parse_card(TOY, "elsewhere/toy.toml")) == base  # where the card lies is not its content
    assert fingerprint(parse_card({**TOY, "labels": ["a", "c"]}, "toy.toml")) != base
    assert fingerprint(parse_card({**TOY, "version": 2}, "toy.toml")) != base
    assert fingerprint(load_card("pawsx")) != base


def test_dropped_examples_are_counted_per_reason_and_said_one_line_each():
    """Pairs joined by id lose ids without a counterpart and pairs whose labels disagree: counted apart (in
    results.json) and said once per reason with where it hit most, not as one long line of every pair."""
    from xsyn.run.evaluation import dropped_by_reason
    from xsyn.run.evaluation_text import dropped_lines

    joined = {"load": {"unmatched": {"en": 30, "de": 10}, "label_mismatches": 3, "loads": [{"skipped": []}]}}
    assert dropped_by_reason(joined) == {"no_counterpart": 40, "labels_disagree": 3}
    assert dropped_by_reason({"load": {"skipped": [1, 2]}}) == {"skipped_rows": 2}
    assert dropped_by_reason({"load": {}}) == {}
    summary = {"n_examples": {"en": 100, "de": 100, "en-de": 57, "de-en": 90},
               "dropped": {"en": 0, "de": 0, "en-de": 43, "de-en": 10},
               "dropped_by_reason": {"en-de": {"no_counterpart": 40, "labels_disagree": 3},
                                     "de-en": {"no_counterpart": 10}}}
    assert dropped_lines(summary) == [
        "not scored: 50 ids without a counterpart in the other language, in 2 of 4 languages and pairs; most in "
        "en-de: 40 of 100",
        "not scored: 3 pairs whose languages disagree on the label, in 1 of 4 languages and pairs; most in en-de: "
        "3 of 100",
        "(per language and pair: dropped_by_reason in results.json)"]
    assert dropped_lines({"n_examples": {"en": 5}, "dropped": {"en": 0}}) == []
