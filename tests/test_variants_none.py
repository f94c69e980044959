"""The `none` variant's own behaviour on tiny random BERTs (the checks every variant passes: test_models_variants.py).

Every check compares against something independent: plain transformers `BertModel` with the same weights,
attention probabilities recomputed from the definition, or values worked out by hand.
"""

from __future__ import annotations

import torch
from variant_models import bert_inputs, lifted


def test_plain_variant_ignores_the_syntax_fields(plain, batch):
    model = lifted(plain, "none")
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).last_hidden_state, model(**bert_inputs(batch)).last_hidden_state)
