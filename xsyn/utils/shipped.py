"""The folders xsyn ships beside its code: `tasks/` (the task cards) and `treebanks/` (the UD treebank table).

They sit at the top of a checkout, beside `xsyn/`, `tests/` and `scripts/`, where a user looks for them
and adds their own. The wheel installs them inside the package (`xsyn/tasks`, `xsyn/treebanks`, through the
`package-dir` mapping in pyproject.toml), so one lookup serves both: the installed copy if there is one,
else the checkout's top-level folder (an editable install, or a checkout put on PYTHONPATH).
"""

from __future__ import annotations

from pathlib import Path

from xsyn.utils.errors import MissingInputError

TASKS = "tasks"
TREEBANKS = "treebanks"

_PACKAGE = Path(__file__).resolve().parent.parent  # .../xsyn


def shipped_folder(name: str) -> Path:
    """The folder `name` (TASKS or TREEBANKS), from an installed wheel or from a checkout."""
    for folder in (_PACKAGE / name, _PACKAGE.parent / name):
        if folder.is_dir():
            return folder
    raise MissingInputError(f"xsyn's {name}/ folder is neither in the package ({_PACKAGE / name}) nor beside it "
                            f"({_PACKAGE.parent / name}); reinstall xsyn")


def shipped_files(name: str, suffix: str = ".toml") -> list[Path]:
    """The files of one shipped folder, sorted by name."""
    return sorted(p for p in shipped_folder(name).iterdir() if p.name.endswith(suffix) and p.is_file())
