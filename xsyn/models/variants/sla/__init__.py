"""`sla`: syntax-aware local attention (Li et al. 2021).

In each syntax layer a token mixes, through a learned gate, BERT's attention with attention over the
words local to it in the tree (`xsyn.models.variants.gated_local`).

Its settings, each with its meaning, are `SlaSettings` below (`xsyn settings --variant sla` lists them); its
`syntax_layers` are the layers with the gated local attention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from xsyn.models.variants.base import ReleasedCode
from xsyn.models.variants.gated_local import GatedLocalVariant
from xsyn.utils.schema import at_least, setting, strict

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig

    from xsyn.trees.tensors import TreeTensors


@strict
@dataclass
class SlaSettings:
    """The `sla` fields of `XsynBertConfig`."""

    sla_distance: int = setting(3, check=at_least(0), help="m: word j is local to word i iff min over i-1, i, i+1 of "
                                "the tree distance to j is <= m")
    sla_punct_visible: bool = setting(False, help="punctuation (the pieces marked UPOS PUNCT: see the run setting "
                                      "punctuation) is local to every word")
    sla_across_sentences: bool = setting(True, help="words of different sentences (or segments) of one input may "
                                         "be local through [CLS], their roots' head in xsyn's tree; false: never "
                                         "through the tree, as in Li et al.'s dataset.py, whose graph leaves [CLS] "
                                         "unconnected (linear neighbours still count)")


# Li et al.'s released code (Neutralzz/syntax_aware_local_attention: src/dataset.py builds the masks, src/run.py the
# batches), where it builds inputs and masks otherwise than the paper's text; the docs' "paper, code and xsyn" table.
SLA_CODE = ReleasedCode(
    name="li2021", repository="Neutralzz/syntax_aware_local_attention", commit="e1b9397",
    inputs={"parser_words": "whitespace", "truncation": "end", "punctuation": "ascii"},
    model={"sla_punct_visible": True, "sla_across_sentences": False})


class Sla(GatedLocalVariant):
    name = "sla"
    settings = SlaSettings
    paper_names = {"m": "sla_distance", "punct_visible": "sla_punct_visible"}
    tree_fields = ("tree_parent", "tree_upos", "tree_word")
    released_code = SLA_CODE

    def local_mask(self, config: PretrainedConfig, tree: TreeTensors) -> torch.Tensor:
        return tree.sla_mask(config.sla_distance, config.sla_punct_visible, config.sla_across_sentences)


VARIANT = Sla()
