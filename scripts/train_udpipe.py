"""Train a UDPipe 1 model (tokenizer, tagger, parser) on a UD treebank with ufal.udpipe's own trainer,
offline, for `--parser udpipe:MODEL`.

    python scripts/train_udpipe.py --treebank ../shared/data/ud/UD_English-EWT/en_ewt-ud-train.conllu \
        --output models/en_ewt-small.udpipe [--sentences 200]
    xsyn parser-quality --parser udpipe:models/en_ewt-small.udpipe --treebanks en \
        --treebank-dir ../shared/data/ud

The defaults train the small model of xsyn's tests: 200 sentences, a UPOS-only tagger and a narrow
parser, about 20 s on two busy CPU cores (all of EWT dev from raw text: UAS 0.565, LAS 0.462; the chain
control tree: UAS 0.279).
For a stronger model give more sentences and UDPipe's own default options (`--tokenizer "" --tagger ""
--parser ""`; a released model's options are in UDPipe's documentation), or download a released
UDPipe 1 model (UD 2.x, the `.udpipe` files of the LINDAT repository).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from xsyn.syntax.parsing.udpipe import QUICK_PARSER, QUICK_TAGGER, QUICK_TOKENIZER, train_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--treebank", type=Path, required=True, help="A CoNLL-U training file (a UD train split).")
    parser.add_argument("--output", type=Path, required=True, help="Where to write the .udpipe model.")
    parser.add_argument("--sentences", type=int, default=200, help="Train on the first N sentences.")
    parser.add_argument("--tokenizer", default=QUICK_TOKENIZER, help="UDPipe tokenizer options ('' = its defaults).")
    parser.add_argument("--tagger", default=QUICK_TAGGER, help="UDPipe tagger options ('' = its defaults).")
    parser.add_argument("--parser", default=QUICK_PARSER, help="UDPipe parser options ('' = its defaults).")
    args = parser.parse_args()
    if not args.treebank.is_file():
        parser.error(f"--treebank {args.treebank}: no such file")
    if args.sentences < 1:
        parser.error("--sentences must be at least 1")
    start = time.perf_counter()
    model = train_model(args.treebank, args.output, args.sentences, tokenizer=args.tokenizer, tagger=args.tagger,
                        parser=args.parser)
    print(f"trained on {args.sentences} sentences of {args.treebank} in {time.perf_counter() - start:.1f}s "
          f"-> {model} ({model.stat().st_size / 2**20:.1f} MiB); use it with --parser udpipe:{model}")


if __name__ == "__main__":
    main()
