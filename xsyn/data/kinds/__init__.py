"""Task kinds: everything that differs between classification, regression, tagging, QA and intent +
slots, in one place: one module per kind family (`classification`, `tagging`, `extractive_qa`,
`multiple_choice`, `intent_slot`), each filling in the `TaskKind` schema of `base`.

A card names its kind (`kind = "extractive-qa"`); `KINDS[card.kind]` (also `card.task_kind`) is the
`TaskKind` that every stage asks instead of testing the name:

| stage            | asks the kind for                                                                  |
|------------------|------------------------------------------------------------------------------------|
| cards, readers   | the segments; its gold form: the roles a row carries and the label sets it needs    |
| rows             | the example a row makes (`gold.build`, from the checks in `xsyn.data.rows`)        |
| features         | whether long inputs become windows, the QA question cap, each window's labels      |
| batches          | the label columns, and which of them hold one value per piece                      |
| model            | the head (`xsyn.models.heads`; the head sizes itself from the label sets)          |
| decoding         | the model outputs it reads, outputs -> one prediction per example, the gold        |
| evaluation       | the prediction file in the benchmark's own layout (`write_predictions`)             |
| predict, publish | what `xsyn predict` prints per example (`present`), the hub's pipeline tag and     |
|                  | Auto class                                                                         |

Adding a kind is adding one `TaskKind` to the `KINDS` registry (with its head in `xsyn.models.heads` and its
metric in `xsyn.metrics`): in its family's module, in a new module for a new family, or, from another package,
through the entry-point group `xsyn.task_kinds`; an unknown kind in a card is a `CardError`. A metric that
scores something other than tags (CGED: error triples) is a form of the tagging kind.
"""

from __future__ import annotations

from xsyn.data.kinds.base import Gold, TaskKind, WindowGold
from xsyn.data.kinds.classification import SENTENCE_KINDS
from xsyn.data.kinds.extractive_qa import EXTRACTIVE_QA_KINDS
from xsyn.data.kinds.intent_slot import INTENT_SLOT_KINDS
from xsyn.data.kinds.multiple_choice import MULTIPLE_CHOICE_KINDS
from xsyn.data.kinds.tagging import TAGGING_KINDS
from xsyn.utils.registry import Registry

# Every task kind by name; another package adds one (a `TaskKind`, its metric through `xsyn.metrics`) through the
# entry-point group `xsyn.task_kinds`, and its cards may then name it.
KINDS: Registry[TaskKind] = Registry("task kind", {kind.name: kind for kind in (
    *SENTENCE_KINDS, *TAGGING_KINDS, *EXTRACTIVE_QA_KINDS, *MULTIPLE_CHOICE_KINDS, *INTENT_SLOT_KINDS,
)}, group="xsyn.task_kinds", of=TaskKind, name_of=lambda kind: kind.name)


# Over every registered kind: what a batch may carry as gold, which of it is per piece, what a model may output.

def label_columns() -> tuple[str, ...]:
    return tuple(dict.fromkeys(c for kind in KINDS.values() for c in kind.label_columns))


def piece_label_columns() -> tuple[str, ...]:
    return tuple(dict.fromkeys(c for kind in KINDS.values() for c in kind.piece_label_columns))


def output_keys() -> tuple[str, ...]:
    return tuple(dict.fromkeys(k for kind in KINDS.values() for k in kind.output_keys))


__all__ = ["KINDS", "Gold", "TaskKind", "WindowGold", "label_columns", "output_keys", "piece_label_columns"]
