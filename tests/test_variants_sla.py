"""The `sla` variant's own behaviour (the checks every variant passes: test_models_variants.py): on tiny random BERTs,
against plain transformers `BertModel` with the same weights, attention probabilities recomputed from the definition,
or values worked out by hand; and here, what `reproduce=li2021` gives it (Li et al.'s released code,
Neutralzz/syntax_aware_local_attention, src/dataset.py), worked out by hand."""

from __future__ import annotations

import numpy as np
from variant_models import check_gated_mix

from xsyn.syntax.record import SyntaxRecord
from xsyn.trees.batch import collate_trees
from xsyn.trees.conventions import InputConventions
from xsyn.trees.tensors import TreeTensors
from xsyn.trees.wordpiece import WordpieceAligner

# [CLS] the dog is big | a cat is small [SEP]: two sentences, each root under [CLS]
TWO_SENTENCES = SyntaxRecord(["the", "dog", "is", "big", "a", "cat", "is", "small"], [2, 4, 4, 0, 6, 8, 8, 0],
                             ["DET", "NOUN", "AUX", "ADJ"] * 2, ["det", "nsubj", "cop", "root"] * 2,
                             spans=[(0, 3), (4, 7), (8, 10), (11, 14), (15, 16), (17, 20), (21, 23), (24, 29)],
                             text="the dog is big a cat is small", sentence_starts=[0, 4])


def sla(tokenizer, record, m, across, conventions=None):
    (tree,) = WordpieceAligner(tokenizer, conventions=conventions).encode([record])
    return TreeTensors.from_batch(collate_trees([tree])).sla_mask(m, punct_visible=True, across_sentences=across)[0]


def test_sentences_are_never_local_through_cls_as_in_the_released_graph(small_tokenizer):
    """dataset.py's graph has an edge per non-root word and none to [CLS]: words of two sentences are not
    connected. At m = 2, xsyn's tree puts "big" and "small" (the roots) 2 apart through [CLS]; so "is" (3) sees
    "small" through its neighbour "big", and "small" (8) and its neighbour "is" (7) see "big". Linear neighbours
    still cross: "big" (4) sees "small" through "a" (5), which is 2 from it inside its own sentence."""
    xsyn, code = sla(small_tokenizer, TWO_SENTENCES, 2, True), sla(small_tokenizer, TWO_SENTENCES, 2, False)
    assert sorted(map(tuple, np.argwhere((xsyn != code).numpy()).tolist())) == [(3, 8), (7, 4), (8, 4)]
    assert xsyn[3, 8] and not code[3, 8] and code[4, 8]
    assert code[:, 0].all() and code[:, 9].all()  # [CLS] and [SEP] stay visible


def test_ascii_punctuation_is_local_to_every_word_as_the_released_mask_opens_it(small_tokenizer):
    """With punctuation="ascii" a "." piece is open from every row across the sentences too; without
    `sla_punct_visible` nothing is (the paper)."""
    record = SyntaxRecord(["the", "dog", "is", "big", ".", "a", "cat", "is", "small"], [2, 4, 4, 0, 4, 7, 9, 9, 0],
                          ["DET", "NOUN", "AUX", "ADJ", "PUNCT", "DET", "NOUN", "AUX", "ADJ"],
                          ["det", "nsubj", "cop", "root", "punct", "det", "nsubj", "cop", "root"],
                          spans=[(0, 3), (4, 7), (8, 10), (11, 14), (14, 15), (16, 17), (18, 21), (22, 24), (25, 30)],
                          text="the dog is big. a cat is small", sentence_starts=[0, 5])
    ascii = InputConventions(punctuation="ascii")
    code = sla(small_tokenizer, record, 1, False, ascii)
    assert code[:, 5].all()  # "." from every row, "small" (9) included
    (tree,) = WordpieceAligner(small_tokenizer, conventions=ascii).encode([record])
    paper = TreeTensors.from_batch(collate_trees([tree])).sla_mask(1, punct_visible=False)[0]
    assert not paper[9, 5]


def test_gated_attention_mixes_local_and_global_probabilities(plain, batch):
    """Its gate mixes the local attention over pieces at most 3 tree hops apart with BERT's attention."""
    check_gated_mix(plain, batch, "sla", lambda tree: tree.sla_mask(3))
