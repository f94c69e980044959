"""The command line: help lists every command; `xsyn parse` and `xsyn bench syntax` end to end."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.syntax.record import read_jsonl

COMMANDS = ["parse", "bench", "finetune", "evaluate", "predict", "report", "pretrain-gat", "demo", "parser-quality",
            "tasks", "settings", "experiment"]


def test_help_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "xsyn", "--help"], capture_output=True, text=True, check=True).stdout
    listed = {line.split()[0] for line in out.split("Commands:")[1].splitlines() if line.strip()}
    assert listed == set(COMMANDS)
    bench = CliRunner().invoke(main, ["bench", "--help"]).output
    for target in ("syntax", "model", "eval"):
        assert target in bench


def test_every_package_folder_is_declared_for_the_wheel():
    """An editable install finds undeclared subpackages; a wheel built from pyproject.toml would lack them."""
    root = Path(__file__).resolve().parents[1]
    declared = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join(path.parent.relative_to(root).parts) for path in (root / "xsyn").rglob("*.py")}
    assert folders <= declared, f"add {sorted(folders - declared)} to [tool.setuptools] packages"


def test_parse_converts_conllu_into_records_and_the_cache(example_conllu, tmp_path):
    out, cache = tmp_path / "records.jsonl", tmp_path / "cache"
    args = ["parse", "--input", str(example_conllu), "--format", "conllu", "--lang", "en", "--output", str(out),
            "--cache-dir", str(cache), "--json"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    report = json.loads(first.output)
    assert (report["segments"], report["unique"], report["cache_hits"], report["parsed"]) == (3, 3, 0, 3)
    assert [r.sent_id for r in read_jsonl(out)] == ["en-1", "en-2", "de-1"]
    again = json.loads(CliRunner().invoke(main, args).output)
    assert (again["cache_hits"], again["parsed"]) == (3, 0)


def test_parse_text_with_the_control_parser_reports_duplicates(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("Dogs bark.\n\nCats sleep.\nDogs bark.\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    res = CliRunner().invoke(main, ["parse", "--input", str(src), "--format", "text", "--lang", "en", "--output",
                                    str(out), "--parser", "chain", "--cache-dir", str(tmp_path / "c")])
    assert res.exit_code == 0, res.output
    assert "segments:        3" in res.output and "unique segments: 2" in res.output
    assert "blank lines skipped: 1" in res.output
    assert [r.words for r in read_jsonl(out)] == [["Dogs", "bark", "."], ["Cats", "sleep", "."], ["Dogs", "bark", "."]]


def test_parse_stops_at_a_bad_sentence_and_names_it(tmp_path):
    bad = tmp_path / "bad.conllu"
    bad.write_text("1\tA\ta\tDET\t_\t_\t0\troot\t_\t_\n2\tcat\tcat\tNOUN\t_\t_\t2\tdep\t_\t_\n\n")
    res = CliRunner().invoke(main, ["parse", "--input", str(bad), "--format", "conllu", "--lang", "en",
                                    "--output", str(tmp_path / "o.jsonl"), "--cache-dir", str(tmp_path / "c")])
    assert res.exit_code == 1
    assert f"{bad}:2: word 2 is its own head" in res.output and "--skip-invalid" in res.output


def test_bench_syntax_prints_its_figures_and_the_padding_each_batch_order_costs(example_conllu, shared_data):
    vocab = shared_data / "mbert_vocab" / "vocab.txt"
    res = CliRunner().invoke(main, ["bench", "syntax", "--conllu", str(example_conllu), "--tokenizer", str(vocab),
                                    "--repeats", "1", "--json"])
    assert res.exit_code == 0, res.output
    fig = json.loads(res.output)
    assert fig["sentences"] == 3 and fig["bytes_per_piece"] == 7.0
    assert fig["tensor_sentences_per_s"] > 0 and fig["pipeline_segments_per_s"] > 0
    assert fig["tensor_sentences_per_s_shuffled"] > 0 and fig["tensor_sentences_per_s_length_bucketed"] > 0
    assert fig["tree_kernel"] == "c" and fig["tensor_sentences_per_s_torch_ops"] > 0
    # mBERT pieces with [CLS] and [SEP]: "The dog cha ##sed a cat ." 9, "A hearing ... today ." 11,
    # "Der Hund läuft zum Haus ." 8; one batch, padded to 11
    lengths = [9, 11, 8]
    padded = 3 * 11 ** 2 / sum(n * n for n in lengths)
    assert fig["pieces"] == sum(lengths)
    assert fig["padded_pairs_per_pair"] == pytest.approx({"treebank_order": padded, "shuffled": padded,
                                                          "length_bucketed": padded})


def test_status_lines_are_logged_on_stderr_and_v_q_set_how_many(tmp_path):
    import logging

    import click

    @click.command(name="probe-logging")
    def probe() -> None:
        logger = logging.getLogger("xsyn.probe")
        logger.info("status line")
        logger.warning("warning line")
        logger.error("error line")

    main.add_command(probe)
    try:
        lines = {flags: CliRunner().invoke(main, [*flags, "probe-logging"]).output.splitlines()
                 for flags in [(), ("-q",), ("-v",)]}
        clash = CliRunner().invoke(main, ["-v", "-q", "probe-logging"])
    finally:
        main.commands.pop("probe-logging")
    assert lines[()] == ["warning line", "error line"]
    assert lines[("-q",)] == ["error line"]
    assert lines[("-v",)] == ["status line", "warning line", "error line"]
    assert clash.exit_code == 2 and "-v and -q contradict each other" in clash.output


def every_command(group=main, path=()):
    import click

    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # a command the registry names (pretrain-gat) too
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from every_command(command, (*path, name))
        else:
            yield (*path, name), command


def test_every_option_of_every_command_has_help_and_help_names_only_the_product():
    import click

    missing = [f"{' '.join(path)} {param.opts[0]}" for path, command in every_command()
               for param in command.get_params(click.Context(command))  # with the variants' options
               if isinstance(param, click.Option) and not param.help and not param.hidden]
    assert missing == []
    for path, _ in every_command():
        text = CliRunner().invoke(main, [*path, "--help"]).output.lower()
        for outside in ("issue", "../shared", "shared/data", "lead engineer", "helper"):
            assert outside not in text, (path, outside)


def test_finetune_takes_the_variants_own_options_and_the_former_names_of_the_pretrained_ones():
    import shutil
    import subprocess

    command = [shutil.which("xsyn") or "xsyn", "finetune", "--help"]  # the installed console script
    shown = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120).stdout
    assert "--gat-delta INTEGER" in shown and "--gat-attention TEXT" in shown  # declared by gat (`options`)
    assert "--pretrained-syntax, --gat-init" in shown and "--freeze-pretrained, --freeze-gat" in shown
    bad = CliRunner().invoke(main, ["finetune", "--task", "synth", "--model", "tiny", "--gat-attention", "sparse"])
    assert bad.exit_code != 0 and "--gat-attention: 'sparse' is not one of dot, additive" in bad.output


@pytest.mark.parametrize(("old", "suggested"), [
    (["parse", "--out", "r.jsonl"], "--output"),
    (["parser-quality", "--limit=5"], None),
    (["pretrain-gat", "--delta", "1"], "--gat-delta"),
    (["bench", "eval", "--train-steps", "3"], "--max-steps"),
    (["finetune", "--train-examples", "3"], "--max-train-examples"),
])
def test_names_of_an_unreleased_rename_are_refused(old, suggested):
    res = CliRunner().invoke(main, old)  # 0.1.0 is the only release: no aliases
    option = next(arg.split("=")[0] for arg in old if arg.startswith("--"))
    assert res.exit_code == 2 and f"No such option '{option}'" in res.output
    assert suggested is None or f"'{suggested}'" in res.output  # click's own did-you-mean


def test_settings_lists_every_set_key_with_type_default_and_the_cards_value():
    from xsyn.models.variants import get_variant

    res = CliRunner().invoke(main, ["settings", "--task", "pawsx", "--variant", "gat", "--json"])
    table = json.loads(res.output)
    assert table["gat_delta"] == {"type": "an integer", "default": 4, "card": 4,  # pawsx's (the included table)
                                  "help": "GAT attention reaches tree distance <= delta"}  # from GatSettings
    assert table["epochs"] == {"type": "a number", "default": 3.0, "card": 5.0, "help": "passes over the training data"}
    assert table["train_lang"]["card"] == "en" and table["max_train_examples"]["type"] == "an integer"
    sla = json.loads(CliRunner().invoke(main, ["settings", "--variant", "sla", "--json"]).output)
    plain = json.loads(CliRunner().invoke(main, ["settings", "--variant", "none", "--json"]).output)
    assert "epochs" in plain and "sla_distance" in sla and "gat_delta" not in sla  # a variant's own model settings
    for variant, shown in (("gat", table), ("sla", sla)):
        assert set(shown) - set(plain) == set(get_variant(variant).setting_names())  # the baseline: none
    zh = json.loads(CliRunner().invoke(main, ["settings", "--task", "chnsenticorp", "--json"]).output)
    assert zh["train_lang"]["card"] == "zh"  # the card's first training language, not en
    from xsyn.utils.shipped import TASKS, shipped_folder

    as_file = CliRunner().invoke(main, ["settings", "--task", str(shipped_folder(TASKS) / "pawsx.toml"), "--json"])
    assert json.loads(as_file.output)["gat_delta"]["card"] == 4  # --task PATH.toml, includes resolved
    unknown = CliRunner().invoke(main, ["finetune", "--task", "pawz"])
    assert unknown.exit_code == 2 and "'pawz' is neither a task (cged, " in unknown.output
    assert "nor a card file (PATH.toml); did you mean 'pawsx'?" in unknown.output


@pytest.mark.parametrize("args", [["--help"], ["tasks"], ["parse", "--help"], ["report", "--help"],
                                  ["settings", "--help"], ["finetune", "--help"]])
def test_commands_that_need_no_model_import_neither_torch_nor_transformers_nor_numpy(args):
    code = ("import sys\nfrom xsyn.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('torch', 'transformers', 'datasets', 'numpy') if m in sys.modules]\n"
            "print('HEAVY', heavy, file=sys.stderr)")
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert "HEAVY []" in res.stderr, res.stderr[-2000:]


PARSE_OUTPUT = "--output"  # parse's records file


def test_parse_counts_a_line_of_invisible_characters_as_blank(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("Dogs bark.\n\u200b\u2060\ufeff\nCats sleep.\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["parse", "--input", str(src), "--format", "text", "--lang", "en", PARSE_OUTPUT,
                                    str(tmp_path / "out.jsonl"), "--parser", "chain", "--cache-dir",
                                    str(tmp_path / "c"), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert (report["segments"], report["blank_lines_skipped"]) == (2, 1)


def test_parse_names_an_output_folder_that_cannot_be_created_before_it_parses(example_conllu, tmp_path):
    blocker = tmp_path / "results"
    blocker.write_text("a file where the output folder should be")
    res = CliRunner().invoke(main, ["parse", "--input", str(example_conllu), "--format", "conllu", "--lang", "en",
                                    PARSE_OUTPUT, str(blocker / "en" / "records.jsonl"), "--cache-dir",
                                    str(tmp_path / "cache")])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.strip() == (f"Error: cannot create the folder {blocker / 'en'}: {blocker} is a file, not a "
                                  "folder; move that file away or choose another --output")
    assert not list((tmp_path / "cache").glob("*.jsonl"))  # refused before anything was parsed


@pytest.fixture
def ewt_dev(shared_data) -> Path:
    path = shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


def test_parse_on_a_full_disk_names_the_cache_shard_and_the_next_run_completes(ewt_dev, tmp_path, file_size_limit):
    """The real EWT dev treebank (2,001 sentences) into a cache whose device fills up part way."""
    from xsyn.syntax.cache import ParseCache

    out, cache = tmp_path / "records.jsonl", tmp_path / "cache"
    args = ["parse", "--input", str(ewt_dev), "--format", "conllu", "--lang", "en", PARSE_OUTPUT, str(out),
            "--cache-dir", str(cache), "--json"]
    with file_size_limit(300_000):  # the shard needs several megabytes
        res = CliRunner().invoke(main, args)
    shard = next((cache / "parses").glob("*.jsonl"))  # --cache-dir is xsyn's cache root, parses under it
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.strip() == f"Error: cannot write {shard}: file too large; free some space or choose another " \
                                 "--cache-dir"
    assert shard.stat().st_size == 0 and not out.exists()  # no partial line, no records file
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert (report["segments"], report["cache_hits"], report["parsed"]) == (2001, 0, report["unique"])
    after = ParseCache(cache / "parses")
    assert (len(after), after.corrupt) == (report["unique"], 0)


def test_parse_on_a_full_disk_names_the_records_file_and_leaves_no_part_of_it(ewt_dev, tmp_path, file_size_limit):
    cache = tmp_path / "cache"
    first = ["parse", "--input", str(ewt_dev), "--format", "conllu", "--lang", "en", "--cache-dir", str(cache)]
    assert CliRunner().invoke(main, [*first, PARSE_OUTPUT, str(tmp_path / "first.jsonl")]).exit_code == 0
    out = tmp_path / "records" / "en.jsonl"
    with file_size_limit(100_000):  # every sentence is now in the cache: only the records file is written
        res = CliRunner().invoke(main, [*first, PARSE_OUTPUT, str(out)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.strip() == f"Error: cannot write {out}: file too large; free some space or choose another " \
                                 "--output"
    assert list(out.parent.iterdir()) == []  # neither the file nor its temp file


def test_bench_syntax_builds_the_tree_tensors_on_the_device(example_conllu, shared_data, device):
    vocab = shared_data / "mbert_vocab" / "vocab.txt"
    res = CliRunner().invoke(main, ["bench", "syntax", "--conllu", str(example_conllu), "--tokenizer", str(vocab),
                                    "--repeats", "1", "--device", device, "--json"])
    assert res.exit_code == 0, res.output
    fig = json.loads(res.output)
    assert fig["device"].startswith("cuda") and fig["tree_kernel"] == "torch" and fig["device_name"] != "cpu"
    assert fig["sentences"] == 3 and fig["pieces"] == 28 and fig["tensor_sentences_per_s"] > 0


def test_bench_eval_prints_the_data_wait_measured_and_at_the_simulated_step(monkeypatch):
    import xsyn.benchmarks.harness as harness  # `bench eval` imports its runner when it runs

    seen = {}

    def fake_bench(*args, **kwargs):
        seen.update(kwargs)
        return {"generalized_pair_cost_ratio": 1.02, "data_wait_fraction": 0.004, "step_seconds_compute": 0.2,
                "collate_seconds_per_batch": 0.0002, "simulated_step_seconds": 0.005,
                "data_wait_fraction_inline": 0.035}

    monkeypatch.setattr(harness, "run_eval_bench", fake_bench)
    res = CliRunner().invoke(main, ["bench", "eval", "--step-ms", "5"])
    assert res.exit_code == 0, res.output
    assert seen == {"step_seconds": 0.005, "simulated_batches": 200, "workdir": None}
    assert "training time waiting for data:       0.40% (step 200.0 ms without it)" in res.output
    assert "at a 5.0 ms step, waiting for data: 3.50% (collating in the loop)" in res.output


def test_v_and_q_work_after_the_command_name_too():
    quiet = CliRunner().invoke(main, ["finetune", "--max-train-examples", "5", "-q", "--help"])
    assert quiet.exit_code == 0 and "--max-train-examples" in quiet.output  # as `xsyn -q finetune ...`
    both = CliRunner().invoke(main, ["finetune", "-v", "-q", "--help"])
    assert both.exit_code == 2 and "-v and -q contradict each other" in both.output


def _commands(group, path=()):
    """Every command of the click tree by its full name ('experiment run'), with its option names."""
    import click

    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # a command the registry names (pretrain-gat) too
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:  # get_params: with the options the variants declare
            yield " ".join((*path, name)), {opt for param in command.get_params(ctx) for opt in param.opts}


def test_each_shared_option_is_on_exactly_the_commands_the_readme_lists():
    """Issue 39, point 11: the README said --cache-dir was on every command; four refused it. Each row of the
    README's shared-options table that says `on: ...` is checked against the command line, both ways."""
    import re

    readme = (Path(__file__).resolve().parents[1] / "docs" / "getting-started.md").read_text(encoding="utf-8")
    table = readme.split("## Options shared by every command", 1)[1].split("\n\n", 3)[2]
    rows = [re.match(r"\| `(--[a-z-]+)[^|]*\|.*?\bon: ([a-z, -]+?)(?: \(|\s*\||$)", line) for line in
            table.splitlines()]
    listed = {row.group(1): {name.strip() for name in row.group(2).split(",")} for row in rows if row}
    assert {"--cache-dir", "--output-dir", "--output", "--parser", "--quiet"} <= set(listed)
    commands = dict(_commands(main))
    for option, names in listed.items():
        assert names <= set(commands), f"the README lists unknown commands for {option}: {names - set(commands)}"
        having = {name for name, options in commands.items() if option in options}
        assert having == names, f"{option}: on {sorted(having)}, the README says {sorted(names)}"
    assert {"--verbose", "--quiet"} <= {opt for param in main.params for opt in param.opts}  # -v / -q: every command


def test_demo_and_experiment_run_take_the_cache_dir_to_their_runs(monkeypatch, tmp_path):
    from xsyn.experiments import demo, launch

    taken = {}

    def fake_demo(output_dir, seed, progress, max_steps, overwrite, settings):
        taken["demo"] = settings
        raise SystemExit(0)

    def fake_run_local(spec, devices, cells, echo, progress, **options):
        taken["cells"] = {spec.config(cell).cache_dir for cell in cells}
        return []

    monkeypatch.setattr(demo, "run_demo", fake_demo)
    monkeypatch.setattr(launch, "run_local", fake_run_local)
    CliRunner().invoke(main, ["demo", "--output-dir", str(tmp_path / "d"), "--cache-dir", str(tmp_path / "c")])
    assert taken["demo"] == {"cache_dir": str(tmp_path / "c")}
    result = CliRunner().invoke(main, ["experiment", "run", "synth", "--output-dir", str(tmp_path / "runs"),
                                       "--cache-dir", str(tmp_path / "c"), "--cell", "synth/none-*"])
    assert result.exit_code == 0, result.output
    assert taken["cells"] == {str(tmp_path / "c")}
