"""The syntax variants on tiny random BERTs: what each one changes, what it must leave alone.

Every check compares against something independent: plain transformers `BertModel` with the same
weights, attention probabilities recomputed from the definition, or values worked out by hand.
"""

from __future__ import annotations

import pytest
import torch
from variant_models import SHAPE, SMALL_GAT, bert_inputs, config, lifted, switch_off

from xsyn.models.configuration import SyntaxConfigError, XsynBertConfig
from xsyn.models.factory import build_model, load_model
from xsyn.models.modeling import XsynBertModel
from xsyn.models.variants import VARIANTS, get_variant

SYNTAX_VARIANTS = tuple(name for name in VARIANTS if not get_variant(name).is_baseline)  # the registry's

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


# -- where each variant acts -------------------------------------------------------------------------------


def test_eager_and_fused_attention_agree(plain, batch):
    for variant in SYNTAX_VARIANTS:
        model = lifted(plain, variant)
        with torch.no_grad():
            fused = model(**batch).last_hidden_state
            model.set_attn_implementation("eager")
            eager = model(**batch).last_hidden_state
        real = batch["attention_mask"].bool()
        torch.testing.assert_close(fused[real], eager[real], atol=1e-5, rtol=0)


# -- structural probes -----------------------------------------------------------------------------------


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


def test_the_import_contracts_name_every_built_in_variant_folder():
    """pyproject's variant contracts (one folder per variant, independent; the shared base imports none) list the
    folders of exactly the registry's built-in variants: a variant added to the registry and not to the contracts,
    or one removed, fails here, not silently outside the check."""
    import tomllib
    from pathlib import Path

    from xsyn.models.variants import BUILT_IN

    root = Path(__file__).resolve().parents[1]
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    folders = {target.partition(":")[0] for target in BUILT_IN.values()}
    assert folders == {f"xsyn.models.variants.{name}" for name in BUILT_IN}  # each built-in is its own folder
    independent = next(c for c in contracts if c["type"] == "independence" and "variant" in c["name"])
    shared = next(c for c in contracts
                  if c["type"] == "forbidden" and "xsyn.models.variants.base" in c["source_modules"])
    assert set(independent["modules"]) == folders
    assert set(shared["forbidden_modules"]) == folders
    on_disk = {f"xsyn.models.variants.{p.parent.name}" for p in (root / "xsyn/models/variants").glob("*/__init__.py")
               if "VARIANT =" in p.read_text(encoding="utf-8")}  # gated_local is sla's and wla's shared layers
    assert on_disk == folders
