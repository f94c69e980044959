"""`none`: plain BERT, the baseline every variant is compared with. The batch's trees are not read."""

from __future__ import annotations

from xsyn.models.variants.base import SyntaxVariant


class PlainBert(SyntaxVariant):
    name = "none"
    is_baseline = True
    tree_fields = ()


VARIANT = PlainBert()
