"""The `sla` variant's own behaviour on tiny random BERTs (the checks every variant passes: test_models_variants.py).

Every check compares against something independent: plain transformers `BertModel` with the same weights,
attention probabilities recomputed from the definition, or values worked out by hand.
"""

from __future__ import annotations

from variant_models import check_gated_mix


def test_gated_attention_mixes_local_and_global_probabilities(plain, batch):
    """Its gate mixes the local attention over pieces at most 3 tree hops apart with BERT's attention."""
    check_gated_mix(plain, batch, "sla", lambda tree: tree.sla_mask(3))
