"""Run settings that name files and folders, stored absolute: a run folder is read (predict, evaluate, resume)
from any folder, so `"parser": "udpipe:models"` saved as given would be looked for wherever the user stands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xsyn.syntax.parsing.registry import PARSER_OPTIONS, resolve_parser_choice
from xsyn.utils.errors import XsynError

FOLDER_SETTINGS = ("data_dir", "cache_dir", "pretrained_syntax", "task_card",
                   *(option.setting for option in PARSER_OPTIONS if option.folder))
LOCAL_OR_HUB = ("model", "tokenizer")  # a hub name, or a local folder where one by that name exists


def absolute_paths(values: dict[str, Any]) -> dict[str, Any]:
    """`values` with the settings that name local paths made absolute (from the current folder)."""
    values = dict(values)
    for name in FOLDER_SETTINGS:
        if isinstance(values.get(name), str):
            values[name] = str(Path(values[name]).expanduser().absolute())
    for name in LOCAL_OR_HUB:
        if isinstance(values.get(name), str) and Path(values[name]).expanduser().exists():
            values[name] = str(Path(values[name]).expanduser().absolute())
    if "parser" in values:
        values["parser"] = _absolute_parser(values["parser"])
    if isinstance(values.get("parsers"), dict):  # a parser per language
        values["parsers"] = {lang: _absolute_parser(choice) for lang, choice in values["parsers"].items()}
    return values


def _absolute_parser(choice: Any) -> Any:
    """A parser choice whose path (`udpipe:MODEL`) is made absolute; any other value as it is."""
    path = _parser_path(choice)
    return choice if path is None else f"{choice.split(':', 1)[0]}:{Path(path).expanduser().absolute()}"


def _parser_path(parser: Any) -> str | None:
    """The path a parser choice names (`udpipe:MODEL`), or None (no path, or not a valid choice: checked later)."""
    if not isinstance(parser, str):
        return None
    try:
        choice = resolve_parser_choice(parser)
    except XsynError:
        return None
    return choice.argument if choice.entry.argument_is_path else None


def relative_paths_of_saved_run(values: dict[str, Any], config_file: Path) -> list[str]:
    """What a run saved before paths were stored absolute cannot find from here: a line per relative path
    setting that does not exist from the current folder, naming the setting, the folder it is relative to
    (where the run was trained from: its folder less its relative output_dir) and the fix."""
    trained_from = _trained_from(values.get("output_dir"), config_file.parent)
    problems = []
    # what reading a run needs (its card, its parser for new text); a missing cache or data folder says so itself
    named = {"task_card": values.get("task_card"), "parser": _parser_path(values.get("parser"))}
    for name, value in named.items():
        if not isinstance(value, str) or Path(value).expanduser().is_absolute() or Path(value).exists():
            continue
        where = f"the folder it was trained from, {trained_from}" if trained_from else "the folder it was trained from"
        there = str(trained_from / value) if trained_from else f"/absolute/path/to/{value}"
        shown = values["parser"] if name == "parser" else value
        fix = f"--parser {values['parser'].split(':', 1)[0]}:{there}" if name == "parser" else f"--task {there}"
        problems.append(f"{config_file}: {name} {shown!r} is relative to {where}, and there is no {value} here; "
                        f"run from that folder, or pass {fix}")
    return problems


def _trained_from(output_dir: Any, run_dir: Path) -> Path | None:
    """The folder a run was started from: its folder now, less the relative output_dir it was given."""
    if not isinstance(output_dir, str) or Path(output_dir).is_absolute():
        return None
    run_dir = run_dir.absolute()
    parts = Path(output_dir).parts
    if tuple(run_dir.parts[-len(parts):]) != parts:
        return None  # the folder was moved or renamed since
    return Path(*run_dir.parts[:-len(parts)])
