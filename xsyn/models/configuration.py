"""`XsynBertConfig`: a `BertConfig` that also carries the syntax variant and its settings.

The settings are saved in `config.json` next to BERT's own, so `from_pretrained` on a saved xsyn
model restores the variant exactly. Every setting is checked when the config is made (and again
when a model is built from it), so a bad value fails at once with the field's name, never deep
inside a forward pass.

| field                     | default       | used by      | meaning                                                   |
|---------------------------|---------------|--------------|-----------------------------------------------------------|
| `variant`                 | `"gat"`       | all          | `none`, `gat`, `sla`, `wla`, `sdoi` or `sep`              |
| `syntax_layers`           | all layers    | gat sla wla  | encoder layers (0-based) whose self-attention sees syntax |
|                           |               | sep          | (sep: whose input is mixed with its distance view)        |
| `syntax_heads`            | 1             | gat          | attention heads (the first n) biased by the GAT output    |
| `bias_targets`            | `"query,key"` | gat          | projections the GAT bias is added to (paper: query,key;   |
|                           |               |              | released code: key,value)                                 |
| `gat_layers`              | 4             | gat          | GAT layers (L_g)                                          |
| `gat_heads`               | 4             | gat          | GAT heads (k)                                             |
| `gat_head_size`           | 64            | gat          | size of one GAT head (d_g); the GAT output has k * d_g    |
| `gat_delta`               | 4             | gat          | GAT attention reaches tree distance <= delta              |
| `gat_attention`           | `"dot"`       | gat          | `dot` (paper eq. 2, query = key) or `additive`            |
|                           |               |              | (Velickovic-style, as in the released code)               |
| `gat_deprel_embeddings`   | False         | gat          | add a dependency-relation embedding to the GAT input      |
| `gat_residual`            | False         | gat          | add each GAT layer's input to its output where the sizes  |
|                           |               |              | match (not in the paper; helps pre-training, see README)  |
| `gat_edge_direction`      | False         | gat          | a learned attention logit per GAT layer, head and edge    |
|                           |               |              | relation (self, head, dependent, further): lets the GAT   |
|                           |               |              | tell a piece's head from its dependents (not in the paper)|
| `gat_position_embeddings` | False         | gat          | add BERT's position embeddings to the GAT input, so that  |
|                           |               |              | identical words in mirrored places of a tree get distinct |
|                           |               |              | inputs (not in the paper; helps pre-training, see README) |
| `probe_rank`              | 64            | gat          | rank of the structural probes theta1, theta2              |
| `structural_loss_weight`  | 0.5           | gat          | alpha in loss = task + alpha (distance + depth)           |
| `sla_distance`            | 3             | sla          | m: word j is local to word i iff min over i-1, i, i+1 of  |
|                           |               |              | the tree distance to j is <= m                            |
| `sla_punct_visible`       | False         | sla          | punctuation is local to every word                        |
| `wla_window`              | 4             | wla          | k: word j is local to word i iff abs(i - j) <= k          |
| `sdoi_alpha`              | 0.5           | sdoi         | H' = alpha H + (1 - alpha) H_sdoi                         |
| `sdoi_learn_alpha`        | False         | sdoi         | make alpha a trained parameter (initialised to the above) |
| `sdoi_init_from_last_layer` | False       | sdoi         | start the extra layer as a copy of the checkpoint's last  |
|                           |               |              | layer (SG-Net: random); applies when lifting a checkpoint |
| `sep_alpha`               | 0.1           | sep          | H' = (1 - alpha) H + alpha sigmoid(W1 H + W2 D~ H); the   |
|                           |               |              | SEPREM summary gives no value                             |
| `sep_learn_alpha`         | False         | sep          | make alpha a trained parameter (initialised to the above) |
| `sep_distance_loss_weight`| 0.0           | sep          | weight of SEPREM's dependency-distance prediction loss in |
|                           |               |              | fine-tuning (0: off; the head exists only when > 0)       |
| `sep_max_distance`        | 8             | sep          | its classes: distances 1 .. K-1 and "K or more"           |

Head sizes and label names live here too, so a saved model restores its head and names its outputs:
`num_labels` with `id2label`/`label2id` (BERT's own fields; sequence and token heads: the class
labels or tags in id order), `num_intents` with `intent_labels` and `num_slot_labels` with
`slot_labels` (the intent-slot head).
"""

from __future__ import annotations

import functools
import typing
from typing import Any

from huggingface_hub.dataclasses import strict
from transformers import BertConfig

from xsyn.models.defaults import GAT_ATTENTIONS
from xsyn.models.variants import VARIANTS
from xsyn.utils.errors import XsynError
from xsyn.utils.typecheck import type_mismatch

BIAS_TARGETS = ("query", "key", "value")


class SyntaxConfigError(XsynError, ValueError):
    """A syntax setting that cannot work with this model; the message names the field and the fix."""


@strict
class XsynBertConfig(BertConfig):
    model_type = "xsyn_bert"

    variant: str = "gat"
    syntax_layers: list[int] | None = None
    syntax_heads: int = 1
    bias_targets: str = "query,key"
    gat_layers: int = 4
    gat_heads: int = 4
    gat_head_size: int = 64
    gat_delta: int = 4
    gat_attention: str = "dot"
    gat_deprel_embeddings: bool = False
    gat_residual: bool = False
    gat_edge_direction: bool = False
    gat_position_embeddings: bool = False
    probe_rank: int = 64
    structural_loss_weight: float | int = 0.5
    sla_distance: int = 3
    sla_punct_visible: bool = False
    wla_window: int = 4
    sdoi_alpha: float | int = 0.5
    sdoi_learn_alpha: bool = False
    sdoi_init_from_last_layer: bool = False
    sep_alpha: float | int = 0.1
    sep_learn_alpha: bool = False
    sep_distance_loss_weight: float | int = 0.0
    sep_max_distance: int = 8
    num_intents: int | None = None
    num_slot_labels: int | None = None
    intent_labels: list[str] | None = None  # intent names in id order (intent-slot head)
    slot_labels: list[str] | None = None  # slot tag names in id order

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

    @property
    def syntax_layer_ids(self) -> list[int]:
        """The layers whose self-attention sees syntax (all of them unless `syntax_layers` says)."""
        if self.syntax_layers is None:
            return list(range(self.num_hidden_layers))
        return sorted(set(self.syntax_layers))

    @property
    def bias_target_names(self) -> tuple[str, ...]:
        return tuple(t.strip() for t in self.bias_targets.split(",") if t.strip())

    @property
    def gat_output_size(self) -> int:
        return self.gat_heads * self.gat_head_size

    def check_syntax(self) -> None:
        """Raise `SyntaxConfigError` naming the first setting that cannot work."""
        for name, hint in syntax_setting_types().items():
            expected = type_mismatch(getattr(self, name), hint)
            if expected:
                raise SyntaxConfigError(f"{name}={getattr(self, name)!r} must be {expected}")
        if self.variant not in VARIANTS:
            raise SyntaxConfigError(f"variant={self.variant!r} is unknown; choose one of {', '.join(VARIANTS)}")
        layers = self.num_hidden_layers
        for layer in self.syntax_layers or []:
            if not 0 <= layer < layers:
                raise SyntaxConfigError(
                    f"syntax_layers contains {layer}, but the model has layers 0..{layers - 1}; "
                    "give 0-based layer numbers within that range")
        if self.syntax_layers is not None and not self.syntax_layers:
            raise SyntaxConfigError("syntax_layers is empty; leave it unset for all layers or name some")
        if not 1 <= self.syntax_heads <= self.num_attention_heads:
            raise SyntaxConfigError(
                f"syntax_heads={self.syntax_heads}, but a syntax head is one of the model's "
                f"{self.num_attention_heads} attention heads; use 1..{self.num_attention_heads}")
        targets = self.bias_target_names
        if not targets or any(t not in BIAS_TARGETS for t in targets) or len(set(targets)) != len(targets):
            raise SyntaxConfigError(
                f"bias_targets={self.bias_targets!r}; give distinct names from {', '.join(BIAS_TARGETS)}, "
                "comma-separated (paper: 'query,key'; released code: 'key,value')")
        for name in ("gat_layers", "gat_heads", "gat_head_size", "gat_delta", "probe_rank"):
            if getattr(self, name) < 1:
                raise SyntaxConfigError(f"{name}={getattr(self, name)} must be >= 1")
        if self.gat_attention not in GAT_ATTENTIONS:
            raise SyntaxConfigError(
                f"gat_attention={self.gat_attention!r}; choose one of {', '.join(GAT_ATTENTIONS)}")
        if self.structural_loss_weight < 0:
            raise SyntaxConfigError(f"structural_loss_weight={self.structural_loss_weight} must be >= 0")
        for name in ("sla_distance", "wla_window"):
            if getattr(self, name) < 0:
                raise SyntaxConfigError(f"{name}={getattr(self, name)} must be >= 0")
        for name in ("sdoi_alpha", "sep_alpha"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise SyntaxConfigError(f"{name}={getattr(self, name)} must lie in [0, 1]")
        if self.sep_distance_loss_weight < 0:
            raise SyntaxConfigError(f"sep_distance_loss_weight={self.sep_distance_loss_weight} must be >= 0")
        if self.sep_max_distance < 2:
            raise SyntaxConfigError(f"sep_max_distance={self.sep_max_distance} must be >= 2 (a class for "
                                    "distance 1 and one for 'that or more')")
        for names, size in (("intent_labels", "num_intents"), ("slot_labels", "num_slot_labels")):
            if getattr(self, names) is not None and len(getattr(self, names)) != getattr(self, size):
                raise SyntaxConfigError(f"{names} has {len(getattr(self, names))} names but {size}="
                                        f"{getattr(self, size)}; give one name per class")


@functools.cache
def syntax_setting_types() -> dict[str, Any]:
    """The type of each setting `XsynBertConfig` adds to `BertConfig` (settings that arrive as JSON or
    `--set` strings are checked against them)."""
    import torch

    hints = typing.get_type_hints(XsynBertConfig, localns={"torch": torch})  # BertConfig's hints name torch
    return {name: hints[name] for name in XsynBertConfig.__annotations__}
