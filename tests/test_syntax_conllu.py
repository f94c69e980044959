"""CoNLL-U in and out: every shared treebank reads with the MANIFEST's counts; bad input is named."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.syntax.conllu import ConlluError, ConlluStats, parse_conllu, read_conllu, write_conllu

# (file, sentences, syntactic words) from ../shared/data/MANIFEST.md, section 1.
MANIFEST_UD = [
    ("UD_English-EWT/en_ewt-ud-dev.conllu", 2001, 25147),
    ("UD_English-EWT/en_ewt-ud-test.conllu", 2077, 25094),
    ("UD_German-GSD/de_gsd-ud-dev.conllu", 799, 12480),
    ("UD_Spanish-GSD/es_gsd-ud-dev.conllu", 1400, 37154),
    ("UD_French-GSD/fr_gsd-ud-dev.conllu", 1476, 35721),
    ("UD_Chinese-GSD/zh_gsd-ud-dev.conllu", 500, 12665),
    ("UD_Japanese-GSD/ja_gsd-ud-dev.conllu", 507, 12287),
    ("UD_Korean-GSD/ko_gsd-ud-dev.conllu", 950, 11958),
    ("UD_Russian-GSD/ru_gsd-ud-dev.conllu", 579, 11709),
    ("UD_Turkish-IMST/tr_imst-ud-dev.conllu", 1100, 10542),
    ("UD_Vietnamese-VTB/vi_vtb-ud-dev.conllu", 1123, 26162),
    ("UD_Bulgarian-BTB/bg_btb-ud-dev.conllu", 1115, 16089),
    ("UD_Greek-GDT/el_gdt-ud-dev.conllu", 403, 10443),
    ("UD_Urdu-UDTB/ur_udtb-ud-dev.conllu", 552, 14581),
    ("UD_Dutch-Alpino/nl_alpino-ud-dev.conllu", 718, 11541),
    ("UD_Portuguese-GSD/pt_gsd-ud-dev.conllu", 1204, 32073),
    ("UD_Arabic-PUD/ar_pud-ud-test.conllu", 1000, 20747),
    ("UD_Hindi-PUD/hi_pud-ud-test.conllu", 1000, 23829),
]


@pytest.mark.parametrize(("name", "sentences", "words"), MANIFEST_UD, ids=[m[0].split("/")[0] for m in MANIFEST_UD])
def test_every_shared_treebank_reads_with_manifest_counts(shared_data, name, sentences, words):
    path = shared_data / "ud" / name
    stats = ConlluStats()
    records = list(read_conllu(path, stats=stats))
    assert len(records) == sentences == stats.sentences
    assert sum(len(r) for r in records) == words
    assert not stats.skipped
    lang = path.name.split("_")[0]
    for r in records:
        assert r.lang == lang
        r.validate()
        # every word's span points at its surface form in the sentence text
        for s, e in r.spans:
            assert 0 <= s < e <= len(r.text)


def test_multiword_tokens_share_the_surface_span(example_conllu):
    de = [r for r in read_conllu(example_conllu) if r.sent_id == "de-1"][0]
    assert de.words == ["Der", "Hund", "läuft", "zu", "dem", "Haus", "."]
    assert de.spans[3] == de.spans[4] == (15, 18)
    assert de.text[15:18] == "zum"
    assert de.spans[5] == (19, 23) and de.spans[6] == (23, 24)


def test_comments_and_relation_subtypes(example_conllu):
    rec = list(read_conllu(example_conllu))[1]
    assert rec.sent_id == "en-2"
    assert rec.text == "A hearing is scheduled on the issue today."
    assert rec.deprels[1] == "nsubj" and rec.deprels[2] == "aux" and rec.deprels[7] == "obl"


def test_empty_nodes_are_skipped_and_text_is_rebuilt_when_missing():
    text = "\n".join([
        "1\tI\tI\tPRON\t_\t_\t2\tnsubj\t_\t_",
        "2\tgo\tgo\tVERB\t_\t_\t0\troot\t_\t_",
        "2.1\tgo\tgo\tVERB\t_\t_\t_\t_\t0:root\t_",
        "3\thome\thome\tADV\t_\t_\t2\tadvmod\t_\tSpaceAfter=No",
        "4\t!\t!\tPUNCT\t_\t_\t2\tpunct\t_\t_",
        "",
    ])
    stats = ConlluStats()
    (rec,) = parse_conllu(text, stats=stats)
    assert rec.words == ["I", "go", "home", "!"]
    assert rec.text == "I go home!" and rec.spans == [(0, 1), (2, 4), (5, 9), (9, 10)]
    assert stats.text_rebuilt == 1


GOOD = ["# sent_id = ok", "1\tA\ta\tDET\t_\t_\t2\tdet\t_\t_", "2\tcat\tcat\tNOUN\t_\t_\t0\troot\t_\t_", ""]
A, CAT = GOOD[1], GOOD[2]


def mwt(ids: str) -> str:
    return f"{ids}\tAcat" + "\t_" * 8


@pytest.mark.parametrize(("lines", "line", "problem"), [
    (["1\tA\ta\tDET\t_\t_\t2\tdet", "2\tcat\tcat\tNOUN\t_\t_\t0\troot\t_\t_"], 1, "10 tab-separated columns, found 8"),
    (["1\tA\ta\tDET\t_\t_\tx\tdet\t_\t_", "2\tcat\tcat\tNOUN\t_\t_\t0\troot\t_\t_"], 1, "not an integer"),
    (["1\tA\ta\tDET\t_\t_\t7\tdet\t_\t_", "2\tcat\tcat\tNOUN\t_\t_\t0\troot\t_\t_"], 1, "outside the sentence"),
    (["1\tA\ta\tDET\t_\t_\t2\tdet\t_\t_", "2\tcat\tcat\tNOUN\t_\t_\t1\tnsubj\t_\t_"], 1, "no root"),
    (["1\tA\ta\tDET\t_\t_\t0\troot\t_\t_", "2\tcat\tcat\tNOUN\t_\t_\t0\troot\t_\t_"], 1, "2 roots"),
    (["1\tA\ta\tDET\t_\t_\t2\tdet\t_\t_", "2\tcat\tcat\tNOUN\t_\t_\t3\tnsubj\t_\t_",
      "3\tsat\tsit\tVERB\t_\t_\t2\tcop\t_\t_", "4\t.\t.\tPUNCT\t_\t_\t0\troot\t_\t_"], 2, "cycle"),
    (["# sent_id = nothing", "# text = "], 1, "empty sentence"),
    ([mwt("1-3"), A, CAT], 1, "multiword token 1-3 covers words 1..3 but the sentence has 2 words"),
    ([A, CAT, mwt("3-4")], 3, "multiword token 3-4 covers words 3..4 but the sentence has 2 words"),
    ([A, mwt("1-2"), CAT], 2, "multiword token 1-2 must come right before word 1; here it comes before word 2"),
    ([mwt("0-1"), A, CAT], 1, "bad multiword-token range '0-1'"),
    ([mwt("1-1"), A, CAT], 1, "bad multiword-token range '1-1'"),
    ([mwt("1-2"), A, mwt("2-3"), CAT, "3\t.\t.\tPUNCT\t_\t_\t2\tpunct\t_\t_"], 3, "overlaps multiword token 1-2"),
    (["\u0661\tA\ta\tDET\t_\t_\t2\tdet\t_\t_", CAT], 1, "word id '\u0661' out of sequence"),
    ([A.replace("\t2\t", "\t\u0662\t"), CAT], 1, "head '\u0662' of word 1 is not an integer"),
])
def test_bad_sentences_name_file_line_and_problem(tmp_path, lines, line, problem):
    path = tmp_path / "bad.conllu"
    path.write_text("\n".join(GOOD + lines) + "\n", encoding="utf-8")
    bad_line = len(GOOD) + line
    with pytest.raises(ConlluError) as err:
        list(read_conllu(path))
    assert f"{path}:{bad_line}:" in str(err.value)
    assert problem in str(err.value)
    stats = ConlluStats()
    kept = list(read_conllu(path, skip_invalid=True, stats=stats))
    assert [r.sent_id for r in kept] == ["ok"]
    assert len(stats.skipped) == 1 and f"{path}:{bad_line}:" in stats.skipped[0]


def test_a_byte_order_mark_is_not_part_of_the_first_line(tmp_path):
    path = tmp_path / "bom.conllu"
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(GOOD).encode("utf-8"))
    (rec,) = read_conllu(path)
    assert rec.sent_id == "ok" and rec.words == ["A", "cat"]


def test_a_file_that_is_not_utf8_names_line_and_byte_offset(tmp_path):
    path = tmp_path / "latin1.conllu"
    path.write_bytes("\n".join(GOOD[:2] + ["2\tcafé\tcafé\tNOUN\t_\t_\t0\troot\t_\t_", ""]).encode("latin-1"))
    # "# sent_id = ok\n" is 15 bytes, the word line of "A" 24, then "2\tcaf" 5: the é (0xe9) is byte 44
    expected = f"{path}:3: not UTF-8 text (byte b'\\xe9' at byte offset 44); convert the file to UTF-8"
    for skip_invalid in (False, True):  # the whole file is unreadable: skipping sentences cannot help
        with pytest.raises(ConlluError) as err:
            list(read_conllu(path, skip_invalid=skip_invalid))
        assert expected in str(err.value)
    for fmt in ("conllu", "text"):
        res = CliRunner().invoke(main, ["parse", "--input", str(path), "--format", fmt, "--lang", "en", "--output",
                                        str(tmp_path / "o.jsonl"), "--parser", "chain", "--cache-dir",
                                        str(tmp_path / "c")])
        assert res.exit_code == 1 and expected in res.output and "--skip-invalid" not in res.output


def test_write_then_read_round_trips(example_conllu, tmp_path):
    records = list(read_conllu(example_conllu))
    out = tmp_path / "copy.conllu"
    assert write_conllu(records, out) == 3
    again = list(read_conllu(out, lang=""))
    for a, b in zip(records, again):
        assert (a.words, a.heads, a.upos, a.deprels, a.spans, a.text, a.sent_id) == \
               (b.words, b.heads, b.upos, b.deprels, b.spans, b.text, b.sent_id)
