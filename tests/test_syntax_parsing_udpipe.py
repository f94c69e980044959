"""`--parser udpipe:MODEL` with a real UDPipe 1 model, trained offline from EWT by ufal.udpipe's own trainer
(once per test session): the records it produces, its cache key, and `xsyn parser-quality` on EWT dev."""

from __future__ import annotations

import hashlib
import json

import pytest
import ufal.udpipe as udpipe
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.syntax.cache import ParseCache
from xsyn.syntax.conllu import read_conllu
from xsyn.syntax.parse import parse_segments
from xsyn.syntax.parsing import ParserUnavailable, build_parser
from xsyn.syntax.segment import Segment


@pytest.fixture(scope="session")
def ewt_dev(shared_data):
    return list(read_conllu(shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu"))[:100]


def test_raw_text_records_are_trees_whose_words_sit_on_the_text(udpipe_model, ewt_dev):
    parser = build_parser(f"udpipe:{udpipe_model}")
    # the last: line breaks other than "\n" (U+2028, U+0085) must not break UDPipe's output lines
    texts = [g.text for g in ewt_dev] + ["The dog barks.  It was not\namused by the cat.",
                                         "A\u00a0dog\tbarks.\u2028It\u0085was not\r\namused by the cat."]
    records = parser.parse_texts(texts, "en")
    assert len(records) == len(texts)
    for text, record in zip(texts, records, strict=True):
        record.validate()  # every sentence single-rooted, heads within it, no cycles
        assert record.text == text and record.lang == "en"
        spans = record.spans
        assert all(0 <= s < e <= len(text) for s, e in spans) and spans == sorted(spans)
        # a word is its characters, except the words a multiword token splits into ("can't" -> ca n't)
        shared = {span for span in spans if spans.count(span) > 1}
        assert all(text[s:e] == w for w, (s, e) in zip(record.words, spans) if (s, e) not in shared)
    assert len(records[-2].sentence_starts) == 2  # the tokenizer split the two sentences


def test_gold_tokens_keep_their_tokenisation(udpipe_model, ewt_dev):
    parser = build_parser(f"udpipe:{udpipe_model}")
    token_lists = [g.words for g in ewt_dev[:30]]
    for tokens, record in zip(token_lists, parser.parse_tokens(token_lists, "en"), strict=True):
        record.validate()
        assert record.words == tokens and record.token_index == list(range(len(tokens)))
        assert record.sentence_starts == [0] and record.text == " ".join(tokens)


def test_the_cache_key_holds_the_udpipe_version_and_the_model_checksum(udpipe_model, tmp_path):
    parser = build_parser(f"udpipe:{udpipe_model}")
    assert parser.version == udpipe.__version__
    assert parser.cache_identity() == {"model_sha256": hashlib.sha256(udpipe_model.read_bytes()).hexdigest()}
    cache = ParseCache(tmp_path)
    first = [Segment("en", text="The dog barks."), Segment("en", tokens=["The", "dog", "barks", "."])]
    assert parse_segments(first, parser, cache).parsed == 2
    again = [Segment("en", text="The dog barks."), Segment("en", tokens=["The", "dog", "barks", "."])]
    assert parse_segments(again, build_parser(f"udpipe:{udpipe_model}"), cache).cache_hits == 2
    assert [s.record.heads for s in again] == [s.record.heads for s in first]


def test_a_folder_holds_one_model_per_language_named_by_code_or_as_released(udpipe_model, tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    for name in ("english-gum-ud-2.5-191206.udpipe", "english-ewt-ud-2.5-191206.udpipe", "de_gsd.udpipe"):
        (folder / name).write_bytes(udpipe_model.read_bytes())
    parser = build_parser(f"udpipe:{folder}")
    # two English models: the registry's treebank (EWT, the paper's) is preferred
    assert parser.model_for("en").name == "english-ewt-ud-2.5-191206.udpipe"
    assert parser.model_for("de").name == "de_gsd.udpipe"
    assert parser.cache_identity() != build_parser(f"udpipe:{udpipe_model}").cache_identity()  # every model in the key
    (record,) = parser.parse_texts(["The dog barks."], "de")
    assert record.lang == "de" and record.text == "The dog barks."
    with pytest.raises(ParserUnavailable, match=r"no UDPipe model for language 'fr' .* add fr.udpipe, or a model "
                                                r"named as UDPipe's releases are \(french-TREEBANK-ud-2.5"):
        parse_segments([Segment("fr", text="Le chien aboie.")], parser)


def test_a_folder_without_a_languages_model_is_named_by_the_preflight(udpipe_model, tmp_path):
    """`finetune --parser udpipe:FOLDER --eval-langs de` with no German model trained first, then failed."""
    from xsyn.run.resources import checked_parsers
    from xsyn.run.settings import RunConfig

    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "en.udpipe").write_bytes(udpipe_model.read_bytes())
    config = RunConfig(task="pawsx", parser=f"udpipe:{folder}")
    checked_parsers(config, ["en"])  # the training language's model is there
    with pytest.raises(ParserUnavailable, match=r"no UDPipe model for language 'de' .*models there: en.udpipe"):
        checked_parsers(config, ["en", "de"])


# -- files that are not models (issue 28: ufal.udpipe aborts the process on some) --------------------------------

# ufal.udpipe reads the first byte as a string length and throws std::length_error: abort, exit 134
ABORTS_UDPIPE = b"\xff" * 20


def _not_a_model(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("content, why", [
    (ABORTS_UDPIPE, r"it starts with b'\\xff"),
    (b"", "empty file"),
    (b"not a model", "it starts with b'not a mo'"),
])
def test_a_file_that_is_not_a_model_is_refused_before_udpipe_reads_it(tmp_path, content, why):
    path = _not_a_model(tmp_path, "en.udpipe", content)
    with pytest.raises(ParserUnavailable, match=rf"^--parser udpipe:{path}: not a UDPipe 1 model \({why}.*scripts/"):
        build_parser(f"udpipe:{path}")
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "en.udpipe").write_bytes(content)
    with pytest.raises(ParserUnavailable, match="not a UDPipe 1 model"):  # every model of a folder too
        build_parser(f"udpipe:{folder}")


def test_a_truncated_model_is_refused_by_a_child_process_load(udpipe_model, tmp_path):
    whole = udpipe_model.read_bytes()
    truncated = _not_a_model(tmp_path, "en.udpipe", whole[:len(whole) // 2])
    parser = build_parser(f"udpipe:{truncated}")  # the header is intact
    with pytest.raises(ParserUnavailable, match=rf"udpipe:{truncated}: not a UDPipe 1 model \(ufal.udpipe cannot "
                                                r"load it: damaged or truncated\)"):
        parser.parse_texts(["The dog barks."], "en")


def test_a_library_crash_while_loading_stays_in_the_child_process(tmp_path):
    from xsyn.syntax.parsing.udpipe import probe_load

    path = _not_a_model(tmp_path, "crash.udpipe", ABORTS_UDPIPE)
    assert probe_load(path, "sha-of-crash") == ("ufal.udpipe crashed loading it (SIGABRT: what():  "
                                                "basic_string::_M_create)")


def test_the_command_line_names_a_bad_model_file_in_one_line(tmp_path):
    path = _not_a_model(tmp_path, "en.udpipe", ABORTS_UDPIPE)
    text = _not_a_model(tmp_path, "in.txt", b"The dog barks.\n")
    result = CliRunner().invoke(main, ["parse", "--input", str(text), "--format", "text", "--lang", "en", "--output",
                                       str(tmp_path / "out.jsonl"), "--parser", f"udpipe:{path}"])
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: --parser udpipe:{path}: not a UDPipe 1 model")
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_a_missing_model_or_an_empty_folder_says_what_to_give(tmp_path):
    with pytest.raises(FileNotFoundError, match="train one with scripts/train_udpipe.py"):
        build_parser(f"udpipe:{tmp_path / 'missing.udpipe'}")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="the folder has no .udpipe models"):
        build_parser(f"udpipe:{empty}")


def test_parser_quality_scores_udpipe_far_above_the_chain_and_plots_it_beside_the_probe(
        udpipe_model, ewt_dev, shared_data, tmp_path):
    ud = shared_data / "ud"
    probe = tmp_path / "probe_metrics.json"
    probe.write_text(json.dumps({"en": {"uuas": 0.81, "dist_spearman": 0.7}, "de": {"uuas": 0.62}}), "utf-8")

    def run(parser: str, *extra: str) -> tuple[dict, str]:
        out = tmp_path / f"{parser.split(':')[0]}.json"
        result = CliRunner().invoke(main, ["parser-quality", "--parser", parser, "--treebanks", "en",
                                           "--treebank-dir", str(ud), "--max-eval-examples", "100",
                                           "--output", str(out), *extra])
        assert result.exit_code == 0, result.output
        return json.loads(out.read_text())["en"], result.output

    chain, _ = run("chain")
    scores, printed = run(f"udpipe:{udpipe_model}", "--probe-metrics", str(probe), "--plot-output",
                          str(tmp_path / "quality.png"))
    # 200 training sentences: UAS 0.58 and LAS 0.50 on these 100 EWT dev sentences from raw text; chain 0.3
    assert scores["uas"] > chain["uas"] + 0.2 and scores["las"] > 0.35 and scores["words_f1"] > 0.9
    assert scores["las"] < scores["uas"] < 1.0 and scores["sentences"] == 100
    assert f"UAS {scores['uas']:.3f}" in printed and "probe UUAS 0.810" in printed
    assert (tmp_path / "quality.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    words, _ = run(f"udpipe:{udpipe_model}", "--input", "words")  # gold words in, the same words out
    assert words["words_f1"] == 1.0 and words["mismatched_sentences"] == 0 and words["uas"] > chain["uas"] + 0.2


def test_a_bad_probe_metrics_file_is_named(tmp_path, shared_data):
    probe = tmp_path / "probe_metrics.json"
    probe.write_text('{"en": {"uuas": "high"}}', encoding="utf-8")
    result = CliRunner().invoke(main, ["parser-quality", "--parser", "chain", "--treebanks", "en", "--treebank-dir",
                                       str(shared_data / "ud"), "--max-eval-examples", "2", "--probe-metrics",
                                       str(probe)])
    assert result.exit_code == 1 and f"{probe}: en.uuas is not a number" in result.output


def test_parse_workers_load_the_model_each_and_give_the_records_of_one_process(udpipe_model, shared_data, tmp_path):
    gold = list(read_conllu(shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu"))[:200]
    alone, pooled = ([Segment("en", text=g.text) for g in gold] for _ in range(2))
    parser = build_parser(f"udpipe:{udpipe_model}")
    parse_segments(alone, parser, None)
    report = parse_segments(pooled, build_parser(f"udpipe:{udpipe_model}"), ParseCache(tmp_path), workers=2)
    assert report.parsed == len({g.text for g in gold})
    assert [s.record.to_dict() for s in pooled] == [s.record.to_dict() for s in alone]
    assert len(ParseCache(tmp_path)) == report.parsed  # every chunk reached the cache


def test_bench_parse_reports_rates_speedup_and_efficiency_per_worker_count(udpipe_model, shared_data, tmp_path):
    gold = list(read_conllu(shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu"))[:140]
    source = tmp_path / "sentences.txt"
    source.write_text("\n".join(g.text for g in gold) + "\n", encoding="utf-8")
    res = CliRunner().invoke(main, ["bench", "parse", "--parser", f"udpipe:{udpipe_model}", "--input", str(source),
                                    "--workers", "1,2", "--cache-entries", "300", "--cache-lookups", "50",
                                    "--repeats", "3", "--ceiling-loop", "200000", "--json"])
    assert res.exit_code == 0, res.output
    result = json.loads(res.output)
    one, two = result["parse"]
    distinct = len({g.text for g in gold})
    assert (one["workers"], two["workers"], one["sentences"], two["sentences"]) == (1, 2, distinct, distinct)
    assert len(one["runs"]) == len(two["runs"]) == 3 and two["sentences_per_s"] == sorted(two["runs"])[1]  # median
    assert one["speedup"] == 1.0 and one["added_core_efficiency"] is None
    assert two["speedup"] == pytest.approx(two["sentences_per_s"] / one["sentences_per_s"])
    assert two["efficiency"] == pytest.approx(two["speedup"] / 2)
    assert two["added_core_efficiency"] == pytest.approx(two["speedup"] - 1)
    machine_one, machine_two = result["machine_ceiling"]
    assert machine_one["speedup"] == 1.0 and machine_two["speedup"] > 0
    assert two["speedup_vs_machine"] == pytest.approx(two["speedup"] / machine_two["speedup"])
    assert (result["cache"]["entries"], result["cache"]["lookups"]) == (300, 50)
    few = CliRunner().invoke(main, ["bench", "parse", "--parser", f"udpipe:{udpipe_model}", "--input", str(source),
                                    "--workers", "1,4"])
    assert few.exit_code != 0 and "cannot keep 4 workers busy" in few.output
