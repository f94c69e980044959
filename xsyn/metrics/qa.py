"""Extractive QA: exact match and token F1, as SQuAD v1.1's and MLQA's official scripts compute them.

Both normalise an answer by lower-casing, removing punctuation, removing articles and splitting into
tokens, in that order; a question scores the best EM and F1 over its gold answers.

- `squad` (SQuAD v1.1, XQuAD in XTREME): ASCII punctuation, English articles, whitespace tokens.
- `mlqa` (MLQA v1): every Unicode punctuation character, the articles of the **context** language,
  and for `zh` mixed segmentation (each CJK character and each punctuation mark is a token, other
  runs are split on whitespace). As in the official script, Arabic removes every "ال", also inside
  words (its pattern `\\sال^|ال` reduces to `ال`); Hindi and Chinese remove no articles.

The primary score is F1, as Ahmad et al. (2021) report for MLQA and XQuAD; EM is alongside.
Quirks kept from the official scripts so that numbers compare: an answer that normalises to nothing
scores EM 1 but F1 0 against a gold answer that also normalises to nothing.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xsyn.metrics.base import CountTable, Metric, percent

_ASCII_PUNCTUATION = frozenset(string.punctuation)
_CJK = re.compile("[\u4e00-\u9fa5]")  # the range the MLQA script treats as Chinese characters

MLQA_ARTICLES = {
    "en": r"\b(a|an|the)\b",
    "es": r"\b(un|una|unos|unas|el|la|los|las)\b",
    "de": r"\b(ein|eine|einen|einem|eines|einer|der|die|das|den|dem|des)\b",
    "vi": r"\b(của|là|cái|chiếc|những)\b",
    "ar": "ال",
    "hi": None,
    "zh": None,
}


def is_unicode_punctuation(char: str) -> bool:
    """MLQA's punctuation: any Unicode category P*, plus ASCII punctuation symbols such as `$` and `+`."""
    return unicodedata.category(char).startswith("P") or char in _ASCII_PUNCTUATION


def mixed_segmentation(text: str) -> list[str]:
    """MLQA's zh tokens: each CJK character or punctuation mark alone, other runs split on spaces."""
    tokens: list[str] = []
    run = ""
    for char in text:
        if _CJK.match(char) or is_unicode_punctuation(char):
            tokens.extend(run.split())
            run = ""
            tokens.append(char)
        else:
            run += char
    tokens.extend(run.split())
    return tokens


@dataclass(frozen=True)
class AnswerNormalizer:
    """Lower-case, drop punctuation, drop articles, tokenise: `tokens(text)`."""

    is_punctuation: Callable[[str], bool]
    articles: re.Pattern | None
    segment: Callable[[str], list[str]]

    def tokens(self, text: str) -> list[str]:
        text = "".join(char for char in text.lower() if not self.is_punctuation(char))
        if self.articles is not None:
            text = self.articles.sub(" ", text)
        return [token for token in self.segment(text) if token.strip()]


SQUAD_NORMALIZER = AnswerNormalizer(_ASCII_PUNCTUATION.__contains__, re.compile(MLQA_ARTICLES["en"]),
                                    str.split)


def mlqa_normalizer(lang: str) -> AnswerNormalizer:
    """The normaliser of MLQA's evaluation for answers in context language `lang`."""
    if lang not in MLQA_ARTICLES:
        raise ValueError(f"MLQA normalisation knows the languages {', '.join(MLQA_ARTICLES)}, not {lang!r}; "
                         "score other languages (XQuAD's el, ru, th, tr, ...) with the 'squad' metric")
    pattern = MLQA_ARTICLES[lang]
    return AnswerNormalizer(is_unicode_punctuation, re.compile(pattern) if pattern else None,
                            mixed_segmentation if lang == "zh" else str.split)


def exact_match(prediction: str, gold: str, normalizer: AnswerNormalizer = SQUAD_NORMALIZER) -> float:
    return float(normalizer.tokens(prediction) == normalizer.tokens(gold))


def token_f1(prediction: str, gold: str, normalizer: AnswerNormalizer = SQUAD_NORMALIZER) -> float:
    """Harmonic mean of token precision and recall (0-1), bag-of-tokens overlap."""
    predicted, reference = normalizer.tokens(prediction), normalizer.tokens(gold)
    common = sum((Counter(predicted) & Counter(reference)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(reference)
    return 2 * precision * recall / (precision + recall)


def _gold_answers(reference: Any) -> Sequence[str]:
    if isinstance(reference, str) or not isinstance(reference, Sequence) or not reference:
        raise TypeError("the reference must be a non-empty list of gold answer texts")
    return reference


class _ExtractiveQA(Metric):
    primary = "f1"
    nothing = "an empty answer to every question"

    def says_nothing(self, prediction: Any) -> bool:
        return not str(prediction).strip()
    normalizer: AnswerNormalizer

    def example_counts(self, prediction: Any, reference: Any) -> dict[str, float]:
        if not isinstance(prediction, str):
            raise TypeError(f"the prediction must be the answer text, got {type(prediction).__name__}")
        golds = _gold_answers(reference)
        return {"exact_match": max(exact_match(prediction, gold, self.normalizer) for gold in golds),
                "f1": max(token_f1(prediction, gold, self.normalizer) for gold in golds),
                "total": 1.0}

    def scores(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"exact_match": percent(totals["exact_match"], totals["total"]),
                "f1": percent(totals["f1"], totals["total"])}


@dataclass(frozen=True)
class SquadQA(_ExtractiveQA):
    """SQuAD v1.1 EM/F1 (English normalisation)."""

    id = "squad"
    normalizer = SQUAD_NORMALIZER


@dataclass(frozen=True)
class MlqaQA(_ExtractiveQA):
    """MLQA EM/F1 with the normalisation of the context language `lang`."""

    lang: str
    normalizer: AnswerNormalizer = field(init=False, repr=False, compare=False)
    id = "mlqa"

    def __post_init__(self) -> None:
        object.__setattr__(self, "normalizer", mlqa_normalizer(self.lang))


def _squad2_f1(prediction: str, gold: str) -> float:
    """The SQuAD 2.0 script's F1: where either side normalises to nothing, 1 if both do, else 0."""
    predicted, reference = SQUAD_NORMALIZER.tokens(prediction), SQUAD_NORMALIZER.tokens(gold)
    if not predicted or not reference:
        return float(predicted == reference)
    return token_f1(prediction, gold)


@dataclass(frozen=True)
class Squad2QA(Metric):
    """The official SQuAD 2.0 evaluation (`evaluate-v2.0.py`): EM and F1 overall, on the answerable
    (HasAns) and unanswerable (NoAns) questions, and best_exact / best_f1 with the no-answer threshold
    chosen on the scored set itself.

    A prediction is (answer text, na_prob): "" answers "no answer"; na_prob is the no-answer score
    the script thresholds (any monotone score: xsyn gives the null score minus the best span's). A
    reference is the gold answer texts, [] for an unanswerable question. As in the script, a gold
    answer that normalises to nothing is dropped, a question left without one counts as unanswerable,
    and the scores apply its default na_prob threshold of 1.0.
    """

    id = "squad_v2"
    primary = "f1"
    nothing = "no answer (unanswerable) to every question"

    def says_nothing(self, prediction: Any) -> bool:
        return not prediction[0]
    na_prob_threshold: float = 1.0

    def example_counts(self, prediction: Any, reference: Any) -> dict[str, float]:
        text, na_prob = prediction
        if not isinstance(text, str) or isinstance(reference, str) or not isinstance(reference, Sequence):
            raise TypeError("a prediction is (answer text, na_prob) and a reference the list of gold texts")
        golds = [g for g in reference if SQUAD_NORMALIZER.tokens(g)] or [""]
        has = float(bool(reference))  # the script: a question with answers, even ones that normalise away
        exact = max(exact_match(text, g) for g in golds)
        f1 = max(_squad2_f1(text, g) for g in golds)
        if na_prob > self.na_prob_threshold:  # the script's apply_no_ans_threshold
            thresholded_exact = thresholded_f1 = 1.0 - has
        else:
            thresholded_exact, thresholded_f1 = exact, f1
        return {"total": 1.0, "exact": thresholded_exact, "f1": thresholded_f1, "has_answer": has,
                "has_exact": has * thresholded_exact, "has_f1": has * thresholded_f1,
                "no_exact": (1 - has) * thresholded_exact, "no_f1": (1 - has) * thresholded_f1,
                "raw_exact": exact, "raw_f1": f1, "na_prob": float(na_prob), "answered": float(bool(text))}

    def scores(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        unanswerable = totals["total"] - totals["has_answer"]
        return {"exact": percent(totals["exact"], totals["total"]), "f1": percent(totals["f1"], totals["total"]),
                "total": totals["total"], "HasAns_exact": percent(totals["has_exact"], totals["has_answer"]),
                "HasAns_f1": percent(totals["has_f1"], totals["has_answer"]), "HasAns_total": totals["has_answer"],
                "NoAns_exact": percent(totals["no_exact"], unanswerable),
                "NoAns_f1": percent(totals["no_f1"], unanswerable), "NoAns_total": unanswerable}

    def scores_of(self, table: CountTable) -> dict[str, float]:
        scores = super().scores_of(table)
        rows = {name: table.values[:, k] for k, name in enumerate(table.names)}
        for key in ("exact", "f1"):
            best, threshold = _best_threshold(rows[f"raw_{key}"], rows["na_prob"], rows["has_answer"],
                                              rows["answered"])
            scores[f"best_{key}"], scores[f"best_{key}_thresh"] = best, threshold
        return scores


def _best_threshold(raw: np.ndarray, na_prob: np.ndarray, has_answer: np.ndarray, answered: np.ndarray
                    ) -> tuple[float, float]:
    """The script's find_best_thresh: predict "no answer" for every question whose na_prob exceeds a
    threshold; walking the questions by na_prob, the threshold with the most points wins."""
    score = best = float((has_answer == 0).sum())
    threshold = 0.0
    for i in np.argsort(na_prob, kind="stable"):
        if has_answer[i]:
            score += raw[i]
        elif answered[i]:
            score -= 1
        if score > best:
            best, threshold = score, float(na_prob[i])
    return float(100.0 * best / len(raw)), threshold
