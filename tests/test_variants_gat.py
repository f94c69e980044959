"""The `gat` variant's own behaviour (the checks every variant passes: test_models_variants.py): on tiny random BERTs,
against plain transformers `BertModel` with the same weights, attention probabilities recomputed from the definition,
or values worked out by hand; and here, what `reproduce=ahmad2021` gives it (Ahmad et al.'s released code,
wasiahmad/Syntax-MBERT): the GAT's initial draws of `graph_utils.py` and the UPOS ids of `constants.py`."""

from __future__ import annotations

import json
import math

import pytest
import torch
from variant_models import CAT_CHASED_CAT, attention_probs, lifted

from xsyn.models.configuration import XsynBertConfig
from xsyn.models.modeling import XsynBertModel
from xsyn.models.variants.gat.layers import (
    RELATION_BIAS_SCALE,
    freeze_gat,
    gat_state_dict,
    load_gat,
    released_upos_ids,
    save_gat,
    structural_loss,
    syntax_probe,
)
from xsyn.syntax.vocab import UPOS_IDS, UPOS_SPECIAL_ID, UPOS_UNKNOWN_ID
from xsyn.trees.batch import collate_trees
from xsyn.trees.tensors import HEAD, TreeTensors
from xsyn.trees.wordpiece import WordpieceAligner
from xsyn.utils.errors import InputError

SHAPE = {"vocab_size": 40, "hidden_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4,
         "intermediate_size": 32, "gat_layers": 2, "gat_heads": 4, "gat_head_size": 32, "probe_rank": 32,
         "gat_attention": "additive"}


def gat(**settings):
    torch.manual_seed(0)
    return XsynBertModel(XsynBertConfig(variant="gat", **{**SHAPE, **settings})).gat


def test_xavier_draws_each_heads_weights_as_the_released_gat_does():
    """graph_utils.py: W (in x 32) and a1, a2 (32 x 1) of each head from xavier_uniform(gain 1.414): bounds
    1.414 sqrt(6 / (96 + 32)) = 0.3062 (first layer), 1.414 sqrt(6 / (128 + 32)) = 0.2738 (the next, whose input
    is the 4 x 32 heads) and 1.414 sqrt(6 / 33) = 0.6029 (a); the probes U(-0.05, 0.05)."""
    encoder = gat(gat_weight_init="xavier")
    score = 1.414 * math.sqrt(6 / 33)
    for layer, fan in zip(encoder.layers, (96, 128)):
        for weight, bound in ((layer.project.weight, 1.414 * math.sqrt(6 / (fan + 32))), (layer.score_query, score),
                              (layer.score_key, score)):
            w = weight.detach()
            assert w.abs().max() <= bound and w.abs().max() > 0.95 * bound  # uniform up to its bound
            assert w.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.15)
    for probe in (encoder.distance_probe, encoder.depth_probe):
        w = probe.weight.detach()
        assert 0.045 < w.abs().max() <= 0.05 and w.std().item() == pytest.approx(0.05 / math.sqrt(3), rel=0.05)
    # transformers 2.x draws the embedding's padding row as well (BERT's rule now zeroes it)
    assert encoder.upos_embeddings.weight[0].abs().sum() > 0


def test_the_default_draws_every_gat_weight_from_berts_normal():
    encoder = gat()
    for weight in (encoder.layers[0].project.weight, encoder.layers[1].score_query, encoder.distance_probe.weight):
        assert weight.detach().std().item() == pytest.approx(0.02, rel=0.15)
    assert encoder.upos_embeddings.weight[0].abs().sum() == 0


def test_the_released_code_numbers_cls_sep_and_unknown_upos_apart():
    """constants.py: UPOS_MAP = [PAD] 0, the 17 tags 1-17, [CLS] 18, [SEP] 19, [UNK] 20; xsyn's one special id
    (18) is [CLS] at position 0 and [SEP] after it, xsyn's unknown (19) is 20."""
    upos = torch.tensor([[UPOS_SPECIAL_ID, UPOS_IDS["NOUN"], UPOS_UNKNOWN_ID, UPOS_SPECIAL_ID, UPOS_IDS["X"],
                          UPOS_SPECIAL_ID, 0]])
    assert released_upos_ids(upos).tolist() == [[18, UPOS_IDS["NOUN"], 20, 19, 17, 19, 0]]
    assert gat(gat_special_upos="separate").upos_embeddings.num_embeddings == 21
    assert gat().upos_embeddings.num_embeddings == 20


def test_a_pretrained_gat_with_shared_specials_is_refused_by_a_separate_one(tmp_path):
    config = XsynBertConfig(variant="gat", **SHAPE)
    torch.manual_seed(0)
    save_gat(XsynBertModel(config), tmp_path)
    with pytest.raises(InputError, match="gat_special_upos='shared' but this model has gat_special_upos='separate'"):
        load_gat(XsynBertModel(XsynBertConfig(variant="gat", gat_special_upos="separate", **SHAPE)), tmp_path)


def test_reproduce_ahmad2021_runs_as_users_run_it(tmp_path, xsyn_on_cpu):
    """`xsyn finetune --set reproduce=ahmad2021` in a process of its own: the run saves the code's settings."""
    from xsyn.data.synth import write_vocab

    vocab = tmp_path / "vocab.txt"
    write_vocab(vocab)
    out = tmp_path / "run"
    xsyn_on_cpu(["finetune", "--task", "synth", "--model", "tiny", "--tokenizer", str(vocab), "--train-lang", "svo",
                 "--parser", "chain", "--variant", "gat", "--max-train-examples", "8", "--set", "max_eval_examples=8",
                 "--max-steps", "2", "--batch-size", "4", "--quiet", "--set", "reproduce=ahmad2021",
                 "--cache-dir", str(tmp_path / "cache"), "--output-dir", str(out)])
    saved = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert (saved["reproduce"], saved["tokenize_by"], saved["sep_attachment"], saved["truncation_tie"]) == (
        "ahmad2021", "words", "segment_end", "last")
    model = saved["model_settings"]
    assert (model["gat_attention"], model["bias_targets"], model["gat_weight_init"], model["gat_special_upos"]) == (
        "additive", "key,value", "xavier", "separate")
    assert "released code ahmad2021" in saved["hyperparameter_source"]
    # a checkpoint copied out of its run still says how its inputs were built (evaluate and predict read it)
    import shutil

    from xsyn.run.evaluation import locate_checkpoint, run_config

    task = json.loads((out / "best" / "xsyn_task.json").read_text(encoding="utf-8"))
    assert task["input_conventions"] == {"sep_attachment": "segment_end", "tokenize_by": "words",
                                         "truncation_tie": "last"}
    copied = shutil.copytree(out / "best", tmp_path / "copied")
    config = run_config(locate_checkpoint(copied), {"tokenizer": str(vocab)})
    assert (config.tokenize_by, config.sep_attachment, config.truncation_tie) == ("words", "segment_end", "last")


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
