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
    with pytest.raises(ConfigError, match="--max-query-length: must be >= 1, got 0"):
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
    with pytest.raises(CardError, match=r"unknown task 'paws-x'; the tasks are: .*, xquad; did you mean 'pawsx'\?$"):
        load_card("paws-x")  # the paper's spelling
    with pytest.raises(CardError, match="no language 'xx'; its languages are: de, en, es, fr, ja, ko, zh"):
        load_examples("pawsx", "xx", "test")
    with pytest.raises(CardError, match="no split 'dev'; its splits are: train, validation, test"):
        load_examples("pawsx", "en", "dev")
    with pytest.raises(CardError, match="no hyperparameters for variant 'sla'; it has: mbert, gat"):
        load_card("pawsx").variant("sla")


MINIMAL = {
    "name": "toy", "version": 1, "kind": "single-classification", "languages": ["en"], "splits": ["test"],
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
    (["kind"], "regression", "toy.toml: kind: 'regression' is not one of single-classification"),
    (["metric"], "bleu", "toy.toml: metric: 'bleu' is not one of accuracy, seqeval"),
    (["splits"], ["dev"], "toy.toml: splits: 'dev' is not one of train, validation, test"),
    (["segments"], ["a", "b"], "toy.toml: segments: this kind has 1 segment"),
    (["labels"], [], "toy.toml: labels: must be a non-empty list"),
    (["version"], "1.0", "toy.toml: version: expected an integer, got '1.0'"),
    (["colour"], "red", "toy.toml: colour: unknown key"),
    (["titel"], "Toy", "toy.toml: titel: unknown key; did you mean 'title'?"),
    (["local", 0, "format"], "xml", r"toy.toml: local\[0\].format: 'xml' is not one of"),
    (["local", 0, "path"], "{language}.tsv", r"toy.toml: local\[0\].path: '\{language\}.tsv' uses \{language\}; "
                                            "allowed"),
    (["local", 0, "splits"], {"train": "train"}, r"local\[0\].splits: train not in the card's splits"),
    (["local", 0, "options", "quoting"], "double", r"local\[0\].options: options.quoting must be 'none' or 'csv'"),
    (["local", 0, "options", "colums"], {}, "format option 'colums' is unknown"),
    (["local", 0, "lyout"], "x", r"toy.toml: local\[0\].lyout: unknown key; did you mean 'layout'\?"),
    (["hyperparameters"], {"gatt": {"gat_delta": 4}},
     r"toy.toml: hyperparameters.gatt: is not a model variant; sections: none, gat, sla, wla, sdoi, sep, mbert"),
    (["hyperparameters"], {"gat": 4}, r"toy.toml: hyperparameters.gat: expected a table, got 4"),
    (["local", 0, "options", "columns"], {"text": "text", "lable": "label"},
     r"local\[0\].options.columns: maps lable, not a role of this task; its roles: id, text, label"),
    (["hub"], [{"dataset": "toy", "splits": {"test": "test"}, "columns": {"txt": "text"}}],
     r"hub\[0\].columns: maps txt, not a role of this task"),
    (["hub"], [{"dataset": "toy", "splits": {"test": "test"}}], r"hub\[0\].columns: missing; expected a table"),
    (["local", 0, "options", "header"], False,
     "options.columns text = 'text': with header = false columns are 0-based indices"),
    (["local", 0, "options", "columns"], {"text": 0, "label": 1},
     "options.columns text = 0: with header = true columns are header names"),
    (["local", 0, "options"], {"header": False, "filter": {"lang": "{lang}"}, "columns": {"text": 0, "label": 1}},
     "options.filter names header columns, but header = false"),
    (["local", 0, "options", "token_columns"], ["tokens"], r"options.token_columns tokens not in options.columns"),
    (["local", 0, "lang_codes"], {"en": 5}, r"local\[0\].lang_codes.en: expected a string, got 5"),
    (["local", 0, "lang_codes"], {"de": "deu"}, r"local\[0\].lang_codes: de not in the card's languages .en."),
    (["label_names"], {"pos": "positive"}, "toy.toml: label_names: names pos, which are not among labels"),
    (["label_names"], {"1": 1}, r"toy.toml: label_names.1: expected a string, got 1"),
    # empty or repeating lists (issue 39, point 1: an empty `languages` was an IndexError in the run settings)
    (["languages"], [], "^toy.toml: languages: must not be empty$"),
    (["languages"], ["en", "de", "en"], "^toy.toml: languages: lists 'en' twice$"),
    (["splits"], [], "^toy.toml: splits: must not be empty$"),
    (["train_languages"], [], "^toy.toml: train_languages: must not be empty$"),
    (["train_languages"], ["de"], r"^toy.toml: train_languages: de not in languages \(en\)$"),
    (["local", 0, "splits"], {}, r"^toy.toml: local\[0\].splits: must not be empty$"),
    (["local", 0, "languages"], [], r"^toy.toml: local\[0\].languages: must not be empty$"),
    (["hub"], [{"dataset": "toy", "splits": {"test": "test"}, "columns": {"text": "text"}, "languages": []}],
     r"^toy.toml: hub\[0\].languages: must not be empty$"),
    (["labels"], ["a", "a"], "^toy.toml: labels: lists a value twice$"),
    (["label_map"], {"0": "a", "1": "bee"}, r"^toy.toml: label_map: maps to bee, which are not among labels \(a, b\)$"),
])
def test_card_mistakes_name_the_file_key_and_valid_values(path, value, message):
    with pytest.raises(CardError, match=message):
        parse_card(with_change(path, value), "toy.toml")


def test_a_card_file_with_an_empty_language_list_is_refused_by_the_cli_with_its_path(tmp_path):
    from click.testing import CliRunner

    from xsyn.cli import main

    card_file = _card_file(tmp_path, TOY.replace('languages = ["en"]', "languages = []"))
    result = CliRunner().invoke(main, ["tasks", str(card_file)])
    assert result.exit_code != 0 and not isinstance(result.exception, IndexError)
    assert f"{card_file}: languages: must not be empty" in result.output


def test_a_task_in_a_known_format_is_just_a_card(tmp_path):
    (tmp_path / "test.tsv").write_text("label\ttext\nb\tgood film\na\tbad film\n", encoding="utf-8")
    card_file = tmp_path / "toy.toml"
    card_file.write_text(
        'name = "toy"\nversion = 1\nkind = "single-classification"\nlanguages = ["en"]\nsplits = ["test"]\n'
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


def test_a_card_states_its_settings_under_the_run_settings_names():
    from xsyn.run.settings import ConfigError, card_defaults

    card = parse_card({**MINIMAL, "hyperparameters": {"gat": {"delta": 4}}}, "toy.toml")
    with pytest.raises(ConfigError, match=r"^toy.toml: hyperparameters.gat.delta: neither a run setting nor a model "
                                          r"setting; did you mean 'gat_delta'\?"):
        card_defaults(card, "gat")
    card = parse_card({**MINIMAL, "hyperparameters": {"gat": {"gat_delta": "four"}}}, "toy.toml")
    with pytest.raises(ConfigError, match=r"^toy.toml: hyperparameters.gat.gat_delta: expected an integer, got 'four'"):
        card_defaults(card, "gat")
    card = parse_card({**MINIMAL, "hyperparameters": {"sla": {"learning_rate": [2e-5, "3e-5"]}}}, "toy.toml")
    with pytest.raises(ConfigError, match=r"hyperparameters.sla.learning_rate\[1\]: expected a number, got '3e-5'"):
        card_defaults(card, "sla")


def _card_file(folder, text: str, name: str = "toy.toml"):
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


TOY = ('name = "toy"\nversion = 1\nkind = "single-classification"\nlanguages = ["en"]\nsplits = ["test"]\n'
       'segments = ["text"]\nlabels = ["a", "b"]\nmetric = "accuracy"\n[[local]]\nlayout = "plain"\nformat = "tsv"\n'
       'path = "{split}.tsv"\nsplits = { test = "test" }\noptions = { columns = { text = "text", label = "label" } }\n')


def test_an_included_file_shares_its_tables_and_the_card_extends_them(tmp_path):
    _card_file(tmp_path, '[hyperparameters.mbert]\nlearning_rate = 2e-5\nepochs = 5\n[hyperparameters.gat]\n'
               'gat_delta = 4\n', "_shared.toml")
    card = load_card(_card_file(tmp_path, TOY.replace("version = 1\n", 'version = 1\ninclude = "_shared.toml"\n')
                                + "[hyperparameters.mbert]\nepochs = 3\nsource = \"here\"\n"))
    assert card.hyperparameters == {"mbert": {"learning_rate": 2e-5, "epochs": 3, "source": "here"},
                                    "gat": {"gat_delta": 4}}
    missing = _card_file(tmp_path, TOY.replace("version = 1\n", 'version = 1\ninclude = ["nope.toml"]\n'), "m.toml")
    with pytest.raises(CardError, match=r"m.toml: include: no file .*nope.toml"):
        load_card(missing)
    loop = _card_file(tmp_path, 'include = "_loop.toml"\n', "_loop.toml")
    with pytest.raises(CardError, match="include: includes nest deeper than 8 files"):
        load_card(_card_file(tmp_path, TOY.replace("version = 1\n", f'version = 1\ninclude = "{loop.name}"\n'),
                             "l.toml"))


def test_the_shipped_pair_cards_share_the_xtreme_tables_and_each_card_has_a_version():
    for name in ALL_TASKS:
        assert isinstance(load_card(name).version, int)
    pawsx, xnli = load_card("pawsx").variant("gat"), load_card("xnli").variant("gat")
    assert {k: v for k, v in pawsx.items() if k not in ("structural_loss_weight", "source")} == \
        {k: v for k, v in xnli.items() if k not in ("structural_loss_weight", "source")}
    assert "_xtreme_pair_classification" not in ALL_TASKS


def test_the_content_hash_follows_the_resolved_content_not_the_layout_of_the_file(tmp_path):
    first = load_card(_card_file(tmp_path, TOY, "a.toml"))
    reordered = load_card(_card_file(tmp_path, "\n".join(reversed(TOY.split("[[local]]\n")[0].splitlines()))
                                     + "\n[[local]]\n" + TOY.split("[[local]]\n")[1], "b.toml"))
    edited = load_card(_card_file(tmp_path, TOY.replace('labels = ["a", "b"]', 'labels = ["a", "c"]'), "c.toml"))
    assert first.content_hash == reordered.content_hash != edited.content_hash
    assert first.stamp == {"name": "toy", "version": 1, "hash": first.content_hash}
