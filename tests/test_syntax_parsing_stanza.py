"""The default parser against Stanza's own resolution code and its published model index (1.15, in
../shared/data/stanza): for every language of every task card, raw and pre-tokenised, what xsyn asks
`stanza.Pipeline` for must resolve, in Stanza's own `maintain_processor_list` / `add_dependencies`, to
processors that each have a model for the language; or the preflight refuses the language, by name, with
no download advice. No model is downloaded or loaded: where a pipeline is built, Stanza's processor
classes are kept and only their weight loading is replaced by a check that the file is there."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.data.cards import list_tasks, load_card
from xsyn.syntax.parsing import ParserUnavailable
from xsyn.syntax.parsing.base import Readiness, require_languages
from xsyn.syntax.parsing.stanza import INDEX_FILE, StanzaParser, model_files, stanza_code

# The languages the cards list that Stanza 1.15 cannot parse: not in its index (jv, ms, sw, tl, yo, and
# synth's made-up word orders), or there without a pos and depparse model (bn, ml: none; my: a tokenizer only).
REFUSED = {"bn", "jv", "ml", "ms", "my", "sw", "tl", "yo", "svo", "sov", "vso", "ovs"}
CARD_LANGUAGES = sorted({lang for task in list_tasks() for lang in load_card(task).languages})
OLD_REQUEST = "tokenize,mwt,pos,lemma,depparse"  # what xsyn asked for before: mwt for every language


@pytest.fixture(scope="module")
def index_file(shared_data) -> Path:
    path = shared_data / "stanza" / "resources_1.15.0.json"
    if not path.is_file():
        pytest.skip(f"Stanza's 1.15 model index is not at {path}")
    return path


@pytest.fixture(scope="module")
def index(index_file) -> dict:
    import json

    return json.loads(index_file.read_text(encoding="utf-8"))


@pytest.fixture()
def model_dir(index_file, tmp_path) -> Path:
    """A Stanza model folder holding the index only, as `stanza.download` leaves one before any model."""
    folder = tmp_path / "stanza"
    folder.mkdir()
    shutil.copy(index_file, folder / INDEX_FILE)
    return folder


@pytest.fixture(autouse=True)
def quiet_stanza():
    logger = logging.getLogger("stanza")
    level = logger.level
    logger.setLevel(logging.ERROR)  # its "expects mwt, which has been added" warnings
    yield
    logger.setLevel(level)


def stanza_resolves(index: dict, arguments: dict) -> tuple[str, list] | None:
    """What `stanza.Pipeline.__init__` (stanza/pipeline/core.py) makes of `arguments` before it loads a model,
    step by step with Stanza's own functions: None where it has no processors to load (an unknown language)."""
    from stanza.resources.common import add_dependencies, maintain_processor_list, process_pipeline_parameters

    lang, _, package, processors = process_pipeline_parameters(arguments["lang"], arguments["dir"],
                                                               arguments["package"], arguments["processors"])
    if lang not in index:
        return None
    if "alias" in index[lang]:
        lang = index[lang]["alias"]
    try:
        load_list = maintain_processor_list(index, lang, package, processors,
                                            maybe_add_mwt=not arguments["tokenize_pretokenized"])
    except KeyError:  # Stanza's add_mwt on a language without a tokenizer (bn, ml): no pipeline either
        return None
    return lang, add_dependencies(index, lang, load_list)


def lacking_models(index: dict, lang: str, load_list: list) -> list[str]:
    """The processors (and dependencies) of a load list without a model for `lang` in the index: each one
    Stanza's FileNotFoundError branch turns into UnsupportedProcessorError."""
    from stanza.pipeline.core import build_default_config_option

    lacking = []
    for processor, specs in load_list:
        if build_default_config_option(specs) is not None:  # the identity lemmatizer or a variant: no model
            continue
        for spec in specs:
            if spec.package not in index[lang].get(processor, {}):
                lacking.append(f"{processor}:{spec.package}")
            lacking += [f"{model}:{package}" for model, package in spec.dependencies or ()
                        if package not in index[lang].get(model, {})]
    return lacking


@pytest.mark.parametrize("lang", CARD_LANGUAGES)
def test_every_card_language_resolves_in_stanzas_own_code_or_is_refused(index, model_dir, lang):
    parser = StanzaParser(model_dir=str(model_dir), download="none")
    (support,) = parser.language_support([lang], online=False)
    for pretokenized in (False, True):
        resolved = stanza_resolves(index, parser.pipeline_arguments(lang, pretokenized))
        if resolved is None or lacking_models(index, *resolved) or not {"pos", "depparse"} <= {
                processor for processor, _ in resolved[1]}:
            assert support.readiness is Readiness.UNSUPPORTED, (lang, pretokenized, support)
            continue
        code, load_list = resolved
        assert support.readiness is Readiness.MISSING  # models in the index, none in the folder yet
        assert stanza_code(index, lang) == code
        # the files the preflight looks for are those Stanza would load
        wanted = {(processor, spec.package) for processor, specs in load_list for spec in specs
                  if spec.package != "identity"}
        assert wanted <= set(model_files(index, code, parser.package))
    assert (support.readiness is Readiness.UNSUPPORTED) == (lang in REFUSED)


def test_the_old_request_needed_an_mwt_model_13_card_languages_lack(index, model_dir):
    """The bug this guards against: asked for mwt, Stanza resolves a model the index does not have."""
    parser = StanzaParser(model_dir=str(model_dir), download="none")
    failing = set()
    for lang in CARD_LANGUAGES:
        arguments = {**parser.pipeline_arguments(lang, False), "processors": OLD_REQUEST}
        resolved = stanza_resolves(index, arguments)
        if resolved is not None and lang not in REFUSED and lacking_models(index, *resolved):
            failing.add(lang)
    assert failing == {"af", "bg", "eu", "hi", "hu", "ja", "ko", "ru", "te", "th", "ur", "vi", "zh"}


def test_the_refused_languages_get_no_download_advice(model_dir):
    parser = StanzaParser(model_dir=str(model_dir), download="none")
    with pytest.raises(ParserUnavailable) as err:
        require_languages(parser, ["de", "sw", "my", "bn"], online=False)
    message = str(err.value)
    refused = message[message.index("  sw:"):]
    refused = refused[:refused.index("No Stanza download helps these languages")]
    assert refused.splitlines() == ["  sw: Stanza 1.15.0's model index has no language 'sw'",
                                    "  my: Stanza 1.15.0 has no pos or depparse model for 'my' (only tokenize)",
                                    "  bn: Stanza 1.15.0 has no tokenize, pos or depparse model for 'bn' (no UD "
                                    "models at all)"]
    fix = next(line for line in message.splitlines() if line.startswith("No Stanza download helps"))
    assert "--parser udpipe:FOLDER" in fix and "--parser conllu:PATH" in fix and "leave them out" in fix
    # the one language Stanza has models for (not in the folder, no network) is the only one to download
    assert "  de: cannot load Stanza models for language 'de'" in message
    assert "stanza.download('de', model_dir='MODELS', processors='tokenize,pos,lemma,depparse')" in message
    assert message.count("stanza.download") == 1
    assert {s.lang for s in err.value.support} == {"de", "sw", "my", "bn"}


def touch_models(model_dir: Path, index: dict, lang: str, package: str = "default") -> None:
    code = stanza_code(index, lang)
    for processor, model in model_files(index, code, package):
        path = model_dir / code / processor / f"{model}.pt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


def test_chinese_models_kept_under_zh_hans_are_found_offline(index, model_dir):
    parser = StanzaParser(model_dir=str(model_dir), download="none")
    (model_dir / "zh").mkdir()  # the folder the old check looked for: not where Stanza keeps Chinese
    assert parser.language_support(["zh"], online=False)[0].readiness is Readiness.MISSING
    touch_models(model_dir, index, "zh")
    (support,) = parser.language_support(["zh"], online=False)
    assert support.readiness is Readiness.READY
    assert support.detail.startswith("zh (Stanza's zh-hans): tokenize gsdsimp, pos gsdsimp_charlm, lemma "
                                     "gsdsimp_nocharlm, depparse gsdsimp_charlm")
    assert support.detail.endswith(f"in {model_dir / 'zh-hans'}")
    (model_dir / "zh-hans" / "depparse" / "gsdsimp_charlm.pt").unlink()
    (missing,) = parser.language_support(["zh"], online=False)
    assert missing.readiness is Readiness.MISSING and "not in zh-hans/: depparse/gsdsimp_charlm.pt" in missing.detail
    (refused,) = parser.language_support(["zh"], online=True)
    assert refused.readiness is Readiness.MISSING and "(--parser-download none; not in zh-hans/" in refused.detail
    reusing = StanzaParser(model_dir=str(model_dir), download="reuse")  # Stanza fetches the one file at first use
    (online,) = reusing.language_support(["zh"], online=True)
    assert online.readiness is Readiness.FETCHABLE and "1 of 7 model files to download" in online.detail


@pytest.fixture()
def weightless_processors(monkeypatch):
    """Stanza's own processor classes, each loading no weights: the files its config names must exist (else the
    FileNotFoundError torch.load would raise, which Stanza's Pipeline turns into its own errors)."""
    from stanza.pipeline.registry import NAME_TO_PROCESSOR_CLASS

    def set_up_model(self, config, pipeline, device):
        for key, path in config.items():
            if key.endswith("_path") and isinstance(path, str) and not (key == "model_path" and config.get(
                    "pretokenized")) and not os.path.exists(path):
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        if config.get("use_identity") in ("True", True):
            self._use_identity = True

    for name, cls in list(NAME_TO_PROCESSOR_CLASS.items()):
        monkeypatch.setitem(NAME_TO_PROCESSOR_CLASS, name, type(cls.__name__, (cls,), {"_set_up_model": set_up_model}))


@pytest.mark.parametrize(("lang", "raw"), [
    ("zh", ["tokenize", "pos", "lemma", "depparse"]),  # an alias (zh-hans), and no mwt model
    ("ja", ["tokenize", "pos", "lemma", "depparse"]),  # PAN-X's characters are parsed as joined raw text
    ("vi", ["tokenize", "pos", "lemma", "depparse"]),  # the identity lemmatizer (no lemma model)
    ("ar", ["tokenize", "mwt", "pos", "lemma", "depparse"]),  # Stanza adds the mwt its tokenizer needs
    ("en", ["tokenize", "mwt", "pos", "lemma", "depparse"]),
])
def test_stanzas_pipeline_builds_from_xsyns_request_with_the_models_the_index_lists(index, model_dir, lang, raw,
                                                                                    weightless_processors):
    import stanza

    touch_models(model_dir, index, lang)
    parser = StanzaParser(model_dir=str(model_dir), download="none", device="cpu")
    for pretokenized, processors in ((False, raw), (True, [p for p in raw if p != "mwt"])):
        pipeline = parser._build_pipeline(lang, pretokenized)  # the real stanza.Pipeline
        assert list(pipeline.processors) == processors, (lang, pretokenized)
    if "mwt" not in raw:  # the old request, on the same folder, fails as the issue says
        with pytest.raises(stanza.pipeline.core.UnsupportedProcessorError, match="Processor mwt is not known"):
            stanza.Pipeline(**{**parser.pipeline_arguments(lang, False), "processors": OLD_REQUEST})


def test_a_pipeline_for_a_language_stanza_lacks_fails_with_no_download_advice(model_dir):
    """At parse time too (a parser built outside the preflight): the index decides the advice."""
    parser = StanzaParser(model_dir=str(model_dir), download="none")
    with pytest.raises(ParserUnavailable) as err:
        parser.parse_texts(["Habari ya asubuhi."], "sw")
    assert "Stanza 1.15.0's model index has no language 'sw'" in str(err.value)
    assert "No Stanza download helps" in str(err.value) and "stanza.download" not in str(err.value)


def test_finetune_refuses_an_evaluation_language_stanza_cannot_parse_before_any_data(index, model_dir, tmp_path,
                                                                                       monkeypatch):
    import xsyn.run.checks

    monkeypatch.setattr(xsyn.run.checks, "check_data", lambda *a: pytest.fail("the data was looked at first"))
    touch_models(model_dir, index, "en")
    args = ["finetune", "--task", "xnli", "--model", "tiny", "--data-dir", str(tmp_path / "data"),
            "--output-dir", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"), "--parser", "stanza",
            "--parser-model-dir", str(model_dir), "--parser-download", "none", "--eval-langs", "en,sw,ur",
            "--variant", "none", "--quiet"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert "parser stanza cannot parse 2 of the 3 language(s)" in res.output  # ur: Stanza has it, no mwt
    assert "sw: Stanza 1.15.0's model index has no language 'sw'" in res.output
    assert "ur: cannot load Stanza models for language 'ur'" in res.output
    assert "stanza.download('ur'" in res.output and "stanza.download('sw'" not in res.output
    assert not (tmp_path / "run").exists()


def test_xsyn_parse_names_the_language_before_reading_its_input(model_dir, tmp_path):
    """As users run it: the installed command, in a subprocess."""
    text = tmp_path / "in.txt"
    text.write_bytes(b"\xff not utf-8: reading it would fail first\n")
    done = subprocess.run([shutil.which("xsyn") or sys.executable, *([] if shutil.which("xsyn") else ["-m", "xsyn"]),
                           "parse", "--input", str(text), "--format", "text", "--lang", "yo", "--output",
                           str(tmp_path / "out.jsonl"), "--parser-model-dir", str(model_dir),
                           "--parser-download", "none"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "yo: Stanza 1.15.0's model index has no language 'yo'" in done.stderr
    assert "No Stanza download helps" in done.stderr and not (tmp_path / "out.jsonl").exists()


def test_an_experiment_with_languages_stanza_cannot_parse_is_refused_before_any_cell(model_dir, tmp_path):
    """`experiment prepare` and `run`: named from the index before anything is read, with the tasks needing them."""
    from xsyn.experiments.experiment_file import ExperimentError, Overrides, load_experiment
    from xsyn.experiments.launch import RunChoices, run_experiment
    from xsyn.experiments.prepare import prepare

    grid = tmp_path / "grid.toml"
    grid.write_text(f'tasks = ["panx", "xnli"]\nvariants = ["none"]\nseeds = [1]\nmodels = ["tiny"]\n[settings]\n'
                    f'parser = "stanza"\nparser_model_dir = "{model_dir}"\nparser_download = "none"\n'
                    '[task.panx]\nlangs = ["en", "sw", "my"]\n[task.xnli]\nlangs = ["en", "sw"]\n', encoding="utf-8")
    experiment = load_experiment(grid, Overrides(runs_dir=str(tmp_path / "runs")))
    for start in (lambda: run_experiment(experiment, experiment.cells, RunChoices(), str(grid), echo=print),
                  lambda: prepare(experiment, echo=lambda line: None)):
        with pytest.raises(ExperimentError) as err:
            start()
        lines = str(err.value).splitlines()
        assert lines[0] == f"{grid}: 2 language(s) cannot be parsed:"
        assert lines[1:3] == ["  sw (panx, xnli; parser stanza): Stanza 1.15.0's model index has no language 'sw'",
                              "  my (panx; parser stanza): Stanza 1.15.0 has no pos or depparse model for 'my' (only "
                              "tokenize)"]  # (xnli has no my)
        assert lines[3].startswith("No download helps these languages: give them a UDPipe 1 model")
        assert "stanza.download" not in str(err.value)
    assert not (tmp_path / "runs").exists()
