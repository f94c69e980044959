"""The checks of a run's inputs, each made before its first expensive step.

Featurising, parsing and loading weights take seconds to minutes; a model that cannot be loaded
offline, a missing language file, an output folder that cannot be written or a disk too small for a
checkpoint must stop a command before that work, not after it. A fine-tuning or an evaluation makes them
in one place, in one order, as it resolves its resources (`xsyn.run.resources`); pre-training and
`experiment prepare` call the ones they need:

    check_trackers        the trackers a run logs to are installed
    check_model           the model's config.json (no weights) and the tokenizer load, and fit each other
    check_model_settings  the run's model settings build on that architecture; --max-length (and its padding)
                          within its positions
    check_data            every split x language (x language pair) to be read has local files or a hub source
    check_writable        the output folder can be created and a file written in it
    check_free_space      the folder's disk holds a checkpoint (estimated from the parameter count)

Each raises the `XsynError` the later step would have raised, naming the model, file or folder and the fix.
"""

from __future__ import annotations

import errno
import importlib.util
import math
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from huggingface_hub.errors import StrictDataclassError

from xsyn.data.cards import TaskCard
from xsyn.data.loading import DataNotFoundError, check_available
from xsyn.data.pairs import reads_pair_file
from xsyn.models.configuration import XsynBertConfig
from xsyn.models.factory import checkpoint_config, first_layers
from xsyn.models.families import family_of, tokenizer_family
from xsyn.models.names import MODEL_CONFIG, TINY
from xsyn.models.presets import tiny_config
from xsyn.models.tokenizers import model_tokenizer
from xsyn.models.variants.base import SyntaxConfigError
from xsyn.run.settings import ConfigError, RunConfig
from xsyn.syntax.treebanks import locate
from xsyn.training.device_rules import AUTO, FEW_SHAPES
from xsyn.utils.errors import InputError
from xsyn.utils.io import OutputError, check_writable
from xsyn.utils.network import offline_unless_reachable

# What one checkpoint of a fine-tuning run takes on disk per model parameter, in bytes: best/ in float32 (4),
# state/ (the float32 weights and AdamW's two moments: 12), and state.tmp/ beside state/ while it replaces it (12).
CHECKPOINT_BYTES_PER_PARAMETER = 28


def check_model(model: str, tokenizer: str | None, tiny_family: str | None = None):
    """The run's tokenizer and the checkpoint's configuration (its config.json read once, no weights; for `tiny`
    its preset), for the run to use: an offline hub name, a folder without config.json, a family xsyn does not
    lift or a tokenizer that does not fit the model fails here, in seconds."""
    if model == TINY:
        loaded = model_tokenizer(model, tokenizer)
        return loaded, tiny_config(loaded, tiny_family)
    base = checkpoint_config(model)
    loaded = model_tokenizer(model, tokenizer, base)
    check_tokenizer_fits(loaded, tokenizer or model, base, model)
    return loaded, base


def check_model_settings(config: RunConfig, base) -> XsynBertConfig:
    """The run's model configuration: the checkpoint's architecture (`base`, `check_model`) with the run's model
    settings, each rule of the variant's and BERT's fields checked, and --max-length within its positions."""
    settings = {**config.model_settings, "variant": config.variant}
    try:
        model = XsynBertConfig.from_bert_config(base, **first_layers(settings, base.num_hidden_layers))
    except SyntaxConfigError as err:
        raise ConfigError(f"model settings for {config.model}: {err}") from None
    except StrictDataclassError as err:  # the field types and `validate_*` rules of the config (and BERT's)
        raise ConfigError(f"model settings for {config.model}: {err.__cause__ or err}") from None
    check_lengths(config, model, base)
    return model


def check_lengths(config: RunConfig, model, base) -> None:
    """--max-length, and the batch length --pad-to-multiple-of pads it up to, within the positions of the model
    (`model`: its configuration; `base`: the checkpoint's): beyond them the first forward pass fails."""
    positions, where = input_positions(config, model, base)
    if config.max_length > positions:
        raise ConfigError(f"--max-length {config.max_length} is longer than the {positions} positions the model "
                          f"{config.model} has ({where}): choose --max-length {positions} or less")
    given = config.pad_to_multiple_of  # auto: checked as the largest it becomes (a GPU's)
    multiple = FEW_SHAPES[0] if given == AUTO else given
    padded = -(-config.max_length // multiple) * multiple if multiple else config.max_length
    if padded > positions:
        fits = max(n for n in range(1, min(multiple, positions) + 1) if -(-config.max_length // n) * n <= positions)
        said = f"auto (on a GPU: {multiple})" if given == AUTO else multiple
        raise ConfigError(f"--pad-to-multiple-of {said}: a batch of --max-length {config.max_length} pieces is "
                          f"padded to {padded}, beyond the {positions} positions the model {config.model} has "
                          f"({where}): choose --pad-to-multiple-of {fits} (the largest that fits) or a divisor of "
                          f"{positions} such as {math.gcd(positions, 64)}")


def input_positions(config: RunConfig, model, base) -> tuple[int, str]:
    """The pieces one input of the run's model may have, and where that number comes from: max_position_embeddings,
    less the padding offset of a family whose positions count from the padding index + 1 (RoBERTa's 514: 512)."""
    positions, where = model.max_position_embeddings, "max_position_embeddings"
    if config.model == TINY:  # its table is sized for its family (presets.tiny_config)
        return positions, where
    try:
        padded_positions = family_of(base.model_type).padded_positions
    except InputError:  # not a family xsyn lifts: loading the model says so
        return positions, where
    if not padded_positions:
        return positions, where
    offset = (base.pad_token_id or 0) + 1
    return positions - offset, f"max_position_embeddings {positions}, less {offset}: its positions start after padding"


def check_tokenizer_fits(tokenizer, tokenizer_name: str, config, model: str) -> None:
    """An `InputError` naming both where the tokenizer cannot feed the model: another family, ids past the
    model's vocabulary (its embedding lookup would fail mid-run), or another padding id."""
    model_file = Path(model) / MODEL_CONFIG if Path(model).is_dir() else model
    fix = "leave out --tokenizer (the model's own is used), or give the model's own tokenizer"
    own, theirs = family_of(config.model_type, model), tokenizer_family(tokenizer)
    if theirs is not None and theirs.name != own.name:
        raise InputError(f"the tokenizer {tokenizer_name} is a {theirs.name} tokenizer and the model {model_file} a "
                         f"{own.name} model: they do not fit; {fix}")
    if len(tokenizer) > config.vocab_size:
        raise InputError(f"the tokenizer {tokenizer_name} has {len(tokenizer):,} tokens, more than the "
                         f"{config.vocab_size:,} of the model's vocabulary (vocab_size in {model_file}): ids past "
                         f"{config.vocab_size - 1} have no embedding; {fix}")
    padding = getattr(config, "pad_token_id", None)
    if padding is not None and tokenizer.pad_token_id is not None and tokenizer.pad_token_id != padding:
        raise InputError(f"the tokenizer {tokenizer_name} pads with id {tokenizer.pad_token_id}, the model "
                         f"{model_file} with id {padding} (pad_token_id): they do not fit; {fix}")


def check_free_space(folder: str | Path, needed: int, option: str) -> None:
    """An `OutputError` naming the folder, the bytes needed and the bytes free when its disk has less than `needed`."""
    folder = Path(folder)
    existing = next((p for p in (folder, *folder.parents) if p.is_dir()), Path("."))
    free = shutil.disk_usage(existing).free
    if free < needed:
        raise OutputError(errno.ENOSPC, f"{folder}: a checkpoint needs about {needed:,} bytes, and its disk has "
                                        f"{free:,} bytes free; free some space or choose another {option}")


def check_data(card: TaskCard, split: str, combinations: Sequence[Mapping[str, str]], data_dir: str | None
               ) -> list[tuple[Mapping[str, str], DataNotFoundError]]:
    """Each combination (segment -> language) of `split` that has neither local files nor a hub source,
    with the error its loading would raise."""
    missing = []
    for langs in combinations:
        try:
            check_available(card, split, langs, data_dir)
        except DataNotFoundError as err:
            missing.append((langs, err))
    return missing


def check_evaluation_data(card: TaskCard, config: RunConfig, split: str, langs: Sequence[str], generalized: bool,
                          fix: str | None) -> None:
    """Every language of `langs` (and, with `generalized`, every language pair read from files of its own) has
    data in `split`; the error says `fix` (None: those without data are left to be skipped)."""
    segments = card.segments
    combinations = [{segment: lang for segment in segments} for lang in langs]
    if generalized and len(segments) > 1:
        pairs = [{segments[0]: row, segments[1]: col} for row in langs for col in langs if row != col]
        combinations += [pair for pair in pairs if reads_pair_file(card, pair)]
    source_split = "train" if split == "validation" and "validation" not in card.splits else split
    missing = check_data(card, source_split, combinations, config.data_dir)
    if missing and fix is not None:
        names = ", ".join("-".join(dict.fromkeys(langs.values())) for langs, _ in missing)
        raise DataNotFoundError(f"{card.name} {split}: no data for {names} ({len(missing)} of {len(combinations)} "
                                f"languages and pairs); {fix}. The first:\n{missing[0][1]}")


def preflight_output(folder: str | Path, option: str, checkpoint_parameters: int = 0) -> Path:
    """A command's output folder is writable and, where it will hold checkpoints of a model of
    `checkpoint_parameters` parameters, its disk has room for one."""
    folder = check_writable(folder, option)
    if checkpoint_parameters:
        check_free_space(folder, checkpoint_parameters * CHECKPOINT_BYTES_PER_PARAMETER, option)
    return folder


def preflight_pretraining(settings) -> None:
    """A pre-training's settings hold together, its treebanks' training files are there, its model and tokenizer
    load and its output folder is writable, before the treebanks are read (the cheapest checks first)."""
    offline_unless_reachable()  # decided before the model and tokenizer are looked up on the hub
    for spec in settings.treebanks:
        locate(spec, settings.treebank_dir).path(settings.train_split)
    check_model(settings.model, settings.tokenizer)
    check_writable(settings.output_dir, "--output-dir")


_TRACKER_PACKAGES = {"tensorboard": ("tensorboard", "tensorboardX"), "wandb": ("wandb",)}  # as Accelerate checks


def check_trackers(trackers: Sequence[str]) -> None:
    """Accelerate drops a tracker whose package is missing without a word; a run that was asked to
    log somewhere must not train unlogged."""
    missing = [name for name in trackers
               if not any(importlib.util.find_spec(p) for p in _TRACKER_PACKAGES.get(name, (name,)))]
    if missing:
        raise ConfigError(f"--tracker {' '.join(missing)}: not installed; pip install {' '.join(missing)} "
                          "or leave the option out")
