"""The syntax variants xsyn builds: a name, and the `SyntaxVariant` object of the module that is that variant.

Objects are imported on first use and their modules need no torch, so the command line lists the
variants, and the task cards read their settings, without loading a model. Adding a variant is one
module and one line here (or one `register_variant` call from outside the package).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from xsyn.models.variants.base import SyntaxConfigError

if TYPE_CHECKING:
    from xsyn.models.variants.base import SyntaxVariant

_TARGETS: dict[str, str] = {
    "none": "xsyn.models.variants.none:VARIANT",
    "gat": "xsyn.models.variants.gat:VARIANT",
    "sla": "xsyn.models.variants.sla:VARIANT",
    "wla": "xsyn.models.variants.wla:VARIANT",
    "sdoi": "xsyn.models.variants.sdoi:VARIANT",
    "sep": "xsyn.models.variants.sep:VARIANT",
}
VARIANTS = tuple(_TARGETS)  # the built-in variants (the command line's choices)
_resolved: dict[str, SyntaxVariant] = {}


def variant_names() -> tuple[str, ...]:
    """Every registered variant, built-in or added by `register_variant`."""
    return tuple(_TARGETS)


def register_variant(name: str, target: str) -> None:
    """Add a variant: `target` is "module:attribute" of its `SyntaxVariant`."""
    if name in _TARGETS and _TARGETS[name] != target:
        raise ValueError(f"variant {name!r} is already registered as {_TARGETS[name]}")
    _TARGETS[name] = target


def get_variant(name: str) -> SyntaxVariant:
    if name not in _TARGETS:
        raise SyntaxConfigError(f"variant={name!r} is unknown; choose one of {', '.join(_TARGETS)}")
    if name not in _resolved:
        module, _, attribute = _TARGETS[name].partition(":")
        _resolved[name] = getattr(importlib.import_module(module), attribute)
    return _resolved[name]


def all_variants() -> tuple[SyntaxVariant, ...]:
    return tuple(get_variant(name) for name in _TARGETS)


def model_settings() -> dict[str, tuple[Any, Any]]:
    """Every `XsynBertConfig` field xsyn adds to BERT's, as {name: (type, default)}: the shared fields
    (the variant and its layers first, the heads' sizes last) and each variant's settings, read from
    their dataclasses, so without transformers or torch (`xsyn settings`, checking `--set`)."""
    import dataclasses
    import typing

    from xsyn.models.variants.base import CommonSettings

    def of(settings: type) -> dict[str, tuple[Any, Any]]:
        hints = typing.get_type_hints(settings)
        return {f.name: (hints[f.name], f.default) for f in dataclasses.fields(settings)}

    common = of(CommonSettings)
    names = list(common)
    table = dict(list(common.items())[:2])
    for variant in all_variants():
        if variant.settings is not None:
            table.update(of(variant.settings))
    table.update({name: common[name] for name in names[2:]})
    return table


def paper_names() -> dict[str, str]:
    """The papers' names for settings that the cards may still use (`delta` -> `gat_delta`)."""
    return {paper: name for variant in all_variants() for paper, name in variant.paper_names.items()}


def loss_names() -> tuple[str, ...]:
    """Every variant's auxiliary loss parts, in registry order."""
    return tuple(dict.fromkeys(part for variant in all_variants() for part in variant.loss_names()))


