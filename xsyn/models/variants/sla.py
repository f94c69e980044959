"""`sla`: syntax-aware local attention (Li et al. 2021).

In each syntax layer a token mixes, through a learned gate, BERT's attention with attention over the
words local to it in the tree (`xsyn.models.local_attention`).

| setting             | default    | meaning                                                      |
|---------------------|------------|--------------------------------------------------------------|
| `syntax_layers`     | all layers | encoder layers (0-based) with the gated local attention      |
| `sla_distance`      | 3          | m: word j is local to word i iff min over i-1, i, i+1 of the |
|                     |            | tree distance to j is <= m                                   |
| `sla_punct_visible` | False      | punctuation is local to every word                           |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from xsyn.models.variants.base import SyntaxBatch, SyntaxVariant
from xsyn.utils.schema import at_least, strict, validated_field

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


@strict
@dataclass
class SlaSettings:
    """The `sla` fields of `PretrainedConfig` (see the table above)."""

    sla_distance: int = validated_field(at_least(0), default=3)
    sla_punct_visible: bool = False


class LocalAttention(SyntaxVariant):
    """SLA and WLA: the gated local attention in each syntax layer; they differ in what is local."""

    uses_layers = True
    paper = LI_2021
    parameter_markers = ("gate",)

    def install(self, model: PreTrainedModel) -> None:
        from xsyn.models.local_attention import install_local_attention

        install_local_attention(model)

    def local_mask(self, config: PretrainedConfig, tree: TreeTensors) -> torch.Tensor:
        """The (B, T, T) bool mask of what is local to each piece."""
        raise NotImplementedError

    def context(self, model: PreTrainedModel, tree: TreeTensors, batch: SyntaxBatch, with_losses: bool
                ) -> torch.Tensor:
        from xsyn.models.local_attention import local_attention_mask

        return local_attention_mask(model, self.local_mask(model.config, tree), batch.attention_mask)


class Sla(LocalAttention):
    name = "sla"
    settings = SlaSettings
    paper_names = {"m": "sla_distance", "punct_visible": "sla_punct_visible"}
    tree_fields = ("tree_parent", "tree_upos", "tree_word")

    def local_mask(self, config: PretrainedConfig, tree: TreeTensors) -> torch.Tensor:
        return tree.sla_mask(config.sla_distance, config.sla_punct_visible)


VARIANT = Sla()
