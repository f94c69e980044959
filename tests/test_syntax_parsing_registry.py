"""The parser registry: parsers found by name, a third-party parser through an entry point, the CLI's
parser help and the README's parser table made from the registry, and listing loads no parser library."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.syntax.parse import parse_segments
from xsyn.syntax.parsing import ParserChoiceError, build_parser, registered_parsers, resolve_parser_choice
from xsyn.syntax.parsing.registry import (
    BUILTIN_PARSERS,
    PARSER_OPTIONS,
    ParserPluginError,
    parser_forms,
    parser_table,
    parsers_help,
)
from xsyn.syntax.segment import Segment

README = Path(__file__).resolve().parents[1] / "README.md"

PLUGIN = '''
from xsyn.syntax.parsing import ParserEntry
from xsyn.syntax.parsing.registry import BATCH_SIZE
from xsyn.syntax.record import SyntaxRecord


class FlatParser:
    """Every word headed by the first: a toy parser of another package."""

    name, version, preparsed, data_trees, max_workers = "flat", "7", False, False, 1

    def __init__(self, root_label="root", batch_docs=1):
        self.root_label, self.batch_docs = root_label, batch_docs

    def cache_identity(self):
        return {"batch": self.batch_docs}

    def parse_texts(self, texts, lang, *, sent_ids=None):
        return [self._flat(text.split(), lang, text) for text in texts]

    def parse_tokens(self, token_lists, lang, *, sent_ids=None):
        return [SyntaxRecord(list(t), [0] + [1] * (len(t) - 1), ["X"] * len(t), ["root"] + ["dep"] * (len(t) - 1),
                             token_index=list(range(len(t))), text=" ".join(t), lang=lang) for t in token_lists]

    def _flat(self, words, lang, text):
        spans, at = [], 0
        for word in words:
            start = text.index(word, at)
            spans.append((start, start + len(word)))
            at = start + len(word)
        return SyntaxRecord(words, [0] + [1] * (len(words) - 1), ["X"] * len(words),
                            [self.root_label] + ["dep"] * (len(words) - 1), spans=spans, text=text, lang=lang)


ENTRY = ParserEntry("flat", "xsyn_flat_plugin:FlatParser", "every word under the first (a plugin)",
                    options=(BATCH_SIZE,))
NOT_AN_ENTRY = FlatParser
'''


def install_plugin(folder: Path, monkeypatch, entry_points: str) -> None:
    """A distribution on sys.path with an `xsyn.parsers` entry point, as `pip install` would leave it."""
    (folder / "xsyn_flat_plugin.py").write_text(PLUGIN, encoding="utf-8")
    info = folder / "xsyn_flat_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: xsyn-flat-plugin\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[xsyn.parsers]\n{entry_points}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    registered_parsers.cache_clear()


@pytest.fixture(autouse=True)
def fresh_registry():
    registered_parsers.cache_clear()
    yield
    sys.modules.pop("xsyn_flat_plugin", None)
    registered_parsers.cache_clear()


def test_a_third_party_parser_registers_through_an_entry_point_and_runs_everywhere(tmp_path, monkeypatch):
    install_plugin(tmp_path, monkeypatch, "flat = xsyn_flat_plugin:ENTRY")
    assert parser_forms().endswith(", gold, flat")
    assert "flat = every word under the first (a plugin)" in parsers_help()
    parser = build_parser("flat", parser_batch_size=3, parser_device="cuda")  # only its own option reaches it
    assert (parser.batch_docs, parser.cache_identity()) == (3, {"batch": 3})
    segments = [Segment("en", text="dogs  bark loudly")]
    parse_segments(segments, parser)
    assert segments[0].record.heads == [0, 1, 1] and segments[0].record.spans == [(0, 4), (6, 10), (11, 17)]
    out = tmp_path / "out.jsonl"
    text = tmp_path / "in.txt"
    text.write_text("cats sleep\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["parse", "--input", str(text), "--format", "text", "--lang", "en",
                                       "--output", str(out), "--parser", "flat", "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    assert '"heads": [0, 1]' in out.read_text(encoding="utf-8")


@pytest.mark.parametrize("line, message", [
    ("flat = xsyn_flat_plugin:NOT_AN_ENTRY", "must name a xsyn.syntax.parsing.ParserEntry whose name is 'flat'"),
    ("other = xsyn_flat_plugin:ENTRY", "whose name is 'other'"),
    ("flat = xsyn_flat_plugin:MISSING", "cannot be loaded (AttributeError"),
])
def test_a_broken_plugin_is_left_out_with_a_warning_and_named_with_its_package_when_chosen(tmp_path, monkeypatch,
                                                                                          caplog, line, message):
    install_plugin(tmp_path, monkeypatch, line)
    with caplog.at_level("WARNING", logger="xsyn"):
        assert resolve_parser_choice("chain").name == "chain"  # another parser: the broken one stops nothing
    assert [message in record.getMessage() and "package xsyn-flat-plugin" in record.getMessage()
            for record in caplog.records] == [True]
    with pytest.raises(ParserPluginError, match=re.escape(message)) as caught:
        resolve_parser_choice(line.split(" =")[0])
    assert "package xsyn-flat-plugin" in str(caught.value)


def test_a_plugin_parser_whose_class_cannot_be_imported_is_named_when_built(tmp_path, monkeypatch):
    install_plugin(tmp_path, monkeypatch, "flat = xsyn_flat_plugin:ENTRY")
    (tmp_path / "xsyn_flat_plugin.py").write_text(PLUGIN.replace('"xsyn_flat_plugin:FlatParser"',
                                                                 '"xsyn_flat_gone:FlatParser"'), encoding="utf-8")
    with pytest.raises(ParserPluginError, match=re.escape(
            "entry point flat = xsyn_flat_plugin:ENTRY (group xsyn.parsers, package xsyn-flat-plugin): its parser "
            "xsyn_flat_gone:FlatParser cannot be loaded (ModuleNotFoundError: No module named 'xsyn_flat_gone')")):
        build_parser("flat")


def test_a_plugin_cannot_take_a_builtin_name(tmp_path, monkeypatch, caplog):
    install_plugin(tmp_path, monkeypatch, "stanza = xsyn_flat_plugin:ENTRY")
    (tmp_path / "xsyn_flat_plugin.py").write_text(PLUGIN.replace('ParserEntry("flat"', 'ParserEntry("stanza"'),
                                                  encoding="utf-8")
    with caplog.at_level("WARNING", logger="xsyn"):
        assert registered_parsers()["stanza"] is BUILTIN_PARSERS[0]  # xsyn's own keeps its name
    assert ("entry point stanza = xsyn_flat_plugin:ENTRY (group xsyn.parsers, package xsyn-flat-plugin) takes the "
            "name 'stanza' of xsyn's own parser: it is refused") in caplog.text


def test_an_argument_is_required_exactly_where_the_entry_takes_one():
    for entry in BUILTIN_PARSERS:
        if entry.takes:
            assert resolve_parser_choice(f"{entry.name}:x").argument == "x"
            with pytest.raises(ParserChoiceError, match=f"give .* after the colon, e.g. {entry.name}:{entry.takes}"):
                resolve_parser_choice(entry.name)
        else:
            assert resolve_parser_choice(entry.name).argument is None
            with pytest.raises(ParserChoiceError, match=f"{entry.name} takes nothing after a colon"):
                resolve_parser_choice(f"{entry.name}:x")


def test_every_command_that_parses_has_each_parser_option_flag_once():
    commands = [main.commands[name] for name in ("finetune", "evaluate", "predict", "parse", "parser-quality")]
    for command in commands:
        flags = [opt for param in command.params for opt in param.opts]
        for option in PARSER_OPTIONS:
            assert flags.count(option.flag) == 1, (command.name, option.flag)
        assert flags.count("--parser") == 1


def test_the_readme_parser_table_is_the_registry_s():
    readme = README.read_text(encoding="utf-8")
    assert parser_table() in readme, "README's parser table differs from the registry: paste parser_table()"


@pytest.mark.parametrize("args", [["--help"], ["parse", "--help"], ["finetune", "--help"]])
def test_listing_the_parsers_imports_no_parser_library(args):
    code = textwrap.dedent("""
        import sys
        from xsyn.cli import main
        try:
            main(sys.argv[1:])
        except SystemExit:
            pass
        libraries = ('stanza', 'spacy', 'ufal.udpipe', 'xsyn.syntax.parsing.stanza')
        print('LOADED', [m for m in libraries if m in sys.modules], file=sys.stderr)
    """)
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert "LOADED []" in result.stderr, result.stderr[-2000:]
