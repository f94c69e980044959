"""Gated local/global attention, the layers `sla` and `wla` share (Li et al. 2021). Not a variant itself:
the base of those two, which differ only in what is local to a piece.

In each syntax layer a token mixes, through a learned gate, BERT's attention with attention over the
pieces local to it (`layers.py` in this folder).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xsyn.models.variants.base import SyntaxBatch, SyntaxVariant

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedModel

    from xsyn.trees.tensors import TreeTensors

LI_2021 = """@inproceedings{li-etal-2021-improving-bert,
  title = "Improving {BERT} with Syntax-aware Local Attention",
  author = "Li, Zhongli and Zhou, Qingyu and Li, Chao and Xu, Ke and Cao, Yunbo",
  booktitle = "Findings of the Association for Computational Linguistics: ACL-IJCNLP 2021",
  year = "2021",
  publisher = "Association for Computational Linguistics",
  eprint = "2012.15150",
  archivePrefix = "arXiv",
  url = "https://arxiv.org/abs/2012.15150"
}"""


class GatedLocalVariant(SyntaxVariant):
    """SLA and WLA: the gated local attention in each syntax layer; they differ in what is local."""

    uses_layers = True
    paper = LI_2021
    parameter_markers = ("gate",)
    layers_module = f"{__name__}.layers"  # the subclasses' layers are these, not a folder of their own

    def install(self, model: PreTrainedModel) -> None:
        self.layers().install_local_attention(model)

    def local_mask(self, config: PretrainedConfig, tree: TreeTensors) -> torch.Tensor:
        """The (B, T, T) bool mask of what is local to each piece."""
        raise NotImplementedError

    def context(self, model: PreTrainedModel, tree: TreeTensors, batch: SyntaxBatch, with_losses: bool
                ) -> torch.Tensor:
        return self.layers().local_attention_mask(model, self.local_mask(model.config, tree), batch.attention_mask)
