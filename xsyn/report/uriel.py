"""Language family and syntactic distance from the URIEL typological database (Littell et al. 2017), as the
`lang2vec` package ships it.

lang2vec's own module needs `pkg_resources` (gone from recent setuptools) and downloads its precomputed
distances on first use, so xsyn never imports it: it reads the feature files the package installs (NumPy
archives of strings and numbers, loaded without pickle), found through the installed distribution's file
list. Importing the name `lang2vec` (as `importlib.resources.files` does) is not safe: lang2vec also installs a
`lang2vec.py` script into the environment's `bin/`, which a console script puts first on `sys.path`.
xsyn and computes the distance itself, as lang2vec's precomputed
"syntactic" distance is defined: the cosine distance between the two languages' `syntax_knn` vectors
(the 103 syntax features of WALS, SSWL and Ethnologue, with the missing ones predicted from the nearest
languages, so every URIEL language has a complete vector). Nothing is downloaded.

Codes are ISO 639-1 (`de`, mapped through lang2vec's own table) or ISO 639-3 (`deu`); a region or
script suffix (`zh-cn`, `pt_BR`) is dropped. A code URIEL lacks gets None, for the caller to name.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import numpy as np

from xsyn.utils.errors import XsynError

SYNTAX_FILE = "feature_predictions.npz"  # lang2vec's syntax_knn: ("predicted", "S_" features)
FAMILY_FILE = "family_features.npz"  # lang2vec's fam: F_<family> memberships, outermost family first
CODES_FILE = "letter_codes.json"
SYNTAX_PREFIX = "S_"
FAMILY_PREFIX = "F_"


class UrielError(XsynError, RuntimeError):
    """The URIEL data cannot be read (lang2vec missing or damaged); the message says how to fix it."""


@dataclass(frozen=True)
class Uriel:
    """Lookups over URIEL's family tree and syntax vectors."""

    codes: dict[str, str]  # ISO 639-1 -> ISO 639-3
    syntax: dict[str, tuple[float, ...]]
    families: dict[str, tuple[str, ...]]  # ISO 639-3 -> family path, outermost first

    def iso3(self, lang: str) -> str:
        base = re.split(r"[-_]", lang.strip().lower(), maxsplit=1)[0]
        return self.codes.get(base, base)

    def family_path(self, lang: str) -> tuple[str, ...] | None:
        return self.families.get(self.iso3(lang)) or None

    def syntactic_distance(self, one: str, other: str) -> float | None:
        """Cosine distance of the two languages' syntax vectors; None where URIEL lacks either."""
        first, second = self.syntax.get(self.iso3(one)), self.syntax.get(self.iso3(other))
        if first is None or second is None:
            return None
        norms = math.sqrt(math.fsum(a * a for a in first)) * math.sqrt(math.fsum(b * b for b in second))
        if norms == 0:
            return None
        return max(0.0, 1.0 - math.fsum(a * b for a, b in zip(first, second, strict=True)) / norms)


@cache
def load_uriel() -> Uriel:
    """Read the lang2vec data files once per process."""
    data = _data_files()
    try:
        codes = json.loads(data[CODES_FILE].read_text(encoding="utf-8"))
        with np.load(data[SYNTAX_FILE], allow_pickle=False) as archive:
            syntax = _rows(archive, SYNTAX_PREFIX)
        with np.load(data[FAMILY_FILE], allow_pickle=False) as archive:
            names = [str(name) for name in archive["feats"]]
            member = archive["data"][:, :, 0] == 1
            families = {str(lang): tuple(names[k][len(FAMILY_PREFIX):] for k in np.flatnonzero(row))
                        for lang, row in zip(archive["langs"], member, strict=True)}
    except (OSError, KeyError, ValueError) as err:
        raise UrielError(f"lang2vec's URIEL data cannot be read ({err}); reinstall it: "
                         "pip install --force-reinstall lang2vec") from None
    return Uriel(codes, syntax, families)


def _data_files() -> dict[str, Path]:
    """lang2vec's three data files by name, located through the distribution's RECORD (never by import)."""
    try:
        installed = distribution("lang2vec")
    except PackageNotFoundError:
        raise UrielError("the typology and family analyses need the lang2vec package (URIEL's data): "
                         "pip install lang2vec") from None
    wanted = {f"lang2vec/data/{name}": name for name in (CODES_FILE, SYNTAX_FILE, FAMILY_FILE)}
    found = {wanted[str(file)]: Path(installed.locate_file(file)) for file in installed.files or ()
             if str(file) in wanted}
    missing = sorted(set(wanted.values()) - set(found))
    if missing:
        raise UrielError(f"lang2vec is installed without its URIEL data ({', '.join(missing)} not in its file "
                         "list); reinstall it: pip install --force-reinstall lang2vec")
    return found


def _rows(archive, prefix: str) -> dict[str, tuple[float, ...]]:
    columns = [k for k, name in enumerate(archive["feats"]) if str(name).startswith(prefix)]
    values = archive["data"][:, columns, 0].astype(float)
    return {str(lang): tuple(row) for lang, row in zip(archive["langs"], values.tolist(), strict=True)}
