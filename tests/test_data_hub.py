"""The hub path: what each card asks `datasets.load_dataset` for, how hub rows become examples, and
what the user is told offline. No test touches the network."""

from __future__ import annotations

import pytest

from xsyn.data.cards import load_card
from xsyn.data.hub import hub_requests
from xsyn.data.loading import DataNotFoundError, load_examples


def first_request(task, split, **langs):
    card = load_card(task)
    segment_langs = {name: langs.get(name, langs.get("lang")) for name in card.segments}
    requests = hub_requests(card, split, segment_langs)
    return requests[0][1] if requests else None


@pytest.mark.parametrize("task, split, langs, expected", [
    ("pawsx", "test", {"lang": "de"}, "datasets.load_dataset('google-research-datasets/paws-x', 'de', split='test')"),
    ("xnli", "train", {"lang": "en"}, "datasets.load_dataset('facebook/xnli', 'en', split='train')"),
    # MLQA configs name the context language first
    ("mlqa", "test", {"question": "de", "context": "en"}, "datasets.load_dataset('google/xtreme', 'MLQA.en.de', "
                                                          "split='test')"),
    ("mlqa", "train", {"lang": "en"}, "datasets.load_dataset('rajpurkar/squad', split='train')"),
    # XQuAD's hub copy calls its only split "validation"
    ("xquad", "test", {"lang": "el"}, "datasets.load_dataset('google/xtreme', 'XQuAD.el', split='validation')"),
    ("panx", "validation", {"lang": "sw"}, "datasets.load_dataset('google/xtreme', 'PAN-X.sw', split='validation')"),
    # script repositories read from their parquet branch, one folder per config (tests/test_data_hub_layouts.py)
    ("conll_ner", "test", {"lang": "nl"}, "datasets.load_dataset('eriktks/conll2002', split='test', "
                                          "revision='refs/convert/parquet', data_dir='nl')"),
    ("conll_ner", "train", {"lang": "en"}, "datasets.load_dataset('eriktks/conll2003', split='train', "
                                           "revision='refs/convert/parquet', data_dir='conll2003')"),
    ("msra_ner", "test", {"lang": "zh"}, "datasets.load_dataset('levow/msra_ner', split='test', "
                                         "revision='refs/convert/parquet', data_dir='msra_ner')"),
    # XTREME names its UD-POS configs by the language's English name (the card's hub lang_codes)
    ("udpos", "test", {"lang": "zh"}, "datasets.load_dataset('google/xtreme', 'udpos.Chinese', split='test')"),
    ("race", "test", {"lang": "en"}, "datasets.load_dataset('ehovy/race', 'all', split='test')"),
    ("stsb", "train", {"lang": "en"}, "datasets.load_dataset('nyu-mll/glue', 'stsb', split='train')"),
    ("squad_v2", "validation", {"lang": "en"}, "datasets.load_dataset('rajpurkar/squad_v2', 'squad_v2', "
                                               "split='validation')"),
])
def test_each_card_requests_the_documented_dataset_config_and_split(task, split, langs, expected):
    assert first_request(task, split, **langs).describe() == expected


def test_xtreme_xnli_is_one_config_filtered_by_language():
    card = load_card("xnli")
    (_, first), (_, second) = hub_requests(card, "validation", {"premise": "ur", "hypothesis": "ur"})
    assert first.describe() == "datasets.load_dataset('facebook/xnli', 'ur', split='validation')"
    assert second.describe() == ("datasets.load_dataset('google/xtreme', 'XNLI', split='validation') "
                                 "where language == 'ur'")


def test_tasks_without_a_hub_copy_request_nothing():
    assert first_request("mtop", "test", lang="en") is None
    assert first_request("conll_ner", "train", lang="de") is None  # German CoNLL-2003 needs a licence
    assert first_request("xnli", "train", premise="en", hypothesis="de") is None  # no cross-language config


@pytest.fixture()
def fake_hub(monkeypatch):
    """Replace `datasets.load_dataset` with a recorder serving small in-memory datasets."""
    import datasets

    calls, tables = [], {}

    def load_dataset(path, name=None, split=None, revision=None, data_dir=None):
        calls.append((path, name, split, revision))
        return tables[(path, name, split)]

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls, tables


def test_hub_class_labels_become_label_names(fake_hub):
    import datasets

    calls, tables = fake_hub
    features = datasets.Features({"premise": datasets.Value("string"), "hypothesis": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=["entailment", "neutral", "contradiction"])})
    tables[("facebook/xnli", "fr", "test")] = datasets.Dataset.from_dict(
        {"premise": ["Il pleut.", "Il fait beau."], "hypothesis": ["Le sol est mouillé.", "Il pleut."],
         "label": [0, 2]}, features=features)
    examples, report = load_examples("xnli", "fr", "test", data_dir="/nonexistent")
    assert calls == [("facebook/xnli", "fr", "test", None)]
    assert [(e.id, e.label, e.langs) for e in examples] == [("#0", "entailment", ["fr", "fr"]),
                                                            ("#1", "contradiction", ["fr", "fr"])]
    assert report.origin == "hub"
    assert report.sources == ["datasets.load_dataset('facebook/xnli', 'fr', split='test')"]


def test_hub_tag_lists_and_squad_answers_are_converted(fake_hub):
    import datasets

    _, tables = fake_hub
    tags = datasets.ClassLabel(names=["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"])
    tables[("google/xtreme", "PAN-X.sw", "test")] = datasets.Dataset.from_dict(
        {"tokens": [["Juma", "Nairobi"]], "ner_tags": [[1, 5]]},
        features=datasets.Features({"tokens": datasets.List(datasets.Value("string")),
                                    "ner_tags": datasets.List(tags)}))
    (ner,), _ = load_examples("panx", "sw", "test", data_dir="/nonexistent")
    assert ner.segments[0].tokens == ["Juma", "Nairobi"] and ner.tags == ["B-PER", "B-LOC"]
    tables[("google/xtreme", "MLQA.en.de", "test")] = datasets.Dataset.from_dict(
        {"id": ["q1"], "question": ["Wie viele?"], "context": ["There are 525 lines."],
         "answers": [{"answer_start": [10], "text": ["525"]}]})
    from xsyn.data.pairs import load_pair_examples

    (qa,), report = load_pair_examples("mlqa", "test", {"question": "de", "context": "en"}, data_dir="/nonexistent")
    assert (qa.id, qa.langs, qa.answers[0].text, qa.answers[0].start) == ("q1", ["de", "en"], "525", 10)
    assert report.method == "released file"


def test_offline_failure_tells_what_to_download_and_where(tmp_path):
    import datasets

    if not datasets.config.HF_HUB_OFFLINE:
        pytest.skip("run with HF_HUB_OFFLINE=1 (tests/conftest.py sets it) to check the offline message")
    with pytest.raises(DataNotFoundError) as err:
        load_examples("pawsx", "en", "train", data_dir=tmp_path)
    message = str(err.value)
    assert f"No local file under {tmp_path}; any one of these layouts is read:" in message
    assert f"{tmp_path / 'x-final' / 'en' / 'train.tsv'}   (x-final layout)" in message
    assert "datasets.load_dataset('google-research-datasets/paws-x', 'en', split='train') failed" in message
    assert "datasets.load_dataset('google/xtreme', 'PAWS-X.en', split='train') failed" in message
    assert "Download: https://storage.googleapis.com/paws/pawsx/x-final.tar.gz" in message
    with pytest.raises(DataNotFoundError) as err:  # a mistyped --data-dir is named as a folder that is not there
        load_examples("pawsx", "en", "train", data_dir=tmp_path / "pawx")
    assert f"The folder {tmp_path / 'pawx'} does not exist (a mistyped --data-dir?); any one of these layouts is " \
        "read:" in str(err.value)


def test_task_without_hub_copy_says_where_to_get_it(tmp_path):
    with pytest.raises(DataNotFoundError) as err:
        load_examples("mtop", "hi", "validation", data_dir=tmp_path)
    message = str(err.value)
    assert f"{tmp_path / 'mtop' / 'hi' / 'eval.txt'}   (mtop layout)" in message
    assert "No hub dataset serves this combination." in message
    assert "Download: https://dl.fbaipublicfiles.com/mtop/mtop.zip" in message
