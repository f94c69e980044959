"""Names the command line, the runs and the models share, importable without torch."""

DEFAULT_MODEL = "bert-base-multilingual-cased"  # the papers' encoder, and the tokenizer of `tiny`
TINY = "tiny"  # a random 2-layer BERT for CPU runs (`xsyn.models.presets`)
TINY_SHAPE = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
              "intermediate_size": 512, "max_position_embeddings": 512}
IGNORE_INDEX = -100  # the label the losses skip: non-first pieces, specials, unknown labels
MODEL_CONFIG = "config.json"  # a model folder's config (transformers' CONFIG_NAME), not a run folder's
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")  # torch.compile's modes (CUDA graphs: the second)
DEFAULT_SEED = 1111  # of every command that trains (finetune, pretrain-gat, demo)

