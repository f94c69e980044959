"""The `sep` variant's own behaviour on tiny random BERTs (the checks every variant passes: test_models_variants.py).

Every check compares against something independent: plain transformers `BertModel` with the same weights,
attention probabilities recomputed from the definition, or values worked out by hand.
"""

from __future__ import annotations

import torch
from variant_models import SHAPE, lifted

from xsyn.models.factory import build_model
from xsyn.trees.tensors import TreeTensors


def test_sep_mixes_each_layer_input_with_its_inverse_distance_view(plain, batch):
    """H' = (1 - alpha) H + alpha sigmoid(W1 H + W2 D~ H), D~ by hand for the first sentence's pieces."""
    model = lifted(plain, "sep", sep_alpha=0.3)
    mix = model.encoder.layer[0].seprem
    tree = TreeTensors(batch["tree_parent"], batch["tree_upos"], batch["tree_word"], batch["tree_segment"])
    weights = tree.sep_weights()
    hidden = torch.randn(*batch["input_ids"].shape, SHAPE["hidden_size"])
    with torch.no_grad():
        out = mix(hidden, weights)
        inverse = torch.where(tree.distances[0] > 0, 1.0 / tree.distances[0].float(), 0.0)
        inverse[tree.distances[0] >= 10_000] = 0.0  # padding is unreachable
        by_hand = inverse / inverse.sum(-1, keepdim=True).clamp(min=1e-12)
        spread = by_hand @ hidden[0]
        expected = 0.7 * hidden[0] + 0.3 * torch.sigmoid(mix.own(hidden[0]) + mix.tree(spread))
    torch.testing.assert_close(out[0], expected)
    # a piece moves the output of exactly the pieces it is reachable from (its own sentence pair)
    with torch.no_grad():
        moved = hidden.clone()
        moved[1, 2] += 1.0
        changed = (mix(moved, weights) - out).abs().amax(-1) > 1e-6
    assert not changed[0].any()
    assert changed[1].tolist() == (batch["attention_mask"][1].bool() & (tree.distances[1, 2] < 10_000)).tolist()


def test_sep_layers_are_the_chosen_ones_and_alpha_can_train(plain):
    model = lifted(plain, "sep", syntax_layers=[1], sep_learn_alpha=True)
    assert {name.split(".seprem.")[0] for name, _ in model.syntax_parameters()} == {"encoder.layer.1"}
    assert model.encoder.layer[1].seprem.alpha.requires_grad
    assert not lifted(plain, "sep").encoder.layer[0].seprem.alpha.requires_grad


def test_sep_trains_under_bf16_autocast(small_tokenizer, batch):
    model = build_model("tiny", "sep", "token", tokenizer=small_tokenizer, num_labels=3, **SHAPE,
                        sep_distance_loss_weight=0.5).train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(**batch, labels=torch.zeros_like(batch["input_ids"]))
    out.loss.backward()
    assert torch.isfinite(out.loss) and model.bert.encoder.layer[0].seprem.own.weight.grad is not None


def test_sep_distance_loss_hides_pairs_in_training_only(small_tokenizer, batch):
    """With the auxiliary loss, training reads corrupted distances and predicts the true ones; eval does not."""
    torch.manual_seed(0)
    model = build_model("tiny", "sep", "token", tokenizer=small_tokenizer, num_labels=3, **SHAPE,
                        sep_distance_loss_weight=0.5)
    labels = torch.zeros_like(batch["input_ids"])
    model.train()
    out = model(**batch, labels=labels)
    assert out.seprem_loss is not None and out.seprem_loss > 0
    torch.testing.assert_close(out.loss, out.task_loss + 0.5 * out.seprem_loss)
    model.eval()
    with torch.no_grad():
        evaluated = model(**batch, labels=labels)
    assert evaluated.seprem_loss is None and torch.equal(evaluated.loss, evaluated.task_loss)
    without = build_model("tiny", "sep", "token", tokenizer=small_tokenizer, num_labels=3, **SHAPE)
    assert without.bert.seprem_head is None
    assert without.train()(**batch, labels=labels).seprem_loss is None
