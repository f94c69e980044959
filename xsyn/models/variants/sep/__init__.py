"""`sep`: the syntax-aware representation of SEPREM (Xu et al. 2021).

Before each chosen encoder layer, the layer's input is mixed with its view through the batch's
normalised inverse tree distances (`layers.py` in this folder). As an option, SEPREM's dependency-distance
prediction (`SepDistanceHead`, also an objective of `xsyn pretrain-gat`, where it is called `seprem`) is an
auxiliary loss: `sep_distance_loss_weight * seprem_loss`, in training.

| setting                    | default    | meaning                                                  |
|----------------------------|------------|----------------------------------------------------------|
| `syntax_layers`            | all layers | encoder layers (0-based) whose input is mixed with its   |
|                            |            | distance view                                            |
| `sep_alpha`                | 0.1        | H' = (1 - alpha) H + alpha sigmoid(W1 H + W2 D~ H); the  |
|                            |            | SEPREM summary gives no value                            |
| `sep_learn_alpha`          | False      | make alpha a trained parameter (initialised to the above)|
| `sep_distance_loss_weight` | 0.0        | weight of the distance-prediction loss in fine-tuning    |
|                            |            | (0: off; the head exists only when > 0)                  |
| `sep_max_distance`         | 8          | its classes: distances 1 .. K-1 and "K or more"          |

No task card has a `sep` section: the paper fine-tunes on none of these tasks, so a `sep` run takes
the card's plain-model settings and these defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xsyn.models.variants.base import LossTerm, SyntaxBatch, SyntaxVariant
from xsyn.utils.schema import at_least, between, strict, validated_field

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedModel

    from xsyn.trees.tensors import TreeTensors

XU_2021 = """@inproceedings{xu-etal-2021-syntax,
  title = "Syntax-Enhanced Pre-trained Model",
  author = "Xu, Zenan and Guo, Daya and Tang, Duyu and Su, Qinliang and Shou, Linjun and Gong, Ming and
            Zhong, Wanjun and Quan, Xiaojun and Jiang, Daxin and Duan, Nan",
  booktitle = "Proceedings of the 59th Annual Meeting of the Association for Computational Linguistics and the
               11th International Joint Conference on Natural Language Processing (Volume 1: Long Papers)",
  year = "2021",
  publisher = "Association for Computational Linguistics",
  url = "https://aclanthology.org/2021.acl-long.420",
  doi = "10.18653/v1/2021.acl-long.420",
  pages = "5412--5422"
}"""


@strict
@dataclass
class SepSettings:
    """The `sep` fields of `XsynBertConfig` (see the table above)."""

    sep_alpha: float | int = validated_field(between(0, 1), default=0.1)
    sep_learn_alpha: bool = False
    sep_distance_loss_weight: float | int = validated_field(at_least(0), default=0.0)
    sep_max_distance: int = validated_field(at_least(2), default=8)  # a class for distance 1, one for "that or more"


@dataclass
class SepContext:
    """D~ in the layers' dtype, and the pairs whose distances were corrupted for the loss (or None)."""

    weights: torch.Tensor
    pairs: torch.Tensor | None


class Sep(SyntaxVariant):
    name = "sep"
    settings = SepSettings
    uses_layers = True
    paper = XU_2021
    losses = (LossTerm(("seprem_loss",), "sep_distance_loss_weight"),)
    parameter_markers = ("seprem", "seprem_head")
    tree_fields = ("tree_parent", "tree_upos")

    def install(self, model: PreTrainedModel) -> None:
        self.layers().install(model)

    def init_weights(self, module: Any, config: PretrainedConfig) -> None:
        self.layers().init_weights(module, config)

    def context(self, model: PreTrainedModel, tree: TreeTensors, batch: SyntaxBatch, with_losses: bool
                ) -> SepContext:
        return self.layers().sep_context(model, tree, batch, with_losses)

    def auxiliary_losses(self, model: PreTrainedModel, context: SepContext, tree: TreeTensors,
                         batch: SyntaxBatch, hidden: torch.Tensor, with_losses: bool) -> dict[str, torch.Tensor]:
        if context.pairs is None:
            return {}
        return {"seprem_loss": model.seprem_head.loss(hidden, context.pairs, tree.distances)}


VARIANT = Sep()
