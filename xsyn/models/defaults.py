"""Names the command line, the runs and the models share, importable without torch."""

from typing import Any

DEFAULT_MODEL = "bert-base-multilingual-cased"  # the papers' encoder, and the tokenizer of `tiny`
TINY = "tiny"  # a random 2-layer BERT for CPU runs (`xsyn.models.presets`)
TINY_SHAPE = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
              "intermediate_size": 512, "max_position_embeddings": 512}
IGNORE_INDEX = -100  # the label the losses skip: non-first pieces, specials, unknown labels
MODEL_CONFIG = "config.json"  # a model folder's config (transformers' CONFIG_NAME), not a run folder's
GAT_CONFIG = "gat_config.json"  # the shape settings of a pre-trained GAT, beside gat.safetensors
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")  # torch.compile's modes (CUDA graphs: the second)
GAT_ATTENTIONS = ("dot", "additive")  # the paper's dot-product GAT, the released code's additive one
BIAS_TARGETS = ("query", "key", "value")  # the projections the GAT bias may be added to
DEFAULT_SEED = 1111  # of every command that trains (finetune, pretrain-gat, demo)


def bias_target_names(targets: str) -> tuple[str, ...]:
    """The GAT's `bias_targets` setting as names: `"query, key"` -> ("query", "key")."""
    return tuple(t.strip() for t in targets.split(",") if t.strip())


def gat_output_size(config: Any) -> int:
    """The width of the GAT's output G: k heads of d_g."""
    return config.gat_heads * config.gat_head_size
