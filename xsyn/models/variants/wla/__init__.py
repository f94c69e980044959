"""`wla`: word-window local attention, the baseline of Li et al. (2021) for SLA.

As `sla` (the gated local attention of `xsyn.models.variants.gated_local`), but a word's local words are
those within a window around it, whatever the tree.

| setting         | default    | meaning                                                  |
|-----------------|------------|----------------------------------------------------------|
| `syntax_layers` | all layers | encoder layers (0-based) with the gated local attention  |
| `wla_window`    | 4          | k: word j is local to word i iff abs(i - j) <= k         |
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
class WlaSettings:
    """The `wla` fields of `XsynBertConfig` (see the table above)."""

    wla_window: int = validated_field(at_least(0), default=4)


class Wla(GatedLocalVariant):
    name = "wla"
    settings = WlaSettings
    paper_names = {"k": "wla_window"}
    tree_fields = ("tree_upos", "tree_word", "tree_segment")

    def local_mask(self, config: PretrainedConfig, tree: TreeTensors) -> torch.Tensor:
        return tree.wla_mask(config.wla_window)


VARIANT = Wla()
