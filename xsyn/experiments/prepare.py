"""`xsyn experiment prepare`: everything an experiment's cells read, made ready once, where the network is.

On many clusters the compute nodes are offline, and a GPU that waits for a parser is wasted. `prepare` runs
on a login node or as one CPU job (`--launcher slurm`). It first prints, per data unit, the readiness table of its
languages (`xsyn.run.readiness`: each one's data source, its parser and the parser's models, what is missing and
the fix), also written to `readiness.md` in the runs folder; then, for every cell of the grid:

- loads each model's tokenizer and configuration and downloads its weights into the hub cache (a local
  folder or the `tiny` preset needs none);
- reads each task's splits (the training data, its dev set, every evaluated split and language): local
  files in the data folder, else the hub, which keeps them in the datasets cache;
- parses every segment of them with the cells' parser into the parse cache (`--workers` processes; a
  parser that needs models checks or downloads them on the way: Stanza's download, UDPipe's files);
- builds their features (tokenised inputs) where they depend only on settings the cells share
  (tokenizer, max_length, doc_stride, ...): a seed or a variant does not change them.

Cells that share those settings share one *data unit*; each unit is prepared once. Every parse is appended
to the cache as it is done, so a killed `prepare` parses again only what was in flight: run it again.
`prepared.json` in the runs folder is the manifest: per unit, ready or not (with the error and the fix), the
segments parsed and found in the cache; per model, whether its files are in the hub cache. `experiment run
--offline` reads it to refuse, before any cell starts, a grid whose inputs are not all ready.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi, snapshot_download, try_to_load_from_cache

from xsyn.data.loading import default_data_dir
from xsyn.data.pairs import pair_axes
from xsyn.experiments.cells import ensure_synth_vocab
from xsyn.experiments.experiment_file import Cell, Experiment, ExperimentError, Overrides, load_experiment
from xsyn.models.names import MODEL_CONFIG, TINY
from xsyn.run.checks import check_model
from xsyn.run.readiness import readiness_markdown, readiness_text, run_needs
from xsyn.run.resources import readiness_of
from xsyn.run.task_data import dev_holdout, load_task_data, make_parsers
from xsyn.syntax.parsing.base import OTHER_PARSE_SOURCES, Readiness
from xsyn.syntax.parsing.registry import PARSER_OPTIONS
from xsyn.utils.errors import XsynError
from xsyn.utils.io import atomic_write_json, atomic_write_text, saved_json_object

PREPARED_FILE = "prepared.json"  # under runs_dir: the manifest of the last `experiment prepare`
READINESS_FILE = "readiness.md"  # under runs_dir: the last `prepare`'s readiness table of each data unit
# The settings a cell's data (examples, parses, features) depends on; a seed, a variant or a learning rate
# does not change them, so the cells that agree on these share one data unit.
DATA_SETTINGS = ("data_dir", "cache_dir", "parser", "parsers", "parser_model_dir", "parser_download", "tokenizer",
                 "max_length", "doc_stride", "max_query_length", "train_lang", "max_train_examples",
                 "max_eval_examples", "dev_fraction", "dev_seed", "skip_bad_rows")
HUB_WEIGHTS = ("model.safetensors", "pytorch_model.bin")  # either is a model's weights in the hub cache
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@dataclass
class DataUnit:
    """The data a group of cells reads alike: one task and model, one set of `DATA_SETTINGS`."""

    key: str
    task: str
    model: str
    parser: str
    cells: list[Cell] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.task} · {self.model} · parser {self.parser}"


def unit_key(experiment: Experiment, cell: Cell, config=None) -> str:
    """What identifies a cell's data: its task's card, its model and its `DATA_SETTINGS`."""
    config = config or experiment.config(cell)
    settings = {name: getattr(config, name, None) for name in DATA_SETTINGS}
    blob = json.dumps([experiment.cards[cell.task].stamp, cell.model, settings], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def data_units(experiment: Experiment, cells: list[Cell] | None = None) -> list[DataUnit]:
    """The data units of the cells (default: all), in the cells' order."""
    units: dict[str, DataUnit] = {}
    for cell in experiment.cells if cells is None else cells:
        config = experiment.config(cell)
        key = unit_key(experiment, cell, config)
        units.setdefault(key, DataUnit(key, cell.task, cell.model, config.parser)).cells.append(cell)
    return list(units.values())


def prepare_command(experiment: Experiment) -> str:
    """The `xsyn experiment prepare` command line that makes this experiment's inputs (its overrides kept)."""
    overrides = experiment.overrides
    parts = ["xsyn experiment prepare", experiment.source, f"--output-dir {overrides.runs_dir}"]
    parts += [f"--model {overrides.model}"] if overrides.model else []
    parts += [f"--data-dir {overrides.data_dir}"] if overrides.data_dir else []
    parts += [f"--set {key}={value}" for key, value in overrides.settings.items()]
    return " ".join(parts)


# --------------------------------------------------------------------------- preparing


def prepare(experiment: Experiment, workers: int | None = None, echo: Callable[[str], None] = print,
            progress: bool = False) -> dict[str, Any]:
    """Make every input of the experiment's cells ready (see the module); each unit and model as it is done
    is recorded in the manifest (`PREPARED_FILE`), which is returned. A unit that fails is recorded with its
    error and the others go on."""
    units = data_units(experiment)
    readiness, page = readiness_tables(experiment, units, echo)  # each language's data and parser, before any read
    require_parseable(experiment)  # a language no download makes parseable: named before anything is read
    atomic_write_text(experiment.runs_dir / READINESS_FILE, page)  # (a refused experiment writes nothing)
    manifest: dict[str, Any] = {"source": experiment.source, "command": prepare_command(experiment),
                                "started": time.strftime("%Y-%m-%d %H:%M:%S"), "models": {}, "units": {},
                                "readiness": readiness}
    for model in dict.fromkeys(unit.model for unit in units):
        manifest["models"][model] = _fetch_model(model, echo)
        _save(experiment, manifest)
    for number, unit in enumerate(units, start=1):
        echo(f"[{number}/{len(units)}] {unit.label}: {len(unit.cells)} cells")
        started = time.perf_counter()
        try:
            record = {"ready": True, **_prepare_unit(experiment, unit, workers, progress)}
        except XsynError as err:
            record = {"ready": False, "error": " ".join(str(err).split())}
        record.update(task=unit.task, model=unit.model, parser=unit.parser, cells=len(unit.cells),
                      seconds=round(time.perf_counter() - started, 1))
        manifest["units"][unit.key] = record
        _save(experiment, manifest)
        echo(f"[{number}/{len(units)}] {unit.label}: " + (
            f"ready ({record['segments']:,} segments: {record['parsed']:,} parsed, {record['cache_hits']:,} from the "
            f"parse cache; {record['features']:,} features)" if record["ready"] else f"NOT ready: {record['error']}"))
    manifest["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    _save(experiment, manifest)
    return manifest


def readiness_tables(experiment: Experiment, units: list[DataUnit], echo: Callable[[str], None] = print
                     ) -> tuple[dict[str, dict[str, Any]], str]:
    """The readiness table of each data unit (`xsyn.run.readiness`: what its cells read of each language, its data
    source and its parser), echoed: by unit key, as `prepared.json` records them, and as the markdown page of
    `READINESS_FILE`."""
    tables, pages = {}, [f"# Readiness of {experiment.source}", ""]
    for unit in units:
        config = experiment.config(unit.cells[0])
        evaluation = experiment.evaluation_of(unit.task)
        rows = readiness_of(config, run_needs(config.card, config.train_lang, evaluation.splits, evaluation.langs))
        title = (f"{unit.label}: what its {len(unit.cells)} cells read of each language, before anything is read "
                 f"(data folder {config.data_dir or default_data_dir(config.card)})")
        echo(readiness_text(title + ":", rows))
        pages += [readiness_markdown(title, rows), ""]
        tables[unit.key] = {"title": title, "rows": [row.as_dict() for row in rows]}
    return tables, "\n".join(pages)


def _save(experiment: Experiment, manifest: dict[str, Any]) -> None:
    atomic_write_json(experiment.runs_dir / PREPARED_FILE, manifest)


def _fetch_model(model: str, echo: Callable[[str], None]) -> dict[str, Any]:
    """A hub model's weights, configuration and tokenizer files into the hub cache (a local folder and the tiny
    preset need nothing)."""
    if model == TINY or Path(model).is_dir():
        return {"ready": True, "where": "built here" if model == TINY else str(Path(model).absolute())}
    if model_cached(model):
        return {"ready": True, "where": "hub cache"}
    echo(f"downloading {model} (weights, configuration, tokenizer) into the hub cache")
    try:
        files = HfApi().list_repo_files(model)
        skip = ["*.h5", "*.msgpack", "*.onnx", "*.ot", "*.tflite", "onnx/*", "coreml/*", "flax_model*", "tf_model*"]
        if any(name.endswith(".safetensors") for name in files):
            skip.append("*.bin")  # the same weights twice
        where = snapshot_download(model, ignore_patterns=skip)
    except Exception as err:  # the hub's errors: no network, an unknown name, a gated model
        return {"ready": False, "error": f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"}
    return {"ready": True, "where": where}


def model_cached(model: str) -> bool:
    """Whether a hub model's configuration and weights are in the hub cache (no network asked)."""
    def cached(name: str) -> bool:
        return isinstance(try_to_load_from_cache(model, name), str)

    return cached(MODEL_CONFIG) and any(cached(name) for name in HUB_WEIGHTS)  # the model's config, not a run's


def _prepare_unit(experiment: Experiment, unit: DataUnit, workers: int | None, progress: bool) -> dict[str, Any]:
    """Read, parse and featurise every split and language a unit's cells read, as the cells' own training and
    evaluation read them; the counts."""
    config = experiment.config(unit.cells[0])
    if workers:
        config = replace(config, parse_workers=workers)
    ensure_synth_vocab(experiment, config)
    card, evaluation = config.card, experiment.evaluation_of(unit.task)
    tokenizer, _ = check_model(config.model, config.tokenizer, config.tiny_family)
    options = {"parsers": make_parsers(config), "holdout": dev_holdout(card, config), "progress": progress}
    same = {segment: config.train_lang for segment in card.segments}
    train, names = load_task_data(card, config, tokenizer, "train", same, limit=config.max_train_examples, **options)
    loads = [train, load_task_data(card, config, tokenizer, "validation", same, names=names,
                                   limit=config.max_eval_examples, **options)[0]]
    for split in evaluation.splits:
        loaded: dict = {}  # language -> examples: the pairs are joined from them, as evaluation joins them
        for langs in _evaluated(card, evaluation):
            loads.append(load_task_data(card, config, tokenizer, split, langs, names=names,
                                        limit=config.max_eval_examples, loaded=loaded, **options)[0])
    parses = [data.report["parse"] for data in loads]
    return {"segments": sum(p["segments"] for p in parses), "parsed": sum(p["parsed"] for p in parses),
            "cache_hits": sum(p["cache_hits"] for p in parses), "features": sum(len(d.features) for d in loads),
            "splits": [f"{data.split} {'-'.join(dict.fromkeys(data.langs.values()))}" for data in loads]}


def _evaluated(card, evaluation) -> list[dict[str, str]]:
    """What a cell's evaluation reads of a split: each language, then (generalized) each pair of languages."""
    langs = [{segment: lang for segment in card.segments} for lang in evaluation.langs]
    if not evaluation.generalized or len(card.segments) < 2:
        return langs

    row, col = pair_axes(card)
    return langs + [{row: a, col: b} for a in evaluation.langs for b in evaluation.langs if a != b]


# --------------------------------------------------------------------------- is everything ready?


def require_parseable(experiment: Experiment) -> None:
    """Refuse, before any cell reads data, the languages a cell's parser has no models for anywhere (Stanza has
    none for sw, yo, my, ...): each named with the tasks that need it and what works instead. Read from the
    parsers' indexes, cheaply; models only not downloaded yet are each cell's own preflight's (an offline cell
    parses nothing)."""
    groups: dict[tuple, tuple[Any, dict[str, set[str]]]] = {}  # parser settings -> (a config, language -> tasks)
    for cell in experiment.cells:
        if cell.name in experiment.cell_needs:  # (its parser's model is not there: `require_inputs` says so)
            continue
        config = experiment.config(cell)
        key = (config.parser, *sorted(config.parsers.items()),
               *(getattr(config, option.setting) for option in PARSER_OPTIONS))
        _, tasks = groups.setdefault(key, (config, {}))
        for lang in (config.train_lang, *experiment.evaluation_of(cell.task).langs):
            tasks.setdefault(lang, set()).add(cell.task)
    refused = [f"  {s.lang} ({', '.join(sorted(tasks[s.lang]))}; parser {config.parser_of(s.lang)}): {s.detail}"
               for config, tasks in groups.values() for s in make_parsers(config).support(list(tasks))
               if s.readiness is Readiness.UNSUPPORTED]
    if refused:
        raise ExperimentError(f"{experiment.path}: {len(refused)} language(s) cannot be parsed:\n" + "\n".join(refused)
                              + f"\nNo download helps these languages: {OTHER_PARSE_SOURCES} (in this file: the "
                              "task's or [evaluation]'s langs; --set parser=... for every cell)")


def missing_for_offline(experiment: Experiment, cells: list[Cell] | None = None) -> list[str]:
    """What the cells (default: all) would have to download or parse: a parser's missing model files, a data
    unit `prepare` has not made ready, a model whose files are not in the hub cache. Empty: they can run offline."""
    cells = experiment.cells if cells is None else cells
    chosen = {cell.name for cell in cells}
    missing = [f"{message} ({len(names)} cells)" for message, names in experiment.missing_inputs.items()
               if chosen & set(names)]
    manifest = saved_json_object(experiment.runs_dir / PREPARED_FILE) or {}
    for unit in data_units(experiment, cells):
        record = (manifest.get("units") or {}).get(unit.key)
        if record is None:
            missing.append(f"{unit.label}: its data, parses and features are not prepared ({len(unit.cells)} cells)")
        elif not record.get("ready"):
            missing.append(f"{unit.label}: `prepare` failed on it: {record.get('error')}")
    for model in dict.fromkeys(cell.model for cell in cells):
        if model != TINY and not Path(model).is_dir() and not model_cached(model):
            missing.append(f"{model}: its weights and configuration are not in the hub cache")
    return missing


def manifest_lines(manifest: dict[str, Any]) -> list[str]:
    """The manifest as `prepare` ends with it: what is ready and what is not, with the fix for each."""
    units, models = manifest.get("units", {}), manifest.get("models", {})
    ready = [u for u in units.values() if u.get("ready")]
    lines = [f"prepared: {len(ready)} of {len(units)} data units ready; models: "
             + ", ".join(f"{m} {'ready' if r.get('ready') else 'NOT ready'}" for m, r in models.items())]
    for model, record in models.items():
        if not record.get("ready"):
            lines.append(f"- {model}: {record.get('error')}; fix: check the name and the network, or give a local "
                         "folder with --model, then prepare again")
    for record in units.values():
        if not record.get("ready"):
            lines.append(f"- {record['task']} · {record['model']} · parser {record['parser']}: {record['error']}; "
                         "fix what it names, then prepare again (finished parses are kept)")
    lines.append(f"manifest: {manifest.get('path', PREPARED_FILE)}" + (
        "; every input is ready: `xsyn experiment run --offline` runs the cells without network or parsing"
        if len(ready) == len(units) and all(r.get("ready") for r in models.values()) else ""))
    return lines


def prepare_job(source: str, overrides_json: str, workers: int | None) -> dict[str, Any]:
    """What a `prepare` cluster job runs (submitit imports it by name on the node)."""
    experiment = load_experiment(source, Overrides.from_json(overrides_json))
    manifest = prepare(experiment, workers)
    failed = [u for u in manifest["units"].values() if not u.get("ready")]
    failed += [m for m in manifest["models"].values() if not m.get("ready")]
    if failed:  # the cells' job array waits on this job with afterok: it must not start on missing inputs
        raise XsynError("\n".join(manifest_lines(manifest)))
    return manifest


class NotReady(XsynError):
    """`run --offline`: an input of the cells is not ready; nothing was started."""


def decide_offline(experiment: Experiment, cells: list[Cell], asked: bool, echo: Callable[[str], None] = print
                   ) -> bool:
    """Whether the cells run offline: asked (`--offline`: `NotReady`, naming each missing input and the
    `prepare` command, unless every input is ready), or after a `prepare` that made every input they read."""
    if not asked and not (experiment.runs_dir / PREPARED_FILE).is_file():
        return False
    missing = missing_for_offline(experiment, cells)
    if not missing:
        if not asked:
            echo(f"every input of the cells is prepared ({experiment.runs_dir / PREPARED_FILE}): they run offline")
        return True
    listed = "\n".join(f"- {line}" for line in missing)
    if asked:
        raise NotReady(f"not every input of the cells is ready to run offline, so no cell was started:\n{listed}\n"
                       f"make them with: {prepare_command(experiment)}")
    echo(f"{PREPARED_FILE} does not cover every input; the cells will download or parse these themselves:\n{listed}\n"
         f"(`{prepare_command(experiment)}` makes them)")
    return False
