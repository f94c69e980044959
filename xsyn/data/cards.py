"""Task cards: one declarative TOML file per benchmark (`tasks/*.toml`, beside the package).

A card says what a task is (kind, languages, splits, labels, metric), where its data comes from
(local file layouts, each read by a named format reader, and Hugging Face hub datasets) and which
hyperparameters the papers used per model variant. Adding a benchmark in a known format is adding
a card; nothing else changes.

>>> card = load_card("pawsx")
>>> card.kind, card.languages[:3], card.metric
('pair-classification', ('de', 'en', 'es'), 'accuracy')
>>> card.hyperparameters["gat"]["gat_delta"]  # cards name settings as the run settings do (`xsyn settings`)
4

Every card has a `version`; it and the hash of the card's content (after `include`s) go into every results
file and every result's fingerprint, so an edited card never reuses results computed under the old one.
Every mistake in a card is a `CardError` naming the card file and the key (a dotted path), with the valid
values (`xsyn.utils.schema`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import string
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from xsyn.data.errors import CardError
from xsyn.data.kinds import KINDS, TaskKind
from xsyn.data.readers import READERS
from xsyn.data.rows import FROM_TRAIN
from xsyn.metrics import METRICS
from xsyn.models.variants import variant_names
from xsyn.utils.io import not_utf8_at
from xsyn.utils.schema import (
    Invalid,
    check_values,
    construct,
    did_you_mean,
    distinct,
    one_of,
    strict,
    validated_field,
)
from xsyn.utils.shipped import TASKS, shipped_files, shipped_folder

SPLITS = ("train", "validation", "test")
INCLUDE = "include"  # a card's key naming the files (beside it) whose tables it shares, as lm-eval's `include`
_MAX_INCLUDE_DEPTH = 8


@strict
@dataclass(frozen=True)
class LocalSource:
    """One accepted file layout: `path` pattern(s) relative to the task's data folder.

    Patterns use `{lang}` (through `lang_codes`, e.g. en -> eng), `{LANG}` (upper case), `{split}`
    (the layout's own split name, from `splits`) and, for cross-language files, one placeholder per
    segment (`{context}`, `{question}`). A path through a zip archive (`data.zip/member.txt`) is
    read from the archive. `options` go to the format reader.
    """

    layout: str
    format: str = validated_field(one_of(lambda: sorted(READERS)))
    path: str | list[str]
    splits: dict[str, str] = validated_field(distinct)
    languages: tuple[str, ...] | None = validated_field(distinct, default=None)
    lang_codes: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.path,) if isinstance(self.path, str) else tuple(self.path)

    def serves(self, lang: str, split: str) -> bool:
        return split in self.splits and (self.languages is None or lang in self.languages)

    def cross_language(self, segments: tuple[str, ...]) -> bool:
        """Whether one file holds segments of different languages (MLQA's context x question)."""
        return any("{" + name + "}" in p for p in self.paths for name in segments)

    def resolve(self, lang: str, split: str, segment_langs: dict[str, str] | None = None) -> list[str]:
        code = self.lang_codes.get(lang, lang)
        values = {"lang": code, "LANG": code.upper(), "split": self.splits[split]}
        for name, seg_lang in (segment_langs or {}).items():
            values[name] = self.lang_codes.get(seg_lang, seg_lang)
        return [p.format(**values) for p in self.paths]


@strict
@dataclass(frozen=True)
class HubSource:
    """One Hugging Face hub dataset: id, config pattern, split names and column roles. The config's
    `{lang}` is the language's code in `lang_codes` where it has one (XTREME's `udpos.English`).
    `data_dir` is a folder of the repository (pattern as the config's) read as the dataset: a
    `refs/convert/parquet` branch keeps each of a script's configs as `{config}/{split}/NNNN.parquet`
    and has no README, so datasets sees one `default` config there and a config name fails. `note`
    says what the source holds where it differs from what the card describes; each load records it."""

    dataset: str
    splits: dict[str, str] = validated_field(distinct)
    columns: dict[str, str]
    config: str | None = None
    data_dir: str | None = None
    note: str = ""
    languages: tuple[str, ...] | None = validated_field(distinct, default=None)
    filter: dict[str, str] = field(default_factory=dict)
    revision: str | None = None
    lang_codes: dict[str, str] = field(default_factory=dict)

    def serves(self, lang: str, split: str) -> bool:
        return split in self.splits and (self.languages is None or lang in self.languages)


@strict
@dataclass(frozen=True)
class PublishedSizes:
    """The examples of each standard split as its release or paper states them (`[sizes]`): what
    `xsyn experiment plan` counts with before the data is on the machine (the data, once there, wins)."""

    source: str  # the paper, release or dataset card the figures are taken from
    train: dict[str, int] = field(default_factory=dict)  # language -> examples
    validation: dict[str, int] = field(default_factory=dict)
    test: dict[str, int] = field(default_factory=dict)

    def validate_counts(self) -> None:
        for split in SPLITS:
            for lang, count in getattr(self, split).items():
                if count < 1:
                    raise Invalid(f"{split}.{lang}", f"must be a positive number of examples, got {count}")

    def of(self, split: str, lang: str) -> int | None:
        return getattr(self, split).get(lang)


@strict
@dataclass(frozen=True)
class TaskCard:
    """A task card as its file states it (`include`s resolved); the rules across keys are `validate_*`."""

    name: str
    version: int  # raise it when an edit changes what the card means; recorded with `content_hash`
    kind: str = validated_field(one_of(KINDS))
    languages: tuple[str, ...] = validated_field(distinct)
    splits: tuple[str, ...] = validated_field([distinct, one_of(SPLITS)])
    metric: str = validated_field(one_of(METRICS.names))
    title: str = ""  # default: the name
    train_languages: tuple[str, ...] = validated_field(distinct, default=())  # default: every language
    segments: tuple[str, ...] = ()  # default: the kind's own
    labels: tuple[str, ...] | str | None = None  # None for kinds without labels; FROM_TRAIN
    tags: tuple[str, ...] | str | None = None
    local: tuple[LocalSource, ...] = ()
    hub: tuple[HubSource, ...] = ()
    hyperparameters: dict[str, dict[str, Any]] = field(default_factory=dict)  # checked by the run settings
    label_map: dict[str, str] = field(default_factory=dict)
    label_names: dict[str, str] = field(default_factory=dict)  # a label as the data writes it -> a readable name
    score_range: tuple[float, float] | None = None  # regression kinds: the scores a row may hold
    unlabelled_splits: tuple[str, ...] = ()
    dev_fraction: float | None = None  # a benchmark without a dev set: the share of train held out for one
    sizes: PublishedSizes | None = None  # the standard splits' published sizes (`xsyn experiment plan`)
    artificial_languages: bool = False  # languages made up for the task (synth): no typology database has them
    description: str = ""
    homepage: str = ""
    download: str = ""
    citation: str = ""
    path: str = ""  # where the card was read from, for messages (set by the loader)
    file: str = ""  # the absolute path of a card given as a file (--task PATH.toml); "" for a shipped card
    content_hash: str = ""  # of the card's resolved table (set by the loader)

    def validate_languages(self) -> None:
        _subset(self.train_languages, self.languages, "train_languages", "languages")
        _subset(self.unlabelled_splits, self.splits, "unlabelled_splits", "splits")

    def validate_dev_fraction(self) -> None:
        """A card without a validation split must say what share of its training data is held out as one."""
        if "validation" in self.splits:
            if self.dev_fraction is not None:
                raise Invalid("dev_fraction", "is for benchmarks without a validation split; this card has one "
                              "(drop dev_fraction, or validation from splits)")
        elif "train" in self.splits and not (self.dev_fraction is not None and 0 < self.dev_fraction < 1):
            raise Invalid("dev_fraction", "the card has no validation split, so it needs dev_fraction, the share "
                          "of the training data held out as one (a number strictly between 0 and 1), got "
                          f"{self.dev_fraction!r}")

    def validate_segments(self) -> None:
        task_kind = self.task_kind
        if task_kind.segments is not None and self.segments != task_kind.segments:
            raise Invalid("segments", f"this kind's segments are fixed: {', '.join(task_kind.segments)}")
        if len(self.segments) != task_kind.n_segments:
            raise Invalid("segments", f"this kind has {task_kind.n_segments} segment(s); segments lists "
                          f"{len(self.segments)}")

    def validate_label_sets(self) -> None:
        needed_sets = self.task_kind.gold.label_sets
        if ("score_range" in needed_sets) != (self.score_range is not None):
            raise Invalid("score_range", "this kind has none" if self.score_range is not None else
                          "a regression card gives [low, high], the scores a row may hold")
        if self.score_range is not None and not self.score_range[0] < self.score_range[1]:
            raise Invalid("score_range", f"must be [low, high] with low < high, got {list(self.score_range)}")
        for key in ("labels", "tags"):
            value, needed = getattr(self, key), key in needed_sets
            if not needed:
                if value is not None:
                    raise Invalid(key, "this kind has none")
            elif value != FROM_TRAIN and (not isinstance(value, tuple) or not value):
                raise Invalid(key, f"must be a non-empty list of strings or {FROM_TRAIN!r}")
            elif isinstance(value, tuple) and len(set(value)) != len(value):
                raise Invalid(key, "lists a value twice")
        unknown = sorted(set(self.label_names) - set(self.labels)) if isinstance(self.labels, tuple) else []
        if unknown:
            raise Invalid("label_names", f"names {', '.join(unknown)}, which are not among labels")
        mapped = sorted(set(self.label_map.values()) - set(self.labels)) if isinstance(self.labels, tuple) else []
        if mapped:  # every row so mapped would be refused as a label the card does not have
            raise Invalid("label_map", f"maps to {', '.join(mapped)}, which are not among labels "
                                       f"({', '.join(self.labels)})")

    def validate_sources(self) -> None:
        if not self.local and not self.hub:
            raise Invalid("local", "a card needs at least one [[local]] layout or [[hub]] source")
        roles = self.roles
        allowed = {"lang", "LANG", "split", *self.segments}
        for i, source in enumerate(self.local):
            here = f"local[{i}]"
            if READERS[source.format].needs_files and not source.paths:
                raise Invalid(f"{here}.path", "must be a pattern string or a list of them")
            for pattern in source.paths:
                for placeholder in _placeholders(pattern):
                    if placeholder not in allowed:
                        raise Invalid(f"{here}.path", f"{pattern!r} uses {{{placeholder}}}; allowed: "
                                      + ", ".join("{" + a + "}" for a in sorted(allowed)))
            READERS[source.format].check_options(source.options, f"{here}.options")
            _check_roles(source.options.get("columns", {}), f"{here}.options.columns", roles)
            self._check_entry(source, here)
        for i, hub in enumerate(self.hub):
            _check_roles(hub.columns, f"hub[{i}].columns", roles)
            self._check_entry(hub, f"hub[{i}]")

    def _check_entry(self, source: LocalSource | HubSource, here: str) -> None:
        _subset(tuple(source.splits), self.splits, f"{here}.splits", "the card's splits")
        _subset(source.languages or (), self.languages, f"{here}.languages", "the card's languages")
        _subset(tuple(source.lang_codes), self.languages, f"{here}.lang_codes", "the card's languages")

    def validate_sizes(self) -> None:
        for split in SPLITS if self.sizes is not None else ():
            if getattr(self.sizes, split) and split not in self.splits:
                raise Invalid(f"sizes.{split}", f"the card has no {split} split (its splits: {', '.join(self.splits)})")
            _subset(tuple(getattr(self.sizes, split)), self.languages, f"sizes.{split}", "the card's languages")

    def validate_hyperparameter_sections(self) -> None:
        for section in self.hyperparameters:
            sections = (*variant_names(), "mbert")  # the variants, plus `mbert` for the plain model
            if section not in sections:
                raise Invalid(f"hyperparameters.{section}", "is not a model variant; sections: "
                              f"{', '.join(sections)}")

    @property
    def roles(self) -> tuple[str, ...]:
        """What a row of this kind may carry (`xsyn.data.rows`): the column roles a card can map."""
        return ("id", *self.segments, *self.task_kind.gold.roles)

    @property
    def stamp(self) -> dict[str, Any]:
        """What identifies this card's content, for results files and result fingerprints."""
        return {"name": self.name, "version": self.version, "hash": self.content_hash}

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

    def variant(self, name: str) -> dict[str, Any]:
        """The papers' hyperparameters for one model variant (`mbert`, `gat`, `sla`, ...)."""
        if name not in self.hyperparameters:
            raise CardError(f"task {self.name!r} states no hyperparameters for variant {name!r}; "
                            f"it has: {', '.join(self.hyperparameters) or 'none'}")
        return self.hyperparameters[name]


def list_tasks() -> list[str]:
    """Names of every shipped task card, sorted (files starting with `_` hold included tables, not cards)."""
    return [p.stem for p in shipped_files(TASKS) if not p.name.startswith("_")]


def load_card(name_or_path: str | Path) -> TaskCard:
    """A task card by name (`"xnli"`) or by the path of a `.toml` file outside the package."""
    if isinstance(name_or_path, Path) or str(name_or_path).endswith(".toml"):
        path = Path(name_or_path)
        if not path.is_file():
            raise CardError(f"no task card file {path}")
        where = str(path)
    else:
        name = str(name_or_path)
        if name not in list_tasks():
            raise CardError(f"unknown task {name!r}; the tasks are: {', '.join(list_tasks())}"
                            f"{did_you_mean(name, list_tasks())}")
        path, where = shipped_folder(TASKS) / f"{name}.toml", f"{TASKS}/{name}.toml"
    card = parse_card(read_card_table(path, where), where)
    return replace(card, file=str(path.absolute())) if where == str(path) else card


def read_card_table(path: Path, where: str, depth: int = 0) -> dict[str, Any]:
    """A card file's table with its `include`s merged under it: each included file (a path relative to the
    including one) gives tables the card extends key by key, and values the card may replace."""
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise CardError(f"{where}: {not_utf8_at(raw, err)}; save it as UTF-8") from None
    except tomllib.TOMLDecodeError as err:
        raise CardError(f"{where}: not valid TOML ({err})") from None
    includes = data.pop(INCLUDE, [])
    includes = [includes] if isinstance(includes, str) else includes
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise CardError(where, INCLUDE, f"expected a file name or a list of them, got {includes!r}")
    if includes and depth >= _MAX_INCLUDE_DEPTH:
        raise CardError(where, INCLUDE, f"includes nest deeper than {_MAX_INCLUDE_DEPTH} files (a cycle?)")
    merged: dict[str, Any] = {}
    for name in includes:
        included = path.parent / name
        if not included.is_file():
            raise CardError(where, INCLUDE, f"no file {included}")
        merged = _merge_tables(merged, read_card_table(included, f"{where} -> {name}", depth + 1))
    return _merge_tables(merged, data)


def _merge_tables(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        both_tables = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = _merge_tables(merged[key], value) if both_tables else value
    return merged


def parse_card(data: dict[str, Any], where: str) -> TaskCard:
    """A card from its table (`include`s resolved); every error names `where` and the key."""
    for derived in ("path", "file", "content_hash"):
        if derived in data:
            raise CardError(where, derived, "unknown key (the loader records it)")
    _refuse_misplaced_keys(data, where)
    values = check_values(TaskCard, data, where, error=CardError)
    kind = KINDS[values["kind"]]
    values.setdefault("title", values["name"])
    values.setdefault("train_languages", values["languages"])
    if kind.segments is not None:
        values.setdefault("segments", kind.segments)
    values["path"] = where
    values["content_hash"] = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return construct(TaskCard, values, where, error=CardError)


def _refuse_misplaced_keys(data: dict[str, Any], where: str) -> None:
    """A card key written below a [table] header belongs to that table in TOML: name the table and the fix."""
    card_keys = {f.name for f in dataclasses.fields(TaskCard) if f.init}
    tables: list[tuple[str, str, Any, set[str]]] = []
    for name, cls in (("local", LocalSource), ("hub", HubSource)):
        entries = data.get(name)
        own = {f.name for f in dataclasses.fields(cls)}
        for i, entry in enumerate(entries if isinstance(entries, list) else []):
            tables.append((f"{name}[{i}]", f"[[{name}]] (number {i + 1})", entry, own))
    if isinstance(data.get("sizes"), dict):
        tables.append(("sizes", "[sizes]", data["sizes"], {f.name for f in dataclasses.fields(PublishedSizes)}))
    sections = data.get("hyperparameters")
    for section, settings in (sections.items() if isinstance(sections, dict) else []):
        tables.append((f"hyperparameters.{section}", f"[hyperparameters.{section}]", settings, set()))
    for key, header, table, own in tables:
        for name in table if isinstance(table, dict) else []:
            if name in card_keys and name not in own:
                raise CardError(where, f"{key}.{name}", f"found in the {header} table, but {name!r} is a key of the "
                                "card itself: TOML puts a key in the table whose [header] is above it, so move it "
                                "above the card's first [header]")


def _subset(values: tuple[str, ...], allowed: tuple[str, ...], key: str, of: str) -> None:
    extra = [v for v in values if v not in allowed]
    if extra:
        raise Invalid(key, f"{', '.join(extra)} not in {of} ({', '.join(allowed)})")


def _check_roles(columns: dict[str, Any], key: str, roles: tuple[str, ...]) -> None:
    extra = [role for role in columns if role not in roles]
    if extra:
        raise Invalid(key, f"maps {', '.join(extra)}, not a role of this task; its roles: {', '.join(roles)}")


def _placeholders(pattern: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(pattern) if name is not None]


def card_sources(card: TaskCard) -> tuple[str, str]:
    """Where a task's data comes from, in words: its local files (with their layouts) and its hub data sets."""
    local = "; ".join(f"{', '.join(s.paths) or 'generated'} ({s.layout})" for s in card.local) or "none"
    hub = "; ".join(s.dataset + (f" [{s.config}]" if s.config else "") + (f" [{s.data_dir}/]" if s.data_dir else "")
                    for s in card.hub) or "none"
    return local, hub


def card_text(card: TaskCard, detailed: bool = False) -> str:
    """What `xsyn tasks` prints of a card: its title, kind, metric, languages, where its data comes from and its
    dev set; `detailed` (one card asked for by name) adds its splits, labels or tags and hyperparameters."""
    local, hub = card_sources(card)
    lines = [f"{card.name}: {card.title} ({card.kind}, metric {card.metric})",
             f"  languages: {' '.join(card.languages)} (train on {' '.join(card.train_languages)})",
             f"  local: {local}", f"  hub: {hub}", f"  dev set: {card.dev_set}"]
    if detailed:
        lines.append(f"  splits: {', '.join(card.splits)}")
        lines += [f"  {key}: {value if isinstance(value, str) else ' '.join(value)}"
                  for key, value in (("labels", card.labels), ("tags", card.tags)) if value is not None]
        lines += [f"  [{variant}] " + ", ".join(f"{k}={v}" for k, v in values.items())
                  for variant, values in card.hyperparameters.items()]
    return "\n".join(lines)


def tasks_markdown(cards: Sequence[TaskCard]) -> str:
    """A Markdown table of tasks and their sources (the docs' task list, `xsyn tasks --markdown`)."""
    lines = ["| task | kind | languages | metric | dev set | local files (layout) | hub |",
             "|---|---|---|---|---|---|---|"]
    for card in cards:
        local, hub = card_sources(card)
        lines.append(f"| `{card.name}` ({card.title}) | {card.kind} | {' '.join(card.languages)} | "
                     f"{card.metric} | {card.dev_set} | {local} | {hub} |")
    return "\n".join(lines)
