"""The documentation's command blocks, checked as a user would meet them.

Each fenced shell block in README.md, docs/ and benchmarks/README.md is marked by an HTML comment on the
line before it: `run` blocks are executed here (in order, per page, in a scratch folder laid out as a
checkout, with the installed `xsyn` first on PATH); `gpu`, `network`, `cluster` and `long` blocks need what
their name says (or minutes), so only their `xsyn` invocations are parsed against the command line: a
renamed or removed option, subcommand or choice breaks the build, not a reader. `ci: setup` / `ci: test`
are the blocks CI runs (.ci/run). The pages also speak to users only: no words of xsyn's own development."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import click
import pytest
from conftest import SHARED_DATA
from console import CONSOLE_TIMEOUT_S, REPO, console_env

from xsyn.cli import main

PAGES = sorted([REPO / "README.md", REPO / "benchmarks" / "README.md", *(REPO / "docs").rglob("*.md")])
MARKS = {"run", "gpu", "network", "cluster", "long", "ci: setup", "ci: test"}
SHELL = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^(```+|~~~+)\s*([\w-]*)")
MARK = re.compile(r"^<!--\s*(.+?)\s*-->$")


def blocks(page: Path) -> list[tuple[int, str, str | None, str]]:
    """(line, language, mark, text) of each fenced block of `page`; the mark is the comment on the line above."""
    found, lines, k = [], page.read_text(encoding="utf-8").splitlines(), 0
    while k < len(lines):
        opened = FENCE.match(lines[k])
        if not opened:
            k += 1
            continue
        end = next(j for j in range(k + 1, len(lines)) if lines[j].startswith(opened.group(1)))
        mark = MARK.match(lines[k - 1].strip()) if k else None
        found.append((k + 1, opened.group(2), mark and mark.group(1), "\n".join(lines[k + 1:end])))
        k = end + 1
    return found


def shell_blocks(page: Path):
    return [block for block in blocks(page) if block[1] in SHELL]


def invocations(text: str) -> list[list[str]]:
    """The argument lists of every `xsyn ...` (also `python -m xsyn`, `accelerate launch ... -m xsyn`) in a
    block, cut at redirections and shell operators; `...` stands for arguments the page leaves out."""
    commands, current = [], []
    for line in text.replace("\\\n", " ").splitlines():
        line = re.sub(r"(?<=\s)\d>", " >", line)  # 2> err.txt: a redirection, not an argument 2
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split, lexer.commenters = True, "#"
        for token in list(lexer) + [";"]:
            if token in {";", "&&", "||", "|", "(", ")", "&", ";;"}:
                commands.append(current)
                current = []
            else:
                current.append(token)
    found = []
    for words in commands:
        if "xsyn" not in words:
            continue
        at = words.index("xsyn")
        if at and words[at - 1] != "-m" and not re.fullmatch(r"\w+=\S*", words[at - 1]):
            continue
        args = []
        for word in words[at + 1:]:
            if word in {">", ">>", "<", "2>", ">&"}:
                break
            args.append(word)
        found.append([arg for arg in args if arg != "..."])
    return found


def check_arguments(args: list[str]) -> None:
    """Parse `xsyn ARGS` as click would (options, their arity, choices and numbers), without running it; paths
    need not exist."""
    command, ctx, rest = main, click.Context(main, info_name="xsyn"), list(args)
    while isinstance(command, click.Group):
        options = [arg for arg in rest if arg.startswith("-")]
        while rest and rest[0].startswith("-"):  # group options (-v, -q)
            main.make_parser(ctx).parse_args([rest.pop(0)])
        if not rest:
            assert options, f"xsyn {' '.join(args)}: no command"
            return
        name = rest.pop(0)
        sub = command.get_command(ctx, name)
        assert sub is not None, f"xsyn {' '.join(args)}: no command {name!r} (xsyn --help lists them)"
        command, ctx = sub, click.Context(sub, info_name=name, parent=ctx)
    if "--help" in rest or "-h" in rest:
        return
    try:
        values, positional, order = command.make_parser(ctx).parse_args(rest)
        for param in order:
            value = values.get(param.name)
            unchecked = isinstance(param.type, click.Path | click.File) or "$" in str(value)  # paths need not exist
            if not isinstance(value, str | tuple) or unchecked:
                continue
            param.type_cast_value(ctx, value)
    except click.UsageError as err:
        raise AssertionError(f"xsyn {' '.join(args)}: {err.format_message()}") from None
    assert not positional, f"xsyn {' '.join(args)}: unexpected arguments {positional}"


def test_every_shell_block_is_marked():
    unmarked = [f"{page.relative_to(REPO)}:{line}" for page in PAGES for line, _, mark, _ in shell_blocks(page)
                if mark not in MARKS]
    assert not unmarked, (f"shell blocks without a mark ({', '.join(sorted(MARKS))}) on the line before them: "
                          f"{unmarked}")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_documented_xsyn_invocation_parses(page):
    commands = [args for _, _, _, text in shell_blocks(page) for args in invocations(text)]
    for args in commands:
        check_arguments(args)


def test_the_argument_check_catches_a_changed_option():
    check_arguments(["finetune", "--task", "pawsx", "--variant", "gat", "--seed", "1"])
    for wrong, said in ((["finetune", "--steps", "3"], "No such option '--steps'"),
                        (["finetune", "--variant", "gatt"], "'gatt' is not one of"),
                        (["experiment", "runn", "x"], "no command 'runn'"),
                        (["report", "a", "--resamples", "many"], "'many' is not a valid integer"),
                        (["tasks", "pawsx", "xnli"], "unexpected arguments")):
        with pytest.raises(AssertionError, match=re.escape(said)):
            check_arguments(wrong)


def test_invocations_are_read_through_continuations_comments_and_redirections():
    text = ("# a comment: xsyn nothing\nOMP_NUM_THREADS=1 xsyn demo --quiet  # trailing xsyn words\n"
            "xsyn finetune --task pawsx \\\n    --seed 1 > log.txt\naccelerate launch -m xsyn finetune ...\n"
            "xsyn bench model --json 2> err.txt | tee x && python scripts/x.py\n")
    assert invocations(text) == [["demo", "--quiet"], ["finetune", "--task", "pawsx", "--seed", "1"],
                                 ["finetune"], ["bench", "model", "--json"]]


def test_a_documented_run_folder_named_for_a_seed_holds_a_run_of_that_seed():
    """`--output-dir runs/x/gat-seed1` trains with seed 1: without --seed, a command trains with 1111."""
    from xsyn.models.names import DEFAULT_SEED

    wrong = []
    for page in PAGES:
        for args in (args for _, _, _, text in shell_blocks(page) for args in invocations(text)):
            options = dict(zip(args, args[1:]))
            named = re.search(r"seed(\d+)$", options.get("--output-dir", ""))
            if args[:1] == ["finetune"] and named and int(options.get("--seed", DEFAULT_SEED)) != int(named[1]):
                wrong.append(f"{page.relative_to(REPO)}: {' '.join(args)}")
    assert not wrong, f"a folder named for one seed, trained with another: {wrong}"


RUN_PAGES = [page for page in PAGES if any(mark == "run" for _, _, mark, _ in shell_blocks(page))]


@pytest.mark.parametrize("page", RUN_PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_run_blocks_run(page, tmp_path):
    """A page's run blocks in order, in one scratch checkout (the repository's top-level folders linked in,
    `../shared` beside it), with the installed console script first on PATH."""
    run = [text for _, _, mark, text in shell_blocks(page) if mark == "run"]
    if any("../shared/data" in text for text in run) and not SHARED_DATA.is_dir():
        pytest.skip(f"{page.name}'s run blocks read ../shared/data, which is absent here ({SHARED_DATA})")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for entry in ("tests", "scripts", "tasks", "treebanks", "benchmarks", "xsyn"):
        (checkout / entry).symlink_to(REPO / entry)
    if SHARED_DATA.is_dir():
        (tmp_path / "shared").mkdir()
        (tmp_path / "shared" / "data").symlink_to(SHARED_DATA)
    for text in run:
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=checkout, env=console_env(),
                              capture_output=True, text=True, timeout=CONSOLE_TIMEOUT_S)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, \
            f"{page.name}:\n{text}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"


def covered_by_run_blocks() -> set[str]:
    """The commands (and `group subcommand`s) the run blocks invoke."""
    names = set()
    for page in RUN_PAGES:
        for _, _, mark, text in shell_blocks(page):
            if mark == "run":
                for args in invocations(text):
                    words = [arg for arg in args if not arg.startswith("-")]
                    names.add(words[0])
                    if isinstance(main.get_command(click.Context(main), words[0]), click.Group):
                        names.add(" ".join(words[:2]))
    return names


def test_every_command_is_run_from_the_console_script():
    from test_cli_console_script import RUN_HERE

    ctx = click.Context(main)
    everything = set()
    for name in main.list_commands(ctx):
        command = main.get_command(ctx, name)
        everything |= ({f"{name} {sub}" for sub in command.list_commands(ctx)} if isinstance(command, click.Group)
                       else {name})
    groups_run = {name.split()[0] for name in RUN_HERE | covered_by_run_blocks()}
    run = RUN_HERE | covered_by_run_blocks()
    # a group counts once one of its subcommands runs (bench: its targets share their start-up and printing)
    missing = {name for name in everything if name not in run and name.split()[0] not in groups_run}
    assert not missing, f"commands no console-script test or documented run block runs: {sorted(missing)}"


# words of xsyn's own development, which mean nothing to a user
PROCESS_WORDS = re.compile(r"\bissues?\b|device tool|\bcarr(?:y|ied)\b|\bsessions?\b|\bhelpers?\b|\bthe lead\b|"
                           r"\bwork items?\b|\btickets?\b", re.IGNORECASE)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_pages_speak_in_user_words(page):
    hits = [f"{page.relative_to(REPO)}:{number}: {line.strip()[:100]}"
            for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
            if PROCESS_WORDS.search(line)]
    assert not hits, "words of xsyn's own development on a user's page:\n" + "\n".join(hits)


def test_the_readme_is_a_front_page_whose_links_lead_into_the_docs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300, "README.md is the front page (<= 300 lines): move details into docs/"
    linked = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    assert len(linked) >= 10 and all((REPO / path).is_file() for path in linked), linked
    assert (REPO / "docs" / "settings.md").is_file() and "mkdocs build --strict" in readme


def test_the_readmes_test_command_says_how_long_it_takes_and_ends_in_its_result():
    """The README's test command (CI's): its time is given, and pytest's summary lists failures and errors only
    (with `-ra` some hundred SKIPPED lines, one per GPU, data or network test, came after the failures)."""
    import tomllib

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    before = readme.split("<!-- ci: test -->")[0].rstrip().rsplit("\n\n", 1)[-1]
    assert re.search(r"\d+ (?:to \d+ )?minutes", before), before
    addopts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    command = next(text for _, _, mark, text in shell_blocks(REPO / "README.md") if mark == "ci: test")
    reports = "".join(re.findall(r"(?:^|\s)-r(\w+)", f"{addopts.get('addopts', '')} {command}"))
    assert reports and not set(reports) & set("saA"), f"pytest -r{reports} lists every skipped test in the summary"
