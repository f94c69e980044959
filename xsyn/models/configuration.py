"""`XsynBertConfig`: a `BertConfig` that also carries the syntax variant and its settings.

The settings are saved in `config.json` next to BERT's own, so `from_pretrained` on a saved xsyn
model restores the variant exactly. Every setting is checked when the config is made (and again
when a model is built from it), so a bad value fails at once with the field's name, never deep
inside a forward pass.

The config's own fields are `variant` (a registered name, see `xsyn.models.variants`; saved as that
string) and `syntax_layers` (the encoder layers, 0-based, that a layer-wise variant changes; default
all). Each registered variant adds its own settings, declared in its module's schema (`xsyn.models.variants.gat`
...): they are not class fields but attributes the config sets from the registry when it is made (so a variant
registered after this module was imported counts as much as a built-in one), with their defaults where not
given, each checked against its schema's type and rules, then the variants' rules across fields (`validate`).

Head sizes and label names live here too, so a saved model restores its head and names its outputs:
`num_labels` with `id2label`/`label2id` (BERT's own fields; sequence and token heads: the class
labels or tags in id order), `num_intents` with `intent_labels` and `num_slot_labels` with
`slot_labels` (the intent-slot head).
"""

from __future__ import annotations

from huggingface_hub.dataclasses import strict
from transformers import BertConfig

from xsyn.models.variants import all_variants, get_variant, setting_fields
from xsyn.models.variants.base import CommonSettings, SyntaxConfigError
from xsyn.utils.schema import Invalid, check_value

__all__ = ["SyntaxConfigError", "XsynBertConfig"]


@strict
class XsynBertConfig(BertConfig, CommonSettings):
    model_type = "xsyn_bert"

    def __post_init__(self, **kwargs):
        for name, field in setting_fields().items():  # the variants' settings, as keyword arguments
            if field.owner is not CommonSettings:
                kwargs.setdefault(name, field.default)
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
        """Raise `SyntaxConfigError` (`setting: problem`) naming the first setting that cannot work: each
        setting against its schema, the variant, the layers, each registered variant's rules across fields
        (whichever is chosen), the heads'. `@strict` runs them again after `__init__`, wrapped in its own error."""
        self.validate_setting_values()
        self.validate_variant()
        self.validate_layers()
        self.validate_variant_rules()
        self.validate_head_labels()

    def validate_setting_values(self) -> None:
        for name, field in setting_fields().items():
            if not hasattr(self, name):  # a variant registered since this config was made
                setattr(self, name, field.default)
            check_value(field.owner, name, field.hint, getattr(self, name), "", name, error=SyntaxConfigError)

    def validate_variant(self) -> None:
        get_variant(self.variant)  # raises, naming the registered variants

    def validate_layers(self) -> None:
        layers = self.num_hidden_layers
        for layer in self.syntax_layers or []:
            if not 0 <= layer < layers:
                raise SyntaxConfigError("", "syntax_layers", f"contains {layer}, but the model has layers "
                                        f"0..{layers - 1}; give 0-based layer numbers within that range")
        if self.syntax_layers is not None and not self.syntax_layers:
            raise SyntaxConfigError("", "syntax_layers", "empty; leave it unset for all layers or name some")

    def validate_variant_rules(self) -> None:
        for variant in all_variants():
            try:
                variant.validate(self)
            except Invalid as err:
                raise SyntaxConfigError("", err.key, err.problem) from None

    def validate_head_labels(self) -> None:
        for names, size in (("intent_labels", "num_intents"), ("slot_labels", "num_slot_labels")):
            if getattr(self, names) is not None and len(getattr(self, names)) != getattr(self, size):
                raise SyntaxConfigError("", names, f"has {len(getattr(self, names))} names but {size}="
                                        f"{getattr(self, size)}; give one name per class")

