"""xsyn's config, encoder and head classes for every encoder family of `xsyn.models.families`.

BERT's are the hand-written `XsynBertConfig`, `XsynBertModel` and `HEAD_CLASSES`; every other family's
are those classes with the family's names put in (`XsynXLMRobertaModel`, `XsynXLMRobertaForSequenceClassification`,
config `model_type` `xsyn_xlm_roberta`, weights under `roberta.`), made here from its `EncoderFamily`
entry. The code they run is BERT's, so every variant works on every family; the encoder picks the
family's embeddings and the sequence head its classifier from the family entry.

    from xsyn.models.encoders import XsynXLMRobertaForSequenceClassification    # made on first use
    classes = family_classes(family_of("xlm-roberta"))                           # .config, .model, .heads
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from huggingface_hub.dataclasses import strict

from xsyn.models.configuration import XsynBertConfig
from xsyn.models.families import FAMILIES, EncoderFamily, family_of
from xsyn.models.heads import HEAD_CLASSES, XsynBertForSequenceClassification
from xsyn.models.modeling import XsynBertModel


@dataclass(frozen=True)
class FamilyClasses:
    config: type[XsynBertConfig]
    model: type[XsynBertModel]
    heads: dict[str, type]

    def all(self) -> tuple[type, ...]:
        return (self.model, *self.heads.values())


# BERT's hand-written classes, then every family's as it is made
_MADE = {XsynBertConfig.model_type: FamilyClasses(XsynBertConfig, XsynBertModel, dict(HEAD_CLASSES))}


def family_classes(family: EncoderFamily) -> FamilyClasses:
    """The family's xsyn classes (BERT's own; the others made from BERT's and set on this module)."""
    if family.xsyn_type not in _MADE:
        _MADE[family.xsyn_type] = _make(family)
    return _MADE[family.xsyn_type]


def _make(family: EncoderFamily) -> FamilyClasses:
    stem, module = family.stem, sys.modules[__name__]

    def subclass(base: type, attributes: dict) -> type:
        cls = type(base.__name__.replace("Bert", stem, 1), (base,), {"__module__": __name__, **attributes})
        setattr(module, cls.__name__, cls)
        return cls

    config = strict(subclass(XsynBertConfig, {"model_type": family.xsyn_type}))
    names = {"config_class": config, "base_model_prefix": family.prefix}
    model = subclass(XsynBertModel, names)
    heads = {}
    for head, base in HEAD_CLASSES.items():
        own = {"encoder_class": model}
        if base is XsynBertForSequenceClassification and family.sequence_head is not None:
            own.update(sentence_head=family.sequence_head, uses_pooler=False, features="last_hidden_state")
        heads[head] = subclass(base, {**names, **own})
    return FamilyClasses(config, model, heads)


def classes_for(model_type: str, source: str = "the model") -> FamilyClasses:
    """The xsyn classes for a checkpoint's or a saved xsyn model's `model_type`."""
    return family_classes(family_of(model_type, source))


def all_classes() -> dict[str, type]:
    """Every family's encoder and head classes by name (a saved model's `architectures` names one)."""
    return {cls.__name__: cls for family in FAMILIES.values() for cls in family_classes(family).all()}


def __getattr__(name: str):
    """A class of a family not yet made (`XsynXLMRobertaModel`): make the families' classes."""
    for family in FAMILIES.values():
        family_classes(family)
    if name in globals():
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
