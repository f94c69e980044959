"""Structural-probe metrics (Hewitt and Manning 2019) against hand-worked sentences and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.csgraph import minimum_spanning_tree, shortest_path
from scipy.stats import spearmanr

from xsyn.pretraining.probe import (
    ProbeEvaluator,
    minimum_spanning_edges,
    spearman_rows,
    tree_depths,
    tree_distances,
)

# "The dog chased the cat ." : chased is the root; dog and cat hang from it, each with its determiner.
HEADS = [2, 3, 0, 5, 3, 3]
UPOS = ["DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT"]
GOLD = np.array([
    [0, 1, 2, 4, 3, 3],
    [1, 0, 1, 3, 2, 2],
    [2, 1, 0, 2, 1, 1],
    [4, 3, 2, 0, 1, 3],
    [3, 2, 1, 1, 0, 2],
    [3, 2, 1, 3, 2, 0],
])
DEPTHS = np.array([2, 1, 0, 2, 1, 1])


def random_tree(rng: np.random.Generator, n: int) -> list[int]:
    """Heads of a random tree: word k > 0 (in a random order) attaches to an earlier word."""
    order = rng.permutation(n)
    heads = [0] * n
    for k in range(1, n):
        heads[order[k]] = int(order[rng.integers(k)]) + 1
    return heads


def test_tree_distances_and_depths_by_hand_and_against_scipy():
    assert tree_distances(HEADS).tolist() == GOLD.tolist()
    assert tree_depths(HEADS).tolist() == DEPTHS.tolist()
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 30):
        heads = random_tree(rng, n)
        adjacency = np.zeros((n, n))
        for i, h in enumerate(heads):
            if h:
                adjacency[i, h - 1] = adjacency[h - 1, i] = 1
        expected = shortest_path(adjacency, unweighted=True).astype(int)
        assert tree_distances(heads).tolist() == expected.tolist()


def test_minimum_spanning_edges_match_scipy():
    rng = np.random.default_rng(1)
    for n in (2, 5, 23):
        weights = rng.random((n, n))
        weights = weights + weights.T
        ours = minimum_spanning_edges(weights)
        theirs = minimum_spanning_tree(np.triu(weights, 1)).nonzero()
        assert ours == {(min(i, j), max(i, j)) for i, j in zip(*theirs, strict=True)}
    assert minimum_spanning_edges(np.zeros((1, 1))) == set()


def test_spearman_rows_match_scipy_with_ties():
    rng = np.random.default_rng(2)
    predicted = rng.integers(0, 4, size=(6, 9)).astype(float)
    gold = rng.integers(0, 4, size=(6, 9)).astype(float)
    expected = [spearmanr(p, g).statistic for p, g in zip(predicted, gold, strict=True)]
    assert np.allclose(spearman_rows(predicted, gold), expected)
    assert spearman_rows(np.ones(5), np.arange(5.0)).tolist() == [0.0]  # constant prediction: no ranks


def test_perfect_predictions_score_one():
    evaluator = ProbeEvaluator()
    evaluator.add(GOLD.astype(float), DEPTHS.astype(float), HEADS, UPOS)
    assert evaluator.result() == {"uuas": 1.0, "dist_spearman": 1.0, "root_acc": 1.0, "norm_spearman": 1.0,
                                  "n_sentences": 1}


def test_uuas_counts_mst_edges_between_content_words():
    # "The" predicted closer to "chased" (0.5) than to "dog": Prim from "The" picks The-chased, then
    # The-dog (tie broken to the lower index), chased-cat, cat-the: 3 of the 4 gold edges.
    predicted = GOLD.astype(float)
    predicted[0, 2] = predicted[2, 0] = 0.5
    # the punctuation mark is nearest to everything, but punctuation takes no part in UUAS
    predicted[5, :5] = predicted[:5, 5] = 0.1
    evaluator = ProbeEvaluator()
    evaluator.add(predicted, DEPTHS.astype(float), HEADS, UPOS)
    assert evaluator.result()["uuas"] == 0.75


def test_root_accuracy_ignores_punctuation():
    right, wrong = ProbeEvaluator(), ProbeEvaluator()
    right.add(GOLD.astype(float), np.array([2, 1, 0.5, 2, 1, 0.0]), HEADS, UPOS)  # "." shallowest, skipped
    wrong.add(GOLD.astype(float), np.array([2, 0.2, 0.5, 2, 1, 0.0]), HEADS, UPOS)  # "dog" above "chased"
    assert right.result()["root_acc"] == 1.0
    assert wrong.result()["root_acc"] == 0.0


def test_spearman_is_averaged_per_length_then_over_lengths():
    five = [2, 0, 2, 5, 3]  # a second tree, of five words
    evaluator = ProbeEvaluator()
    evaluator.add(GOLD.astype(float), DEPTHS.astype(float), HEADS, UPOS)  # six rows of rho = 1
    evaluator.add(-GOLD.astype(float), -DEPTHS.astype(float), HEADS, UPOS)  # six rows of rho = -1
    evaluator.add(tree_distances(five).astype(float), tree_depths(five).astype(float), five, ["X"] * 5)
    evaluator.add(np.zeros((4, 4)), np.zeros(4), [0, 1, 1, 1], ["X"] * 4)  # 4 words: outside 5..50
    result = evaluator.result()
    # length 6: mean(1 x 6, -1 x 6) = 0; length 5: 1; macro over lengths = 0.5 (a mean over rows: 0.29)
    assert result["dist_spearman"] == pytest.approx(0.5)
    assert result["norm_spearman"] == pytest.approx(0.5)
    assert result["n_sentences"] == 4


def test_a_word_without_a_piece_is_left_out_of_gold_too():
    # word 4 ("the", index 3) got no word piece: five words are evaluated, and the gold edge the-cat
    # is gone, so a perfect prediction over the rest still scores 1.0 on the 3 remaining edges.
    kept = [0, 1, 2, 4, 5]
    evaluator = ProbeEvaluator()
    evaluator.add(GOLD[np.ix_(kept, kept)].astype(float), DEPTHS[kept].astype(float), HEADS, UPOS, words=kept)
    assert evaluator.edges_total == 3
    assert evaluator.result()["uuas"] == 1.0
    with pytest.raises(ValueError, match="do not cover the 5 evaluated words"):
        evaluator.add(GOLD.astype(float), DEPTHS.astype(float), HEADS, UPOS, words=kept)


def test_nothing_scored_gives_nan_not_zero():
    result = ProbeEvaluator().result()
    assert np.isnan(result["uuas"]) and np.isnan(result["dist_spearman"]) and result["n_sentences"] == 0
