"""The files `xsyn parse` reads, as library calls: lines of segments, and CoNLL-U imported into the parse cache."""

from __future__ import annotations

import pytest

from xsyn.syntax.cache import ParseCache, cache_key
from xsyn.syntax.conllu import NotUtf8Error
from xsyn.syntax.inputs import InvalidSentence, import_conllu, read_segments

GOOD = "# text = Dogs bark.\n1\tDogs\t_\tNOUN\t_\t_\t2\tnsubj\t_\t_\n2\tbark.\t_\tVERB\t_\t_\t0\troot\t_\t_\n\n"
BAD = "# text = Broken\n1\tBroken\t_\tX\t_\t_\t7\tdep\t_\t_\n\n"  # head 7 of a one-word sentence


def test_lines_become_segments_and_blank_lines_are_counted(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("Dogs bark.\n  \n\u200b\nNew  York\n", encoding="utf-8")
    segments, blank = read_segments(path, "tokens", "en")
    assert [s.tokens for s in segments] == [["Dogs", "bark."], ["New", "York"]] and blank == 2
    path.write_bytes(b"ok\n\xff\n")
    with pytest.raises(NotUtf8Error, match=r"in.txt:2: not UTF-8 text"):
        read_segments(path, "text", "en")


def test_conllu_enters_the_cache_under_its_name_once(tmp_path):
    path = tmp_path / "x.conllu"
    path.write_text(GOOD + GOOD, encoding="utf-8")
    cache = ParseCache(tmp_path / "cache")
    first = import_conllu(path, "en", cache, import_as="gold-ewt")
    assert (first.report.segments, first.report.unique, first.report.duplicates, first.report.parsed) == (2, 1, 1, 1)
    assert cache.get(cache_key("Dogs bark.", "en", "gold-ewt", "", {})).heads == [2, 0]
    again = import_conllu(path, "en", ParseCache(tmp_path / "cache"), import_as="gold-ewt")
    assert (again.report.cache_hits, again.report.parsed) == (1, 0)


def test_a_malformed_sentence_stops_the_import_or_is_skipped_and_listed(tmp_path):
    path = tmp_path / "x.conllu"
    path.write_text(GOOD + BAD, encoding="utf-8")
    with pytest.raises(InvalidSentence, match=r"x.conllu:5: sentence has no root.* \(use --skip-invalid to skip"):
        import_conllu(path, "en", ParseCache(tmp_path / "cache"))
    imported = import_conllu(path, "en", ParseCache(tmp_path / "cache"), skip_invalid=True)
    assert len(imported.records) == 1 and len(imported.skipped) == 1 and "x.conllu" in imported.skipped[0]


def test_parse_file_writes_the_records_and_reports_what_it_skipped(tmp_path):
    """`xsyn parse` from Python: a CoNLL-U file imported into records and the cache, the skipped sentence listed."""
    from xsyn.syntax.inputs import parse_file
    from xsyn.syntax.record import read_jsonl

    path = tmp_path / "x.conllu"
    path.write_text(GOOD + BAD + GOOD, encoding="utf-8")
    out = tmp_path / "records" / "x.jsonl"  # its folder is made
    parsed = parse_file(path, "conllu", "en", out, cache_dir=tmp_path / "cache", skip_invalid=True)
    assert [r.heads for r in read_jsonl(out)] == [[2, 0], [2, 0]]
    shown = parsed.as_dict()
    assert (shown["segments"], shown["unique"], shown["skipped_invalid"]) == (2, 1, 1)
    assert shown["out"] == str(out) and shown["cache_dir"] == str(tmp_path / "cache" / "parses")
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match="--output"):  # a folder that cannot be made is named before any work
        parse_file(path, "conllu", "en", tmp_path / "file" / "x.jsonl")
