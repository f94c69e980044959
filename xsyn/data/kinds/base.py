"""The `TaskKind` schema every family module fills in: a kind's gold form, and what each stage asks of it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xsyn.data.example import Example
from xsyn.data.rows import GoldRow

if TYPE_CHECKING:
    import numpy as np

    from xsyn.data.decode import DecodeInput

# numpy, the decoding helpers and the metrics are imported by the functions that use them: reading a card
# (which validates its kind here) stays light, so `xsyn tasks` starts as fast as `xsyn --help`.


@dataclass(frozen=True)
class Gold:
    """A kind's gold form: the roles a row carries beside its segments, the card's label sets it needs
    (`labels`, `tags`; a regression needs `score_range`), and the example a row makes."""

    roles: tuple[str, ...]
    label_sets: tuple[str, ...]
    build: Callable[[GoldRow], Example]


@dataclass(frozen=True)
class WindowGold:
    """The gold of one example as its windows' label columns are cut from it."""

    label: int  # class or intent id (IGNORE_INDEX when there is none)
    piece_tags: np.ndarray | None  # tag id per piece of the tagged segment (first pieces), else None
    answers: Sequence[Sequence[Any]]  # QA: [text, character start] of each answer
    value: Any = None  # the example's label as it is (a regression score)


@dataclass(frozen=True)
class TaskKind:
    """What every example of a task kind carries, and how each stage treats it."""

    name: str
    segments: tuple[str, ...] | None  # fixed segment names, or None: the card names them
    n_segments: int
    gold: Gold
    head: str  # the model head (`xsyn.models.heads.HEAD_CLASSES`)
    label_columns: tuple[str, ...]  # the feature columns the head's loss reads
    piece_label_columns: tuple[str, ...]  # those with one value per piece (padded with IGNORE_INDEX)
    output_keys: tuple[str, ...]  # the model outputs decoding reads
    windowed: bool  # long inputs become windows over the last segment (else they are truncated)
    window_labels: Callable[[WindowGold, Any, int], dict[str, Any]]  # (gold, window's tree, last segment)
    decode: Callable[[DecodeInput], list[Any]]
    reference: Callable[[Example, str], Any]  # (example, metric) -> the gold as the metric scores it
    write_predictions: Callable[[Path, Sequence[Example], Sequence[Any], str], Path]  # (stem, ..., metric)
    present: Callable[[DecodeInput], list[dict[str, Any]]]  # what `xsyn predict` gives per example
    caps_query: bool = False  # the segments before the windowed one keep at most max_query_length pieces
    choices: bool = False  # segments after the fixed ones are options: one sequence each, all in one feature
    pipeline_tag: str = ""  # the Hugging Face hub's task of a published model
    auto_class: str | None = None  # the transformers Auto class that loads the model, where one does
    head_config: Mapping[str, Any] = field(default_factory=dict)  # fixed head settings (a regression's)

    def head_settings(self, labels: Sequence[str], tags: Sequence[str]) -> dict[str, Any]:
        """`build_model` keywords for the head: fixed ones, else sized from the run's label and tag names."""
        from xsyn.models.factory import label_settings

        return dict(self.head_config) if self.head_config else label_settings(self.head, labels, tags)

    @property
    def tagged(self) -> bool:
        """Whether examples are gold tokens with a tag each (input is tokenised; tags are a label set)."""
        return "tags" in self.gold.label_sets
