"""What a syntax variant is: one `SyntaxVariant` object that the model, the config, the cards and the
model cards ask, instead of comparing variant names.

A variant is one folder and one registry line (`xsyn.models.variants`), as `transformers/models/bert/` is:
`variants/<name>/__init__.py` declares it (its `SyntaxVariant`, settings schema and citation) and stays
importable without torch (the command line and the task cards read its settings); `variants/<name>/layers.py`
holds its torch modules, which its hooks reach through `SyntaxVariant.layers()` when a model is built.
Layers several variants share stay outside the folders (`xsyn.models.attention`, `xsyn.trees.masks`).
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from xsyn.utils.schema import SchemaError, setting

DEFAULT_VARIANT = "gat"  # what a run fine-tunes unless told

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig, PreTrainedModel

    from xsyn.trees.tensors import TreeTensors


class SyntaxConfigError(SchemaError):
    """A syntax setting that cannot work with this model: `key: problem` (`where: key: problem` once the run
    knows where the value came from), as every schema error."""


@dataclass(frozen=True)
class LossTerm:
    """An auxiliary loss: `loss = task_loss + config.<weight> * (sum of the named parts)`. The parts are the
    output fields the variant's `auxiliary_losses` fills (and the names logged at every step)."""

    parts: tuple[str, ...]
    weight: str


@dataclass(frozen=True)
class Pretraining:
    """A syntax module xsyn pre-trains on treebanks' gold trees (`xsyn pretrain-<variant>`, `xsyn.run.pretrain`)
    before fine-tuning reads it (`SyntaxVariant.load_pretrained`). `options`: the variant's settings that
    pre-training's settings hold beside its own (a recipe sets them: `xsyn.pretraining.recipes`), each with a
    command-line option of its own (`--gat-delta` for `gat_delta`), and the option's help."""

    options: dict[str, str]


@dataclass(frozen=True)
class ReleasedCode:
    """The authors' released code of a variant, as `--set reproduce=<name>` rebuilds it: where it differs from
    the paper's text (xsyn's defaults), the settings that give the code's behaviour. `inputs` are run settings
    (how the code's data path builds every input: `xsyn.trees.conventions`), taken by every variant of a run that
    reproduces this code, the baseline's included; `model` are this variant's own settings. A run's explicit
    settings win over both; `docs/variants.md` ("paper, code and xsyn") gives each choice with its file, and what
    no setting rebuilds (a test example the code drops, a parser it does not release)."""

    name: str  # the value of `reproduce` that selects it (the recipe's paper key)
    repository: str  # owner/name on GitHub
    commit: str  # the commit whose code the settings were checked against
    inputs: dict[str, Any]
    model: dict[str, Any]


@dataclass
class SyntaxBatch:
    """The batch fields a variant's hooks may read (the collated batch of `xsyn.trees.batch`)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor | None
    tree_deprel: torch.Tensor | None
    position_ids: torch.Tensor | None
    word_embeddings: torch.Tensor | None = None  # BERT's lookup of input_ids, where the variant reads it

    def real_tokens(self) -> torch.Tensor:
        """1 for the pieces that are not padding."""
        import torch

        return self.attention_mask if self.attention_mask is not None else torch.ones_like(self.input_ids)


@dataclass(init=False, repr=False, eq=False)
class CommonSettings:
    """The `XsynBertConfig` fields of every variant (declared here, without transformers, so that the
    command line can list and check the model settings without loading torch)."""

    variant: str = setting(DEFAULT_VARIANT, help="the model variant")
    syntax_layers: list[int] | None = setting(None, help="encoder layers (0-based) the variant acts in (gat: "
                                              "self-attention biased; sla, wla: gated local attention; sep: input "
                                              "mixed with its distance view); a count n is the first n; default: all "
                                              "layers")
    num_intents: int | None = setting(None, help="intents of the intent-slot head")
    num_slot_labels: int | None = setting(None, help="slot tags of the intent-slot head")
    intent_labels: list[str] | None = setting(None, help="intent names in id order (intent-slot head)")
    slot_labels: list[str] | None = setting(None, help="slot tag names in id order (intent-slot head)")


class SyntaxVariant:
    """A syntax variant, in one place. Subclass it in its folder's `__init__.py` (its torch modules in the
    folder's `layers.py`) and add one line to the registry (`xsyn.models.variants`); the defaults are those of
    plain BERT.

    - `settings`: a schema (`xsyn.utils.schema`: a `@strict` dataclass, its fields' rules in `validated_field`)
      of the settings the variant adds to `XsynBertConfig`; `validate` holds its rules across BERT's fields;
    - `uses_layers`: whether `syntax_layers` chooses the layers it changes;
    - `paper_names`: the papers' names for its settings, which task cards may use (`delta` -> `gat_delta`);
    - `paper`: its BibTeX, cited by model cards;
    - `losses`: its auxiliary losses; `parameter_markers`: the names of the modules it adds to BERT;
    - `reads_word_embeddings`: its hooks read BERT's word-piece embeddings (`SyntaxBatch.word_embeddings`:
      one lookup, and one dense gradient of the table, shared with the encoder);
    - `tree_fields`: the batch's tree fields (`xsyn.trees.wordpiece.SYNTAX_FIELDS`) its hooks read. Only those
      are collated and copied to the device, and `forward` needs them; None (a variant that does not say, as
      plug-ins written before it): all of them are collated, and none is required;
    - `is_baseline`: plain BERT, the model the others are compared with (its card section takes no
      model settings);
    - `pretrained_files`: the files of its pre-trained syntax module, if it has one (what a run folder holds);
    - `pretraining`: how xsyn pre-trains that module (`Pretraining`), if it does;
    - `options`: settings with a command-line option of their own (`{"gat_delta": help}` gives `finetune
      --gat-delta`, a shortcut of `--set gat_delta=...`, which wins over it), each with the option's help;
    - `released_code`: its authors' released code (`ReleasedCode`), which `--set reproduce=<its name>` rebuilds;
    - `layers_module`: where its torch modules are, if not `layers` beside the module declaring its class.
    """

    name: str = ""
    is_baseline: bool = False
    settings: type | None = None
    uses_layers: bool = False
    paper_names: dict[str, str] = {}
    paper: str | None = None
    losses: tuple[LossTerm, ...] = ()
    parameter_markers: tuple[str, ...] = ()
    reads_word_embeddings: bool = False
    tree_fields: tuple[str, ...] | None = None
    pretrained_files: tuple[str, ...] = ()
    pretraining: Pretraining | None = None
    options: dict[str, str] = {}
    released_code: ReleasedCode | None = None
    layers_module: str | None = None

    _layers: ModuleType | None = None

    def layers(self) -> ModuleType:
        """The variant's torch modules, imported on first use (the declaration itself never imports torch)."""
        if self._layers is None:  # kept, so that a compiled forward reads an attribute (dynamo skips importlib)
            self._layers = importlib.import_module(self.layers_module or f"{type(self).__module__}.layers")
        return self._layers

    def setting_names(self) -> tuple[str, ...]:
        """The config fields that are this variant's settings (what a model card lists)."""
        own = tuple(f.name for f in dataclasses.fields(self.settings)) if self.settings is not None else ()
        return (("syntax_layers",) if self.uses_layers else ()) + own

    def loss_names(self) -> tuple[str, ...]:
        return tuple(part for term in self.losses for part in term.parts)

    def validate(self, config: PretrainedConfig) -> None:
        """Rules between the variant's settings and the rest of the config (each setting's own rules are its
        schema's); raise `xsyn.utils.schema.Invalid(setting, problem)`. Run for every registered variant."""

    def batch_fields(self, config: PretrainedConfig) -> tuple[str, ...]:
        """The `tree_*` batch fields `forward` needs with this config (besides `input_ids`): `tree_fields`."""
        return self.tree_fields or ()

    def collated_fields(self, config: PretrainedConfig) -> tuple[str, ...] | None:
        """The tree fields a batch for this config carries (collated, copied to the device); None: all."""
        return None if self.tree_fields is None else self.batch_fields(config)

    def install(self, model: PreTrainedModel) -> None:
        """Swap or add the variant's modules on a freshly built `XsynBertModel`."""

    def after_lift(self, model: PreTrainedModel) -> None:
        """Adjust the encoder once a checkpoint's weights are in (`build_model`)."""

    def init_weights(self, module: Any, config: PretrainedConfig) -> None:
        """Initialise one of the variant's own modules (after BERT's rule for Linear/Embedding/LayerNorm)."""

    def context(self, model: PreTrainedModel, tree: TreeTensors, batch: SyntaxBatch, with_losses: bool) -> Any:
        """What the variant's layers read, computed once per batch (passed to them as `xsyn_syntax`).
        `with_losses`: the auxiliary losses are wanted for this batch."""
        return None

    def output(self, model: PreTrainedModel, tree: TreeTensors, hidden: torch.Tensor
               ) -> torch.Tensor | None:
        """A replacement for BERT's last hidden state (which is then pooled again), or None to keep it."""
        return None

    def auxiliary_losses(self, model: PreTrainedModel, context: Any, tree: TreeTensors, batch: SyntaxBatch,
                         hidden: torch.Tensor, with_losses: bool) -> dict[str, torch.Tensor]:
        """The parts of `losses` computed for this batch (none, when they are not wanted)."""
        return {}

    # -- a pre-trained syntax module (gat: `xsyn pretrain-gat`), read by fine-tuning ----------------

    def pretrained_settings(self, directory: str | Path) -> dict[str, Any]:
        """The model settings a pre-trained module in `directory` fixes (its shapes), which a run adopts."""
        raise self._no_pretrained("--pretrained-syntax")

    def load_pretrained(self, model: PreTrainedModel, directory: str | Path) -> None:
        """Load the pre-trained module in `directory` into `model` (a freshly built model of this variant)."""
        raise self._no_pretrained("--pretrained-syntax")

    def freeze_pretrained(self, model: PreTrainedModel) -> None:
        """Keep the pre-trained module fixed while the rest of `model` trains."""
        raise self._no_pretrained("--freeze-pretrained")

    def has_pretrained(self) -> bool:
        """Whether the variant reads a pre-trained syntax module (it overrides `load_pretrained`)."""
        return type(self).load_pretrained is not SyntaxVariant.load_pretrained

    def _no_pretrained(self, option: str) -> SyntaxConfigError:
        return SyntaxConfigError(f"{option}: variant {self.name!r} has no pre-trained syntax module; drop {option}")
