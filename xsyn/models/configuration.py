"""`XsynBertConfig`: a `BertConfig` that also carries the syntax variant and its settings.

The settings are saved in `config.json` next to BERT's own, so `from_pretrained` on a saved xsyn
model restores the variant exactly. Every setting is checked when the config is made (and again
when a model is built from it), so a bad value fails at once with the field's name, never deep
inside a forward pass.

The config's own fields are `variant` (a registered name, see `xsyn.models.variants`; saved as that
string) and `syntax_layers` (the encoder layers, 0-based, that a layer-wise variant changes; default
all). Each variant adds its own settings, documented in its module (`xsyn.models.variants.gat` ...),
and checks them in its `validate_<variant>`.

Head sizes and label names live here too, so a saved model restores its head and names its outputs:
`num_labels` with `id2label`/`label2id` (BERT's own fields; sequence and token heads: the class
labels or tags in id order), `num_intents` with `intent_labels` and `num_slot_labels` with
`slot_labels` (the intent-slot head).
"""

from __future__ import annotations

import functools
from typing import Any

from huggingface_hub.dataclasses import strict
from transformers import BertConfig

from xsyn.models.variants import all_variants, get_variant, model_settings
from xsyn.models.variants.base import CommonSettings, SyntaxConfigError
from xsyn.utils.schema import type_mismatch

__all__ = ["SyntaxConfigError", "XsynBertConfig", "syntax_setting_types"]


def _variant_settings() -> tuple[type, ...]:
    """Each variant's settings dataclass: together, the fields XsynBertConfig adds for the variants."""
    return tuple(variant.settings for variant in all_variants() if variant.settings is not None)


@strict
class XsynBertConfig(BertConfig, CommonSettings, *_variant_settings()):
    model_type = "xsyn_bert"

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        if self.intent_labels is not None and self.num_intents is None:
            self.num_intents = len(self.intent_labels)
        if self.slot_labels is not None and self.num_slot_labels is None:
            self.num_slot_labels = len(self.slot_labels)
        self.check_syntax()

    @classmethod
    def from_bert_config(cls, config: BertConfig, **syntax) -> XsynBertConfig:
        """Lift a BERT checkpoint's config: its architecture, plus the given syntax settings."""
        dropped = {"model_type", "architectures"}
        if "num_labels" in syntax or "id2label" in syntax:  # the new head's labels replace the checkpoint's
            dropped |= {"id2label", "label2id"} - set(syntax)
        settings = {k: v for k, v in config.to_dict().items() if k not in dropped}
        settings.update(syntax)
        return cls(**settings)

    def validate_attention_heads(self) -> None:
        """BertSelfAttention splits the hidden size into the heads: caught here, before a model is built."""
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads "
                             f"{self.num_attention_heads}: choose a head count that divides it")

    def validate_dropout(self) -> None:
        """BERT's dropout rates are probabilities; transformers' own config takes any number."""
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout"):
            value = getattr(self, name, None)
            if value is not None and not 0 <= value <= 1:
                raise ValueError(f"{name} must be a probability from 0 to 1, got {value}")

    @property
    def syntax_layer_ids(self) -> list[int]:
        """The layers whose self-attention sees syntax (all of them unless `syntax_layers` says)."""
        if self.syntax_layers is None:
            return list(range(self.num_hidden_layers))
        return sorted(set(self.syntax_layers))

    def check_syntax(self) -> None:
        """Raise `SyntaxConfigError` naming the first setting that cannot work: the class validators
        below, then each variant's `validate_<variant>` (every variant's settings are checked, whichever
        is chosen), then the heads'. `@strict` runs them again after `__init__`, wrapped in its own error."""
        self.validate_setting_types()
        self.validate_variant()
        self.validate_layers()
        for variant in all_variants():
            if variant.settings is not None and isinstance(self, variant.settings):
                getattr(self, f"validate_{variant.name}")()
        self.validate_head_labels()

    def validate_setting_types(self) -> None:
        for name, hint in syntax_setting_types().items():
            expected = type_mismatch(getattr(self, name), hint)
            if expected:
                raise SyntaxConfigError(f"{name}={getattr(self, name)!r} must be {expected}")

    def validate_variant(self) -> None:
        get_variant(self.variant)  # raises, naming the registered variants

    def validate_layers(self) -> None:
        layers = self.num_hidden_layers
        for layer in self.syntax_layers or []:
            if not 0 <= layer < layers:
                raise SyntaxConfigError(
                    f"syntax_layers contains {layer}, but the model has layers 0..{layers - 1}; "
                    "give 0-based layer numbers within that range")
        if self.syntax_layers is not None and not self.syntax_layers:
            raise SyntaxConfigError("syntax_layers is empty; leave it unset for all layers or name some")

    def validate_head_labels(self) -> None:
        for names, size in (("intent_labels", "num_intents"), ("slot_labels", "num_slot_labels")):
            if getattr(self, names) is not None and len(getattr(self, names)) != getattr(self, size):
                raise SyntaxConfigError(f"{names} has {len(getattr(self, names))} names but {size}="
                                        f"{getattr(self, size)}; give one name per class")


@functools.cache
def syntax_setting_types() -> dict[str, Any]:
    """The type of each setting `XsynBertConfig` adds to `BertConfig` (settings that arrive as JSON or
    `--set` strings are checked against them)."""
    return {name: hint for name, (hint, _) in model_settings().items()}
