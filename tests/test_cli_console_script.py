"""Every command as a user runs it: the installed `xsyn` console script in a subprocess, on small data.

The fine-tune / evaluate / predict / report walk-through runs from the documentation's own command blocks
(tests/test_docs_commands.py); `test_every_command_is_run_from_the_console_script` checks that the two together
run every command and subcommand. Each run here is small (a few steps, a few examples)."""

from __future__ import annotations

import json
import sys

import pytest
from console import REPO, run_xsyn
from test_report_html import example_runs

from xsyn.report import uriel

# what each test below runs, by command (the docs' run blocks add theirs): checked against `xsyn --help`
RUN_HERE = {"report", "demo", "pretrain-gat", "parser-quality", "parse", "bench model", "tasks",
            "settings", "experiment plan", "experiment prepare"}


def test_load_uriel_imports_no_code_of_lang2vec(monkeypatch):
    monkeypatch.delitem(sys.modules, "lang2vec", raising=False)
    uriel.load_uriel.cache_clear()
    try:
        data = uriel.load_uriel()
    finally:
        uriel.load_uriel.cache_clear()
    assert "lang2vec" not in sys.modules
    assert data.iso3("de") == "deu" and data.family_path("de")[0] == "Indo-European"


def test_report_analyses_from_the_console_script_with_a_lang2vec_script_ahead_on_the_path(tmp_path):
    """lang2vec installs a `lang2vec.py` script into bin/, which the console script puts first on sys.path; that
    script imports pkg_resources (gone from current setuptools). A module of that name ahead on the path stands in
    for it: the analyses must not import it."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "lang2vec.py").write_text("import pkg_resources_is_gone_from_setuptools  # as lang2vec's bin/ script\n")
    runs, baselines = example_runs(tmp_path / "runs")
    las = tmp_path / "las.txt"
    las.write_text("en 0.90\nde 0.85\nfr 0.83\nja 0.70\n", encoding="utf-8")
    out = tmp_path / "report"
    proc = run_xsyn("report", *map(str, runs), *[a for b in baselines for a in ("--baseline", str(b))],
                    "--analysis", "family,typology,parser", "--parser-quality", str(las), "--permutations", "100",
                    "--resamples", "50", "--html", "--output-dir", str(out), cwd=tmp_path, PYTHONPATH=str(shadow))
    assert proc.stdout.splitlines()[-1].endswith(f"; start with {out / 'report.html'}")  # the page, with --html
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "## Where syntax helps" in markdown
    for analysis in ("family", "typology", "parser"):
        assert f"### {analysis}: pawsx" in markdown, markdown
    assert (out / "analysis" / "family-pawsx-test-gat-languages.png").stat().st_size > 1000
    assert 'src="data:image/png;base64,' in (out / "report.html").read_text(encoding="utf-8")


def test_the_demo_shortened(tmp_path):
    proc = run_xsyn("demo", "--output-dir", "demo", "--max-steps", "2", "--set", "max_train_examples=32",
                    "--set", "max_eval_examples=16", "--set", "warmup_steps=1", "--quiet", cwd=tmp_path)
    assert "zero-shot test accuracy (trained on svo)" in proc.stdout
    results = json.loads((tmp_path / "demo" / "runs" / "gat-seed1111" / "eval-test" / "results.json").read_text())
    # the cap reaches the demo's test evaluation too: 16 examples of each language and each of the 16 pairs
    assert set(results["n_examples"].values()) == {16} and len(results["pairs"]) == 4
    assert (tmp_path / "demo" / "report" / "report.md").is_file()
    # label-balanced: 8 of each label in every language and pair, the same ids in each (the first 16 are 11:5)
    examples = tmp_path / "demo" / "runs" / "gat-seed1111" / "eval-test" / "per_example"
    rows = {file.stem: [json.loads(line) for line in file.read_text().splitlines()]
            for file in examples.glob("*.jsonl")}
    assert len(rows) == 4 + 16
    for name, scored in rows.items():
        assert sorted(row["reference"] for row in scored) == ["0"] * 8 + ["1"] * 8, name
        assert [row["id"] for row in scored] == [row["id"] for row in rows["test-svo"]], name
    # two steps show that the pipeline runs, not which variant transfers: said, with the chance level
    said = " ".join(proc.stdout.split())
    assert "Stopped at 2 of the" in said and "near chance (50.0 for 2 labels" in said
    assert "not which variant transfers better" in said
    # the model predicts one label everywhere: a `warning:` line, which `xsyn -q` (errors only) hides
    evaluate = ("evaluate", "--model-dir", "demo/runs/gat-seed1111", "--langs", "svo", "--max-eval-examples", "8")
    assert "warning: svo: the model predicted" in run_xsyn(*evaluate, "--output-dir", "e1", cwd=tmp_path).stderr
    assert "warning" not in run_xsyn("-q", *evaluate, "--output-dir", "e2", cwd=tmp_path).stderr.lower()


def test_pretrain_gat_then_parser_quality_beside_its_probe(tmp_path):
    ud = tmp_path / "ud" / "UD_English-EWT"
    ud.mkdir(parents=True)
    for split in ("train", "dev"):
        (ud / f"en_ewt-ud-{split}.conllu").write_bytes((REPO / "xsyn" / "examples" / "example.conllu").read_bytes())
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog",
                                                   "a", "cat", ".", "der", "hund", "zum", "haus"]) + "\n")
    run_xsyn("pretrain-gat", "--treebanks", "en", "--treebank-dir", "ud", "--model", "tiny", "--tokenizer",
             "vocab.txt", "--max-steps", "2", "--batch-size", "2", "--output-dir", "gat", "--quiet", cwd=tmp_path)
    assert json.loads((tmp_path / "gat" / "probe_metrics.json").read_text())["en"]["n_sentences"] == 3
    run_xsyn("parser-quality", "--parser", "chain", "--treebanks", "en", "--treebank-dir", "ud", "--input", "words",
             "--output", "quality.json", "--probe-metrics", "gat/probe_metrics.json", "--plot-output", "quality.png",
             cwd=tmp_path)
    quality = json.loads((tmp_path / "quality.json").read_text())["en"]
    # the chain heads each word by its right neighbour (the last word is the root): 9 of the 22 gold words
    assert quality["sentences"] == 3 and quality["uas"] == pytest.approx(9 / 22)
    assert (tmp_path / "quality.png").stat().st_size > 1000


def test_parse_text_with_the_chain_parser(tmp_path):
    (tmp_path / "in.txt").write_text("Dogs bark.\nCats sleep.\nDogs bark.\n", encoding="utf-8")
    proc = run_xsyn("parse", "--input", "in.txt", "--format", "text", "--lang", "en", "--parser", "chain",
                    "--output", "out.jsonl", "--cache-dir", "cache", "--json", cwd=tmp_path)
    assert json.loads(proc.stdout)["unique"] == 2
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 3


def test_bench_model(tmp_path):
    shape = ["--layers", "1", "--hidden", "16", "--heads", "2", "--seq-len", "8", "--batch-size", "2",
             "--vocab-size", "30", "--repeats", "1", "--variants", "none,gat"]
    rows = json.loads(run_xsyn("bench", "model", *shape, "--json", cwd=tmp_path).stdout)
    assert {"none", "gat"} <= set(rows) and rows["none"]["step_time_ratio"] == 1.0


def test_tasks_settings_and_an_experiments_plan_and_prepare(tmp_path):
    assert "pawsx" in run_xsyn("tasks", cwd=tmp_path).stdout
    assert "gat_delta" in run_xsyn("settings", "--task", "pawsx", "--variant", "gat", cwd=tmp_path).stdout
    plan = run_xsyn("experiment", "plan", "synth", "--device", "cpu", "--json", cwd=tmp_path).stdout
    systems = json.loads(plan)["tasks"][0]["systems"]
    assert {"synth/none-seed1", "synth/gat-seed1"} <= {cell for system in systems for cell in system["cells"]}
    run_xsyn("experiment", "prepare", "synth", "--output-dir", "runs", "--set", "max_train_examples=16",
             "--set", "max_eval_examples=8", cwd=tmp_path)
    prepared = json.loads((tmp_path / "runs" / "prepared.json").read_text())
    assert prepared["models"]["tiny"]["ready"] and [unit["ready"] for unit in prepared["units"].values()] == [True]
