"""`gat`: the GAT syntax encoder and attention bias of Ahmad et al. (2021).

A GAT over the batch's trees (`layers.py` in this folder) computes G; in each syntax layer the first
`syntax_heads` attention heads add G G_l to their query and key (or the `bias_targets`). Its
structural probes give the auxiliary loss `structural_loss_weight * (distance_loss + depth_loss)`.

Its settings, each with its meaning, are `GatSettings` below (`xsyn settings --variant gat` lists them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xsyn.models.variants.base import LossTerm, Pretraining, ReleasedCode, SyntaxBatch, SyntaxVariant
from xsyn.utils.schema import Invalid, at_least, one_of, setting, strict

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedModel

    from xsyn.trees.tensors import TreeTensors

GAT_CONFIG = "gat_config.json"  # the shape settings of a pre-trained GAT, beside its weights
GAT_WEIGHTS = "gat.safetensors"
GAT_ATTENTIONS = ("dot", "additive")  # the paper's dot-product GAT, the released code's additive one
BIAS_TARGETS = ("query", "key", "value")  # the projections the GAT bias may be added to
GAT_WEIGHT_INITS = ("normal", "xavier")  # BERT's rule for every GAT weight; the released code's draws
SPECIAL_UPOS = ("shared", "separate")  # one UPOS id for [CLS] and [SEP]; the released code's two

AHMAD_2021 = """@inproceedings{ahmad-etal-2021-syntax,
  title = "Syntax-augmented Multilingual {BERT} for Cross-lingual Transfer",
  author = "Ahmad, Wasi Uddin and Li, Haoran and Chang, Kai-Wei and Mehdad, Yashar",
  booktitle = "Proceedings of the 59th Annual Meeting of the Association for Computational Linguistics and the
               11th International Joint Conference on Natural Language Processing (Volume 1: Long Papers)",
  year = "2021",
  publisher = "Association for Computational Linguistics",
  url = "https://aclanthology.org/2021.acl-long.350",
  pages = "4538--4554"
}"""


def bias_target_names(targets: str) -> tuple[str, ...]:
    """The `bias_targets` setting as names: `"query, key"` -> ("query", "key")."""
    return tuple(t.strip() for t in targets.split(",") if t.strip())


def gat_output_size(config: Any) -> int:
    """The width of the GAT's output G: k heads of d_g."""
    return config.gat_heads * config.gat_head_size


def _bias_targets(value: str) -> None:
    targets = bias_target_names(value)
    if not targets or any(t not in BIAS_TARGETS for t in targets) or len(set(targets)) != len(targets):
        raise ValueError(f"{value!r}: give distinct names from {', '.join(BIAS_TARGETS)}, comma-separated "
                         "(paper: 'query,key'; released code: 'key,value')")


@strict
@dataclass
class GatSettings:
    """The `gat` fields of `XsynBertConfig`."""

    syntax_heads: int = setting(1, check=at_least(1), help="attention heads (the first n) of each syntax layer "
                                "biased by the GAT output")
    bias_targets: str = setting("query,key", check=_bias_targets, help="the projections the GAT bias is added to "
                                "(the paper: query,key; its released code: key,value)")
    gat_layers: int = setting(4, check=at_least(1), help="GAT layers (L_g)")
    gat_heads: int = setting(4, check=at_least(1), help="GAT heads (k)")
    gat_head_size: int = setting(64, check=at_least(1), help="size of one GAT head (d_g); the GAT output has k * d_g")
    gat_delta: int = setting(4, check=at_least(1), help="GAT attention reaches tree distance <= delta")
    gat_attention: str = setting("dot", check=one_of(GAT_ATTENTIONS), help="dot (the paper's eq. 2, query = key) or "
                                 "additive (Velickovic-style, as in the released code)")
    gat_weight_init: str = setting("normal", check=one_of(GAT_WEIGHT_INITS), help="normal: every GAT weight from "
                                   "BERT's N(0, initializer_range); xavier: as the released code draws them "
                                   "(graph_utils.py), each head's projection and score vectors from xavier_uniform "
                                   "with gain 1.414, the probes from U(-0.05, 0.05), the UPOS rows (padding's too) "
                                   "from N(0, initializer_range)")
    gat_special_upos: str = setting("shared", check=one_of(SPECIAL_UPOS), help="the GAT's UPOS ids of the special "
                                    "tokens: shared (one id for [CLS] and [SEP]) or separate (the released code's "
                                    "constants.py: [CLS] 18, [SEP] 19, a piece of unknown UPOS 20)")
    gat_deprel_embeddings: bool = setting(False, help="add a dependency-relation embedding to the GAT input")
    gat_residual: bool = setting(False, help="add each GAT layer's input to its output where the sizes match (not "
                                 "in the paper; helps pre-training)")
    gat_edge_direction: bool = setting(False, help="a learned attention logit per GAT layer, head and edge relation "
                                       "(self, head, dependent, further): the GAT tells a piece's head from its "
                                       "dependents (not in the paper)")
    gat_position_embeddings: bool = setting(False, help="add BERT's position embeddings to the GAT input, so that "
                                            "identical words in mirrored places of a tree get distinct inputs (not in "
                                            "the paper; helps pre-training)")
    probe_rank: int = setting(64, check=at_least(1), help="rank of the structural probes theta1, theta2")
    structural_loss_weight: float | int = setting(0.5, check=at_least(0), help="alpha in loss = task + alpha "
                                                  "(distance + depth): the structural probes' weight")


@dataclass
class GatContext:
    """What the `gat` variant's layers read: G, and each syntax layer's additive terms by target."""

    gat_output: torch.Tensor  # (B, T, k d_g)
    # layer -> target -> the term's column blocks (`LeanSelfAttention.projection_terms`): G G^X_l + b_l plus the
    # projection's own bias on the first heads' columns (B, T, w), then the own bias's other columns (hidden - w)
    biases: dict[int, dict[str, tuple[torch.Tensor, torch.Tensor]]]


# Ahmad et al.'s released code (wasiahmad/Syntax-MBERT), where it builds inputs and initial weights otherwise than
# the paper's text; the docs' "paper, code and xsyn" table gives each choice with its file and function.
SYNTAX_MBERT = ReleasedCode(
    name="ahmad2021", repository="wasiahmad/Syntax-MBERT", commit="1af0ef5",
    inputs={"tokenize_by": "words", "sep_attachment": "segment_end", "truncation_tie": "last"},
    model={"gat_attention": "additive", "bias_targets": "key,value", "gat_weight_init": "xavier",
           "gat_special_upos": "separate"})


class Gat(SyntaxVariant):
    name = "gat"
    settings = GatSettings
    uses_layers = True
    paper_names = {"delta": "gat_delta", "alpha": "structural_loss_weight", "gat_dim": "gat_head_size"}
    paper = AHMAD_2021
    losses = (LossTerm(("distance_loss", "depth_loss"), "structural_loss_weight"),)
    parameter_markers = ("gat", "syntax_bias")
    reads_word_embeddings = True
    tree_fields = ("tree_parent", "tree_upos", "tree_deprel")
    pretrained_files = (GAT_CONFIG, GAT_WEIGHTS)
    released_code = SYNTAX_MBERT
    pretraining = Pretraining({  # xsyn pretrain-gat (xsyn.pretraining)
        "gat_delta": "GAT attention reaches tree distance <= delta [default: the --recipe's, 4 for paper].",
        "gat_attention": "dot: the paper's eq. 2; additive: the released code's Velickovic-style GAT [default: the "
                         "--recipe's, dot for paper]."})
    options = {"gat_delta": "GAT attention reaches tree distance <= delta (as pretrain-gat's; the same as --set "
                            "gat_delta) [default: the card's].",
               "gat_attention": "dot: the paper's eq. 2; additive: the released code's (the same as --set "
                                "gat_attention)."}

    def validate(self, config: PretrainedConfig) -> None:
        heads = config.num_attention_heads
        if config.syntax_heads > heads:
            raise Invalid("syntax_heads", f"{config.syntax_heads}, but a syntax head is one of the model's {heads} "
                          f"attention heads; use 1..{heads}")

    def batch_fields(self, config: PretrainedConfig) -> tuple[str, ...]:  # relations: only where embedded
        return tuple(f for f in self.tree_fields if f != "tree_deprel" or config.gat_deprel_embeddings)

    def install(self, model: PreTrainedModel) -> None:
        layers = self.layers()
        for i in model.config.syntax_layer_ids:
            model.encoder.layer[i].attention.self = layers.GatSelfAttention(model.config, layer_idx=i)
        model.gat = layers.GatSyntaxEncoder(model.config)

    def init_weights(self, module: Any, config: PretrainedConfig) -> None:
        self.layers().init_weights(module, config)

    def context(self, model: PreTrainedModel, tree: TreeTensors, batch: SyntaxBatch, with_losses: bool
                ) -> GatContext:
        return self.layers().gat_context(model, tree, batch)

    def auxiliary_losses(self, model: PreTrainedModel, context: GatContext, tree: TreeTensors,
                         batch: SyntaxBatch, hidden: torch.Tensor, with_losses: bool) -> dict[str, torch.Tensor]:
        if not with_losses:
            return {}
        predicted_distances, predicted_depths = model.gat.probe(context.gat_output)
        distance_loss, depth_loss = self.layers().structural_loss(predicted_distances, predicted_depths,
                                                                  tree.distances, tree.depth, batch.real_tokens())
        return {"distance_loss": distance_loss, "depth_loss": depth_loss}

    def pretrained_settings(self, directory: str | Path) -> dict[str, Any]:
        return self.layers().pretrained_gat_settings(directory)

    def load_pretrained(self, model: PreTrainedModel, directory: str | Path) -> None:
        self.layers().load_gat(model, directory)

    def freeze_pretrained(self, model: PreTrainedModel) -> None:
        self.layers().freeze_gat(model)


VARIANT = Gat()
