"""Parsing into records: the Stanza adapter (behind a pipeline stand-in), the control parser, and
the content-addressed parse cache (dedup, crash safety, several writers, Accelerate-style ranks)."""

from __future__ import annotations

import errno
import multiprocessing as mp
import os
import signal
import time
import zlib
from pathlib import Path

import pytest

from xsyn.syntax.cache import ParseCache, shared_cache
from xsyn.syntax.conllu import read_conllu
from xsyn.syntax.parse import parse_segments
from xsyn.syntax.parsing import ParserUnavailable
from xsyn.syntax.parsing.chain import ChainParser
from xsyn.syntax.parsing.stanza import StanzaParser
from xsyn.syntax.segment import Segment
from xsyn.trees.wordpiece import ROOT, WordpieceAligner
from xsyn.utils.io import OutputError


class CountingParser(ChainParser):
    """The chain parser, counting how many segments it was asked to parse."""

    def __init__(self):
        self.calls = 0

    def parse_texts(self, texts, lang, *, sent_ids=None):
        self.calls += len(texts)
        return super().parse_texts(texts, lang)

    def parse_tokens(self, token_lists, lang, *, sent_ids=None):
        self.calls += len(token_lists)
        return super().parse_tokens(token_lists, lang)


class TreebankPipeline:
    """Stands in for `stanza.Pipeline`: `bulk_process` answers with the treebank's own documents
    (built by stanza from CoNLL-U), looked up by text, as a real pipeline would return them."""

    def __init__(self, conllu_by_text: dict[str, str]):
        from stanza.utils.conll import CoNLL

        self.docs = {text: CoNLL.conll2doc(input_str=block) for text, block in conllu_by_text.items()}
        self.batches: list[int] = []

    def bulk_process(self, docs):
        self.batches.append(len(docs))
        return [self.docs[d.text] for d in docs]


def _blocks(path):
    """CoNLL-U blocks of a file keyed by their `# text`."""
    out = {}
    for block in path.read_text(encoding="utf-8").split("\n\n"):
        text = next((line[len("# text = "):] for line in block.splitlines() if line.startswith("# text = ")), None)
        if text is not None:
            out.setdefault(text, block + "\n")
    return out


def test_stanza_adapter_turns_documents_into_the_treebanks_records(shared_data):
    path = shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu"
    gold = [r for r in read_conllu(path)][:300]
    blocks = _blocks(path)
    stand_in = TreebankPipeline({r.text: blocks[r.text] for r in gold})
    parser = StanzaParser(batch_docs=128, pipeline_factory=lambda lang, pretok: stand_in)
    parsed = parser.parse_texts([r.text for r in gold], "en")
    assert stand_in.batches == [128, 128, 44]  # bulk processing in batches
    multiword = 0
    for p, g in zip(parsed, gold):
        assert (p.words, p.heads, p.upos, p.deprels, p.spans, p.text) == \
               (g.words, g.heads, g.upos, g.deprels, g.spans, g.text)
        multiword += len(set(g.spans)) < len(g.spans)
    assert multiword > 0  # EWT's "don't", "I'm", ... went through the MWT path


def test_stanza_multi_sentence_document_becomes_one_segment(example_conllu):
    blocks = example_conllu.read_text(encoding="utf-8").split("\n\n")
    text = "The dog chased a cat. A hearing is scheduled on the issue today."

    class TwoSentences:
        def bulk_process(self, docs):
            from stanza.utils.conll import CoNLL
            return [CoNLL.conll2doc(input_str=blocks[0] + "\n\n" + blocks[1] + "\n") for _ in docs]

    (rec,) = StanzaParser(pipeline_factory=lambda lang, pretok: TwoSentences()).parse_texts([text], "en")
    assert rec.sentence_starts == [0, 6]
    assert rec.heads[:6] == [2, 3, 0, 5, 3, 3] and rec.heads[6:] == [8, 10, 10, 0, 13, 13, 8, 10, 10]
    assert text[slice(*rec.spans[6])] == "A" and text[slice(*rec.spans[-1])] == "."
    rec.validate()


def test_stanza_pretokenised_input_keeps_gold_token_indices():
    from stanza.utils.conll import CoNLL

    block = "\n".join(["1\tEU\teu\tPROPN\t_\t_\t2\tnsubj\t_\t_", "2\trejects\treject\tVERB\t_\t_\t0\troot\t_\t_",
                       "3\tGerman\tgerman\tADJ\t_\t_\t4\tamod\t_\t_", "4\tcall\tcall\tNOUN\t_\t_\t2\tobj\t_\t_"])
    seen = []

    class Pretokenised:
        def bulk_process(self, docs):
            seen.extend([w.text for w in d.sentences[0].words] for d in docs)
            return [CoNLL.conll2doc(input_str=block + "\n") for _ in docs]

    pipelines = []
    parser = StanzaParser(pipeline_factory=lambda lang, pretok: pipelines.append(pretok) or Pretokenised())
    (rec,) = parser.parse_tokens([["EU", "rejects", "German", "call"]], "en")
    assert pipelines == [True]  # only the pre-tokenised pipeline is loaded
    assert seen == [["EU", "rejects", "German", "call"]]  # the gold tokens reached the pipeline as tokens
    assert rec.token_index == [0, 1, 2, 3] and rec.heads == [2, 0, 4, 2] and rec.spans is None


def test_chinese_characters_are_parsed_as_one_text_and_each_word_covers_its_characters(shared_data,
                                                                                       mbert_tokenizer):
    """Character-level tasks (MSRA NER, CGED) give one token per character. Stanza is handed the
    joined text, finds the words, and each word is placed on its characters: in the wordpiece tree
    a word's first character carries its head and its later characters hang from the first."""
    path = shared_data / "ud" / "UD_Chinese-GSD" / "zh_gsd-ud-dev.conllu"
    gold = [r for r in read_conllu(path) if not any(c.isspace() for c in r.text)][:60]
    stand_in = TreebankPipeline({r.text: _blocks(path)[r.text] for r in gold})
    pipelines = []
    parser = StanzaParser(pipeline_factory=lambda lang, pretok: pipelines.append(pretok) or stand_in)
    characters = [list(r.text) for r in gold]
    parsed = parser.parse_tokens(characters, "zh")
    assert pipelines == [False]  # the raw-text pipeline only
    aligner = WordpieceAligner(mbert_tokenizer)
    several = 0
    for record, g, chars, pieces in zip(parsed, gold, characters, aligner.segment_pieces(parsed)):
        assert (record.words, record.heads, record.text) == (g.words, g.heads, " ".join(chars))
        assert ["".join(chars[t:e]) for t, e in record.units()] == record.words
        units = record.units()
        for w, (t, e) in enumerate(units):
            first = [p for p, (token, _) in enumerate(pieces.source) if token == t][0]
            parent = pieces.parent[first]  # the head word's first character, or ROOT
            if record.heads[w] == 0:
                assert parent == ROOT
            else:
                assert pieces.source[parent][0] == units[record.heads[w] - 1][0]
            later = [p for p, (token, _) in enumerate(pieces.source) if t < token < e]
            assert all(pieces.parent[p] == first for p in later)
            several += e - t > 1
    assert several > 500  # most Chinese words span two or more characters
    assert sum(len(r.words) for r in parsed) < sum(map(len, characters))


def test_missing_stanza_models_get_an_actionable_error(tmp_path):
    parser = StanzaParser(model_dir=str(tmp_path / "stanza"), download="none")
    with pytest.raises(ParserUnavailable, match=r"stanza.download\('de'"):
        parser.parse_texts(["Der Hund bellt."], "de")


def test_chain_parser_is_a_right_branching_control_tree():
    (rec,) = ChainParser().parse_texts(["Dogs bark, cats don't."], "en")
    assert rec.words == ["Dogs", "bark", ",", "cats", "don't", "."]
    assert rec.heads == [2, 3, 4, 5, 6, 0]
    assert rec.upos[2] == "PUNCT" and rec.spans[4] == (16, 21)
    (zh,) = ChainParser().parse_texts(["我爱北京"], "zh")
    assert zh.words == ["我", "爱", "北", "京"]


def test_each_distinct_segment_is_parsed_once_then_served_from_the_cache(tmp_path):
    segs = [Segment("en", text="a dog"), Segment("en", text="a dog"), Segment("de", text="a dog"),
            Segment("en", tokens=["a", "dog"]), Segment("en", text="a cat")]
    parser = CountingParser()
    report = parse_segments(segs, parser, ParseCache(tmp_path))
    assert (report.segments, report.unique, report.cache_hits, report.parsed) == (5, 4, 0, 4)
    assert report.duplicates == 1
    assert parser.calls == 4
    assert segs[0].record is segs[1].record and segs[3].record.token_index == [0, 1]
    again = [Segment("en", text="a dog"), Segment("en", text="a bird")]
    report = parse_segments(again, parser, ParseCache(tmp_path))  # a fresh process would do the same
    assert (report.unique, report.cache_hits, report.parsed) == (2, 1, 1)
    assert again[0].record.to_dict() == segs[0].record.to_dict()
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("*.jsonl"))  # one shard per writer
    assert stored.count(b"\n") == 5 and b'"words":["a","dog"]' in stored


def test_a_cut_short_or_corrupt_entry_is_detected_and_parsed_again(tmp_path):
    parse_segments([Segment("en", text=t) for t in ("one", "two", "three")], CountingParser(), ParseCache(tmp_path))
    shard = next(tmp_path.glob("*.jsonl"))
    lines = shard.read_bytes().split(b"\n")
    lines[0] = lines[0].replace(b"one", b"0ne")  # bit rot: the checksum no longer matches
    shard.write_bytes(b"\n".join(lines[:2]) + b"\n" + lines[2][:25])  # and a write killed mid-line
    cache = ParseCache(tmp_path)
    assert len(cache) == 1 and cache.corrupt == 2  # the bad checksum and the cut-short last line
    parser = CountingParser()
    segs = [Segment("en", text=t) for t in ("one", "two", "three")]
    report = parse_segments(segs, parser, cache)
    assert (report.cache_hits, report.parsed, report.corrupt_cache_entries) == (1, 2, 2)
    assert [s.record.words for s in segs] == [["one"], ["two"], ["three"]]


def test_a_cache_entry_that_is_not_a_tree_is_parsed_again(tmp_path):
    parse_segments([Segment("en", text="a b c")], ChainParser(), ParseCache(tmp_path))
    shard = next(tmp_path.glob("*.jsonl"))
    key, _, payload = shard.read_bytes().rstrip(b"\n").split(b"\t", 2)
    cyclic = payload.replace(b'"heads":[2,3,0]', b'"heads":[2,1,0]')  # 1 -> 2 -> 1, with a good checksum
    assert cyclic != payload
    shard.write_bytes(b"%s\t%08x\t%s\n" % (key, zlib.crc32(cyclic), cyclic))
    segs = [Segment("en", text="a b c")]
    report = parse_segments(segs, ChainParser(), ParseCache(tmp_path))
    assert (report.cache_hits, report.parsed, report.corrupt_cache_entries) == (0, 1, 1)
    assert segs[0].record.heads == [2, 3, 0]


def test_a_cache_line_whose_key_is_not_ascii_is_counted_as_corrupt_not_a_crash(tmp_path):
    parse_segments([Segment("en", text=t) for t in ("one", "two")], ChainParser(), ParseCache(tmp_path))
    shard = next(tmp_path.glob("*.jsonl"))
    first, rest = shard.read_bytes().split(b"\n", 1)
    shard.write_bytes("\u00e9".encode() + first[2:] + b"\n" + rest)  # bit rot in the key: a non-ASCII byte
    cache = ParseCache(tmp_path)  # used to raise UnicodeDecodeError here, in every later command
    assert (len(cache), cache.corrupt) == (1, 1)
    parser = CountingParser()
    segs = [Segment("en", text=t) for t in ("one", "two")]
    report = parse_segments(segs, parser, cache)
    assert (report.cache_hits, report.parsed, report.corrupt_cache_entries) == (1, 1, 1)
    assert [s.record.words for s in segs] == [["one"], ["two"]]


def test_a_cut_short_last_line_counts_once_until_its_writer_finishes_it(tmp_path):
    parse_segments([Segment("en", text=t) for t in ("one", "two")], ChainParser(), ParseCache(tmp_path))
    shard = next(tmp_path.glob("*.jsonl"))
    whole = shard.read_bytes()
    cut = whole.index(b"\n") + 30  # the first line, and 30 bytes of the second
    shard.write_bytes(whole[:cut])
    cache = ParseCache(tmp_path)
    assert (len(cache), cache.corrupt) == (1, 1)
    cache.refresh()
    cache.refresh()
    assert cache.corrupt == 1  # looked at three times, counted once
    with shard.open("ab") as fh:  # a busy writer, not a dead one: its line arrives whole
        fh.write(whole[cut:])
    cache.refresh()
    assert (len(cache), cache.corrupt) == (2, 0)


def test_the_cut_short_last_line_of_a_killed_writer_is_cut_off_and_counted_once(tmp_path):
    writer = mp.get_context("spawn").Process(target=_write_two, args=(str(tmp_path),))
    writer.start()
    writer.join()
    shard = next(tmp_path.glob("*.jsonl"))
    assert shard.stem.split("-")[-2] == str(writer.pid)  # the shard names its writer, now gone
    whole = shard.read_bytes()
    first = whole.index(b"\n") + 1
    shard.write_bytes(whole[:first + 30])  # killed 30 bytes into its second line
    cache = ParseCache(tmp_path)
    assert (len(cache), cache.corrupt, shard.read_bytes()) == (1, 1, whole[:first])
    assert ParseCache(tmp_path).corrupt == 0  # the next run meets a clean shard


def _write_two(directory: str) -> None:
    parse_segments([Segment("en", text=t) for t in ("one", "two")], ChainParser(), ParseCache(directory))


def test_loads_sharing_a_cache_report_each_corrupt_entry_once(tmp_path):
    """A run loads train, dev and (evaluating) every language and pair through one cache per process."""
    parse_segments([Segment("en", text=t) for t in ("one", "two")], ChainParser(), ParseCache(tmp_path))
    shard = next(tmp_path.glob("*.jsonl"))
    shard.write_bytes(shard.read_bytes().replace(b"one", b"0ne", 1))  # its checksum fails
    reports = [parse_segments([Segment("en", text=t)], CountingParser(), shared_cache(tmp_path))
               for t in ("one", "two", "one")]
    assert [(r.cache_hits, r.parsed, r.corrupt_cache_entries) for r in reports] == [(0, 1, 1), (1, 0, 0), (1, 0, 0)]
    assert shared_cache(tmp_path) is shared_cache(tmp_path)
    with (tmp_path / "other-writer.jsonl").open("wb") as fh:  # another process, killed mid-line
        fh.write(b"f" * 64 + b"\t0000")
    later = parse_segments([Segment("en", text="three")], CountingParser(), shared_cache(tmp_path))
    assert (later.parsed, later.corrupt_cache_entries) == (1, 1)  # picked up, and counted once


def test_a_full_disk_mid_line_is_undone_and_names_the_shard(tmp_path, monkeypatch):
    cache = ParseCache(tmp_path)
    parse_segments([Segment("en", text="one")], ChainParser(), cache)
    shard = next(tmp_path.glob("*.jsonl"))
    before = shard.read_bytes()
    real_write = os.write
    writes = []

    def full_after_half(fd, data):  # the device fills up half way through the lines
        if writes:
            raise OSError(errno.ENOSPC, "No space left on device")
        writes.append(len(data))
        return real_write(fd, bytes(data[:len(data) // 2]))

    monkeypatch.setattr(os, "write", full_after_half)
    segs = [Segment("en", text=t) for t in ("two", "three", "four")]
    with pytest.raises(OutputError, match=f"no space left on the device while writing {shard}; free some space "
                                          "or choose another --cache-dir"):
        parse_segments(segs, ChainParser(), cache)
    monkeypatch.undo()
    assert writes and shard.read_bytes() == before  # the half-written lines are gone
    later = ParseCache(tmp_path)  # the next run: nothing corrupt, and its own writes land whole
    assert (len(later), later.corrupt) == (1, 0)
    report = parse_segments([Segment("en", text=t) for t in ("one", "two", "three", "four")], ChainParser(), later)
    assert (report.cache_hits, report.parsed) == (1, 3)
    assert (len(ParseCache(tmp_path)), ParseCache(tmp_path).corrupt) == (4, 0)


def test_a_cache_folder_that_cannot_be_created_is_named(tmp_path):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be")
    with pytest.raises(OutputError, match=f"cannot create the folder {blocker / 'parses'}: {blocker} is a file, "
                                          "not a folder; move that file away or choose another --cache-dir"):
        ParseCache(blocker / "parses")


def _writer(directory: str, start: int, barrier) -> None:
    segs = [Segment("en", text=f"sentence number {i}") for i in range(start, start + 300)]
    cache = ParseCache(directory)
    barrier.wait()  # all three looked at an empty cache: they now write overlapping keys at once
    parse_segments(segs, ChainParser(), cache)


def test_several_processes_can_write_at_once(tmp_path):
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), k * 150, barrier)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cache = ParseCache(tmp_path)
    assert len(list(tmp_path.glob("*.jsonl"))) == 3  # one shard per writer
    assert len(cache) == 600 and cache.corrupt == 0  # 3 x 300 with overlaps, 600 distinct
    assert cache.get(next(iter(cache._index))) is not None


def _rank(directory: str, rank: int, barrier, results) -> None:
    parser = CountingParser()
    segs = [Segment("en", text=f"shared sentence {i}") for i in range(200)]
    report = parse_segments(segs, parser, ParseCache(directory), rank=rank, world_size=2,
                            barrier=barrier.wait)
    results[rank] = (report.parsed, all(s.record is not None for s in segs))


def test_ranks_parse_disjoint_shares_and_read_the_rest_from_the_shared_cache(tmp_path):
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Manager().dict()
    procs = [ctx.Process(target=_rank, args=(str(tmp_path), r, barrier, results)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    expected = [sum(1 for i in range(200) if _owner_of(f"shared sentence {i}") == r) for r in range(2)]
    assert [results[0][0], results[1][0]] == expected and sum(expected) == 200
    assert results[0][1] and results[1][1]


def _owner_of(text: str) -> int:
    from xsyn.syntax.cache import cache_key

    parser = ChainParser()
    return zlib.crc32(cache_key(text, "en", parser.name, parser.version, parser.cache_identity()).encode()) % 2


# -- parse workers, progress, resume --------------------------------------------------------------

class WorkerParser(ChainParser):
    """The chain parser as one that holds a model: the "model" is loaded at its first parse in a process,
    which appends that process's id to `loads` and waits (up to 60 s) until `meet` processes have (so
    that every worker gets work however fast the first one starts); every chunk it parses appends
    its size to `chunks` after `delay` seconds."""

    max_workers = None

    def __init__(self, loads, chunks, delay: float = 0.0, meet: int = 1):
        self.loads, self.chunks, self.delay, self.meet, self.loaded = str(loads), str(chunks), delay, meet, False

    def parse_texts(self, texts, lang, *, sent_ids=None):
        if not self.loaded:
            self.loaded = True
            with open(self.loads, "a") as fh:
                fh.write(f"{os.getpid()}\n")
            deadline = time.monotonic() + 60
            while len(Path(self.loads).read_text().split()) < self.meet and time.monotonic() < deadline:
                time.sleep(0.01)
        time.sleep(self.delay)
        with open(self.chunks, "a") as fh:
            fh.write(f"{len(texts)}\n")
        return super().parse_texts(texts, lang)


def _sentences(n: int) -> list[str]:
    return [f"sentence number {i} is here ." for i in range(n)]


def test_workers_parse_each_unique_sentence_once_loading_the_model_once_per_worker(tmp_path):
    texts = _sentences(300)
    segments = [Segment("en", text=t) for t in texts + texts[:50]]  # 50 repeats, as pairs repeat premises
    parser = WorkerParser(tmp_path / "loads", tmp_path / "chunks", meet=2)
    report = parse_segments(segments, parser, ParseCache(tmp_path / "cache"), workers=2)
    loads = (tmp_path / "loads").read_text().split()
    assert len(loads) == 2 == len(set(loads)) and str(os.getpid()) not in loads  # two workers, one load each
    assert sum(map(int, (tmp_path / "chunks").read_text().split())) == 300  # each unique sentence once
    assert (report.segments, report.unique, report.duplicates, report.parsed) == (350, 300, 50, 300)
    alone = [Segment("en", text=t) for t in texts]
    parse_segments(alone, ChainParser(), None)
    assert [s.record.to_dict() for s in segments[:300]] == [s.record.to_dict() for s in alone]
    assert segments[300].record is segments[0].record


def _parse_slowly(folder: str) -> None:  # the process that is killed
    folder_path = Path(folder)
    segments = [Segment("en", text=t) for t in _sentences(640)]
    parser = WorkerParser(folder_path / "loads", folder_path / "chunks", delay=0.3)
    parse_segments(segments, parser, ParseCache(folder_path / "cache"), workers=2, batch_size=64)


def test_a_parse_killed_mid_run_resumes_parsing_only_what_the_cache_lacks(tmp_path):
    process = mp.get_context("spawn").Process(target=_parse_slowly, args=(str(tmp_path),))
    process.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until some chunks are in the cache, then kill -9
        shards = list((tmp_path / "cache").glob("*.jsonl")) if (tmp_path / "cache").is_dir() else []
        if sum(s.read_bytes().count(b"\n") for s in shards) >= 128:
            break
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.join()
    kept = len(ParseCache(tmp_path / "cache"))
    assert 128 <= kept < 640
    workers = [int(pid) for pid in (tmp_path / "loads").read_text().split()]
    deadline = time.monotonic() + 60  # a wait, not a speed (a loaded machine ends them late)
    while [pid for pid in workers if _alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in workers if _alive(pid)]  # the workers end with the process that started them
    segments = [Segment("en", text=t) for t in _sentences(640)]
    parser = CountingParser()
    report = parse_segments(segments, parser, ParseCache(tmp_path / "cache"))
    assert (report.cache_hits, report.parsed, parser.calls) == (kept, 640 - kept, 640 - kept)
    assert report.corrupt_cache_entries <= 1  # at most the line being written at the kill
    fresh = [Segment("en", text=t) for t in _sentences(640)]
    parse_segments(fresh, ChainParser(), None)
    assert [s.record.to_dict() for s in segments] == [s.record.to_dict() for s in fresh]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.is_file() and status.read_text().split(")")[-1].split()[0] == "Z")  # a zombie has ended


def test_a_parser_that_runs_alone_is_not_given_workers(tmp_path):
    parser = WorkerParser(tmp_path / "loads", tmp_path / "chunks")
    parser.max_workers = 1
    parse_segments([Segment("en", text=t) for t in _sentences(300)], parser, None, workers=4)
    assert (tmp_path / "loads").read_text().split() == [str(os.getpid())]


def test_segments_parsed_before_are_not_counted_as_gold_trees(tmp_path):
    """Pair evaluation hands over segments the per-language evaluation parsed (chain parses, say): the report
    once said "(N with gold trees)" for them."""
    from xsyn.syntax.parsing.gold import GoldParser

    (tree,) = ChainParser().parse_texts(["a dog"], "en")
    earlier = [Segment("en", text="a dog"), Segment("en", text="a cat")]
    parse_segments(earlier, ChainParser(), ParseCache(tmp_path))
    pairs = [*earlier, Segment("en", text="a bird")]
    report = parse_segments(pairs, ChainParser(), ParseCache(tmp_path))
    assert (report.gold, report.attached, report.unique, report.duplicates, report.parsed) == (0, 2, 1, 0, 1)
    assert str(report).startswith("3 segments (2 parsed before), 1 unique (0 repeats)")
    treebank = [Segment("en", tokens=["a", "dog"], gold_tree=tree), Segment("en", tokens=["a", "dog"], gold_tree=tree)]
    report = parse_segments(treebank, GoldParser(), None)
    assert (report.gold, report.attached) == (2, 0) and str(report).startswith("2 segments (2 with gold trees)")
    report = parse_segments(treebank, GoldParser(), None)  # the gold trees kept: still gold, not "parsed before"
    assert (report.gold, report.attached) == (2, 0)
