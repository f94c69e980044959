"""Preflight: a command's inputs (model, tokenizer, data files, output folder, free disk) are checked
before its first expensive step, and a failure names the model, file or folder and the fix."""

from __future__ import annotations

import json
import random
from collections import namedtuple
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import stopped_before_results

from xsyn.cli import main
from xsyn.data.synth import write_vocab

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda".split()
PRESENT = ("en", "de", "es")


def write_pawsx(folder: Path, langs=PRESENT, rows: int = 24) -> Path:
    """A PAWS-X data folder (the `x-final, plain names` layout) with `rows` parallel rows per split and language."""
    rng = random.Random(0)
    lines = [(f"id{i}", " ".join(rng.choices(WORDS, k=6)), " ".join(rng.choices(WORDS, k=6)), str(i % 2))
             for i in range(rows)]
    for lang in langs:
        for split in ("train", "dev", "test"):
            file = folder / lang / f"{split}.tsv"
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text("id\tsentence1\tsentence2\tlabel\n" + "".join("\t".join(line) + "\n" for line in lines))
    return folder


@pytest.fixture(scope="module")
def vocab(tmp_path_factory) -> Path:
    return write_vocab(tmp_path_factory.mktemp("vocab") / "vocab.txt")


def finetune_args(vocab: Path, data: Path, cache: Path, out: Path, *extra: str) -> list[str]:
    return ["finetune", "--task", "pawsx", "--model", "tiny", "--tokenizer", str(vocab), "--data-dir", str(data),
            "--cache-dir", str(cache), "--output-dir", str(out), "--parser", "chain", "--quiet", "--max-steps", "1",
            "--batch-size", "8", "--max-length", "24", "--variant", "none", *extra]


@pytest.fixture(scope="module")
def pawsx_run(vocab, tmp_path_factory):
    root = tmp_path_factory.mktemp("pawsx")
    data = write_pawsx(root / "data")
    res = CliRunner().invoke(main, finetune_args(vocab, data, root / "cache", root / "run"))
    assert res.exit_code == 0, res.output
    return root / "run", data


def test_an_unloadable_model_is_named_before_any_data_is_read_or_written(vocab, tmp_path):
    data = write_pawsx(tmp_path / "data")
    out, cache = tmp_path / "run", tmp_path / "cache"
    args = finetune_args(vocab, data, cache, out)
    args[args.index("tiny")] = "no-such-owner/no-such-model"
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1
    assert "cannot load the model 'no-such-owner/no-such-model'" in res.output and "offline" in res.output
    error = res.output[res.output.index("Error: "):]  # (after the readiness table of the run's languages)
    assert len(error.strip().splitlines()) == 1  # the hub library's paragraphs of advice are not repeated
    assert not out.exists() and not cache.exists()  # nothing loaded, parsed or featurised first


def test_a_missing_training_file_is_found_before_the_model_is_built(vocab, tmp_path):
    data = write_pawsx(tmp_path / "data", langs=("de",))  # no en: the training language
    out = tmp_path / "run"
    res = CliRunner().invoke(main, finetune_args(vocab, data, tmp_path / "cache", out))
    assert res.exit_code == 1
    assert str(data / "x-final" / "en" / "train.tsv") in res.output
    assert not out.exists()


@pytest.mark.parametrize(("langs", "named"), [
    ("en,xx", "task 'pawsx' has no language 'xx'"),
    ("en,fr", "pawsx test: no data for fr (1 of 2 languages and pairs); --eval-langs and --do-eval score"),
])
def test_the_evaluation_after_training_is_checked_before_training(vocab, tmp_path, langs, named):
    """A misspelt --eval-langs language or a missing test file stopped the command after the whole training."""
    data = write_pawsx(tmp_path / "data", langs=("en", "de"))
    out = tmp_path / "run"
    res = CliRunner().invoke(main, finetune_args(vocab, data, tmp_path / "cache", out, "--eval-langs", langs))
    assert res.exit_code == 1 and named in res.output and "Traceback" not in res.output
    assert not out.exists() and not (tmp_path / "cache").exists()  # nothing trained, parsed or featurised first


def test_an_output_folder_under_a_file_is_refused_naming_the_file(vocab, tmp_path):
    data = write_pawsx(tmp_path / "data")
    blocker = tmp_path / "taken"
    blocker.write_text("a file where the run's parent folder should be")
    res = CliRunner().invoke(main, finetune_args(vocab, data, tmp_path / "cache", blocker / "run"))
    assert res.exit_code == 1
    assert f"{blocker} is a file, not a folder" in res.output and "--output-dir" in res.output
    assert not (tmp_path / "cache").exists()


def test_a_disk_without_room_for_a_checkpoint_is_refused_with_the_bytes(vocab, tmp_path, monkeypatch):
    from transformers import BertModel

    from xsyn.models.presets import tiny_config
    from xsyn.models.tokenizers import load_tokenizer

    tiny = BertModel(tiny_config(load_tokenizer(vocab)))
    needed = 28 * sum(p.numel() for p in tiny.parameters())  # best/ 4 + state/ 12 + state.tmp/ 12 bytes each
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr("xsyn.run.checks.shutil.disk_usage", lambda path: usage(10**9, 10**9 - 1000, 1000))
    data = write_pawsx(tmp_path / "data")
    out = tmp_path / "run"
    res = CliRunner().invoke(main, finetune_args(vocab, data, tmp_path / "cache", out))
    assert res.exit_code == 1
    assert f"{out}: a checkpoint needs about {needed:,} bytes, and its disk has 1,000 bytes free" in res.output
    assert "--output-dir" in res.output and not (out / "config.json").exists()


def test_generalized_evaluation_names_every_missing_language_before_scoring_any(pawsx_run, tmp_path):
    run, data = pawsx_run
    out = tmp_path / "eval"
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(run), "--langs", "en,de,fr,es,ko", "--generalized",
                                    "--output-dir", str(out), "--quiet"])
    assert res.exit_code == 1
    assert "pawsx test: no data for fr, ko (2 of 5 languages and pairs)" in res.output
    assert str(data / "fr" / "test.tsv") in res.output and "--skip-missing" in res.output
    assert not (out / "partial").exists()  # no language was scored and then thrown away


def test_generalized_evaluation_with_skip_missing_lists_the_skipped_languages(pawsx_run, tmp_path):
    run, _ = pawsx_run
    out = tmp_path / "eval"
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(run), "--langs", "en,fr,de", "--generalized",
                                    "--skip-missing", "--output-dir", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    results = json.loads((out / "results.json").read_text())
    assert results["missing_languages"] == ["fr"] and set(results["pairs"]) == {"en", "de"}


def test_a_language_scored_before_is_said_to_be_kept_not_to_be_from_an_interrupted_run(pawsx_run, tmp_path,
                                                                                       monkeypatch):
    run, _ = pawsx_run
    args = ["-v", "evaluate", "--model-dir", str(run), "--langs", "en,de", "--output-dir", str(tmp_path / "e"),
            "--quiet"]
    with monkeypatch.context() as patched:
        stopped_before_results(patched)
        assert CliRunner().invoke(main, args).exit_code != 0
    res = CliRunner().invoke(main, args[:5] + ["en"] + args[6:])  # asked again, for en
    assert res.exit_code == 0, res.output
    assert "test en: " in res.output and "(kept from an earlier evaluation of this checkpoint, partial/)" in res.output
    assert "interrupted" not in res.output
    assert not (tmp_path / "e" / "partial").exists()  # finished now


def test_pairs_dropped_under_a_cap_are_said_of_what_the_source_held(pawsx_run, tmp_path):
    """--max-eval-examples scores the first N pairs, but drops are counted over the whole source: the line says
    "4 of 24" (the rows the files hold), not "4 of 14" (the cap plus the drops)."""
    run, _ = pawsx_run
    data = write_pawsx(tmp_path / "data", langs=("en", "de"))
    german = data / "de" / "test.tsv"
    lines = german.read_text().splitlines(keepends=True)
    for i in range(21, 25):  # the last 4 rows (after the header), beyond the cap: their labels flipped
        *fields, label = lines[i].rstrip("\n").split("\t")
        lines[i] = "\t".join([*fields, str(1 - int(label))]) + "\n"
    german.write_text("".join(lines))
    out = tmp_path / "eval"
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(run), "--data-dir", str(data), "--langs", "en,de",
                                    "--generalized", "--max-eval-examples", "10", "--output-dir", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    results = json.loads((out / "results.json").read_text())
    assert results["n_examples"]["en-de"] == 10 and results["dropped"]["en-de"] == 4
    assert results["n_read"] == dict.fromkeys(results["n_examples"], 24)  # en, de, and the 4 pairs (en-en too)
    assert ("not scored: 8 pairs whose languages disagree on the label, in 2 of 6 languages and pairs; most in "
            "en-de: 4 of 24") in res.output


def test_inputs_cut_to_max_length_are_said_in_training_and_evaluation(vocab, tmp_path):
    """Every pair is 2 x 6 words (one piece each) + [CLS] + 2 [SEP] = 15 pieces: at --max-length 8 each loses 7.
    Training warned nothing and evaluation printed nothing (the counts sat in data_report.json alone)."""
    data = write_pawsx(tmp_path / "data")
    out = tmp_path / "run"
    res = CliRunner().invoke(main, finetune_args(vocab, data, tmp_path / "cache", out, "--max-length", "8"))
    assert res.exit_code == 0, res.output
    for split in ("train", "validation"):
        assert (f"pawsx {split}: 24 of 24 inputs were longer than max_length (8 word pieces) and were cut (168 pieces "
                "lost) (data_report.json)") in res.output
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(out), "--langs", "en,de",
                                    "--max-eval-examples", "10", "--quiet"])
    assert res.exit_code == 0, res.output
    assert ("cut to max_length (8 word pieces): 20 inputs, in 2 of 2 languages and pairs; most in en: 10 of 10 "
            "(truncated in results.json)") in res.output
    assert json.loads((out / "eval-test" / "results.json").read_text())["truncated"] == {"en": 10, "de": 10}


def test_a_demo_folder_that_cannot_be_written_is_refused_before_the_benchmark_is_made(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    res = CliRunner().invoke(main, ["demo", "--output-dir", str(blocker / "demo"), "--quiet"])
    assert res.exit_code == 1 and f"{blocker} is a file, not a folder" in res.output


def test_a_stanza_parser_without_its_models_is_found_first_naming_the_other_parsers(vocab, tmp_path, monkeypatch):
    """The default Stanza parser without its models failed only after the data was loaded and parsed, and
    named no other parser."""
    import xsyn.run.checks

    monkeypatch.setattr(xsyn.run.checks, "check_model", lambda *a: pytest.fail("the model was looked up first"))
    monkeypatch.setattr(xsyn.run.checks, "check_data", lambda *a: pytest.fail("the data was looked at first"))
    args = finetune_args(vocab, write_pawsx(tmp_path / "data"), tmp_path / "cache", tmp_path / "run",
                         "--parser", "stanza", "--parser-model-dir", str(tmp_path / "no-stanza"))
    res = CliRunner().invoke(main, args)  # offline (HF_HUB_OFFLINE=1): nothing can be downloaded
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "cannot load Stanza models for language 'en'" in res.output and "no network to download them" in res.output
    # the folder it looked in is the one it names (it said "from ~/stanza_resources (not in <Stanza's default>)")
    assert f"from {tmp_path / 'no-stanza'} (no resources.json there, and no network to download them)" in res.output
    for other in ("--parser udpipe:MODEL", "--parser spacy:PIPELINE", "--parser chain"):
        assert other in res.output
    assert not (tmp_path / "run").exists()


def test_a_stanza_parser_without_its_models_names_the_folder_stanza_reads(tmp_path, monkeypatch):
    """Without --parser-model-dir the message said "from ~/stanza_resources" while Stanza reads its own default."""
    import stanza

    from xsyn.syntax.parsing import ParserUnavailable, build_parser
    from xsyn.syntax.parsing.base import require_languages

    monkeypatch.setattr(stanza.resources.common, "DEFAULT_MODEL_DIR", str(tmp_path / "default"))
    with pytest.raises(ParserUnavailable) as err:
        require_languages(build_parser("stanza"), ["de"], online=False)
    assert f"for language 'de' from {tmp_path / 'default'} (no resources.json there, and no network" in str(err.value)
    assert f"copy MODELS to {tmp_path / 'default'}, or pass it as --parser-model-dir" in str(err.value)
    assert "stanza_resources" not in str(err.value)


def _bert_checkpoint(folder: Path, vocab_size: int, pad_token_id: int = 0) -> Path:
    """A plain BERT checkpoint's folder as the hub has one (config.json and weights), tiny and random."""
    from transformers import BertConfig, BertModel

    BertModel(BertConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32, pad_token_id=pad_token_id)).save_pretrained(folder)
    return folder


def test_a_tokenizer_that_does_not_fit_the_model_is_named_with_both_before_any_data(vocab, xlmr_checkpoint,
                                                                                   tmp_path):
    """Issue 39, point 2: an XLM-R tokenizer beside a BERT config ended in transformers' size mismatch after
    the data was read and featurised."""
    xlmr_tokenizer = Path(__file__).parent / "fixtures" / "xlmr_tokenizer"
    size = len(vocab.read_text(encoding="utf-8").splitlines())
    model = _bert_checkpoint(tmp_path / "bert", vocab_size=size)
    data = write_pawsx(tmp_path / "data")
    out, cache = tmp_path / "run", tmp_path / "cache"
    args = finetune_args(vocab, data, cache, out)
    args[args.index("tiny")] = str(model)
    for tokenizer, message in [  # a generic tokenizer: its size; one of a known family: the families
        (xlmr_tokenizer, f"the tokenizer {xlmr_tokenizer} has 3,000 tokens, more than the {size} of the model's "
                         f"vocabulary (vocab_size in {model / 'config.json'}): ids past {size - 1} have no embedding"),
        (xlmr_checkpoint, f"the tokenizer {xlmr_checkpoint} is a xlm-roberta tokenizer and the model "
                          f"{model / 'config.json'} a bert model: they do not fit")]:
        args[args.index("--tokenizer") + 1] = str(tokenizer)
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 1 and message in res.output and "leave out --tokenizer" in res.output, res.output
        assert not out.exists() and not cache.exists()  # nothing parsed or featurised first
    padded = _bert_checkpoint(tmp_path / "padded", vocab_size=100, pad_token_id=1)
    from xsyn.run.checks import check_model
    from xsyn.utils.errors import InputError

    with pytest.raises(InputError, match=rf"the tokenizer {vocab} pads with id 0, the model .*config.json with id 1"):
        check_model(str(padded), str(vocab))
    check_model(str(model), str(vocab))  # the tokenizer the model was made for fits
