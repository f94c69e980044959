"""The Hugging Face hub path: which dataset, config and split a card asks `datasets.load_dataset` for.

A card's `[[hub]]` entries are tried in order for a (language, split); the first that serves it
is requested. Hub columns are mapped to roles as the card says, class labels become their names,
and QA `answers` ({"text": [...], "answer_start": [...]}) become (text, start) pairs, so hub rows
go through the same `build_example` checks as local files.

Without the network (`HF_HUB_OFFLINE=1`, or none), `load_hub_rows` raises `HubUnavailableError`;
`xsyn.data.loading` turns it into a message naming the files to download and where to put them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from xsyn.data.cards import HubSource, TaskCard
from xsyn.data.readers import Row
from xsyn.utils.errors import XsynError


@dataclass(frozen=True)
class HubRequest:
    """Exactly what `datasets.load_dataset` is called with, plus the row filter."""

    dataset: str
    config: str | None
    split: str
    revision: str | None = None
    filter: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        args = [repr(self.dataset)] + ([repr(self.config)] if self.config else []) + [f"split={self.split!r}"]
        if self.revision:
            args.append(f"revision={self.revision!r}")
        where = f" where {' and '.join(f'{c} == {v!r}' for c, v in self.filter)}" if self.filter else ""
        return f"datasets.load_dataset({', '.join(args)}){where}"


class HubUnavailableError(XsynError, ConnectionError):
    """The hub could not serve a request (offline, unknown dataset, no access)."""

    def __init__(self, request: HubRequest, cause: BaseException):
        super().__init__(f"{request.describe()} failed: {type(cause).__name__}: {cause}")
        self.request = request


def hub_requests(card: TaskCard, split: str, segment_langs: Mapping[str, str]) -> list[tuple[HubSource, HubRequest]]:
    """Every hub request that serves these segment languages and split, in the card's order."""
    langs = set(segment_langs.values())
    lang = next(iter(segment_langs.values()))
    out = []
    for source in card.hub:
        if not all(source.serves(lg, split) for lg in langs):
            continue
        values = {name: source.lang_codes.get(lg, lg) for name, lg in {"lang": lang, **segment_langs}.items()}
        if len(langs) > 1 and not any("{" + name + "}" in (source.config or "") for name in segment_langs):
            continue  # a same-language config cannot give a cross-language pair
        config = source.config.format(**values) if source.config else None
        row_filter = tuple((col, pattern.format(**values)) for col, pattern in source.filter.items())
        out.append((source, HubRequest(source.dataset, config, source.splits[split], source.revision, row_filter)))
    return out


def probe_hub(request: HubRequest) -> None:
    """Whether the hub (or, offline, the datasets cache) can serve `request`: its metadata is read, no rows;
    else `HubUnavailableError`."""
    import datasets

    try:
        datasets.load_dataset_builder(request.dataset, request.config, revision=request.revision)
    except (OSError, ValueError) as err:  # as `load_hub_rows`
        raise HubUnavailableError(request, err) from err


def load_hub_rows(source: HubSource, request: HubRequest) -> Iterator[Row]:
    """Rows (role -> value) of one hub dataset split."""
    import datasets

    try:
        dataset = datasets.load_dataset(request.dataset, request.config, split=request.split,
                                        revision=request.revision)
    except (OSError, ValueError) as err:  # ConnectionError (offline), DatasetNotFoundError, HTTP errors
        raise HubUnavailableError(request, err) from err
    missing = [c for c in [*source.columns.values(), *dict(request.filter)] if c not in dataset.features]
    if missing:
        raise HubUnavailableError(request, KeyError(f"no column(s) {', '.join(missing)}; the dataset has "
                                                    f"{', '.join(dataset.features)}"))
    features = dataset.features
    for i, record in enumerate(dataset):
        if any(str(record[col]) != value for col, value in request.filter):
            continue
        values = {role: hub_value(record[col], features[col]) for role, col in source.columns.items()}
        yield Row(f"{request.describe()} row {i}", values)


def hub_value(value: Any, feature: Any) -> Any:
    """A hub cell as a reader would give it: class ids -> names, SQuAD answers -> (text, start)."""
    import datasets

    if isinstance(feature, datasets.ClassLabel):
        return feature.int2str(value) if value is not None and value >= 0 else None
    inner = getattr(feature, "feature", None)
    if isinstance(inner, datasets.ClassLabel):
        return [inner.int2str(v) for v in value]
    if isinstance(value, dict) and "text" in value and "answer_start" in value:
        return list(zip(value["text"], (int(s) for s in value["answer_start"])))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return value
