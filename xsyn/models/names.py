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
