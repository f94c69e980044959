"""Every variant and head on XLM-R (and RoBERTa): lifted from a plain checkpoint exactly, equal to
transformers' own XLM-R classes with syntax off, loadable through the Auto classes and from the hub's
cache by name. The checkpoint is a tiny random `XLMRobertaForMaskedLM` (what xlm-roberta-base is) on
a SentencePiece tokenizer trained on shared text; the batch is real treebank text in two scripts."""

from __future__ import annotations

import itertools
import json
import shutil

import pytest
import torch
from test_models_variants import switch_off

from xsyn.models.encoders import family_classes
from xsyn.models.factory import build_model, load_model
from xsyn.models.families import FAMILIES, family_of, resolve
from xsyn.models.tokenizers import load_tokenizer
from xsyn.models.variants import VARIANTS, get_variant
from xsyn.models.variants.gat.layers import gat_encode
from xsyn.syntax.conllu import read_conllu
from xsyn.trees.batch import collate_trees
from xsyn.trees.wordpiece import WordpieceAligner
from xsyn.utils.errors import InputError

SYNTAX_VARIANTS = tuple(v for v in VARIANTS if not get_variant(v).is_baseline)  # every built-in one but plain BERT
HEADS = (None, "sequence", "token", "qa")
SMALL = {"gat_layers": 2, "gat_heads": 2, "gat_head_size": 8, "probe_rank": 8}
XLMR = family_of("xlm-roberta")


@pytest.fixture(scope="module")
def batch(xlmr_tokenizer, shared_data):
    """An English-Chinese pair (`<s> A </s></s> B </s>`) and an English sentence padded with XLM-R's `<pad>` (1)."""
    english = shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu"
    chinese = shared_data / "ud" / "UD_Chinese-GSD" / "zh_gsd-ud-dev.conllu"
    if not english.is_file() or not chinese.is_file():
        pytest.skip("UD English-EWT / Chinese-GSD not found in ../shared/data")
    en = sorted(itertools.islice(read_conllu(english), 10), key=len)
    zh = next(read_conllu(chinese))
    aligner = WordpieceAligner(xlmr_tokenizer, max_length=64)
    out = collate_trees([aligner.encode([en[-1], zh])[0], aligner.encode([en[0]])[0]], xlmr_tokenizer.pad_token_id)
    assert (out["input_ids"] == 1).any() and not out["token_type_ids"].any()
    return out


def plain_model(family, head, checkpoint, model: torch.nn.Module):
    """transformers' own class of the family and head, holding `model`'s weights: every one of its tensors
    is `model`'s of the same name; `model` has only its syntax modules besides."""
    settings = {"num_labels": model.config.num_labels} if head in ("sequence", "token") else {}
    plain = resolve(family.plain[head]).from_pretrained(checkpoint, **settings).eval()
    missing, unexpected = plain.load_state_dict(model.state_dict(), strict=False)
    assert not missing
    markers = [f".{module}." for module in get_variant(model.config.variant).parameter_markers]
    assert all(any(marker in f".{name}" for marker in markers) for name in unexpected), unexpected
    return plain


def inputs(batch):
    return {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}


OUTPUTS = {None: ("last_hidden_state",), "sequence": ("logits",), "token": ("logits",),
           "qa": ("start_logits", "end_logits")}


@pytest.mark.parametrize("head", HEADS)
def test_variant_none_equals_transformers_xlm_roberta_bit_for_bit(xlmr_checkpoint, batch, head):
    ours = build_model(str(xlmr_checkpoint), "none", head, num_labels=3 if head in ("sequence", "token") else None)
    ours.eval()
    assert type(ours).__name__ == ("XsynXLMRobertaModel" if head is None else type(ours).__name__)
    plain = plain_model(XLMR, head, xlmr_checkpoint, ours)
    with torch.no_grad():
        expected = plain(**inputs(batch), output_hidden_states=True)
        got = ours(**batch, output_hidden_states=True)
    for name in OUTPUTS[head]:
        assert torch.equal(getattr(got, name), getattr(expected, name)), name
    assert len(got.hidden_states) == 3 and all(map(torch.equal, got.hidden_states, expected.hidden_states))


def test_pretrained_tensors_are_lifted_exactly_and_only_syntax_parameters_are_new(xlmr_checkpoint):
    from safetensors.torch import load_file

    saved = load_file(xlmr_checkpoint / "model.safetensors")
    encoder = {name: tensor for name, tensor in saved.items() if name.startswith("roberta.")}
    assert encoder
    for variant in VARIANTS:
        model = build_model(str(xlmr_checkpoint), variant, "sequence", num_labels=2, **SMALL)
        ours = model.state_dict()
        assert all(torch.equal(ours[name], tensor) for name, tensor in encoder.items()), variant
        new = set(ours) - set(encoder)
        head = {f"classifier.{m}.{p}" for m in ("dense", "out_proj") for p in ("weight", "bias")}  # RoBERTa's
        assert new == {f"roberta.{n}" for n, _ in model.base_model.syntax_parameters()} | head


# every variant on the encoder and on the sequence head (RoBERTa's own classifier); the token and QA
# heads are one linear layer on the same encoder output, shown once
@pytest.mark.parametrize(("variant", "head"), [*itertools.product(SYNTAX_VARIANTS, (None, "sequence")),
                                               ("gat", "token"), ("sep", "qa")])
def test_every_variant_with_syntax_off_equals_transformers_xlm_roberta(xlmr_checkpoint, batch, variant, head):
    labels = {"num_labels": 3} if head in ("sequence", "token") else {}
    model = build_model(str(xlmr_checkpoint), variant, head, **labels, **SMALL).eval()
    plain = plain_model(XLMR, head, xlmr_checkpoint, model)
    real = batch["attention_mask"].bool()
    with torch.no_grad():
        expected = plain(**inputs(batch))
        encoded = plain.base_model(**inputs(batch)).last_hidden_state
        for _, param in model.base_model.syntax_parameters():  # make the syntax path matter ...
            param.normal_(0.0, 0.5)
        assert (model.base_model(**batch).last_hidden_state - encoded)[real].abs().max() > 1e-3
        switch_off(model.base_model)  # ... then switch it off
        got = model(**batch)
        assert (model.base_model(**batch).last_hidden_state - encoded)[real].abs().max() <= 1e-5
    for name in OUTPUTS[head]:
        assert _max_difference(getattr(got, name), getattr(expected, name), head, real) <= 1e-5, name


def _max_difference(got, expected, head, real) -> float:
    """Over real pieces (padding rows differ: sdoi's extra layer sees them)."""
    if head in (None, "token"):
        got, expected = got[real], expected[real]
    elif head == "qa":
        got, expected = got.masked_fill(~real, 0), expected.masked_fill(~real, 0)
    return (got - expected).abs().max().item()


def test_gat_position_embeddings_count_from_the_padding_index(xlmr_checkpoint, batch):
    from xsyn.trees.tensors import TreeTensors

    model = build_model(str(xlmr_checkpoint), "gat", None, gat_position_embeddings=True, **SMALL).eval()
    ids = batch["input_ids"]
    tree = TreeTensors.from_batch(batch)
    positions = torch.cumsum(ids != 1, dim=1) * (ids != 1) + 1  # XLM-R: 2, 3, ... over real pieces, 1 at padding
    embeddings = model.embeddings
    words = embeddings.word_embeddings(ids) + embeddings.position_embeddings(positions)
    with torch.no_grad():
        expected = model.gat(words, tree.upos, tree.gat_mask(model.config.gat_delta), None, None)
        assert torch.equal(gat_encode(model, ids, tree), expected)


def test_a_saved_xlmr_model_loads_through_auto_classes_and_load_model(xlmr_checkpoint, batch, tmp_path):
    from transformers import AutoConfig, AutoModelForSequenceClassification

    model = build_model(str(xlmr_checkpoint), "sla", "sequence", num_labels=2).eval()
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "xsyn_xlm_roberta" and saved["architectures"] == [
        "XsynXLMRobertaForSequenceClassification"]
    assert type(AutoConfig.from_pretrained(tmp_path)).__name__ == "XsynXLMRobertaConfig"
    for loaded in (AutoModelForSequenceClassification.from_pretrained(tmp_path), load_model(tmp_path)):
        assert type(loaded) is type(model) and loaded.config.variant == "sla"
        with torch.no_grad():
            assert torch.equal(loaded.eval()(**batch).logits, model(**batch).logits)


def test_the_hub_name_resolves_through_the_hub_cache_offline(xlmr_checkpoint, monkeypatch, tmp_path):
    """`--model xlm-roberta-base` for a user who has it: the hub's cache layout, the name's folder,
    `refs/main` -> a snapshot; the code path is the connected one, served from the cache."""
    from huggingface_hub import constants

    snapshot = tmp_path / "models--xlm-roberta-base" / "snapshots" / ("0" * 40)
    shutil.copytree(xlmr_checkpoint, snapshot)
    (tmp_path / "models--xlm-roberta-base" / "refs").mkdir()
    (tmp_path / "models--xlm-roberta-base" / "refs" / "main").write_text("0" * 40)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    model = build_model("xlm-roberta-base", "gat", "token", num_labels=5, **SMALL)
    assert type(model).__name__ == "XsynXLMRobertaForTokenClassification"
    tokenizer = load_tokenizer("xlm-roberta-base")
    assert tokenizer.cls_token == "<s>" and tokenizer.pad_token_id == 1


def test_a_model_of_another_architecture_names_the_families_it_could_be(tmp_path):
    from transformers import DistilBertConfig

    DistilBertConfig(vocab_size=10, dim=8, n_layers=1, n_heads=2, hidden_dim=16).save_pretrained(tmp_path)
    with pytest.raises(InputError, match="'distilbert' model.*bert, xlm-roberta, roberta, camembert"):
        build_model(str(tmp_path), "gat", "sequence", num_labels=2)


@pytest.mark.parametrize("family", ["roberta", "camembert"])
def test_other_roberta_family_encoders_share_the_code_bit_for_bit(tmp_path, batch, family):
    from transformers import AutoConfig, AutoModelForMaskedLM

    torch.manual_seed(1)
    config = AutoConfig.for_model(family, vocab_size=3000, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, max_position_embeddings=514, type_vocab_size=1)
    AutoModelForMaskedLM.from_config(config).save_pretrained(tmp_path)
    ours = build_model(str(tmp_path), "none", "sequence", num_labels=2).eval()
    assert type(ours).__name__ == f"Xsyn{family_of(family).stem}ForSequenceClassification"
    plain = plain_model(family_of(family), "sequence", tmp_path, ours)
    with torch.no_grad():
        assert torch.equal(ours(**batch).logits, plain(**inputs(batch)).logits)


def test_every_family_has_its_classes_and_a_distinct_xsyn_model_type():
    types = [family.xsyn_type for family in FAMILIES.values()]
    assert len(set(types)) == len(types)
    for family in FAMILIES.values():
        classes = family_classes(family)
        assert classes.config.model_type == family.xsyn_type
        assert all(cls.base_model_prefix == family.prefix for cls in classes.all())


def test_an_xlmr_run_finetunes_gets_a_card_citing_xlmr_and_predicts_on_text_in_three_scripts(
        xlmr_checkpoint, shared_data, tmp_path):
    """`--model` is a plain XLM-R checkpoint like any other: finetune (PAN-X, pre-tokenised), its card,
    `xsyn predict` on raw Latin, Han and Devanagari text (the offsets point into each input)."""
    from click.testing import CliRunner
    from huggingface_hub import ModelCard

    from xsyn.cli import main

    if not (shared_data / "panx" / "train-en.tsv").is_file():
        pytest.skip("PAN-X not found in ../shared/data")
    out = tmp_path / "run"
    result = CliRunner().invoke(main, [
        "finetune", "--task", "panx", "--data-dir", str(shared_data / "panx"), "--model", str(xlmr_checkpoint),
        "--train-lang", "en", "--parser", "chain", "--quiet", "--max-train-examples", "16", "--set",
        "max_eval_examples=8", "--batch-size", "8", "--max-length", "48", "--max-steps", "1", "--eval-every", "1",
        "--variant", "gat", "--set", "gat_layers=1", "--cache-dir", str(tmp_path / "cache"),
        "--output-dir", str(out)])
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "best" / "config.json").read_text())
    assert saved["architectures"] == ["XsynXLMRobertaForTokenClassification"]
    card = ModelCard.load(out / "best" / "README.md").text
    assert "@inproceedings{conneau-etal-2020-unsupervised" in card and "devlin-etal-2019-bert" not in card
    texts = ["Angela Merkel visited Paris.", "他说，我回家了。", "उसने कहा, मैं घर आया हूं।"]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    result = CliRunner().invoke(main, ["predict", "--model-dir", str(out), "--input", str(tmp_path / "in.jsonl"),
                                       "--parser", "chain", "--output", str(tmp_path / "out.jsonl")])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 3
    for text, row in zip(texts, rows):
        assert row["tokens"] and all(text[t["start"]:t["end"]] == t["text"] for t in row["tokens"])


def test_tiny_follows_the_tokenizers_family_or_the_family_asked_for(xlmr_tokenizer, xlmr_checkpoint, small_tokenizer,
                                                                     caplog):
    """Issue 39, point 12: `--model tiny --tokenizer <an XLM-R tokenizer>` silently built a BERT."""
    from xsyn.models.presets import tiny_config

    from_folder = load_tokenizer(xlmr_checkpoint)  # a checkpoint's folder: its config.json names the family
    config = tiny_config(from_folder)
    assert config.model_type == "xlm-roberta" and config.vocab_size == len(xlmr_tokenizer)
    assert config.pad_token_id == 1 and config.max_position_embeddings == 514 and config.type_vocab_size == 1
    assert tiny_config(small_tokenizer).model_type == "bert"  # a BERT wordpiece tokenizer: a BERT
    with caplog.at_level("WARNING"):  # a generic tokenizer says no family: a BERT, and a warning naming the choice
        assert tiny_config(xlmr_tokenizer).model_type == "bert"
    assert "--set tiny_family=NAME: bert, xlm-roberta, roberta, camembert" in caplog.text
    model = build_model("tiny", "gat", "sequence", tokenizer=xlmr_tokenizer, tiny_family="xlm-roberta",
                        num_labels=2, **SMALL)
    assert model.config.model_type == "xsyn_xlm_roberta" and model.config.vocab_size == len(xlmr_tokenizer)
    with pytest.raises(InputError, match="is a bert tokenizer, but tiny_family asks for a xlm-roberta model"):
        tiny_config(small_tokenizer, "xlm-roberta")


def test_tiny_family_is_a_run_setting_for_tiny_only():
    from xsyn.data.cards import load_card
    from xsyn.run.settings import ConfigError, parse_overrides, resolve

    card = load_card("pawsx")
    assert resolve("pawsx", "gat", card, {}, {"model": "tiny", "tiny_family": "xlm-roberta"}).tiny_family == \
        "xlm-roberta"
    with pytest.raises(ConfigError, match="^--set: tiny_family: 'xlmr' is not one of bert, xlm-roberta"):
        parse_overrides(["tiny_family=xlmr"])
    with pytest.raises(ConfigError, match="tiny_family is the family of `--model tiny`"):
        resolve("pawsx", "gat", card, {}, {"model": "bert-base-multilingual-cased", "tiny_family": "bert"})
