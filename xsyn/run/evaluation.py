"""Zero-shot evaluation of a fine-tuned run: `xsyn evaluate`, per language and over language pairs.

Per language, the model runs on that language's split. With `generalized`, it also runs on every
ordered pair of languages: PAWS-X sentence1 x sentence2 and XNLI premise x hypothesis (parallel
sets joined by id), XQuAD question x context (joined by id), MLQA context x question (its own
cross-language files). Pairs whose languages disagree on the label are dropped and counted.

The default split is `test`, or `validation` where the card's test split has no labels. A task
whose benchmark ships no dev set evaluates `validation` on the run's own held-out training
examples (the ids its `data_report.json` recorded), in the training language.

An evaluation is written beside its output folder, in `<folder>.tmp/`, and swapped into place when it has
finished: a folder holds one whole evaluation, never a new one's results beside an earlier one's pairs.png or
per-example files (a rerun on fewer languages replaces the earlier evaluation, and says so). Each finished
language or pair is saved at once (`<folder>.tmp/partial/`), so an interrupted evaluation resumes without
recomputing it; a finished evaluation removes `partial/`. The output folder gets (schema in docs/finetune.md):

    results.json                 per_language, average, pairs, n_examples, dropped, scores, config
    per_language.csv             language, score, examples, dropped
    pairs.csv, pairs.png         the language-pair matrix (rows x columns, diagonal included)
    per_example/{split}-{key}.jsonl   id, prediction, reference (for `xsyn report`'s bootstrap)
    predictions/{task}/{split}-{key}.{tsv|json}   XTREME's layout, for the official scripts
"""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import json
import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelerate import Accelerator

from xsyn import provenance
from xsyn.data.cards import TaskCard, load_card
from xsyn.data.loading import DataNotFoundError
from xsyn.data.pairs import pair_axes
from xsyn.metrics import get_metric, primary_name
from xsyn.metrics.bootstrap import bootstrap_sd
from xsyn.models.factory import load_model
from xsyn.run.evaluation_text import DROP_REASONS
from xsyn.run.inference import decode_and_score, model_outputs, padding, prediction_figures
from xsyn.run.paths import relative_paths_of_saved_run
from xsyn.run.publish import write_model_card
from xsyn.run.resources import RunResources, evaluation_resources
from xsyn.run.scope import default_split
from xsyn.run.settings import ConfigError, RunConfig, read_config_file
from xsyn.run.task_data import LabelNames, load_task_data
from xsyn.syntax.parsing import Parser
from xsyn.syntax.parsing.languages import LanguageParsers
from xsyn.training.folder import RESULTS_FILE, TASK_FILE, RunFolder, eval_partial, eval_results, staged, task_file
from xsyn.training.precision import run_precision
from xsyn.training.processes import wait_for_everyone
from xsyn.utils.errors import InputError, XsynError, first_line
from xsyn.utils.io import (
    OutputError,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    existing_dir,
    replace_dir,
    saved_json_object,
)
from xsyn.utils.plots import heatmap_png
from xsyn.utils.progress import progress_bar
from xsyn.utils.schema import construct

log = logging.getLogger(__name__)


class RunNotFoundError(XsynError, FileNotFoundError):
    pass


@dataclass(frozen=True)
class Checkpoint:
    """A fine-tuned checkpoint: its folder, the run folder it belongs to, and what it was trained on
    (its `xsyn_task.json`: task, label and tag names in id order, source language)."""

    run_dir: Path
    path: Path
    task: str
    labels: list[str]
    tags: list[str]
    train_lang: str | None = None
    input_conventions: dict[str, Any] = field(default_factory=dict)  # those not xsyn's (xsyn.trees.conventions)


def locate_checkpoint(model_dir: str | Path) -> Checkpoint:
    """The checkpoint of a run folder (with best/) or a checkpoint folder itself, its task file checked."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise RunNotFoundError(f"--model-dir {model_dir} does not exist")
    if task_file(model_dir).is_file():
        run_dir, path = model_dir.parent, model_dir
    else:
        best = existing_dir(RunFolder(model_dir).best)
        if best is None or not task_file(best).is_file():
            raise RunNotFoundError(f"{model_dir} holds no checkpoint: expected best/ with {TASK_FILE} (written by "
                                   "xsyn finetune), or a checkpoint folder itself; is the run finished?")
        run_dir, path = model_dir, best
    info = read_task_info(path)
    return Checkpoint(run_dir, path, info["task"], info["labels"], info["tags"], info.get("train_lang"),
                      info.get("input_conventions") or {})


def read_task_info(checkpoint: Path) -> dict[str, Any]:
    """The checkpoint's task, label and tag names (`xsyn_task.json`), checked."""
    file = task_file(checkpoint)
    try:
        info = json.loads(file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RunNotFoundError(f"{file} is unreadable ({err}); the checkpoint is damaged: fine-tune again, or "
                               "point --model-dir at another checkpoint") from None
    wrong = [key for key, expected in (("task", str), ("labels", list), ("tags", list))
             if not isinstance(info.get(key) if isinstance(info, dict) else None, expected)]
    if isinstance(info, dict) and not isinstance(info.get("input_conventions", {}), dict):
        wrong.append("input_conventions")
    if wrong:
        raise RunNotFoundError(f"{file}: {', '.join(wrong)} missing or of the wrong type; it was not written by "
                               "xsyn finetune, or is damaged")
    return info


def run_config(checkpoint: Checkpoint, overrides: dict[str, Any] | None = None) -> RunConfig:
    """The settings a checkpoint was trained with (the run's config.json; for a checkpoint copied out
    of its run, the defaults for its task and how its inputs were built), with the given overrides that are
    not None."""
    config_file = RunFolder(checkpoint.run_dir).config
    values = read_config_file(config_file) if config_file.is_file() else \
        {"task": checkpoint.task, "train_lang": checkpoint.train_lang or "en", **checkpoint.input_conventions}
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    if (overrides or {}).get("parser") is not None and (overrides or {}).get("parsers") is None:
        values["parsers"] = {}  # a parser given now parses every language (the run's own per language, unless given)
    unreachable = relative_paths_of_saved_run({k: v for k, v in values.items() if k not in (overrides or {})
                                               or (overrides or {})[k] is None}, config_file)
    if unreachable:  # (a run saved before its paths were stored absolute, read from another folder)
        raise ConfigError("\n".join(unreachable))
    return construct(RunConfig, values, str(config_file), error=ConfigError)


def check_transferable(trained: TaskCard, target: TaskCard) -> None:
    """A model fine-tuned on `trained` can be scored on `target` when the task is the same kind (the same
    head and decoding) and, for label and tag kinds, every gold label of `target` is one the model
    predicts; otherwise an `InputError` says why not."""
    if trained.kind != target.kind:
        raise InputError(f"a model fine-tuned on {trained.name} ({trained.kind}) cannot be evaluated on "
                         f"{target.name} ({target.kind}): the tasks are of different kinds (another head and output)")
    for what in ("labels", "tags"):
        have, need = getattr(trained, what), getattr(target, what)
        if isinstance(have, tuple) and isinstance(need, tuple) and not set(need) <= set(have):
            unknown = ", ".join(sorted(set(need) - set(have)))
            raise InputError(f"a model fine-tuned on {trained.name} cannot be evaluated on {target.name}: its {what} "
                             f"{unknown} are not among the model's ({', '.join(have)})")


def _bootstrap_sd(card: TaskCard, result: dict[str, Any], key: str) -> float | None:
    """The sd of the primary score over resamples of the examples: the ± one run's number carries."""
    if not result["predictions"]:
        return None
    metric = get_metric(card.metric, **result["metric_options"])
    seed = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)  # per language: independent of the others
    return bootstrap_sd(metric, metric.count_table(result["predictions"], result["references"]), seed=seed)


def _nothing_predicted(card: TaskCard, result: dict[str, Any]) -> str | None:
    """What the predictions say where they all say nothing (no error, entity, answer; one label for all), in
    the metric's words: scores that reward correct silence (CGED's detection accuracy) then look good."""
    return get_metric(card.metric, **result["metric_options"]).nothing_predicted(result["predictions"])


def evaluate_run(checkpoint: Checkpoint | str | Path, split: str | None = None, langs: Sequence[str] | None = None,
                 generalized: bool = False, output_dir: str | Path | None = None,
                 overrides: dict[str, Any] | None = None, skip_missing: bool = False,
                 max_examples: int | None = None, progress: bool = True, task: str | None = None
                 ) -> dict[str, Any]:
    """Evaluate a checkpoint (as `locate_checkpoint` found it, or a run or checkpoint folder) zero-shot;
    `max_examples` scores at most N examples of each language or pair, label-balanced where each has a class label
    (`xsyn.data.example.label_balanced`; recorded in results.json).
    `task` evaluates on another task than the one trained on, where `check_transferable` allows it
    (a model fine-tuned for MLQA on XQuAD); its results go to `eval-<task>-<split>` by default."""
    if not isinstance(checkpoint, Checkpoint):
        checkpoint = locate_checkpoint(checkpoint)
    other_task = task is not None and task != checkpoint.task
    if other_task:
        check_transferable(load_card(checkpoint.task), load_card(task))
    config = run_config(checkpoint, {**(overrides or {}), "task": task if other_task else None})
    card = config.card
    split = split or default_split(card)
    named = f"{card.name}-{split}" if other_task else split  # another task's evaluation beside the run's own
    out = Path(output_dir) if output_dir else RunFolder(checkpoint.run_dir).eval_dir(named)
    resources = evaluation_resources(checkpoint.path, checkpoint.run_dir, config, split, langs, generalized, out,
                                     skip_missing)
    check_replaceable(out)
    langs = resources.languages
    evaluation = _Evaluation.start(checkpoint, resources, staged(out), max_examples, skip_missing, progress,
                                   steps=len(langs) * (len(langs) if generalized else 1))
    results, missing = evaluation.languages(langs)
    pairs = evaluation.pairs(langs, results) if generalized else {}
    evaluation.bar.close()
    summary = _summary(config, card, split, langs, results, pairs, missing, checkpoint.run_dir, checkpoint.path)
    summary["parsers"] = resources.parser_choices  # each language's parser (`parser`, or its own in `parsers`)
    summary["mixed_precision"] = evaluation.accelerator.mixed_precision  # as computed (`auto` resolved)
    if max_examples is not None:
        summary["max_eval_examples"] = max_examples
    if evaluation.main:
        _write_tables(evaluation.out, card, summary, pairs)
        atomic_write_json(eval_results(evaluation.out), summary)
        # finished: what resuming needed goes (its records' data reports are results.json's `data`); an
        # interrupted evaluation never gets here and keeps it
        shutil.rmtree(eval_partial(evaluation.out), ignore_errors=True)
        _swap_in(evaluation.out, out)
        write_model_card(checkpoint.path, checkpoint.run_dir, extra_results=[eval_results(out)])
    wait_for_everyone(evaluation.accelerator)
    return {**summary, "output_dir": str(out.resolve())}  # (where it was written: not a field of results.json)


# What an evaluation writes in its folder (`evaluate_run`): a folder that holds anything else is not replaced
EVALUATION_ENTRIES = (RESULTS_FILE, "per_language.csv", "pairs.csv", "pairs.png", "per_example", "predictions",
                      "partial")


def check_replaceable(out: Path) -> None:
    """An output folder the finished evaluation may replace as a whole: new, empty or an evaluation's (its own
    files only); one that holds other files is refused, naming them, before the model is loaded."""
    others = sorted(p.name for p in out.iterdir() if p.name not in EVALUATION_ENTRIES) if out.is_dir() else []
    if others:
        raise OutputError(errno.EEXIST, f"{out} holds files that are not an evaluation's ({', '.join(others[:5])}"
                          f"{', ...' if len(others) > 5 else ''}): the evaluation replaces its output folder as a "
                          "whole when it ends, so give --output-dir a new or empty folder, or an earlier "
                          "evaluation's")


def _swap_in(work: Path, out: Path) -> None:
    """The finished evaluation in `work` into place as `out`; an earlier evaluation there is replaced whole, said
    with what it covered where that differs from this one (its languages and pairs, its example cap)."""
    before = saved_json_object(eval_results(out)) if out.is_dir() else None
    replace_dir(work, out)
    if before is None:
        return
    after = saved_json_object(eval_results(out)) or {}
    scope = ("n_examples", "max_eval_examples")
    if any(before.get(key) != after.get(key) for key in scope):
        keys = sorted(before.get("n_examples") or {})
        log.warning(f"replaced the earlier evaluation in {out} ({len(keys)} languages and pairs: "
                    f"{', '.join(keys[:12])}{', ...' if len(keys) > 12 else ''}); its files are gone, this "
                    "evaluation's alone are there")
    else:
        log.info(f"replaced the earlier evaluation in {out} (the same languages and pairs)")


@dataclass
class _Evaluation:
    """One evaluation under way: the model and what scoring a language or a pair needs, and its progress bar."""

    checkpoint: Checkpoint
    config: RunConfig
    split: str
    out: Path
    holdout: Any
    max_examples: int | None
    skip_missing: bool
    progress: bool
    accelerator: Any
    tokenizer: Any
    model: Any
    parsers: LanguageParsers
    fingerprint: str
    bar: Any
    loaded: dict[str, list]  # language -> its parsed examples, reused by the pairs

    @classmethod
    def start(cls, checkpoint: Checkpoint, resources: RunResources, out: Path, max_examples: int | None,
              skip_missing: bool, progress: bool, steps: int) -> _Evaluation:
        """Load the model (under Accelerate), with the resources' tokenizer and parsers; the bar counts `steps`."""
        config, scope = resources.config, resources.evaluation
        accelerator = Accelerator(mixed_precision=run_precision(config.mixed_precision))
        model = accelerator.prepare(load_model(checkpoint.path))
        fingerprint = result_fingerprint(checkpoint.path, config, config.card, scope.split, resources.parsers,
                                         scope.langs, max_examples)
        return cls(checkpoint, config, scope.split, out, scope.holdout, max_examples, skip_missing, progress,
                   accelerator, resources.tokenizer, model, resources.parsers, fingerprint,
                   progress_bar(steps, 0, accelerator.is_main_process and progress,
                                f"{config.card.name} {scope.split}"), {})

    @property
    def main(self) -> bool:
        return self.accelerator.is_main_process

    def languages(self, langs: list[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """Each language's record, and the languages without data (with `skip_missing`)."""
        results: dict[str, dict[str, Any]] = {}
        missing: list[str] = []
        for lang in langs:
            record = self.one({name: lang for name in self.config.card.segments})
            self.bar.update(1)
            if record is None:
                missing.append(lang)
            else:
                results[lang] = record
        return results, missing

    def pairs(self, langs: list[str], results: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
        """The language-pair matrix of primary scores over the languages with data; each pair's record
        joins `results` (the diagonal is the language's own)."""
        row_seg, col_seg = pair_axes(self.config.card)
        present = [lang for lang in langs if lang in results]
        self.bar.set_total(len(langs) + len(present) * (len(present) - 1))  # no pairs of a language without data
        pairs: dict[str, dict[str, float]] = {}
        for row in present:
            for col in present:
                record = results[row] if row == col else self.one({row_seg: row, col_seg: col})
                self.bar.update(row != col)
                if record is None:
                    continue
                pairs.setdefault(row, {})[col] = record["primary"]
                results.setdefault(f"{row}-{col}", record)
                if row == col and self.main:  # the diagonal's per-example file, named as a pair
                    _copy_examples(self.out, self.split, row, f"{row}-{col}")
        return pairs

    def one(self, segment_langs: dict[str, str]) -> dict[str, Any] | None:
        """One language's or pair's record: kept from an interrupted evaluation of the same fingerprint, else
        scored and saved at once (`partial/`); None where it has no data and `skip_missing` is on."""
        card, split = self.config.card, self.split
        key = _key(segment_langs, card)
        self.bar.postfix["now"] = key  # what is being computed; counted done by the caller
        saved = eval_partial(self.out) / f"{split}-{key}.json"
        cached = _kept_result(saved, self.fingerprint)
        if cached is not None:
            # (an interrupted evaluation: `partial/` keeps each one scored until the evaluation finishes)
            log.info(f"{split} {key}: {cached['primary']:.2f} (kept from an earlier evaluation of this checkpoint, "
                     f"{saved.parent.name}/)")
            return cached
        started = time.perf_counter()
        data = self._data(segment_langs)
        if data is None:
            return None
        rows, batch_size = data.rows(), self.config.eval_batch_size
        outputs = model_outputs(self.model, rows, self.accelerator, batch_size, self.tokenizer.pad_token_id or 0,
                                **padding(self.config, self.accelerator.device.type))
        result = decode_and_score(card, data.examples, data.features, outputs, self.checkpoint.labels,
                                  self.checkpoint.tags, self.config.n_best, self.config.max_answer_length)
        record = {"fingerprint": self.fingerprint, "key": key, "langs": segment_langs, "primary": result["primary"],
                  "bootstrap_sd": _bootstrap_sd(card, result, key),
                  "predicted_nothing": _nothing_predicted(card, result),
                  "scores": result["scores"], "n_examples": len(data.examples),
                  "dropped_by_reason": (dropped := dropped_by_reason(data.report)), "dropped": sum(dropped.values()),
                  "truncated": data.report["features"]["truncated_inputs"],
                  "metric_options": result["metric_options"],
                  "decode": result["decode"], "data": data.report, "seconds": time.perf_counter() - started,
                  "batches": prediction_figures(rows, batch_size, self.accelerator.num_processes,
                                                **padding(self.config, self.accelerator.device.type))}
        if self.main:
            _write_examples(self.out, card, split, key, data.examples, result)
            atomic_write_json(saved, record)
            log.info(f"{split} {key}: {result['primary']:.2f} on {len(data.examples)} examples "
                     f"({record['seconds']:.1f}s)")
        return record

    def _data(self, segment_langs: dict[str, str]):
        """The language's or pair's examples and features (None: no data, and `skip_missing` is on)."""
        try:
            data, _ = load_task_data(self.config.card, self.config, self.tokenizer, self.split, segment_langs,
                                     names=LabelNames(labels=self.checkpoint.labels, tags=self.checkpoint.tags),
                                     parsers=self.parsers, distributed=self.accelerator, loaded=self.loaded,
                                     holdout=self.holdout, limit=self.max_examples, progress=self.progress,
                                     balanced=True)  # a capped test keeps every class (`label_balanced`)
        except DataNotFoundError as err:
            if self.skip_missing:
                return None
            raise DataNotFoundError(f"{err}\n(pass --langs to choose languages, or --skip-missing to "
                                    "evaluate those that have data)") from None
        return data


def _key(segment_langs: dict[str, str], card: TaskCard) -> str:
    langs = list(segment_langs.values())
    if len(set(langs)) == 1:
        return langs[0]
    row, col = pair_axes(card)
    return f"{segment_langs[row]}-{segment_langs[col]}"


def _kept_result(saved: Path, fingerprint: str) -> dict[str, Any] | None:
    """An earlier, interrupted evaluation's result for one language or pair, when it was of this evaluation. It
    is only a shortcut: a damaged one (a disk that failed, an edit) is evaluated again, and said so."""
    try:
        cached = json.loads(saved.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:  # (UnicodeDecodeError and JSONDecodeError are ValueErrors)
        log.warning(f"{saved}: damaged ({first_line(err)}); evaluated again")
        return None
    if not isinstance(cached, dict) or "primary" not in cached:
        log.warning(f"{saved}: damaged (not a result xsyn wrote); evaluated again")
        return None
    return cached if cached.get("fingerprint") == fingerprint else None


def result_fingerprint(checkpoint: Path, config: RunConfig, card: TaskCard, split: str, parsers: LanguageParsers,
                       langs: Sequence[str], max_examples: int | None) -> str:
    """What decides a language's result: the weights, the task card (version and content: an edited card's
    data sources, labels or metric), the data settings (each language's parser, its version and settings too: a
    changed CoNLL-U source or UDPipe model), the split, a cap on the examples."""
    weights = checkpoint / "model.safetensors"
    stamp = f"{weights.stat().st_size}-{weights.stat().st_mtime_ns}" if weights.is_file() else str(checkpoint)
    settings = {k: getattr(config, k) for k in ("max_length", "doc_stride", "max_query_length", "parser",
                                                 "data_dir", "n_best", "max_answer_length", "skip_bad_rows")}
    if max_examples is not None:  # (absent otherwise: earlier evaluations' partial results stay valid)
        settings["max_eval_examples"], settings["eval_cap"] = max_examples, "label-balanced"
    if config.parsers:  # each language's own (absent otherwise: earlier evaluations' partial results stay valid)
        settings["parsers"] = config.parsers
        parsing: Any = {lang: _parsing(parsers[lang]) for lang in langs}
    else:
        parsing = _parsing(parsers[config.train_lang])
    return hashlib.sha256(json.dumps([stamp, card.stamp, settings, split, parsing],
                                     sort_keys=True).encode()).hexdigest()[:16]


def _parsing(parser: Parser) -> list[Any]:
    return [parser.name, parser.version, parser.cache_identity()]


# Why an example of the sources is not scored: results.json's `dropped_by_reason` keys, and what each means
def dropped_by_reason(report: dict[str, Any]) -> dict[str, int]:
    """Examples of the sources that are not scored, per reason (only those that occur): for a language pair
    joined by id, ids with no counterpart in the other language and pairs whose labels disagree; skipped rows
    (train and dev only)."""
    load = report["load"]
    skipped = len(load.get("skipped", [])) + sum(len(x.get("skipped", [])) for x in load.get("loads", []))
    counts = dict(zip(DROP_REASONS, (sum(load.get("unmatched", {}).values()), load.get("label_mismatches", 0),
                                     skipped), strict=True))
    return {reason: n for reason, n in counts.items() if n}


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(_jsonable(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _write_examples(out: Path, card: TaskCard, split: str, key: str, examples, result: dict[str, Any]) -> None:
    lines = [json.dumps({"id": e.id, "prediction": _jsonable(p), "reference": _jsonable(r)}, ensure_ascii=False)
             for e, p, r in zip(examples, result["predictions"], result["references"])]
    atomic_write_text(out / "per_example" / f"{split}-{key}.jsonl", "".join(line + "\n" for line in lines))
    card.task_kind.write_predictions(out / "predictions" / card.name / f"{split}-{key}", examples,
                                     result["predictions"], card.metric)


def _copy_examples(out: Path, split: str, lang: str, key: str) -> None:
    source = out / "per_example" / f"{split}-{lang}.jsonl"
    if source.is_file():
        atomic_write_bytes(out / "per_example" / f"{split}-{key}.jsonl", source.read_bytes())


def _summary(config: RunConfig, card: TaskCard, split: str, langs: list[str], results: dict[str, Any],
             pairs: dict[str, dict[str, float]], missing: list[str], run_dir: Path, checkpoint: Path
             ) -> dict[str, Any]:
    per_language = {lang: results[lang]["primary"] for lang in langs if lang in results}
    summary = {
        "task": card.name, "card": card.stamp, "variant": config.variant, "model": config.model, "seed": config.seed,
        "metric": card.metric, "primary": primary_name(card.metric), "split": split,
        "per_language": per_language,
        "average": sum(per_language.values()) / len(per_language) if per_language else None,
        "n_examples": {k: r["n_examples"] for k, r in results.items()},
        "bootstrap_sd": {k: r.get("bootstrap_sd") for k, r in results.items()},
        # key -> what the model predicted there, where it predicted nothing (records kept from an older
        # evaluation hold True: their predictions were empty sets)
        "predicted_nothing": {k: r["predicted_nothing"] if isinstance(r["predicted_nothing"], str) else
                              "no span or error in any example" for k, r in sorted(results.items())
                              if r.get("predicted_nothing")},
        "dropped": {k: r["dropped"] for k, r in results.items()},
        # what the sources held (scored or not, before --max-eval-examples), the measure of `dropped`: a cap
        # scores the first N, while drops are counted over the whole source
        "n_read": {k: r["data"]["load"]["examples"] + r["dropped"] for k, r in results.items()},
        # examples longer than max_length and cut (classification; tagging and QA are windowed), where any was
        "truncated": {k: r["truncated"] for k, r in results.items() if r.get("truncated")},
        "dropped_by_reason": {k: r["dropped_by_reason"] for k, r in results.items() if r.get("dropped_by_reason")},
        # real and padded tokens and distinct (B, T) of the prediction batches (absent from older records)
        "batches": {k: r["batches"] for k, r in results.items() if r.get("batches")},
        "scores": {k: r["scores"] for k, r in results.items()},
        "data": {k: r["data"] for k, r in results.items()},  # per key: what loading, parsing and features did
        "seconds": {k: r["seconds"] for k, r in results.items()},  # per key: its evaluation's (when first scored)
        # MLQA's option (the context language) differs per language: it is kept per key, in `scores`' runs.
        "metric_options": {} if card.metric == "mlqa" else
        next((r["metric_options"] for r in results.values() if r["metric_options"]), {}),
        "missing_languages": missing,
        # absolute, so that `xsyn report` finds the run folder (its training curves) from any folder
        "run_dir": str(Path(run_dir).resolve()), "checkpoint": str(Path(checkpoint).resolve()),
        "config": config.to_dict(),
        # the parser the model was trained with, where --parser scores it on another's trees (gold vs predicted)
        "train_parser": (read_config_file(RunFolder(run_dir).config).get("parser")
                         if RunFolder(run_dir).config.is_file() else None),
        **provenance(),
    }
    if pairs:
        summary["pairs"] = pairs
        summary["pair_axes"] = list(pair_axes(card))
    return summary


def _write_tables(out: Path, card: TaskCard, summary: dict[str, Any], pairs: dict[str, dict[str, float]]) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["language", summary["primary"], "examples", "dropped"])
    for lang, value in summary["per_language"].items():
        writer.writerow([lang, f"{value:.2f}", summary["n_examples"][lang], summary["dropped"][lang]])
    if summary["average"] is not None:
        writer.writerow(["average", f"{summary['average']:.2f}", "", ""])
    atomic_write_text(out / "per_language.csv", buf.getvalue())
    if not pairs:
        return

    langs = list(pairs)
    row_seg, col_seg = summary["pair_axes"]
    matrix = [[pairs[r].get(c, float("nan")) for c in langs] for r in langs]
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow([f"{row_seg}\\{col_seg}", *langs])
    for r, row in zip(langs, matrix):
        writer.writerow([r, *(f"{v:.2f}" for v in row)])
    atomic_write_text(out / "pairs.csv", buf.getvalue())
    atomic_write_bytes(out / "pairs.png", heatmap_png(
        matrix, langs, langs, title=f"{card.title}: {summary['variant']} ({summary['primary']}, {summary['split']})",
        value_label=summary["primary"], row_label=f"{row_seg} language", col_label=f"{col_seg} language"))
