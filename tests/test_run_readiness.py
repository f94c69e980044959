"""The readiness table: per language of a run, its data source and its parser (and the parser's models), what is
missing and the fix, before anything is read. Rows for real cards on Stanza's real 1.15 model index
(../shared/data/stanza), worked out here from the index file and the folders; the table as the installed `xsyn
finetune` and `xsyn experiment prepare` print it, before the run's first expensive step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import test_syntax_parsing_stanza as stanza_tests
from click.testing import CliRunner
from conftest import cpu_process_env
from test_experiments_prepare import _grid
from test_run_checks import finetune_args, write_pawsx

from xsyn.cli import main
from xsyn.data.cards import load_card
from xsyn.data.synth import write_vocab
from xsyn.experiments.prepare import READINESS_FILE
from xsyn.run.readiness import (
    DataState,
    evaluation_needs,
    finetune_needs,
    readiness_markdown,
    readiness_rows,
    readiness_text,
)
from xsyn.syntax.parsing import Readiness, build_parser

PAWSX = ["de", "en", "es", "fr", "ja", "ko", "zh"]
PAWSX_HUB = "google-research-datasets/paws-x"
# Stanza's 1.15 index (skipped where ../shared lacks it) and a model folder holding it alone, as the parser's tests
index_file, index, model_dir = stanza_tests.index_file, stanza_tests.index, stanza_tests.model_dir


def stanza_with(model_dir: Path, download: str = "reuse"):
    return lambda choice: build_parser(choice, parser_model_dir=str(model_dir), parser_download=download)


def put_models(model_dir: Path, index: dict, lang: str) -> None:
    """The default model files of a language's UD processors and their dependencies, read from the index here (not
    through xsyn), empty, where Stanza keeps them: `<dir>/<code>/<processor>/<package>.pt`, zh under zh-hans."""
    code = index[lang].get("alias", lang)
    for processor, package in index[code]["default_processors"].items():
        if processor in ("tokenize", "mwt", "pos", "lemma", "depparse"):
            wanted = [(processor, package)] + [(dep["model"], dep["package"])
                                               for dep in index[code][processor][package].get("dependencies", [])]
            for folder, name in wanted:
                (model_dir / code / folder).mkdir(parents=True, exist_ok=True)
                (model_dir / code / folder / f"{name}.pt").touch()


def test_pawsx_seven_languages_on_the_real_index_local_hub_and_models_here_or_fetched(index, model_dir, tmp_path):
    card = load_card("pawsx")
    data = tmp_path / "pawsx"
    write_pawsx(data, langs=("en", "de"))  # en's train, dev and test; de's (its test read): the plain-names layout
    needs = finetune_needs(card, "en")
    assert [(n.lang, n.splits) for n in needs] == [("en", ("train", "validation", "test"))] + [
        (lang, ("test",)) for lang in PAWSX if lang != "en"]
    put_models(model_dir, index, "en")
    put_models(model_dir, index, "zh")  # Chinese: under zh-hans, the index's alias of zh
    assert index["zh"] == {"alias": "zh-hans"}
    rows = readiness_rows(card, needs, {lang: "stanza" for lang in PAWSX}, stanza_with(model_dir), data, online=True)
    by = {row.lang: row for row in rows}
    assert [row.lang for row in rows] == ["en", "de", "es", "fr", "ja", "ko", "zh"]
    assert {lang: row.support.readiness for lang, row in by.items()} == {
        "en": Readiness.READY, "zh": Readiness.READY, **{lang: Readiness.FETCHABLE for lang in ("de", "es", "fr", "ja",
                                                                                                  "ko")}}
    assert by["zh"].support.models == "zh-hans" and by["en"].support.models == "en"
    assert [s.state for s in by["en"].data] == [DataState.LOCAL] * 3
    assert by["en"].data[0].source == str(data / "en" / "train.tsv")
    assert by["de"].data[0].state is DataState.LOCAL and by["de"].data[0].label == "local (x-final, plain names)"
    assert by["ja"].data[0].state is DataState.HUB and by["ja"].data[0].label == f"hub {PAWSX_HUB} ja"
    assert all(row.ready for row in rows)
    text = readiness_text("pawsx:", rows).splitlines()
    assert text[1].split() == ["language", "reads", "data", "parser", "models"]
    assert text[2].split() == ["en", "train,", "validation,", "test", "local", "(x-final,", "plain", "names)",
                               "stanza", "ready", "(en)"]
    assert text[8].split() == ["zh", "test", "hub", PAWSX_HUB, "zh", "stanza", "ready", "(zh-hans)"]
    assert text[5].split() == ["fr", "test", "hub", PAWSX_HUB, "fr", "stanza", "downloaded", "at", "first", "use",
                               "(fr)"]
    assert text[9] == ("ready to run: 7 of 7 languages (en, de, es, fr, ja, ko, zh); de, es, fr, ja, ko, zh download "
                       "their data or parser models at first use") and len(text) == 10


def test_offline_and_without_local_data_the_hub_cannot_be_reached_and_the_fix_says_what_works(index, model_dir,
                                                                                             tmp_path):
    card = load_card("pawsx")
    put_models(model_dir, index, "ko")
    needs = evaluation_needs(card, ["test"], ["ko", "ja"])
    rows = readiness_rows(card, needs, {"ko": "stanza", "ja": "stanza"}, stanza_with(model_dir), tmp_path / "none",
                          online=False)
    ko, ja = rows
    assert ko.support.readiness is Readiness.READY and ja.support.readiness is Readiness.MISSING  # no network
    assert [s.state for s in (*ko.data, *ja.data)] == [DataState.OFFLINE] * 2 and not ko.ready and not ja.ready
    assert ko.data[0].source == (f"datasets.load_dataset('{PAWSX_HUB}', 'ko', split='test') (then 1 more hub "
                                 "source(s))")
    lines = readiness_text("pawsx:", rows).splitlines()
    assert lines[-5] == "ready to run: 0 of 2 languages"
    assert lines[-4] == ("  data offline: ko (test), ja (test): no local files, and the hub cannot be reached "
                         "(HF_HUB_OFFLINE=1, or no network): only a copy an earlier run with network left in the "
                         f"datasets cache serves them; looked for first: {tmp_path / 'none' / 'x-final' / 'ko'}"
                         "/test_2k.tsv (x-final layout)")
    assert lines[-3].startswith("  fix: put the card's files in place (download: https://storage.googleapis.com/paws/")
    assert lines[-3].endswith("; or run once with network access (`xsyn experiment prepare` on a machine that has "
                              "it): the datasets cache keeps what it reads, for the runs offline")
    assert lines[-2].startswith(f"  ja: parser stanza: cannot load Stanza models for language 'ja' from {model_dir} "
                                "(no network to download them; not in ja/: ")
    assert "stanza.download('ja', model_dir='MODELS'" in lines[-1] and "'ko'" not in lines[-1]


def test_xnli_sw_is_unsupported_and_named_with_what_works_instead(model_dir):
    card = load_card("xnli")
    needs = evaluation_needs(card, ["test"], card.languages)
    rows = readiness_rows(card, needs, dict.fromkeys(card.languages, "stanza"), stanza_with(model_dir), None,
                          online=True)
    unsupported = [row.lang for row in rows if row.support.readiness is Readiness.UNSUPPORTED]
    assert unsupported == ["sw"]  # Stanza 1.15's index has no sw
    assert [row.lang for row in rows if row.ready] == [lang for lang in card.languages if lang != "sw"]
    sw = next(row for row in rows if row.lang == "sw")
    assert sw.support.models == "" and sw.data[0].state is DataState.HUB
    text = readiness_text("xnli:", rows)
    assert "\nsw        test   hub facebook/xnli sw  stanza  UNSUPPORTED: no models\n" in text
    assert text.endswith("  sw: parser stanza: Stanza 1.15.0's model index has no language 'sw'\n  fix: No Stanza "
                         "download helps these languages: give them a UDPipe 1 model (--parser udpipe:FOLDER, one "
                         ".udpipe model per language, e.g. sw.udpipe; scripts/train_udpipe.py trains one from a UD "
                         "treebank in minutes), parse them beforehand into CoNLL-U (--parser conllu:PATH), or leave "
                         "them out of the run's languages.")
    markdown = readiness_markdown("xnli", rows).splitlines()
    assert "| sw | test | hub facebook/xnli sw | stanza | UNSUPPORTED: no models |" in markdown
    assert markdown[-1].startswith("- fix: No Stanza download helps")


def test_models_here_are_ready_and_without_them_offline_missing_with_the_download_to_run(index, model_dir):
    card = load_card("pawsx")
    needs = evaluation_needs(card, ["test"], ["de", "fr"])
    put_models(model_dir, index, "de")
    rows = readiness_rows(card, needs, {"de": "stanza", "fr": "stanza"}, stanza_with(model_dir, "none"), None,
                          online=True)
    assert [row.support.readiness for row in rows] == [Readiness.READY, Readiness.MISSING]  # fr: downloads off
    assert rows[0].support.detail.endswith(f"in {model_dir / 'de'}")
    assert "--parser-download none" in rows[1].support.detail
    fetch = readiness_rows(card, needs, {"de": "stanza", "fr": "stanza"}, stanza_with(model_dir), None, online=True)
    assert [row.support.readiness for row in fetch] == [Readiness.READY, Readiness.FETCHABLE]


def test_a_card_without_a_hub_source_and_a_parser_per_language(tmp_path, model_dir):
    """CGED has local layouts only; each language takes its own parser (a UDPipe folder that is not there)."""
    card = load_card("cged")
    needs = finetune_needs(card, "zh")
    assert [(n.lang, n.splits) for n in needs] == [("zh", ("train", "test"))]  # its validation: held out of train
    assert [(n.lang, n.splits) for n in evaluation_needs(card, ["validation"], ["zh"])] == [("zh", ("train",))]
    rows = readiness_rows(card, needs, {"zh": f"udpipe:{tmp_path / 'nothing'}"}, stanza_with(model_dir), tmp_path,
                          online=True)
    (row,) = rows
    assert [s.state for s in row.data] == [DataState.MISSING] * 2
    assert row.data[0].expected == (f"{tmp_path / 'CGED16_TrainingData.zip/CGED16_HSK_Train_All.txt'}, "
                                    f"{tmp_path / 'CGED16_TrainingData.zip/CGED16_TOCFL_Train_All.txt'} "
                                    "(CGED16 training zip layout)")
    assert row.support.readiness is Readiness.MISSING and str(tmp_path / "nothing") in row.support.detail
    assert row.parser == f"udpipe:{tmp_path / 'nothing'}" and not row.ready
    mixed = readiness_rows(load_card("pawsx"), evaluation_needs(load_card("pawsx"), ["test"], ["de", "zh"]),
                           {"de": "chain", "zh": "stanza"}, stanza_with(model_dir), None, online=True)
    assert [(row.parser, row.support.readiness) for row in mixed] == [("chain", Readiness.READY),
                                                                      ("stanza", Readiness.FETCHABLE)]


def test_the_installed_finetune_prints_the_table_before_training(tmp_path, model_dir):
    """The README's PAWS-X run, small: before training, each of the 7 languages with its data and its parser; with a
    parser whose models are not there, the table and then the refusal, before anything is written."""
    data = write_pawsx(tmp_path / "data", langs=("en", "de"))
    vocab = write_vocab(tmp_path / "vocab.txt")
    env = {**cpu_process_env(), "HF_HUB_OFFLINE": "1"}
    xsyn = str(Path(sys.executable).with_name("xsyn"))
    args = finetune_args(vocab, data, tmp_path / "cache", tmp_path / "run")
    done = subprocess.run([xsyn, *args], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    table = done.stderr.splitlines()
    start = table.index(f"pawsx: the language this run trains on (en) and those `xsyn evaluate` scores after it, "
                        f"before anything is read (data folder {data}):")
    rows = [line.split() for line in table[start + 2:start + 9]]
    assert [(row[0], row[-2], row[-1]) for row in rows] == [(lang, "chain", "ready") for lang in
                                                            ["en", "de", "es", "fr", "ja", "ko", "zh"]]
    assert rows[2][2:6] == ["hub", PAWSX_HUB, "es,", "offline"]
    assert table[start + 9] == "ready to run: 2 of 7 languages (en, de)"
    assert "trained: 1 steps" in done.stdout or "trained: 1 step" in done.stdout

    stanza = [*args, "--parser", "stanza", "--parser-model-dir", str(model_dir), "--parser-download", "none",
              "--output-dir", str(tmp_path / "run2")]
    refused = subprocess.run([xsyn, *stanza], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    lines = refused.stderr.splitlines()
    header = lines.index("language  reads                    data                                             "
                         "parser  models")
    assert lines[header + 7].split()[-3:] == ["stanza", "MISSING", "(zh-hans)"]
    error = next(k for k, line in enumerate(lines) if line.startswith("Error: "))
    assert header < error and "cannot parse 1 of the 1 language(s)" in lines[error]
    assert not (tmp_path / "run2").exists()

    quiet = CliRunner().invoke(main, ["-q", *stanza])  # -q: errors only; the table is information
    assert quiet.exit_code == 1 and "language  reads" not in quiet.output and "Error: " in quiet.output


def test_experiment_prepare_prints_and_writes_each_units_table(tmp_path):
    grid = _grid(tmp_path, "chain")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([str(Path(sys.executable).with_name("xsyn")), "experiment", "prepare", str(grid),
                           "--data-dir", str(tmp_path / "data"), "--output-dir", str(tmp_path / "runs"),
                           "--set", f"cache_dir={tmp_path / 'cache'}"], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    title = next(k for k, line in enumerate(lines) if line.startswith("pawsx · tiny · parser chain: what its 2 cells"))
    assert [line.split()[:2] for line in lines[title + 2:title + 4]] == [["en", "train,"], ["de", "test"]]
    assert lines[title + 2].split()[2:5] == ["validation,", "test", "local"]
    assert lines[title + 4] == "ready to run: 2 of 2 languages (en, de)"
    assert title < next(k for k, line in enumerate(lines) if line.startswith("[1/1]"))  # before anything is read
    page = (tmp_path / "runs" / READINESS_FILE).read_text(encoding="utf-8")
    assert "| de | test | local (x-final) | chain | ready |" in page
    prepared = json.loads((tmp_path / "runs" / "prepared.json").read_text(encoding="utf-8"))
    (table,) = prepared["readiness"].values()
    assert [(row["lang"], row["ready"], row["models"]["readiness"]) for row in table["rows"]] == [
        ("en", True, "ready"), ("de", True, "ready")]
    assert [source["split"] for source in table["rows"][0]["data"]] == ["train", "validation", "test"]


def test_a_runs_table_gives_each_language_its_own_parser(model_dir):
    """`--set parsers.zh=chain` over Stanza: the table asks each language's own parser."""
    from xsyn.run.resources import readiness_of
    from xsyn.run.workflow import finetune_settings

    config, _ = finetune_settings(task="pawsx", model="tiny", parser="stanza", parser_model_dir=str(model_dir),
                                  parser_download="none", sets=["parsers.zh=chain"])
    rows = readiness_of(config, finetune_needs(config.card, "en"))
    assert [(row.lang, row.parser, row.support.readiness) for row in rows] == [
        *[(lang, "stanza", Readiness.MISSING) for lang in ["en", "de", "es", "fr", "ja", "ko"]],
        ("zh", "chain", Readiness.READY)]
