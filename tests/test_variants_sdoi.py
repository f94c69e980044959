"""The `sdoi` variant's own behaviour on tiny random BERTs (the checks every variant passes: test_models_variants.py).

Every check compares against something independent: plain transformers `BertModel` with the same weights,
attention probabilities recomputed from the definition, or values worked out by hand.
"""

from __future__ import annotations

import torch
from variant_models import SHAPE, lifted

from xsyn.syntax.vocab import UPOS_SPECIAL_ID
from xsyn.trees.tensors import TreeTensors


def test_sdoi_layer_reads_only_ancestors_and_mixes_by_alpha(plain, batch):
    model = lifted(plain, "sdoi")
    tree = TreeTensors(batch["tree_parent"], batch["tree_upos"], batch["tree_word"], batch["tree_segment"])
    mask = tree.sdoi_mask().unsqueeze(1)
    special = batch["tree_upos"][0] == UPOS_SPECIAL_ID
    reads = torch.where(special.unsqueeze(1), torch.eye(len(special), dtype=torch.bool), tree.ancestors[0])
    hidden = torch.randn(*batch["input_ids"].shape, SHAPE["hidden_size"])
    sdoi = model.sdoi
    with torch.no_grad():
        sdoi.alpha.fill_(0.0)
        base = sdoi(hidden, mask)
        for j in range(hidden.shape[1]):
            moved = hidden.clone()
            moved[0, j] += 1.0
            changed = (sdoi(moved, mask)[0] - base[0]).abs().amax(-1) > 1e-6
            assert changed.tolist() == reads[:, j].tolist()  # i moves iff j is i or its ancestor
        sdoi.alpha.fill_(0.3)
        torch.testing.assert_close(sdoi(hidden, mask), 0.3 * hidden + 0.7 * base)
