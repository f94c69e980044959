"""Every check of a run's inputs, made before its first expensive step.

Featurising, parsing and loading weights take seconds to minutes; a model that cannot be loaded
offline, a missing language file, an output folder that cannot be written or a disk too small for a
checkpoint must stop a command before that work, not after it. Each command has one preflight
function (`preflight_finetune`, `preflight_evaluate`, `preflight_pretraining`, `preflight_output`), built
from the same shared checks:

    check_parser       the parser parses every language, its models are there (or can be downloaded: the
                       network is probed once)
    check_model        the model's config.json (no weights) and the tokenizer load
    check_data         every split x language (x language pair) to be read has local files or a hub source
    check_writable     the output folder can be created and a file written in it
    check_free_space   the folder's disk holds a checkpoint (estimated from the parameter count)

Each raises the `XsynError` the later step would have raised, naming the model, file or folder and the fix.
(The settings' own checks against the model's configuration, `--max-length` within its positions, are made
when the settings are resolved: `xsyn.run.settings.check_lengths`.)
"""

from __future__ import annotations

import errno
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from xsyn.data.cards import TaskCard
from xsyn.data.loading import DataNotFoundError, check_available
from xsyn.data.pairs import reads_pair_file
from xsyn.models.factory import checkpoint_config, parameter_count
from xsyn.models.families import family_of, tokenizer_family
from xsyn.models.names import MODEL_CONFIG, TINY
from xsyn.models.tokenizers import model_tokenizer
from xsyn.run.scope import default_split, evaluation_languages, held_out_split
from xsyn.run.settings import RunConfig
from xsyn.run.task_data import cache_root, make_parser
from xsyn.syntax.parsing.base import require_languages
from xsyn.syntax.treebanks import locate
from xsyn.training.precision import check_training_precision
from xsyn.utils.errors import InputError
from xsyn.utils.io import OutputError, check_writable
from xsyn.utils.network import offline_unless_reachable

# What one checkpoint of a fine-tuning run takes on disk per model parameter, in bytes: best/ in float32 (4),
# state/ (the float32 weights and AdamW's two moments: 12), and state.tmp/ beside state/ while it replaces it (12).
CHECKPOINT_BYTES_PER_PARAMETER = 28


def check_model(model: str, tokenizer: str | None):
    """The run's tokenizer (returned, for the run to use), and the model's configuration read: an offline
    hub name, a folder without config.json, a family xsyn does not lift or a tokenizer that does not fit
    the model fails here, in seconds."""
    loaded = model_tokenizer(model, tokenizer)
    if model != TINY:
        check_tokenizer_fits(loaded, tokenizer or model, checkpoint_config(model), model)
    return loaded


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


def check_parser(config: RunConfig, langs: Sequence[str]) -> None:
    """The run's parser can parse `langs`: a parser that needs models finds them there (or can download them),
    and a language it has no models for at all is named, with what works instead, before the data is read
    and parsed. Whether the network is there is decided here, once."""
    online = not offline_unless_reachable()  # (decided here for the model and data checks that follow too)
    require_languages(make_parser(config), langs, online)


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


def preflight_finetune(config: RunConfig):
    """Everything `finetune` reads and writes, checked before loading data; returns the tokenizer."""
    check_training_precision(config.mixed_precision)
    check_parser(config, [config.train_lang])  # first: no network decided once, and the parser's models
    tokenizer = check_model(config.model, config.tokenizer)
    card = config.card
    held_out = "validation" not in card.splits and card.dev_fraction is not None
    splits = ["train"] if held_out else ["train", "validation"]
    same_language = {segment: config.train_lang for segment in card.segments}
    for split in splits:
        for _, err in check_data(card, split, [same_language], config.data_dir):
            raise err
    out = check_writable(config.resolved_output_dir(), "--output-dir")
    check_writable(cache_root(config), "--cache-dir")
    if config.pretrained_syntax is None:  # (a pre-trained module sets the shape; the estimate stays close)
        needed = parameter_count(config.model, tokenizer, config.tiny_family) * CHECKPOINT_BYTES_PER_PARAMETER
        check_free_space(out, needed, "--output-dir")
    return tokenizer


def preflight_evaluate(card: TaskCard, config: RunConfig, split: str, langs: Sequence[str], generalized: bool,
                       out: Path, skip_missing: bool) -> None:
    """Every language (and, with `generalized`, every language pair read from files of its own) has data,
    and the output folder is writable: checked before the model is loaded. With `skip_missing` the
    languages without data are left to be skipped (and listed) as before."""
    check_evaluation_data(card, config, split, langs, generalized, None if skip_missing else (
        "pass --langs to choose languages, or --skip-missing to evaluate those that have data"))
    check_writable(out, "--output-dir")


def check_evaluation_data(card: TaskCard, config: RunConfig, split: str, langs: Sequence[str], generalized: bool,
                          fix: str | None) -> None:
    """The checks of `preflight_evaluate` that write nothing: the parser's models for `langs`, and every language
    (and pair) has data in `split`; the error says `fix` (None: those without data are left to be skipped)."""
    check_parser(config, langs)
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


def check_evaluation_after_training(config: RunConfig, langs: Sequence[str] | None) -> None:
    """What `finetune --eval-langs/--do-eval` will evaluate after training, checked before it trains: the
    languages are the task's, and each has data (and parser models) in the split it scores; a misspelt
    language or a missing test file is named at once, not after the training. (A held-out dev set is made
    by the training itself.)"""
    card = config.card
    split = default_split(card)
    langs = evaluation_languages(config, split, langs)
    if not held_out_split(card, split):
        check_evaluation_data(card, config, split, langs, False, (
            "--eval-langs and --do-eval score this split after training: choose languages that have data, or leave "
            "the option out and score the best checkpoint with `xsyn evaluate` (its --split, --skip-missing)"))


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
