"""Task cards: every card in tasks/ loads, states the papers' settings, and bad cards are named."""

from __future__ import annotations

import pytest

from xsyn.data.cards import CardError, load_card, parse_card
from xsyn.data.loading import load_examples

ALL_TASKS = ["cged", "chnsenticorp", "cola", "conll_ner", "fce", "matis", "mlqa", "mrpc", "msra_ner", "mtop", "panx",
             "pawsx", "qnli", "race", "rte", "squad_v2", "sst2", "stsb", "synth", "udpos", "xnli", "xquad"]


def test_every_task_has_a_card_that_loads():
    from xsyn.data.cards import list_tasks

    assert list_tasks() == ALL_TASKS
    for name in ALL_TASKS:
        card = load_card(name)
        assert card.name == name
        assert set(card.train_languages) <= set(card.languages)


@pytest.mark.parametrize("name, kind, n_langs, metric", [
    ("xnli", "pair-classification", 15, "accuracy"),  # XTREME's 15 XNLI languages
    ("pawsx", "pair-classification", 7, "accuracy"),
    ("mlqa", "extractive-qa", 7, "mlqa"),
    ("xquad", "extractive-qa", 11, "squad"),
    ("panx", "token-classification", 40, "seqeval"),  # the XTREME 40
    ("mtop", "intent-slot", 6, "intent_slot"),
    ("matis", "intent-slot", 9, "intent_slot"),
    ("conll_ner", "token-classification", 4, "seqeval"),
    ("chnsenticorp", "single-classification", 1, "accuracy"),
    ("msra_ner", "token-classification", 1, "seqeval"),
    ("cged", "token-classification", 1, "cged"),
    ("udpos", "pos-tagging", 17, "word_accuracy"),  # the 17 treebanks of ../shared/data/ud
    ("cola", "single-classification", 1, "mcc"),
    ("sst2", "single-classification", 1, "accuracy"),
    ("qnli", "pair-classification", 1, "accuracy"),
    ("rte", "pair-classification", 1, "accuracy"),
    ("mrpc", "pair-classification", 1, "accuracy_f1"),
    ("stsb", "pair-regression", 1, "correlation"),
    ("fce", "token-detection", 1, "detection"),
    ("squad_v2", "extractive-qa-v2", 1, "squad_v2"),
    ("race", "multiple-choice", 1, "subset_accuracy"),
])
def test_cards_define_kind_languages_and_metric_as_the_benchmarks_do(name, kind, n_langs, metric):
    card = load_card(name)
    assert (card.kind, len(card.languages), card.metric) == (kind, n_langs, metric)


def test_cards_carry_ahmad_table_4_settings():
    # Ahmad et al. 2021, Table 4: delta 4 (classification, QA) / 1 (NER, semantic parsing); syntax heads
    # 1 (XNLI, PAWS-X, WikiANN, CoNLL, mATIS++) / 2 (MLQA, XQuAD, MTOP); alpha 0.0 XNLI, 0.2 mATIS++,
    # 0.5 PAWS-X/WikiANN/MLQA/XQuAD, 1.0 CoNLL, 2.0 MTOP; epochs 3 QA, 5 classification, 10 NER/parsing.
    expected = {"xnli": (4, 1, 0.0, 5), "pawsx": (4, 1, 0.5, 5), "mlqa": (4, 2, 0.5, 3), "xquad": (4, 2, 0.5, 3),
                "panx": (1, 1, 0.5, 10), "conll_ner": (1, 1, 1.0, 10), "mtop": (1, 2, 2.0, 10),
                "matis": (1, 1, 0.2, 10)}
    for name, (delta, heads, alpha, epochs) in expected.items():
        gat = load_card(name).variant("gat")
        assert (gat["gat_delta"], gat["syntax_heads"], gat["structural_loss_weight"], gat["epochs"]) == (
            delta, heads, alpha, epochs)
        assert (gat["gat_layers"], gat["gat_heads"], gat["gat_head_size"]) == (4, 4, 64)
    assert load_card("mtop").variant("gat")["max_length"] == 96  # Syntax-MBERT scripts/mtop.sh


def test_qa_cards_window_settings_reach_the_run_config():
    from xsyn.run.settings import ConfigError, resolve

    for name in ("mlqa", "xquad"):  # XTREME scripts/train_qa.sh
        config = resolve(name, "gat", load_card(name), {}, {})
        assert (config.max_length, config.doc_stride, config.max_query_length) == (384, 128, 64)
    with pytest.raises(ConfigError, match="max_query_length must be >= 1"):
        resolve("mlqa", "gat", load_card("mlqa"), {}, {"max_query_length": 0})


def test_chinese_cards_carry_li_et_al_grids():
    # Li et al. 2021, A.2: lr {2e-5, 3e-5}, epochs {3, 5, 10}, batch 32, length 128, m {3, 4}, WLA k {3, 4, 5}.
    for name in ("chnsenticorp", "msra_ner", "cged"):
        card = load_card(name)
        assert card.variant("sla")["sla_distance"] == [3, 4] and card.variant("wla")["wla_window"] == [3, 4, 5]
        assert card.variant("sla")["learning_rate"] == [2e-5, 3e-5]
        assert card.variant("sla")["batch_size"] == 32 and card.variant("sla")["max_length"] == 128


def test_unknown_task_language_split_and_variant_list_the_valid_ones():
    with pytest.raises(CardError, match="unknown task 'xnlii'; the tasks are: cged, chnsenticorp"):
        load_card("xnlii")
    with pytest.raises(CardError, match="no language 'xx'; its languages are: de, en, es, fr, ja, ko, zh"):
        load_examples("pawsx", "xx", "test")
    with pytest.raises(CardError, match="no split 'dev'; its splits are: train, validation, test"):
        load_examples("pawsx", "en", "dev")
    with pytest.raises(CardError, match="no hyperparameters for variant 'sla'; it has: mbert, gat"):
        load_card("pawsx").variant("sla")


MINIMAL = {
    "name": "toy", "kind": "single-classification", "languages": ["en"], "splits": ["test"],
    "segments": ["text"], "labels": ["a", "b"], "metric": "accuracy",
    "local": [{"layout": "plain", "format": "tsv", "path": "{split}.tsv", "splits": {"test": "test"},
               "options": {"columns": {"text": "text", "label": "label"}}}],
}


def with_change(path: list, value) -> dict:
    import copy

    card = copy.deepcopy(MINIMAL)
    target = card
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return card


def test_cards_name_their_raw_labels_where_the_data_writes_numbers():
    assert load_card("chnsenticorp").label_names == {"0": "negative", "1": "positive"}
    assert load_card("pawsx").label_names == {"0": "not paraphrase", "1": "paraphrase"}
    assert load_card("xnli").label_names == {}  # its labels are names already


def test_a_minimal_card_parses():
    card = parse_card(MINIMAL, "toy.toml")
    assert card.local[0].resolve("en", "test") == ["test.tsv"]
    assert card.train_languages == ("en",)


@pytest.mark.parametrize("path, value, message", [
    (["kind"], "regression", "toy.toml: kind 'regression' is not one of single-classification"),
    (["metric"], "bleu", "metric 'bleu' is not one of accuracy, seqeval"),
    (["splits"], ["dev"], "split 'dev' is not one of train, validation, test"),
    (["segments"], ["a", "b"], "this kind has 1 segment"),
    (["labels"], [], "labels must be a non-empty list"),
    (["colour"], "red", "unknown key"),
    (["local", 0, "format"], "xml", r"\[\[local\]\] #1: format 'xml' is not one of"),
    (["local", 0, "path"], "{language}.tsv", r"uses \{language\}; allowed"),
    (["local", 0, "splits"], {"train": "train"}, "splits train not in the card's splits"),
    (["local", 0, "options", "quoting"], "double", "options.quoting must be 'none' or 'csv'"),
    (["local", 0, "options", "colums"], {}, "format option 'colums' is unknown"),
    (["hyperparameters"], {"gat": {"delta": "four"}}, r"\[hyperparameters.gat\]: delta must be int"),
    (["hyperparameters"], {"gat": {"detla": 4}}, "unknown key"),
    (["hyperparameters"], {"gatt": {"delta": 4}},
     r"\[hyperparameters.gatt\] is not a model variant; sections: none, gat, sla, wla, sdoi, sep, mbert"),
    (["local", 0, "options", "columns"], {"text": "text", "lable": "label"},
     "options.columns maps lable, not a role of this task; its roles: id, text, label"),
    (["hub"], [{"dataset": "toy", "splits": {"test": "test"}, "columns": {"txt": "text"}}],
     r"\[\[hub\]\] #1: columns maps txt, not a role of this task"),
    (["local", 0, "options", "header"], False,
     "options.columns text = 'text': with header = false columns are 0-based indices"),
    (["local", 0, "options", "columns"], {"text": 0, "label": 1},
     "options.columns text = 0: with header = true columns are header names"),
    (["local", 0, "options"], {"header": False, "filter": {"lang": "{lang}"}, "columns": {"text": 0, "label": 1}},
     "options.filter names header columns, but header = false"),
    (["local", 0, "options", "token_columns"], ["tokens"], r"options.token_columns tokens not in options.columns"),
    (["local", 0, "lang_codes"], {"en": 5}, "lang_codes en = 5 must be a string"),
    (["local", 0, "lang_codes"], {"de": "deu"}, "lang_codes de not in the card's languages .en."),
    (["label_names"], {"pos": "positive"}, "label_names names pos, which are not among labels"),
    (["label_names"], {"1": 1}, "label_names must map labels to readable names"),
])
def test_card_mistakes_name_the_file_key_and_valid_values(path, value, message):
    with pytest.raises(CardError, match=message):
        parse_card(with_change(path, value), "toy.toml")


def test_a_task_in_a_known_format_is_just_a_card(tmp_path):
    (tmp_path / "test.tsv").write_text("label\ttext\nb\tgood film\na\tbad film\n", encoding="utf-8")
    card_file = tmp_path / "toy.toml"
    card_file.write_text(
        'name = "toy"\nkind = "single-classification"\nlanguages = ["en"]\nsplits = ["test"]\n'
        'segments = ["text"]\nlabels = ["a", "b"]\nmetric = "accuracy"\n'
        '[[local]]\nlayout = "plain"\nformat = "tsv"\npath = "{split}.tsv"\nsplits = { test = "test" }\n'
        'options = { columns = { text = "text", label = "label" } }\n', encoding="utf-8")
    examples, report = load_examples(load_card(card_file), "en", "test", data_dir=tmp_path)
    rows = [(e.id, e.segments[0].text, e.label) for e in examples]
    assert rows == [("#0", "good film", "b"), ("#1", "bad film", "a")]  # rows without ids are numbered
    assert report.origin == "local" and report.examples == 2


def test_tasks_command_lists_cards_and_their_sources():
    from click.testing import CliRunner

    from xsyn.cli import main

    result = CliRunner().invoke(main, ["tasks", "mlqa"])
    assert result.exit_code == 0
    assert "mlqa: MLQA (extractive-qa, metric mlqa)" in result.output
    assert "hub: google/xtreme [MLQA.{context}.{question}]; rajpurkar/squad" in result.output
    assert "[gat] learning_rate=3e-05" in result.output
    assert "dev set: released: dev, validation" in result.output
    cged = CliRunner().invoke(main, ["tasks", "cged"]).output
    assert "dev set: 10% of train, held out (seeded, recorded)" in cged
    table = CliRunner().invoke(main, ["tasks", "--markdown"]).output.splitlines()
    assert len(table) == 2 + len(ALL_TASKS) and table[0].startswith("| task | kind | languages |")
    unknown = CliRunner().invoke(main, ["tasks", "nope"])
    assert unknown.exit_code == 1 and "unknown task 'nope'; the tasks are: cged" in unknown.output
