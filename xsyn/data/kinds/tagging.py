"""Tagging kinds: a tag per gold token, predicted on its first piece (XTREME's labelling): named entities,
POS tags, and token detection (FCE; CGED's error triples are a form of it). Long inputs become windows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from xsyn.data.example import Example
from xsyn.data.kinds.base import Gold, TaskKind, WindowGold
from xsyn.data.prediction_files import write_tags
from xsyn.data.rows import GoldRow, tags_per_token, token_segment
from xsyn.models.names import IGNORE_INDEX

if TYPE_CHECKING:
    import numpy as np

    from xsyn.data.decode import DecodeInput


def _tag_example(row: GoldRow) -> Example:
    segment = token_segment(row)
    errors = row.values.get("errors")
    return Example(row.uid, [segment], tags=tags_per_token(row, len(segment.tokens or [])),
                   errors=None if errors is None else [tuple(e) for e in errors])


def window_piece_labels(piece_labels: np.ndarray, segment_id: np.ndarray, window: tuple[int, int]) -> np.ndarray:
    """The labels of one window's sequence: the windowed segment's pieces, IGNORE_INDEX on specials."""
    import numpy as np

    out = np.full(len(segment_id), IGNORE_INDEX, dtype=np.int64)
    out[segment_id == 0] = piece_labels[window[0]:window[1]]
    return out


def _tag_labels(gold: WindowGold, tree, last_segment: int) -> dict[str, Any]:
    return {"labels": window_piece_labels(gold.piece_tags, tree.segment_id, tree.window)}


def _tag_form(tags: list[str], metric: str) -> Any:
    """Tags as the metric scores them: CGED scores the error triples the tags spell."""
    from xsyn.metrics.cged import errors_from_tags

    return errors_from_tags(tags) if metric == "cged" else tags


def decoded_tags(data: DecodeInput, key: str) -> list[list[str]]:
    """Each example's tag per gold token, from the output `key`."""
    from xsyn.data.decode import token_tags

    return [token_tags(len(e.segments[0].tokens or []), w, data.outputs[key], data.tags, data.report)
            for e, w in zip(data.examples, data.windows)]


def _decode_tags(data: DecodeInput) -> list[Any]:
    return [_tag_form(t, data.metric) for t in decoded_tags(data, "logits")]


def _tag_reference(example: Example, metric: str) -> Any:
    if metric == "cged" and example.errors is not None:  # the released errors, overlaps included
        return set(example.errors)
    return _tag_form(example.tags or [], metric)


def entities(tags: list[str], spans: Sequence[tuple[int, int]], text: str) -> list[dict[str, Any]]:
    from xsyn.metrics.entities import entity_spans

    found = sorted(entity_spans(tags), key=lambda e: (e[1], e[2]))
    return [{"type": kind, "text": text[spans[start][0]:spans[end - 1][1]], "start": spans[start][0],
             "end": spans[end - 1][1], "token_start": start, "token_end": end} for kind, start, end in found]


def tagged_tokens(data: DecodeInput, i: int, key: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Example i's tokens with their text, offsets and predicted tag (from the output `key`), and the tags."""
    from xsyn.data.decode import token_tags

    spans, text = data.token_spans[i], data.texts[i]
    predicted = token_tags(len(spans), data.windows[i], data.outputs[key], data.tags, data.report)
    return [{"text": text[s:e], "start": s, "end": e, "tag": tag} for (s, e), tag in zip(spans, predicted)], predicted


def _present_entities(data: DecodeInput) -> list[dict[str, Any]]:
    out = []
    for i in range(len(data.windows)):
        tokens, tags = tagged_tokens(data, i, "logits")
        out.append({"tokens": tokens, "entities": entities(tags, data.token_spans[i], data.texts[i])})
    return out


def _present_tags(data: DecodeInput) -> list[dict[str, Any]]:
    return [{"tokens": tagged_tokens(data, i, "logits")[0]} for i in range(len(data.windows))]


def _tagging(name: str, present) -> TaskKind:
    """A tag per gold token, predicted on its first piece (XTREME's labelling)."""
    return TaskKind(name, ("tokens",), 1, Gold(("tags",), ("tags",), _tag_example), head="token",
                    label_columns=("labels",), piece_label_columns=("labels",), output_keys=("logits",),
                    windowed=True, window_labels=_tag_labels, decode=_decode_tags, reference=_tag_reference,
                    write_predictions=write_tags, present=present, pipeline_tag="token-classification",
                    auto_class="AutoModelForTokenClassification")


TAGGING_KINDS = (
    _tagging("token-classification", _present_entities),
    _tagging("pos-tagging", _present_tags),
    # FCE: a correct / incorrect tag per token, scored on the error class
    _tagging("token-detection", _present_tags),
)
