"""Resolving a run's settings: card < config file < flags, search grids, and bad settings named."""

from __future__ import annotations

import json

import pytest

from xsyn.data.cards import list_tasks, load_card
from xsyn.models.variants import VARIANTS
from xsyn.run.settings import BOOKKEEPING_FIELDS, FIELD_NAMES, ConfigError, parse_overrides, read_config_file, resolve
from xsyn.utils.errors import XsynError


@pytest.mark.parametrize("task", list_tasks())
def test_every_card_and_variant_resolves_to_checked_settings(task):
    card = load_card(task)
    for variant in VARIANTS:
        config = resolve(task, variant, card, {}, {"train_lang": card.train_languages[0]})
        assert isinstance(config.learning_rate, float) and isinstance(config.batch_size, int)


def test_a_card_search_grid_runs_its_first_value_and_records_the_grid():
    # Li et al. 2021, A.2 (chnsenticorp.toml): lr {2e-5, 3e-5}, epochs {3, 5, 10}, SLA m {3, 4}.
    card = load_card("chnsenticorp")
    config = resolve("chnsenticorp", "sla", card, {}, {"train_lang": "zh"})
    assert (config.learning_rate, config.epochs, config.model_settings["sla_distance"]) == (2e-5, 3, 3)
    assert config.hyperparameter_grid == {"learning_rate": [2e-5, 3e-5], "epochs": [3, 5, 10],
                                          "sla_distance": [3, 4]}
    chosen = resolve("chnsenticorp", "sla", card, {}, {"train_lang": "zh", "learning_rate": 3e-5,
                                                       **parse_overrides(["sla_distance=4"])})
    assert (chosen.learning_rate, chosen.model_settings["sla_distance"]) == (3e-5, 4)
    assert chosen.hyperparameter_grid == {"epochs": [3, 5, 10]}  # only the grids still in use


def test_a_saved_config_repeats_its_variant_but_not_another_task(tmp_path):
    card = load_card("pawsx")
    saved = resolve("pawsx", "none", card, {}, {"seed": 7, "learning_rate": 1e-5})
    saved.save(tmp_path / "config.json")
    values = read_config_file(tmp_path / "config.json")
    again = resolve("pawsx", None, card, values, {})
    assert (again.variant, again.seed, again.learning_rate) == ("none", 7, 1e-5)
    assert again.hyperparameter_source == saved.hyperparameter_source  # derived from the card, not the file
    assert resolve("pawsx", "gat", card, values, {}).variant == "gat"  # a flag outranks the file
    with pytest.raises(ConfigError, match="the --config file is a run of task 'pawsx', not 'xnli'"):
        resolve("xnli", None, load_card("xnli"), values, {})


def test_resume_of_a_run_of_another_task_names_resume_not_config(tmp_path):
    """Issue 39, point 8: `finetune --resume DIR` said "the --config file is a run of task ..."."""
    from click.testing import CliRunner

    from xsyn.cli import main

    resolve("pawsx", "none", load_card("pawsx"), {}, {}).save(tmp_path / "config.json")
    result = CliRunner().invoke(main, ["finetune", "--task", "xnli", "--resume", str(tmp_path)])
    assert result.exit_code == 2 and "--config" not in result.output
    assert (f"--resume {tmp_path} is a run of task 'pawsx' (its config.json), but --task names 'xnli': leave out "
            "--task to continue that run" in " ".join(result.output.split()))


def test_a_card_key_below_a_table_header_names_the_table_it_is_in():
    """Issue 39, point 8: a top-level key written under [[local]] or [hyperparameters.X] (where TOML puts it)."""
    from xsyn.data.cards import CardError, parse_card, read_card_table
    from xsyn.utils.shipped import TASKS, shipped_folder

    table = read_card_table(shipped_folder(TASKS) / "pawsx.toml", "pawsx.toml")
    misplaced = {**table, "local": [{**table["local"][0], "title": "PAWS-X"}, *table["local"][1:]]}
    with pytest.raises(CardError, match=r"^pawsx.toml: local\[0\].title: found in the \[\[local\]\] \(number 1\) "
                                        r"table, but 'title' is a key of the card itself: .* move it above the card's "
                                        r"first \[header\]$"):
        parse_card(misplaced, "pawsx.toml")
    section = {**table["hyperparameters"]["gat"], "description": "x"}
    with pytest.raises(CardError, match=r"^pawsx.toml: hyperparameters.gat.description: found in the "
                                        r"\[hyperparameters.gat\] table"):
        parse_card({**table, "hyperparameters": {**table["hyperparameters"], "gat": section}}, "pawsx.toml")


@pytest.mark.parametrize(("overrides", "message"), [
    (["batch_size=abc"], "--set: batch_size: expected an integer, got 'abc'"),
    (["learning_rate=fast"], "--set: learning_rate: expected a number, got 'fast'"),
    (["seed=1.5"], "--set: seed: expected an integer, got 1.5"),
    (["seed=-1"], "--set: seed: must be >= 0, got -1"),
    (["trackers=5"], "--set: trackers: expected a list of strings, got 5"),
    (["trackers=mlflow"], "--set: trackers: 'mlflow' is not one of tensorboard, wandb"),
    (["syntax_layers=0,x"], "--set: syntax_layers: expected a list of integers or an integer, got [0, 'x']"),
    (["parser=stanzza"], "unknown parser 'stanzza'; choose one of: stanza, chain, conllu:PATH, udpipe:MODEL"),
    (["parser=conllu:"], "parser 'conllu:': give a CoNLL-U file or a folder of .conllu files after the colon"),
    (["parsers.sw=stanzza"], "unknown parser 'stanzza'; choose one of: stanza, chain, conllu:PATH, udpipe:MODEL"),
    (["parsers.sw=udpipe:"], "parser 'udpipe:': give a .udpipe model file"),
    (["parsers.xx=chain"], "parsers.xx: task 'pawsx' has no language 'xx' (its languages: de, en, es, fr, ja, ko, "
                           "zh); correct the language, or drop --set parsers.xx"),
    (["parser_batch_size=0"], "--set: parser_batch_size: must be >= 1, got 0"),
    (["parser_download=always"], "--set: parser_download: 'always' is not one of none, reuse, download"),
    (["epochs=-1"], "--set: epochs: must be a finite number > 0, got -1.0"),
    (["warmup_steps=-5"], "--set: warmup_steps: must be >= 0, got -5"),
    (["eval_every=0"], "--set: eval_every: must be >= 1, got 0"),
    (["max_train_examples=0"], "--set: max_train_examples: must be >= 1, got 0"),
    (["mixed_precision=fp8"], "--set: mixed_precision: 'fp8' is not one of auto, no, fp16, bf16"),
    (["batch_size=10", "grad_accum=3"], "settings: batch_size 10 is not divisible by grad_accum 3"),
    (["learnin_rate=0.1"], "--set: learnin_rate: neither a run setting nor a model setting; did you mean "
                           "'learning_rate'?"),
    (["alpha=1.0"], "--set: alpha: neither a run setting nor a model setting; did you mean "
                    "'structural_loss_weight'?"),  # the papers' name, which cards used to take
    (["gat_delta=abc"], "--set: gat_delta: expected an integer, got 'abc'"),
    (["gat_delta=-1"], "--set: gat_delta: must be >= 1, got -1"),  # a value and a type: one form (issue 38)
    (["gat_attention=cosine"], "--set: gat_attention: 'cosine' is not one of dot, additive"),
    (["sdoi_alpha=1.5"], "--set: sdoi_alpha: must be from 0 to 1, got 1.5"),
    (["bias_targets=query,output"], "--set: bias_targets: 'query,output': give distinct names from query, key, "
                                    "value"),
    (["gat_residual=yes"], "--set: gat_residual: expected true or false, got 'yes'"),
    (["hidden_dropout_prob=high"], "--set: hidden_dropout_prob: expected a number, got 'high'"),
])
def test_bad_settings_name_the_setting_and_what_it_takes(overrides, message):
    with pytest.raises(XsynError) as err:
        resolve("pawsx", "gat", load_card("pawsx"), {}, parse_overrides(overrides))
    assert message in str(err.value)


def test_bookkeeping_names_run_settings():  # a renamed field must not silently split report systems
    assert set(BOOKKEEPING_FIELDS) <= FIELD_NAMES


def test_list_settings_take_comma_lists_and_single_values_from_set():
    assert parse_overrides(["syntax_layers=0,1", "trackers=wandb"]) == {"model_settings": {"syntax_layers": [0, 1]},
                                                                       "trackers": ["wandb"]}
    assert parse_overrides(["syntax_layers=[2, 3]", "trackers=tensorboard,wandb"]) == {
        "model_settings": {"syntax_layers": [2, 3]}, "trackers": ["tensorboard", "wandb"]}
    assert parse_overrides(["syntax_layers=2"]) == {"model_settings": {"syntax_layers": 2}}  # a count, as in the cards
    config = resolve("pawsx", "gat", load_card("pawsx"), {}, parse_overrides(["syntax_layers=0,1"]))
    assert config.model_settings["syntax_layers"] == [0, 1]


def test_a_config_file_that_is_not_a_table_of_settings_is_named(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('model_settings = "x"\n')
    with pytest.raises(ConfigError, match=f"{bad}: model_settings: expected a table"):
        read_config_file(bad)
    latin = tmp_path / "latin.json"
    latin.write_bytes(json.dumps({"seed": 1, "tokenizer": "é"}).encode().replace(b"\\u00e9", b"\xe9"))
    with pytest.raises(ConfigError, match=f"{latin}: line 1, byte 27: not UTF-8 text"):  # where an editor shows it
        read_config_file(latin)


@pytest.mark.parametrize(("text", "message"), [
    ('[model]\nname = "bert"\n', "model: expected a string, got a table"),  # issue 28: a table never dropped
    ('[optimizer]\nname = "adamw"\n', "optimizer: unknown key (known keys: "),
    ('lerning_rate = 0.1\n', "lerning_rate: unknown key; did you mean 'learning_rate'?"),
    ('seed = "7"\n', "seed: expected an integer, got '7'"),
    ('[model_settings]\ndelta = 2\n', "model_settings.delta: not a model setting; did you mean 'gat_delta'?"),
    ('[model_settings]\ngat_delta = 2.5\n', "model_settings.gat_delta: expected an integer, got 2.5"),
    ('[model_settings]\ngat_delta = 0\n', "model_settings.gat_delta: must be >= 1, got 0"),
])
def test_a_config_file_is_checked_key_by_key_even_where_a_flag_overrides_it(tmp_path, text, message):
    path = tmp_path / "run.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        read_config_file(path)  # before any flag is merged: `--seed 3` cannot hide a wrong `seed` in the file
    assert str(err.value).startswith(f"{path}: {message}")


def test_a_config_saved_before_model_settings_was_renamed_still_reads(tmp_path):
    card = load_card("pawsx")
    saved = resolve("pawsx", "gat", card, {}, {"model_settings": {"gat_delta": 2}}).to_dict()
    saved["syntax"] = saved.pop("model_settings")  # a run folder written before the rename
    (tmp_path / "config.json").write_text(json.dumps(saved), encoding="utf-8")
    again = resolve("pawsx", None, card, read_config_file(tmp_path / "config.json"), {})
    assert again.model_settings["gat_delta"] == 2


def test_the_pretrained_module_settings_read_under_their_former_names(tmp_path):
    card, gat = load_card("pawsx"), tmp_path / "gat"
    gat.mkdir()
    (gat / "gat_config.json").write_text(json.dumps({"gat_layers": 2, "gat_residual": True}), encoding="utf-8")
    saved = resolve("pawsx", "gat", card, {}, {"pretrained_syntax": str(gat), "freeze_pretrained": True}).to_dict()
    saved["gat_init"], saved["freeze_gat"] = saved.pop("pretrained_syntax"), saved.pop("freeze_pretrained")
    (tmp_path / "config.json").write_text(json.dumps(saved), encoding="utf-8")  # a run folder from before
    (tmp_path / "config.toml").write_text(f"gat_init = {json.dumps(str(gat))}\nfreeze_gat = true\n", encoding="utf-8")
    for path in (tmp_path / "config.json", tmp_path / "config.toml"):
        again = resolve("pawsx", None, card, read_config_file(path), {})
        assert (again.pretrained_syntax, again.freeze_pretrained) == (str(gat), True)
        assert (again.model_settings["gat_layers"], again.model_settings["gat_residual"]) == (2, True)  # adopted
    assert parse_overrides([f"gat_init={gat}", "freeze_gat=true"]) == {"pretrained_syntax": str(gat),
                                                                        "freeze_pretrained": True}


def test_a_relative_pretrained_module_is_stored_absolute(tmp_path, monkeypatch):
    gat = tmp_path / "pre" / "gat"
    gat.mkdir(parents=True)
    (gat / "gat_config.json").write_text(json.dumps({"gat_layers": 2}), encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # the run is read later from elsewhere, so "pre/gat" must not stay relative
    config = resolve("pawsx", "gat", load_card("pawsx"), {}, {"pretrained_syntax": "pre/gat"})
    assert config.pretrained_syntax == str(gat)


@pytest.mark.parametrize(("overrides", "message"), [
    (["num_attention_heads=3"], "hidden_size 128 is not a multiple of num_attention_heads 3"),
    (["syntax_heads=5"], "syntax_heads: 5, but a syntax head is one of the model's 2 attention heads"),
    (["syntax_layers=[4]"], "syntax_layers: contains 4, but the model has layers 0..1"),
])
def test_a_model_setting_the_model_cannot_take_is_one_line_before_any_data(overrides, message, tmp_path):
    """Checked on the model's architecture when the run's resources are built, before any data is read."""
    from xsyn.data.synth import write_vocab
    from xsyn.run.resources import finetune_resources

    write_vocab(tmp_path / "vocab.txt")
    flags = {"model": "tiny", "tokenizer": str(tmp_path / "vocab.txt"), "parser": "chain", "data_dir": str(
        tmp_path / "no-data"), **parse_overrides(overrides)}
    config = resolve("pawsx", "gat", load_card("pawsx"), {}, flags)  # settings alone: the model is not read
    with pytest.raises(ConfigError, match=f"^model settings for tiny: {message}"):
        finetune_resources(config)


def test_a_negative_seed_option_is_refused_naming_the_option():
    with pytest.raises(ConfigError, match=r"^--seed: must be >= 0, got -3$"):
        resolve("pawsx", "gat", load_card("pawsx"), {}, {"seed": -3})


def test_a_card_given_as_a_file_is_the_runs_task_and_is_read_again_from_its_file(tmp_path):
    import shutil

    from xsyn.utils.shipped import TASKS, shipped_folder

    own = tmp_path / "cards" / "my_pawsx.toml"
    own.parent.mkdir()
    for name in ("pawsx.toml", "_xtreme_pair_classification.toml"):  # its include travels with it
        shutil.copy(shipped_folder(TASKS) / name, own.parent / ("my_pawsx.toml" if name == "pawsx.toml" else name))
    own.write_text(own.read_text(encoding="utf-8").replace('name = "pawsx"', 'name = "my_pawsx"'), encoding="utf-8")
    config = resolve(str(own), "gat", load_card(own), {}, {})
    assert (config.task, config.task_card) == ("my_pawsx", str(own.absolute()))
    assert str(config.resolved_output_dir()) == "runs/my_pawsx/gat-seed1111"
    config.save(tmp_path / "config.json")
    again = resolve("my_pawsx", None, load_card(own), read_config_file(tmp_path / "config.json"), {})
    assert again.card.content_hash == load_card(own).content_hash and again.card.file == str(own.absolute())


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_synth_runs_on_its_own_trees_unless_a_parser_is_given(variant):
    """No parser knows synth's made-up languages: `finetune --task synth` (README's two-process example)
    stopped asking to `stanza.download('svo')`. The card says its trees are the data's; --parser still wins."""
    card = load_card("synth")
    assert resolve("synth", variant, card, {}, {}).parser == "gold"
    assert resolve("synth", variant, card, {}, {"parser": "chain"}).parser == "chain"


def test_reproduce_sets_the_codes_inputs_for_every_variant_and_its_model_settings_for_its_own():
    """`reproduce=ahmad2021`: the released code's data path builds every cell's inputs (the mBERT baseline's
    too); its model settings go to gat alone; a setting the run gives wins; the papers' text sets nothing."""
    card = load_card("xnli")
    gat = resolve("xnli", "gat", card, {}, parse_overrides(["reproduce=ahmad2021"]))
    assert (gat.tokenize_by, gat.sep_attachment, gat.truncation_tie) == ("words", "segment_end", "last")
    assert {k: gat.model_settings[k] for k in ("gat_attention", "bias_targets", "gat_weight_init",
                                               "gat_special_upos")} == {
        "gat_attention": "additive", "bias_targets": "key,value", "gat_weight_init": "xavier",
        "gat_special_upos": "separate"}
    none = resolve("xnli", "none", card, {}, parse_overrides(["reproduce=ahmad2021"]))
    assert (none.tokenize_by, none.sep_attachment, none.model_settings) == ("words", "segment_end", {})
    given = resolve("xnli", "gat", card, {"tokenize_by": "text"}, parse_overrides(["reproduce=ahmad2021",
                                                                                    "gat_attention=dot"]))
    assert (given.tokenize_by, given.model_settings["gat_attention"], given.sep_attachment) == (
        "text", "dot", "segment_end")
    paper = resolve("xnli", "gat", card, {}, {})
    assert (paper.reproduce, paper.tokenize_by, paper.sep_attachment) == ("paper", "text", "cls")
    assert "gat_weight_init" not in paper.model_settings


def test_each_released_code_selects_its_variants_choices_at_once():
    sla = resolve("cola", "sla", load_card("cola"), {}, parse_overrides(["reproduce=li2021"]))
    assert (sla.parser_words, sla.truncation, sla.punctuation) == ("whitespace", "end", "ascii")
    assert (sla.model_settings["sla_punct_visible"], sla.model_settings["sla_across_sentences"]) == (True, False)
    sdoi = resolve("squad_v2", "sdoi", load_card("squad_v2"), {}, parse_overrides(["reproduce=sgnet"]))
    assert (sdoi.tokenize_by, sdoi.qa_context_first, sdoi.carry_cut_dependents) == ("words", True, True)
    assert {k: sdoi.model_settings[k] for k in ("sdoi_cls_visible", "sdoi_self", "sdoi_empty_rows",
                                                "sdoi_aggregation", "sdoi_learn_alpha")} == {
        "sdoi_cls_visible": False, "sdoi_self": "heads", "sdoi_empty_rows": "all", "sdoi_aggregation": "softmax",
        "sdoi_learn_alpha": True}


def test_an_unknown_released_code_is_refused_with_the_ones_there_are():
    with pytest.raises(ConfigError, match="reproduce: 'ahmad' is not one of paper, ahmad2021, li2021, sgnet; did "
                                          "you mean 'ahmad2021'"):
        resolve("xnli", "gat", load_card("xnli"), {}, parse_overrides(["reproduce=ahmad"]))


def test_a_setting_given_as_null_is_null_and_one_not_given_keeps_its_default():
    """`--set KEY=null` is the setting's "none" where its docs give one (docs/settings.md, docs/finetune.md): no
    clipping, every batch length, the warmup as a share of the steps; not given, each keeps its default (the
    card's warmup for synth). A setting that has no "none" refuses null by its own rule."""
    from xsyn.run.workflow import finetune_settings

    nulls = ["max_grad_norm=null", "max_batch_lengths=null", "warmup_steps=null"]
    given, _ = finetune_settings(task="synth", variant="none", model="tiny", sets=nulls)
    assert (given.max_grad_norm, given.max_batch_lengths, given.warmup_steps) == (None, None, None)
    default, _ = finetune_settings(task="synth", variant="none", model="tiny")
    synth_warmup = load_card("synth").hyperparameters["mbert"]["warmup_steps"]  # the plain model's section
    # (the length budget's default is the device's: `auto`, resolved when the run's device is known)
    assert (default.max_grad_norm, default.max_batch_lengths, default.warmup_steps) == (1.0, "auto", synth_warmup)
    with pytest.raises(ConfigError, match="--set: learning_rate: expected a number, got None"):
        finetune_settings(task="synth", variant="none", model="tiny", sets=["learning_rate=null"])


def test_a_run_saved_before_max_batch_lengths_existed_resumes_with_every_length_as_it_ran(tmp_path):
    """Its config.json has pad_to_multiple_of but no max_batch_lengths: it ran with any number of lengths, and
    resumes so (not with today's default of 8, which it would then record for the whole run)."""
    from xsyn.run.workflow import finetune_settings

    config, _ = finetune_settings(task="synth", variant="none", model="tiny", output_dir=str(tmp_path / "run"))
    saved = {key: value for key, value in config.to_dict().items() if key != "max_batch_lengths"}
    saved["pad_to_multiple_of"] = 8  # as such a run recorded it (before the device's `auto`)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text(json.dumps(saved), encoding="utf-8")
    resumed, resume = finetune_settings(resume_dir=str(tmp_path / "run"))
    assert resume and resumed.max_batch_lengths is None and resumed.pad_to_multiple_of == 8
    saved_null_clip = {**saved, "max_grad_norm": None}  # a run trained without clipping continues without it
    (tmp_path / "run" / "config.json").write_text(json.dumps(saved_null_clip), encoding="utf-8")
    assert finetune_settings(resume_dir=str(tmp_path / "run"))[0].max_grad_norm is None
