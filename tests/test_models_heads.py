"""Task heads, the `tiny` preset, and tokenizers.

Losses are recomputed from the returned logits with numpy (log-softmax written out), so a head
that computed its loss over the wrong positions or ignored -100 wrongly would fail.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from xsyn.benchmarks.model import synthetic_batch
from xsyn.models.factory import build_model, load_model
from xsyn.models.names import TINY_SHAPE
from xsyn.models.tokenizers import load_tokenizer

SHAPE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
         "gat_layers": 2, "gat_heads": 2, "gat_head_size": 8, "probe_rank": 8}


@pytest.fixture(scope="module")
def batch():
    return synthetic_batch(batch_size=3, seq_len=9, vocab_size=30, seed=0)


def tiny(tokenizer, variant: str, head: str, **settings):
    torch.manual_seed(0)
    return build_model("tiny", variant, head, tokenizer=tokenizer, **SHAPE, **settings).eval()


def nll(logits: torch.Tensor, labels) -> np.ndarray:
    """-log softmax(logits)[label], row by row, in float64."""
    x = logits.detach().double().numpy().reshape(len(labels), -1)
    log_z = np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1)
    return log_z - x[np.arange(len(labels)), labels]


def test_sequence_head_loss_is_mean_cross_entropy_of_pooled_cls(small_tokenizer, batch):
    model = tiny(small_tokenizer, "sla", "sequence", num_labels=3)
    labels = torch.tensor([2, -100, 0])
    out = model(**{k: v for k, v in batch.items() if k != "labels"}, labels=labels)
    assert out.logits.shape == (3, 3)
    assert out.loss.item() == pytest.approx(nll(out.logits[[0, 2]], [2, 0]).mean(), rel=1e-5)
    assert out.distance_loss is None and torch.equal(out.loss, out.task_loss)


def test_token_head_scores_only_labelled_pieces(small_tokenizer, batch):
    model = tiny(small_tokenizer, "wla", "token", num_labels=4)
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, 1], labels[1, 3], labels[2, 5] = 3, 0, 1  # first pieces carry labels; the rest are -100
    out = model(**{k: v for k, v in batch.items() if k != "labels"}, labels=labels)
    picked = out.logits[[0, 1, 2], [1, 3, 5]]
    assert out.loss.item() == pytest.approx(nll(picked, [3, 0, 1]).mean(), rel=1e-5)
    nothing = model(**{k: v for k, v in batch.items() if k != "labels"}, labels=torch.full_like(labels, -100))
    assert nothing.loss.item() == 0.0  # a batch without labelled pieces contributes nothing, not NaN


def test_qa_head_loss_averages_start_and_end(small_tokenizer, batch):
    model = tiny(small_tokenizer, "sdoi", "qa")
    starts, ends = torch.tensor([2, 0, 4]), torch.tensor([3, 0, 6])
    out = model(**{k: v for k, v in batch.items() if k != "labels"}, start_positions=starts, end_positions=ends)
    expected = (nll(out.start_logits, starts.tolist()).mean() + nll(out.end_logits, ends.tolist()).mean()) / 2
    assert out.start_logits.shape == out.end_logits.shape == batch["input_ids"].shape
    assert out.loss.item() == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="start_positions and end_positions together"):
        model(**{k: v for k, v in batch.items() if k != "labels"}, start_positions=starts)


def test_intent_slot_loss_is_intent_plus_slot(small_tokenizer, batch):
    model = tiny(small_tokenizer, "none", "intent_slot", num_intents=5, num_slot_labels=7)
    intents = torch.tensor([4, 0, 1])
    slots = torch.full_like(batch["input_ids"], -100)
    slots[:, 1] = torch.tensor([6, 2, 0])
    out = model(**{k: v for k, v in batch.items() if k != "labels"}, intent_labels=intents, slot_labels=slots)
    intent = nll(out.intent_logits, intents.tolist()).mean()
    slot = nll(out.slot_logits[:, 1], [6, 2, 0]).mean()
    assert out.intent_loss.item() == pytest.approx(intent, rel=1e-5)
    assert out.slot_loss.item() == pytest.approx(slot, rel=1e-5)
    assert out.loss.item() == pytest.approx(intent + slot, rel=1e-5)


def test_gat_loss_adds_the_weighted_structural_terms(small_tokenizer, batch):
    model = tiny(small_tokenizer, "gat", "sequence", num_labels=2, structural_loss_weight=0.7)
    out = model(**batch)
    assert out.distance_loss > 0 and out.depth_loss > 0
    expected = out.task_loss + 0.7 * (out.distance_loss + out.depth_loss)
    assert out.loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert model(**{k: v for k, v in batch.items() if k != "labels"}).loss is None  # inference: no losses


def test_at_structural_loss_weight_0_the_probe_losses_are_not_computed(small_tokenizer, batch, monkeypatch):
    model = tiny(small_tokenizer, "gat", "sequence", num_labels=2, structural_loss_weight=0.0)
    monkeypatch.setattr(model.bert.gat, "probe", lambda *a, **k: pytest.fail("the probes ran at weight 0"))
    out = model(**batch)
    assert out.distance_loss is None and out.depth_loss is None and torch.equal(out.loss, out.task_loss)


def test_heads_need_their_sizes_and_known_names(small_tokenizer):
    with pytest.raises(ValueError, match="num_intents"):
        build_model("tiny", "none", "intent_slot", tokenizer=small_tokenizer, num_slot_labels=3)
    with pytest.raises(ValueError, match="unknown head 'ner'; choose one of sequence, token"):
        build_model("tiny", "none", "ner", tokenizer=small_tokenizer)


def test_a_saved_head_is_restored_with_its_sizes(small_tokenizer, batch, tmp_path):
    model = tiny(small_tokenizer, "gat", "intent_slot", num_intents=5, num_slot_labels=7)
    model.save_pretrained(tmp_path)
    loaded = load_model(tmp_path).eval()
    assert (loaded.config.num_intents, loaded.config.num_slot_labels) == (5, 7)
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    with torch.no_grad():
        assert torch.equal(loaded(**inputs).slot_logits, model(**inputs).slot_logits)


def test_load_model_refuses_a_plain_bert_directory(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ValueError, match="not an xsyn model"):
        load_model(tmp_path)


# -- tokenizers and the tiny preset --------------------------------------------------------------------


def test_tiny_preset_is_a_small_random_bert_on_the_given_vocabulary(small_tokenizer):
    model = build_model("tiny", "sla", "token", tokenizer=small_tokenizer, num_labels=2)
    cfg = model.config
    assert {k: getattr(cfg, k) for k in TINY_SHAPE} == TINY_SHAPE
    assert TINY_SHAPE["num_hidden_layers"] == 2 and TINY_SHAPE["hidden_size"] == 128
    assert cfg.vocab_size == len(small_tokenizer) == model.bert.embeddings.word_embeddings.num_embeddings


def test_load_tokenizer_reads_a_vocab_file_cased_and_a_directory(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Hund", "hund", "##e"]) + "\n")
    from_file = load_tokenizer(vocab)
    assert from_file.tokenize("Hunde hund") == ["Hund", "##e", "hund"]  # case kept (mBERT is cased)
    assert load_tokenizer(tmp_path).tokenize("Hunde") == ["Hund", "##e"]
    assert load_tokenizer(vocab, do_lower_case=True).tokenize("Hunde") == ["hund", "##e"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no tokenizer"):
        load_tokenizer(tmp_path / "empty")


def test_a_hub_name_offline_gets_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError, match="pass a vocab.txt or a tokenizer directory"):
        load_tokenizer("no-such-user/no-such-tokenizer")
    with pytest.raises(OSError, match="pass a local checkpoint directory"):
        build_model("no-such-user/no-such-model", "gat", "sequence", num_labels=2)
