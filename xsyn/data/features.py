"""Examples with syntax records -> model features, through `datasets.Dataset.map` with a disk cache.

    parse_segments([s for e in examples for s in e.segments], parser, cache)   # parse first
    features, report = prepare_features(card, examples, tokenizer, max_length=128,
                                        cache_dir="cache/features", num_proc=2)
    batch = collate_features([features[i] for i in range(8)], tokenizer.pad_token_id)

Every feature row holds the model input with its O(n) syntax fields (`xsyn.trees.batch.tree_features`),
where it came from (`example_index`, `window_index`, `window_start`/`window_end` over the windowed
segment's pieces, `source_start`/`source_end` per piece: a character span, or the gold token and
token + 1 for pre-tokenised segments, -1 for specials) and its labels:

| kind                 | label columns                                                               |
|----------------------|-----------------------------------------------------------------------------|
| classification       | `labels`: class id                                                          |
| token-classification | `labels`: tag id on the first piece of each gold token, -100 elsewhere      |
| extractive-qa        | `start_positions`, `end_positions`: answer pieces, 0 ([CLS]) when the answer |
|                      | is not inside the window                                                    |
| intent-slot          | `intent_labels`: intent id; `slot_labels`: as tagging `labels`              |

An unknown or missing label is -100 (ignored by the loss) and counted. Long tagged sentences and
QA contexts become windows that advance by `doc_stride` pieces; no example is ever dropped, and
`xsyn.data.decode` puts the windows back together. A QA question keeps at most `max_query_length`
pieces (XTREME's 64 in the cards; the cut is counted, and truncation keeps its tree distances
true). Parsing never happens here: every segment must already carry its `record`.

The cache file is named by a hash of everything that decides the features (examples and their
records, tokenizer, settings, this module's version), so a second run with the same inputs loads it.
A cache file that cannot be read, or that lacks examples (cut short by a kill or a full disk), is
deleted and built again, and named in the report (`rebuilt_cache_files`). A write that fails names
the file and the fix (`--cache-dir`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow as pa
import torch

from xsyn.data.cards import TaskCard
from xsyn.data.example import Example
from xsyn.data.kinds import KINDS, TaskKind, WindowGold, label_columns, piece_label_columns
from xsyn.models.names import IGNORE_INDEX
from xsyn.syntax.record import SyntaxRecord
from xsyn.trees.batch import collate_trees, tree_features
from xsyn.trees.conventions import DEFAULT_CONVENTIONS, InputConventions
from xsyn.trees.padding import PaddedLength
from xsyn.trees.wordpiece import NO_SOURCE, SYNTAX_FIELDS, SegmentPieces, WordpieceAligner
from xsyn.utils.io import (
    OutputError,
    clear_leftover_temps,
    ensure_dir,
    explain_write_error,
    temp_prefix,
    write_error_of,
)

FEATURES_VERSION = "4"  # 4: a window carries at most max_length removed ancestors
IGNORE = IGNORE_INDEX  # label of pieces and examples the loss skips
INDEX_COLUMNS = ("example_index", "feature_index")  # which example (and which row) a batch row is
# a multiple-choice feature's options: the fields with one value per piece, and those with one per tree node
NODE_FIELDS = tuple(f.name for f in SYNTAX_FIELDS if f.per_node)
NODE_FIELD = NODE_FIELDS[0]
SEQUENCE_FIELDS = ("input_ids", "token_type_ids", *(f.name for f in SYNTAX_FIELDS if not f.per_node))


@dataclass(frozen=True)
class FeatureSettings:
    kind: str
    max_length: int
    doc_stride: int | None  # pieces a window advances; None: half a window
    max_query_length: int | None = None  # QA: pieces kept of the question; None: all
    labels: tuple[str, ...] = ()  # class labels or intents, in id order
    tags: tuple[str, ...] = ()  # tags, in id order
    conventions: InputConventions = field(default_factory=InputConventions)  # how inputs are built (trees.conventions)

    @property
    def task_kind(self) -> TaskKind:
        return KINDS[self.kind]

    @property
    def query_cap(self) -> int | None:
        """Pieces kept of each segment before the windowed one (a QA question); None: all."""
        return self.max_query_length if self.task_kind.caps_query else None

    @property
    def context_first(self) -> bool:
        """QA inputs put the context (the windowed segment) first: SG-Net's `[CLS] passage [SEP] question [SEP]`."""
        return self.conventions.qa_context_first and self.task_kind.caps_query

    def identity(self) -> dict[str, Any]:
        """What the cache key holds of the settings: the conventions only where they differ from the defaults, so
        that a run on the defaults keeps the key (and the cache) it had before conventions existed."""
        values = asdict(self)
        values["conventions"] = self.conventions.changed()
        if not values["conventions"]:
            del values["conventions"]
        return values


@dataclass
class FeatureReport:
    examples: int = 0
    features: int = 0
    windowed_examples: int = 0  # examples split into more than one window
    truncated_inputs: int = 0  # examples that lost pieces (inputs over max_length that are not windowed)
    truncated_pieces: int = 0
    truncated_queries: int = 0  # QA questions cut to max_query_length pieces
    unaligned_pieces: int = 0  # pieces (of whole segments) that map to no syntactic word
    wordless_words: int = 0  # words that got no piece (contracted into their head)
    unknown_labels: int = 0  # labels or tags outside the label set (trained on as -100)
    answers_outside_window: int = 0  # QA windows whose answer lies elsewhere (labelled [CLS])
    cache_file: str = ""
    cache_hit: bool = False
    rebuilt_cache_files: list[str] = field(default_factory=list)  # damaged cache files deleted and rebuilt
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def truncation(self, max_length: int) -> str | None:
        """What inputs longer than `max_length` lost, in words (None: nothing was cut)."""
        if not self.truncated_inputs:
            return None
        return (f"{self.truncated_inputs:,} of {self.examples:,} inputs were longer than max_length ({max_length} word "
                f"pieces) and were cut ({self.truncated_pieces:,} pieces lost)")


def prepare_features(card: TaskCard, examples: Sequence[Example], tokenizer, max_length: int, *,
                     doc_stride: int | None = None, max_query_length: int | None = None,
                     labels: Sequence[str] = (), tags: Sequence[str] = (),
                     cache_dir: str | Path | None = None, num_proc: int | None = None,
                     conventions: InputConventions | None = None) -> tuple[Any, FeatureReport]:
    """A `datasets.Dataset` of features (one or more per example) and a `FeatureReport`.

    `labels`/`tags` are the id orders (see `xsyn.data.loading.label_names` / `tag_names`);
    `doc_stride` and (QA) `max_query_length` default to the card's hyperparameter when every
    variant agrees, else half a window and the whole question; `conventions` how the inputs are built
    (`xsyn.trees.conventions`; default: xsyn's).
    """
    start = time.perf_counter()
    if max_query_length is not None and max_query_length < 1:
        raise ValueError(f"max_query_length={max_query_length}: keep at least one question piece")
    settings = FeatureSettings(
        card.kind, max_length, doc_stride if doc_stride is not None else _card_setting(card, "doc_stride"),
        max_query_length if max_query_length is not None else _card_setting(card, "max_query_length"),
        tuple(labels), tuple(tags), conventions or DEFAULT_CONVENTIONS)
    _check_label_sets(card, settings)
    rows = [_example_row(i, e, card) for i, e in enumerate(examples)]
    key = _cache_key(rows, tokenizer, settings)
    source = datasets.Dataset.from_dict({"example": rows})
    report = FeatureReport(examples=len(rows))
    map_args: dict[str, Any] = dict(
        function=featurize_batch, batched=True, batch_size=256, remove_columns=["example"], num_proc=num_proc,
        fn_kwargs={"tokenizer": tokenizer, "settings": settings}, new_fingerprint=key,
        desc=f"features {card.name}")
    if cache_dir is None:
        features = source.map(keep_in_memory=True, **map_args)
    else:
        cache_file = ensure_dir(cache_dir, option="--cache-dir") / f"features-{key}.arrow"
        report.rebuilt_cache_files = _discard(f for f in _cache_files(cache_file) if not _readable(f))
        report.cache_file, report.cache_hit = str(cache_file), _cached(cache_file, num_proc)
        features = _map_to_cache(source, map_args, cache_file, report.cache_hit)
        if report.cache_hit and not _covers(features, len(rows)):  # readable, but cut short
            report.rebuilt_cache_files += _discard(_cache_files(cache_file))
            report.cache_hit = False
            features = _map_to_cache(source, map_args, cache_file, False)
    _fill_report(report, features)
    report.seconds = time.perf_counter() - start
    return features, report


def _card_setting(card: TaskCard, name: str) -> int | None:
    values = {v[name] for v in card.hyperparameters.values() if name in v}
    return values.pop() if len(values) == 1 else None


def _check_label_sets(card: TaskCard, settings: FeatureSettings) -> None:
    if "labels" in card.task_kind.gold.label_sets and not settings.labels:
        raise ValueError(f"{card.name}: pass labels= (xsyn.data.loading.label_names(card, train_examples))")
    if card.task_kind.tagged and not settings.tags:
        raise ValueError(f"{card.name}: pass tags= (xsyn.data.loading.tag_names(card, train_examples))")


def _example_row(index: int, example: Example, card: TaskCard) -> str:
    """One example as the JSON the map function reads (records included: the cache key covers them)."""
    records = []
    for k, segment in enumerate(example.segments):
        if segment.record is None:
            raise ValueError(f"example {example.id!r} segment {k} has no syntax record; attach them first "
                             "with xsyn.syntax.parse.parse_segments (never inside datasets.map)")
        record = segment.record
        if segment.text is not None and record.text != segment.text:
            raise ValueError(f"example {example.id!r} segment {k}: the syntax record's text differs from "
                             "the segment's, so character offsets would not line up")
        if segment.tokens is not None and record.token_index is None:
            raise ValueError(f"example {example.id!r} segment {k} has gold tokens but its record was "
                             "parsed from raw text; parse gold tokens pre-tokenised")
        records.append(record.to_dict())
    return json.dumps({
        "index": index, "records": records, "label": example.label, "tags": example.tags,
        "n_tokens": len(example.segments[0].tokens or []) if card.task_kind.tagged else 0,
        "answers": [[a.text, a.start] for a in example.answers],
    }, ensure_ascii=False, sort_keys=True)


def _cache_key(rows: list[str], tokenizer, settings: FeatureSettings) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps([FEATURES_VERSION, settings.identity()]).encode())
    digest.update(tokenizer.backend_tokenizer.to_str().encode())
    for row in rows:
        digest.update(row.encode())
        digest.update(b"\n")
    return digest.hexdigest()[:24]


def _cached(cache_file: Path, num_proc: int | None) -> bool:
    """Whether `map` will load instead of compute: the file, or (num_proc > 1) all its shards, exist."""
    if cache_file.exists() or not num_proc or num_proc <= 1:
        return cache_file.exists()
    shards = [cache_file.with_name(f"{cache_file.stem}_{r:05d}_of_{num_proc:05d}{cache_file.suffix}")
              for r in range(num_proc)]
    return all(s.exists() for s in shards)


def _cache_files(cache_file: Path) -> list[Path]:
    """The cache files of one key that `map` may load: the file itself and the shards of any
    earlier `num_proc`."""
    shards = cache_file.parent.glob(f"{cache_file.stem}_*_of_*{cache_file.suffix}")
    return [f for f in (cache_file, *sorted(shards)) if f.exists()]


def _readable(path: Path) -> bool:
    """Whether an Arrow stream file (what `map` writes) reads to its end."""
    try:
        with pa.memory_map(str(path)) as source:
            pa.ipc.open_stream(source).read_all()
    except (OSError, pa.ArrowException):
        return False
    return True


def _discard(damaged) -> list[str]:
    """Delete damaged cache files so that `map` builds them again; their paths."""
    removed = []
    for path in damaged:
        try:
            path.unlink(missing_ok=True)
        except OSError as err:
            raise OutputError(err.errno, f"the features cache file {path} is damaged and cannot be deleted "
                                         f"({err.strerror}); delete it, or choose another --cache-dir") from err
        removed.append(str(path))
    return removed


def _covers(features, n_examples: int) -> bool:
    """Whether every example has a feature (each example makes at least one, in order)."""
    indices = features.with_format("numpy")["example_index"] if len(features) else np.zeros(0)
    return len(np.unique(indices)) == n_examples


def _map_to_cache(source, map_args: Mapping[str, Any], cache_file: Path, hit: bool):
    """`source.map` with its disk cache at `cache_file`. A build writes into a private staging
    folder and moves the finished files into place, so a failed write (named, with the fix) leaves
    nothing behind; datasets itself would leave its temp file when the disk is full."""
    if not hit:
        staging = None
        try:
            clear_leftover_temps(cache_file.parent)  # a killed build's staging folder
            staging = Path(tempfile.mkdtemp(prefix=temp_prefix("staging"), suffix=".tmp", dir=cache_file.parent))
            source.map(cache_file_name=str(staging / cache_file.name), load_from_cache_file=False, **map_args)
            for built in staging.iterdir():
                os.replace(built, cache_file.parent / built.name)
        except Exception as err:  # the write's OSError, or datasets' own error while it closes the file after one
            cause = write_error_of(err)
            if cause is None:
                raise
            raise explain_write_error(cause, cache_file, "--cache-dir") from err
        finally:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
    return source.map(cache_file_name=str(cache_file), load_from_cache_file=True, **map_args)


def _fill_report(report: FeatureReport, features) -> None:
    report.features = len(features)
    if len(features) == 0:
        return
    counters = features.select_columns(["example_index", "truncated", "query_truncated", "unaligned", "wordless",
                                        "unknown_labels", "answer_outside"]).to_pandas()
    per_example = counters.groupby("example_index").size()
    report.windowed_examples = int((per_example > 1).sum())
    firsts = counters.drop_duplicates("example_index")
    report.truncated_inputs = int((firsts["truncated"] > 0).sum())
    report.truncated_pieces = int(firsts["truncated"].sum())
    report.truncated_queries = int((firsts["query_truncated"] > 0).sum())
    report.unaligned_pieces = int(firsts["unaligned"].sum())
    report.wordless_words = int(firsts["wordless"].sum())
    report.unknown_labels = int(firsts["unknown_labels"].sum())
    report.answers_outside_window = int(counters["answer_outside"].sum())


# -- the map function ------------------------------------------------------------------------------


def featurize_batch(batch: Mapping[str, list], tokenizer, settings: FeatureSettings) -> dict[str, list]:
    """`datasets.map` function: a batch of example JSON rows -> feature rows (windows included)."""
    aligner = WordpieceAligner(tokenizer, settings.max_length, settings.conventions)
    items = [json.loads(row) for row in batch["example"]]
    records = [SyntaxRecord.from_dict(r) for item in items for r in item["records"]]
    pieces = aligner.segment_pieces(records)
    label_ids = {name: i for i, name in enumerate(settings.labels)}
    tag_ids = {name: i for i, name in enumerate(settings.tags)}
    out: dict[str, list] = {}
    offset = 0
    for item in items:
        segments = pieces[offset:offset + len(item["records"])]
        offset += len(item["records"])
        for row in _example_features(item, segments, aligner, settings, label_ids, tag_ids):
            for name, value in row.items():
                out.setdefault(name, []).append(value)
    return out


def _example_features(item: Mapping[str, Any], segments: list[SegmentPieces], aligner: WordpieceAligner,
                      settings: FeatureSettings, label_ids: Mapping[str, int],
                      tag_ids: Mapping[str, int]) -> list[dict[str, Any]]:
    if settings.task_kind.choices:
        return [_choice_features(item, segments, aligner, label_ids)]
    windowed = settings.task_kind.windowed
    stride = _overlap(segments, settings, aligner.specials.count(len(segments))) if windowed else None
    if settings.context_first:  # the context, the windowed segment, first; segment ids as the example orders them
        last = len(segments) - 1
        trees = aligner.assemble([segments[-1], *segments[:-1]], stride=stride, window_segment=0,
                                 max_other_length=settings.query_cap, segment_ids=[last, *range(last)])
    else:
        trees = aligner.assemble(segments, stride=stride, window_segment=-1, max_other_length=settings.query_cap)
    query_cut = sum(len(s.ids) for s in segments[:-1]) - _kept_query_pieces(segments, settings)
    unknown = 0
    label = IGNORE
    if settings.labels and item["label"] is not None:
        label = label_ids.get(item["label"], IGNORE)
        unknown += label == IGNORE
    piece_tags = None
    if settings.tags:
        piece_tags, unknown_tags = first_piece_labels(segments[0], item["tags"], tag_ids)
        unknown += unknown_tags
    gold = WindowGold(label, piece_tags, item["answers"], item["label"])
    lost = trees[0].truncated - query_cut if len(trees) == 1 else 0  # windows cover every piece
    rows = []
    for w, tree in enumerate(trees):
        row: dict[str, Any] = dict(tree_features(tree))
        row.update(example_index=item["index"], window_index=w, window_start=tree.window[0],
                   window_end=tree.window[1], source_start=tree.source[:, 0], source_end=tree.source[:, 1],
                   truncated=lost, query_truncated=query_cut, unaligned=sum(s.unaligned for s in segments),
                   wordless=tree.wordless, unknown_labels=unknown, answer_outside=0)
        row.update(settings.task_kind.window_labels(gold, tree, len(segments) - 1))
        rows.append(row)
    return rows


def _choice_features(item: Mapping[str, Any], segments: list[SegmentPieces], aligner: WordpieceAligner,
                     label_ids: Mapping[str, int]) -> dict[str, Any]:
    """Multiple choice: one sequence per option, passage + question + option, the passage alone cut to fit
    (SG-Net's max length counts all three; a question and option that leave no room are cut longest
    first); every option's sequence in one feature, concatenated, with their lengths (`choice_lengths`,
    and `choice_nodes` for the per-node tree fields), so that a batch keeps an example's options together."""
    passage, question, options = segments[0], segments[1], segments[2:]
    trees = [aligner.assemble([passage, question, option], stride=0, window_segment=0)[0] for option in options]
    parts = [tree_features(tree) for tree in trees]
    row: dict[str, Any] = {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
    label = label_ids.get(item["label"], IGNORE) if item["label"] is not None else IGNORE
    row.update(choice_lengths=[len(part["input_ids"]) for part in parts],
               choice_nodes=[len(part[NODE_FIELD]) for part in parts], example_index=item["index"], window_index=0,
               window_start=0, window_end=0, source_start=np.concatenate([t.source[:, 0] for t in trees]),
               source_end=np.concatenate([t.source[:, 1] for t in trees]),
               truncated=max(len(passage.ids) - (t.window[1] - t.window[0]) for t in trees), query_truncated=0,
               unaligned=sum(s.unaligned for s in segments), wordless=sum(t.wordless for t in trees),
               unknown_labels=int(item["label"] is not None and label == IGNORE), answer_outside=0, labels=label)
    return row


def option_sequences(features: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each multiple-choice feature as one input per option, an example's options consecutive."""
    out = []
    for feature in features:
        pieces = np.cumsum([0, *feature["choice_lengths"]])
        nodes = np.cumsum([0, *feature["choice_nodes"]])
        for c in range(len(pieces) - 1):
            option = {name: feature[name][pieces[c]:pieces[c + 1]] for name in SEQUENCE_FIELDS}
            option.update({name: feature[name][nodes[c]:nodes[c + 1]] for name in NODE_FIELDS})
            out.append(option)
    return out


def sequence_lengths(feature: Mapping[str, Any]) -> list[int]:
    """The lengths of the inputs a feature row puts in a batch: one per option of a multiple-choice row."""
    return [int(n) for n in feature["choice_lengths"]] if "choice_lengths" in feature else [len(feature["input_ids"])]


def _overlap(segments: list[SegmentPieces], settings: FeatureSettings, specials: int) -> int:
    """The aligner's stride (pieces shared by consecutive windows) for an advance of `doc_stride`,
    in inputs holding `specials` special tokens."""
    room = settings.max_length - specials - _kept_query_pieces(segments, settings)
    if room <= 1:
        return 0
    step = settings.doc_stride if settings.doc_stride is not None else max(1, room // 2)
    return min(max(room - step, 0), room - 1)


def _kept_query_pieces(segments: list[SegmentPieces], settings: FeatureSettings) -> int:
    """Pieces of the segments before the windowed one that `assemble` keeps (all, or `query_cap` each)."""
    cap = settings.query_cap
    return sum(len(s.ids) if cap is None else min(len(s.ids), cap) for s in segments[:-1])


def first_piece_labels(pieces: SegmentPieces, tags: Sequence[str] | None, tag_ids: Mapping[str, int]
                       ) -> tuple[np.ndarray, int]:
    """Per piece of a pre-tokenised segment: its token's tag id on the token's first piece, else -100.

    Returns the labels and how many gold tags are outside the tag set.
    """
    labels = np.full(len(pieces.ids), IGNORE, dtype=np.int64)
    if tags is None:
        return labels, 0
    unknown = sum(1 for t in tags if t not in tag_ids)
    seen: set[int] = set()
    for p, (token, _) in enumerate(pieces.source):
        if token == NO_SOURCE or token in seen:
            continue
        seen.add(token)
        if token >= len(tags):
            raise ValueError(f"a piece of gold token {token} but the example has {len(tags)} tags; the "
                             "record's tokens are not the segment's gold tokens")
        labels[p] = tag_ids.get(tags[token], IGNORE)
    return labels, unknown


# -- batching --------------------------------------------------------------------------------------


def collate_features(features: Sequence[Mapping[str, Any]], pad_token_id: int = 0,
                     tree_fields: Collection[str] | None = None, pad_to: PaddedLength | None = None
                     ) -> dict[str, Any]:
    """A training/eval batch: `xsyn.trees.batch.collate_trees` plus the label columns (per-piece ones
    padded with IGNORE_INDEX) and the row indices (`example_index`, and `feature_index` where rows carry it)."""
    choices = "choice_lengths" in features[0]
    batch = collate_trees(option_sequences(features) if choices else features, pad_token_id, tree_fields,
                          pad_to=pad_to)
    if choices:  # the head reads each example's scores from `num_choices` consecutive inputs
        batch["num_choices"] = torch.tensor([len(f["choice_lengths"]) for f in features], dtype=torch.long)
    width = batch["input_ids"].shape[1]
    per_piece = piece_label_columns()
    for name in label_columns():
        if name not in features[0]:
            continue
        values = [f[name] for f in features]
        if name in per_piece and np.ndim(values[0]) == 1:
            padded = np.full((len(values), width), IGNORE, dtype=np.int64)
            for i, v in enumerate(values):
                padded[i, :len(v)] = v
            batch[name] = torch.from_numpy(padded)
        else:  # a class id per row, or a regression score
            scores = np.asarray(values).dtype.kind == "f"
            batch[name] = torch.tensor(values, dtype=torch.float if scores else torch.long)
    for name in INDEX_COLUMNS:
        if name in features[0]:
            batch[name] = torch.tensor([f[name] for f in features], dtype=torch.long)
    return batch
