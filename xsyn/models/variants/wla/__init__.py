"""`wla`: word-window local attention, the baseline of Li et al. (2021) for SLA.

As `sla` (the gated local attention of `xsyn.models.variants.gated_local`), but a word's local words are
those within a window around it, whatever the tree.

Its setting, with its meaning, is `WlaSettings` below (`xsyn settings --variant wla` lists it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from xsyn.models.variants.gated_local import GatedLocalVariant
from xsyn.utils.schema import at_least, setting, strict

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig

    from xsyn.trees.tensors import TreeTensors


@strict
@dataclass
class WlaSettings:
    """The `wla` fields of `XsynBertConfig`."""

    wla_window: int = setting(4, check=at_least(0), help="k: word j is local to word i iff abs(i - j) <= k")


class Wla(GatedLocalVariant):
    name = "wla"
    settings = WlaSettings
    paper_names = {"k": "wla_window"}
    tree_fields = ("tree_upos", "tree_word", "tree_segment")

    def local_mask(self, config: PretrainedConfig, tree: TreeTensors) -> torch.Tensor:
        return tree.wla_mask(config.wla_window)


VARIANT = Wla()
