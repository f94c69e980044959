"""Parser choices: `conllu:PATH` (pre-parsed CoNLL-U looked up by text and sent_id), the one check of a
parser choice shared by every command, and Stanza's device and batch size as run settings."""

from __future__ import annotations

import inspect
import json

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.data.cards import load_card
from xsyn.run.settings import parse_overrides, resolve
from xsyn.syntax.cache import ParseCache
from xsyn.syntax.conllu import read_conllu, write_conllu
from xsyn.syntax.parse import parse_segments
from xsyn.syntax.parsing import ParserChoiceError, build_parser, resolve_parser_choice
from xsyn.syntax.parsing.base import ParsesNotFound
from xsyn.syntax.parsing.chain import ChainParser
from xsyn.syntax.parsing.preparsed import ConlluParser
from xsyn.syntax.parsing.registry import BUILTIN_PARSERS
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.segment import Segment

SENTENCES = """# sent_id = s1
# text = The dog barks.
1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\t_\t_\t3\tnsubj\t_\t_
3\tbarks\tbark\tVERB\t_\t_\t0\troot\t_\tSpaceAfter=No
4\t.\t.\tPUNCT\t_\t_\t3\tpunct\t_\t_

# sent_id = s2
# text = I can't go.
1\tI\t_\tPRON\t_\t_\t4\tnsubj\t_\t_
2-3\tcan't\t_\t_\t_\t_\t_\t_\t_\t_
2\tca\t_\tAUX\t_\t_\t4\taux\t_\t_
3\tn't\t_\tPART\t_\t_\t4\tadvmod\t_\t_
4\tgo\t_\tVERB\t_\t_\t0\troot\t_\tSpaceAfter=No
5\t.\t_\tPUNCT\t_\t_\t4\tpunct\t_\t_

"""

# the same words twice, with two different trees, told apart by sent_id
TWICE = """# sent_id = a
1\tThank\t_\tVERB\t_\t_\t0\troot\t_\t_
2\tyou\t_\tPRON\t_\t_\t1\tobj\t_\t_

# sent_id = b
1\tThank\t_\tVERB\t_\t_\t2\tdep\t_\t_
2\tyou\t_\tPRON\t_\t_\t0\troot\t_\t_

"""


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "parsed.conllu"
    path.write_text(SENTENCES, encoding="utf-8")
    return path


def test_raw_text_is_matched_whatever_its_whitespace_and_the_words_sit_on_its_own_characters(source):
    (record,) = ConlluParser(source).parse_texts(["The  dog\nbarks."], "en")
    assert record.text == "The  dog\nbarks."
    assert record.spans == [(0, 3), (5, 8), (9, 14), (14, 15)]
    assert (record.heads, record.deprels, record.sent_id) == ([2, 3, 0, 3], ["det", "nsubj", "root", "punct"], "s1")


def test_a_file_without_text_comments_or_space_after_still_matches(tmp_path):
    # forms only: the file's text is rebuilt as "The dog barks ." with a space before the full stop
    bare = "\n".join(line for line in SENTENCES.splitlines() if not line.startswith("#")).replace("SpaceAfter=No", "_")
    path = tmp_path / "bare.conllu"
    path.write_text(bare + "\n", encoding="utf-8")
    (record,) = ConlluParser(path).parse_texts(["The dog barks."], "en")
    assert record.spans == [(0, 3), (4, 7), (8, 13), (13, 14)] and record.heads == [2, 3, 0, 3]


def test_a_segment_of_several_sentences_is_matched_by_consecutive_sentences(source):
    text = "The dog barks. I can't go."
    (record,) = ConlluParser(source).parse_texts([text], "en")
    assert record.sentence_starts == [0, 4]
    assert record.heads == [2, 3, 0, 3, 8, 8, 8, 0, 8]  # the second sentence's heads shifted by 4 words
    # the multiword token's two words share its characters
    assert [text[s:e] for s, e in record.spans] == ["The", "dog", "barks", ".", "I", "can't", "can't", "go", "."]
    record.validate()


def test_gold_tokens_are_placed_by_their_characters_whatever_the_tokenisation(source):
    parser = ConlluParser(source)
    same, split = parser.parse_tokens([["I", "can't", "go", "."], ["I", "ca", "n't", "go."]], "en")
    assert same.words == ["I", "ca", "n't", "go", "."]
    assert same.token_index == [0, 1, 1, 2, 3] and same.token_end is None and same.text == "I can't go ."
    # the gold tokens split the multiword token and join "go." : words cover token ranges
    assert split.token_index == [0, 1, 1, 3, 3] and split.token_end == [1, 3, 3, 4, 4]
    split.validate()


def test_sentences_of_the_same_text_are_told_apart_by_sent_id(tmp_path):
    path = tmp_path / "twice.conllu"
    path.write_text(TWICE, encoding="utf-8")
    parser = ConlluParser(path)
    first, chosen, unknown = parser.parse_texts(["Thank you"] * 3, "en", sent_ids=[None, "b", "z"])
    assert first.heads == [0, 1] and chosen.heads == [2, 0] and unknown.heads == [0, 1]
    # through parse_segments the id is part of the cache key: the two segments keep their own trees
    segments = [Segment("en", text="Thank you", sent_id="a"), Segment("en", text="Thank you", sent_id="b")]
    report = parse_segments(segments, parser, ParseCache(tmp_path / "cache"))
    assert report.unique == 2 and [s.record.heads for s in segments] == [[0, 1], [2, 0]]


def test_segments_without_a_parse_are_one_error_counting_all_and_showing_the_first(source):
    segments = [Segment("en", text=f"Unknown sentence {i}.") for i in range(7)]
    segments.insert(3, Segment("en", text="The dog barks."))
    with pytest.raises(ParsesNotFound) as err:
        parse_segments(segments, ConlluParser(source), batch_size=2)  # misses gathered over four batches
    message = str(err.value)
    assert f"conllu:{source} has no parse for 7 segment(s)" in message
    assert "[en] 'Unknown sentence 0.'" in message and "[en] 'Unknown sentence 4.'" in message
    assert "Unknown sentence 5." not in message and "... and 2 more" in message


def test_every_rank_looks_up_all_its_segments_so_a_missing_parse_stops_every_rank(source, tmp_path):
    """No barrier is needed (none is passed: a call would fail), and only rank 0 writes the cache."""
    def barrier():
        raise AssertionError("a pre-parsed source needs no barrier")

    for rank in (1, 0):
        segments = [Segment("en", text="The dog barks."), Segment("en", text="I can't go.")]
        report = parse_segments(segments, ConlluParser(source), ParseCache(tmp_path / "cache"), rank=rank,
                                world_size=2, barrier=barrier)
        assert report.parsed == 2 and [len(s.record.words) for s in segments] == [4, 5]
        assert len(ParseCache(tmp_path / "cache")) == (0 if rank == 1 else 2)
    for rank in (0, 1):
        with pytest.raises(ParsesNotFound, match="no parse for 1 segment"):
            parse_segments([Segment("en", text="Not there.")], ConlluParser(source), rank=rank, world_size=2,
                           barrier=barrier)


def test_ud_named_files_serve_their_own_language_only(tmp_path):
    (tmp_path / "de_x-ud-dev.conllu").write_text(SENTENCES, encoding="utf-8")
    parser = ConlluParser(tmp_path)
    assert parser.parse_texts(["The dog barks."], "de")[0].lang == "de"
    with pytest.raises(ParsesNotFound, match=r"\[en\] 'The dog barks.'"):
        parser.parse_texts(["The dog barks."], "en")


def test_a_changed_source_is_not_served_from_the_cache(source, tmp_path):
    cache = ParseCache(tmp_path / "cache")
    segment = [Segment("en", text="The dog barks.")]
    parse_segments(segment, ConlluParser(source), cache)
    assert segment[0].record.heads == [2, 3, 0, 3]
    again = [Segment("en", text="The dog barks.")]
    assert parse_segments(again, ConlluParser(source), cache).cache_hits == 1
    source.write_text(SENTENCES.replace("1\tThe\tthe\tDET\t_\t_\t2\tdet", "1\tThe\tthe\tDET\t_\t_\t3\tdet"), "utf-8")
    changed = [Segment("en", text="The dog barks.")]
    report = parse_segments(changed, ConlluParser(source), cache)
    assert (report.cache_hits, report.parsed) == (0, 1) and changed[0].record.heads == [3, 3, 0, 3]


def test_a_missing_source_says_what_to_give(tmp_path):
    with pytest.raises(FileNotFoundError, match="the file does not exist; give a CoNLL-U file or a folder"):
        build_parser(f"conllu:{tmp_path / 'none.conllu'}")
    with pytest.raises(FileNotFoundError, match="the folder has no .conllu files"):
        build_parser(f"conllu:{tmp_path}")


# -- one check of a parser choice ---------------------------------------------------------------------------

def test_parser_choices_are_parsed_in_one_place():
    def parts(choice):
        resolved = resolve_parser_choice(choice)
        return resolved.name, resolved.argument

    assert parts("stanza") == ("stanza", None)
    assert parts("gold") == ("gold", None)
    assert parts("conllu:data/x.conllu") == ("conllu", "data/x.conllu")
    assert parts("udpipe:C:/models/en.udpipe") == ("udpipe", "C:/models/en.udpipe")
    assert parts("spacy:en_core_web_sm") == ("spacy", "en_core_web_sm")
    for bad in ("nosuch", "chain:x", "stanza:x", "gold:x", "conllu:", "udpipe: ", "spacy:", "spacy"):
        with pytest.raises(ParserChoiceError):
            resolve_parser_choice(bad)
    assert isinstance(build_parser("chain"), ChainParser)


@pytest.mark.parametrize("command", [
    ["parse", "--format", "text", "--lang", "en", "--output", "x.jsonl", "--input", "{input}"],
    ["parser-quality", "--treebanks", "en", "--treebank-dir", "."],
    ["finetune", "--task", "pawsx"],
    ["evaluate", "--model-dir", "."],
    ["bench", "eval"],
])
def test_every_command_refuses_an_unknown_parser_naming_the_choices(command, tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("Dogs bark.\n", encoding="utf-8")
    args = [a.replace("{input}", str(text)) for a in command]
    if args[0] == "bench":
        args = ["bench", "eval", "--parser", "nosuch"]
    else:
        args += ["--parser", "nosuch"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert ("unknown parser 'nosuch'; choose one of: stanza, chain, conllu:PATH, udpipe:MODEL, spacy:PIPELINE, gold"
            in " ".join(result.output.split()))


def test_parse_reads_a_conllu_parser_and_names_missing_segments(source, tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("The dog  barks.\nI can't go.\nNot in the file.\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(main, ["parse", "--input", str(text), "--format", "text", "--lang", "en", "--output",
                                       str(out), "--parser", f"conllu:{source}", "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 1 and "has no parse for 1 segment(s)" in result.output
    assert "'Not in the file.'" in result.output and "Traceback" not in result.output
    text.write_text("The dog  barks.\nI can't go.\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["parse", "--input", str(text), "--format", "text", "--lang", "en", "--output",
                                       str(out), "--parser", f"conllu:{source}", "--cache-dir", str(tmp_path / "c")])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["heads"] for line in out.read_text().splitlines()] == [[2, 3, 0, 3], [4, 4, 4, 0, 4]]


def test_parse_hands_parser_device_to_the_parser(tmp_path, monkeypatch):
    from xsyn.cli import syntax as parse_commands  # where `xsyn parse` finds build_parser
    from xsyn.syntax import parsing

    asked = []
    real_build_parser = parsing.build_parser
    monkeypatch.setattr(parse_commands, "build_parser",
                        lambda choice, **kw: asked.append(kw["parser_device"]) or real_build_parser(choice))
    text = tmp_path / "in.txt"
    text.write_text("Dogs bark.\n", encoding="utf-8")
    args = ["parse", "--input", str(text), "--format", "text", "--lang", "en", "--output", str(tmp_path / "o.jsonl"),
            "--parser", "chain", "--cache-dir", str(tmp_path / "c")]
    result = CliRunner().invoke(main, [*args, "--parser-device", "cuda:1"])
    assert result.exit_code == 0, result.output
    assert asked == ["cuda:1"]


def test_stanza_device_and_batch_size_are_run_settings(monkeypatch):
    from xsyn.run import task_data

    built = []
    monkeypatch.setattr(task_data, "build_parser", lambda choice, **options: built.append((choice, options)))
    config = resolve("pawsx", "gat", load_card("pawsx"), {}, parse_overrides(["parser_device=cuda:1",
                                                                              "parser_batch_size=8"]))
    task_data.make_parser(config)
    task_data.make_parser(resolve("pawsx", "gat", load_card("pawsx"), {}, {}))
    assert [(choice, o["parser_device"], o["parser_batch_size"]) for choice, o in built] == [
        ("stanza", "cuda:1", 8), ("stanza", None, 256)]


@pytest.mark.parametrize("entry", BUILTIN_PARSERS, ids=lambda entry: entry.name)
def test_every_parser_class_takes_the_options_its_entry_declares(entry):
    """The registry builds a parser with its options' keywords (and its argument): a renamed keyword fails here."""
    parameters = inspect.signature(entry.load()).parameters
    assert {option.keyword for option in entry.options} <= set(parameters)
    positional = [p for p in parameters.values() if p.default is inspect.Parameter.empty]
    assert len(positional) == (1 if entry.takes else 0)


# -- on a real treebank ---------------------------------------------------------------------------------------

@pytest.fixture
def ewt_dev(shared_data, tmp_path):
    """A folder holding EWT dev alone (the whole release would be read for English: its train split too)."""
    folder = tmp_path / "ud"
    folder.mkdir()
    (folder / "en_ewt-ud-dev.conllu").write_bytes((shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu")
                                                   .read_bytes())
    return folder


def test_gold_ewt_trees_serve_ewt_segments_by_text_and_id(ewt_dev, tmp_path):
    gold = list(read_conllu(ewt_dev / "en_ewt-ud-dev.conllu"))[:300]
    # the data's whitespace differs from the treebank's text: runs of spaces, a leading and trailing space
    segments = [Segment("en", text=" " + g.text.replace(" ", "  ") + " ", sent_id=g.sent_id) for g in gold]
    parse_segments(segments, build_parser(f"conllu:{ewt_dev}"), ParseCache(tmp_path / "cache"))
    for segment, tree in zip(segments, gold):
        record = segment.record
        assert (record.words, record.heads, record.deprels) == (tree.words, tree.heads, tree.deprels)
        assert [segment.text[s:e] for s, e in record.spans] == [tree.text[s:e] for s, e in tree.spans]


def test_parser_quality_scores_a_conllu_source_as_the_parser_that_wrote_it(shared_data, ewt_dev, tmp_path):
    ud = shared_data / "ud"
    gold = list(read_conllu(ud / "UD_English-EWT" / "en_ewt-ud-dev.conllu"))[:80]
    write_conllu(ChainParser().parse_texts([g.text for g in gold], "en"), tmp_path / "chain.conllu")

    def scores(parser: str) -> dict:
        out = tmp_path / f"{parser.split(':')[0]}.json"
        result = CliRunner().invoke(main, ["parser-quality", "--parser", parser, "--treebanks", "en",
                                           "--treebank-dir", str(ud), "--max-eval-examples", "80",
                                           "--output", str(out)])
        assert result.exit_code == 0, result.output
        return json.loads(out.read_text())["en"]

    chain, preparsed = scores("chain"), scores(f"conllu:{tmp_path / 'chain.conllu'}")
    assert preparsed["uas"] == pytest.approx(chain["uas"]) and preparsed["las"] == pytest.approx(chain["las"])
    assert preparsed["words_f1"] == pytest.approx(chain["words_f1"]) and chain["uas"] < 0.5
    assert scores(f"conllu:{ewt_dev}")["las"] == 1.0  # the gold trees themselves


@pytest.mark.parametrize(("task", "folder"), [("pawsx", "pawsx"), ("panx", "panx")])
def test_a_run_reads_its_parses_from_conllu_by_text_and_sent_id(task, folder, shared_data, mbert_tokenizer, tmp_path):
    """Raw-text pairs (PAWS-X) and gold tokens (PAN-X) through a run's data loading, from a CoNLL-U source
    that also holds a decoy: a sentence of the same text with another tree and another sent_id."""
    from xsyn.data.loading import load_examples
    from xsyn.run.task_data import load_task_data

    card = load_card(task)
    examples, _ = load_examples(card, "en", "validation", data_dir=shared_data / folder, allow_hub=False)
    segments = [s for e in examples[:40] for s in e.segments]
    chain = ChainParser()
    trees = [(chain.parse_texts([s.text], "en") if s.text is not None else chain.parse_tokens([s.tokens], "en"))[0]
             for s in segments]
    for segment, tree in zip(segments, trees):
        tree.sent_id = segment.sent_id
    decoy = SyntaxRecord(trees[0].words, [0] + list(range(1, len(trees[0].words))), trees[0].upos,
                         ["root"] + ["dep"] * (len(trees[0].words) - 1), spans=trees[0].spans,
                         token_index=trees[0].token_index, text=trees[0].text, sent_id="decoy")
    write_conllu([decoy, *trees], tmp_path / "parsed.conllu")
    config = resolve(task, "gat", card, {}, {"parser": f"conllu:{tmp_path / 'parsed.conllu'}",
                                               "data_dir": str(shared_data / folder), "cache_dir": str(tmp_path)})
    data, _ = load_task_data(card, config, mbert_tokenizer, "validation", {n: "en" for n in card.segments}, limit=40)
    loaded = [s.record for e in data.examples for s in e.segments]
    assert segments[0].sent_id is not None
    assert [r.heads for r in loaded] == [t.heads for t in trees]  # the decoy (another id) is never served
    assert data.report["parse"]["parsed"] == len({(s.text, tuple(s.tokens or ()), s.sent_id) for s in segments})
