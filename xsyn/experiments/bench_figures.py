"""The figures an experiment's plan (`xsyn.experiments.plan`) rests on: a number with its basis (measured,
extrapolated, counted, given or unknown), and the benchmark files it is measured in (`xsyn bench model` step
times as `scripts/gpu_benchmarks.py` writes them, `xsyn bench parse` rates, `--encoders` embedding sizes).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import xsyn
from xsyn.experiments.experiment_file import ExperimentError
from xsyn.models.names import ENCODER_SHAPES
from xsyn.run.paths import absolute_paths
from xsyn.syntax.parsing.base import ParserChoiceError
from xsyn.syntax.parsing.registry import resolve_parser_choice
from xsyn.training.precision import resolve_precision

MEASURED, EXTRAPOLATED, COUNTED, GIVEN, UNKNOWN = "measured", "extrapolated", "counted", "given", "unknown"
PRECISION_DTYPES = {"no": "float32", "bf16": "bfloat16", "fp16": "float16"}  # mixed_precision -> bench dtype
BF16_DEVICES = ("h100", "h200")  # GPUs with native bfloat16: where `mixed_precision = "auto"` trains in bf16


def bench_dtype(mixed_precision: str, device: str) -> str:
    """The bench rows (dtype) of a cell's `mixed_precision` on `device` (a plan's device, or the name a benchmark
    gives it): `auto` as it resolves there (`xsyn.training.precision`)."""
    gpu = any(name in device.lower() for name in BF16_DEVICES)
    return PRECISION_DTYPES[resolve_precision(mixed_precision, bf16_gpu=gpu)]


@dataclass(frozen=True)
class Figure:
    """A number and what it rests on (`basis`: measured, extrapolated, counted, given or unknown; `why`)."""

    value: float | None
    basis: str
    why: str = ""

    def times(self, factor: float, basis: str | None = None, why: str = "") -> Figure:
        if self.value is None:
            return self
        return Figure(self.value * factor, basis or self.basis, why or self.why)


def _weakest(*figures: Figure) -> str:
    """Counts and given numbers are exact: with a measured figure the result is measured."""
    bases = {f.basis for f in figures}
    for basis in (UNKNOWN, EXTRAPOLATED, MEASURED, GIVEN):
        if basis in bases:
            return basis
    return COUNTED


def combine(value: float | None, *figures: Figure) -> Figure:
    """A figure computed from others: as firm as the weakest of them, unknown if any is."""
    if value is None or any(f.value is None for f in figures):
        return Figure(None, UNKNOWN, figure_whys(f for f in figures if f.value is None))
    return Figure(value, _weakest(*figures), figure_whys(figures))


def figure_sum(*figures: Figure) -> float | None:
    """The figures' values added up; None where one is unknown."""
    return None if any(f.value is None for f in figures) else sum(f.value for f in figures)


def figure_whys(figures) -> str:
    """What the figures rest on, each reason once, joined by "; "."""
    return "; ".join(dict.fromkeys(why for f in figures for why in f.why.split("; ") if why))


# --------------------------------------------------------------------------- benchmarks


@dataclass(frozen=True)
class StepBench:
    """One `xsyn bench model` run on a device: step seconds per precision and variant, at one shape."""

    source: Path
    device: str  # as the file names it, e.g. "NVIDIA H200"
    date: str
    rows: dict[str, dict[str, dict[str, Any]]]  # dtype -> variant -> row
    shape: dict[str, Any]  # the benchmarked model's config
    derived: dict[str, str] = field(default_factory=dict)  # dtype -> how its rows were derived (not measured here)
    caveats: tuple[str, ...] = ()  # what the file says of how its figures were taken (its `caveats`)


@dataclass(frozen=True)
class ParseBench:
    """One `xsyn bench parse` run: sentences/s per worker count for one parser."""

    source: Path
    parser: str
    rates: dict[int, float]  # workers -> sentences/s


@dataclass(frozen=True)
class Benchmarks:
    steps: list[StepBench] = field(default_factory=list)
    parses: list[ParseBench] = field(default_factory=list)
    sizes: dict[str, dict[str, Any]] = field(default_factory=dict)  # encoder -> parameters, optimizer bytes


def read_benchmarks(paths: Sequence[Path]) -> Benchmarks:
    """Every benchmark JSON in `paths` (files, or folders of `*.json`), by what it holds; others are ignored."""
    files = [f for p in paths for f in (sorted(Path(p).glob("*.json")) if Path(p).is_dir() else [Path(p)])]
    found = Benchmarks()
    for file in files:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise ExperimentError(f"{file}: not a benchmark JSON file ({err}); give another --bench") from None
        if not isinstance(data, dict):
            continue
        try:
            found.steps.extend(_step_bench(file, data))
            if isinstance(data.get("parse"), list) and data.get("parser"):
                rates = {int(row["workers"]): float(row["sentences_per_s"]) for row in data["parse"]}
                for number, (workers, rate) in enumerate(rates.items()):
                    _positive(file, f"parse[{number}].workers", workers)
                    _positive(file, f"parse[{number}].sentences_per_s", rate)
                found.parses.append(ParseBench(file, str(data["parser"]), rates))
        except ExperimentError:
            raise
        except (KeyError, TypeError, ValueError) as err:
            raise ExperimentError(f"{file}: a benchmark row lacks a number ({type(err).__name__}: {err}); rows "
                                  "need step_seconds and tokens_per_second (bench model), workers and "
                                  "sentences_per_s (bench parse): write it again with --json") from None
        for encoder, figures in data.items():  # `xsyn bench model --encoders ... --json`
            if isinstance(figures, dict) and isinstance(figures.get("embedding"), dict):
                found.sizes[encoder] = figures["embedding"]
    return found


def _step_bench(file: Path, data: dict[str, Any]) -> list[StepBench]:
    """The step times of `scripts/gpu_benchmarks.py` output at the shape it benchmarks: `steps.bench_model`, else
    the eager rows of `steps.compile_modes` (`scripts/gpu_compile.py`, in a file of that step alone)."""
    steps = data.get("steps") or {}
    environment = data.get("environment") or {}
    if data.get("quick") is not False:
        return []  # the --quick toy shape: nothing a real cell runs at
    rows, where = steps.get("bench_model") or {}, "steps.bench_model"
    if rows.get("status") == "ok":
        dtypes = {dtype: variants for dtype, variants in rows.items() if dtype in PRECISION_DTYPES.values()}
    else:
        dtypes, where = _eager_rows(steps.get("compile_modes") or {}), "steps.compile_modes"
    if not dtypes:
        return []  # a failed run, or a file of other benchmarks
    for dtype, variants in dtypes.items():
        for variant, row in variants.items():
            for key in ("step_seconds", "tokens_per_second"):
                if not isinstance(row.get(key), (int, float)):
                    raise KeyError(f"{dtype}/{variant}/{key}")
                _positive(file, f"{where}.{dtype}.{variant}.{key}", row[key])
    device = str(environment.get("device_name") or environment.get("device") or "")
    # the scripts benchmark mBERT's shape (bert-base layers, mBERT's vocabulary)
    caveats = tuple(str(caveat) for caveat in data.get("caveats") or () if isinstance(caveat, str))
    return [StepBench(file, device, str(environment.get("date", "")), dtypes, ENCODER_SHAPES["mbert"].config,
                      caveats=caveats)]


EAGER_ROW = "eager@32"  # scripts/gpu_compile.py: an uncompiled step (as a run trains by default), batch 32 x 128


def _eager_rows(compile_modes: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """`scripts/gpu_compile.py`'s eager steps per variant, in the dtype it times on a GPU (bfloat16 autocast)."""
    if compile_modes.get("status") != "ok":
        return {}
    found = {variant: row["configs"][EAGER_ROW] for variant, row in (compile_modes.get("rows") or {}).items()
             if isinstance(row, dict) and (row.get("configs") or {}).get(EAGER_ROW, {}).get("status") == "ok"}
    return {"bfloat16": found} if found else {}


def derive_precisions(bench: StepBench, others: Sequence[StepBench]) -> StepBench:
    """`bench` with each dtype it lacks derived from one it has, by the ratio (per variant: step time, peak memory)
    another device measured between the two: an H100 file of bfloat16 steps alone gets float32 as its bfloat16
    x float32/bfloat16 on the H200. `derived` says, per derived dtype, how (one sentence)."""
    rows, derived = {dtype: dict(variants) for dtype, variants in bench.rows.items()}, dict(bench.derived)
    for dtype in (d for d in PRECISION_DTYPES.values() if d not in rows):
        for have in list(bench.rows):
            other = next((o for o in others if o.device != bench.device and _shared(bench, o, have, dtype)), None)
            if other is None:
                continue
            rows[dtype], ratios = {}, []
            for variant in _shared(bench, other, have, dtype):
                rows[dtype][variant], ratio = _scaled_row(bench.rows[have][variant], other.rows[dtype][variant],
                                                          other.rows[have][variant])
                ratios.append(f"{variant} x{ratio:.2f}")
            derived[dtype] = (f"{bench.device} has no {dtype} step times in {bench.source.name}: its {have} steps x "
                              f"the {dtype}/{have} ratio measured on {other.device} ({other.source.name}): "
                              f"{', '.join(ratios)} (peak memory likewise)")
            break
    return replace(bench, rows=rows, derived=derived)


def _shared(bench: StepBench, other: StepBench, have: str, dtype: str) -> list[str]:
    """The variants `bench` measured in `have` and `other` in both `have` and `dtype`."""
    return sorted(set(bench.rows[have]) & set(other.rows.get(have, {})) & set(other.rows.get(dtype, {})))


def _scaled_row(row: dict[str, Any], slow: dict[str, Any], fast: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """`row` in the other dtype: its step time and peak memory x the ratio `slow`/`fast` another device measured."""
    ratio = slow["step_seconds"] / fast["step_seconds"]
    memory = [r.get("peak_bytes") for r in (row, slow, fast)]
    peak = memory[0] * memory[1] / memory[2] if all(isinstance(m, (int, float)) and m > 0 for m in memory) else None
    return {**row, "step_seconds": row["step_seconds"] * ratio, "tokens_per_second": row["tokens_per_second"] / ratio,
            "peak_bytes": peak}, ratio


def _positive(file: Path, row: str, value: float) -> None:
    """A benchmark figure the plan divides by or multiplies with: a positive, finite number."""
    if not (math.isfinite(value) and value > 0):
        raise ExperimentError(f"{file}: {row} is {value!r}, not a positive number (a failed or edited benchmark?); "
                              "measure it again, or leave the file out of --bench")


def default_bench_paths() -> list[Path]:
    """The repository's `benchmarks/` folder (beside the package in a source checkout), else ./benchmarks."""
    beside = Path(xsyn.__file__).resolve().parents[1] / "benchmarks"
    return [beside if beside.is_dir() else Path("benchmarks")]


def parse_rate(parser: str, parses: list[ParseBench], workers: int) -> Figure:
    """Sentences/s of `parser` with `workers` processes: the bench's rate for that parser (or one of its kind)
    at that worker count, or its per-worker rate at the most workers measured times `workers`."""
    def kind(choice: str) -> str | None:
        try:
            return resolve_parser_choice(choice).name
        except ParserChoiceError:
            return None

    def place(choice: str) -> str:  # a run's parser path is stored absolute; a bench file's as it was typed
        return absolute_paths({"parser": choice})["parser"]

    bench = next((p for p in parses if place(p.parser) == place(parser)), None) or next(
        (p for p in parses if kind(p.parser) == kind(parser)), None)
    if bench is None:
        return Figure(None, UNKNOWN, f"no `xsyn bench parse` figure for {parser} (measure one: xsyn bench parse "
                                     f"--parser {parser} --input FILE --json > benchmarks/parse-NAME.json)")
    basis, why = MEASURED, f"{bench.parser} at {workers} workers ({bench.source.name})"
    rate = bench.rates.get(workers)
    if rate is None:
        most = max(bench.rates)
        rate = bench.rates[most] / most * workers
        basis, why = EXTRAPOLATED, f"{bench.parser}: its per-worker rate at {most} workers x {workers} workers"
    if place(bench.parser) != place(parser):
        basis, why = EXTRAPOLATED, f"{why}, measured for {bench.parser}, not {parser}"
    return Figure(rate, basis, why)

