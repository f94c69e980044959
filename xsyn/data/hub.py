"""The Hugging Face hub path: which dataset, config and split a card asks `datasets.load_dataset` for.

A card's `[[hub]]` entries are tried in order for a (language, split); the first that serves it
is requested. Hub columns are mapped to roles as the card says, class labels become their names,
and QA `answers` ({"text": [...], "answer_start": [...]}) become (text, start) pairs, so hub rows
go through the same `build_example` checks as local files.

A source the hub cannot serve raises `HubUnavailableError`: no network (`HF_HUB_OFFLINE=1`, or none), a
transport error of datasets' HTTP client, an unknown dataset, config or column, or a script repository
(datasets 4 and later run no dataset scripts); `xsyn.data.loading` then tries the card's next `[[hub]]`
source, and after the last names every source tried, why each failed, and the files to put in place.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from huggingface_hub.errors import OfflineModeIsEnabled
from huggingface_hub.utils import httpx  # datasets' HTTP client, as datasets imports it

from xsyn.data.cards import HubSource, TaskCard
from xsyn.data.readers import Row
from xsyn.utils.errors import XsynError, first_line


@dataclass(frozen=True)
class HubRequest:
    """Exactly what `datasets.load_dataset` is called with, plus the row filter."""

    dataset: str
    config: str | None
    split: str
    revision: str | None = None
    filter: tuple[tuple[str, str], ...] = ()
    data_dir: str | None = None

    def arguments(self) -> dict[str, Any]:
        """The keywords of `datasets.load_dataset` (and `load_dataset_builder`) besides the dataset and config."""
        return {"revision": self.revision, **({"data_dir": self.data_dir} if self.data_dir else {})}

    def describe(self) -> str:
        args = [repr(self.dataset)] + ([repr(self.config)] if self.config else []) + [f"split={self.split!r}"]
        args += [f"{name}={value!r}" for name, value in (("revision", self.revision), ("data_dir", self.data_dir))
                 if value]
        where = f" where {' and '.join(f'{c} == {v!r}' for c, v in self.filter)}" if self.filter else ""
        return f"datasets.load_dataset({', '.join(args)}){where}"


SCRIPTS_REFUSED = "Dataset scripts are no longer supported"  # datasets' RuntimeError for a script repository


class HubUnavailableError(XsynError, ConnectionError):
    """The hub could not serve a request (offline, a transport error, unknown dataset, no access, a script
    repository); `unreachable`: the hub itself could not be reached (the network would help)."""

    def __init__(self, request: HubRequest, cause: BaseException):
        self.request, self.unreachable = request, _unreachable(cause)
        why = (f"{request.dataset} is a script repository, which datasets 4 and later do not run"
               if _script_repository(cause) else f"{type(cause).__name__}: {first_line(cause)}")
        super().__init__(f"{request.describe()} failed: {why}")


def _hub_errors() -> tuple[type[BaseException], ...]:
    """What datasets raises for a request the hub cannot serve: OSError (ConnectionError offline, a dataset or
    file not found, HTTP statuses), ValueError (an unknown config or split), its HTTP client's own errors
    (transport errors escape it unconverted), and RuntimeError (a script repository: checked by its message)."""

    return OSError, ValueError, httpx.HTTPError, RuntimeError


def _script_repository(err: BaseException) -> bool:
    return isinstance(err, RuntimeError) and str(err).startswith(SCRIPTS_REFUSED)


def _unreachable(err: BaseException) -> bool:

    return isinstance(err, (ConnectionError, OfflineModeIsEnabled, httpx.TransportError))


def _hub_call(request: HubRequest, call):
    """`call()`, with the hub's failures raised as `HubUnavailableError` (a RuntimeError other than datasets'
    script refusal is a bug, raised as it is)."""
    try:
        return call()
    except _hub_errors() as err:
        if isinstance(err, RuntimeError) and not _script_repository(err):
            raise
        raise HubUnavailableError(request, err) from err


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
        data_dir = source.data_dir.format(**values) if source.data_dir else None
        row_filter = tuple((col, pattern.format(**values)) for col, pattern in source.filter.items())
        out.append((source, HubRequest(source.dataset, config, source.splits[split], source.revision, row_filter,
                                       data_dir)))
    return out


def probe_hub(request: HubRequest) -> None:
    """Whether the hub (or, offline, the datasets cache) can serve `request`: its metadata is read, no rows;
    else `HubUnavailableError`."""
    import datasets

    _hub_call(request, lambda: datasets.load_dataset_builder(request.dataset, request.config, **request.arguments()))


def load_hub_rows(source: HubSource, request: HubRequest) -> Iterator[Row]:
    """Rows (role -> value) of one hub dataset split."""
    import datasets

    dataset = _hub_call(request, lambda: datasets.load_dataset(request.dataset, request.config, split=request.split,
                                                               **request.arguments()))
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
