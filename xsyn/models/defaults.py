"""Names the command line, the runs and the models share, importable without torch."""

DEFAULT_MODEL = "bert-base-multilingual-cased"  # the papers' encoder, and the tokenizer of `tiny`
TINY = "tiny"  # a random 2-layer BERT for CPU runs (`xsyn.models.presets`)
TINY_SHAPE = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
              "intermediate_size": 512, "max_position_embeddings": 512}
IGNORE_INDEX = -100  # the label the losses skip: non-first pieces, specials, unknown labels
GAT_CONFIG = "gat_config.json"  # the shape settings of a pre-trained GAT, beside gat.safetensors
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")  # torch.compile's modes (CUDA graphs: the second)
GAT_ATTENTIONS = ("dot", "additive")  # the paper's dot-product GAT, the released code's additive one
DEFAULT_SEED = 1111  # of every command that trains (finetune, pretrain-gat, demo)
