"""`sdoi`: the syntax-guided layer of SG-Net (Zhang et al. 2020).

One extra Transformer layer attends, over BERT's output, only to each piece's syntactic dependency
of interest (its ancestors and itself); its output is aggregated with BERT's
(`layers.py` in this folder). `last_hidden_state` (and the pooled output) is the aggregated H';
`hidden_states` are BERT's layers.

| setting                     | default | meaning                                                    |
|-----------------------------|---------|------------------------------------------------------------|
| `sdoi_alpha`                | 0.5     | H' = alpha H + (1 - alpha) H_sdoi                          |
| `sdoi_learn_alpha`          | False   | make alpha a trained parameter (initialised to the above)  |
| `sdoi_init_from_last_layer` | False   | start the extra layer as a copy of the checkpoint's last   |
|                             |         | layer (SG-Net: random); applies when lifting a checkpoint  |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xsyn.models.variants.base import SyntaxVariant
from xsyn.utils.schema import between, strict, validated_field

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedModel

    from xsyn.trees.tensors import TreeTensors

ZHANG_2020 = """@inproceedings{zhang-etal-2020-sgnet,
  title = "{SG-Net}: Syntax-Guided Machine Reading Comprehension",
  author = "Zhang, Zhuosheng and Wu, Yuwei and Zhou, Junru and Duan, Sufeng and Zhao, Hai and Wang, Rui",
  booktitle = "Proceedings of the AAAI Conference on Artificial Intelligence",
  volume = "34",
  number = "05",
  pages = "9636--9643",
  year = "2020",
  doi = "10.1609/aaai.v34i05.6511"
}"""


@strict
@dataclass
class SdoiSettings:
    """The `sdoi` fields of `XsynBertConfig` (see the table above)."""

    sdoi_alpha: float | int = validated_field(between(0, 1), default=0.5)
    sdoi_learn_alpha: bool = False
    sdoi_init_from_last_layer: bool = False


class Sdoi(SyntaxVariant):
    name = "sdoi"
    settings = SdoiSettings
    paper = ZHANG_2020
    parameter_markers = ("sdoi",)
    tree_fields = ("tree_parent", "tree_upos")

    def install(self, model: PreTrainedModel) -> None:
        model.sdoi = self.layers().SdoiLayer(model.config)

    def after_lift(self, model: PreTrainedModel) -> None:
        if model.config.sdoi_init_from_last_layer:  # the extra layer starts as the checkpoint's last (same shapes)
            model.sdoi.layer.load_state_dict(model.encoder.layer[-1].state_dict())

    def init_weights(self, module: Any, config: PretrainedConfig) -> None:
        self.layers().init_weights(module, config)

    def output(self, model: PreTrainedModel, tree: TreeTensors, hidden: torch.Tensor) -> torch.Tensor:
        return self.layers().sdoi_output(model, tree, hidden)


VARIANT = Sdoi()
