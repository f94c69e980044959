"""Intent + slots (MTOP): a class for the sentence (from [CLS]) and a tag per gold token (its first piece),
trained together; long inputs become windows. The two halves reuse the sentence and tagging kinds' parts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xsyn.data.example import Example
from xsyn.data.kinds.base import Gold, TaskKind, WindowGold
from xsyn.data.kinds.classification import argmax_labels, probabilities
from xsyn.data.kinds.tagging import decoded_tags, entities, tagged_tokens, window_piece_labels
from xsyn.data.prediction_files import write_intent_slots
from xsyn.data.rows import GoldRow, class_label, tags_per_token, token_segment

if TYPE_CHECKING:
    from xsyn.data.decode import DecodeInput


def _intent_slot_example(row: GoldRow) -> Example:
    segment = token_segment(row)
    return Example(row.uid, [segment], label=class_label(row), tags=tags_per_token(row, len(segment.tokens or [])))


def _intent_slot_labels(gold: WindowGold, tree, last_segment: int) -> dict[str, Any]:
    return {"intent_labels": gold.label,
            "slot_labels": window_piece_labels(gold.piece_tags, tree.segment_id, tree.window)}


def _decode_intent_slots(data: DecodeInput) -> list[Any]:
    return list(zip(argmax_labels(data, "intent_logits"), decoded_tags(data, "slot_logits")))


def _intent_slot_reference(example: Example, metric: str) -> Any:
    return example.label, example.tags


def _present_intent_slots(data: DecodeInput) -> list[dict[str, Any]]:
    from xsyn.data.decode import mean_logits

    out = []
    for i, w in enumerate(data.windows):
        logits = mean_logits(data.outputs["intent_logits"], w)
        tokens, tags = tagged_tokens(data, i, "slot_logits")
        out.append({"intent": data.labels[int(logits.argmax())],
                    "intent_probabilities": probabilities(logits, data.labels), "tokens": tokens,
                    "slots": entities(tags, data.token_spans[i], data.texts[i])})
    return out


INTENT_SLOT_KINDS = (
    TaskKind("intent-slot", ("tokens",), 1, Gold(("label", "tags"), ("labels", "tags"), _intent_slot_example),
             head="intent_slot", label_columns=("intent_labels", "slot_labels"), piece_label_columns=("slot_labels",),
             output_keys=("intent_logits", "slot_logits"), windowed=True,
             window_labels=_intent_slot_labels, decode=_decode_intent_slots, reference=_intent_slot_reference,
             write_predictions=write_intent_slots, present=_present_intent_slots,
             pipeline_tag="token-classification"),
)
