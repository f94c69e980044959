"""How good are the parses that feed the model: UAS and LAS of a parser against a gold treebank.

`attachment_scores(predicted, gold)` compares the parser's record of each gold sentence with
the gold record. Words are aligned within a sentence: one to one when both have the same words,
otherwise through where they sit in the input (character spans of the same text, or gold-token
indices for pre-tokenised input; the words of a multiword token are paired in order). Scores
follow the CoNLL 2018 shared task: a word's attachment is correct when its aligned head is the
gold head (and, for LAS, its base relation is the gold one), counted over all words, punctuation
included, as F1 of precision (over the parser's words) and recall (over the gold words). With
identical tokenisation F1 equals accuracy. Sentences whose tokenisation differs are counted and
described, never dropped.

`score_parser(parser, ["en", "de"], DIR)` runs it per treebank (`xsyn parser-quality`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from xsyn.syntax.conllu import read_conllu
from xsyn.syntax.parsing.base import Parser, require_languages
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.treebanks import TreebankError, locate
from xsyn.utils.errors import InputError
from xsyn.utils.io import atomic_write_bytes, atomic_write_text, ensure_dir
from xsyn.utils.plots import language_bars_png

MAX_DESCRIBED = 10  # mismatched sentences described in full; all are counted


@dataclass
class AttachmentScores:
    sentences: int = 0
    gold_words: int = 0
    predicted_words: int = 0
    aligned_words: int = 0
    heads_correct: int = 0
    labels_correct: int = 0  # head and base relation both correct
    mismatched_sentences: int = 0  # sentences whose words differ from the gold words
    mismatches: list[str] = field(default_factory=list)  # the first MAX_DESCRIBED, explained

    @property
    def uas(self) -> float:
        return _f1(self.heads_correct, self.predicted_words, self.gold_words)

    @property
    def las(self) -> float:
        return _f1(self.labels_correct, self.predicted_words, self.gold_words)

    @property
    def words_f1(self) -> float:
        """How well the parser's words match the gold words (1.0 for gold tokenisation)."""
        return _f1(self.aligned_words, self.predicted_words, self.gold_words)

    def as_dict(self) -> dict:
        return {"uas": self.uas, "las": self.las, "words_f1": self.words_f1, "sentences": self.sentences,
                "gold_words": self.gold_words, "predicted_words": self.predicted_words,
                "mismatched_sentences": self.mismatched_sentences, "mismatches": self.mismatches}


def _f1(correct: int, predicted: int, gold: int) -> float:
    return 2 * correct / (predicted + gold) if predicted + gold else float("nan")


def attachment_scores(predicted: Sequence[SyntaxRecord], gold: Sequence[SyntaxRecord]) -> AttachmentScores:
    """UAS/LAS of `predicted[k]` against `gold[k]` for every sentence k."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} parsed records for {len(gold)} gold sentences; parse each gold "
                         "sentence into exactly one record (one text or token list per sentence)")
    scores = AttachmentScores()
    for k, (pred, ref) in enumerate(zip(predicted, gold, strict=True)):
        scores.sentences += 1
        scores.gold_words += len(ref.words)
        scores.predicted_words += len(pred.words)
        if pred.words != ref.words:
            scores.mismatched_sentences += 1
            if len(scores.mismatches) < MAX_DESCRIBED:
                scores.mismatches.append(describe_mismatch(k, pred, ref))
        to_gold = align_words(pred, ref)
        scores.aligned_words += len(to_gold)
        for p, g in to_gold.items():
            head = pred.heads[p]
            head_right = (ref.heads[g] == 0) if head == 0 else (to_gold.get(head - 1, -1) + 1 == ref.heads[g])
            scores.heads_correct += head_right
            scores.labels_correct += head_right and pred.deprels[p] == ref.deprels[g]
    return scores


def align_words(predicted: SyntaxRecord, gold: SyntaxRecord) -> dict[int, int]:
    """Predicted word index -> gold word index, for the words that correspond."""
    if predicted.words == gold.words:
        return {i: i for i in range(len(gold.words))}
    pred_units, gold_units = predicted.units(), gold.units()
    same_kind = (predicted.token_index is None) == (gold.token_index is None)
    if pred_units is None or gold_units is None or not same_kind:
        raise ValueError("cannot align a parser's words with the gold words: both records need character "
                         "spans of the same text, or both gold-token indices (parse the gold text with "
                         "parse_texts, or the gold words with parse_tokens)")
    gold_at: dict[tuple[int, int], list[int]] = {}
    for g, unit in enumerate(gold_units):
        gold_at.setdefault(unit, []).append(g)
    pred_at: dict[tuple[int, int], list[int]] = {}
    for p, unit in enumerate(pred_units):
        pred_at.setdefault(unit, []).append(p)
    return {p: g for unit, ps in pred_at.items() for p, g in zip(ps, gold_at.get(unit, []), strict=False)}


def describe_mismatch(k: int, predicted: SyntaxRecord, gold: SyntaxRecord) -> str:
    """One line saying where a parser's words first depart from the gold words."""
    first = next((i for i, (a, b) in enumerate(zip(predicted.words, gold.words, strict=False)) if a != b),
                 min(len(predicted.words), len(gold.words)))
    parser_word = predicted.words[first] if first < len(predicted.words) else "(end)"
    gold_word = gold.words[first] if first < len(gold.words) else "(end)"
    name = f" ({gold.sent_id})" if gold.sent_id else ""
    return (f"sentence {k + 1}{name}: the parser has {len(predicted.words)} words, the gold tree "
            f"{len(gold.words)}; first difference at word {first + 1}: parser {parser_word!r}, "
            f"gold {gold_word!r}")


# -- xsyn parser-quality ----------------------------------------------------------------------------------

TREEBANK_SPLITS = {"validation": "dev", "test": "test"}  # xsyn's split names -> UD's file names
PARSER_INPUTS = ("text", "words")  # parse each sentence's raw text, or its gold words pre-tokenised


@dataclass
class TreebankScore:
    lang: str
    treebank: str
    split: str  # UD's name: dev or test
    scores: AttachmentScores

    def as_dict(self) -> dict:
        return {"treebank": self.treebank, "split": self.split, **self.scores.as_dict()}

    def text(self, probe_uuas: float | None = None) -> str:
        """One line of scores (with a pre-trained GAT's probe UUAS beside them where given), then each
        described mismatch on a line of its own."""
        scores = self.scores
        probe = f"  probe UUAS {probe_uuas:.3f}" if probe_uuas is not None else ""
        return "\n".join([f"{self.lang:>3} {self.treebank:<24} {self.split:<5} UAS {scores.uas:.3f}  LAS "
                          f"{scores.las:.3f}  words F1 {scores.words_f1:.3f}{probe}  ({scores.sentences} sentences, "
                          f"{scores.mismatched_sentences} tokenised differently)",
                          *(f"      {line}" for line in scores.mismatches)])


def score_parser(parser: Parser, treebanks: Sequence[str], treebank_dir: str | Path, split: str | None = None,
                 limit: int | None = None, parser_input: str = "text") -> Iterator[TreebankScore]:
    """UAS/LAS of `parser` on each treebank (a language or treebank name under `treebank_dir`), one
    treebank at a time: `split` validation or test (default: the dev file, or test for test-only
    treebanks); `limit`: its first N sentences; `parser_input` text (the parser tokenises) or words
    (the gold words, pre-tokenised)."""
    if parser_input not in PARSER_INPUTS:
        raise ValueError(f"parser_input {parser_input!r}: one of {PARSER_INPUTS}")
    # every treebank and split file is found before the first is parsed: a misspelt last one fails at once,
    # not after the others' parses (minutes with a neural parser)
    located = []
    for spec in treebanks:
        found = locate(spec, treebank_dir)
        chosen = TREEBANK_SPLITS[split] if split else found.evaluation_split()
        located.append((found, chosen, found.path(chosen)))
    require_languages(parser, [found.treebank.lang for found, _, _ in located])  # (and each has models)
    for found, chosen, path in located:
        lang = found.treebank.lang
        gold = list(read_conllu(path, lang=lang))[:limit]
        if not gold:
            raise TreebankError(f"{path}: no sentences to score (the file has no CoNLL-U sentences); pass a "
                                "treebank file with at least one sentence")
        if parser_input == "text":
            parsed = parser.parse_texts([g.text for g in gold], lang)
        else:
            parsed = parser.parse_tokens([g.words for g in gold], lang)
            gold = [g.on_word_tokens() for g in gold]
        yield TreebankScore(lang, found.treebank.name, chosen, attachment_scores(parsed, gold))


def read_probe_metrics(path: Path) -> dict[str, dict[str, float]]:
    """{lang: {uuas, dist_spearman, ...}} from a `xsyn pretrain-gat` probe_metrics.json, to show beside UAS/LAS;
    a bad file is an error naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: not a JSON file ({err}); pass the probe_metrics.json that "
                         "`xsyn pretrain-gat` wrote") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise InputError(f"{path}: expected {{lang: {{uuas, dist_spearman, ...}}}} as written by "
                         "`xsyn pretrain-gat`")
    bad = [f"{lang}.{key}" for lang, metrics in data.items() for key, value in metrics.items()
           if not isinstance(value, (int, float))]
    if bad:
        raise InputError(f"{path}: {bad[0]} is not a number; expected probe_metrics.json of "
                         "`xsyn pretrain-gat`")
    return data


def check_outputs(output: Path | None, plot_output: Path | None) -> None:
    """Before parsing: the folders of the scores and of the chart can be made (else an error naming them)."""
    if output is not None:
        ensure_dir(output.parent, option="--output")
    if plot_output is not None:
        ensure_dir(plot_output.parent, option="--plot-output")


def write_scores(results: dict[str, dict], output: Path) -> None:
    """{lang: TreebankScore.as_dict()} as JSON (`xsyn parser-quality --output`)."""
    atomic_write_text(output, json.dumps(results, indent=2, ensure_ascii=False) + "\n", option="--output")


def write_scores_chart(results: dict[str, dict], probes: dict[str, dict[str, float]], parser_label: str,
                       plot_output: Path) -> None:
    """A PNG of UAS and LAS per language, with the probes' UUAS beside them where given."""
    series = {name: {lang: r[name.lower()] for lang, r in results.items()} for name in ("UAS", "LAS")}
    if probes:
        series["probe UUAS"] = {lang: m["uuas"] for lang, m in probes.items() if "uuas" in m}
    title = f"{parser_label} vs gold UD trees" + (" | probe UUAS" if probes else "")
    atomic_write_bytes(plot_output, language_bars_png(series, title=title, value_label="score", limits=(0, 1)),
                       option="--plot-output")
