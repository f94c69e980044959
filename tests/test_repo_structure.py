"""The structure figures of `scripts/structure_figures.py` (function lengths by `ast`, module lengths, the command
line's size) are measured right, the package keeps to the function targets of issue 38, and its imports keep to the
one boundary rule (pyproject.toml, above the light contract): imports at the module's top, except where a light
module reaches a heavy library or module."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _figures_module():
    spec = importlib.util.spec_from_file_location("structure_figures", ROOT / "scripts" / "structure_figures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("structure_figures", module)
    spec.loader.exec_module(module)
    return module


figures = _figures_module()

COMMAND = '''import click


@click.group()
def main():
    pass


@main.command(name="go")
@click.option("--n", type=int)
def go(n):
    """A command of 4 lines, counted from its def."""
    print(n)
    return n
'''

LONG = "def long():\n" + "".join(f"    x{i} = {i}\n" for i in range(85)) + "\n\nclass Holder:\n" \
       "    def method(self):\n        def inner():\n            return 1\n        return inner()\n"


def _package(tmp_path: Path) -> Path:
    package = tmp_path / "pkg"
    (package / "cli").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "cli" / "__init__.py").write_text("")
    (package / "cli" / "go.py").write_text(COMMAND)
    (package / "big.py").write_text(LONG + "".join(f"# line {i}\n" for i in range(420)))
    return package


def test_lengths_run_from_the_def_to_the_last_line_and_commands_are_the_click_decorated(tmp_path):
    found = figures.measure(_package(tmp_path))
    lengths = {f.where: (f.lines, f.command) for f in found["functions"]}
    # `go`: def, docstring, print, return (its decorators are not counted); `main` is a click group
    assert lengths["pkg/cli/go.py:go"] == (4, True) and lengths["pkg/cli/go.py:main"] == (2, True)
    assert lengths["pkg/big.py:long"] == (86, False)  # def + 85 assignments
    assert lengths["pkg/big.py:Holder.method"] == (4, False) and lengths["pkg/big.py:Holder.method.inner"] == (2, False)
    assert found["cli_lines"] == COMMAND.count("\n")  # cli/__init__.py is empty
    assert found["modules"]["pkg/big.py"] == LONG.count("\n") + 420
    assert [f.where for f in found["over_80"]] == ["pkg/big.py:long"] and found["commands_over_40"] == []
    assert figures.missed(found) == ["1 function(s) over 80 lines"]  # a module's size is no target (issue 55)


def test_check_exits_1_where_a_target_is_missed(tmp_path, capsys):
    package = _package(tmp_path)
    assert figures.main(["--package", str(package), "--check"]) == 1
    assert "target missed: 1 function(s) over 80 lines" in capsys.readouterr().err
    assert figures.main(["--package", str(package)]) == 0  # without --check: the figures only


def test_the_package_keeps_to_the_structure_targets():
    """No function over 80 lines and at most 2 over 60, no command function over 40 lines (`python
    scripts/structure_figures.py` lists the longest; module sizes are printed for review, not capped)."""
    found = figures.measure(ROOT / "xsyn")
    assert found["over_80"] == [] and len(found["over_60"]) <= figures.LONG_FUNCTIONS_MAX, found["over_60"]
    assert found["commands_over_40"] == []


def test_no_module_of_the_package_imports_another_modules_private_name():
    """A name with a leading underscore is its module's own: one another module needs is made public (or moved).
    (A private submodule, as the built tree kernel `xsyn.trees._kernel`, is a module, not a name.)"""
    import ast

    offenders = []
    for path in sorted((ROOT / "xsyn").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("xsyn"):
                offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{alias.name}"
                              for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")
                              and not (ROOT / (node.module or "").replace(".", "/") / alias.name).with_suffix(".c")
                              .exists()]
    assert offenders == []


def _light_contract() -> dict:
    """The light/heavy contract of pyproject.toml: its light modules and the libraries they may not load."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    return next(c for c in contracts["contracts"] if c["type"] == "module_level_forbidden")


def _imports(module: str, path: Path) -> tuple[set[str], list[tuple[int, str, list[str]]]]:
    """A module's imports that run when it is imported (their targets), and those inside its functions (line,
    "command" inside a click command's body or "function", targets); imports under an `if` (TYPE_CHECKING, "if
    transformers is loaded already") are neither."""
    import ast

    top, inner = set(), []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def targets(node) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        base = node.module or ""
        if node.level:
            base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
        return [f"{base}.{alias.name}" for alias in node.names] + [base]

    def command(node) -> bool:  # a click command's body (`@click.command(...)`, `@<group>.command(...)`)
        return any(isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr in ("command", "group")
                   for d in getattr(node, "decorator_list", ()))

    def walk(node, in_function: str) -> None:  # in_function: "" (module level), "function" or "command"
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and not in_function:
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                (inner.append((child.lineno, in_function, targets(child))) if in_function else
                 top.update(targets(child)))
            inside = "command" if command(child) else "function" if isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) else ""
            walk(child, in_function or inside)

    walk(ast.parse(path.read_text(encoding="utf-8")), "")
    return top, inner


def test_a_function_imports_only_where_a_light_module_reaches_a_heavy_one():
    """Every import inside a function is in a command body of cli/ (which imports what only that command runs, so
    `xsyn --help` loads none of it), or is a light module (the contract's) importing a heavy library or a module that
    loads one at its top; any other import belongs at its module's top (no deferral without a reason)."""
    contract = _light_contract()
    light, heavy_libraries = set(contract["source_modules"]), set(contract["forbidden_modules"])
    slow = ("huggingface_hub.file_download",)  # heavy too, but part of a package light modules use (its errors)
    modules = {}
    for path in sorted((ROOT / "xsyn").rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = path
    found = {name: _imports(name, path) for name, path in modules.items()}

    def owner(target: str) -> str:  # the module a target names (`xsyn.run.train.finetune` -> `xsyn.run.train`)
        while target not in modules and "." in target:
            target = target.rpartition(".")[0]
        return target

    heavy_modules: dict[str, bool] = {}

    def heavy(target: str, seen: frozenset = frozenset()) -> bool:
        if target.split(".")[0] in heavy_libraries or target.startswith(slow):
            return True
        name = owner(target)
        if name not in modules or name in seen:
            return False
        if name not in heavy_modules:
            parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
            heavy_modules[name] = any(heavy(t, seen | {name}) for t in [*found[name][0], *parents])
        return heavy_modules[name]

    offenders = [f"{modules[name].relative_to(ROOT)}:{line} {' '.join(targets)}"
                 for name, (_, inner) in found.items() for line, where, targets in inner
                 if not (where == "command" and name.startswith("xsyn.cli."))
                 and (name not in light or not any(heavy(t) for t in targets))]
    assert offenders == [], "imports to move to the module's top:\n" + "\n".join(offenders)


def test_the_light_contract_lists_what_the_light_commands_load(tmp_path):
    """pyproject's light modules are exactly the xsyn modules `xsyn --help`, `settings`, `experiment status` and
    `experiment plan` load (measured in fresh interpreters), and those load none of the heavy libraries."""
    import json
    import os
    import subprocess

    contract = _light_contract()
    script = ("import json, sys\nfrom click.testing import CliRunner\nfrom xsyn.cli import main\n"
              "result = CliRunner().invoke(main, sys.argv[1:])\nassert result.exit_code == 0, result.output\n"
              "print(json.dumps(sorted(m for m in sys.modules if m == 'xsyn' or m.startswith('xsyn.'))))")
    loaded = set()
    for args in (["--help"], ["settings", "--task", "pawsx", "--variant", "gat"], ["experiment", "status", "synth"],
                 ["experiment", "plan", "synth"]):
        code = script + f"\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & "\
                        f"set({contract['forbidden_modules']!r}) | ({{'huggingface_hub.file_download'}} & "\
                        "set(sys.modules)))))"
        proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"}, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        modules, heavy = (json.loads(line) for line in proc.stdout.strip().splitlines()[-2:])
        assert heavy == [], (args, heavy)
        loaded |= set(modules)
    assert sorted(loaded) == sorted(contract["source_modules"])
