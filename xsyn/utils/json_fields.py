"""Typed reads of fields of JSON objects in data files (SQuAD, RACE, MTOP's tokens JSON).

JSON has its own types, and a file written by another tool may use the wrong one: `"is_impossible":
"false"` is a string, which Python's `bool()` reads as true. A field is read through `field(obj, key,
type)`, which takes only the JSON type the format specifies and says what it found otherwise:

    is_impossible: expected true/false, got the string 'false'

The error is a ValueError; the reader adds the file and the place in it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["MISSING", "field", "shown"]

MISSING: Any = object()  # `default` when the field is required

_EXPECTED = {bool: "true/false", str: "a string", int: "a whole number", float: "a number", list: "a list",
             dict: "an object"}


def field(obj: Any, key: str, kind: type, default: Any = MISSING) -> Any:
    """`obj[key]`, which must be of JSON type `kind` (bool, str, int, float, list, dict); `default` where the
    field may be absent. A number is taken as a float; true/false is never a number."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"expected an object with a {key!r} field, got {shown(obj)}")
    if key not in obj:
        if default is MISSING:
            raise ValueError(f"no {key!r} field")
        return default
    value = obj[key]
    if not _fits(value, kind):
        raise ValueError(f"{key}: expected {_EXPECTED[kind]}, got {shown(value)}")
    return float(value) if kind is float else value


def _fits(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return kind is bool
    return isinstance(value, (int, float)) if kind is float else isinstance(value, kind)


def shown(value: Any) -> str:
    """A JSON value as a message shows it: its type in words, then its first 60 characters."""
    text = json.dumps(value, ensure_ascii=False)
    text = text if len(text) <= 60 else text[:57] + "..."
    if isinstance(value, str):
        return f"the string {value[:57]!r}"
    if value is None or isinstance(value, bool):
        return text
    if isinstance(value, (int, float)):
        return f"the number {text}"
    return f"{'a list' if isinstance(value, list) else 'an object'} {text}"
