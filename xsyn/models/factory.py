"""Building a model for a run (`build_model`) and restoring a saved one (`load_model`).

`build_model("bert-base-multilingual-cased", "gat", "sequence", num_labels=3, gat_delta=4)` lifts
any BERT checkpoint (hub name or local directory; `tiny` for the random preset) into the chosen
variant and head: pretrained weights load unchanged and only the new parameters are initialised.
`load_model(directory)` restores what `save_pretrained` wrote, variant, settings and head included.
A weights or config file that cannot be read (cut short by a kill or a full disk) raises
`DamagedCheckpointError`, which names the file and what to do.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import try_to_load_from_cache
from safetensors import SafetensorError, safe_open
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from xsyn.models.auto import register_auto_classes
from xsyn.models.configuration import XsynBertConfig
from xsyn.models.encoders import FamilyClasses, all_classes, classes_for
from xsyn.models.families import FAMILIES
from xsyn.models.heads import HEAD_CLASSES
from xsyn.models.names import TINY
from xsyn.models.presets import tiny_config
from xsyn.models.tokenizers import load_tokenizer
from xsyn.utils.errors import InputError, MissingInputError, XsynError, first_line

log = logging.getLogger(__name__)

register_auto_classes()  # a saved xsyn model is also an AutoConfig / AutoModel... checkpoint

class DamagedCheckpointError(XsynError, ValueError):
    """A checkpoint file that cannot be read; the message names it and what to do."""


_XSYN_TYPES = tuple(family.xsyn_type for family in FAMILIES.values())


def build_model(model: str, variant: str, head: str | None, *,
                tokenizer: PreTrainedTokenizerBase | str | Path | None = None, num_labels: int | None = None,
                num_intents: int | None = None, num_slot_labels: int | None = None, tiny_family: str | None = None,
                base: PretrainedConfig | None = None, **syntax_overrides) -> PreTrainedModel:
    """A syntax variant of a checkpoint of an encoder family with BERT's layers (BERT, XLM-R, RoBERTa: see
    `xsyn.models.families`) with a task head (`head=None`: the bare encoder).

    `model` is `tiny`, a hub name (`bert-base-multilingual-cased`, `xlm-roberta-base`) or a local directory;
    `tokenizer` (an object, or a spec for `load_tokenizer`) sizes the `tiny` vocabulary and gives its family
    (`tiny_family` chooses one). `base`: the checkpoint's (or tiny's) configuration where a run has read it
    already (`checkpoint_config`; its config.json is then not read again). `syntax_overrides`
    are `XsynBertConfig` fields (`syntax_layers` may be a count: the first n layers).
    """
    _check_head(head)
    settings = {"variant": variant, **syntax_overrides}
    for name, value in (("num_labels", num_labels), ("num_intents", num_intents),
                        ("num_slot_labels", num_slot_labels)):
        if value is not None:
            settings[name] = value
    if model == TINY:
        if base is None:
            if not isinstance(tokenizer, PreTrainedTokenizerBase):
                tokenizer = load_tokenizer(tokenizer)
            base = tiny_config(tokenizer, tiny_family)
    else:
        base = base or checkpoint_config(model)
        if isinstance(base, XsynBertConfig) and base.variant != variant:
            raise InputError(f"{model} is a saved xsyn model of variant {base.variant!r}, not {variant!r}; "
                             "load it with load_model, or start from the plain BERT checkpoint")
        fix = ("copy the checkpoint again, or pass another --model" if Path(model).is_dir() else
               "delete it, and the next run downloads it again")
    classes = classes_for(base.model_type, model)
    model_class = _model_class(classes, head)
    config = classes.config.from_bert_config(base, **first_layers(settings, base.num_hidden_layers))
    lifted = model_class(config) if model == TINY else _from_pretrained(model_class, model, fix, config=config)
    lifted.syntax_variant.after_lift(lifted.base_model)
    return lifted


def first_layers(settings: dict[str, Any], depth: int) -> dict[str, Any]:
    """`syntax_layers` given as a count (as the task cards give it: the first n layers, at most the
    model's `depth`) becomes the list of those layers; the model's own config says its depth."""
    layers = settings.get("syntax_layers")
    if isinstance(layers, int) and not isinstance(layers, bool):
        return {**settings, "syntax_layers": list(range(min(layers, depth)))}
    return settings


def label_settings(head: str | None, labels: Sequence[str] = (), tags: Sequence[str] = ()) -> dict[str, Any]:
    """`build_model` keywords that size a head and name its outputs in the config, from a task's
    class labels and tags (id order); each head class says which it reads (`label_settings`)."""
    _check_head(head)
    return {} if head is None else HEAD_CLASSES[head].label_settings(labels, tags)


def load_model(directory: str | Path) -> PreTrainedModel:
    """Restore a model written by `save_pretrained`: variant, syntax settings, head and weights."""
    config_path = Path(directory) / "config.json"
    if not config_path.is_file():
        raise MissingInputError(f"{config_path} not found: load_model reads a directory written by "
                                "save_pretrained")
    fix = "restore the checkpoint (fine-tune again), or use another one"
    try:
        saved = json.loads(config_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise DamagedCheckpointError(f"{config_path} cannot be read ({err}): the file is damaged; {fix}") from None
    if not isinstance(saved, dict):
        raise DamagedCheckpointError(f"{config_path} is not a model configuration (a JSON object); {fix}")
    if saved.get("model_type") not in _XSYN_TYPES:
        raise InputError(f"{config_path}: model_type is {saved.get('model_type')!r}, not an xsyn model; "
                         "lift a plain checkpoint with build_model(model, variant, head)")
    classes = all_classes()
    architecture = (saved.get("architectures") or [classes_for(saved["model_type"]).model.__name__])[0]
    if architecture not in classes:
        raise InputError(f"{config_path}: unknown architecture {architecture!r}; expected one of "
                         f"{', '.join(sorted(classes))}")
    return _from_pretrained(classes[architecture], directory, fix)


def _from_pretrained(model_class: type[PreTrainedModel], source: str | Path, fix: str, **kwargs) -> PreTrainedModel:
    """`model_class.from_pretrained(source)`; a damaged weights file is named, with `fix`, not a traceback."""
    try:
        with _quiet_loading():
            model, info = model_class.from_pretrained(source, output_loading_info=True, **kwargs)
    except SafetensorError as err:
        raise DamagedCheckpointError(f"{_damaged_weights(source)} cannot be read ({err}): the file is damaged "
                                     f"(cut short by a kill or a full disk?); {fix}") from None
    except OSError as err:  # a local checkpoint whose weights file is missing, a folder, or a symlink loop
        if not Path(source).is_dir():
            raise
        raise DamagedCheckpointError(f"{Path(source) / 'model.safetensors'} cannot be read ({first_line(err)}); "
                                     f"{fix}") from None
    _report_loading(model_class.__name__, source, info)
    return model


@contextmanager
def _quiet_loading():
    """transformers' weight-loading bar and its key-by-key report table (dozens of lines per model) held
    back; `_report_loading` says what matters in one line."""
    # The report's logger; and tensor parallelism's, which a quiet modeling_utils wakes: transformers then
    # checks the (unused) tensor-parallel plan and lists every layer it would not shard.
    loggers = [logging.getLogger("transformers.modeling_utils"),
               logging.getLogger("transformers.distributed.tensor_parallel")]
    levels, bar = [one.level for one in loggers], hf_logging.is_progress_bar_enabled()
    for one in loggers:
        one.setLevel(logging.ERROR)
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        for one, level in zip(loggers, levels):
            one.setLevel(level)
        if bar:
            hf_logging.enable_progress_bar()


def _report_loading(name: str, source: str | Path, info: dict) -> None:
    """One line: which modules' weights were newly initialised (expected for a task head and the syntax
    modules on a plain BERT) and any weights of the checkpoint that were not used."""
    modules = sorted({".".join(key.rsplit(".", 1)[0].split(".")[:2]) for key in info.get("missing_keys", ())})
    unused = sorted(info.get("unexpected_keys", ()))
    if modules:
        log.info(f"{name} from {source}: {len(info['missing_keys'])} weights newly initialised, in "
                 f"{', '.join(modules)} (as expected for a new task head and the syntax modules)")
    if unused:
        log.warning(f"{name} from {source}: {len(unused)} weights of the checkpoint not used "
                    f"({', '.join(unused[:3])}{', ...' if len(unused) > 3 else ''})")


def _damaged_weights(source: str | Path) -> str:
    """The weights file of a local or downloaded checkpoint that does not open, else its folder."""
    folder = Path(source)
    if not folder.is_dir():
        cached = try_to_load_from_cache(str(source), "model.safetensors")
        if not isinstance(cached, str):
            return f"the weights of {source}"
        folder = Path(cached).parent
    for file in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(file, "pt"):
                pass
        except (SafetensorError, OSError):
            return str(file)
    return f"the weights in {folder}"


def _check_head(head: str | None) -> None:
    if head is not None and head not in HEAD_CLASSES:
        raise HEAD_CLASSES.unknown(head)


def _model_class(classes: FamilyClasses, head: str | None) -> type[PreTrainedModel]:
    return classes.model if head is None else classes.heads[head]


def checkpoint_config(model: str) -> PretrainedConfig:
    """The configuration of a hub or local checkpoint (config.json alone: no weights are read), of a
    family xsyn lifts; else a one-line `MissingInputError` naming the model and the fix."""
    path = Path(model)
    if path.exists() and not (path / "config.json").is_file():
        raise MissingInputError(f"{path} has no config.json: a model directory comes from save_pretrained "
                                "or a downloaded checkpoint")
    try:
        config = AutoConfig.from_pretrained(model)
    except OSError as err:
        raise MissingInputError(f"cannot load the model {model!r}: it is neither `tiny`, a local directory, nor "
                                "reachable on the Hugging Face hub (offline?); pass a local checkpoint directory. "
                                f"Cause: {first_line(err)}") from err
    classes_for(config.model_type, model)  # a family xsyn lifts, else an error naming them
    return config


def parameter_count(config: PretrainedConfig) -> int:
    """The parameters of the encoder of `config` (a checkpoint's, `checkpoint_config`, or tiny's), counted on a model
    built on the meta device (no memory, no weights read)."""
    with torch.device("meta"):
        encoder = AutoModel.from_config(config)
    return sum(p.numel() for p in encoder.parameters())
