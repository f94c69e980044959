"""The command line's work callable from Python (`xsyn.run.workflow`, `xsyn.run.pretrain`): settings merged in
the command line's order, and missing or contradicting settings named as the command line names them."""

from __future__ import annotations

import json

import pytest

from xsyn.run.pretrain import pretrain_settings
from xsyn.run.workflow import finetune_settings
from xsyn.utils.errors import OptionError


def test_finetune_settings_merge_card_file_keywords_then_sets(tmp_path):
    config_file = tmp_path / "settings.json"
    config_file.write_text(json.dumps({"task": "synth", "variant": "gat", "seed": 5, "learning_rate": 1e-3,
                                       "model_settings": {"gat_delta": 3}}))
    config, resume = finetune_settings(config_file=config_file, seed=7, gat_attention="additive",
                                       sets=["learning_rate=2e-5"], output_dir=str(tmp_path / "run"))
    assert not resume
    assert config.card.name == "synth" and config.variant == "gat"
    assert config.seed == 7  # a keyword setting wins over the file
    assert config.learning_rate == 2e-5  # --set wins over the file
    assert config.model_settings["gat_delta"] == 3 and config.model_settings["gat_attention"] == "additive"
    # a model setting's own option and --set of it: --set wins, as on the command line
    config, _ = finetune_settings(task="synth", variant="gat", gat_delta=2, sets=["gat_delta=1"])
    assert config.model_settings["gat_delta"] == 1


def test_a_model_setting_only_other_variants_take_is_refused_naming_them(tmp_path):
    """`--variant gat --set sla_distance=2` was saved in config.json and ignored by the GAT model: a run that
    looked configured and was not. BERT's own settings and the variant's own still pass."""
    from xsyn.run.settings import ConfigError

    with pytest.raises(ConfigError, match=r"^sla_distance is a setting of sla, not of variant 'gat', whose model "
                                          r"would ignore it: drop it, or choose --variant sla$"):
        finetune_settings(task="synth", variant="gat", sets=["sla_distance=2"])
    with pytest.raises(ConfigError, match=r"^gat_delta is a setting of gat, not of variant 'none'"):
        finetune_settings(task="synth", variant="none", gat_delta=2)  # its own option, too
    with pytest.raises(ConfigError, match=r"^syntax_layers is a setting of gat, sla, wla, sep, not of variant 'sdoi'"):
        finetune_settings(task="synth", variant="sdoi", sets=["syntax_layers=2"])
    config, _ = finetune_settings(task="synth", variant="sla", sets=["sla_distance=2", "hidden_dropout_prob=0.2"])
    assert config.model_settings["sla_distance"] == 2 and config.model_settings["hidden_dropout_prob"] == 0.2
    written = tmp_path / "mine.toml"  # a hand-written --config file says what this run should be
    written.write_text("[model_settings]\nsla_distance = 3\n")
    with pytest.raises(ConfigError, match=r"^sla_distance is a setting of sla, not of variant 'gat'"):
        finetune_settings(task="synth", variant="gat", config_file=written)


def test_a_saved_run_of_another_variant_repeated_with_variant_drops_its_settings_with_a_note(tmp_path, caplog):
    """A saved sla run's config.json given with --variant gat brings sla's settings along: they would be saved
    in the gat run's config.json and ignored by its model. They are dropped, and said; BERT's own stay."""
    saved = tmp_path / "config.json"
    saved.write_text(json.dumps({"task": "synth", "variant": "sla",
                                 "model_settings": {"sla_distance": 3, "hidden_dropout_prob": 0.2}}))
    with caplog.at_level("WARNING", logger="xsyn"):
        config, _ = finetune_settings(variant="gat", config_file=saved)
    assert config.variant == "gat" and "sla_distance" not in config.model_settings
    assert config.model_settings["hidden_dropout_prob"] == 0.2
    assert f"{saved} is a run of variant sla: its model settings sla_distance are not settings of variant gat, so " \
           "this run drops them" in caplog.text
    caplog.clear()
    config, _ = finetune_settings(variant="sla", config_file=saved)  # its own variant: nothing dropped, no note
    assert config.model_settings["sla_distance"] == 3 and caplog.text == ""


def test_finetune_settings_name_a_missing_task_and_a_resume_without_a_run(tmp_path):
    with pytest.raises(OptionError, match=r"Missing option '--task' \(or a --config file that names it\)"):
        finetune_settings(variant="gat")
    empty = tmp_path / "empty"
    with pytest.raises(OptionError, match=r"config.json does not exist, so there is no run there to continue"):
        finetune_settings(task="synth", resume_dir=empty)
    with pytest.raises(OptionError, match="name different folders; give one"):
        finetune_settings(task="synth", resume_dir=empty, output_dir=str(tmp_path / "other"))
    (empty / "config.json").parent.mkdir()
    (empty / "config.json").write_text(json.dumps({"task": "synth", "variant": "sla", "seed": 9}))
    config, resume = finetune_settings(resume_dir=empty)  # the run's own settings, and it continues
    assert resume and config.variant == "sla" and config.seed == 9 and config.resolved_output_dir() == empty


def test_pretrain_settings_merge_recipe_file_keywords_then_sets(tmp_path):
    config_file = tmp_path / "pretrain.toml"
    config_file.write_text('gat_delta = 2\nlearning_rate = 5e-4\n[gat]\ngat_layers = 3\n')
    settings = pretrain_settings("strong", config_file, sets=["gat_layers=4"], treebanks=["en"],
                                 treebank_dir=tmp_path, output_dir=tmp_path / "gat", learning_rate=1e-4)
    assert settings.gat_attention == "additive"  # the recipe's, where nothing else gives it
    assert settings.gat_delta == 2  # the file's over the recipe's 1
    assert settings.learning_rate == 1e-4  # a keyword setting over the file's
    assert settings.model_settings["gat_layers"] == 4  # --set over the file's gat table
    assert settings.treebank_dir == str(tmp_path) and settings.output_dir == str(tmp_path / "gat")
    with pytest.raises(OptionError, match=r"Missing option\(s\) --treebank-dir, --output-dir"):
        pretrain_settings(treebanks=["en"])
    with pytest.raises(OptionError, match="--model tiny needs --tokenizer"):
        pretrain_settings(treebanks=["en"], treebank_dir="ud", output_dir="out", model="tiny")


def test_pretrain_sets_take_pretraining_settings_and_refuse_what_it_would_drop(tmp_path):
    """`pretrain-gat --set learning_rate=0.5` was accepted and ignored (only GAT model settings were read)."""
    from xsyn.run.settings import ConfigError

    given = {"treebanks": ["en"], "treebank_dir": tmp_path, "output_dir": tmp_path / "gat"}
    settings = pretrain_settings("paper", sets=["learning_rate=0.5", "objectives=structural,seprem",
                                                "seprem_max_distance=6", "gat_layers=3"], **given)
    assert settings.learning_rate == 0.5 and settings.objectives == ["structural", "seprem"]
    assert settings.seprem_max_distance == 6 and settings.model_settings["gat_layers"] == 3
    with pytest.raises(ConfigError, match=r"^--set: parser: a setting of fine-tuning runs \(`xsyn finetune --set`\), "
                                          r"which pre-training does not have: drop it"):
        pretrain_settings("paper", sets=["parser=chain"], **given)
    with pytest.raises(ConfigError, match=r"^--set: seed: must be >= 0, got -1$"):
        pretrain_settings("paper", sets=["seed=-1"], **given)
    with pytest.raises(ConfigError, match=r"^sla_distance is a setting of sla, not of gat, the syntax module "
                                          r"pretrain-gat trains, which would ignore it: drop it$"):
        pretrain_settings("paper", sets=["sla_distance=2"], **given)
    config_file = tmp_path / "pretrain.toml"  # a settings file's GAT table is held to the same rule
    config_file.write_text("[gat]\nsdoi_alpha = 0.5\n")
    with pytest.raises(ConfigError, match=r"^sdoi_alpha is a setting of sdoi, not of gat"):
        pretrain_settings("paper", config_file, **given)


def test_pretrain_gat_refuses_another_variants_setting_from_the_installed_command(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    command = Path(sys.executable).parent / "xsyn"
    result = subprocess.run([str(command), "pretrain-gat", "--treebanks", "en", "--treebank-dir", str(tmp_path),
                             "--output-dir", str(tmp_path / "gat"), "--set", "sla_distance=2"],
                            capture_output=True, text=True)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "sla_distance is a setting of sla, not of gat, the syntax module pretrain-gat trains" in result.stderr
    assert not (tmp_path / "gat").exists()
