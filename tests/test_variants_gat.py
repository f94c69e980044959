"""The `gat` variant's own behaviour on tiny random BERTs (the checks every variant passes: test_models_variants.py).

Every check compares against something independent: plain transformers `BertModel` with the same weights,
attention probabilities recomputed from the definition, or values worked out by hand.
"""

from __future__ import annotations

import pytest
import torch
from variant_models import CAT_CHASED_CAT, attention_probs, lifted

from xsyn.models.variants.gat.layers import (
    RELATION_BIAS_SCALE,
    freeze_gat,
    gat_state_dict,
    load_gat,
    save_gat,
    structural_loss,
    syntax_probe,
)
from xsyn.trees.batch import collate_trees
from xsyn.trees.tensors import HEAD, TreeTensors
from xsyn.trees.wordpiece import WordpieceAligner


def test_gat_bias_changes_only_the_syntax_heads_of_the_syntax_layers(plain, batch):
    model = lifted(plain, "gat", syntax_heads=1, syntax_layers=[1])
    ours, theirs = attention_probs(model, batch), attention_probs(lifted(plain, "none"), batch)
    torch.testing.assert_close(ours[0], theirs[0])  # layer 0 is not a syntax layer
    torch.testing.assert_close(ours[1][:, 1:], theirs[1][:, 1:])  # heads 1..3 are not syntax heads
    assert (ours[1][:, 0] - theirs[1][:, 0]).abs().max() > 1e-4


def test_a_value_only_bias_leaves_attention_probabilities_unchanged(plain, batch):
    model = lifted(plain, "gat", bias_targets="value")
    reference = lifted(plain, "none")
    # layer 0 reads the same input in both models (later layers read the changed values)
    torch.testing.assert_close(attention_probs(model, batch)[0], attention_probs(reference, batch)[0])
    with torch.no_grad():
        assert (model(**batch).last_hidden_state - reference(**batch).last_hidden_state).abs().max() > 1e-4


def test_gat_output_depends_only_on_the_tree_neighbourhood(plain, batch):
    """Two GAT layers with delta = 1 see pieces at most two hops away, whatever the surface order."""
    model = lifted(plain, "gat", gat_delta=1, gat_layers=2)
    tree = TreeTensors(batch["tree_parent"], batch["tree_upos"], batch["tree_word"], batch["tree_segment"])
    with torch.no_grad():
        base = syntax_probe(model, **batch).gat_output[0]
        for j in range(1, 8):
            moved = dict(batch, input_ids=batch["input_ids"].clone())
            moved["input_ids"][0, j] = 5 + (moved["input_ids"][0, j] - 4) % 20  # another real word
            changed = (syntax_probe(model, **moved).gat_output[0] - base).abs().amax(-1) > 1e-6
            assert changed.tolist() == (tree.distances[0, j] <= 2).tolist()


@pytest.mark.parametrize("attention", ["dot", "additive"])
def test_edge_direction_lets_a_gat_layer_read_a_pieces_head_alone(plain, batch, attention):
    """The delta = 1 mask is symmetric; the relation logits are what can single out the head.

    With a large logit on HEAD, one layer copies the head's input: G at piece i changes exactly
    when the input at i's head changes, and not when i's dependents or i itself change.
    """
    model = lifted(plain, "gat", gat_delta=1, gat_layers=1, gat_attention=attention, gat_edge_direction=True)
    parent = batch["tree_parent"][0, :13]
    with torch.no_grad():
        model.gat.relation_bias[:, HEAD] = 50.0 / RELATION_BIAS_SCALE
        base = syntax_probe(model, **batch).gat_output[0]
        for j in range(1, 12):
            moved = dict(batch, input_ids=batch["input_ids"].clone())
            moved["input_ids"][0, j] = 5 + (moved["input_ids"][0, j] - 4) % 20  # another real word
            changed = (syntax_probe(model, **moved).gat_output[0] - base).abs().amax(-1) > 1e-5
            assert changed[1:13].tolist() == (parent[1:] == j).tolist()


@pytest.mark.parametrize("positions", [False, True])
def test_position_embeddings_tell_identical_words_in_mirrored_places_apart(plain, small_tokenizer, positions):
    """[CLS] cat chase ##d cat [SEP]: both cats hang from "chase", with the same input and
    neighbourhood, so a GAT gives them the same output unless BERT's positions are added to its input."""
    model = lifted(plain, "gat", gat_delta=1, gat_position_embeddings=positions)
    cats = collate_trees([WordpieceAligner(small_tokenizer).encode([CAT_CHASED_CAT])[0]])
    with torch.no_grad():
        g = syntax_probe(model, **cats).gat_output[0]
        tree = TreeTensors(cats["tree_parent"], cats["tree_upos"], None, None)
        words = model.embeddings.word_embeddings(cats["input_ids"])
        by_hand = model.gat(words + model.embeddings.position_embeddings.weight[:6] if positions else words,
                            tree.upos, tree.gat_mask(1))[0]
    torch.testing.assert_close(g, by_hand)
    assert torch.allclose(g[1], g[4], atol=1e-6) is not positions


def test_probe_predictions_are_squared_norms_of_the_projected_gat_output(plain, batch):
    model = lifted(plain, "gat")
    with torch.no_grad():
        out = syntax_probe(model, **batch)
        g = out.gat_output
        theta1, theta2 = model.gat.distance_probe.weight, model.gat.depth_probe.weight
        diff = g.unsqueeze(2) - g.unsqueeze(1)  # (B, T, T, k d_g)
        expected = ((diff @ theta1.T) ** 2).sum(-1)
        torch.testing.assert_close(out.predicted_distances, expected, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(out.predicted_depths, ((g @ theta2.T) ** 2).sum(-1))


def test_probe_distances_stay_float32_under_bf16_autocast():
    """|p_i|^2 + |p_j|^2 - 2 p_i.p_j cancels: with bf16 products (8 bits of mantissa) norms in the
    thousands leave errors in the tens, far above the tree distances the structural loss compares."""
    from xsyn.models.configuration import XsynBertConfig
    from xsyn.models.variants.gat.layers import GatSyntaxEncoder

    torch.manual_seed(0)
    encoder = GatSyntaxEncoder(XsynBertConfig(vocab_size=64, hidden_size=64, num_hidden_layers=1,
                                              num_attention_heads=2, intermediate_size=64, variant="gat"))
    g = torch.randn(2, 24, encoder.distance_probe.in_features) * 3
    p = (g.double() @ encoder.distance_probe.weight.double().T)
    exact = ((p.unsqueeze(2) - p.unsqueeze(1)) ** 2).sum(-1)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        distances, depths = encoder.probe(g)
        pb = encoder.distance_probe(g)  # what a bf16 product gives: the error the probe avoids
        sq = pb.pow(2).sum(-1)
        in_bf16 = sq.unsqueeze(2) + sq.unsqueeze(1) - 2 * pb @ pb.transpose(1, 2)
    assert distances.dtype == depths.dtype == torch.float32
    assert (distances.double() - exact).abs().max() < 0.05 < (in_bf16.double() - exact).abs().max()


def test_structural_loss_by_hand():
    # one sequence of 3 real pieces (n = 3) and a padded one of 2 (n = 2)
    predicted = torch.tensor([[[0.0, 2.0, 1.0], [2.0, 0.0, 4.0], [1.0, 4.0, 0.0]],
                              [[0.0, 3.0, 9.0], [3.0, 0.0, 9.0], [9.0, 9.0, 9.0]]])
    distances = torch.tensor([[[0, 1, 1], [1, 0, 2], [1, 2, 0]],
                              [[0, 1, 0], [1, 0, 0], [0, 0, 0]]])
    predicted_depths = torch.tensor([[0.5, 1.0, 3.0], [1.0, 2.0, 7.0]])
    depths = torch.tensor([[0, 1, 1], [0, 1, 0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    distance_loss, depth_loss = structural_loss(predicted, predicted_depths, distances, depths, mask)
    # sequence 1: |2-1|*2 + |1-1|*2 + |4-2|*2 = 6 over 9; sequence 2: |3-1|*2 = 4 over 4
    assert distance_loss.item() == pytest.approx((6 / 9 + 4 / 4) / 2)
    # sequence 1: 0.5 + 0 + 2 = 2.5 over 3; sequence 2: 1 + 1 = 2 over 2
    assert depth_loss.item() == pytest.approx((2.5 / 3 + 2 / 2) / 2)


def test_gat_checkpoint_saves_loads_and_freezes_on_its_own(plain, tmp_path):
    trained, fresh = lifted(plain, "gat"), lifted(plain, "gat")
    save_gat(trained, tmp_path)
    load_gat(fresh, tmp_path)
    for name, tensor in gat_state_dict(trained).items():
        assert torch.equal(gat_state_dict(fresh)[name], tensor)
    assert not any(name.startswith("embeddings.") for name in gat_state_dict(trained))  # BERT's, not the GAT's
    freeze_gat(fresh)
    frozen = {name for name, p in fresh.named_parameters() if not p.requires_grad}
    assert frozen == {f"gat.{name}" for name, _ in fresh.gat.named_parameters()}
    with pytest.raises(ValueError, match="gat_heads=2 but this model has gat_heads=4"):
        load_gat(lifted(plain, "gat", gat_heads=4), tmp_path)
    with pytest.raises(ValueError, match="need variant 'gat'"):
        save_gat(lifted(plain, "sla"), tmp_path)
