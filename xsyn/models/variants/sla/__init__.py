"""`sla`: syntax-aware local attention (Li et al. 2021).

In each syntax layer a token mixes, through a learned gate, BERT's attention with attention over the
words local to it in the tree (`xsyn.models.variants.gated_local`).

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

from xsyn.models.variants.gated_local import GatedLocalVariant
from xsyn.utils.schema import at_least, strict, validated_field

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig

    from xsyn.trees.tensors import TreeTensors


@strict
@dataclass
class SlaSettings:
    """The `sla` fields of `XsynBertConfig` (see the table above)."""

    sla_distance: int = validated_field(at_least(0), default=3)
    sla_punct_visible: bool = False


class Sla(GatedLocalVariant):
    name = "sla"
    settings = SlaSettings
    paper_names = {"m": "sla_distance", "punct_visible": "sla_punct_visible"}
    tree_fields = ("tree_parent", "tree_upos", "tree_word")

    def local_mask(self, config: PretrainedConfig, tree: TreeTensors) -> torch.Tensor:
        return tree.sla_mask(config.sla_distance, config.sla_punct_visible)


VARIANT = Sla()
