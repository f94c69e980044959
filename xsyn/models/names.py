"""Names the command line, the runs and the models share, importable without torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULT_MODEL = "bert-base-multilingual-cased"  # the papers' encoder, and the tokenizer of `tiny`
TINY = "tiny"  # a random 2-layer BERT for CPU runs (`xsyn.models.presets`)
TINY_SHAPE = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
              "intermediate_size": 512, "max_position_embeddings": 512}
IGNORE_INDEX = -100  # the label the losses skip: non-first pieces, specials, unknown labels
MODEL_CONFIG = "config.json"  # a model folder's config (transformers' CONFIG_NAME), not a run folder's
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")  # torch.compile's modes (CUDA graphs: the second)
DEFAULT_SEED = 1111  # of every command that trains (finetune, pretrain-gat, demo)


@dataclass(frozen=True)
class EncoderShape:
    """A named encoder shape of `--encoders`: its family (`xsyn.models.families`) and its config at that size."""

    family: str
    config: dict[str, Any]
    checkpoint: str = ""  # the hub checkpoint of this shape


_BASE = {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072}
_XLMR = {"vocab_size": 250002, "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1,
         "layer_norm_eps": 1e-5}
# The published checkpoints' configs (config.json of bert-base-multilingual-cased, xlm-roberta-base/-large)
ENCODER_SHAPES = {
    "mbert": EncoderShape("bert", {**_BASE, "vocab_size": 119547, "max_position_embeddings": 512,
                                   "type_vocab_size": 2}, "bert-base-multilingual-cased"),
    "xlmr-base": EncoderShape("xlm-roberta", {**_BASE, **_XLMR}, "xlm-roberta-base"),
    "xlmr-large": EncoderShape("xlm-roberta", {"num_hidden_layers": 24, "hidden_size": 1024, "num_attention_heads": 16,
                                               "intermediate_size": 4096, **_XLMR}, "xlm-roberta-large"),
}
_LARGE = {"num_hidden_layers": 24, "hidden_size": 1024, "num_attention_heads": 16, "intermediate_size": 4096}
_BERT = {"max_position_embeddings": 512, "type_vocab_size": 2}
# Every checkpoint a bundled recipe names, as its config.json on the hub gives its shape (layers, widths, heads,
# vocabulary, positions), so that `xsyn experiment plan` knows it offline with nothing downloaded: Google's English
# BERTs (Li et al. 2021, Table 1; SG-Net's whole-word-masking BERT), bert-base-chinese (Li et al. 2021, Table 3),
# mBERT (Ahmad et al. 2021) and XLM-R. Hub names under their organisation (google-bert/..., FacebookAI/...) too.
_CHECKPOINTS = {
    "bert-base-uncased": {**_BASE, **_BERT, "vocab_size": 30522},
    "bert-large-uncased": {**_LARGE, **_BERT, "vocab_size": 30522},
    "bert-base-cased": {**_BASE, **_BERT, "vocab_size": 28996},
    "bert-large-cased": {**_LARGE, **_BERT, "vocab_size": 28996},
    "bert-large-cased-whole-word-masking": {**_LARGE, **_BERT, "vocab_size": 28996},
    "bert-large-uncased-whole-word-masking": {**_LARGE, **_BERT, "vocab_size": 30522},
    "bert-base-chinese": {**_BASE, **_BERT, "vocab_size": 21128},
    "bert-base-multilingual-uncased": {**_BASE, **_BERT, "vocab_size": 105879},
    **{shape.checkpoint: shape.config for shape in ENCODER_SHAPES.values()},
}
_ORGANISATIONS = {"bert": "google-bert", "xlm-roberta": "FacebookAI"}
CHECKPOINT_SHAPES = {**_CHECKPOINTS, **{f"{org}/{name}": config for name, config in _CHECKPOINTS.items()
                                         for prefix, org in _ORGANISATIONS.items() if name.startswith(f"{prefix}-")}}
