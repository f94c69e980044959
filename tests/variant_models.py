"""What the variants' tests share (test_models_variants.py and each variant's test_variants_<name>.py): a tiny
BERT shape, three parsed sentences, a variant lifted onto a plain BERT's weights, the attention probabilities a model
computes. The fixtures `plain` (a tiny random BertModel) and `batch` (a tree batch of two inputs) are conftest's."""

from __future__ import annotations

import torch
from transformers import BertModel

from xsyn.models.configuration import XsynBertConfig
from xsyn.models.modeling import XsynBertModel
from xsyn.syntax.record import SyntaxRecord
from xsyn.trees.tensors import TreeTensors

SHAPE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
         "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
SMALL_GAT = {"gat_layers": 2, "gat_heads": 2, "gat_head_size": 8, "probe_rank": 8}
CHASED = SyntaxRecord.from_words(["the", "dog", "chased", "a", "cat", "."], [2, 3, 0, 5, 3, 3],
                                 ["DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT"],
                                 ["det", "nsubj", "root", "det", "obj", "punct"])
CAT_CHASED_CAT = SyntaxRecord.from_words(["cat", "chased", "cat"], [2, 0, 2], ["NOUN", "VERB", "NOUN"],
                                        ["obj", "root", "obj"])
HUND = SyntaxRecord.from_words(["der", "hund", "lauft", "zum", "haus"], [2, 3, 0, 5, 3],
                               ["DET", "NOUN", "VERB", "ADP", "NOUN"], ["det", "nsubj", "root", "case", "obl"])


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


def bert_inputs(batch):
    return {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}


def attention_probs(model, batch):
    model.set_attn_implementation("eager")
    with torch.no_grad():
        return model(**batch, output_attentions=True).attentions


def gate_bias(model, value: float) -> None:
    with torch.no_grad():
        for name, param in model.syntax_parameters():
            if name.endswith("gate.proj.weight"):
                param.zero_()
            elif name.endswith("gate.proj.bias"):
                param.fill_(value)


def check_gated_mix(plain, batch, variant: str, mask_of) -> None:
    """SLA and WLA (`gated_local`): g = 1 gives the local attention only, zero outside `mask_of(tree)`; g = 0
    BERT's; g = 1/2 the mean of the two."""
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

