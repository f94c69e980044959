"""Reading the run directories that `xsyn evaluate` and `xsyn pretrain-gat` write."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xsyn.run.settings import BOOKKEEPING_FIELDS, MODEL_SETTINGS, current_names
from xsyn.training.folder import PROBE_FILE, RESULTS_FILE, RunFolder
from xsyn.utils.errors import XsynError

_REQUIRED = ("task", "variant", "model", "seed", "metric", "split", "per_language")
_TEXT = ("task", "variant", "model", "metric", "split")
_OPTIONAL_OBJECTS = ("pairs", "config", "metric_options", "n_examples", "dropped")

Key = tuple[str, ...]  # (lang,) or (row, col)

# Not a system's settings: what names the experiment and system already, the seed, and bookkeeping.
_NOT_SETTINGS = {"task", "variant", "model", "seed", MODEL_SETTINGS, *BOOKKEEPING_FIELDS}


class ReportError(XsynError, ValueError):
    """Run directories that cannot be reported as given; the message says what to change."""


# --------------------------------------------------------------------------- reading run directories


@dataclass(frozen=True)
class Run:
    """One evaluated run directory."""

    path: Path
    results: dict

    @property
    def variant(self) -> str:
        return self.results["variant"]

    @property
    def model(self) -> str:
        return self.results["model"]

    @property
    def seed(self) -> Any:
        return self.results["seed"]

    @property
    def experiment(self) -> tuple[str, str, str]:
        return (self.results["task"], self.results["split"], self.results["metric"])

    @property
    def system(self) -> tuple[str, str]:
        return (self.results["variant"], self.results["model"])

    def curves_candidates(self) -> list[Path]:
        """Where the run's training curves may be: its run folder as evaluation recorded it (absolute since
        results.json stores it so; a relative one from an older evaluation is read from here), then the folder
        that holds this evaluation (`<run>/eval-<split>/`: a run folder moved or reported from elsewhere)."""
        recorded = self.results.get("run_dir")
        folders = [Path(recorded)] if recorded else []
        return list(dict.fromkeys(RunFolder(folder).curves for folder in [*folders, self.path.parent]))

    def settings(self) -> dict[str, Any]:
        """The run's settings that make it this system and not another: its config, model settings
        flattened, without bookkeeping (seed, folders, caches,
        logging) that cannot change a result.
        A pre-trained GAT counts by whether one was loaded, not by its folder (seeds may each have one)."""
        config = current_names(dict(self.results.get("config") or {}))
        flat = {key: value for key, value in config.items() if key not in _NOT_SETTINGS}
        flat.update(config.get(MODEL_SETTINGS) or {})
        if flat.get("pretrained_syntax") is not None:
            flat["pretrained_syntax"] = "pre-trained"
        return flat

    @property
    def source_lang(self) -> str:
        return str((self.results.get("config") or {}).get("train_lang", "en"))

    def score(self, key: Key) -> float | None:
        if len(key) == 1:
            return self.results["per_language"].get(key[0])
        return (self.results.get("pairs") or {}).get(key[0], {}).get(key[1])

    def metric_options(self, key: Key) -> dict:
        options = dict(self.results.get("metric_options") or {})
        if self.results["metric"] == "mlqa":
            options.setdefault("lang", key[0])
        return options

    def per_example_file(self, key: Key) -> Path:
        return self.path / "per_example" / f"{self.results['split']}-{'-'.join(key)}.jsonl"


@dataclass(frozen=True)
class ProbeRun:
    path: Path
    metrics: dict[str, dict[str, float]]  # lang -> probe metric -> value


def read_run(path: Path) -> Run:
    file = path / RESULTS_FILE
    results = _read_json(file)
    missing = [key for key in _REQUIRED if key not in results]
    if missing:
        raise ReportError(f"{file} lacks {', '.join(missing)}; it was not written by `xsyn evaluate` "
                          "(see the README for the results.json schema)")
    for name in _TEXT:
        if not isinstance(results[name], str) or not results[name]:
            raise ReportError(f"{file}: {name} must be a non-empty string, got {results[name]!r}; "
                              "re-run its evaluation or correct the field")
    seed = results["seed"]
    if isinstance(seed, bool) or not isinstance(seed, (int, str)):
        raise ReportError(f"{file}: seed must be an integer or a string, got {seed!r}")
    if not isinstance(results["per_language"], dict):
        raise ReportError(f"{file}: per_language must be a JSON object {{language: score}}, "
                          f"got {results['per_language']!r}")
    if not results["per_language"]:
        raise ReportError(f"{file}: per_language is empty; a run needs the score of at least one language "
                          "(re-run its evaluation)")
    for name in _OPTIONAL_OBJECTS:
        if results.get(name) is not None and not isinstance(results[name], dict):
            raise ReportError(f"{file}: {name} must be a JSON object, got {results[name]!r}")
    for row, cols in (results.get("pairs") or {}).items():
        if not isinstance(cols, dict):
            raise ReportError(f"{file}: pairs must be {{row language: {{column language: score}}}}, but "
                              f"pairs[{row!r}] is {cols!r}")
    scores = dict(results["per_language"])
    scores.update({f"{row}-{col}": value for row, cols in (results.get("pairs") or {}).items()
                   for col, value in cols.items()})
    for key, value in scores.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ReportError(f"{file}: the score of {key} is {value!r}, not a number; re-run its evaluation")
    return Run(path, results)


def read_probe_run(path: Path) -> ProbeRun:
    file = path / PROBE_FILE
    metrics = _read_json(file)
    for lang, values in metrics.items():
        if not isinstance(values, dict):
            raise ReportError(f"{file}: language {lang!r} holds {values!r}, not a mapping of probe metrics")
    return ProbeRun(path, metrics)


def _read_json(file: Path) -> dict:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{file} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ReportError(f"{file}: not valid JSON ({err}); re-run the evaluation that writes it") from None
    if not isinstance(data, dict):
        raise ReportError(f"{file}: expected a JSON object")
    return data


def find_runs(paths: Iterable[Path]) -> tuple[list[Run], list[ProbeRun]]:
    """Run directories as given, or every run below a folder that is not one itself."""
    runs: list[Run] = []
    probes: list[ProbeRun] = []
    for path in paths:
        found = _run_directories(Path(path))
        if not found:
            raise ReportError(f"no {RESULTS_FILE} or {PROBE_FILE} in or below {path}: pass run directories "
                              "written by `xsyn evaluate` (an unfinished evaluation has none yet; "
                              "re-run it, it resumes)")
        for directory in found:
            if (directory / RESULTS_FILE).is_file():
                runs.append(read_run(directory))
            if (directory / PROBE_FILE).is_file():
                probes.append(read_probe_run(directory))
    return runs, probes


def _run_directories(path: Path) -> list[Path]:
    if (path / RESULTS_FILE).is_file() or (path / PROBE_FILE).is_file():
        return [path]
    files = sorted({*path.rglob(RESULTS_FILE), *path.rglob(PROBE_FILE)})
    return sorted({file.parent for file in files})


def read_per_example(run: Run, key: Key) -> tuple[list[str], list, list]:
    """Ids, predictions and references of one language or pair of a run."""
    file = run.per_example_file(key)
    ids, predictions, references = [], [], []
    seen: set[str] = set()
    with file.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                example_id, prediction, reference = str(row["id"]), row["prediction"], row["reference"]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise ReportError(f"{file}:{number}: expected a JSON object with id, prediction and "
                                  f"reference ({err})") from None
            if example_id in seen:
                raise ReportError(f"{file}:{number}: example id {example_id!r} appears twice; ids must be "
                                  "unique to pair runs")
            seen.add(example_id)
            ids.append(example_id)
            predictions.append(prediction)
            references.append(reference)
    return ids, predictions, references
