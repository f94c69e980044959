"""The syntax variants on tiny random BERTs: what each one changes, what it must leave alone.

Every check compares against something independent: plain transformers `BertModel` with the same
weights, attention probabilities recomputed from the definition, or values worked out by hand.
"""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertModel

from xsyn.models.configuration import SyntaxConfigError, XsynBertConfig
from xsyn.models.factory import build_model, load_model
from xsyn.models.modeling import XsynBertModel
from xsyn.models.variants import VARIANTS, get_variant
from xsyn.models.variants.gat.layers import (
    RELATION_BIAS_SCALE,
    freeze_gat,
    gat_state_dict,
    load_gat,
    save_gat,
    structural_loss,
    syntax_probe,
)
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.vocab import UPOS_SPECIAL_ID
from xsyn.trees.batch import collate_trees
from xsyn.trees.tensors import HEAD, TreeTensors
from xsyn.trees.wordpiece import WordpieceAligner

SHAPE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
         "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
SMALL_GAT = {"gat_layers": 2, "gat_heads": 2, "gat_head_size": 8, "probe_rank": 8}
SYNTAX_VARIANTS = tuple(name for name in VARIANTS if not get_variant(name).is_baseline)  # the registry's

CHASED = SyntaxRecord.from_words(["the", "dog", "chased", "a", "cat", "."], [2, 3, 0, 5, 3, 3],
                                 ["DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT"],
                                 ["det", "nsubj", "root", "det", "obj", "punct"])
CAT_CHASED_CAT = SyntaxRecord.from_words(["cat", "chased", "cat"], [2, 0, 2], ["NOUN", "VERB", "NOUN"],
                                        ["obj", "root", "obj"])
HUND = SyntaxRecord.from_words(["der", "hund", "lauft", "zum", "haus"], [2, 3, 0, 5, 3],
                               ["DET", "NOUN", "VERB", "ADP", "NOUN"], ["det", "nsubj", "root", "case", "obl"])


@pytest.fixture(scope="module")
def batch(small_tokenizer):
    """A pair (13 pieces) and a padded single sentence: [CLS] der hund lau ##ft zum haus [SEP]."""
    aligner = WordpieceAligner(small_tokenizer)
    return collate_trees([aligner.encode([CHASED, HUND])[0], aligner.encode([HUND])[0]])


def config(variant: str, vocab_size: int, **settings) -> XsynBertConfig:
    return XsynBertConfig(vocab_size=vocab_size, variant=variant, **SHAPE, **{**SMALL_GAT, **settings})


def lifted(plain: BertModel, variant: str, **settings) -> XsynBertModel:
    """The variant with `plain`'s weights; only its own syntax parameters are left as initialised."""
    model = XsynBertModel(config(variant, plain.config.vocab_size, **settings)).eval()
    missing, unexpected = model.load_state_dict(plain.state_dict(), strict=False)
    assert not unexpected
    assert sorted(missing) == sorted(name for name, _ in model.syntax_parameters())
    return model


def switch_off(model: XsynBertModel) -> None:
    """GAT bias zero, SLA/WLA gate closed, SDOI alpha = 1, SEPREM alpha = 0."""
    with torch.no_grad():
        for name, param in model.syntax_parameters():
            if ".syntax_bias." in name or name.endswith("gate.proj.weight"):
                param.zero_()
            elif name.endswith("gate.proj.bias"):
                param.fill_(-50.0)  # sigmoid(-50) ~ 2e-22
            elif name == "sdoi.alpha":
                param.fill_(1.0)
            elif name.endswith("seprem.alpha"):
                param.fill_(0.0)


@pytest.fixture(scope="module")
def plain(small_tokenizer):
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(small_tokenizer), **SHAPE)
    return BertModel(cfg).eval()


def bert_inputs(batch):
    return {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}


# -- build-time errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(("settings", "field"), [
    ({"syntax_heads": 5}, "syntax_heads"),  # the model has 4 attention heads
    ({"gat_delta": 0}, "gat_delta"),
    ({"variant": "tree"}, "variant"),
    ({"syntax_layers": [0, 2]}, "syntax_layers"),  # layers are 0 and 1
    ({"bias_targets": "query,output"}, "bias_targets"),
    ({"gat_attention": "cosine"}, "gat_attention"),
    ({"sdoi_alpha": 1.5}, "sdoi_alpha"),
])
def test_bad_settings_fail_when_the_model_is_built(settings, field):
    settings = dict(settings)
    variant = settings.pop("variant", "gat")
    with pytest.raises(SyntaxConfigError, match=field):
        config(variant, 30, **settings)
    with pytest.raises(SyntaxConfigError, match=field):
        build_model("tiny", variant, "sequence", tokenizer=_vocab_stub(), num_labels=2, **SHAPE, **settings)


def _vocab_stub():
    from transformers import BertTokenizerFast

    return BertTokenizerFast(vocab={t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])})


def test_a_config_changed_after_creation_is_checked_again_when_a_model_is_built(small_tokenizer):
    cfg = config("gat", len(small_tokenizer))
    cfg.syntax_heads = 9
    with pytest.raises(SyntaxConfigError, match="syntax_heads"):
        XsynBertModel(cfg)


@pytest.mark.parametrize("variant", SYNTAX_VARIANTS)
def test_a_batch_without_a_needed_syntax_field_is_refused_by_name(plain, batch, variant):
    model = lifted(plain, variant)
    for field in get_variant(variant).batch_fields(model.config):
        partial = {k: v for k, v in batch.items() if k != field}
        with pytest.raises(ValueError, match=f"needs the batch field\\(s\\) {field}"):
            model(**partial)


# -- syntax switched off is plain BERT; switched on, it is not ------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_with_syntax_switched_off_outputs_equal_plain_bert(plain, batch, variant):
    reference = plain(**bert_inputs(batch))
    model = lifted(plain, variant)
    with torch.no_grad():
        for _, param in model.syntax_parameters():  # make the syntax path matter ...
            param.normal_(0.0, 0.5)
        if variant != "none":
            assert (model(**batch).last_hidden_state - reference.last_hidden_state).abs().max() > 1e-3
        switch_off(model)  # ... then switch it off
        out = model(**batch)
    torch.testing.assert_close(out.last_hidden_state, reference.last_hidden_state, atol=1e-5, rtol=0)
    torch.testing.assert_close(out.pooler_output, reference.pooler_output, atol=1e-5, rtol=0)


def test_plain_variant_ignores_the_syntax_fields(plain, batch):
    model = lifted(plain, "none")
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).last_hidden_state, model(**bert_inputs(batch)).last_hidden_state)


# -- where each variant acts -------------------------------------------------------------------------------


def attention_probs(model, batch):
    model.set_attn_implementation("eager")
    with torch.no_grad():
        return model(**batch, output_attentions=True).attentions


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


def gate_bias(model, value: float) -> None:
    with torch.no_grad():
        for name, param in model.syntax_parameters():
            if name.endswith("gate.proj.weight"):
                param.zero_()
            elif name.endswith("gate.proj.bias"):
                param.fill_(value)


@pytest.mark.parametrize(("variant", "mask_of"), [
    ("sla", lambda tree: tree.sla_mask(3)),
    ("wla", lambda tree: tree.wla_mask(4)),
])
def test_gated_attention_mixes_local_and_global_probabilities(plain, batch, variant, mask_of):
    model = lifted(plain, variant)
    gate_bias(model, 50.0)  # g = 1: local attention only
    local = attention_probs(model, batch)[0]
    gate_bias(model, -50.0)  # g = 0: BERT's attention
    global_ = attention_probs(model, batch)[0]
    gate_bias(model, 0.0)  # g = 1/2 for every token
    mixed = attention_probs(model, batch)[0]  # layer 0 reads the same input in all three runs
    tree = TreeTensors(batch["tree_parent"], batch["tree_upos"], batch["tree_word"], batch["tree_segment"])
    outside = ~mask_of(tree).unsqueeze(1).expand_as(local)
    assert outside.any()
    assert local[outside].abs().max() == 0
    torch.testing.assert_close(mixed, 0.5 * local + 0.5 * global_)


def test_eager_and_fused_attention_agree(plain, batch):
    for variant in SYNTAX_VARIANTS:
        model = lifted(plain, variant)
        with torch.no_grad():
            fused = model(**batch).last_hidden_state
            model.set_attn_implementation("eager")
            eager = model(**batch).last_hidden_state
        real = batch["attention_mask"].bool()
        torch.testing.assert_close(fused[real], eager[real], atol=1e-5, rtol=0)


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


# -- structural probes -----------------------------------------------------------------------------------


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


# -- saving and loading ------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_save_and_load_round_trip_to_identical_outputs(small_tokenizer, batch, tmp_path, variant):
    torch.manual_seed(1)
    model = build_model("tiny", variant, "token", tokenizer=small_tokenizer, num_labels=3, **SHAPE,
                        **SMALL_GAT, gat_delta=2, sla_distance=2, wla_window=1, sdoi_alpha=0.25,
                        syntax_layers=[1]).eval()
    model.save_pretrained(tmp_path)
    loaded = load_model(tmp_path).eval()
    assert type(loaded) is type(model)
    for name in ("variant", "gat_delta", "sla_distance", "wla_window", "sdoi_alpha", "syntax_layers",
                 "num_labels", "gat_layers"):
        assert getattr(loaded.config, name) == getattr(model.config, name)
    with torch.no_grad():
        assert torch.equal(loaded(**batch).logits, model(**batch).logits)


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


# -- sizes -----------------------------------------------------------------------------------------------


def test_syntax_parameter_counts_at_bert_base_size():
    """Counted from the definitions (bert-base: hidden 768, 12 layers, 12 heads of 64)."""
    base = {"vocab_size": 1000}
    with torch.device("meta"):
        counts = {v: sum(p.numel() for _, p in XsynBertModel(XsynBertConfig(variant=v, **base)).syntax_parameters())
                  for v in SYNTAX_VARIANTS}
    g, h = 4 * 64, 768  # GAT output, BERT hidden
    gat = (20 * h  # UPOS embedding (17 tags, pad, special, unknown)
           + 2 * (h * g + g) + 3 * 2 * (g * g + g)  # tied query-key and value projections of 4 layers
           + 2 * g  # LayerNorm
           + 2 * g * 64  # probes theta1, theta2 (rank 64)
           + 12 * 2 * (g * 64 + 64))  # G^Q_l, G^K_l for one head in 12 layers
    assert counts["gat"] == gat == 1_231_872
    assert counts["sla"] == counts["wla"] == 12 * (h + 1)  # one gate W_g, b_g per layer
    bert_layer = 4 * (h * h + h) + 2 * (h * 3072) + 3072 + h + 4 * h
    assert counts["sdoi"] == bert_layer + 1  # plus alpha
    assert counts["sep"] == 12 * (2 * h * h + h + 1)  # W1 (with its bias), W2 and alpha per layer


# -- on the accelerator (`--device cuda`; skipped on a CPU-only machine), and device placement ----------------


def labelled_classifier(small_tokenizer, variant: str):
    torch.manual_seed(3)
    return build_model("tiny", variant, "sequence", tokenizer=small_tokenizer, num_labels=2, **SHAPE, **SMALL_GAT,
                       gat_delta=2, gat_edge_direction=True, gat_position_embeddings=True, syntax_layers=[0, 1])


def step(model, batch: dict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """One forward + backward with labels: the logits and every gradient, on the CPU."""
    model.zero_grad(set_to_none=True)
    out = model(**batch, labels=torch.tensor([0, 1], device=batch["input_ids"].device))
    out.loss.backward()
    return out.logits.detach().cpu(), {n: p.grad.cpu() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("variant", VARIANTS)
def test_forward_and_backward_on_the_device_equal_the_cpu_within_1e_4(small_tokenizer, batch, device, variant):
    cpu_model = labelled_classifier(small_tokenizer, variant).train()  # dropout is 0 in SHAPE
    device_model = labelled_classifier(small_tokenizer, variant).to(device).train()
    logits, grads = step(cpu_model, batch)
    device_logits, device_grads = step(device_model, {k: v.to(device) for k, v in batch.items()})
    torch.testing.assert_close(device_logits, logits, rtol=1e-4, atol=1e-4)
    assert device_grads.keys() == grads.keys() and len(grads) > 20
    syntax = {f"bert.{name}" for name, _ in cpu_model.bert.syntax_parameters()}
    assert (variant == "none") == (not syntax & grads.keys())  # a variant's own parameters are compared too
    for name, grad in grads.items():
        torch.testing.assert_close(device_grads[name], grad, rtol=1e-4, atol=1e-4, msg=name)


@pytest.mark.parametrize("variant", VARIANTS)
def test_save_and_load_round_trip_on_the_device(small_tokenizer, batch, tmp_path, device, variant):
    model = labelled_classifier(small_tokenizer, variant).to(device).eval()
    model.save_pretrained(tmp_path)
    on_device, on_cpu = load_model(tmp_path).to(device).eval(), load_model(tmp_path).eval()
    with torch.no_grad():
        expected = model(**{k: v.to(device) for k, v in batch.items()}).logits
        assert torch.equal(on_device(**{k: v.to(device) for k, v in batch.items()}).logits, expected)
        torch.testing.assert_close(on_cpu(**batch).logits, expected.cpu(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_tensor_of_a_step_is_made_on_the_inputs_device(small_tokenizer, batch, variant):
    """Runs on CPU: under a `meta` default device, a tensor made without `device=` (an arange, a mask,
    a constant) is a meta tensor, and a step that mixes it with the CPU batch fails."""
    model = labelled_classifier(small_tokenizer, variant).train()
    expected_logits, expected_grads = step(model, batch)
    with torch.device("meta"):
        logits, grads = step(model, batch)
    assert torch.equal(logits, expected_logits)
    assert all(torch.equal(grads[n], g) for n, g in expected_grads.items())
