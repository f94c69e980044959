"""The treebank registry (17 languages of Ahmad et al. 2021) and discovery of split files."""

from __future__ import annotations

from pathlib import Path

import pytest

from xsyn.syntax.treebanks import TreebankError, languages, load_registry, locate, resolve, split_files

PAPER_LANGUAGES = {"en", "de", "es", "fr", "zh", "ja", "ko", "ru", "tr", "vi", "bg", "el", "ur", "nl", "pt",
                   "ar", "hi"}


@pytest.fixture
def shared_ud(shared_data: Path) -> Path:
    return shared_data / "ud"


def test_registry_covers_the_papers_17_languages():
    registry = load_registry()
    assert set(registry) == PAPER_LANGUAGES and len(languages()) == 17
    assert all(tbs[0].paper and not any(tb.paper for tb in tbs[1:]) for tbs in registry.values())
    assert registry["en"][0].name == "UD_English-EWT" and registry["en"][0].code == "en_ewt"
    assert [tb.name for tb in registry["ar"]] == ["UD_Arabic-PADT", "UD_Arabic-PUD"]
    assert [tb.name for tb in registry["hi"]] == ["UD_Hindi-HDTB", "UD_Hindi-PUD"]
    assert registry["ar"][1].splits == ("test",)
    assert registry["tr"][0].licence == "CC BY-NC-SA 4.0"


def test_resolve_by_language_name_or_prefix():
    assert [tb.name for tb in resolve("pt")] == ["UD_Portuguese-Bosque", "UD_Portuguese-GSD"]
    assert [tb.code for tb in resolve("UD_Hindi-PUD")] == ["hi_pud"]
    assert [tb.name for tb in resolve("ko_kaist")] == ["UD_Korean-Kaist"]


def test_unknown_language_lists_what_is_available():
    with pytest.raises(TreebankError, match=r"unknown language or treebank 'xx'\. Languages: en, de, .*"
                                            r"Treebanks: UD_English-EWT, "):
        resolve("xx")


def test_all_17_languages_are_found_in_the_shared_folder(shared_ud):
    ud = shared_ud
    found = {lang: locate(lang, ud) for lang in languages()}
    assert found["ar"].treebank.name == "UD_Arabic-PUD"  # PADT is absent: the alternate is taken
    assert found["hi"].treebank.name == "UD_Hindi-PUD"
    assert found["ar"].evaluation_split() == "test"
    train = (ud / "UD_English-EWT" / "en_ewt-ud-train.conllu").is_file()  # a copy may leave it out (14 MB)
    assert set(found["en"].files) == {"dev", "test"} | ({"train"} if train else set())
    assert found["en"].evaluation_split() == "dev"
    assert found["en"].evaluation_split(exclude="dev") == "test"
    assert all(set(f.files) == {"dev", "test"} for lang, f in found.items() if lang not in ("en", "ar", "hi"))


def test_a_single_treebank_folder_works_too(shared_ud):
    found = locate("UD_German-GSD", shared_ud / "UD_German-GSD")
    assert found.files["dev"].name == "de_gsd-ud-dev.conllu"


def test_missing_split_names_the_file_looked_for(shared_ud):
    found = locate("de", shared_ud)
    with pytest.raises(TreebankError, match=r"UD_German-GSD has no train split .*looked for "
                                            r"de_gsd-ud-train\.conllu; found dev, test"):
        found.path("train")


def test_treebank_folder_without_split_files_names_what_it_looked_for(tmp_path):
    folder = tmp_path / "UD_English-EWT"
    folder.mkdir()
    (folder / "README.md").write_text("no data here\n")
    looked = r"en_ewt-ud-train\.conllu, en_ewt-ud-dev\.conllu, en_ewt-ud-test\.conllu"
    with pytest.raises(TreebankError, match=rf"has no split files: looked for {looked}; found README\.md"):
        locate("en", tmp_path)


def test_absent_treebank_lists_the_folders_there(tmp_path):
    (tmp_path / "UD_German-GSD").mkdir()
    with pytest.raises(TreebankError, match=r"no treebank for 'ar' under .*: looked for UD_Arabic-PADT, "
                                            r"UD_Arabic-PUD; treebank folders there: UD_German-GSD"):
        locate("ar", tmp_path)
    with pytest.raises(TreebankError, match="does not exist"):
        locate("en", tmp_path / "nowhere")


def test_split_files_refuses_two_files_for_one_split(tmp_path):
    for name in ("a_x-ud-dev.conllu", "b_y-ud-dev.conllu", "a_x-ud-test.conllu"):
        (tmp_path / name).write_text("")
    assert set(split_files(tmp_path, "a_x")) == {"dev", "test"}
    with pytest.raises(TreebankError, match="several dev files"):
        split_files(tmp_path)
