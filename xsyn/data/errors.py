"""The data layer's input errors, in a module that imports nothing of the layer: readers, kinds and
rows raise them without importing the cards that use them."""

from __future__ import annotations

from xsyn.utils.errors import XsynError
from xsyn.utils.schema import SchemaError


class CardError(SchemaError):
    """A task card is malformed, or a task, language or split does not exist (`file: key: problem`, the form
    of every schema error)."""


class RowError(XsynError, ValueError):
    """A row that does not make an example of its task (the message says why); `token`, where one token
    (0-based) is at fault, lets a reader that knows each token's line name that line."""

    def __init__(self, message: str, token: int | None = None):
        super().__init__(message)
        self.token = token
