"""Fault injection on the tiny model: a damaged file of each kind xsyn reads (run and checkpoint files,
task cards, configs, experiment files, cell folders and locks, CoNLL-U, caches, inputs), full disks,
read-only folders, kill -9 at seeded random moments of finetune, evaluate, experiment run and parse, and a
second run while the first writes. Each case asserts the exit status, a one-line message naming the file
(no traceback), and that nothing written before is lost. Cases are parametrized rows; the few that start
processes are marked slow."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import stopped_before_results

from xsyn.cli import main
from xsyn.data.synth import write_vocab
from xsyn.training.folder import staged
from xsyn.training.log import untimed

QUICK = ["--task", "synth", "--model", "tiny", "--train-lang", "svo", "--parser", "chain", "--quiet",
         "--max-train-examples", "64", "--set", "max_eval_examples=32", "--batch-size", "16", "--max-length", "32",
         "--variant", "none", "--max-steps", "2"]
EVAL = ["--langs", "svo,sov", "--max-eval-examples", "24", "--quiet"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A finished tiny run (2 steps) with a saved state, and its evaluation."""
    root = tmp_path_factory.mktemp("faults")
    vocab = write_vocab(root / "vocab.txt")
    run = root / "run"
    res = CliRunner().invoke(main, ["finetune", *QUICK, "--tokenizer", str(vocab), "--cache-dir", str(root / "cache"),
                                    "--output-dir", str(run)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(run), *EVAL, "--output-dir", str(root / "eval")])
    assert res.exit_code == 0, res.output
    return run


@pytest.fixture
def run_copy(trained, tmp_path) -> Path:
    return Path(shutil.copytree(trained, tmp_path / "run", symlinks=True))


def one_line_error(res, *named: str) -> None:
    """Exit status 1, one `Error:` line that names each of `named`, and no traceback."""
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output and res.exception is None or isinstance(res.exception, SystemExit)
    lines = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, res.output
    for name in named:
        assert name in lines[0], res.output


# -- damaged files -------------------------------------------------------------------------------------

def empty(path: Path) -> None:
    path.write_bytes(b"")


def garbage(path: Path) -> None:
    path.write_bytes(bytes(random.Random(0).randrange(256) for _ in range(300)))


def cut_short(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 3)])


def a_folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def symlink_loop(path: Path) -> None:
    path.unlink()
    path.symlink_to(path.name)  # points at itself


def a_json_list(path: Path) -> None:
    path.write_text("[1, 2, 3]\n")


DAMAGES = {"empty": empty, "garbage": garbage, "cut short": cut_short, "a folder": a_folder,
           "a symlink loop": symlink_loop, "a JSON list": a_json_list}

# (file in the run folder, how it is damaged, the command's extra arguments)
EVALUATE_FILES = [
    ("best/config.json", damage) for damage in ("empty", "garbage", "cut short", "a folder", "a symlink loop",
                                                "a JSON list")
] + [
    ("best/model.safetensors", damage) for damage in ("empty", "garbage", "cut short", "a folder", "a symlink loop")
] + [
    ("best/xsyn_task.json", damage) for damage in ("empty", "garbage", "cut short", "a symlink loop", "a JSON list")
] + [
    ("best/tokenizer.json", damage) for damage in ("empty", "garbage", "cut short", "a JSON list")
] + [
    ("config.json", damage) for damage in ("empty", "garbage", "cut short", "a JSON list")
]


@pytest.mark.parametrize(("name", "damage"), EVALUATE_FILES)
def test_evaluate_names_a_damaged_checkpoint_file(run_copy, tmp_path, name, damage):
    target = run_copy / name
    DAMAGES[damage](target)
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(run_copy), *EVAL, "--output-dir",
                                    str(tmp_path / "eval")])
    one_line_error(res, Path(name).name)
    assert not (tmp_path / "eval" / "results.json").exists()


STATE_FILES = [("state/trainer_state.json", d) for d in ("empty", "garbage", "cut short", "a symlink loop",
                                                          "a JSON list")] + \
              [("state/model.safetensors", d) for d in ("empty", "garbage", "cut short")]


@pytest.mark.parametrize(("name", "damage"), STATE_FILES, ids=[f"{n}:{d}" for n, d in STATE_FILES])
def test_resume_names_a_damaged_state_file_and_keeps_the_run(run_copy, trained, name, damage):
    DAMAGES[damage](run_copy / name)
    before = (run_copy / "best" / "model.safetensors").read_bytes()
    vocab = trained.parent / "vocab.txt"
    res = CliRunner().invoke(main, ["finetune", *QUICK[:-2], "--max-steps", "3", "--tokenizer", str(vocab),
                                    "--cache-dir", str(trained.parent / "cache"), "--output-dir", str(run_copy),
                                    "--resume"])
    one_line_error(res, Path(name).name if name.endswith(".json") else "state")
    assert (run_copy / "best" / "model.safetensors").read_bytes() == before  # nothing written before is lost


CONFIG_FILES = [("empty.toml", b"", 2, "--task"), ("broken.toml", b"seed = [1,\n", 1, "broken.toml"),
                ("garbage.toml", bytes(range(256)), 1, "garbage.toml"),
                ("bom.json", b"\xef\xbb\xbf{\"task\": \"synth\"}", 1, "bom.json: not valid JSON (Unexpected UTF-8 BOM"),
                ("list.json", b"[1, 2]", 1, "list.json"),
                ("crlf.toml", b"task = \"no-such-task\"\r\nseed = 1\r\n", 1, "no-such-task")]


@pytest.mark.parametrize(("name", "content", "status", "named"), CONFIG_FILES, ids=[c[0] for c in CONFIG_FILES])
def test_a_damaged_config_file_is_named(tmp_path, name, content, status, named):
    config = tmp_path / name
    config.write_bytes(content)
    res = CliRunner().invoke(main, ["finetune", "--config", str(config), "--output-dir", str(tmp_path / "o")])
    assert res.exit_code == status, res.output
    assert named in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o").exists()


# -- predict inputs ------------------------------------------------------------------------------------

ROW = {"sentence1": "a b c", "sentence2": "a c b"}
PREDICT_INPUTS = [
    ("empty.jsonl", b"", 1, "no rows"),
    ("header-only.tsv", b"sentence1\tsentence2\n", 1, "no rows"),
    ("blank-lines.jsonl", b"\n\n  \n", 1, "no rows"),
    ("bad-json.jsonl", (json.dumps(ROW) + "\n") .encode() * 2 + b"{not json\n", 1, "line 3"),
    ("columns.tsv", b"sentence1\tsentence2\na\tb\nonly one\n", 1, "line 3"),
    ("latin1.tsv", b"sentence1\tsentence2\ncaf\xe9\tb\n", 1, "line 2, byte 4"),
    ("nul.jsonl", b"\x00\x00\x00", 1, "line 1"),
    ("crlf.tsv", b"sentence1\tsentence2\r\na b\ta c\r\n", 0, None),
    ("bom.jsonl", b"\xef\xbb\xbf" + json.dumps(ROW).encode() + b"\n", 0, None),
    ("huge-line.jsonl", json.dumps({"sentence1": "a " * 40_000, "sentence2": "b"}).encode() + b"\n", 0,  # > int16
     "1 rows are longer than max_length (32 word pieces) and were cut (39972 pieces dropped)"),
]


@pytest.mark.parametrize(("name", "content", "status", "named"), PREDICT_INPUTS)
def test_predict_names_the_line_of_a_bad_input_and_reads_the_odd_good_ones(trained, tmp_path, name, content, status,
                                                                           named):
    source = tmp_path / name
    source.write_bytes(content)
    out = tmp_path / "predictions.jsonl"
    res = CliRunner().invoke(main, ["predict", "--model-dir", str(trained), "--input", str(source), "--output",
                                    str(out), "--lang", "svo", "--quiet"])
    if status == 0:
        assert res.exit_code == 0, res.output
        assert len(out.read_text().splitlines()) == 1
        assert named is None or named in res.output  # a cut row is counted, never silently
    else:
        one_line_error(res, str(source), named)
        assert not out.exists()


def test_predict_input_that_is_a_symlink_loop_is_refused(trained, tmp_path):
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(loop.name)
    res = CliRunner().invoke(main, ["predict", "--model-dir", str(trained), "--input", str(loop), "--quiet"])
    assert res.exit_code == 2 and "loop.jsonl" in res.output and "Traceback" not in res.output


# -- caches ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("damage", ["garbage", "cut short", "empty"])
@pytest.mark.parametrize("cache", ["features", "parses"])
def test_a_damaged_cache_is_rebuilt_and_the_scores_do_not_change(trained, tmp_path, cache, damage):
    root = Path(shutil.copytree(trained.parent / "cache", tmp_path / "cache"))
    files = sorted(p for p in (root / cache).rglob("*") if p.is_file() and p.stat().st_size)
    assert files, f"no {cache} cache files to damage"
    for file in files:
        DAMAGES[damage](file)
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(trained), *EVAL, "--cache-dir", str(root),
                                    "--output-dir", str(tmp_path / "eval")])
    assert res.exit_code == 0, res.output
    expected = json.loads((trained.parent / "eval" / "results.json").read_text())["per_language"]
    assert json.loads((tmp_path / "eval" / "results.json").read_text())["per_language"] == expected


# -- full disk and unwritable folders -----------------------------------------------------------------

def test_evaluate_on_a_full_disk_names_the_file_and_keeps_earlier_results(trained, tmp_path, file_size_limit):
    out = Path(shutil.copytree(trained.parent / "eval", tmp_path / "eval"))
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with file_size_limit(64):
        res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(trained), *EVAL[:-1], "--langs", "svo,vso",
                                        "--quiet", "--output-dir", str(out)])
    one_line_error(res, "file too large; free some space or choose another")  # (the first write: a cache's)
    assert all(p.read_bytes() == data for p, data in before.items())  # nothing written before is lost


def test_a_full_disk_while_a_small_features_cache_file_closes_is_the_one_line_message(small_tokenizer, tmp_path,
                                                                                    file_size_limit):
    """Issue 39, point 3: where the disk fills as datasets closes a small cache file, its own ValueError ("I/O
    operation on closed file") came on top of the OSError. Every limit, the closing included, gives the message."""
    from test_data_features import PANX_TAGS, tagged

    from xsyn.data.cards import load_card
    from xsyn.data.features import prepare_features
    from xsyn.utils.io import OutputError

    card, examples = load_card("panx"), [tagged(["the", "dog"], ["O", "B-PER"], f"s{i}") for i in range(20)]
    closing = 0
    for limit in range(2_000, 12_001, 500):  # from the first write to a file that fits
        cache = tmp_path / str(limit)
        try:
            with file_size_limit(limit):
                prepare_features(card, examples, small_tokenizer, 16, tags=PANX_TAGS, cache_dir=cache)
        except OutputError as err:
            assert str(err).endswith(": file too large; free some space or choose another --cache-dir")
            assert os.listdir(cache) == []  # nothing half-written left behind
            closing += not isinstance(err.__cause__, OSError)  # the library's error on closing, named as the write
    assert closing > 0  # the sweep reached the closing write (without the fix: a ValueError)


def test_finetune_on_a_full_disk_names_the_checkpoint_and_can_continue(trained, tmp_path, file_size_limit):
    vocab = trained.parent / "vocab.txt"
    out = tmp_path / "run"
    args = ["finetune", *QUICK, "--tokenizer", str(vocab), "--cache-dir", str(trained.parent / "cache"),
            "--output-dir", str(out)]
    with file_size_limit(200_000):  # the config and logs fit; the checkpoint does not
        res = CliRunner().invoke(main, args)
    one_line_error(res, str(out))
    again = CliRunner().invoke(main, [*args, "--resume"])
    assert again.exit_code == 0, again.output
    assert (out / "train_results.json").is_file()


@pytest.mark.parametrize("command", ["finetune", "evaluate", "predict"])
def test_an_output_path_through_a_file_is_refused_naming_the_file(trained, tmp_path, command):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(ROW) + "\n")
    args = {"finetune": ["finetune", *QUICK, "--tokenizer", str(trained.parent / "vocab.txt"), "--output-dir",
                         str(blocker / "run")],
            "evaluate": ["evaluate", "--model-dir", str(trained), *EVAL, "--output-dir", str(blocker / "eval")],
            "predict": ["predict", "--model-dir", str(trained), "--input", str(source), "--lang", "svo", "--quiet",
                        "--output", str(blocker / "p.jsonl")]}[command]
    res = CliRunner().invoke(main, args)
    one_line_error(res, f"{blocker} is a file, not a folder")


# -- kill -9 ------------------------------------------------------------------------------------------

def _env() -> dict[str, str]:
    """This environment with the checkout first on PYTHONPATH (what was on it stays: a machine's extra packages)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                                      os.environ.get("PYTHONPATH")]))}


def xsyn_process(args: list[str]) -> subprocess.Popen:
    env = _env()
    return subprocess.Popen([sys.executable, "-m", "xsyn", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


@pytest.mark.slow
@pytest.mark.parametrize("saved", [1, 2])  # (seeds 1 and 2 drew the 1st language both: the 2nd was never tried)
def test_evaluate_killed_at_a_random_moment_then_rerun_gives_the_uninterrupted_results(trained, evaluated_whole,
                                                                                      tmp_path, saved):
    out = tmp_path / "eval"
    args = ["evaluate", "--model-dir", str(trained), *EVAL, "--generalized", "--output-dir", str(out)]
    process = xsyn_process(args)  # killed right after its 1st or 2nd saved language
    while process.poll() is None and len(list((staged(out) / "partial").glob("*.json"))) < saved:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, process.stderr.read()[-3000:]  # killed mid-run, not finished first
    assert not (out / "results.json").exists()
    assert subprocess.run([sys.executable, "-m", "xsyn", *args], capture_output=True,
                          env=_env()).returncode == 0
    got = json.loads((out / "results.json").read_text())
    assert got["per_language"] == evaluated_whole["per_language"] and got["pairs"] == evaluated_whole["pairs"]


@pytest.fixture(scope="module")
def evaluated_whole(trained, tmp_path_factory) -> dict:
    """The uninterrupted evaluation the killed ones are compared with (once for them all)."""
    out = tmp_path_factory.mktemp("whole")
    expected = CliRunner().invoke(main, ["evaluate", "--model-dir", str(trained), *EVAL, "--generalized",
                                         "--output-dir", str(out)])
    assert expected.exit_code == 0, expected.output
    return json.loads((out / "results.json").read_text())


def kill_when(process: subprocess.Popen, moment, what: str) -> None:
    """SIGKILL `process` as soon as `moment()` holds, and check that it died there, not after finishing."""
    deadline = time.monotonic() + 120
    while process.poll() is None and not moment() and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL, f"not killed {what}: " + process.stderr.read().decode()[-3000:]


def lines_holding(path: Path, needle: str) -> int:
    return path.read_text(errors="replace").count(needle) if path.is_file() else 0


def untimed_log(run: Path) -> list[dict]:
    """A run's step log, every line parsed (a line cut short fails), without the steps' seconds."""
    return [untimed(json.loads(line)) for line in (run / "train_log.jsonl").read_text().splitlines()]


def same_tensors(a: Path, b: Path) -> bool:
    from safetensors.torch import load_file

    wa, wb = load_file(a), load_file(b)
    return wa.keys() == wb.keys() and all(wa[k].equal(wb[k]) for k in wa)


LONGER = [*QUICK[:-2], "--max-steps", "12", "--eval-every", "4", "--set", "checkpointing_steps=2",
          "--set", "log_every=1"]


@pytest.fixture(scope="module")
def finetuned_whole(trained, tmp_path_factory) -> Path:
    """The uninterrupted 12-step run that every killed-and-resumed one must equal."""
    out = tmp_path_factory.mktemp("whole") / "run"
    res = CliRunner().invoke(main, ["finetune", *LONGER, "--tokenizer", str(trained.parent / "vocab.txt"),
                                    "--cache-dir", str(trained.parent / "cache"), "--output-dir", str(out)])
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 9])
def test_finetune_killed_at_a_random_step_then_resumed_gives_the_uninterrupted_run(trained, finetuned_whole,
                                                                                  tmp_path, seed):
    out = tmp_path / "run"
    args = ["finetune", *LONGER, "--tokenizer", str(trained.parent / "vocab.txt"), "--cache-dir",
            str(trained.parent / "cache"), "--output-dir", str(out)]
    logged = random.Random(seed).randint(1, 9)  # killed after the k-th logged training step
    kill_when(xsyn_process(args), lambda: lines_holding(out / "train_log.jsonl", '"loss"') >= logged,
              f"after step {logged}")
    assert not (out / "train_results.json").exists()
    res = CliRunner().invoke(main, [*args, "--resume"])
    assert res.exit_code == 0, res.output
    whole, resumed = (json.loads((d / "train_results.json").read_text()) for d in (finetuned_whole, out))
    assert (resumed["steps"], resumed["best_dev_score"], resumed["best_step"]) == \
           (whole["steps"], whole["best_dev_score"], whole["best_step"])
    # the log holds each step once, with the uninterrupted values: nothing logged before the kill was lost
    assert untimed_log(out) == untimed_log(finetuned_whole)
    for weights in ("state/model.safetensors", "best/model.safetensors"):
        assert same_tensors(out / weights, finetuned_whole / weights), weights


GRID = """tasks = ["synth"]
variants = ["none", "gat"]
seeds = [1]
models = ["tiny"]
baseline = "none"
[settings]
parser = "chain"
max_train_examples = 32
max_eval_examples = 16
log_every = 1
checkpointing_steps = 1
warmup_steps = 1
cache_dir = "{cache}"
[evaluation]
langs = ["svo", "sov"]
"""
CELLS = ("none-max_steps=4-seed1", "gat-max_steps=4-seed1")


def experiment_args(grid: Path, runs: Path) -> list[str]:
    return ["experiment", "run", str(grid), "--output-dir", str(runs), "--max-steps", "4"]


@pytest.fixture(scope="module")
def experiment_whole(trained, tmp_path_factory) -> tuple[Path, Path]:
    """A two-cell experiment file and its uninterrupted run's folder."""
    root = tmp_path_factory.mktemp("experiment")
    grid = root / "grid.toml"
    grid.write_text(GRID.format(cache=trained.parent / "cache"))
    res = CliRunner().invoke(main, experiment_args(grid, root / "whole"))
    assert res.exit_code == 0, res.output
    return grid, root / "whole" / "synth"


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 5])
def test_experiment_killed_at_a_random_moment_then_rerun_gives_the_uninterrupted_cells(experiment_whole, tmp_path,
                                                                                      seed):
    grid, whole = experiment_whole
    runs = tmp_path / "runs"
    first, second = (runs / "synth" / cell for cell in CELLS)
    moments = {"in the first cell's training": lambda: lines_holding(first / "train_log.jsonl", '"loss"') >= 2,
               "in the first cell's evaluation": lambda: (staged(first / "eval-test") / "partial").is_dir(),
               "between the cells": lambda: (first / "eval-test" / "results.json").is_file(),
               "in the second cell's training": lambda: lines_holding(second / "train_log.jsonl", '"loss"') >= 1}
    when = random.Random(seed).choice(sorted(moments))
    kill_when(xsyn_process(experiment_args(grid, runs)), moments[when], when)
    assert not (second / "eval-test" / "results.json").exists()
    finished = {p: p.stat().st_mtime_ns for p in runs.rglob("eval-test/results.json")}  # written before the kill
    res = CliRunner().invoke(main, experiment_args(grid, runs))
    assert res.exit_code == 0, res.output
    assert all(p.stat().st_mtime_ns == at for p, at in finished.items())  # a finished cell is not run again
    for cell in CELLS:
        got, expected = (json.loads((d / cell / "eval-test" / "results.json").read_text())
                         for d in (runs / "synth", whole))
        assert (got["per_language"], got["n_examples"]) == (expected["per_language"], expected["n_examples"]), cell
        assert untimed_log(runs / "synth" / cell) == untimed_log(whole / cell)
        assert same_tensors(runs / "synth" / cell / "best" / "model.safetensors", whole / cell / "best" /
                            "model.safetensors"), cell


def parse_args(source: Path, cache: Path, out: Path) -> list[str]:
    return ["parse", "--input", str(source), "--format", "text", "--lang", "en", "--parser", "chain", "--workers",
            "1", "--quiet", "--json", "--cache-dir", str(cache), "--output", str(out)]


@pytest.fixture(scope="module")
def parsed_whole(tmp_path_factory) -> tuple[Path, Path, int]:
    """15,000 distinct sentences, their uninterrupted parse's records, and the size its cache grew to."""
    root = tmp_path_factory.mktemp("parse")
    rng = random.Random(0)
    words = [f"w{i}" for i in range(400)]
    lines = {" ".join(rng.choices(words, k=rng.randint(3, 16))) for _ in range(15_000)}
    source = root / "in.txt"
    source.write_text("\n".join(sorted(lines)) + "\n")
    res = CliRunner().invoke(main, parse_args(source, root / "cache", root / "whole.jsonl"))
    assert res.exit_code == 0, res.output
    size = sum(p.stat().st_size for p in (root / "cache" / "parses").glob("*.jsonl"))
    return source, root / "whole.jsonl", size


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_parse_killed_at_a_random_cache_write_then_rerun_parses_only_the_rest(parsed_whole, tmp_path, seed):
    source, whole, size = parsed_whole
    cache, out = tmp_path / "cache", tmp_path / "records.jsonl"
    out.write_text("an earlier run's records\n")
    shards = cache / "parses"
    grown = random.Random(seed).uniform(0.1, 0.8) * size  # killed once the cache holds this much

    def cached() -> int:
        return sum(p.stat().st_size for p in shards.glob("*.jsonl")) if shards.is_dir() else 0

    kill_when(xsyn_process(parse_args(source, cache, out)), lambda: cached() >= grown, f"at {grown:.0f} bytes")
    assert out.read_text() == "an earlier run's records\n"  # the output is replaced whole, or not at all
    kept = sum(p.read_bytes().count(b"\n") for p in shards.glob("*.jsonl"))  # whole entries written before the kill
    assert 0 < kept < len(source.read_text().splitlines())
    res = CliRunner().invoke(main, parse_args(source, cache, out))
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert (report["cache_hits"], report["parsed"]) == (kept, report["segments"] - kept)  # none parsed twice
    assert report["corrupt_cache_entries"] <= 1  # at most the line cut short by the kill
    assert out.read_bytes() == whole.read_bytes()


# -- a damaged file of each kind, through the command a user gives it to --------------------------------

SYNTH_CARD = Path(__file__).resolve().parents[1] / "tasks" / "synth.toml"
SENTENCE = ("# text = The dog barks\n1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\tdog\tdog\tNOUN\t_\t_\t3\tnsubj\t_\t_\n"
            "3\tbarks\tbark\tVERB\t_\t_\t0\troot\t_\t_\n\n")
CARDS = {  # a card given as --task PATH.toml: (content, what the one error line names)
    "bad TOML": (b'name = "toy"\nkind = [\n', "not valid TOML"),
    "not UTF-8": (SYNTH_CARD.read_bytes().replace(b"Synthetic", b"Synth\xe9tic"), "line 11, byte 15: not UTF-8"),
    "wrong type": (SYNTH_CARD.read_bytes().replace(b"version = 1", b'version = "1.0"'),
                   "version: expected an integer, got '1.0'"),
    # in the gat section while the run is none's: named all the same, never silently carried
    "unknown key": (SYNTH_CARD.read_bytes() + b'\ncolour = "red"\n', "hyperparameters.gat.colour: neither a run"),
}


@pytest.mark.parametrize("case", sorted(CARDS))
def test_a_damaged_task_card_file_is_named_with_the_line_or_key(trained, tmp_path, case):
    content, named = CARDS[case]
    card = tmp_path / "card.toml"
    card.write_bytes(content)
    res = CliRunner().invoke(main, ["finetune", *QUICK, "--task", str(card), "--tokenizer",
                                    str(trained.parent / "vocab.txt"), "--output-dir", str(tmp_path / "o")])
    one_line_error(res, str(card), named)
    assert not (tmp_path / "o").exists()


def test_a_config_file_that_is_not_utf8_is_named_by_line(tmp_path):
    config = tmp_path / "run.toml"
    config.write_bytes(b'seed = 3\ntokenizer = "caf\xe9"\n')
    res = CliRunner().invoke(main, ["finetune", "--config", str(config), "--output-dir", str(tmp_path / "o")])
    one_line_error(res, str(config), "line 2, byte 17: not UTF-8 text (byte 0xe9)")
    assert not (tmp_path / "o").exists()


CONLLU = {  # (content, the line and the problem named)
    "columns": (SENTENCE.replace("\t_\t_\n2", "\n2", 1).encode(), ":2: expected 10 tab-separated columns, found 8"),
    "head": (SENTENCE.replace("\t2\tdet", "\t9\tdet").encode(), ":2: word 1 has head 9, outside the sentence"),
    "not UTF-8": (SENTENCE.replace("dog barks", "d\xf6g barks").encode("latin-1"), ":1: not UTF-8 text"),
}


@pytest.mark.parametrize("as_parser", [True, False], ids=["--parser conllu:PATH", "--format conllu"])
@pytest.mark.parametrize("case", sorted(CONLLU))
def test_a_damaged_conllu_file_is_named_by_line_and_the_output_kept(tmp_path, case, as_parser):
    content, named = CONLLU[case]
    source, text, out = tmp_path / "trees.conllu", tmp_path / "in.txt", tmp_path / "records.jsonl"
    source.write_bytes(content)
    text.write_text("The dog barks\n")
    out.write_text("an earlier run's records\n")
    given = ["--input", str(text), "--format", "text", "--parser", f"conllu:{source}"] if as_parser else \
        ["--input", str(source), "--format", "conllu"]
    res = CliRunner().invoke(main, ["parse", *given, "--lang", "en", "--quiet", "--cache-dir", str(tmp_path / "c"),
                                    "--output", str(out)])
    one_line_error(res, f"{source}{named}")
    assert out.read_text() == "an earlier run's records\n"


def test_a_damaged_treebank_under_the_gold_parser_is_named_by_line(trained, tmp_path):
    folder = tmp_path / "data" / "UD_English-EWT"
    folder.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (folder / f"en_ewt-ud-{split}.conllu").write_text(SENTENCE)
    train = folder / "en_ewt-ud-train.conllu"
    train.write_text(SENTENCE.replace("\t3\tnsubj", "\t7\tnsubj"))
    res = CliRunner().invoke(main, ["finetune", "--task", "udpos", "--model", "tiny", "--parser", "gold", "--quiet",
                                    "--data-dir", str(tmp_path / "data"), "--tokenizer",
                                    str(trained.parent / "vocab.txt"), "--cache-dir", str(tmp_path / "c"),
                                    "--max-steps", "1", "--output-dir", str(tmp_path / "o")])
    one_line_error(res, f"{train}:3: word 2 has head 7, outside the sentence's words 1..3", "--skip-bad-rows")
    assert not (tmp_path / "o" / "state").exists()


def test_a_text_input_to_parse_that_is_not_utf8_is_named_by_line(tmp_path):
    source, out = tmp_path / "in.txt", tmp_path / "records.jsonl"
    source.write_bytes(b"a good line\ncaf\xe9 au lait\n")
    res = CliRunner().invoke(main, ["parse", "--input", str(source), "--format", "text", "--lang", "en", "--parser",
                                    "chain", "--quiet", "--cache-dir", str(tmp_path / "c"), "--output", str(out)])
    one_line_error(res, f"{source}:2: not UTF-8 text")
    assert not out.exists()


def test_a_folder_among_the_parse_cache_shards_is_left_alone_and_the_entries_kept(tmp_path):
    source, cache = tmp_path / "in.txt", tmp_path / "cache"
    source.write_text("the dog barks\na cat sleeps\n")
    args = ["parse", "--input", str(source), "--format", "text", "--lang", "en", "--parser", "chain", "--quiet",
            "--json", "--cache-dir", str(cache), "--output", str(tmp_path / "records.jsonl")]
    assert CliRunner().invoke(main, args).exit_code == 0
    (cache / "parses" / "stray.jsonl").mkdir()  # a folder where a shard's name would be
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["cache_hits"] == 2  # nothing parsed before is lost


def test_a_folder_where_a_cells_lock_goes_is_named_never_deleted(experiment_whole, tmp_path):
    from xsyn.experiments.locks import LOCK_FILE

    grid, _ = experiment_whole
    blocker = tmp_path / "runs" / "synth" / CELLS[0] / LOCK_FILE
    blocker.mkdir(parents=True)
    (blocker / "notes.txt").write_text("mine")
    res = CliRunner().invoke(main, experiment_args(grid, tmp_path / "runs"))
    one_line_error(res, f"{blocker} is a folder where the cell's lock file goes", "move it away")
    assert (blocker / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("damage", ["garbage", "cut short", "empty", "a JSON list"])
def test_damaged_partial_results_of_an_interrupted_evaluation_are_evaluated_again(trained, tmp_path, damage,
                                                                                   monkeypatch):
    out = tmp_path / "eval"
    with monkeypatch.context() as patched:  # as an evaluation killed before its end leaves it
        stopped_before_results(patched)
        CliRunner().invoke(main, ["evaluate", "--model-dir", str(trained), *EVAL, "--cache-dir",
                                  str(trained.parent / "cache"), "--output-dir", str(out)])
    assert not (out / "results.json").exists()
    saved = sorted((staged(out) / "partial").glob("*.json"))  # (where an evaluation is written until it ends)
    assert saved
    for file in saved:
        DAMAGES[damage](file)
    res = CliRunner().invoke(main, ["evaluate", "--model-dir", str(trained), *EVAL, "--cache-dir",
                                    str(trained.parent / "cache"), "--output-dir", str(out)])
    assert res.exit_code == 0, res.output
    expected = json.loads((trained.parent / "eval" / "results.json").read_text())["per_language"]
    assert json.loads((out / "results.json").read_text())["per_language"] == expected


def test_report_over_a_results_file_that_is_not_text_names_it(trained, tmp_path):
    run = Path(shutil.copytree(trained, tmp_path / "runs" / "run", symlinks=True))
    shutil.copytree(trained.parent / "eval", run / "eval")
    DAMAGES["garbage"](run / "eval" / "results.json")
    res = CliRunner().invoke(main, ["report", str(tmp_path / "runs"), "--output-dir", str(tmp_path / "report")])
    one_line_error(res, f"{run / 'eval' / 'results.json'}: not valid JSON", "re-run the evaluation")


@pytest.fixture(scope="module")
def one_cell(trained, tmp_path_factory) -> tuple[Path, Path]:
    """A finished one-cell experiment (its file, and its cell's folder)."""
    root = tmp_path_factory.mktemp("one-cell")
    grid = root / "grid.toml"
    grid.write_text(GRID.format(cache=trained.parent / "cache").replace('["none", "gat"]', '["none"]'))
    res = CliRunner().invoke(main, experiment_args(grid, root / "runs"))
    assert res.exit_code == 0, res.output
    return grid, root / "runs" / "synth" / CELLS[0]


CELL_FILES = [("eval-test/results.json", "garbage", "to do"), ("eval-test/results.json", "a JSON list", "to do"),
              ("config.json", "garbage", "done"), ("config.json", "a JSON list", "done")]


@pytest.mark.parametrize(("name", "damage", "state"), CELL_FILES, ids=[f"{n}:{d}" for n, d, _ in CELL_FILES])
def test_a_damaged_file_in_a_cell_folder_is_status_not_a_traceback_and_a_rerun_mends_it(one_cell, name, damage,
                                                                                       state):
    """What xsyn wrote into a cell (cut short by a kill, or a disk that failed): `status` and `report` still
    work, a damaged result counts as not evaluated, and the next `run` evaluates the cell again."""
    grid, cell = one_cell
    runs, file = cell.parent.parent, cell / name
    kept = file.read_bytes()
    scores = json.loads((cell / "eval-test" / "results.json").read_text())["per_language"]
    try:
        DAMAGES[damage](file)
        status = CliRunner().invoke(main, ["experiment", "status", str(grid), "--output-dir", str(runs),
                                           "--max-steps", "4"])
        assert status.exit_code == 0 and "Traceback" not in status.output, status.output
        assert re.search(fr"{re.escape(CELLS[0])}\s+{state}", status.output), status.output
        report = CliRunner().invoke(main, ["experiment", "report", str(grid), "--output-dir", str(runs),
                                           "--max-steps", "4", "--resamples", "10"])
        assert report.exit_code == 0, report.output
        rerun = CliRunner().invoke(main, experiment_args(grid, runs))
        assert rerun.exit_code == 0, rerun.output
        assert json.loads((cell / "eval-test" / "results.json").read_text())["per_language"] == scores
    finally:
        file.write_bytes(kept)


EXPERIMENT_FILES = {  # an experiment file: (content, what the one error line names)
    "bad TOML": (b'tasks = ["synth"]\ntitle = \n', "not valid TOML (Invalid value (at line 2, column 9))"),
    "not UTF-8": (b'title = "Caf\xe9"\ntasks = ["synth"]\n', "line 1, byte 13: not UTF-8 text (byte 0xe9)"),
    "empty": (b"", "tasks: missing"),
    "wrong type": (b'tasks = "synth"\n', "tasks: expected a list of strings, got 'synth'"),
    "unknown key": (b'tasks = ["synth"]\nvariant = ["gat"]\n', "variant: unknown key; did you mean 'variants'?"),
}


@pytest.mark.parametrize("command", ["run", "status"])
@pytest.mark.parametrize("case", sorted(EXPERIMENT_FILES))
def test_a_damaged_experiment_file_is_named_with_the_line_or_key(tmp_path, case, command):
    content, named = EXPERIMENT_FILES[case]
    grid = tmp_path / "grid.toml"
    grid.write_bytes(content)
    res = CliRunner().invoke(main, ["experiment", command, str(grid), "--output-dir", str(tmp_path / "runs")])
    one_line_error(res, f"{grid}: {named}")
    assert not (tmp_path / "runs").exists()


# -- read-only folders: a new folder inside one, or an existing folder that cannot be written ---------------

def read_only_case(case: str, trained: Path, frozen: Path, tmp_path: Path) -> tuple[list[str], str]:
    """The command of `case` writing into (or below) `frozen`, and the option its error must name."""
    vocab, cache, text = str(trained.parent / "vocab.txt"), str(trained.parent / "cache"), tmp_path / "in.txt"
    text.write_text("the dog barks\n")
    parse = ["parse", "--input", str(text), "--format", "text", "--lang", "en", "--parser", "chain", "--quiet"]
    return {
        "evaluate --output-dir": (["evaluate", "--model-dir", str(trained), *EVAL, "--cache-dir", cache,
                                   "--output-dir", str(frozen / "eval")], "--output-dir"),
        "evaluate --cache-dir": (["evaluate", "--model-dir", str(trained), *EVAL, "--cache-dir", str(frozen / "cache"),
                                  "--output-dir", str(tmp_path / "eval")], "--cache-dir"),
        "finetune --cache-dir": (["finetune", *QUICK, "--tokenizer", vocab, "--cache-dir", str(frozen / "cache"),
                                  "--output-dir", str(tmp_path / "run")], "--cache-dir"),
        "parse --output": ([*parse, "--cache-dir", str(tmp_path / "c"), "--output", str(frozen / "r.jsonl")],
                           "--output"),
        "parse --cache-dir": ([*parse, "--cache-dir", str(frozen / "c"), "--output", str(tmp_path / "r.jsonl")],
                              "--cache-dir"),
        "experiment run --output-dir": (["experiment", "run", "synth", "--output-dir", str(frozen / "runs"),
                                         "--max-steps", "1"], "--output-dir"),
    }[case]


READ_ONLY = ["evaluate --output-dir", "evaluate --cache-dir", "finetune --cache-dir", "parse --output",
             "parse --cache-dir", "experiment run --output-dir"]


@pytest.mark.parametrize("case", READ_ONLY)
def test_a_read_only_folder_is_named_with_the_option_before_any_work(trained, tmp_path, immutable, case):
    frozen = tmp_path / "read-only"
    frozen.mkdir()
    immutable(frozen)
    args, option = read_only_case(case, trained, frozen, tmp_path)
    res = CliRunner().invoke(main, args)
    one_line_error(res, str(frozen), "permission denied", f"choose a folder you can write to ({option})")


def test_a_run_folder_made_read_only_keeps_its_run_and_resumes_once_writable(trained, run_copy, immutable):
    """--resume into a run folder whose state/ cannot be replaced: named, the last complete state kept, and
    the same command continues once the folder is writable again."""
    args = ["finetune", *QUICK[:-2], "--max-steps", "3", "--tokenizer", str(trained.parent / "vocab.txt"),
            "--cache-dir", str(trained.parent / "cache"), "--output-dir", str(run_copy), "--resume"]
    before = {p.name: p.read_bytes() for p in (run_copy / "state").iterdir()}
    immutable(run_copy / "state")
    res = CliRunner().invoke(main, args)
    one_line_error(res, f"cannot write the training state to {run_copy / 'state.tmp'}",
                   f"the last complete state, {run_copy / 'state'}, is kept")
    assert {p.name: p.read_bytes() for p in (run_copy / "state").iterdir()} == before
    subprocess.run(["chattr", "-i", str(run_copy / "state")], capture_output=True)
    (run_copy / "state").chmod(0o755)
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0, again.output
    assert json.loads((run_copy / "train_results.json").read_text())["steps"] == 3


# -- a second run while the first is writing --------------------------------------------------------------

def wait_for(path: Path, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while not path.is_file() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.is_file(), process.stderr.read().decode()[-3000:]


@pytest.mark.slow
def test_a_second_finetune_into_a_folder_being_written_is_refused_whatever_its_option(trained, tmp_path):
    out = tmp_path / "run"
    args = ["finetune", *QUICK[:-2], "--tokenizer", str(trained.parent / "vocab.txt"), "--cache-dir",
            str(trained.parent / "cache"), "--output-dir", str(out)]
    first = xsyn_process([*args, "--max-steps", "5000"])
    try:
        wait_for(out / "train_log.jsonl", first)
        for option in ([], ["--resume"], ["--overwrite-output-dir"]):
            logged = (out / "train_log.jsonl").stat().st_size
            res = CliRunner().invoke(main, [*args, "--max-steps", "2", *option])
            one_line_error(res, f"{out} is being written by pid {first.pid}", "wait for it to finish (or stop it)")
            # nothing of the first run deleted (--overwrite-output-dir once cleared the folder before asking)
            assert (out / "config.json").is_file() and (out / "train_log.jsonl").stat().st_size >= logged
        assert first.poll() is None  # the first run goes on
    finally:
        first.kill()
        first.wait()


@pytest.mark.slow
def test_a_second_experiment_run_leaves_the_held_cell_to_its_owner_says_so_and_exits_0(experiment_whole, tmp_path):
    grid, _ = experiment_whole
    runs = tmp_path / "runs"
    args = ["experiment", "run", str(grid), "--output-dir", str(runs), "--max-steps", "5000", "--cell", "*/none-*"]
    first = xsyn_process(args)
    try:
        cell = runs / "synth" / "none-max_steps=5000-seed1"
        wait_for(cell / "train_log.jsonl", first)
        res = CliRunner().invoke(main, args)  # held by a live owner: not a failure (issue 39, point 7)
        assert res.exit_code == 0 and "Traceback" not in res.output, res.output
        assert f"held by another process, not run here (locked by pid {first.pid}" in res.output
        assert "1 of 1 cells are being run by other processes" in res.output
        status = CliRunner().invoke(main, ["experiment", "status", str(grid), "--output-dir", str(runs),
                                           "--max-steps", "5000"])
        assert re.search(fr"none-max_steps=5000-seed1\s+running\s+locked by pid {first.pid}", status.output)
        res = CliRunner().invoke(main, ["finetune", *QUICK[:-2], "--tokenizer", str(runs / "synth-vocab.txt"),
                                        "--output-dir", str(cell), "--resume"])
        one_line_error(res, f"{cell} is being written by pid {first.pid}")
        assert first.poll() is None
    finally:
        first.kill()
        first.wait()


@pytest.mark.parametrize("command", ["predict", "report"])
def test_a_full_disk_under_predict_or_report_names_the_file_and_keeps_the_earlier_output(trained, tmp_path,
                                                                                      file_size_limit, command):
    source, earlier = tmp_path / "in.jsonl", tmp_path / "out" / "earlier.txt"
    source.write_text(json.dumps(ROW) + "\n")
    earlier.parent.mkdir()
    earlier.write_text("an earlier run's output\n")
    runs = tmp_path / "runs"
    shutil.copytree(trained.parent / "eval", Path(shutil.copytree(trained, runs / "run", symlinks=True)) / "eval")
    args = {"predict": ["predict", "--model-dir", str(trained), "--input", str(source), "--lang", "svo", "--quiet",
                        "--cache-dir", str(trained.parent / "cache"), "--output", str(earlier)],
            "report": ["report", str(runs), "--resamples", "10", "--output-dir", str(earlier.parent)]}[command]
    with file_size_limit(100):
        res = CliRunner().invoke(main, args)
    one_line_error(res, "cannot write ", "file too large; free some space or choose another --")  # (the first write's)
    assert earlier.read_text() == "an earlier run's output\n"


CAUGHT_AS_ITS_OWN = '''
import os
import signal

import click
from click.testing import CliRunner


@click.command()
def command():
    try:
        os.kill(os.getpid(), signal.SIGINT)  # the user's Ctrl-C, while the command runs in-process
    except KeyboardInterrupt:
        click.echo("interrupted: Continue with ...", err=True)  # as finetune takes it
        raise SystemExit(130)


def test_first():
    assert CliRunner().invoke(command).exit_code == 130


def test_second():
    print("SECOND TEST RAN")
'''


def test_the_first_ctrl_c_stops_the_suite_even_when_an_in_process_command_takes_it(tmp_path):
    """A first Ctrl-C in a test that runs an xsyn command in-process was taken by the command (exit 130) and the
    suite went on; a second one was needed."""
    (tmp_path / "test_interrupted.py").write_text(CAUGHT_AS_ITS_OWN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "ctrl_c", "-p", "no:cacheprovider", "-q", "-s",
                             "--rootdir", str(tmp_path), str(tmp_path / "test_interrupted.py")],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "interrupted (Ctrl-C) during test_interrupted.py::test_first" in result.stdout + result.stderr
    assert "SECOND TEST RAN" not in result.stdout
