"""`xsyn experiment prepare` and `run --offline`: inputs made ready once, cells that neither download nor parse,
a killed prepare that resumes, and a run refused before its first cell when an input is missing."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import fake_slurm

from xsyn.cli import main
from xsyn.experiments.experiment_file import Overrides, load_experiment
from xsyn.experiments.prepare import PREPARED_FILE, data_units, missing_for_offline, prepare
from xsyn.syntax.parse import NO_PARSE_ENV, ParsingNotAllowed, parse_segments
from xsyn.syntax.parsing import build_parser
from xsyn.syntax.parsing.languages import LanguageParsers
from xsyn.syntax.segment import Segment

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "a", "dog", *"0123456789",
         *(f"##{d}" for d in "0123456789")]


def _tsv(path: Path, n: int, first: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [f"{i}\tthe cat sat {first + i}\ta dog sat {first + i}\t{i % 2}" for i in range(n)]
    path.write_text("id\tsentence1\tsentence2\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")


def _grid(tmp_path: Path, parser: str, train_rows: int = 16, generalized: bool = False) -> Path:
    """PAWS-X rows from files (en train, dev and test; de test), none and gat, the tiny model."""
    data = tmp_path / "data" / "pawsx" / "x-final"
    _tsv(data / "en" / "train.tsv", train_rows, 0)
    _tsv(data / "en" / "dev_2k.tsv", 8, 1000)
    _tsv(data / "en" / "test_2k.tsv", 8, 2000)
    _tsv(data / "de" / "test_2k.tsv", 8, 3000)
    (tmp_path / "vocab.txt").write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    file = tmp_path / "grid.toml"
    file.write_text(f'tasks = ["pawsx"]\nvariants = ["none", "gat"]\nseeds = [1]\nmodels = ["tiny"]\n[settings]\n'
                    f'parser = "{parser}"\ntokenizer = "{tmp_path / "vocab.txt"}"\nmax_length = 32\nbatch_size = 8\n'
                    f'[evaluation]\nlangs = ["en", "de"]\ngeneralized = {str(generalized).lower()}\n', encoding="utf-8")
    return file


def _options(tmp_path: Path) -> list[str]:
    return ["--data-dir", str(tmp_path / "data"), "--output-dir", str(tmp_path / "runs"), "--cache-dir",
            str(tmp_path / "cache"), "--max-steps", "1"]


@pytest.mark.slow
def test_after_prepare_every_cell_runs_offline_and_parses_nothing(tmp_path, udpipe_model):
    """The installed command: prepare parses every segment with UDPipe, then every cell of the grid runs with
    the hub offline, finishes, and records 0 segments parsed."""
    grid = _grid(tmp_path, f"udpipe:{udpipe_model}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    prepared = subprocess.run(["xsyn", "experiment", "prepare", str(grid), *_options(tmp_path)], env=env,
                              capture_output=True, text=True, timeout=600)
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    # 16 train, 8 dev and 2 x 8 test pairs of two distinct sentences each: 80 segments, none repeated
    assert "ready (80 segments: 80 parsed, 0 from the parse cache" in prepared.stdout
    assert "every input is ready" in prepared.stdout
    ran = subprocess.run(["xsyn", "experiment", "run", str(grid), *_options(tmp_path), "--offline",
                          "--cells-per-gpu", "2"], env=env,
                         capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    experiment = load_experiment(grid, Overrides(runs_dir=str(tmp_path / "runs"), max_steps=1,
                                                 data_dir=str(tmp_path / "data")))
    assert len(experiment.cells) == 2
    for cell in experiment.cells:
        record = json.loads((experiment.cell_dir(cell) / "cell.json").read_text(encoding="utf-8"))
        assert record["segments_parsed"] == 0 and record["offline"] is True, cell.name
        assert (experiment.cell_dir(cell) / "eval-test" / "results.json").is_file()


def test_run_offline_with_a_missing_input_refuses_before_the_first_cell(tmp_path):
    grid = _grid(tmp_path, "chain")
    result = CliRunner().invoke(main, ["experiment", "run", str(grid), *_options(tmp_path), "--offline"])
    assert result.exit_code != 0
    assert "no cell was started" in result.output
    assert "pawsx · tiny · parser chain: its data, parses and features are not prepared (2 cells)" in result.output
    assert f"make them with: xsyn experiment prepare {grid} --output-dir {tmp_path / 'runs'}" in result.output
    assert not list((tmp_path / "runs").glob("pawsx/*"))  # no cell folder: nothing started


def test_a_killed_prepare_resumes_without_parsing_again_what_it_finished(tmp_path, monkeypatch):
    from xsyn.experiments import prepare as preparing  # where prepare finds the run's parser

    grid = _grid(tmp_path, "chain", train_rows=100)  # 200 training sentences: 4 chunks of 64 at most
    experiment = load_experiment(grid, Overrides(runs_dir=str(tmp_path / "runs"), data_dir=str(tmp_path / "data"),
                                                 settings={"cache_dir": str(tmp_path / "cache")}))
    parsed: list[list[str]] = []

    class Killed(KeyboardInterrupt):
        pass

    def counting_parser(config, kill_after=None):
        chain = build_parser("chain")

        class Counting:
            name, version, preparsed, data_trees, max_workers = chain.name, chain.version, False, False, 1

            def cache_identity(self):
                return chain.cache_identity()

            def parse_texts(self, texts, lang, **ids):
                if kill_after is not None and len(parsed) == kill_after:
                    raise Killed  # as a kill mid-parse: the chunks back so far are in the cache
                parsed.append(list(texts))
                return chain.parse_texts(texts, lang, **ids)

        return Counting()

    monkeypatch.setattr(preparing, "make_parsers", lambda config: LanguageParsers(
        config.parser, {}, lambda choice: counting_parser(config, kill_after=2)))
    with pytest.raises(Killed):
        prepare(experiment, workers=1, echo=lambda line: None)
    first = [text for chunk in parsed for text in chunk]
    assert len(first) == 128  # two chunks of 64 finished before the kill
    manifest = json.loads((tmp_path / "runs" / PREPARED_FILE).read_text(encoding="utf-8"))
    assert manifest["units"] == {}  # the unit was not finished: not claimed ready
    parsed.clear()
    monkeypatch.setattr(preparing, "make_parsers", lambda config: LanguageParsers(
        config.parser, {}, lambda choice: counting_parser(config)))
    manifest = prepare(experiment, workers=1, echo=lambda line: None)
    again = [text for chunk in parsed for text in chunk]
    assert not set(first) & set(again)  # nothing parsed twice
    # 100 train, 8 dev, 2 x 8 test pairs: 248 distinct sentences in all
    assert len(first) + len(again) == 248
    (unit,) = manifest["units"].values()
    assert unit["ready"] and (unit["parsed"], unit["cache_hits"]) == (120, 128)
    assert missing_for_offline(experiment) == []


def test_a_process_that_may_not_parse_says_so_and_parses_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(NO_PARSE_ENV, "1")
    segments = [Segment("en", text="the cat sat"), Segment("de", text="die Katze")]
    with pytest.raises(ParsingNotAllowed, match=r"2 segments \(de, en\) are not in the parse cache"):
        parse_segments(segments, build_parser("chain"))
    assert all(segment.record is None for segment in segments)


def test_cells_that_share_their_data_settings_share_one_unit(tmp_path):
    grid = _grid(tmp_path, "chain")
    experiment = load_experiment(grid, Overrides(runs_dir=str(tmp_path / "runs")))
    assert [len(unit.cells) for unit in data_units(experiment)] == [2]  # none and gat read the same data
    longer = load_experiment(grid, Overrides(runs_dir=str(tmp_path / "runs"), settings={"max_length": 64}))
    assert data_units(longer)[0].key != data_units(experiment)[0].key


def test_prepare_on_slurm_is_one_cpu_job(tmp_path, monkeypatch):
    import submitit

    for key, value in fake_slurm(tmp_path / "bin").items():
        monkeypatch.setenv(key, value)
    grid = _grid(tmp_path, "chain")
    result = CliRunner().invoke(main, ["experiment", "prepare", str(grid), *_options(tmp_path), "--launcher", "slurm",
                                       "--partition", "cpu", "--cpus", "6", "--time", "45", "--account", "nlp"])
    assert result.exit_code == 0, result.output
    assert "submitted `experiment prepare` as SLURM job 4242" in result.output
    script = (tmp_path / "bin" / "submitted.sh").read_text()
    for line in ("#SBATCH --partition=cpu", "#SBATCH --cpus-per-task=6", "#SBATCH --time=45", "#SBATCH --account=nlp"):
        assert line in script, script
    assert "gpus" not in script and "--array" not in script
    (pickle,) = (tmp_path / "runs" / "submitit").rglob("*_submitted.pkl")
    call = submitit.core.utils.DelayedSubmission.load(pickle)
    assert call.function.__name__ == "prepare_job" and call.args[2] == 6  # six parse workers, one per core


def test_a_run_after_a_complete_prepare_runs_offline_and_one_after_a_partial_says_what_it_lacks(tmp_path):
    from xsyn.experiments.prepare import decide_offline

    grid = _grid(tmp_path, "chain")
    experiment = load_experiment(grid, Overrides(runs_dir=str(tmp_path / "runs"), data_dir=str(tmp_path / "data"),
                                                 settings={"cache_dir": str(tmp_path / "cache")}))
    said: list[str] = []
    assert decide_offline(experiment, experiment.cells, False, said.append) is False and said == []  # no prepare
    prepare(experiment, workers=1, echo=lambda line: None)
    assert decide_offline(experiment, experiment.cells, False, said.append) is True
    assert said[-1].startswith("every input of the cells is prepared")
    longer = load_experiment(grid, Overrides(runs_dir=str(tmp_path / "runs"), data_dir=str(tmp_path / "data"),
                                             settings={"cache_dir": str(tmp_path / "cache"), "max_length": 64}))
    assert decide_offline(longer, longer.cells, False, said.append) is False
    assert "its data, parses and features are not prepared (2 cells)" in said[-1]


def test_a_generalized_grid_prepares_its_language_pairs_too(tmp_path):
    grid = _grid(tmp_path, "chain", generalized=True)
    experiment = load_experiment(grid, Overrides(runs_dir=str(tmp_path / "runs"), data_dir=str(tmp_path / "data"),
                                                 settings={"cache_dir": str(tmp_path / "cache")}))
    (unit,) = prepare(experiment, workers=1, echo=lambda line: None)["units"].values()
    assert unit["splits"] == ["train en", "validation en", "test en", "test de", "test en-de", "test de-en"]
    # the pairs join the languages' own examples: nothing of theirs is parsed again (16 + 8 + 8 + 8 pairs of 2)
    assert unit["parsed"] == 80 and unit["features"] == 16 + 8 + 4 * 8
