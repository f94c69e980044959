"""Raw text in, predictions out: `xsyn predict`, and `predict()` for notebooks.

    from xsyn.run.predict import predict
    predict("runs/pawsx/sla-seed1", [{"sentence1": "Der Hund bellt.", "sentence2": "Ein Hund bellt."}],
            lang="de", parser="stanza")
    # [{"line": 1, "lang": "de", "segment_langs": {"sentence1": "de", "sentence2": "de"},
    #   "label": "paraphrase", "probabilities": {"not paraphrase": ..., "paraphrase": ...}}]

An input row holds the task's segments by name (`sentence1`/`sentence2`, `premise`/`hypothesis`,
`question`/`context`; for tagging and intent-slot tasks `text`, or gold `tokens`: a list, or in TSV
a column of space-separated tokens), and
optionally `id`, `lang` (the row's language) and `<segment>_lang` (one segment's language, e.g. a
question in one language and its context in another). Rows come as dicts, a JSON Lines file or a
TSV file with a header. The text goes the way of evaluation: parsed through the parse cache,
aligned to wordpiece trees, windowed (tagging, QA), run in length-bucketed batches, and decoded
by `xsyn.data.decode` (the same windows, n-best answer search and first-piece tags).

What each kind of task returns besides `line` (and `id`, `lang`) is written by one function in the
"outputs per kind" section below. Tagged text is tokenised by the parser (`tokens="parser"`) or at
whitespace (`tokens="whitespace"`); entity and slot spans carry character offsets into `text`
(for `tokens` input, into the tokens joined by single spaces) and token offsets, end exclusive.
"""

from __future__ import annotations

import csv
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelerate import Accelerator

from xsyn.data.cards import TaskCard
from xsyn.data.decode import DecodeInput, DecodeReport, example_windows
from xsyn.data.example import Example
from xsyn.data.features import prepare_features
from xsyn.models.factory import load_model
from xsyn.models.tokenizers import load_tokenizer
from xsyn.run.evaluation import locate_checkpoint, run_config
from xsyn.run.inference import model_outputs, padding
from xsyn.run.settings import RunConfig
from xsyn.run.task_data import cache_root, feature_rows, make_parsers, parse_workers
from xsyn.syntax.cache import ParseCache
from xsyn.syntax.parse import parse_segments
from xsyn.syntax.parsing.base import ParserUnavailable
from xsyn.syntax.segment import Segment
from xsyn.training.precision import run_precision
from xsyn.trees.conventions import InputConventions
from xsyn.utils.errors import XsynError
from xsyn.utils.io import atomic_write_text, not_utf8_at
from xsyn.utils.progress import library_bars

log = logging.getLogger(__name__)
TOKENIZATIONS = ("parser", "whitespace")
MAX_LISTED = 5  # bad lines named in one error


class PredictInputError(XsynError, ValueError):
    """Input that cannot be predicted on; the message names the file and line(s) and the fix."""


@dataclass
class InputRow:
    line: int  # 1-based line in the input file (the row's position for in-memory rows)
    fields: dict[str, Any]


@dataclass
class _Prepared:
    """The examples of the valid rows, and what tagging needs to map tokens back to the text."""

    examples: list[Example]
    token_spans: list[list[tuple[int, int]]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)


# -- reading input ---------------------------------------------------------------------------------


def read_input_file(path: str | Path) -> list[InputRow]:
    """The rows of a JSON Lines file (`.jsonl`, `.json`, or a first line that opens an object) or of
    a TSV file with a header row (any other file). Blank lines are not rows."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise PredictInputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise PredictInputError(f"{path}: a folder, not an input file") from None
    try:
        text = data.decode("utf-8-sig")  # (a byte order mark, as some editors write one, is not text)
    except UnicodeDecodeError as err:
        raise PredictInputError(f"{path}: {not_utf8_at(data, err)}; save the file as UTF-8") from None
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if path.suffix in (".jsonl", ".json", ".ndjson") or first.startswith("{"):
        return _json_lines(path, text)
    return _tsv(path, text)


def _json_lines(path: Path, text: str) -> list[InputRow]:
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise PredictInputError(f"{path}: line {number}: not JSON ({err.msg}); write one JSON object per "
                                    "line") from None
        if not isinstance(value, dict):
            raise PredictInputError(f"{path}: line {number}: a JSON {type(value).__name__}, not an object with "
                                    "the task's segments")
        rows.append(InputRow(number, value))
    return rows


def _tsv(path: Path, text: str) -> list[InputRow]:
    reader = csv.reader(text.splitlines(), delimiter="\t")
    header = next(reader, None)
    if not header:
        raise PredictInputError(f"{path}: empty; a TSV input starts with a header row naming the columns")
    rows = []
    for values in reader:
        if not any(v.strip() for v in values):
            continue
        if len(values) != len(header):
            raise PredictInputError(f"{path}: line {reader.line_num}: {len(values)} columns, the header has "
                                    f"{len(header)} ({', '.join(header)}); separate columns by one tab")
        rows.append(InputRow(reader.line_num, dict(zip(header, values))))
    return rows


def as_rows(inputs: Iterable[Mapping[str, Any]] | str | Path) -> tuple[list[InputRow], str]:
    """Rows from a file path or from dicts (numbered from 1), and the name errors use for them."""
    if isinstance(inputs, (str, Path)):
        return read_input_file(inputs), str(inputs)
    rows = []
    for number, value in enumerate(inputs, 1):
        if not isinstance(value, Mapping):
            raise PredictInputError(f"input row {number}: a {type(value).__name__}, not a dict of the task's "
                                    "segments")
        rows.append(InputRow(number, dict(value)))
    return rows, "input"


def input_fields(card: TaskCard) -> tuple[str, ...]:
    """The fields a row of this task needs (tagging: `text`, or `tokens`; multiple choice: also `options`)."""
    if card.task_kind.tagged:
        return ("text",)
    return (*card.segments, *(("options",) if card.task_kind.choices else ()))


# -- rows -> examples ------------------------------------------------------------------------------


def _segment_value(row: InputRow, name: str, tagged: bool) -> tuple[str | list[str] | None, str | None]:
    """(value, problem) of one segment of a row."""
    if tagged and "text" not in row.fields and "tokens" in row.fields:
        tokens = row.fields["tokens"]
        if isinstance(tokens, str):  # a TSV column: tokens separated by spaces
            tokens = tokens.split()
        if not isinstance(tokens, list) or not all(isinstance(t, str) and t.strip() and not re.search(r"\s", t)
                                                   for t in tokens):
            return None, "'tokens' must be a list of non-empty strings without spaces"
        return (tokens, None) if tokens else (None, "'tokens' is empty")
    if name not in row.fields:
        return None, f"no {name!r}"
    value = row.fields[name]
    if not isinstance(value, str):
        return None, f"{name!r} is a {type(value).__name__}, not text"
    return (value, None) if value.strip() else (None, f"{name!r} is empty")


def _row_lang(row: InputRow, segment: str, default: str) -> str | None:
    lang = row.fields.get(f"{segment}_lang") or row.fields.get("lang") or default
    return lang if isinstance(lang, str) and lang.strip() else None


def _options(row: InputRow, labels: Sequence[str]) -> tuple[list[str], str | None]:
    """A multiple-choice row's options, or what is wrong with them."""
    options = row.fields.get("options")
    if isinstance(options, str):  # a TSV column holds the list as JSON text
        try:
            options = json.loads(options)
        except json.JSONDecodeError:
            pass
    if not isinstance(options, list) or not options or not all(isinstance(o, str) and o.strip() for o in options):
        return [], "'options' must be a non-empty list of non-empty texts (in TSV, JSON text: [\"red\", \"blue\"])"
    if len(options) > len(labels):  # the model's answer labels name the options: none for one more
        return [], (f"{len(options)} options, but the model's answer labels name {len(labels)} ({', '.join(labels)}): "
                    f"give at most {len(labels)}")
    return options, None


def rows_to_examples(card: TaskCard, rows: list[InputRow], default_lang: str, source: str,
                     labels: Sequence[str] = ()) -> list[Example]:
    """One example per row (its id is the line number); every bad row is named in one error. `labels`: the
    model's, which name a multiple-choice row's options (A, B, ...), so a row may have at most as many."""
    tagged = card.task_kind.tagged
    problems, examples = [], []
    for row in rows:
        segments, wrong = [], []
        for name in card.segments:
            value, problem = _segment_value(row, "text" if tagged else name, tagged)
            lang = _row_lang(row, name, default_lang)
            if problem is None and lang is None:
                problem = f"the language of {name!r} is not text"
            elif problem is None and lang not in card.languages:
                problem = f"language {lang!r} is not one of the task's ({', '.join(card.languages)})"
            if problem is not None:
                wrong.append(problem)
                continue
            segments.append(Segment(lang, tokens=value) if isinstance(value, list) else Segment(lang, text=value))
        if card.task_kind.choices:
            options, problem = _options(row, labels)
            if problem is not None:
                wrong.append(problem)
            else:
                segments += [Segment(segments[-1].lang if segments else default_lang, text=o) for o in options]
        if wrong:
            problems.append(f"line {row.line}: {'; '.join(dict.fromkeys(wrong))}")  # its `lang` once, not per segment
        else:
            examples.append(Example(str(row.line), segments))
    if problems:
        needed = " and ".join(repr(f) for f in input_fields(card))
        also = " (or 'tokens', a list)" if tagged else ""
        raise PredictInputError(
            f"{source}: {len(problems)} of {len(rows)} rows cannot be predicted: "
            + "; ".join(problems[:MAX_LISTED]) + ("; ..." if len(problems) > MAX_LISTED else "")
            + f". This model's task ({card.name}) needs {needed}{also} in every row, none of them empty")
    if not examples:
        raise PredictInputError(f"{source}: no rows to predict on")
    return examples


_WHITESPACE_TOKEN = re.compile(r"\S+")


def _tokenize(examples: list[Example], parse: Callable[..., Any], tokens: str
              ) -> tuple[list[list[tuple[int, int]]], list[str]]:
    """Turn the raw-text segment of each tagged example into tokens (the parser's or whitespace
    ones), keeping each token's character span; `tokens` input keeps its tokens."""
    if tokens not in TOKENIZATIONS:
        raise PredictInputError(f"tokens={tokens!r}; choose one of {', '.join(TOKENIZATIONS)}")
    if tokens == "parser":
        parse(examples, raw_only=True)
    spans_of, texts = [], []
    for example in examples:
        segment = example.segments[0]
        if segment.text is None:  # gold tokens: offsets into the tokens joined by single spaces
            text = " ".join(segment.tokens or [])
            spans = [m.span() for m in _WHITESPACE_TOKEN.finditer(text)]
        else:
            text = segment.text
            spans = ([m.span() for m in _WHITESPACE_TOKEN.finditer(text)] if tokens == "whitespace"
                     else _record_token_spans(segment))
            example.segments[0] = Segment(segment.lang, tokens=[text[s:e] for s, e in spans])
        spans_of.append(spans)
        texts.append(text)
    return spans_of, texts


def _record_token_spans(segment: Segment) -> list[tuple[int, int]]:
    """The surface tokens of a raw-text parse: its words' distinct spans (the words of a multiword
    token share one), without surrounding space."""
    text = segment.text or ""
    spans: list[tuple[int, int]] = []
    for start, end in segment.record.spans or []:
        piece = text[start:end]
        start, end = start + len(piece) - len(piece.lstrip()), end - len(piece) + len(piece.rstrip())
        if end > start and (not spans or spans[-1] != (start, end)):
            spans.append((start, end))
    return spans


# -- the pipeline ----------------------------------------------------------------------------------


def predict(model_dir: str | Path, inputs: Iterable[Mapping[str, Any]] | str | Path, *, lang: str | None = None,
            parser: str | None = None, tokens: str = "parser", batch_size: int | None = None,
            overrides: Mapping[str, Any] | None = None, progress: bool = False,
            report: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One prediction dict per input row, in input order (see the module docstring).

    `model_dir` is a finetune output folder or a checkpoint; `inputs` a file path or dicts; `lang`
    the language of rows that name none (default: the model's training language); `parser` any
    choice `xsyn.syntax.parsing.build_parser` takes (default: the one the model was trained with);
    `overrides` other run settings (`parser_model_dir`, `cache_dir`, `max_length`, ...). `report`,
    when given, is filled with what parsing and featurising did.
    """
    checkpoint = locate_checkpoint(model_dir)
    config = run_config(checkpoint, {**(overrides or {}), "parser": parser, "eval_batch_size": batch_size})
    card = config.card
    if lang is not None and lang not in card.languages:
        raise PredictInputError(f"--lang {lang!r}: task {card.name} has no such language; its languages are "
                                f"{', '.join(card.languages)}")
    rows, source = as_rows(inputs)
    examples = rows_to_examples(card, rows, lang or config.train_lang, source, checkpoint.labels)
    parse = _parser(config, source, examples)
    prepared = _Prepared(examples)
    if card.task_kind.tagged:
        prepared.token_spans, prepared.texts = _tokenize(examples, parse, tokens)
    parse_report = parse(examples)
    predicted, feature_report = _run_model(checkpoint, config, prepared, progress)
    if feature_report.truncated_inputs:
        log.warning(f"{source}: {feature_report.truncated_inputs} rows are longer than max_length "
                    f"({config.max_length} word pieces) and were cut ({feature_report.truncated_pieces} pieces "
                    "dropped): their predictions see only their start (max_length is the run's, from its config.json)")
    if report is not None:
        report.update(task=card.name, checkpoint=str(checkpoint.path), parser=config.parser, rows=len(rows),
                      parse=parse_report, features=feature_report.as_dict())
    return [{**_where(card, row, example), **_named(prediction, card.label_names)}
            for row, example, prediction in zip(rows, examples, predicted)]


def _run_model(checkpoint, config, prepared: _Prepared, progress: bool) -> tuple[list[dict[str, Any]], Any]:
    """Featurise the parsed examples, run the model over them and decode its outputs into predictions (one per
    example, in order); returns them with the featurising report."""
    card, examples = config.card, prepared.examples
    tokenizer = load_tokenizer(checkpoint.path)
    with library_bars(progress):
        features, feature_report = prepare_features(
            card, examples, tokenizer, config.max_length, doc_stride=config.doc_stride,
            max_query_length=config.max_query_length, labels=checkpoint.labels, tags=checkpoint.tags,
            cache_dir=cache_root(config) / "features", num_proc=config.num_proc,
            conventions=InputConventions.of(config))
    accelerator = Accelerator(mixed_precision=run_precision(config.mixed_precision))
    model = accelerator.prepare(load_model(checkpoint.path))
    outputs = model_outputs(model, feature_rows(features), accelerator, config.eval_batch_size,
                            tokenizer.pad_token_id or 0, progress=progress, **padding(config, accelerator.device.type))
    windows = example_windows(features, len(examples), last_segment=card.task_kind.n_segments - 1)
    predicted = card.task_kind.present(DecodeInput(
        examples, windows, outputs, checkpoint.labels, checkpoint.tags, card.metric, config.n_best,
        config.max_answer_length, DecodeReport(), prepared.token_spans, prepared.texts))
    return predicted, feature_report


def _where(card, row, example) -> dict[str, Any]:
    """Where a prediction comes from: the input's line, its id (if it has one) and its languages."""
    langs = [segment.lang for segment in example.segments]
    return {"line": row.line, **({"id": row.fields["id"]} if "id" in row.fields else {}),
            # always a string: the row's language, or its segments' joined as evaluate names a pair;
            # each segment's language is always in segment_langs
            "lang": langs[0] if len(set(langs)) == 1 else "-".join(langs),
            "segment_langs": dict(zip(card.segments, langs))}


def _named(prediction: dict[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """A classification's label and probabilities under the card's readable label names (negative,
    positive) where it gives them, instead of the data's raw labels ("0", "1")."""
    if not names or "label" not in prediction:
        return prediction
    named = {**prediction, "label": names.get(prediction["label"], prediction["label"])}
    if "probabilities" in prediction:
        named["probabilities"] = {names.get(label, label): p for label, p in prediction["probabilities"].items()}
    return named


def _parser(config: RunConfig, source: str, examples: list[Example]
            ) -> Callable[[list[Example], bool], dict[str, Any]]:
    """A function that parses examples' segments through the parse cache (`raw_only`: only those
    given as raw text), one language at a time, so that a language the parser cannot parse is named
    with the first line that has it: before anything is parsed or the model loaded, the parser is
    asked about every language of `examples` (a language it has no models for, or whose models are
    not there)."""
    parsers = make_parsers(config)
    first = {}  # language -> the first line that has it
    for example in examples:
        for segment in example.segments:
            first.setdefault(segment.lang, example.id)
    try:
        parsers.require(list(first))
    except ParserUnavailable as err:
        lang = err.support[0].lang
        raise PredictInputError(f"{source}: line {first[lang]}: cannot parse language {lang!r} with parser "
                                f"{config.parser_of(lang)!r}: {err}") from None
    cache = ParseCache(cache_root(config) / "parses")
    total: dict[str, Any] = {}

    def parse(examples: list[Example], raw_only: bool = False) -> dict[str, Any]:
        by_lang: dict[str, list[tuple[str, Segment]]] = {}
        for example in examples:
            for segment in example.segments:
                if not raw_only or segment.text is not None:
                    by_lang.setdefault(segment.lang, []).append((example.id, segment))
        for lang, group in by_lang.items():
            try:
                done = parse_segments([segment for _, segment in group], parsers[lang], cache,
                                      workers=parse_workers(config))
            except XsynError as err:  # the parser's own error, given the line and language it met
                raise PredictInputError(f"{source}: line {group[0][0]}: cannot parse language {lang!r} with "
                                        f"parser {config.parser_of(lang)!r} ({len(group)} segments in this language, "
                                        f"from line {group[0][0]} on): {err}") from None
            for name, value in done.as_dict().items():
                total[name] = total.get(name, 0) + value
        return total

    return parse


def write_predictions(predictions: list[dict[str, Any]], path: str | Path) -> None:
    """JSON Lines, written atomically."""
    atomic_write_text(path, "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in predictions), option="--output")


def report_text(report: dict[str, Any], output: Path | None = None) -> str:
    """`predict`'s `report` in one line: rows, features (and rows in several windows), the parser and its parses
    and cache hits, and where the predictions were written."""
    features = report["features"]
    return (f"{report['rows']} rows, {features['features']} features ({features['windowed_examples']} rows in "
            f"several windows), parser {report['parser']}: {report['parse'].get('parsed', 0)} segments parsed, "
            f"{report['parse'].get('cache_hits', 0)} from the cache" + (f"; written to {output}" if output else ""))
