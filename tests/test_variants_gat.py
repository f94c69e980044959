"""The `gat` variant's own behaviour: here, what `reproduce=ahmad2021` gives it (Ahmad et al.'s released code,
wasiahmad/Syntax-MBERT): the GAT's initial draws of `graph_utils.py` and the UPOS ids of `constants.py`."""

from __future__ import annotations

import json
import math

import pytest
import torch

from xsyn.models.configuration import XsynBertConfig
from xsyn.models.modeling import XsynBertModel
from xsyn.models.variants.gat.layers import load_gat, released_upos_ids, save_gat
from xsyn.syntax.vocab import UPOS_IDS, UPOS_SPECIAL_ID, UPOS_UNKNOWN_ID
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
