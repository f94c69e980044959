"""Structural-probe metrics (Hewitt and Manning 2019), at word level against the gold tree.

A probe predicts, for each sentence, a distance between every two words and a depth for every
word. Each word is one node (its first word piece); special tokens are not words. Following
Hewitt and Manning's evaluation:

- UUAS: the minimum spanning tree of the predicted distances over the non-punctuation words,
  scored as the fraction of gold undirected edges (between two non-punctuation words) it
  contains, over the whole corpus.
- distance Spearman (DSpr.): the Spearman correlation of each word's row of predicted distances
  with its row of tree distances, averaged over the sentences of each length, then over the
  lengths 5 to 50.
- root accuracy: how often the shallowest non-punctuation word is the gold root.
- norm Spearman (NSpr.): the Spearman correlation of predicted depths with tree depths per
  sentence, averaged per length, then over the lengths 5 to 50.

All values are fractions in [0, 1]. A Spearman correlation over a constant prediction is
undefined; it counts as 0 (no rank information) rather than being left out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np
from scipy.stats import rankdata

from xsyn.syntax.record import validate_heads

METRICS = ("uuas", "dist_spearman", "root_acc", "norm_spearman")  # the keys of `ProbeEvaluator.result()`
SPEARMAN_LENGTHS = (5, 50)


def tree_distances(heads: Sequence[int]) -> np.ndarray:
    """(n, n) hop counts between the words of one tree given by 1-based heads (0 = root)."""
    depth = tree_depths(heads)
    n = len(heads)
    ancestors = np.zeros((n, n), dtype=bool)  # [i, a]: a is i or one of its ancestors
    for i in range(n):
        node = i
        while node >= 0:
            ancestors[i, node] = True
            node = heads[node] - 1
    common = ancestors.astype(np.int64) @ ancestors.T.astype(np.int64)  # shared ancestors = depth(lca) + 1
    return depth[:, None] + depth[None, :] - 2 * (common - 1)


def tree_depths(heads: Sequence[int]) -> np.ndarray:
    """(n,) edges from each word to the root (the root has depth 0)."""
    validate_heads(heads)
    depth = [-1] * len(heads)
    for start in range(len(heads)):
        path, node = [], start
        while node >= 0 and depth[node] < 0:  # climb to a word of known depth, or above the root
            path.append(node)
            node = heads[node] - 1
        known = depth[node] if node >= 0 else -1
        for step, word in enumerate(reversed(path), 1):
            depth[word] = known + step
    return np.asarray(depth, dtype=np.int64)


def minimum_spanning_edges(distances: np.ndarray) -> set[tuple[int, int]]:
    """Undirected edges (i < j) of a minimum spanning tree (Prim's algorithm; ties -> lower index)."""
    n = distances.shape[0]
    if n < 2:
        return set()
    in_tree = np.zeros(n, dtype=bool)
    in_tree[0] = True
    best = distances[0].astype(np.float64).copy()
    link = np.zeros(n, dtype=np.int64)
    edges = set()
    for _ in range(n - 1):
        candidates = np.where(in_tree, np.inf, best)
        j = int(np.argmin(candidates))
        i = int(link[j])
        edges.add((min(i, j), max(i, j)))
        in_tree[j] = True
        closer = distances[j] < best
        best = np.where(closer, distances[j], best)
        link = np.where(closer, j, link)
    return edges


def spearman_rows(predicted: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Spearman correlation of each row of `predicted` with the same row of `gold` (ties averaged)."""
    a = rankdata(np.atleast_2d(predicted), axis=1)
    b = rankdata(np.atleast_2d(gold), axis=1)
    a -= a.mean(axis=1, keepdims=True)
    b -= b.mean(axis=1, keepdims=True)
    denominator = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    numerator = (a * b).sum(axis=1)
    return np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)


class ProbeEvaluator:
    """Accumulates probe predictions sentence by sentence; `result()` gives the four metrics.

    >>> evaluator = ProbeEvaluator()
    >>> evaluator.add(predicted_distances, predicted_depths, record.heads, record.upos)
    >>> evaluator.result()   # {"uuas": ..., "dist_spearman": ..., "root_acc": ..., ...}
    """

    def __init__(self, lengths: tuple[int, int] = SPEARMAN_LENGTHS):
        self.lengths = lengths
        self.sentences = 0
        self.edges_correct = 0
        self.edges_total = 0
        self.roots_correct = 0
        self.roots_total = 0
        self._distance_rho: dict[int, list[float]] = defaultdict(list)
        self._depth_rho: dict[int, list[float]] = defaultdict(list)

    def add(self, predicted_distances: np.ndarray, predicted_depths: np.ndarray, heads: Sequence[int],
            upos: Sequence[str], words: Sequence[int] | None = None) -> None:
        """One sentence: predictions (m, m) and (m,) over `words` (0-based word indices, in order;
        default all words) of the gold tree `heads` (1-based, 0 = root) with tags `upos`."""
        words = np.arange(len(heads)) if words is None else np.asarray(words, dtype=np.int64)
        m = len(words)
        if predicted_distances.shape != (m, m) or predicted_depths.shape != (m,):
            raise ValueError(f"predictions of shape {predicted_distances.shape} and {predicted_depths.shape} "
                             f"do not cover the {m} evaluated words")
        gold_distances = tree_distances(heads)[np.ix_(words, words)]
        gold_depths = tree_depths(heads)[words]
        self.sentences += 1
        content = np.array([upos[w] != "PUNCT" for w in words], dtype=bool)
        position = {int(w): k for k, w in enumerate(words)}
        kept = np.flatnonzero(content)
        gold_edges = set()
        for k, w in enumerate(words):
            head = position.get(heads[w] - 1) if heads[w] else None
            if content[k] and head is not None and content[head]:
                gold_edges.add((min(k, head), max(k, head)))
        predicted = {(int(kept[i]), int(kept[j]))
                     for i, j in minimum_spanning_edges(predicted_distances[np.ix_(kept, kept)])}
        self.edges_correct += len(gold_edges & predicted)
        self.edges_total += len(gold_edges)
        roots = [position[w] for w in words if heads[w] == 0 and content[position[w]]]
        if roots and len(kept):
            self.roots_total += 1
            self.roots_correct += int(kept[np.argmin(predicted_depths[kept])] == roots[0])
        if self.lengths[0] <= m <= self.lengths[1]:
            self._distance_rho[m].extend(spearman_rows(predicted_distances, gold_distances).tolist())
            self._depth_rho[m].append(float(spearman_rows(predicted_depths, gold_depths)[0]))

    def result(self) -> dict[str, float | int]:
        """The four metrics (NaN where nothing was scored) and the number of sentences."""
        return {
            "uuas": _ratio(self.edges_correct, self.edges_total),
            "dist_spearman": _macro(self._distance_rho),
            "root_acc": _ratio(self.roots_correct, self.roots_total),
            "norm_spearman": _macro(self._depth_rho),
            "n_sentences": self.sentences,
        }


def _ratio(correct: int, total: int) -> float:
    return correct / total if total else float("nan")


def _macro(by_length: Mapping[int, list[float]]) -> float:
    """Mean within each sentence length, then mean over the lengths seen."""
    means = [float(np.mean(values)) for values in by_length.values() if values]
    return float(np.mean(means)) if means else float("nan")
