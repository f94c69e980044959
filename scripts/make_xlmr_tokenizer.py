"""Regenerate tests/fixtures/xlmr_tokenizer: a small XLM-R-style SentencePiece tokenizer for the tests.

No XLM-R tokenizer is reachable offline, so the tests use one trained here with the `tokenizers`
Unigram trainer on shared text in several scripts (XNLI dev in 13 languages, the Thai words of
PAN-X). Its pipeline is the one transformers builds for `xlm-roberta-base`: NFKC normalisation
(standing in for SentencePiece's precompiled nmt_nfkc map, which cannot be built without the
sentencepiece trainer), whitespace split then the `▁` word-start marker (Metaspace, prefix always),
a Unigram model with `<s> <pad> </s> <unk> <mask>` as ids 0-4, and `<s> A </s></s> B </s>` as the
pair template. `tokenizer_config.json` names the generic `TokenizersBackend` class, because
`XLMRobertaTokenizer` rebuilds its pipeline on load and keeps only a precompiled normaliser.

    python scripts/make_xlmr_tokenizer.py [--data ../shared/data] [--output tests/fixtures/xlmr_tokenizer]

About two minutes on two busy cores; the tokenizer is about 0.2 MB.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path

XNLI_LANGUAGES = ("en", "de", "es", "fr", "zh", "ar", "hi", "ru", "vi", "el", "tr", "bg", "ur")
THAI = re.compile("[\u0e01-\u0e5b]")
SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")  # XLM-R's ids 0..4
VOCAB_SIZE = 3000


def corpus(data: Path, every: int = 3) -> Iterator[str]:
    """Every `every`-th XNLI dev pair's sentences per language, then PAN-X's Thai words."""
    for lang in XNLI_LANGUAGES:
        with open(data / "xnli" / f"dev-{lang}.tsv", encoding="utf-8") as rows:
            for row in itertools.islice(rows, 0, None, every):
                yield from row.split("\t")[:2]
    for file in sorted((data / "panx").glob("*.tsv")):
        with open(file, encoding="utf-8") as rows:
            yield from (row.split("\t")[0] for row in rows if THAI.search(row))


def train(data: Path):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
    trainer = trainers.UnigramTrainer(vocab_size=VOCAB_SIZE, special_tokens=list(SPECIALS), unk_token="<unk>",
                                      max_piece_length=8, n_sub_iterations=2, shrinking_factor=0.75)
    tokenizer.train_from_iterator(corpus(data), trainer)
    bos, eos = tokenizer.token_to_id("<s>"), tokenizer.token_to_id("</s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", bos), ("</s>", eos)])
    return tokenizer


def main() -> None:
    repo = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=repo.parent / "shared" / "data")
    parser.add_argument("--output", type=Path, default=repo / "tests" / "fixtures" / "xlmr_tokenizer")
    args = parser.parse_args()
    tokenizer = train(args.data)
    args.output.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(args.output / "tokenizer.json"))
    config = {"tokenizer_class": "TokenizersBackend", "bos_token": "<s>", "eos_token": "</s>", "cls_token": "<s>",
              "sep_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>", "mask_token": "<mask>",
              "model_max_length": 512}
    (args.output / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    print(f"{args.output}: {tokenizer.get_vocab_size()} pieces")


if __name__ == "__main__":
    main()
