"""SQuAD and MLQA EM/F1: hand-normalised answers, per-language articles, zh mixed segmentation."""

import json

import pytest

from xsyn.metrics import MetricInputError, compute, primary_score
from xsyn.metrics.qa import mixed_segmentation, mlqa_normalizer


def qa(metric, prediction, golds, **options):
    return compute(metric, [prediction], [golds], **options)


def test_squad_normalisation_drops_case_punctuation_and_english_articles():
    assert qa("squad", "The Eiffel Tower!", ["Eiffel Tower"]) == {"exact_match": 100.0, "f1": 100.0}


def test_squad_f1_is_token_overlap_and_the_best_gold_answer_counts():
    # [eiffel tower in paris] vs [eiffel tower]: P = 2/4, R = 1 -> F1 = 2/3
    assert qa("squad", "Eiffel Tower in Paris", ["the Eiffel Tower"])["f1"] == pytest.approx(200 / 3)
    assert qa("squad", "Paris", ["in the city of Paris", "Paris"]) == {"exact_match": 100.0, "f1": 100.0}


def test_corpus_scores_are_means_over_questions_and_f1_is_primary():
    result = compute("squad", ["Paris", "red car"], [["Paris"], ["car"]])
    # question 2: [red car] vs [car]: P = 1/2, R = 1 -> F1 = 2/3
    assert result["exact_match"] == pytest.approx(50.0)
    assert result["f1"] == pytest.approx((100 + 200 / 3) / 2)
    assert primary_score("squad", result) == result["f1"]


def test_empty_prediction_scores_zero_and_the_official_empty_answer_quirk_is_kept():
    assert qa("squad", "", ["Paris"]) == {"exact_match": 0.0, "f1": 0.0}
    # both answers normalise to nothing: the official scripts give EM 1 and F1 0
    assert qa("squad", "the", ["a"]) == {"exact_match": 100.0, "f1": 0.0}


def test_mlqa_removes_the_articles_of_the_context_language():
    assert qa("mlqa", "la casa blanca", ["casa blanca"], lang="es")["exact_match"] == 100.0
    # in English "la" is a word: [la casa blanca] vs [casa blanca] -> P = 2/3, R = 1 -> F1 = 4/5
    assert qa("mlqa", "la casa blanca", ["casa blanca"], lang="en") == {"exact_match": 0.0, "f1": 80.0}
    assert qa("mlqa", "dem Haus", ["das Haus"], lang="de")["exact_match"] == 100.0
    assert qa("mlqa", "dem Haus", ["das Haus"], lang="es") == {"exact_match": 0.0, "f1": 50.0}
    assert qa("mlqa", "cái bàn", ["bàn"], lang="vi")["exact_match"] == 100.0
    # Arabic: the official pattern strips every "ال", also inside words
    assert qa("mlqa", "الكتاب", ["كتاب"], lang="ar")["exact_match"] == 100.0


def test_mlqa_zh_uses_mixed_segmentation():
    assert mixed_segmentation("2008年北京 奥运会") == ["2008", "年", "北", "京", "奥", "运", "会"]
    # [北 京 大 学] vs [北 京]: P = 2/4, R = 1 -> F1 = 2/3; as one whitespace token SQuAD finds no overlap
    assert qa("mlqa", "北京大学", ["北京"], lang="zh") == {"exact_match": 0.0, "f1": pytest.approx(200 / 3)}
    assert qa("squad", "北京大学", ["北京"]) == {"exact_match": 0.0, "f1": 0.0}
    # [2008 年 北 京 奥 运 会] vs [北 京 奥 运 会]: P = 5/7, R = 1 -> F1 = 5/6
    assert qa("mlqa", "2008年北京奥运会", ["北京奥运会"], lang="zh")["f1"] == pytest.approx(500 / 6)


def test_mlqa_removes_unicode_punctuation_that_squad_keeps():
    assert qa("mlqa", "“北京”。", ["北京"], lang="zh")["exact_match"] == 100.0
    assert qa("squad", "“Paris”", ["Paris"])["exact_match"] == 0.0  # SQuAD strips ASCII punctuation only
    assert mlqa_normalizer("hi").tokens("भारत की राजधानी।") == ["भारत", "की", "राजधानी"]


def test_bad_input_is_explained():
    with pytest.raises(ValueError, match="not 'el'; score other languages .* with the 'squad' metric"):
        qa("mlqa", "x", ["x"], lang="el")
    with pytest.raises(ValueError, match="metric 'mlqa' takes lang"):
        qa("mlqa", "x", ["x"])
    with pytest.raises(MetricInputError, match="example 0: the reference must be a non-empty list"):
        qa("squad", "Paris", "Paris")
    with pytest.raises(MetricInputError, match="example 0: the reference must be a non-empty list"):
        qa("squad", "Paris", [])


@pytest.mark.parametrize("lang", ["en", "es", "de", "ar", "hi", "vi", "zh"])
def test_real_mlqa_dev_gold_answers_score_themselves(shared_data, lang):
    """Every MLQA dev answer normalises to tokens in its own language, except es "una" (an article)."""
    path = shared_data / "mlqa" / "MLQA_V1" / "dev" / f"dev-context-{lang}-question-{lang}.json"
    questions = [qa for article in json.loads(path.read_text(encoding="utf-8"))["data"]
                 for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
    golds = [[answer["text"] for answer in qa["answers"]] for qa in questions]
    result = compute("mlqa", [answers[0] for answers in golds], golds, lang=lang)
    assert result["exact_match"] == 100.0
    # the official empty-answer quirk on real data: the es answer "una" is all article, so its F1 is 0
    unscorable = 1 if lang == "es" else 0
    assert result["f1"] == pytest.approx(100.0 * (len(questions) - unscorable) / len(questions))


# -- SQuAD 2.0: the official evaluate-v2.0.py, its logic written out here ------------------------------


def _official_normalize(s):
    import re
    import string

    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def _official_f1(gold, pred):
    from collections import Counter

    gold_toks = _official_normalize(gold).split() if gold else []
    pred_toks = _official_normalize(pred).split() if pred else []
    if not gold_toks or not pred_toks:
        return int(gold_toks == pred_toks)
    same = sum((Counter(gold_toks) & Counter(pred_toks)).values())
    if same == 0:
        return 0
    precision, recall = same / len(pred_toks), same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def official_squad_v2(answers, preds, na_probs, threshold=1.0):
    """evaluate-v2.0.py's main() for {qid: gold texts}, {qid: prediction}, {qid: na_prob}."""
    has_ans = {q: bool(a) for q, a in answers.items()}
    exact_raw, f1_raw = {}, {}
    for q, texts in answers.items():
        golds = [t for t in texts if _official_normalize(t)] or [""]
        exact_raw[q] = max(int(_official_normalize(g) == _official_normalize(preds[q])) for g in golds)
        f1_raw[q] = max(_official_f1(g, preds[q]) for g in golds)

    def thresholded(scores):
        return {q: float(not has_ans[q]) if na_probs[q] > threshold else s for q, s in scores.items()}

    def eval_dict(exact, f1, qids):
        return {"exact": 100.0 * sum(exact[q] for q in qids) / len(qids),
                "f1": 100.0 * sum(f1[q] for q in qids) / len(qids), "total": len(qids)}

    exact, f1 = thresholded(exact_raw), thresholded(f1_raw)
    out = eval_dict(exact, f1, list(answers))
    for prefix, qids in (("HasAns", [q for q in answers if has_ans[q]]),
                         ("NoAns", [q for q in answers if not has_ans[q]])):
        if qids:
            out.update({f"{prefix}_{k}": v for k, v in eval_dict(exact, f1, qids).items()})
    for name, raw in (("exact", exact_raw), ("f1", f1_raw)):
        score = best = sum(1 for q in has_ans if not has_ans[q])
        best_thresh = 0.0
        for q in sorted(na_probs, key=lambda k: na_probs[k]):
            score += raw[q] if has_ans[q] else (-1 if preds[q] else 0)
            if score > best:
                best, best_thresh = score, na_probs[q]
        out[f"best_{name}"], out[f"best_{name}_thresh"] = 100.0 * best / len(raw), best_thresh
    return out


SQUAD2_CASES = {
    "mixed": ({"q1": ["Denver Broncos", "the Denver Broncos"], "q2": [], "q3": ["1066"], "q4": [], "q5": ["a cat"]},
              {"q1": "Broncos", "q2": "", "q3": "in 1066", "q4": "Normandy", "q5": ""},
              {"q1": -2.0, "q2": 3.5, "q3": 0.4, "q4": 0.2, "q5": 1.7}),
    "all unanswerable": ({"q1": [], "q2": [], "q3": []}, {"q1": "", "q2": "Paris", "q3": ""},
                         {"q1": 2.0, "q2": -1.0, "q3": 0.5}),
    "answers that normalise away": ({"q1": ["the"], "q2": ["an", "Rome"]}, {"q1": "", "q2": "rome"},
                                    {"q1": 0.0, "q2": -0.5}),
}


@pytest.mark.parametrize("case", sorted(SQUAD2_CASES))
def test_squad_v2_scores_as_the_official_script_overall_has_no_answer_and_best_threshold(case):
    answers, preds, na_probs = SQUAD2_CASES[case]
    ids = list(answers)
    ours = compute("squad_v2", [(preds[q], na_probs[q]) for q in ids], [answers[q] for q in ids])
    official = official_squad_v2(answers, preds, na_probs)
    for key, value in official.items():
        assert ours[key] == pytest.approx(value), key
    if case == "all unanswerable":
        assert ours["HasAns_total"] == 0 and "HasAns_f1" not in official  # the script leaves the block out


def test_squad_v2_worked_example():
    ours = compute("squad_v2", [("Broncos", -1.0), ("", 2.0)], [["Denver Broncos"], []])
    # F1 of "broncos" against "denver broncos": P 1, R 1/2 -> 2/3; the empty answer to the unanswerable: 1
    assert ours["f1"] == pytest.approx(100 * (2 / 3 + 1) / 2) and ours["exact"] == pytest.approx(50.0)
    assert ours["NoAns_exact"] == 100.0 and ours["HasAns_exact"] == 0.0
