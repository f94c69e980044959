"""A checkpoint that explains itself: its model card (`README.md`), and pushing it to the Hugging Face hub.

`write_model_card(checkpoint, run_dir)` writes, with huggingface_hub's `ModelCard`, what the model
is and how it was made, read from the files a run leaves: base model, variant and its settings,
task, training language and data, dev score, every evaluation of this checkpoint
(`<run>/eval-*/results.json`, plus any named), seed, xsyn version, how to load it, and the papers
to cite. `xsyn finetune` writes it with every best checkpoint and `xsyn evaluate` rewrites it with
the new results.

`check_hub_push(repo)` runs before training (offline, no token, an unknown repository name or a
token the hub refuses all stop the run before it starts, saying why); `push_checkpoint(best, repo)`
uploads the checkpoint folder, card included, when training ends.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from huggingface_hub import EvalResult, HfApi, ModelCard, ModelCardData, constants, get_token
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id
from transformers.utils import CONFIG_NAME

from xsyn import __version__
from xsyn.data.cards import TaskCard, load_card
from xsyn.metrics import primary_name
from xsyn.models.families import XSYN_BERT, family_of
from xsyn.models.names import TINY
from xsyn.models.variants import baseline_name, get_variant
from xsyn.syntax.parsing.registry import resolve_parser_choice
from xsyn.training.folder import RunFolder, task_file
from xsyn.utils.errors import XsynError
from xsyn.utils.io import atomic_write_text, saved_json_object

CARD_FILE = "README.md"
TRAINING_SETTINGS = ("learning_rate", "batch_size", "epochs", "max_steps", "warmup_steps", "weight_decay",
                     "max_length", "doc_stride", "max_query_length", "mixed_precision", "parser")



# -- the card --------------------------------------------------------------------------------------


def _evaluations(checkpoint: Path, run_dir: Path, extra: Sequence[Path]) -> list[dict[str, Any]]:
    """The results.json files of this checkpoint's evaluations, one per split (the newest wins)."""
    found: dict[str, dict[str, Any]] = {}
    paths = RunFolder(run_dir).eval_results() + list(extra)
    for path in paths:
        result = saved_json_object(path)
        if result and Path(result.get("checkpoint", "")).resolve() == checkpoint.resolve():
            found[result["split"]] = result
    return [found[split] for split in sorted(found)]


def _hub_id(model: str) -> str | None:
    """A base model's hub id (None for `tiny` and local folders, which the hub does not know)."""
    return None if model == TINY or Path(model).exists() or model.count("/") > 1 else model


def build_model_card(checkpoint: str | Path, run_dir: str | Path, extra_results: Sequence[str | Path] = ()):
    """The `huggingface_hub.ModelCard` of a checkpoint, from the files its run wrote."""
    checkpoint, run_dir = Path(checkpoint), Path(run_dir)

    folder = RunFolder(run_dir)
    task_info = saved_json_object(task_file(checkpoint)) or {}
    model_config = saved_json_object(checkpoint / CONFIG_NAME) or {}
    run = saved_json_object(folder.config) or {}
    dev = saved_json_object(folder.validation_results)
    card = load_card(run.get("task_card") or task_info.get("task") or run["task"])
    variant = model_config.get("variant", run.get("variant", baseline_name()))
    base = run.get("model", "?")
    train_lang = task_info.get("train_lang") or run.get("train_lang", "en")
    evaluations = _evaluations(checkpoint, run_dir, [Path(p) for p in extra_results])
    # No pipeline_tag: the hub would offer `pipeline(...)` and a widget on raw text, which cannot work
    # (the model needs a dependency parse of its input); the task type stays on the results.
    task_type = card.task_kind.pipeline_tag

    eval_results = [EvalResult(task_type=task_type, dataset_type=result.get("task", card.name),
                               dataset_name=_dataset_name(card, result),
                               dataset_config=lang, dataset_split=result["split"], metric_type=result["primary"],
                               metric_value=round(score, 4))
                    for result in evaluations for lang, score in result["per_language"].items()]
    languages = sorted({train_lang, *(lang for result in evaluations for lang in result["per_language"])})
    data = ModelCardData(
        base_model=_hub_id(base), language=languages,
        library_name="transformers", pipeline_tag=None, tags=["xsyn", f"xsyn-{variant}", card.name, task_type],
        datasets=[h.dataset for h in card.hub][:1] or None, model_name=f"xsyn-{card.name}-{variant}",
        eval_results=eval_results or None)
    sections = [
        f"# {card.title}: {_portable(base)} with the `{variant}` syntax variant (xsyn)",
        f"Fine-tuned by xsyn {__version__} on **{card.title}** ({card.kind}) in "
        f"**{train_lang}**, for zero-shot transfer to other languages.",
        _model_section(base, variant, model_config, task_info),
        _training_section(card, run, task_info, train_lang),
        _results_section(dev, evaluations),
        _usage_section(card, checkpoint),
        _citation_section(card, variant, model_config.get("model_type")),
    ]
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n\n".join(s for s in sections if s) + "\n")


def _dataset_name(card: TaskCard, result: dict[str, Any]) -> str:
    """The evaluated task's title: the card's, or the other task's name (`xsyn evaluate --task`)."""
    task = result.get("task", card.name)
    return card.title if task == card.name else task


def write_model_card(checkpoint: str | Path, run_dir: str | Path, extra_results: Sequence[str | Path] = ()) -> Path:
    """Write (or rewrite) `<checkpoint>/README.md`, atomically. Returns its path."""
    path = Path(checkpoint) / CARD_FILE
    atomic_write_text(path, str(build_model_card(checkpoint, run_dir, extra_results)))
    return path


def _table(rows: list[tuple[Any, ...]], header: tuple[str, ...]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(v) for v in row) + " |" for row in rows])


def _model_section(base: str, variant: str, model_config: dict[str, Any], task_info: dict[str, Any]) -> str:
    rows = [("base model", f"`{_portable(base)}`"), ("variant", f"`{variant}`"),
            ("architecture", ", ".join(model_config.get("architectures") or []))]
    rows += [(f"`{name}`", "all layers" if model_config[name] is None and name == "syntax_layers"
              else f"`{model_config[name]}`") for name in get_variant(variant).setting_names() if name in model_config]
    if task_info.get("labels"):
        rows.append(("labels" if not task_info.get("tags") else "intents", ", ".join(task_info["labels"])))
    if task_info.get("tags"):
        rows.append(("tags", ", ".join(task_info["tags"])))
    return "## Model\n\n" + _table(rows, ("", ""))


def _training_section(card: TaskCard, run: dict[str, Any], task_info: dict[str, Any], train_lang: str) -> str:
    data = (f"local files (`{_portable(run['data_dir'])}`)" if run.get("data_dir")
            else ", ".join(f"`{h.dataset}`" for h in card.hub) or "the task's files")
    subset = run.get("max_train_examples")
    rows = [("task", f"`{card.name}` ({card.title}; {card.kind})"), ("training language", train_lang),
            ("training data", f"{data} (train split" + (f", first {subset} examples)" if subset else ")")),
            ("seed", run.get("seed", "?")), ("best checkpoint at step", task_info.get("step", "?"))]
    rows += [(name, _portable(run[name])) for name in TRAINING_SETTINGS if run.get(name) is not None]
    if run.get("parsers"):  # the languages that name their own parser (the others: `parser`)
        rows.append(("parser per language", ", ".join(f"{lang}: {_parser_label(choice)}"
                                                       for lang, choice in sorted(run["parsers"].items()))))
    if run.get("hyperparameter_source"):
        rows.append(("hyperparameters from", _portable(run["hyperparameter_source"])))
    rows.append(("xsyn version", __version__))
    return "## Training\n\n" + _table(rows, ("", ""))


def _results_section(dev: dict[str, Any] | None, evaluations: list[dict[str, Any]]) -> str:
    parts = ["## Results"]
    if dev:
        parts.append(f"Best dev score ({primary_name(dev['metric'])}, source language): **{dev['primary']:.2f}** "
                     f"at step {dev['step']}.")
    for result in evaluations:
        parsers = result.get("parsers") or {}
        mixed = len(set(parsers.values())) > 1  # languages parsed by different parsers: each row names its own
        rows = [(lang, f"{score:.2f}", result["n_examples"].get(lang, ""),
                 *([_parser_label(parsers.get(lang, "?"))] if mixed else []))
                for lang, score in result["per_language"].items()]
        if result.get("average") is not None:
            rows.append(("average", f"{result['average']:.2f}", "", *([""] if mixed else [])))
        parts.append(f"Zero-shot on {result.get('task', 'the task')}, {result['split']} split "
                     f"({result['primary']}):\n\n"
                     + _table(rows, ("language", result["primary"], "examples", *(["parser"] if mixed else []))))
    if not evaluations:
        parts.append("Not evaluated yet: `xsyn evaluate --model-dir RUN` adds the table here.")
    return "\n\n".join(parts)


def _portable(value: Any) -> Any:
    """A local path as its last part: a card that travels (to the hub, to a colleague) names no folder
    of the machine it was written on; anything else as it is."""
    if isinstance(value, str) and Path(value).is_absolute():
        return Path(value).name
    return value


def _parser_label(choice: str) -> str:
    """A parser choice as a card that travels names it: `udpipe:sw.udpipe`, no folder of this machine."""
    try:
        return f"`{resolve_parser_choice(choice).label}`"
    except XsynError:
        return f"`{choice}`"


def _usage_section(card: TaskCard, checkpoint: Path) -> str:
    if card.task_kind.auto_class:
        load = (f"import xsyn  # registers xsyn's classes with the Auto classes\n"
                f"from transformers import {card.task_kind.auto_class}\n\n"
                f"model = {card.task_kind.auto_class}.from_pretrained(\"{checkpoint.name}\")")
    else:
        load = ("from xsyn.models import load_model  # the joint intent-slot head has no Auto class\n\n"
                f"model = load_model(\"{checkpoint.name}\")  # AutoModel gives its encoder alone")
    return ("## Use\n\nThe model reads dependency trees with its text, so a transformers `pipeline` on raw text "
            "cannot run it (and this card names no pipeline). Predict on raw text with `xsyn predict` or "
            "`xsyn.run.predict.predict`, which parse it first; or build batches with xsyn "
            "(`xsyn.trees.batch.collate_trees`) for the model loaded as below:\n\n"
            f"```python\n{load}\n```\n\n```bash\n"
            f"xsyn predict --model-dir {checkpoint.name} --input input.jsonl --lang de --output predictions.jsonl\n```")


def _citation_section(card: TaskCard, variant: str, model_type: str | None) -> str:
    paper = get_variant(variant).paper
    encoder = family_of(model_type or XSYN_BERT)  # a card of a pre-0.2 checkpoint: BERT
    entries = [*([paper] if paper else []), encoder.paper]
    text = "## Citation\n\n```bibtex\n" + "\n\n".join(entries) + "\n```"
    if card.citation:
        text += f"\n\nThe data: {card.citation}"
    return text


# -- the hub ---------------------------------------------------------------------------------------


class HubPushError(XsynError, ValueError):
    """A push to the hub that cannot work; the message says why and what to do."""


def _offline() -> bool:
    return constants.is_offline_mode() or os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE")


def check_hub_push(repo_id: str) -> str:
    """The token to push to `repo_id` with; raises `HubPushError` (before any training) when the
    name is invalid, the hub is switched off (HF_HUB_OFFLINE), no token is set, or the hub refuses it."""
    try:
        validate_repo_id(repo_id)
    except HFValidationError as err:
        raise HubPushError(f"--push-to-hub {repo_id}: not a repository id ({err}); give OWNER/NAME") from None
    if "/" not in repo_id:
        raise HubPushError(f"--push-to-hub {repo_id}: give OWNER/NAME (your user or organisation, then the model)")
    if _offline():
        raise HubPushError(f"--push-to-hub {repo_id}: the Hugging Face hub is switched off here (HF_HUB_OFFLINE is "
                           "set); unset HF_HUB_OFFLINE to push, or train without --push-to-hub and upload best/ later")
    token = get_token()
    if not token:
        raise HubPushError(f"--push-to-hub {repo_id}: no Hugging Face token; run `hf auth login` or set HF_TOKEN "
                           "to a token with write access")
    try:
        HfApi().whoami(token=token)
    except Exception as err:  # network errors and refusals come as several unrelated types
        raise HubPushError(f"--push-to-hub {repo_id}: the hub did not accept the token or cannot be reached "
                           f"({type(err).__name__}: {err}); check the network and the token (`hf auth whoami`)"
                           ) from None
    return token


def push_checkpoint(checkpoint: str | Path, repo_id: str, token: str | None = None) -> str:
    """Create the model repository if needed and upload the checkpoint folder (card included).
    Returns the repository's URL."""
    checkpoint = Path(checkpoint)
    if not (checkpoint / CARD_FILE).is_file():
        raise HubPushError(f"{checkpoint} has no {CARD_FILE}; write its card first (write_model_card)")
    api = HfApi(token=token)
    url = api.create_repo(repo_id, repo_type="model", exist_ok=True)
    api.upload_folder(repo_id=repo_id, folder_path=checkpoint, repo_type="model",
                      commit_message=f"xsyn {__version__}: {checkpoint.name}")
    return str(url)
