"""The syntax variants xsyn builds: a registry of names to the `SyntaxVariant` object of the module that is
that variant (`xsyn.utils.registry`).

Objects are imported on first use and their modules need no torch, so the command line lists the
variants, and the task cards read their settings, without loading a model. Adding a variant is one
folder (`<name>/__init__.py` declaring it, `<name>/layers.py` its torch modules: `base.py` says more) and one
line here; another package adds one through the entry-point group `xsyn.variants`
("module:attribute" of its `SyntaxVariant`), or at run time with `register_variant`. Nothing is read from
the registry when a module is imported: a variant registered late is seen everywhere, its settings included.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any

from xsyn.models.families import FAMILIES, resolve
from xsyn.models.variants.base import DEFAULT_VARIANT as DEFAULT_VARIANT  # re-exported: the run settings read it here
from xsyn.models.variants.base import CommonSettings, ReleasedCode, SyntaxConfigError, SyntaxVariant
from xsyn.utils.registry import Registry

BUILT_IN = {
    "none": "xsyn.models.variants.none:VARIANT",
    "gat": "xsyn.models.variants.gat:VARIANT",
    "sla": "xsyn.models.variants.sla:VARIANT",
    "wla": "xsyn.models.variants.wla:VARIANT",
    "sdoi": "xsyn.models.variants.sdoi:VARIANT",
    "sep": "xsyn.models.variants.sep:VARIANT",
}
VARIANTS = tuple(BUILT_IN)  # the built-in variants (no plug-in's: every registered one is `variant_names()`)


def _foreign_claims(variant: SyntaxVariant) -> str | None:
    """A variant from elsewhere (another package, `register_variant`) declares a settings schema, and settings and
    paper names of its own: one that xsyn's shared settings, BERT's config or a built-in variant declares already
    would take that one's default away in every run (a plugin's `gat_residual = True` would change every gat run)."""
    if variant.name in VARIANTS:  # xsyn's own: their tests keep them apart
        return None
    schema = variant.settings
    if schema is not None and not (isinstance(schema, type) and dataclasses.is_dataclass(schema)):
        return (f"declares settings = {schema!r}, which is not a settings schema: give a @strict dataclass "
                "(xsyn.utils.schema), or None")
    if not isinstance(variant.paper_names, dict):
        return f"declares paper_names = {variant.paper_names!r}; give a dict {{paper's name: setting}} or none"
    owners = _owners()
    claimed = [name for name in (*(f.name for f in dataclasses.fields(schema or CommonSettings) if schema),
                                 *variant.paper_names) if name in owners]
    if claimed:
        return (f"declares {', '.join(claimed)}, which {owners[claimed[0]]} declares already (a second declaration "
                "would change its default in every run): give the variant's settings names of their own")
    return None


def _owners() -> dict[str, str]:
    """Who declares each name a variant's settings or paper names may not take."""
    owners: dict[str, str] = {}
    for family in FAMILIES.values():
        config = resolve(family.config)
        for name in (*(f.name for f in dataclasses.fields(config)), *config().to_dict()):
            owners.setdefault(name, f"{family.name}'s config")
    owners.update(dict.fromkeys((f.name for f in dataclasses.fields(CommonSettings)), "xsyn's shared settings"))
    for name in VARIANTS:
        variant = VARIANT_REGISTRY[name]
        own = [f.name for f in dataclasses.fields(variant.settings)] if variant.settings is not None else []
        owners.update(dict.fromkeys([*own, *variant.paper_names], f"variant {name!r}"))
    return owners


VARIANT_REGISTRY: Registry[SyntaxVariant] = Registry(
    "variant", BUILT_IN, group="xsyn.variants", of=SyntaxVariant, name_of=lambda variant: variant.name,
    check=_foreign_claims, error=SyntaxConfigError)


@dataclasses.dataclass(frozen=True)
class SettingField:
    """One model setting xsyn adds to BERT's config: the schema declaring it, its type and its default."""

    owner: type
    name: str
    hint: Any
    default: Any


def variant_names() -> tuple[str, ...]:
    """Every registered variant: built-in, from an entry point, or added by `register_variant`."""
    return VARIANT_REGISTRY.names()


def register_variant(name: str, target: str | SyntaxVariant) -> None:
    """Add a variant: `target` is its `SyntaxVariant`, or "module:attribute" of it."""
    VARIANT_REGISTRY.add(name, target)


def get_variant(name: str) -> SyntaxVariant:
    return VARIANT_REGISTRY[name]


def baseline_name() -> str:
    """The registered variant that is plain BERT, which the others are compared with."""
    return next(variant.name for variant in all_variants() if variant.is_baseline)


def all_variants() -> tuple[SyntaxVariant, ...]:
    return tuple(VARIANT_REGISTRY.values())


def setting_fields() -> dict[str, SettingField]:
    """Every `XsynBertConfig` field xsyn adds to BERT's, by name, read from the schemas that declare them
    (without transformers or torch): the shared fields (the variant and its layers first, the heads' sizes
    last) and each registered variant's settings. The one place the model settings' types are derived."""
    def of(owner: type) -> dict[str, SettingField]:
        hints = _type_hints(owner)
        return {f.name: SettingField(owner, f.name, hints[f.name], _default(f)) for f in dataclasses.fields(owner)}

    common = of(CommonSettings)
    names = list(common)
    table = {name: common[name] for name in names[:2]}
    for variant in all_variants():
        if variant.settings is not None:
            table.update(of(variant.settings))
    table.update({name: common[name] for name in names[2:]})
    return table


def check_pretrained(name: str, option: str) -> None:
    """Refuse `option` (a pre-trained syntax module's) for a variant that has none, naming those that have one."""
    if not get_variant(name).has_pretrained():
        having = ", ".join(variant.name for variant in all_variants() if variant.has_pretrained())
        raise SyntaxConfigError(f"{option}: variant {name!r} has no pre-trained syntax module; drop {option}"
                                + (f", or choose a variant that has one ({having})" if having else ""))


def option_settings() -> dict[str, tuple[SettingField, str]]:
    """The settings that registered variants give a command-line option of their own (`SyntaxVariant.options`):
    name -> (the setting, the option's help)."""
    return _with_fields({name: help for variant in all_variants() for name, help in variant.options.items()})


def pretraining_variant() -> SyntaxVariant:
    """The variant whose syntax module xsyn pre-trains (`xsyn.pretraining`): the first registered one that declares
    `pretraining`."""
    found = next((variant for variant in all_variants() if variant.pretraining is not None), None)
    if found is None:
        raise SyntaxConfigError("no registered variant declares a syntax module to pre-train (`SyntaxVariant."
                                "pretraining`)")
    return found


def pretraining_command() -> str:
    """The command that pre-trains (`pretrain-<variant>`)."""
    return f"pretrain-{pretraining_variant().name}"


def pretraining_option_settings() -> dict[str, tuple[SettingField, str]]:
    """The settings with a command-line option of their own in pre-training (`Pretraining.options`): name -> (the
    setting, the option's help)."""
    return _with_fields(pretraining_variant().pretraining.options)


def _with_fields(options: dict[str, str]) -> dict[str, tuple[SettingField, str]]:
    table = setting_fields()
    return {name: (table[name], help) for name, help in options.items()}


def model_settings() -> dict[str, tuple[Any, Any]]:
    """Every model setting xsyn adds, as {name: (type, default)} (`xsyn settings`)."""
    return {name: (field.hint, field.default) for name, field in setting_fields().items()}


def paper_names() -> dict[str, str]:
    """The papers' names for settings that the cards may still use (`delta` -> `gat_delta`)."""
    return {paper: name for variant in all_variants() for paper, name in variant.paper_names.items()}


PAPER = "paper"  # `reproduce`'s default: xsyn's reading of the papers' text


def released_codes() -> dict[str, tuple[str, ReleasedCode]]:
    """The released codes the registered variants declare, by name: (the variant, its `ReleasedCode`)."""
    found: dict[str, tuple[str, ReleasedCode]] = {}
    for variant in all_variants():
        code = variant.released_code
        if code is not None:
            if code.name in found or code.name == PAPER:
                raise SyntaxConfigError(f"variant {variant.name!r} declares the released code {code.name!r}, which "
                                        f"{found[code.name][0] if code.name in found else 'xsyn'} names already")
            found[code.name] = (variant.name, code)
    return found


def reproduce_choices() -> tuple[str, ...]:
    """The values `reproduce` takes: the papers' text, or a released code."""
    return (PAPER, *released_codes())


def released_settings(name: str, variant: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """What `reproduce=name` sets in a run of `variant`: the code's run settings (every variant's, the baseline's
    included: its data path builds their inputs) and, where `variant` is the one whose code it is, that
    variant's model settings. The papers' text (`paper`) sets nothing."""
    if name == PAPER:
        return {}, {}
    owner, code = released_codes()[name]
    return dict(code.inputs), dict(code.model) if owner == variant else {}


def loss_names() -> tuple[str, ...]:
    """Every variant's auxiliary loss parts, in registry order."""
    return tuple(dict.fromkeys(part for variant in all_variants() for part in variant.loss_names()))


@functools.cache
def _type_hints(owner: type) -> dict[str, Any]:
    """A schema's resolved annotations, once per class: `typing.get_type_hints` evaluates every annotation's text
    anew, and settings are checked per run (li2021's 2,340 cells spent 15 s of their 20 s in it)."""
    return typing.get_type_hints(owner)


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
