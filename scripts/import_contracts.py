"""xsyn's own import-linter contract type (pyproject.toml's `contract_types`; `lint-imports` finds this module
because it puts the working directory on the path).

`module_level_forbidden` is import-linter's `forbidden` contract over the imports a module makes when it is
imported: an import inside a function, or under an `if` at module level (`if TYPE_CHECKING:`, "if transformers
is loaded already"), runs later or not at all, and is left out of the graph before the check. That is the
light/heavy boundary of the package: a light module reaches a heavy library only inside the function that needs
it, and every other import sits at its module's top (tests/test_repo_structure.py checks that second half).
"""

from __future__ import annotations

import ast
import copy
import importlib.util
from functools import cache
from pathlib import Path

from grimp import ImportGraph
from importlinter.application.contract_utils import AlertLevel
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.domain import fields
from importlinter.domain.contract import ContractCheck


def module_file(module: str) -> Path | None:
    """The source file of a module of a root package, found without importing it (None: not a .py file)."""
    root, *rest = module.split(".")
    spec = importlib.util.find_spec(root)  # the root package itself only
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
    for candidate in (folder / "__init__.py", folder.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


@cache
def deferred_lines(module: str) -> frozenset[int]:
    """The line numbers of `module`'s imports that do not run when it is imported (in a function, under an `if`)."""
    source = module_file(module)
    if source is None:
        return frozenset()
    tree = ast.parse(source.read_text(encoding="utf-8"))
    lines: set[int] = set()

    def walk(node: ast.AST, deferred: bool) -> None:
        for child in ast.iter_child_nodes(node):
            later = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.If))
            if isinstance(child, (ast.Import, ast.ImportFrom)) and deferred:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
            walk(child, later)

    walk(tree, False)
    return frozenset(lines)


class ModuleLevelForbiddenContract(ForbiddenContract):
    """`forbidden`, counting only the imports that run when a module is imported."""

    type_name = "module_level_forbidden"

    source_modules = fields.SetField(subfield=fields.ModuleExpressionField())
    forbidden_modules = fields.SetField(subfield=fields.ModuleExpressionField())
    ignore_imports = fields.SetField(subfield=fields.ImportExpressionField(), required=False)
    allow_indirect_imports = fields.BooleanField(required=False, default=False)
    unmatched_ignore_imports_alerting = fields.EnumField(AlertLevel, default=AlertLevel.ERROR)
    as_packages = fields.BooleanField(required=False, default=True)
    broken_contract_guidance = fields.TextField(required=False)

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        graph = copy.deepcopy(graph)  # the other contracts see every import
        for importer in sorted(graph.modules):
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                details = graph.get_import_details(importer=importer, imported=imported)
                if details and all(d["line_number"] in deferred_lines(importer) for d in details):
                    graph.remove_import(importer=importer, imported=imported)
        return super().check(graph, verbose)
