"""Entity P/R/F1 (seqeval id): hand-counted corpora in both modes, and seqeval itself as a reference."""

import random
import warnings

import pytest
from seqeval.metrics import classification_report
from seqeval.scheme import IOB2

from xsyn.metrics import MetricInputError, compute, primary_score

# Three sentences with one trap each: an I- tag after O (s1), a wrong boundary (s2), a spurious entity (s3).
GOLD = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "O"], ["O", "O"]]
PRED = [["B-PER", "I-PER", "O", "I-LOC"], ["B-ORG", "I-ORG", "O"], ["B-LOC", "O"]]


def test_default_mode_is_conlleval_compatible_and_starts_an_entity_at_an_i_tag_after_o():
    result = compute("seqeval", PRED, GOLD)
    # predicted PER(s1) LOC(s1, from I-LOC) ORG(s2, 2 tokens) LOC(s3); gold PER LOC ORG(1 token)
    # true positives: PER and LOC of s1 -> P = 2/4, R = 2/3, F1 = 2PR/(P+R) = 4/7
    assert result["precision"] == pytest.approx(50.0)
    assert result["recall"] == pytest.approx(200 / 3)
    assert result["f1"] == pytest.approx(400 / 7)
    assert primary_score("seqeval", result) == pytest.approx(400 / 7)
    assert result["PER_f1"] == pytest.approx(100.0)
    assert result["LOC_precision"] == pytest.approx(50.0) and result["LOC_recall"] == pytest.approx(100.0)
    assert result["ORG_f1"] == 0.0
    assert result["accuracy"] == pytest.approx(100 * 6 / 9)  # tokens: 3/4 + 2/3 + 1/2 right


def test_strict_mode_ignores_an_i_tag_after_o():
    result = compute("seqeval", PRED, GOLD, mode="strict")
    # the I-LOC of s1 is no entity: predicted PER ORG LOC(s3), only PER right -> P = R = 1/3
    assert result["precision"] == pytest.approx(100 / 3)
    assert result["recall"] == pytest.approx(100 / 3)
    assert result["f1"] == pytest.approx(100 / 3)


def test_empty_predictions_score_zero_not_an_error():
    all_o = [["O"] * len(tags) for tags in GOLD]
    result = compute("seqeval", all_o, GOLD)
    assert (result["precision"], result["recall"], result["f1"]) == (0.0, 0.0, 0.0)
    assert compute("seqeval", [["O", "O"]], [["O", "O"]])["f1"] == 0.0  # nothing to find, nothing found


@pytest.mark.parametrize("mode, seqeval_options", [("default", {}),
                                                   ("strict", {"mode": "strict", "scheme": IOB2})])
def test_agrees_with_seqeval_on_a_random_corpus(mode, seqeval_options):
    rng = random.Random(7)
    tags = ["O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG", "B-ORG"]
    gold = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(200)]
    pred = [[t if rng.random() < 0.7 else rng.choice(tags) for t in sentence] for sentence in gold]
    if mode == "strict":  # strict IOB2 input must be well formed IOB2 in seqeval too
        gold = [[t.replace("I-", "B-") if i == 0 or s[i - 1] == "O" else t for i, t in enumerate(s)]
                for s in gold]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = classification_report(gold, pred, output_dict=True, zero_division=0, **seqeval_options)
    result = compute("seqeval", pred, gold, mode=mode)
    assert result["precision"] == pytest.approx(100 * expected["micro avg"]["precision"])
    assert result["recall"] == pytest.approx(100 * expected["micro avg"]["recall"])
    assert result["f1"] == pytest.approx(100 * expected["micro avg"]["f1-score"])
    for kind in ("PER", "LOC", "ORG"):
        assert result[f"{kind}_f1"] == pytest.approx(100 * expected[kind]["f1-score"])


def test_bad_tags_and_lengths_are_errors_that_name_the_example():
    with pytest.raises(MetricInputError, match=r"example 1: tag 'PER' at position 0"):
        compute("seqeval", [["O"], ["PER"]], [["O"], ["B-PER"]])
    with pytest.raises(MetricInputError, match="example 0: the prediction has 1 tags but the reference 2"):
        compute("seqeval", [["O"]], [["O", "O"]])
    with pytest.raises(MetricInputError, match="'E-PER'.*strict"):
        compute("seqeval", [["E-PER"]], [["B-PER"]], mode="strict")
    with pytest.raises(ValueError, match="unknown tagging mode 'lenient'; valid: default, strict"):
        compute("seqeval", [["O"]], [["O"]], mode="lenient")



@pytest.mark.parametrize("mode, seqeval_options", [("default", {}),
                                                   ("strict", {"mode": "strict", "scheme": IOB2})])
def test_real_panx_dev_with_noisy_predictions_agrees_with_seqeval(shared_data, mode, seqeval_options):
    """The first 2,000 sentences of PAN-X de dev, 10% of tags replaced at random, scored by both."""
    sentences, tags = [], []
    for line in (shared_data / "panx" / "dev-de.tsv").read_text(encoding="utf-8").splitlines() + [""]:
        if line.strip():
            tags.append(line.rsplit("\t", 1)[1])
        elif tags:
            sentences.append(tags)
            tags = []
    sentences = sentences[:2000]
    labels = sorted({tag for sentence in sentences for tag in sentence})
    rng = random.Random(11)
    noisy = [[rng.choice(labels) if rng.random() < 0.1 else tag for tag in sentence]
             for sentence in sentences]
    assert compute("seqeval", sentences, sentences, mode=mode)["f1"] == 100.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = classification_report(sentences, noisy, output_dict=True, zero_division=0,
                                         **seqeval_options)
    result = compute("seqeval", noisy, sentences, mode=mode)
    assert result["f1"] == pytest.approx(100 * expected["micro avg"]["f1-score"])
    assert result["precision"] == pytest.approx(100 * expected["micro avg"]["precision"])
    assert 50 < result["f1"] < 95
