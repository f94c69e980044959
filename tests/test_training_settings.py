"""One schema for the training loop's settings: fine-tuning's and pre-training's extend it and change only
defaults, so every loop setting has one rule in both (pre-training's seed, weight decay, example caps and
evaluation interval went unchecked while each schema declared its own)."""

from __future__ import annotations

import typing
from dataclasses import MISSING, fields

import pytest

from xsyn.pretraining.trainer import PretrainSettings
from xsyn.run.pretrain import pretrain_settings
from xsyn.run.settings import ConfigError, RunConfig
from xsyn.training.settings import LoopSettings, with_warmup

SCHEMAS = (RunConfig, PretrainSettings)


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda schema: schema.__name__)
def test_a_run_schema_keeps_every_loop_settings_type_and_rule(schema):
    loop, own = typing.get_type_hints(LoopSettings), typing.get_type_hints(schema)
    declared = {f.name: f for f in fields(schema)}
    for field in fields(LoopSettings):
        assert own[field.name] == loop[field.name], field.name
        assert declared[field.name].metadata.get("validator") is field.metadata.get("validator"), field.name


def defaults(schema: type) -> dict[str, object]:
    return {f.name: f.default for f in fields(schema) if f.name in LoopSettings.__dataclass_fields__
            and f.default is not MISSING}


def test_fine_tuning_takes_the_loops_defaults_and_pre_training_changes_six():
    assert defaults(RunConfig) == defaults(LoopSettings)
    changed = {name: value for name, value in defaults(PretrainSettings).items()
               if value != defaults(LoopSettings)[name]}
    assert changed == {"epochs": 1.0, "learning_rate": 1e-3, "warmup_steps": None, "weight_decay": 0.01,
                       "max_length": 256, "log_every": 20}


@pytest.mark.parametrize(("key", "value", "problem"), [
    ("seed", -1, "must be >= 0, got -1"),
    ("weight_decay", -0.1, "must be >= 0, got -0.1"),
    ("max_train_examples", 0, "must be >= 1, got 0"),
    ("max_eval_examples", 0, "must be >= 1, got 0"),
    ("eval_every", 0, "must be >= 1, got 0"),
])
def test_pre_trainings_loop_settings_are_checked_where_a_file_gives_them(tmp_path, key, value, problem):
    config_file = tmp_path / "pretrain.toml"
    config_file.write_text(f"{key} = {value}\n")
    with pytest.raises(ConfigError, match=f"^{config_file}: {key}: {problem}$"):
        pretrain_settings("paper", config_file, treebanks=["en"], treebank_dir=tmp_path, output_dir=tmp_path / "o")


def test_a_warmup_left_unset_is_a_twentieth_of_the_steps_in_either_run():
    settings = PretrainSettings(["en"], "ud", "out", batch_size=4, epochs=2.0)
    assert with_warmup(settings, 100).warmup_steps == 2  # 2 epochs of 25 steps: 50 steps, a twentieth is 2.5
    assert with_warmup(PretrainSettings(["en"], "ud", "out", warmup_steps=7), 100).warmup_steps == 7
    run = RunConfig(task="synth", batch_size=10, max_steps=40, warmup_steps=None)
    assert with_warmup(run, 1000).warmup_steps == 2 and with_warmup(RunConfig(task="synth"), 1000).warmup_steps == 0
