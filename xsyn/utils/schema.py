"""One schema mechanism for every file a user writes: task cards, experiment files, `--config` files,
`--set` settings, pre-training settings.

A schema is a dataclass under huggingface_hub's `@strict` (the mechanism transformers' configs, so
`XsynBertConfig`, use): the annotations are the types, `validated_field(check, ...)` adds a range or choice
rule to a field, and `validate_<rule>` methods hold the rules across fields. `load(cls, table, where)` reads a
parsed TOML/JSON table into one, nested tables and arrays of tables included, and turns every failure into
one `SchemaError` of one form:

    tasks/pawsx.toml: hyperparameters.gat.gat_delta: expected an integer, got 'four'
    run.toml: unknown key 'lerning_rate'; did you mean 'learning_rate'?
    --set: seed: must be >= 0, got -1

(the file or option, the key as a dotted path, what was expected). Unknown keys and unknown tables are
errors. A TOML integer is taken where a number (float) is expected; nothing else is converted. Types are
checked against the resolved annotations, so a schema module may use `from __future__ import annotations`
(which hides them from `@strict`'s own check on assignment).
"""

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar

from huggingface_hub.dataclasses import strict, type_validator, validated_field
from huggingface_hub.errors import StrictDataclassClassValidationError, StrictDataclassFieldValidationError

from xsyn.utils.errors import XsynError

__all__ = ["Invalid", "SchemaError", "at_least", "between", "check_value", "check_values", "construct", "describe",
           "did_you_mean", "distinct", "finite_above_zero", "help_text", "load", "one_of", "setting", "strict",
           "type_mismatch", "validated_field"]

T = TypeVar("T")


class SchemaError(XsynError, ValueError):
    """A value in a file (or option) the user wrote does not fit its schema: `where: key: problem`.

    Each kind of file has its subclass (CardError, ConfigError, ExperimentError), which `load` raises when
    given as `error`; raised with one argument, it is a message of its own."""

    def __init__(self, where: str, key: str = "", problem: str = ""):
        self.where, self.key, self.problem = where, key, problem
        super().__init__(": ".join(part for part in (where, key, problem) if part))


class Invalid(ValueError):
    """Raised by a `validate_<rule>` method: the `key` (relative to the table checked) that breaks it, and why."""

    def __init__(self, key: str, problem: str):
        self.key, self.problem = key, problem
        super().__init__(f"{key}: {problem}")


def setting(default: Any = dataclasses.MISSING, *, help: str, check: Callable[[Any], None] | None = None,
            default_factory: Any = dataclasses.MISSING) -> Any:
    """A schema field that says what it means: `help` is the one text `xsyn settings` and the documentation's
    settings page show for it; `check` its rule, as `validated_field`'s."""
    metadata = {"help": help}
    if check is None:
        return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)
    return validated_field(check, default=default, default_factory=default_factory, metadata=metadata)


def same_rule(owner: type, name: str, default: Any) -> Any:
    """Field `name` of the schema `owner`, its rule and help unchanged, with another default: the same setting in
    another schema (declared there under the same annotation)."""
    declared = owner.__dataclass_fields__[name]
    return dataclasses.field(default=default, metadata=declared.metadata, kw_only=True)


def help_text(owner: type, name: str) -> str:
    """The help `setting(...)` gave field `name` of the schema `owner` ("" for a field declared without)."""
    found = {f.name: f for f in dataclasses.fields(owner)}.get(name)
    return found.metadata.get("help", "") if found is not None else ""


# -- field rules (for `validated_field(rule, default=...)`) -----------------------------------------------


def at_least(least: float) -> Callable[[Any], None]:
    """A number (each number of a list; None where the field allows it) of at least `least`."""
    def check(value: Any) -> None:
        for item in _items(value):
            if not item >= least:
                raise ValueError(f"must be >= {least}, got {item!r}")
    return check


def between(low: float, high: float, *, open_interval: bool = False) -> Callable[[Any], None]:
    """A number (each number of a list) in [low, high], or strictly between them."""
    def check(value: Any) -> None:
        for item in _items(value):
            if not (low < item < high if open_interval else low <= item <= high):
                bounds = f"strictly between {low} and {high}" if open_interval else f"from {low} to {high}"
                raise ValueError(f"must be {bounds}, got {item!r}")
    return check


def finite_above_zero(value: Any) -> None:
    """A finite number above zero (a rate, a count of epochs), or None where the field allows it."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ValueError(f"must be a finite number > 0, got {value!r}")


def one_of(choices: Callable[[], Iterable[str]] | Iterable[str]) -> Callable[[Any], None]:
    """One of `choices` (each item of a list), or of what a registry holds when the check runs (a function)."""
    def check(value: Any) -> None:
        known = list(choices() if callable(choices) else choices)
        for item in _items(value):
            if item not in known:
                raise ValueError(f"{item!r} is not one of {', '.join(map(str, known))}{did_you_mean(item, known)}")
    return check


def distinct(values: Any) -> None:
    """A non-empty list (or table) that names nothing twice; None passes (a field's "not given")."""
    if values is None:
        return
    if not values:
        raise ValueError("must not be empty")
    items = list(values)
    twice = sorted({repr(item) for item in items if items.count(item) > 1})
    if twice:
        raise ValueError(f"lists {', '.join(twice)} twice")


def _items(value: Any) -> list:
    return [v for v in (value if isinstance(value, list | tuple) else [value]) if v is not None]


# -- loading ------------------------------------------------------------------------------------------------


def did_you_mean(name: Any, known: Iterable[str], renamed: Mapping[str, str] | None = None) -> str:
    """'; did you mean X?' for a misspelt (or renamed: `renamed` maps an old name to its new one) name, else ''."""
    if renamed and name in renamed:
        return f"; did you mean {renamed[name]!r}?"
    close = difflib.get_close_matches(str(name), sorted(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_values(cls: type, table: Any, where: str, key: str = "", *, required: bool = True,
                 error: type[SchemaError] = SchemaError) -> dict[str, Any]:
    """`table`'s values checked against `cls`'s fields (unknown keys, types, field rules, nested tables read
    into their dataclasses); the values, ready for `cls(**values)`. `required=False` checks a partial table
    (a `--config` file whose values are merged with others before the object is made). Errors are `error`s."""
    if not isinstance(table, dict):
        raise error(where, key, f"expected a table, got {_show(table)}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for name in table:
        if name not in known:
            raise error(where, _join(key, name), "unknown key" + did_you_mean(name, known)
                              + f" (known keys: {', '.join(sorted(known))})")
    values: dict[str, Any] = {}
    for name, f in known.items():
        here = _join(key, name)
        if name not in table:
            if required and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise error(where, here, f"missing; expected {describe(hints[name])}")
            continue
        values[name] = check_value(cls, name, hints[name], table[name], where, here, error=error)
    return values


def check_value(cls: type, name: str, hint: Any, value: Any, where: str, here: str, *,
                error: type[SchemaError] = SchemaError) -> Any:
    """One field's value: converted (nested tables, lists to tuples, integers to numbers), then checked against
    the field's resolved annotation (`@strict`'s type check) and its rules."""
    value = _convert(hint, value, where, here, error)
    try:
        type_validator(name, value, hint)
    except TypeError:
        here, hint, value = _first_mismatch(hint, value, here)
        raise error(where, here, f"expected {describe(hint)}, got {_show(value)}") from None
    rules = cls.__dataclass_fields__[name].metadata.get("validator", [])
    for rule in rules if isinstance(rules, list) else [rules]:
        try:
            rule(value)
        except (TypeError, ValueError) as err:
            raise error(where, here, str(err)) from None
    return value


def load(cls: type[T], table: Any, where: str, key: str = "", *, error: type[SchemaError] = SchemaError) -> T:
    """A `cls` from a parsed TOML/JSON table; any mistake is an `error` naming `where` and the key."""
    values = check_values(cls, table, where, key, error=error)
    return construct(cls, values, where, key, error=error)


def construct(cls: type[T], values: dict[str, Any], where: str, key: str = "", *,
              error: type[SchemaError] = SchemaError) -> T:
    """`cls(**values)`, with its field rules and its rules across fields (`validate_*`) reported as `error`s."""
    try:
        return cls(**values)
    except (StrictDataclassClassValidationError, StrictDataclassFieldValidationError) as err:
        cause = err.__cause__
        if isinstance(cause, Invalid):
            raise error(where, _join(key, cause.key), cause.problem) from None
        raise error(where, key, str(cause)) from None


def type_mismatch(value: Any, hint: Any) -> str | None:
    """None if `value` fits the annotation `hint` (as `load` reads it: an integer is a number); else what was
    expected, in words (for a config checking its own fields)."""
    try:
        type_validator("value", _convert(hint, value, "", "", SchemaError), hint)
    except (TypeError, SchemaError):
        return describe(hint)
    return None


def _convert(hint: Any, value: Any, where: str, here: str, error: type[SchemaError]) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        tables = [a for a in args if dataclasses.is_dataclass(a)]
        if isinstance(value, dict) and len(tables) == 1:
            return load(tables[0], value, where, here, error=error)
        if isinstance(value, list):
            sequence = [a for a in args if typing.get_origin(a) in (list, tuple)]
            return _convert(sequence[0], value, where, here, error) if sequence else value
        if float in args and isinstance(value, int) and not isinstance(value, bool) and int not in args:
            return float(value)
        return value
    if dataclasses.is_dataclass(hint):
        return load(hint, value, where, here, error=error) if isinstance(value, dict) else value
    if origin in (list, tuple) and isinstance(value, list | tuple):
        item = args[0] if args else Any
        items = [_convert(item, v, where, f"{here}[{i}]", error) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        return {k: _convert(args[1], v, where, _join(here, str(k)), error) for k, v in value.items()}
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _first_mismatch(hint: Any, value: Any, here: str) -> tuple[str, Any, Any]:
    """The innermost item of a list or table that does not fit, with its key and type (the whole value if none)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (list, tuple) and isinstance(value, list | tuple) and args:
        items = [(f"{here}[{i}]", item) for i, item in enumerate(value)]
    elif origin is dict and isinstance(value, dict) and len(args) == 2:
        items = [(_join(here, str(k)), item) for k, item in value.items()]
    else:
        return here, hint, value
    inner = args[1] if origin is dict else args[0]
    for key, item in items:
        try:
            type_validator(key, item, inner)
        except TypeError:
            return _first_mismatch(inner, item, key)
    return here, hint, value


def describe(hint: Any) -> str:
    """A type annotation in words: 'an integer', 'a list of strings', 'one of no, fp16, bf16' ..."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        shown = [a for a in args if a is not type(None) and not (a is int and float in args)]  # an int is a number
        return " or ".join(describe(a) for a in shown)
    if origin is Literal:
        return "one of " + ", ".join(map(str, args))
    if origin in (list, tuple):
        return f"a list of {_plural(args[0])}" if args else "a list"
    if origin is dict or dataclasses.is_dataclass(hint):
        return f"a table of {_plural(args[1])}" if len(args) == 2 and args[1] is not Any else "a table"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false", Any: "any value"}.get(
        hint, str(hint))


def _plural(hint: Any) -> str:
    return {int: "integers", float: "numbers", str: "strings", bool: "true/false values"}.get(
        hint, f"({describe(hint)})")


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a table"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name
