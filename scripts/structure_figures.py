"""Structure figures of the package: function lengths, module lengths, the command line's size.

    python scripts/structure_figures.py            # the figures, then the longest functions and modules
    python scripts/structure_figures.py --check    # exit 1 where a function target is missed

Module and cli/ sizes are printed as a signal for review, not checked (issue 55 retired their caps: a cap, not
the idea, had come to decide where code went).

A function's length is its lines from the `def` (decorators excluded) to its last line, as `ast` gives
them, docstring and comments included: what a reader has to hold on screen. A nested function counts
inside its parent and on its own. A command function is one decorated with a click decorator under
`xsyn/cli` (`@click.command`, `@<group>.command`, `@click.group`).
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

# The targets of issue 38 that stand: functions that fit on a screen.
FUNCTION_MAX = 80
LONG_FUNCTION = 60
LONG_FUNCTIONS_MAX = 2
COMMAND_MAX = 40


@dataclass(frozen=True)
class Function:
    where: str  # path:qualified.name
    lines: int
    command: bool


def _is_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated by `@<something>.command(...)` or `@<something>.group(...)`: a click command."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and target.attr in ("command", "group"):
            return True
    return False


def functions(path: Path, name: str) -> list[Function]:
    """Every function and method in one module, nested ones too, with its length."""
    found: list[Function] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                qualified = f"{prefix}{child.name}"
                lines = child.end_lineno - child.lineno + 1
                found.append(Function(f"{name}:{qualified}", lines, _is_command(child)))
                visit(child, qualified + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), "")
    return found


def measure(package: Path) -> dict:
    """The figures for one package folder (`xsyn/`): its modules, functions and the `cli/` subpackage."""
    root = package.parent
    modules = {str(p.relative_to(root)): len(p.read_text(encoding="utf-8").splitlines())
               for p in sorted(package.rglob("*.py"))}
    funcs = [f for p in sorted(package.rglob("*.py")) for f in functions(p, str(p.relative_to(root)))]
    cli = f"{package.name}/cli/"
    commands = [f for f in funcs if f.command and f.where.startswith(cli)]
    return {
        "modules": modules,
        "functions": funcs,
        "cli_lines": sum(n for m, n in modules.items() if m.startswith(cli)),
        "over_80": [f for f in funcs if f.lines > FUNCTION_MAX],
        "over_60": [f for f in funcs if f.lines > LONG_FUNCTION],
        "commands_over_40": [f for f in commands if f.lines > COMMAND_MAX],
    }


def missed(figures: dict) -> list[str]:
    """The targets the figures miss, one line each (empty: all met)."""
    misses = []
    if figures["over_80"]:
        misses.append(f"{len(figures['over_80'])} function(s) over {FUNCTION_MAX} lines")
    if len(figures["over_60"]) > LONG_FUNCTIONS_MAX:
        misses.append(f"{len(figures['over_60'])} functions over {LONG_FUNCTION} lines (at most {LONG_FUNCTIONS_MAX})")
    if figures["commands_over_40"]:
        misses.append(f"{len(figures['commands_over_40'])} command function(s) over {COMMAND_MAX} lines")
    return misses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", type=Path, default=Path(__file__).resolve().parent.parent / "xsyn")
    parser.add_argument("--check", action="store_true", help="exit 1 where a target is missed")
    parser.add_argument("--top", type=int, default=10, help="how many of the longest functions to list")
    args = parser.parse_args(argv)
    figures = measure(args.package)
    print(f"functions over {FUNCTION_MAX} lines: {len(figures['over_80'])}")
    print(f"functions over {LONG_FUNCTION} lines: {len(figures['over_60'])}")
    print(f"command functions over {COMMAND_MAX} lines: {len(figures['commands_over_40'])}")
    print(f"cli/ lines: {figures['cli_lines']}")
    print("longest functions:")
    for f in sorted(figures["functions"], key=lambda f: -f.lines)[: args.top]:
        print(f"  {f.lines:4d}  {f.where}{'  (command)' if f.command else ''}")
    print("longest modules:")
    for m, n in sorted(figures["modules"].items(), key=lambda kv: -kv[1])[:5]:
        print(f"  {n:4d}  {m}")
    commands = sorted((f for f in figures["functions"] if f.command), key=lambda f: -f.lines)
    print("longest command functions:")
    for f in commands[:8]:
        print(f"  {f.lines:4d}  {f.where}")
    misses = missed(figures)
    for line in misses:
        print(f"target missed: {line}", file=sys.stderr)
    return 1 if args.check and misses else 0


if __name__ == "__main__":
    sys.exit(main())
