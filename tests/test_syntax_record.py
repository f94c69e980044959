"""The syntax record: validation, gold trees from callers, multi-sentence segments, JSON Lines."""

from __future__ import annotations

import pytest

from xsyn.syntax.record import SyntaxRecord, TreeError, read_jsonl, write_jsonl


def test_gold_tree_from_words_gets_text_and_spans():
    rec = SyntaxRecord.from_words(["big", "dog", "barks"], [2, 3, 0], ["ADJ", "NOUN", "VERB"],
                                  ["amod", "nsubj", "root"], lang="xx")
    assert rec.text == "big dog barks"
    assert rec.spans == [(0, 3), (4, 7), (8, 13)]


@pytest.mark.parametrize(("heads", "message"), [
    ([2, 0, 0], "2 roots"),
    ([2, 3, 1], "no root"),
    ([2, 0, 9], "word 3 has head 9"),
    ([1, 0, 2], "word 1 is its own head"),
    ([0, 3, 2], "cycle among words 2 -> 3 -> 2"),
])
def test_invalid_trees_are_rejected_with_the_word_named(heads, message):
    with pytest.raises(TreeError, match=message):
        SyntaxRecord.from_words(["a", "b", "c"], heads, ["X"] * 3, ["dep"] * 3)


def test_empty_segment_is_rejected():
    with pytest.raises(TreeError, match="empty sentence"):
        SyntaxRecord([], [], [], []).validate()


def test_relation_subtypes_are_reduced_to_the_universal_part():
    rec = SyntaxRecord.from_words(["it", "was", "seen"], [3, 3, 0], ["PRON", "AUX", "VERB"],
                                  ["nsubj:pass", "aux:pass", "root"])
    assert rec.deprels == ["nsubj", "aux", "root"]


def test_concatenated_sentences_keep_one_root_each():
    a = SyntaxRecord.from_words(["dogs", "bark"], [2, 0], ["NOUN", "VERB"], ["nsubj", "root"])
    b = SyntaxRecord.from_words(["cats", "sleep", "."], [2, 0, 2], ["NOUN", "VERB", "PUNCT"],
                                ["nsubj", "root", "punct"])
    ctx = SyntaxRecord.concatenate([a, b])
    assert ctx.text == "dogs bark cats sleep ."
    assert ctx.heads == [2, 0, 4, 0, 4]
    assert ctx.sentence_starts == [0, 2]
    assert ctx.spans[2] == (10, 14) and ctx.text[slice(*ctx.spans[3])] == "sleep"
    ctx.validate()
    with pytest.raises(TreeError, match="2 roots"):
        SyntaxRecord(ctx.words, ctx.heads, ctx.upos, ctx.deprels, spans=ctx.spans).validate()


def _characters(words, heads):
    """A pre-tokenised record whose words cover runs of one-character gold tokens."""
    starts = [sum(map(len, words[:i])) for i in range(len(words))]
    return SyntaxRecord(words, heads, ["X"] * len(words), ["dep"] * len(words), token_index=starts,
                        token_end=[s + len(w) for s, w in zip(starts, words)],
                        text=" ".join("".join(words)), lang="zh")


def test_words_over_several_gold_tokens_keep_their_ranges_through_concatenation_and_json():
    first, second = _characters(["我", "爱", "北京"], [2, 0, 2]), _characters(["天安门", "大"], [0, 1])
    assert first.units() == [(0, 1), (1, 2), (2, 4)]
    joined = SyntaxRecord.concatenate([first, second])
    assert joined.units() == [(0, 1), (1, 2), (2, 4), (4, 7), (7, 8)]
    assert joined.text == "我 爱 北 京 天 安 门 大"  # the gold tokens
    assert SyntaxRecord.from_dict(joined.to_dict()) == joined


def test_a_word_that_covers_no_gold_token_is_named():
    record = _characters(["我", "爱"], [2, 0])
    record.token_end = [1, 1]
    with pytest.raises(TreeError, match=r"word 2 \('爱'\) covers no gold token"):
        record.validate()


def test_jsonl_round_trip_is_atomic_and_complete(tmp_path):
    recs = [SyntaxRecord.from_words(["a", "b"], [2, 0], ["X", "X"], ["dep", "root"], lang="en", sent_id="s1"),
            SyntaxRecord(["zu", "dem"], [0, 1], ["ADP", "DET"], ["root", "det"], token_index=[0, 0],
                         text="zum", lang="de")]
    path = tmp_path / "out" / "records.jsonl"
    assert write_jsonl(recs, path) == 2
    assert list(path.parent.iterdir()) == [path]  # no temp file left behind
    back = list(read_jsonl(path))
    assert [r.to_dict() for r in back] == [r.to_dict() for r in recs]


def test_a_corrupt_jsonl_line_is_named(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"words": ["a"], "heads": [0], "upos": ["X"], "deprels": ["root"]}\n{"words": [\n')
    with pytest.raises(TreeError, match=r"r.jsonl:2: not a syntax record"):
        list(read_jsonl(path))
