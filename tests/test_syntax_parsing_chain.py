"""`--parser chain`: the regex words it chains, in every script."""

from __future__ import annotations

import pytest

from xsyn.syntax.parsing.chain import ChainParser


@pytest.mark.parametrize("text, words", [
    ("उसने किताब पढ़ी।", ["उसने", "किताब", "पढ़ी", "।"]),  # Devanagari vowel signs and nukta are marks
    ("كَتَبَ الوَلَدُ", ["كَتَبَ", "الوَلَدُ"]),  # Arabic harakat
    ("ภาษาไทย ง่าย", ["ภาษาไทย", "ง่าย"]),  # Thai vowels and tone marks above and below
    ("don't stop-gap, 3.5!", ["don't", "stop-gap", ",", "3", ".", "5", "!"]),
    ("我爱北京", ["我", "爱", "北", "京"]),
])
def test_words_keep_their_combining_marks(text, words):
    (record,) = ChainParser().parse_texts([text], "xx")
    assert record.words == words
    assert [text[start:end] for start, end in record.spans] == words
    assert record.heads == [*range(2, len(words) + 1), 0]
    assert [u == "PUNCT" for u in record.upos] == [w in "।,.!" for w in words]
