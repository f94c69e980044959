"""`sdoi`: the syntax-guided layer of SG-Net (Zhang et al. 2020).

One extra Transformer layer attends, over BERT's output, only to each piece's syntactic dependency
of interest (its ancestors and itself); its output is aggregated with BERT's
(`layers.py` in this folder). `last_hidden_state` (and the pooled output) is the aggregated H';
`hidden_states` are BERT's layers.

Its settings, each with its meaning, are `SdoiSettings` below (`xsyn settings --variant sdoi` lists them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xsyn.models.variants.base import ReleasedCode, SyntaxVariant
from xsyn.utils.schema import Invalid, between, one_of, setting, strict

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


SDOI_SELF = ("all", "heads")  # every piece sees itself; only a piece that heads another does (run_squad2.py)
EMPTY_ROWS = ("self", "all")  # a row with nothing to see attends to itself; to every position (run_squad2.py)
AGGREGATIONS = ("alpha", "softmax")  # alpha H + (1 - alpha) H_sdoi; gamma (softmax(w) . (H, H_sdoi)) (modeling.py)


@strict
@dataclass
class SdoiSettings:
    """The `sdoi` fields of `XsynBertConfig`."""

    sdoi_alpha: float | int = setting(0.5, check=between(0, 1), help="H' = alpha H + (1 - alpha) H_sdoi")
    sdoi_learn_alpha: bool = setting(False, help="train the aggregation's weights: alpha (initialised to "
                                     "sdoi_alpha), or with sdoi_aggregation=softmax w and gamma")
    sdoi_init_from_last_layer: bool = setting(False, help="start the extra layer as a copy of the checkpoint's last "
                                              "layer (SG-Net: random); applies when lifting a checkpoint")
    sdoi_aggregation: str = setting("alpha", check=one_of(AGGREGATIONS), help="alpha: H' = alpha H + (1 - alpha) "
                                    "H_sdoi (the paper); softmax: H' = gamma (w0 H + w1 H_sdoi), (w0, w1) = "
                                    "softmax(w), as SG-Net's modeling.py has it (w starts where softmax(w) = (alpha, "
                                    "1 - alpha): [0.5, 0.5] at 0.5, as the code's; gamma starts at 1)")
    sdoi_cls_visible: bool = setting(True, help="every piece sees [CLS], the root of xsyn's tree; false: no piece "
                                     "does, as neither of SG-Net's mask builders (run_squad2.py, convert_span.py) "
                                     "gives [CLS] a column")
    sdoi_self: str = setting("all", check=one_of(SDOI_SELF), help="all: every piece sees itself (the paper: "
                             "ancestors and itself); heads: only a piece that heads another in the wordpiece tree, as "
                             "SG-Net's run_squad2.py sets only spans of more than one piece (a one-piece word without "
                             "dependents and a word's later pieces do not see themselves)")
    sdoi_empty_rows: str = setting("self", check=one_of(EMPTY_ROWS), help="what a row left with nothing to see "
                                   "attends to ([CLS], [SEP], padding; with sdoi_self=heads a one-piece sentence): "
                                   "self, or all, every position of the padded input, as SG-Net's run_squad2.py "
                                   "leaves such rows all zero and its additive -10000 mask makes them BERT's plain "
                                   "attention")


# SG-Net's released code (cooelf/SG-Net: run_squad2.py builds the masks it trains on, modeling.py the layer), where
# it builds inputs, masks and weights otherwise than the paper's text; the docs' "paper, code and xsyn" table.
SG_NET = ReleasedCode(
    name="sgnet", repository="cooelf/SG-Net", commit="3b23546",
    inputs={"tokenize_by": "words", "qa_context_first": True, "carry_cut_dependents": True},
    model={"sdoi_cls_visible": False, "sdoi_self": "heads", "sdoi_empty_rows": "all", "sdoi_aggregation": "softmax",
           "sdoi_learn_alpha": True})


class Sdoi(SyntaxVariant):
    name = "sdoi"
    settings = SdoiSettings
    paper = ZHANG_2020
    parameter_markers = ("sdoi",)
    tree_fields = ("tree_parent", "tree_upos")
    released_code = SG_NET

    def validate(self, config: PretrainedConfig) -> None:
        if config.sdoi_aggregation == "softmax" and not 0 < config.sdoi_alpha < 1:
            raise Invalid("sdoi_alpha", f"{config.sdoi_alpha}, but the softmax aggregation starts its weights at "
                          "(alpha, 1 - alpha), which a softmax reaches only inside (0, 1): use 0 < alpha < 1")

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
