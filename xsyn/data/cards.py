"""Task cards: one declarative TOML file per benchmark (`tasks/*.toml`, beside the package).

A card says what a task is (kind, languages, splits, labels, metric), where its data comes from
(local file layouts, each read by a named format reader, and Hugging Face hub datasets) and which
hyperparameters the papers used per model variant. Adding a benchmark in a known format is adding
a card; nothing else changes.

>>> card = load_card("pawsx")
>>> card.kind, card.languages[:3], card.metric
('pair-classification', ('de', 'en', 'es'), 'accuracy')
>>> card.hyperparameters["gat"]["gat_delta"]  # the card says `delta`: the papers' names map to settings
4

Every mistake in a card is a `CardError` naming the card file and the key, with the valid values.
"""

from __future__ import annotations

import string
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xsyn.data.errors import CardError
from xsyn.data.kinds import KINDS, TaskKind
from xsyn.data.readers import READERS
from xsyn.data.rows import FROM_TRAIN
from xsyn.models.variants import VARIANTS, card_setting_types, paper_names
from xsyn.utils.shipped import TASKS, shipped_files, shipped_folder

SPLITS = ("train", "validation", "test")
METRICS = ("accuracy", "seqeval", "squad", "mlqa", "intent_slot", "cged", "word_accuracy", "mcc", "accuracy_f1",
           "correlation", "detection", "squad_v2", "subset_accuracy")


# Run settings a card may state per variant, named as the run settings (`xsyn settings`); a list is the
# paper's search grid. `selection` and `source` document where the values come from.
RUN_HYPERPARAMETERS: dict[str, str] = {
    "learning_rate": "number", "batch_size": "int", "epochs": "int", "max_length": "int",
    "doc_stride": "int", "max_query_length": "int", "max_answer_length": "int", "n_best": "int",
    "warmup_steps": "int", "weight_decay": "number", "seed": "int",
    "selection": "str", "source": "str",
}
# The model settings a card may state (the variants' `card_settings`, a model config's fields), and the
# papers' names, which cards may still use: the loader gives them their setting names.
MODEL_HYPERPARAMETERS: dict[str, str] = card_setting_types()
HYPERPARAMETERS: dict[str, str] = {**RUN_HYPERPARAMETERS, **MODEL_HYPERPARAMETERS}
PAPER_NAMES = paper_names()
HYPERPARAMETER_SECTIONS = (*VARIANTS, "mbert")  # the variants, plus `mbert` for the plain model

_CARD_KEYS = {
    "name", "title", "description", "kind", "languages", "train_languages", "splits", "segments",
    "labels", "tags", "label_map", "label_names", "score_range", "unlabelled_splits", "dev_fraction", "metric",
    "homepage", "citation", "download", "local", "hub", "hyperparameters",
}
_LOCAL_KEYS = {"layout", "format", "path", "splits", "languages", "lang_codes", "options"}
_HUB_KEYS = {"dataset", "config", "splits", "languages", "lang_codes", "columns", "filter", "revision"}


@dataclass(frozen=True)
class LocalSource:
    """One accepted file layout: `path` pattern(s) relative to the task's data folder.

    Patterns use `{lang}` (through `lang_codes`, e.g. en -> eng), `{LANG}` (upper case), `{split}`
    (the layout's own split name, from `splits`) and, for cross-language files, one placeholder per
    segment (`{context}`, `{question}`). A path through a zip archive (`data.zip/member.txt`) is
    read from the archive. `options` go to the format reader.
    """

    layout: str
    format: str
    paths: tuple[str, ...]
    splits: Mapping[str, str]
    languages: tuple[str, ...] | None = None
    lang_codes: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)

    def serves(self, lang: str, split: str) -> bool:
        return split in self.splits and (self.languages is None or lang in self.languages)

    def cross_language(self, segments: tuple[str, ...]) -> bool:
        """Whether one file holds segments of different languages (MLQA's context x question)."""
        return any("{" + name + "}" in p for p in self.paths for name in segments)

    def resolve(self, lang: str, split: str, segment_langs: Mapping[str, str] | None = None) -> list[str]:
        code = self.lang_codes.get(lang, lang)
        values = {"lang": code, "LANG": code.upper(), "split": self.splits[split]}
        for name, seg_lang in (segment_langs or {}).items():
            values[name] = self.lang_codes.get(seg_lang, seg_lang)
        return [p.format(**values) for p in self.paths]


@dataclass(frozen=True)
class HubSource:
    """One Hugging Face hub dataset: id, config pattern, split names and column roles. The config's
    `{lang}` is the language's code in `lang_codes` where it has one (XTREME's `udpos.English`)."""

    dataset: str
    config: str | None
    splits: Mapping[str, str]
    columns: Mapping[str, str]
    languages: tuple[str, ...] | None = None
    filter: Mapping[str, str] = field(default_factory=dict)
    revision: str | None = None
    lang_codes: Mapping[str, str] = field(default_factory=dict)

    def serves(self, lang: str, split: str) -> bool:
        return split in self.splits and (self.languages is None or lang in self.languages)


@dataclass(frozen=True)
class TaskCard:
    name: str
    title: str
    kind: str
    languages: tuple[str, ...]
    train_languages: tuple[str, ...]
    splits: tuple[str, ...]
    segments: tuple[str, ...]
    labels: tuple[str, ...] | str | None  # None for kinds without labels; FROM_TRAIN
    tags: tuple[str, ...] | str | None
    metric: str
    local: tuple[LocalSource, ...]
    hub: tuple[HubSource, ...]
    hyperparameters: Mapping[str, Mapping[str, Any]]
    label_map: Mapping[str, str] = field(default_factory=dict)
    label_names: Mapping[str, str] = field(default_factory=dict)  # a label as the data writes it -> a readable name
    score_range: tuple[float, float] | None = None  # regression kinds: the scores a row may hold
    unlabelled_splits: tuple[str, ...] = ()
    dev_fraction: float | None = None  # a benchmark without a dev set: the share of train held out for one
    description: str = ""
    homepage: str = ""
    download: str = ""
    citation: str = ""
    path: str = ""

    @property
    def task_kind(self) -> TaskKind:
        return KINDS[self.kind]

    @property
    def dev_set(self) -> str:
        """Where the validation split comes from: the release's own dev files, or a hold-out of train."""
        if self.dev_fraction is not None:
            return f"{self.dev_fraction:.0%} of train, held out (seeded, recorded)"
        names = sorted({s.splits["validation"] for s in (*self.local, *self.hub) if "validation" in s.splits})
        if "validation" not in self.splits or not names:
            return "none"
        return "released: " + ", ".join(names)

    def check_lang(self, lang: str) -> None:
        if lang not in self.languages:
            raise CardError(f"task {self.name!r} has no language {lang!r}; "
                            f"its languages are: {', '.join(self.languages)}")

    def check_split(self, split: str) -> None:
        if split not in self.splits:
            raise CardError(f"task {self.name!r} has no split {split!r}; its splits are: {', '.join(self.splits)}")

    def variant(self, name: str) -> Mapping[str, Any]:
        """The papers' hyperparameters for one model variant (`mbert`, `gat`, `sla`, ...)."""
        if name not in self.hyperparameters:
            raise CardError(f"task {self.name!r} states no hyperparameters for variant {name!r}; "
                            f"it has: {', '.join(self.hyperparameters) or 'none'}")
        return self.hyperparameters[name]


def list_tasks() -> list[str]:
    """Names of every shipped task card, sorted."""
    return [p.stem for p in shipped_files(TASKS)]


def load_card(name_or_path: str | Path) -> TaskCard:
    """A task card by name (`"xnli"`) or by the path of a `.toml` file outside the package."""
    if isinstance(name_or_path, Path) or str(name_or_path).endswith(".toml"):
        path = Path(name_or_path)
        if not path.is_file():
            raise CardError(f"no task card file {path}")
        text, where = path.read_text(encoding="utf-8"), str(path)
    else:
        name = str(name_or_path)
        if name not in list_tasks():
            raise CardError(f"unknown task {name!r}; the tasks are: {', '.join(list_tasks())}")
        path = shipped_folder(TASKS) / f"{name}.toml"
        text, where = path.read_text(encoding="utf-8"), f"{TASKS}/{name}.toml"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise CardError(f"{where}: not valid TOML ({err})") from err
    return parse_card(data, where)


def parse_card(data: Mapping[str, Any], where: str) -> TaskCard:
    """Validate a card's TOML table; every error names `where` and the key."""
    _no_unknown(data, _CARD_KEYS, where)
    name = _get(data, "name", str, where)
    kind = _get(data, "kind", str, where)
    if kind not in KINDS:
        raise CardError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    task_kind = KINDS[kind]
    languages = _strings(data, "languages", where)
    splits = _strings(data, "splits", where)
    for split in splits:
        if split not in SPLITS:
            raise CardError(f"{where}: split {split!r} is not one of {', '.join(SPLITS)}")
    train_languages = _strings(data, "train_languages", where, default=languages)
    _subset(train_languages, languages, "train_languages", "languages", where)
    unlabelled = _strings(data, "unlabelled_splits", where, default=())
    _subset(unlabelled, splits, "unlabelled_splits", "splits", where)
    dev_fraction = _dev_fraction(data, splits, where)
    metric = _get(data, "metric", str, where)
    if metric not in METRICS:
        raise CardError(f"{where}: metric {metric!r} is not one of {', '.join(METRICS)}")
    segments = _segments(data, task_kind, where)
    labels = _label_set(data, "labels", task_kind, where)
    tags = _label_set(data, "tags", task_kind, where)
    score_range = _score_range(data, task_kind, where)
    roles = ("id", *segments, *task_kind.gold.roles)  # what a row may carry: the column roles a card can map
    local = tuple(_local(entry, i, segments, roles, languages, splits, where)
                  for i, entry in enumerate(_tables(data, "local", where)))
    hub = tuple(_hub(entry, i, roles, languages, splits, where)
                for i, entry in enumerate(_tables(data, "hub", where)))
    if not local and not hub:
        raise CardError(f"{where}: a card needs at least one [[local]] layout or [[hub]] source")
    hyper = dict(data.get("hyperparameters", {})) if isinstance(data.get("hyperparameters", {}), dict) else None
    if hyper is None:
        raise CardError(f"{where}: [hyperparameters] must be a table of variants")
    for variant, values in hyper.items():
        if variant not in HYPERPARAMETER_SECTIONS:
            raise CardError(f"{where}: [hyperparameters.{variant}] is not a model variant; sections: "
                            f"{', '.join(HYPERPARAMETER_SECTIONS)}")
        hyper[variant] = _hyperparameters(values, f"{where}: [hyperparameters.{variant}]")
    label_map = data.get("label_map", {})
    if not isinstance(label_map, dict) or not all(isinstance(v, str) for v in label_map.values()):
        raise CardError(f"{where}: label_map must map raw labels to label strings")
    label_names = data.get("label_names", {})
    if not isinstance(label_names, dict) or not all(isinstance(v, str) for v in label_names.values()):
        raise CardError(f"{where}: label_names must map labels to readable names, e.g. {{\"0\" = \"negative\"}}")
    unknown = sorted(set(label_names) - set(labels)) if isinstance(labels, tuple) else []
    if unknown:
        raise CardError(f"{where}: label_names names {', '.join(unknown)}, which are not among labels")
    return TaskCard(
        name=name, title=_get(data, "title", str, where, default=name), kind=kind, languages=languages,
        train_languages=train_languages, splits=splits, segments=segments, labels=labels, tags=tags,
        metric=metric, local=local, hub=hub, hyperparameters=hyper, label_map=label_map,
        label_names=label_names, score_range=score_range,
        unlabelled_splits=unlabelled, dev_fraction=dev_fraction,
        description=_get(data, "description", str, where, default=""),
        homepage=_get(data, "homepage", str, where, default=""),
        download=_get(data, "download", str, where, default=""),
        citation=_get(data, "citation", str, where, default=""), path=where,
    )


# -- validation helpers ---------------------------------------------------------------------------


def _dev_fraction(data: Mapping[str, Any], splits: tuple[str, ...], where: str) -> float | None:
    """A card without a validation split must say what share of its training data is held out as one."""
    value = data.get("dev_fraction")
    if "validation" in splits:
        if value is not None:
            raise CardError(f"{where}: dev_fraction is for benchmarks without a validation split; this card "
                            "has one (drop dev_fraction, or validation from splits)")
        return None
    if "train" not in splits:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise CardError(f"{where}: the card has no validation split, so it needs dev_fraction, the share of the "
                        f"training data held out as one (a number strictly between 0 and 1), got {value!r}")
    return float(value)


def _no_unknown(table: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise CardError(f"{where}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(known))}")


_MISSING = object()


def _get(table: Mapping[str, Any], key: str, kind: type, where: str, default: Any = _MISSING) -> Any:
    if key not in table:
        if default is _MISSING:
            raise CardError(f"{where}: missing key {key!r}")
        return default
    value = table[key]
    if not isinstance(value, kind):
        raise CardError(f"{where}: {key} must be a {kind.__name__}, got {value!r}")
    return value


def _strings(table: Mapping[str, Any], key: str, where: str, default: Any = _MISSING) -> tuple[str, ...]:
    value = _get(table, key, list, where, default=default)
    if not all(isinstance(v, str) for v in value):
        raise CardError(f"{where}: {key} must be a list of strings")
    return tuple(value)


def _subset(values: tuple[str, ...], allowed: tuple[str, ...], key: str, of: str, where: str) -> None:
    extra = [v for v in values if v not in allowed]
    if extra:
        raise CardError(f"{where}: {key} {', '.join(extra)} not in {of} ({', '.join(allowed)})")


def _tables(data: Mapping[str, Any], key: str, where: str) -> list[Mapping[str, Any]]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise CardError(f"{where}: {key} must be an array of tables ([[{key}]])")
    return value


def _segments(data: Mapping[str, Any], task_kind: TaskKind, where: str) -> tuple[str, ...]:
    if task_kind.segments is not None:
        if "segments" in data and tuple(data["segments"]) != task_kind.segments:
            raise CardError(f"{where}: this kind's segments are fixed: {', '.join(task_kind.segments)}")
        return task_kind.segments
    segments = _strings(data, "segments", where)
    if len(segments) != task_kind.n_segments:
        raise CardError(f"{where}: this kind has {task_kind.n_segments} segment(s); segments lists {len(segments)}")
    return segments


def _label_set(data: Mapping[str, Any], key: str, task_kind: TaskKind, where: str
               ) -> tuple[str, ...] | str | None:
    if key not in task_kind.gold.label_sets:
        if key in data:
            raise CardError(f"{where}: this kind has no {key}")
        return None
    value = data.get(key)
    if value == FROM_TRAIN:
        return FROM_TRAIN
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise CardError(f"{where}: {key} must be a non-empty list of strings or {FROM_TRAIN!r}")
    if len(set(value)) != len(value):
        raise CardError(f"{where}: {key} lists a value twice")
    return tuple(value)


def _score_range(data: Mapping[str, Any], task_kind: TaskKind, where: str) -> tuple[float, float] | None:
    """A regression's [low, high]: scores outside it are bad rows (STS-B: 0 to 5)."""
    if "score_range" not in task_kind.gold.label_sets:
        if "score_range" in data:
            raise CardError(f"{where}: this kind has no score_range")
        return None
    value = data.get("score_range")
    if (not isinstance(value, list) or len(value) != 2 or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                                              for v in value) or value[0] >= value[1]):
        raise CardError(f"{where}: score_range must be [low, high], two numbers with low < high, got {value!r}")
    return float(value[0]), float(value[1])


def _check_roles(columns: Mapping[str, Any], key: str, roles: tuple[str, ...], where: str) -> None:
    extra = [role for role in columns if role not in roles]
    if extra:
        raise CardError(f"{where}: {key} maps {', '.join(extra)}, not a role of this task; its roles: "
                        f"{', '.join(roles)}")


def _split_names(entry: Mapping[str, Any], splits: tuple[str, ...], where: str) -> dict[str, str]:
    names = _get(entry, "splits", dict, where)
    _subset(tuple(names), splits, "splits", "the card's splits", where)
    return {k: str(v) for k, v in names.items()}


def _entry_languages(entry: Mapping[str, Any], languages: tuple[str, ...], where: str) -> tuple[str, ...] | None:
    if "languages" not in entry:
        return None
    langs = _strings(entry, "languages", where)
    _subset(langs, languages, "languages", "the card's languages", where)
    return langs


def _local(entry: Mapping[str, Any], i: int, segments: tuple[str, ...], roles: tuple[str, ...],
           languages: tuple[str, ...], splits: tuple[str, ...], where: str) -> LocalSource:
    here = f"{where}: [[local]] #{i + 1}"
    _no_unknown(entry, _LOCAL_KEYS, here)
    fmt = _get(entry, "format", str, here)
    if fmt not in READERS:
        raise CardError(f"{here}: format {fmt!r} is not one of {', '.join(sorted(READERS))}")
    path = entry.get("path")
    paths = (path,) if isinstance(path, str) else tuple(path) if isinstance(path, list) else None
    if paths is None or not all(isinstance(p, str) for p in paths) or (READERS[fmt].needs_files and not paths):
        raise CardError(f"{here}: path must be a pattern string or a list of them")
    allowed = {"lang", "LANG", "split", *segments}
    for p in paths:
        for placeholder in _placeholders(p):
            if placeholder not in allowed:
                raise CardError(f"{here}: path {p!r} uses {{{placeholder}}}; "
                                f"allowed: {', '.join('{' + a + '}' for a in sorted(allowed))}")
    options = _get(entry, "options", dict, here, default={})
    READERS[fmt].check_options(options, here)
    _check_roles(options.get("columns", {}), "options.columns", roles, here)
    lang_codes = _lang_codes(entry, languages, here)
    return LocalSource(
        layout=_get(entry, "layout", str, here), format=fmt, paths=paths,
        splits=_split_names(entry, splits, here), languages=_entry_languages(entry, languages, here),
        lang_codes=lang_codes, options=options,
    )


def _lang_codes(entry: Mapping[str, Any], languages: tuple[str, ...], here: str) -> dict[str, str]:
    lang_codes = _get(entry, "lang_codes", dict, here, default={})
    _subset(tuple(lang_codes), languages, "lang_codes", "the card's languages", here)
    for lang, code in lang_codes.items():
        if not isinstance(code, str):
            raise CardError(f"{here}: lang_codes {lang} = {code!r} must be a string: the code the file or config "
                            f"names use for {lang} (e.g. en = \"eng\")")
    return lang_codes


def _placeholders(pattern: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(pattern) if name is not None]


def _hub(entry: Mapping[str, Any], i: int, roles: tuple[str, ...], languages: tuple[str, ...],
         splits: tuple[str, ...], where: str) -> HubSource:
    here = f"{where}: [[hub]] #{i + 1}"
    _no_unknown(entry, _HUB_KEYS, here)
    columns = _get(entry, "columns", dict, here)
    _check_roles(columns, "columns", roles, here)
    return HubSource(
        dataset=_get(entry, "dataset", str, here), config=_get(entry, "config", str, here, default=None),
        splits=_split_names(entry, splits, here), columns=columns,
        languages=_entry_languages(entry, languages, here), filter=_get(entry, "filter", dict, here, default={}),
        revision=_get(entry, "revision", str, here, default=None), lang_codes=_lang_codes(entry, languages, here),
    )


def _hyperparameters(values: Any, here: str) -> dict[str, Any]:
    """A section checked, under the run settings' names (a paper's name, e.g. `delta`, is named in errors
    as the card writes it)."""
    if not isinstance(values, dict):
        raise CardError(f"{here} must be a table")
    _no_unknown(values, set(HYPERPARAMETERS) | set(PAPER_NAMES), here)
    named: dict[str, Any] = {}
    for key, value in values.items():
        name = PAPER_NAMES.get(key, key)
        if name in named:
            raise CardError(f"{here}: {key} and {name} are one setting; give it once, as {name}")
        for item in value if isinstance(value, list) else [value]:
            if not _is_type(item, HYPERPARAMETERS[name]):
                raise CardError(f"{here}: {key} must be {HYPERPARAMETERS[name]} (or a list of them for a "
                                f"search grid), got {value!r}")
        named[name] = value
    return named


def _is_type(value: Any, type_name: str) -> bool:
    if type_name == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    return {"int": isinstance(value, int), "number": isinstance(value, (int, float)),
            "str": isinstance(value, str)}[type_name]
