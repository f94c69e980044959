"""Every best checkpoint gets a model card (huggingface_hub's ModelCard) that `xsyn evaluate` extends
with its results; `--push-to-hub` is checked before training and uploads best/ when training ends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.data.synth import write_vocab

QUICK = ["--task", "synth", "--model", "tiny", "--train-lang", "svo", "--parser", "chain", "--quiet",
         "--max-train-examples", "64", "--set", "max_eval_examples=32", "--batch-size", "16", "--max-length", "48",
         "--max-steps", "2", "--eval-every", "2"]


def finetune(tmp: Path, out: Path, *extra: str) -> object:
    vocab = write_vocab(tmp / "vocab.txt")
    return CliRunner().invoke(main, ["finetune", *QUICK, "--tokenizer", str(vocab), "--cache-dir", str(tmp / "cache"),
                                     "--output-dir", str(out), *extra])


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("card")
    out = tmp / "gat-seed5"
    res = finetune(tmp, out, "--variant", "gat", "--seed", "5", "--set", "gat_delta=2")
    assert res.exit_code == 0, res.output
    return out


def test_the_best_checkpoint_has_a_card_saying_what_it_is_and_how_it_was_made(run):
    from huggingface_hub import ModelCard

    card = ModelCard.load(run / "best" / "README.md")
    dev = json.loads((run / "validation_results.json").read_text())
    # no pipeline tag: a transformers pipeline on raw text cannot parse it; the card says what to use instead
    assert card.data.library_name == "transformers" and card.data.pipeline_tag is None
    assert "text-classification" in card.data.tags and "`xsyn predict`" in card.text
    assert card.data.base_model is None  # `tiny` is no hub model
    assert "xsyn-gat" in card.data.tags and card.data.language == ["svo"]
    text = card.text
    assert "| base model | `tiny` |" in text and "| variant | `gat` |" in text
    assert "| `gat_delta` | `2` |" in text  # the variant's settings, as saved in the model config
    assert "| training language | svo |" in text and "| seed | 5 |" in text
    assert f"**{dev['primary']:.2f}** at step 2" in text
    assert "| xsyn version | 0.1.0 |" in text and "first 64 examples" in text
    assert "@inproceedings{ahmad-etal-2021-syntax" in text and "@inproceedings{devlin-etal-2019-bert" in text
    assert "Not evaluated yet" in text
    assert "AutoModelForSequenceClassification" in text
    # the default precision, `auto`, as it resolved on the CPU, in every record of the run
    assert json.loads((run / "config.json").read_text())["mixed_precision"] == "no"
    assert json.loads((run / "train_results.json").read_text())["mixed_precision"] == "no"
    assert "| mixed_precision | no |" in text
    assert str(run.parent) not in (run / "best" / "README.md").read_text()  # no local folder named


def test_local_paths_in_the_card_are_reduced_to_their_last_part(tmp_path):
    from xsyn.run.publish import build_model_card

    run, checkpoint = tmp_path / "run", tmp_path / "run" / "best"
    checkpoint.mkdir(parents=True)
    settings = {"task": "pawsx", "variant": "none", "model": "/home/me/models/mbert", "data_dir": "/home/me/data/pawsx",
                "hyperparameter_source": "runs/x", "learning_rate": 3e-5, "seed": 1}
    (run / "config.json").write_text(json.dumps(settings), encoding="utf-8")
    text = build_model_card(checkpoint, run).text
    assert "/home/me" not in text and "# PAWS-X: mbert with the `none` syntax variant" in text
    assert "| base model | `mbert` |" in text and "local files (`pawsx`)" in text
    assert "| hyperparameters from | runs/x |" in text and "| learning_rate | 3e-05 |" in text  # relative paths stay


def test_evaluate_adds_its_table_to_the_card(run):
    from huggingface_hub import ModelCard

    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(run), "--langs", "svo,sov", "--quiet"])
    assert res.exit_code == 0, res.output
    results = json.loads((run / "eval-test" / "results.json").read_text())
    assert results["mixed_precision"] == "no"  # what the evaluation computed in
    card = ModelCard.load(run / "best" / "README.md")
    for lang, score in results["per_language"].items():
        assert f"| {lang} | {score:.2f} | {results['n_examples'][lang]} |" in card.text
    assert f"| average | {results['average']:.2f} |" in card.text and "Not evaluated yet" not in card.text
    assert "Zero-shot on synth, test split (accuracy)" in card.text  # which task (evaluate --task may differ)
    assert card.data.language == ["sov", "svo"]
    metrics = {(r.dataset_config, r.dataset_split): r.metric_value for r in card.data.eval_results}
    assert metrics == {(lang, "test"): round(score, 4) for lang, score in results["per_language"].items()}


def test_push_to_hub_fails_before_training_when_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    res = finetune(tmp_path, tmp_path / "run", "--push-to-hub", "someone/xsyn-synth")
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "the Hugging Face hub is switched off here (HF_HUB_OFFLINE is set)" in res.output
    assert not (tmp_path / "run" / "best").exists() and not (tmp_path / "run" / "train_log.jsonl").exists()


def test_push_to_hub_fails_before_training_without_a_token(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    res = finetune(tmp_path, tmp_path / "run", "--push-to-hub", "someone/xsyn-synth")
    assert res.exit_code == 1 and "no Hugging Face token; run `hf auth login` or set HF_TOKEN" in res.output
    assert not (tmp_path / "run" / "train_log.jsonl").exists()
    res = finetune(tmp_path, tmp_path / "run", "--push-to-hub", "not a repo")
    assert res.exit_code == 1 and "not a repository id" in res.output


def test_push_to_hub_uploads_best_with_its_card_when_training_ends(tmp_path, monkeypatch):
    import huggingface_hub
    import huggingface_hub.constants

    calls = []

    class FakeApi:
        def __init__(self, token=None):
            self.token = token

        def whoami(self, token=None):
            calls.append(("whoami", token))
            return {"name": "someone"}

        def create_repo(self, repo_id, repo_type, exist_ok):
            calls.append(("create_repo", repo_id, self.token))
            return f"https://huggingface.co/{repo_id}"

        def upload_folder(self, repo_id, folder_path, repo_type, commit_message):
            calls.append(("upload_folder", repo_id, sorted(p.name for p in Path(folder_path).iterdir())))

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    monkeypatch.setattr("xsyn.run.publish.HfApi", FakeApi)  # the hub client publishing uses
    res = finetune(tmp_path, tmp_path / "run", "--variant", "none", "--push-to-hub", "someone/xsyn-synth")
    assert res.exit_code == 0, res.output
    assert calls[0] == ("whoami", "hf_test_token") and calls[1] == ("create_repo", "someone/xsyn-synth",
                                                                    "hf_test_token")
    assert calls[2][:2] == ("upload_folder", "someone/xsyn-synth")
    assert {"README.md", "config.json", "model.safetensors", "xsyn_task.json"} <= set(calls[2][2])
    assert "pushed" in res.output and "https://huggingface.co/someone/xsyn-synth" in res.output


def test_every_variant_has_its_settings_and_papers_for_the_card():
    from xsyn.models.configuration import XsynBertConfig
    from xsyn.models.variants import all_variants, get_variant

    config = XsynBertConfig()
    for variant in all_variants():
        assert all(hasattr(config, name) for name in variant.setting_names())
        assert (variant.paper is None) == variant.is_baseline  # every syntax variant cites its paper
    assert "Syntax-Enhanced Pre-trained Model" in get_variant("sep").paper
    assert get_variant("gat").setting_names()[:3] == ("syntax_layers", "syntax_heads", "bias_targets")
    assert get_variant("sdoi").setting_names() == ("sdoi_alpha", "sdoi_learn_alpha", "sdoi_init_from_last_layer",
                                                   "sdoi_aggregation", "sdoi_cls_visible", "sdoi_self",
                                                   "sdoi_empty_rows")
