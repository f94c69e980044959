"""The cards' hub sources against datasets' own loader: each source's repository is rebuilt as a local folder
shaped as the hub keeps it (a `refs/convert/parquet` branch is `{config}/{split}/0000.parquet` and no README; a
script repository is its .py and no data), named as the dataset (`eriktks/conll2003`, relative to the working
directory, which is where datasets looks first), and read through xsyn's loading code, which calls
`datasets.load_dataset` with exactly the card's request. So a card's config, data_dir, splits, columns and label
lists are checked by the library, not by xsyn's description of it. No test touches the network."""

from __future__ import annotations

import socket
import threading

import pytest

from xsyn.data.cards import load_card
from xsyn.data.hub import HubRequest, HubUnavailableError, hub_requests, load_hub_rows
from xsyn.data.loading import DataNotFoundError, load_examples, tag_names

CONLL_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]  # the scripts' ner_tags
MSRA_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]


@pytest.fixture()
def hub(tmp_path, monkeypatch):
    """A folder standing for the hub: the working directory, so `datasets.load_dataset("owner/name")` reads
    `owner/name/` there as it would the repository; the datasets cache beside it."""
    import datasets

    root = tmp_path / "hub"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets-cache")
    shown = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    yield root
    if shown:
        datasets.enable_progress_bars()


def ner_features(tags: list[str], pos: list[str] | None = None):
    """The features of the hub's NER scripts (conll2003.py, conll2002.py, msra_ner.py): id, tokens, (pos_tags,)
    ner_tags as class labels; the parquet conversion keeps them in each file's schema."""
    import datasets

    columns = {"id": datasets.Value("string"), "tokens": datasets.List(datasets.Value("string"))}
    if pos:
        columns["pos_tags"] = datasets.List(datasets.ClassLabel(names=pos))
    columns["ner_tags"] = datasets.List(datasets.ClassLabel(names=tags))
    return datasets.Features(columns)


def parquet_branch(root, repo: str, configs: dict[str, dict[str, list[tuple[list[str], list[int]]]]], features):
    """A `refs/convert/parquet` branch: `{config}/{split}/0000.parquet` per config and split, no README."""
    import datasets

    for config, splits in configs.items():
        for split, rows in splits.items():
            folder = root / repo / config / split
            folder.mkdir(parents=True)
            data = {"id": [str(i) for i in range(len(rows))], "tokens": [t for t, _ in rows],
                    "ner_tags": [tags for _, tags in rows]}
            if "pos_tags" in features:
                data["pos_tags"] = [[0] * len(t) for t, _ in rows]
            datasets.Dataset.from_dict(data, features=features).to_parquet(str(folder / "0000.parquet"))


def sentences(n: int, word: str) -> list[tuple[list[str], list[int]]]:
    return [([f"{word}{i}", "Madrid", "."], [1, 5, 0]) for i in range(n)]


def test_conll2003_english_loads_from_its_parquet_branch_with_the_cards_splits_and_tags(hub, tmp_path):
    card = load_card("conll_ner")
    sizes = {"train": 5, "validation": 3, "test": 2}
    parquet_branch(hub, "eriktks/conll2003", {"conll2003": {s: sentences(n, s) for s, n in sizes.items()}},
                   ner_features(CONLL_TAGS, pos=['"', "''", "#"]))
    for split, n in sizes.items():
        examples, report = load_examples(card, "en", split, data_dir=tmp_path / "no-local-files")
        assert report.origin == "hub" and len(examples) == n
        assert report.sources == [f"datasets.load_dataset('eriktks/conll2003', split={split!r}, "
                                  "revision='refs/convert/parquet', data_dir='conll2003')"]
        assert examples[0].segments[0].tokens == [f"{split}0", "Madrid", "."]
        assert examples[0].tags == ["B-PER", "B-LOC", "O"]
    assert tag_names(card) == CONLL_TAGS  # the card's label list is the hub's ClassLabel, in its order


def test_the_old_request_by_config_name_fails_on_that_branch(hub):
    """What the card asked before: datasets sees only a `default` config on a branch without a README."""
    parquet_branch(hub, "eriktks/conll2003", {"conll2003": {"test": sentences(2, "t")}}, ner_features(CONLL_TAGS))
    source = load_card("conll_ner").hub[0]
    old = HubRequest("eriktks/conll2003", "conll2003", "test", "refs/convert/parquet")
    with pytest.raises(HubUnavailableError, match=r"BuilderConfig 'conll2003' not found. Available: \['default'\]"):
        list(load_hub_rows(source, old))


def test_conll2002_spanish_and_dutch_are_read_apart(hub, tmp_path):
    splits = ("train", "validation", "test")
    parquet_branch(hub, "eriktks/conll2002", {"es": {s: sentences(4, "es") for s in splits},
                                              "nl": {s: sentences(3, "nl") for s in splits}},
                   ner_features(CONLL_TAGS, pos=["AO", "AQ"]))
    for lang, n in (("es", 4), ("nl", 3)):
        for split in splits:
            examples, report = load_examples("conll_ner", lang, split, data_dir=tmp_path / "no-local-files")
            assert len(examples) == n and {e.segments[0].tokens[0][:2] for e in examples} == {lang}, report.sources
            assert report.sources == [f"datasets.load_dataset('eriktks/conll2002', split={split!r}, "
                                      f"revision='refs/convert/parquet', data_dir={lang!r})"]
    import datasets  # (without the folder, datasets merges the two languages into one dataset)

    assert len(datasets.load_dataset("eriktks/conll2002", split="test", revision="refs/convert/parquet")) == 7


def test_msra_ner_loads_from_its_parquet_branch(hub, tmp_path):
    card = load_card("msra_ner")
    parquet_branch(hub, "levow/msra_ner", {"msra_ner": {"train": [(list("中国人民"), [5, 6, 0, 0])] * 6,
                                                        "test": [(list("北京"), [5, 6])] * 2}},
                   ner_features(MSRA_TAGS))
    train, report = load_examples(card, "zh", "train", data_dir=tmp_path / "no-local-files")
    assert len(train) == 6 and report.origin == "hub"
    assert train[0].segments[0].tokens == ["中", "国", "人", "民"] and train[0].tags == ["B-LOC", "I-LOC", "O", "O"]
    test, _ = load_examples(card, "zh", "test", data_dir=tmp_path / "no-local-files")
    assert [e.tags for e in test] == [["B-LOC", "I-LOC"]] * 2
    assert tag_names(card) == MSRA_TAGS


def readme_configs(root, repo: str, configs: dict[str, dict[str, list[tuple[list[str], list[int]]]]], features):
    """A repository laid out by its README's `configs:` (the layout of a dataset pushed or converted as
    parquet): `{config}/{split}-00000-of-00001.parquet`."""
    import datasets

    lines = ["---", "configs:"]
    for config, splits in configs.items():
        lines += [f"- config_name: {config}", "  data_files:"]
        for split, rows in splits.items():
            (root / repo / config).mkdir(parents=True, exist_ok=True)
            data = {"id": [str(i) for i in range(len(rows))], "tokens": [t for t, _ in rows],
                    "ner_tags": [tags for _, tags in rows]}
            datasets.Dataset.from_dict(data, features=features).to_parquet(
                str(root / repo / config / f"{split}-00000-of-00001.parquet"))
            lines += [f"  - split: {split}", f"    path: {config}/{split}-*"]
    (root / repo / "README.md").write_text("\n".join([*lines, "---", ""]), encoding="utf-8")


def test_a_script_repository_falls_through_to_the_cards_next_source(hub, tmp_path):
    (hub / "google" / "xtreme").mkdir(parents=True)
    (hub / "google" / "xtreme" / "xtreme.py").write_text("# a dataset script\n")  # its data made by the script
    card = load_card("panx")
    assert [source.dataset for source in card.hub] == ["google/xtreme", "unimelb-nlp/wikiann"]
    with pytest.raises(DataNotFoundError) as err:
        load_examples(card, "sw", "test", data_dir=tmp_path / "no-local-files")
    message = str(err.value)
    assert "The Hugging Face hub could not serve any of its 2 sources, tried in order:" in message
    assert ("datasets.load_dataset('google/xtreme', 'PAN-X.sw', split='test') failed: google/xtreme is a script "
            "repository, which datasets 4 and later do not run") in message
    assert "datasets.load_dataset('unimelb-nlp/wikiann', 'sw', split='test') failed: ConnectionError" in message
    assert "Run once with network access" in message  # the second could not reach the hub
    readme_configs(hub, "unimelb-nlp/wikiann", {"sw": {"test": sentences(3, "sw")}},
                   ner_features(["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]))
    examples, report = load_examples(card, "sw", "test", data_dir=tmp_path / "no-local-files")
    assert len(examples) == 3 and report.sources == ["datasets.load_dataset('unimelb-nlp/wikiann', 'sw', "
                                                     "split='test')"]


@pytest.fixture()
def hanging_up_hub(monkeypatch):
    """The hub's address answered by a server that closes every connection at once: datasets' HTTP client
    then raises its transport error (httpx2.RemoteProtocolError), which datasets does not convert."""
    import datasets
    import huggingface_hub.constants

    server = socket.create_server(("127.0.0.1", 0))
    endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"

    def hang_up():
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            connection.recv(65536)
            connection.close()

    threading.Thread(target=hang_up, daemon=True).start()
    # what HF_ENDPOINT and HF_HUB_OFFLINE=0 set when the libraries are imported, set on them here
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_ENDPOINT", endpoint)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(huggingface_hub.constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                        endpoint + "/{repo_id}/resolve/{revision}/{filename}")
    yield endpoint
    server.close()


def test_a_transport_error_moves_on_to_the_next_source(hub, tmp_path, hanging_up_hub):
    readme_configs(hub, "unimelb-nlp/wikiann", {"sw": {"validation": sentences(2, "sw")}},
                   ner_features(["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]))
    examples, report = load_examples("panx", "sw", "validation", data_dir=tmp_path / "no-local-files")
    assert len(examples) == 2 and "unimelb-nlp/wikiann" in report.sources[0]  # google/xtreme: the hub hung up
    (_, request), _ = hub_requests(load_card("panx"), "validation", {"tokens": "sw"})
    with pytest.raises(HubUnavailableError, match="RemoteProtocolError: Server disconnected") as err:
        list(load_hub_rows(load_card("panx").hub[0], request))
    assert err.value.unreachable


def test_udpos_from_the_hub_records_that_it_is_not_ewt(hub, tmp_path):
    import datasets

    upos = load_card("udpos").tags
    features = datasets.Features({"tokens": datasets.List(datasets.Value("string")),
                                  "pos_tags": datasets.List(datasets.ClassLabel(names=list(upos)))})
    (hub / "google" / "xtreme" / "udpos.English").mkdir(parents=True)
    datasets.Dataset.from_dict({"tokens": [["Dogs", "bark"]], "pos_tags": [[7, 15]]}, features=features).to_parquet(
        str(hub / "google" / "xtreme" / "udpos.English" / "test-00000-of-00001.parquet"))
    (hub / "google" / "xtreme" / "README.md").write_text(
        "---\nconfigs:\n- config_name: udpos.English\n  data_files:\n  - split: test\n    path: udpos.English/test-*\n"
        "---\n", encoding="utf-8")
    (example,), report = load_examples("udpos", "en", "test", data_dir=tmp_path / "no-local-files")
    assert example.tags == ["NOUN", "VERB"]
    assert report.sources == ["datasets.load_dataset('google/xtreme', 'udpos.English', split='test') (XTREME's merge "
                              "of every UD v2.5 treebank of the language: English 21,253 / 3,974 / 5,440 "
                              "train/dev/test sentences, not EWT's 12,543 / 2,002 / 2,077)"]
