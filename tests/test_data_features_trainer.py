"""xsyn's collate function with transformers' `Trainer` (the README's example): a couple of steps train
every variant's tiny model on gold-tree synth pairs."""

from __future__ import annotations

import functools

import pytest
import torch

from xsyn.data.cards import load_card
from xsyn.data.features import collate_features, prepare_features
from xsyn.data.synth import generate_split, write_vocab
from xsyn.models import VARIANTS, build_model, label_settings, load_tokenizer
from xsyn.run.task_data import feature_rows


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tokenizer = load_tokenizer(write_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt"))
    examples = generate_split("svo", "train", 16)  # gold trees: nothing to parse
    features, _ = prepare_features(load_card("synth"), examples, tokenizer, max_length=48, labels=["0", "1"])
    return tokenizer, feature_rows(features)


@pytest.mark.parametrize("variant", VARIANTS)
def test_trainer_takes_steps_with_xsyns_collate_function(variant, data, tmp_path):
    from transformers import Trainer, TrainingArguments

    tokenizer, rows = data
    torch.manual_seed(0)
    model = build_model("tiny", variant, "sequence", tokenizer=tokenizer, **label_settings("sequence", ["0", "1"]))
    before = model.classifier.weight.detach().clone()
    trainer = Trainer(
        model=model, train_dataset=rows,
        data_collator=functools.partial(collate_features, pad_token_id=tokenizer.pad_token_id),
        args=TrainingArguments(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=8,
                               remove_unused_columns=False, report_to=[], use_cpu=True, save_strategy="no",
                               disable_tqdm=True))
    result = trainer.train()
    assert result.global_step == 2 and torch.isfinite(torch.tensor(result.training_loss))
    assert not torch.equal(before, model.classifier.weight.detach())
