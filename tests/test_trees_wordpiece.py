"""SentencePiece (XLM-R) inputs -> wordpiece trees: the `▁` word-start marker, marker-only pieces,
NFKC-normalised characters, the RoBERTa special-token layout, and real text in several scripts."""

from __future__ import annotations

import itertools
import unicodedata

import numpy as np
import pytest

from xsyn.syntax.conllu import read_conllu
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.vocab import UPOS_SPECIAL_ID
from xsyn.trees.wordpiece import ROOT, SpecialTokens, WordpieceAligner, text_units

MARKER = "▁"
# transformers' XLMRobertaTokenizer pipeline (whitespace split, then the marker) and the hub's older
# tokenizer.json one (the marker alone: a piece's offsets then include the space before it)
PRE_TOKENIZERS = ("whitespace_split", "metaspace_only")


def sentencepiece_tokenizer(pieces: list[str], pre_tokenizer: str = "whitespace_split"):
    """transformers' own XLM-R tokenizer class over a hand-made Unigram vocabulary, normalising NFKC
    as XLM-R's SentencePiece model does (equal scores: the segmentation with fewest pieces wins)."""
    from tokenizers import normalizers, pre_tokenizers
    from transformers import XLMRobertaTokenizer

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tokenizer = XLMRobertaTokenizer(vocab=[(p, 0.0) for p in specials] + [(p, -1.0) for p in pieces])
    tokenizer.backend_tokenizer.normalizer = normalizers.NFKC()
    if pre_tokenizer == "metaspace_only":
        tokenizer.backend_tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=MARKER,
                                                                             prepend_scheme="always")
    return tokenizer


HAND_PIECES = ["▁", "▁the", "▁dog", "s", "他", "说", "▁fi", "ne", "▁Dog"]


def pieces(tokenizer, tree) -> list[str]:
    return tokenizer.convert_ids_to_tokens(tree.input_ids.tolist())


@pytest.mark.parametrize("pre_tokenizer", PRE_TOKENIZERS)
def test_a_marker_only_piece_is_the_first_piece_of_the_word_it_starts(pre_tokenizer):
    tokenizer = sentencepiece_tokenizer(HAND_PIECES, pre_tokenizer)
    # 他 -nsubj-> 说 (root) <-obj- dogs -det-> the
    record = SyntaxRecord(["他", "说", "the", "dogs"], [2, 0, 4, 2], ["PRON", "VERB", "DET", "NOUN"],
                          ["nsubj", "root", "det", "obj"], spans=[(0, 1), (1, 2), (3, 6), (7, 11)],
                          text="他说 the dogs")
    (tree,) = WordpieceAligner(tokenizer).encode([record])
    assert pieces(tokenizer, tree) == ["<s>", "▁", "他", "说", "▁the", "▁dog", "s", "</s>"]
    assert tree.word_index.tolist() == [-1, 0, 0, 1, 2, 3, 3, -1]
    #                                <s>   ▁  他  说 ▁the ▁dog  s  </s>
    assert tree.parent.tolist() == [ROOT, 3, 1, 0, 5, 3, 5, 0]
    assert tree.unaligned == tree.wordless == 0
    # the marker is an empty span where 他 starts; ▁the starts at "t", not at the space before it
    assert tree.source[1:7].tolist() == [[0, 0], [0, 1], [1, 2], [3, 6], [7, 10], [10, 11]]


@pytest.mark.parametrize("pre_tokenizer", PRE_TOKENIZERS)
def test_nfkc_normalised_characters_align_on_the_original_text(pre_tokenizer):
    tokenizer = sentencepiece_tokenizer(HAND_PIECES, pre_tokenizer)
    text = "ﬁne Ｄｏｇ"  # the ﬁ ligature and full-width letters: "fine Dog" after NFKC
    record = SyntaxRecord(["ﬁne", "Ｄｏｇ"], [2, 0], ["ADJ", "NOUN"], ["amod", "root"],
                          spans=[(0, 3), (4, 7)], text=text)
    (tree,) = WordpieceAligner(tokenizer).encode([record])
    assert pieces(tokenizer, tree) == ["<s>", "▁fi", "ne", "▁Dog", "</s>"]
    assert tree.word_index.tolist() == [-1, 0, 0, 1, -1]
    assert tree.parent.tolist() == [ROOT, 3, 1, 0, 0]
    assert [text[a:b] for a, b in tree.source[1:4].tolist()] == ["ﬁ", "ne", "Ｄｏｇ"]


def test_text_units_drop_leading_spaces_and_give_markers_the_next_pieces_start():
    text = "the 他说 x"
    tokens = ["▁the", "▁", "他", "说", "▁", "x", "▁"]
    offsets = [(0, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 8), (8, 8)]
    assert text_units(text, tokens, offsets, MARKER) == [(0, 3), (4, 4), (4, 5), (5, 6), (7, 7), (7, 8), None]
    # BERT has no marker: a "▁"-free piece keeps its offsets
    assert text_units("a b", ["a", "b"], [(0, 1), (2, 3)]) == [(0, 1), (2, 3)]


def test_pairs_take_the_tokenizers_own_special_tokens_and_types(small_tokenizer):
    xlmr = sentencepiece_tokenizer(HAND_PIECES)
    a = SyntaxRecord(["the", "dogs"], [2, 0], ["DET", "NOUN"], ["det", "root"], spans=[(0, 3), (4, 8)],
                     text="the dogs")
    b = SyntaxRecord(["他", "说"], [2, 0], ["PRON", "VERB"], ["nsubj", "root"], spans=[(0, 1), (1, 2)], text="他说")
    (tree,) = WordpieceAligner(xlmr).encode([a, b])
    assert tree.input_ids.tolist() == xlmr("the dogs", "他说")["input_ids"]  # <s> A </s></s> B </s>
    assert pieces(xlmr, tree) == ["<s>", "▁the", "▁dog", "s", "</s>", "</s>", "▁", "他", "说", "</s>"]
    assert tree.token_type_ids.tolist() == [0] * 10  # RoBERTa has one token type
    assert tree.parent.tolist() == [ROOT, 2, 0, 2, 0, 0, 8, 6, 0, 0]
    assert tree.segment_id.tolist() == [-1, 0, 0, 0, -1, -1, 1, 1, 1, -1]
    assert tree.upos[[0, 4, 5, 9]].tolist() == [UPOS_SPECIAL_ID] * 4
    # BERT keeps [CLS] A [SEP] B [SEP] with types 0 then 1
    layout = SpecialTokens.of(small_tokenizer.backend_tokenizer)
    assert (layout.count(2), layout.types([2, 3])) == (3, [0, 0, 0, 0, 1, 1, 1, 1])
    assert SpecialTokens.of(xlmr.backend_tokenizer).count(2) == 4


def test_the_length_budget_counts_every_special_token():
    xlmr = sentencepiece_tokenizer(HAND_PIECES)
    a = SyntaxRecord(["dogs"] * 4, [0, 1, 1, 1], ["NOUN"] * 4, ["root", "dep", "dep", "dep"],
                     spans=[(0, 4), (5, 9), (10, 14), (15, 19)], text="dogs dogs dogs dogs")
    (tree,) = WordpieceAligner(xlmr, max_length=10).encode([a, a])  # 16 pieces + 4 specials: 6 pieces fit
    assert len(tree) == 10 and tree.truncated == 10
    assert pieces(xlmr, tree).count("</s>") == 3


# -- real text in several scripts ------------------------------------------------------------------

TREEBANKS = {  # script: (treebank folder, file)
    "Latin": ("UD_English-EWT", "en_ewt-ud-dev.conllu"),
    "Han": ("UD_Chinese-GSD", "zh_gsd-ud-dev.conllu"),
    "Arabic": ("UD_Arabic-PUD", "ar_pud-ud-test.conllu"),
    "Devanagari": ("UD_Hindi-PUD", "hi_pud-ud-test.conllu"),
    "Cyrillic": ("UD_Russian-GSD", "ru_gsd-ud-dev.conllu"),
}


def _check_alignment(tokenizer, records, trees) -> dict[str, int]:
    """Check each word's pieces against its own text, independently of the aligner: joined, with the
    markers removed, they are the NFKC form of the word (where no piece is shared with another word);
    a word's first piece hangs from its head's first piece, its other pieces from its first.
    Returns counts of what was checked."""
    counts = {"words": 0, "checked": 0, "markers": 0}
    for record, tree in zip(records, trees):
        tokens = pieces(tokenizer, tree)
        assert tree.unaligned == 0  # UD words cover every non-space character
        by_word: dict[int, list[int]] = {}
        for p, w in enumerate(tree.word_index.tolist()):
            if w >= 0:
                by_word.setdefault(w, []).append(p)
        for p, token in enumerate(tokens):
            if token == MARKER:  # a marker-only piece starts its word
                counts["markers"] += 1
                assert by_word[tree.word_index[p]][0] == p
        for w, ps in by_word.items():
            counts["words"] += 1
            start, end = record.spans[w]
            word_text = record.text[start:end]
            others = [(a, b) for p, (a, b) in enumerate(tree.source.tolist()) if tree.word_index[p] not in (-1, w)]
            if (any(a < start or b > end for a, b in tree.source[ps].tolist())
                    or any(a < end and b > start for a, b in others)):
                continue  # a piece shared with a neighbour (no space between them: Chinese, Arabic clitics)
            counts["checked"] += 1
            joined = "".join(tokens[p] for p in ps).replace(MARKER, "")
            if "<unk>" not in joined:
                assert joined == unicodedata.normalize("NFKC", word_text), (record.sent_id, word_text)
            first = ps[0]
            head = record.heads[w] - 1
            expected = 0 if head < 0 else by_word.get(head, [None])[0]
            if expected is not None:  # (a word inside a multiword token may have no piece of its own)
                assert tree.parent[first] == expected
            assert all(tree.parent[p] == first for p in ps[1:])
    return counts


@pytest.mark.parametrize("pre_tokenizer", PRE_TOKENIZERS)
@pytest.mark.parametrize("script", sorted(TREEBANKS))
def test_real_treebank_text_aligns_in_every_script(xlmr_tokenizer, shared_data, script, pre_tokenizer):
    from tokenizers import pre_tokenizers

    folder, name = TREEBANKS[script]
    path = shared_data / "ud" / folder / name
    if not path.is_file():
        pytest.skip(f"{path} not found (UD treebank in ../shared/data)")
    if pre_tokenizer == "metaspace_only":
        from tokenizers import Tokenizer
        from transformers import PreTrainedTokenizerFast

        backend = Tokenizer.from_str(xlmr_tokenizer.backend_tokenizer.to_str())
        backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement=MARKER, prepend_scheme="always")
        xlmr_tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, **xlmr_tokenizer.special_tokens_map)
    records = [r for r in itertools.islice(read_conllu(path), 60) if r.spans is not None]
    assert len(records) == 60
    aligner = WordpieceAligner(xlmr_tokenizer, max_length=512)
    trees = [aligner.encode([r])[0] for r in records]
    counts = _check_alignment(xlmr_tokenizer, records, trees)
    assert counts["checked"] >= 0.8 * counts["words"], counts


def test_fixture_tokenizer_sees_nfkc_forms_in_real_text(xlmr_tokenizer, shared_data):
    """Real Arabic and Hindi text holds characters NFKC rewrites; the pieces still join to each word."""
    records = []
    for folder, name in (TREEBANKS["Arabic"], TREEBANKS["Devanagari"]):
        path = shared_data / "ud" / folder / name
        if not path.is_file():
            pytest.skip(f"{path} not found (UD treebank in ../shared/data)")
        records += [r for r in read_conllu(path)
                    if unicodedata.normalize("NFKC", r.text) != r.text][:10]
    assert records, "no sentence with NFKC-changed characters found"
    aligner = WordpieceAligner(xlmr_tokenizer)
    trees = [aligner.encode([r])[0] for r in records]
    assert _check_alignment(xlmr_tokenizer, records, trees)["checked"] > 0


def test_thai_tokens_of_panx_align_as_gold_tokens(xlmr_tokenizer, shared_data):
    """Thai (no spaces between words) occurs in the shared data only as PAN-X tokens: each pre-tokenised
    token's pieces start with the marker and join to the token."""
    import re

    thai = re.compile("[\u0e01-\u0e5b]")
    path = shared_data / "panx" / "test-zh.tsv"
    if not path.is_file():
        pytest.skip(f"{path} not found (PAN-X in ../shared/data)")
    sentences, current = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            if any(thai.search(t) for t in current):
                sentences.append(current)
            current = []
        else:
            current.append(line.split("\t")[0])
    assert sentences, "no PAN-X sentence with Thai"
    aligner = WordpieceAligner(xlmr_tokenizer)
    for tokens in sentences:
        n = len(tokens)
        record = SyntaxRecord(tokens, list(range(0, n)), ["X"] * n, ["dep"] * n, token_index=list(range(n)),
                              text=" ".join(tokens))
        (tree,) = aligner.encode([record])
        words = tree.word_index.tolist()
        ps = pieces(xlmr_tokenizer, tree)
        for w, token in enumerate(tokens):
            own = [p for p, x in enumerate(words) if x == w]
            assert ps[own[0]].startswith(MARKER)
            joined = "".join(ps[p] for p in own).replace(MARKER, "")
            if thai.search(token) and "<unk>" not in joined:
                assert joined == unicodedata.normalize("NFKC", token)
        assert tree.unaligned == 0 and np.all(tree.parent[1:-1] >= 0)


def test_a_window_of_a_very_deep_tree_carries_a_bounded_number_of_ancestors(mbert_tokenizer):
    """A chain parse of a 5,000-word row: each 64-piece window keeps at most 64 removed ancestors as extra
    nodes (not the 5,000 words after it, which the tree tensors would square), and stays a tree."""
    from xsyn.syntax.parsing.chain import ChainParser

    aligner = WordpieceAligner(mbert_tokenizer, max_length=64)
    (record,) = ChainParser().parse_texts([" ".join(f"w{i % 40}" for i in range(5000))], "xx")
    trees = aligner.encode([record], stride=16, window_segment=0)
    assert len(trees) > 100
    for tree in trees:
        assert len(tree.input_ids) <= 64 and len(tree.parent) <= 2 * 64
        parent = tree.parent.tolist()
        for start in range(len(parent)):  # every node reaches the root without a cycle
            node, steps = start, 0
            while parent[node] >= 0 and steps <= len(parent):
                node, steps = parent[node], steps + 1
            assert steps <= len(parent)


def test_windows_deep_into_a_row_of_over_32767_words_keep_word_indices_within_int16(small_tokenizer):
    """A 40,000-word row (a book pasted as one input): the windows past word 32,767 count words from their
    first one; neighbouring pieces still share a word exactly when they did, and earlier windows are as before."""
    from xsyn.syntax.parsing.chain import ChainParser

    aligner = WordpieceAligner(small_tokenizer, max_length=512)
    (record,) = ChainParser().parse_texts([" ".join(["the", "unbelievable"] * 20_000)], "xx")
    (whole,) = aligner.segment_pieces([record])
    trees = aligner.encode([record], stride=128, window_segment=0)
    deep = 0
    for tree in trees:
        lo, hi = tree.window
        true = np.asarray(whole.word_index[lo:hi])
        got = tree.word_index[1:-1].astype(np.int64)
        assert np.array_equal(np.diff(got), np.diff(true))  # the same pieces continue a word
        if true.max() > np.iinfo(np.int16).max:
            deep += 1
            assert 0 <= got.min() and got.max() < 512
        else:
            assert np.array_equal(got, true)
    assert deep > 10 and trees[-1].window[1] == len(whole.ids) == 80_000
