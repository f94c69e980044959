"""Examples -> features, worked out by hand on the tiny vocabulary of tests/conftest.py.

Pieces of the sentences used here (lower-cased):
    "the dog chased a cat ."           -> the dog chase ##d a cat .          (7 pieces)
    "The hearing is scheduled today."  -> the hearing is scheduled today .   (6 pieces; "today" = chars 25-30)
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from xsyn.data.cards import load_card
from xsyn.data.example import Answer, Example
from xsyn.data.features import IGNORE, collate_features, prepare_features
from xsyn.data.loading import load_examples
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.segment import Segment
from xsyn.utils.io import OutputError

PANX_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]


def token_record(tokens: list[str]) -> SyntaxRecord:
    """A right-branching tree over gold tokens (each token one word)."""
    n = len(tokens)
    return SyntaxRecord(list(tokens), [i + 2 for i in range(n - 1)] + [0], ["X"] * n, ["dep"] * (n - 1) + ["root"],
                        token_index=list(range(n)), text=" ".join(tokens))


def text_record(text: str) -> SyntaxRecord:
    words = text.replace(".", " .").split()
    spans, pos = [], 0
    for w in words:
        pos = text.index(w, pos)
        spans.append((pos, pos + len(w)))
        pos += len(w)
    n = len(words)
    return SyntaxRecord(words, [i + 2 for i in range(n - 1)] + [0], ["X"] * n, ["dep"] * (n - 1) + ["root"],
                        spans=spans, text=text)


def tagged(tokens, tags, uid="s1"):
    return Example(uid, [Segment("en", tokens=tokens, record=token_record(tokens))], tags=tags)


def rows(features):
    return [features[i] for i in range(len(features))]


def test_long_tagged_sentence_becomes_windows_labelled_on_first_pieces(small_tokenizer):
    card = load_card("panx")
    example = tagged(["the", "dog", "chased", "a", "cat", "."], ["O", "B-PER", "O", "O", "B-LOC", "O"])
    # max_length 6 leaves 4 pieces a window; by default a window advances half of that (2 pieces)
    features, report = prepare_features(card, [example], small_tokenizer, 6, tags=PANX_TAGS)
    w0, w1, w2 = rows(features)
    assert [(w["window_start"], w["window_end"]) for w in (w0, w1, w2)] == [(0, 4), (2, 6), (4, 7)]
    assert small_tokenizer.convert_ids_to_tokens(w1["input_ids"]) == ["[CLS]", "chase", "##d", "a", "cat", "[SEP]"]
    # tag ids: O 0, B-PER 1, B-LOC 5; only a token's first piece is labelled ("##d" is not)
    assert w0["labels"] == [IGNORE, 0, 1, 0, IGNORE, IGNORE]
    assert w1["labels"] == [IGNORE, 0, IGNORE, 0, 5, IGNORE]
    assert w2["labels"] == [IGNORE, 0, 5, 0, IGNORE]
    assert w1["source_start"] == [-1, 2, 2, 3, 4, -1] and w1["source_end"] == [-1, 3, 3, 4, 5, -1]
    assert {w["example_index"] for w in (w0, w1, w2)} == {0} and [w["window_index"] for w in (w0, w1, w2)] == [0, 1, 2]
    assert (report.examples, report.features, report.windowed_examples, report.truncated_inputs) == (1, 3, 1, 0)


def test_explicit_doc_stride_sets_how_far_windows_advance(small_tokenizer):
    example = tagged(["the", "dog", "chased", "a", "cat", "."], ["O"] * 6)
    features, _ = prepare_features(load_card("panx"), [example], small_tokenizer, 6, tags=PANX_TAGS, doc_stride=4)
    assert [(f["window_start"], f["window_end"]) for f in rows(features)] == [(0, 4), (4, 7)]


def qa_example(answer: Answer) -> Example:
    context = "The hearing is scheduled today."
    return Example("q1", [Segment("en", text="is the hearing today", record=text_record("is the hearing today")),
                          Segment("en", text=context, record=text_record(context))], answers=[answer])


def test_qa_answer_positions_per_window_and_cls_when_outside(small_tokenizer):
    card = load_card("xquad")
    # max_length 12: [CLS] + 4 question pieces + 2 [SEP] leave 5 context pieces; advance 2
    features, report = prepare_features(card, [qa_example(Answer("today", 25))], small_tokenizer, 12, doc_stride=2)
    w0, w1 = rows(features)
    assert (w0["window_start"], w0["window_end"], w1["window_start"], w1["window_end"]) == (0, 5, 2, 6)
    # window 0: [CLS] is the hearing today [SEP] the hearing is scheduled today [SEP]
    assert (w0["start_positions"], w0["end_positions"]) == (10, 10)
    # window 1: [CLS] is the hearing today [SEP] is scheduled today . [SEP]
    assert (w1["start_positions"], w1["end_positions"]) == (8, 8)
    features, report = prepare_features(card, [qa_example(Answer("hearing is", 4))], small_tokenizer, 12,
                                        doc_stride=2)
    w0, w1 = rows(features)
    assert (w0["start_positions"], w0["end_positions"]) == (7, 8)
    assert (w1["start_positions"], w1["end_positions"]) == (0, 0)  # "hearing" is not in window 1
    assert report.answers_outside_window == 1


def test_qa_question_is_cut_to_max_query_length_counted_and_keeps_its_distances(small_tokenizer):
    from xsyn.trees.tensors import tree_distances

    card = load_card("xquad")
    features, report = prepare_features(card, [qa_example(Answer("today", 25))], small_tokenizer, 12,
                                        doc_stride=2, max_query_length=2)
    (row,) = rows(features)  # 12 - [CLS] - 2 question pieces - 2 [SEP] leaves room for all 6 context pieces
    assert small_tokenizer.convert_ids_to_tokens(row["input_ids"]) == [
        "[CLS]", "is", "the", "[SEP]", "the", "hearing", "is", "scheduled", "today", ".", "[SEP]"]
    assert (row["start_positions"], row["end_positions"]) == (8, 8)
    assert (report.truncated_queries, report.truncated_inputs, report.truncated_pieces) == (1, 0, 0)
    # the question is a chain is -> the -> hearing -> today -> [CLS]; the cut words still carry the path
    batch = collate_features([row])
    assert tree_distances(batch["tree_parent"], batch["input_ids"].shape[1])[0, 1, 0] == 4


def test_qa_question_length_defaults_to_the_cards_max_query_length(small_tokenizer):
    question = " ".join(["is the hearing today"] * 17)  # 68 pieces; the card says 64 (XTREME)
    example = Example("q", [Segment("en", text=question, record=text_record(question)),
                            Segment("en", text="today.", record=text_record("today."))], answers=[])
    features, report = prepare_features(load_card("mlqa"), [example], small_tokenizer, 128)
    assert rows(features)[0]["token_type_ids"].count(0) == 1 + 64 + 1 and report.truncated_queries == 1


def test_classification_labels_unknown_and_missing(small_tokenizer):
    card = load_card("pawsx")

    def pair_example(uid, label):
        return Example(uid, [Segment("en", text="the dog", record=text_record("the dog")),
                             Segment("en", text="a cat", record=text_record("a cat"))], label=label)

    examples = [pair_example("a", "1"), pair_example("b", "2"), pair_example("c", None)]
    features, report = prepare_features(card, examples, small_tokenizer, 16, labels=["0", "1"])
    assert [f["labels"] for f in rows(features)] == [1, IGNORE, IGNORE]
    assert report.unknown_labels == 1  # "2"; the unlabelled example is not an unknown label
    assert rows(features)[0]["token_type_ids"] == [0, 0, 0, 0, 1, 1, 1]


def test_classification_input_over_max_length_is_truncated_and_counted(small_tokenizer):
    card = load_card("chnsenticorp")
    text = "the dog chased a cat ."
    example = Example("x", [Segment("zh", text=text, record=text_record(text))], label="1")
    features, report = prepare_features(card, [example], small_tokenizer, 5, labels=["0", "1"])
    assert len(features) == 1 and len(features[0]["input_ids"]) == 5
    assert (report.truncated_inputs, report.truncated_pieces) == (1, 4)  # 7 pieces, 3 kept


def test_intent_slot_features_carry_intent_and_slot_labels(small_tokenizer):
    card = load_card("mtop")
    example = Example("m", [Segment("en", tokens=["the", "cat"], record=token_record(["the", "cat"]))],
                      label="IN:FIND", tags=["O", "B-ANIMAL"])
    features, _ = prepare_features(card, [example], small_tokenizer, 16, labels=["IN:FIND", "IN:GET"],
                                   tags=["O", "B-ANIMAL"])
    (feature,) = rows(features)
    assert feature["intent_labels"] == 0 and feature["slot_labels"] == [IGNORE, 0, 1, IGNORE]
    batch = collate_features(rows(features) + rows(features.select([0])), small_tokenizer.pad_token_id)
    assert batch["slot_labels"].shape == (2, 4) and batch["intent_labels"].tolist() == [0, 0]


def test_collate_pads_piece_labels_with_ignore(small_tokenizer):
    examples = [tagged(["the", "dog"], ["O", "B-PER"], "a"), tagged(["a", "cat", "chased"], ["O", "O", "O"], "b")]
    features, _ = prepare_features(load_card("panx"), examples, small_tokenizer, 16, tags=PANX_TAGS)
    batch = collate_features(rows(features), small_tokenizer.pad_token_id)
    assert batch["labels"].tolist() == [[IGNORE, 0, 1, IGNORE, IGNORE, IGNORE],
                                        [IGNORE, 0, 0, 0, IGNORE, IGNORE]]
    assert batch["example_index"].tolist() == [0, 1] and batch["tree_parent"].shape[0] == 2


def test_segments_must_be_parsed_first_and_line_up(small_tokenizer):
    card = load_card("panx")
    unparsed = Example("u", [Segment("en", tokens=["the", "dog"])], tags=["O", "O"])
    with pytest.raises(ValueError, match="segment 0 has no syntax record; attach them first"):
        prepare_features(card, [unparsed], small_tokenizer, 16, tags=PANX_TAGS)
    raw_parse = Example("r", [Segment("en", tokens=["the", "dog"], record=text_record("the dog"))], tags=["O", "O"])
    with pytest.raises(ValueError, match="has gold tokens but its record was parsed from raw text"):
        prepare_features(card, [raw_parse], small_tokenizer, 16, tags=PANX_TAGS)
    moved = Example("t", [Segment("en", text="the dog", record=text_record("the  dog"))], label="1")
    with pytest.raises(ValueError, match="the syntax record's text differs from the segment's"):
        prepare_features(load_card("chnsenticorp"), [moved], small_tokenizer, 16, labels=["0", "1"])


@pytest.mark.parametrize("num_proc", [None, 2])
def test_second_run_loads_the_cache(small_tokenizer, tmp_path, num_proc):
    card = load_card("panx")
    examples = [tagged(["the", "dog", "chased", "a", "cat"], ["O", "B-PER", "O", "O", "B-LOC"], str(i))
                for i in range(6)]
    first, report1 = prepare_features(card, examples, small_tokenizer, 16, tags=PANX_TAGS, cache_dir=tmp_path,
                                      num_proc=num_proc)
    second, report2 = prepare_features(card, examples, small_tokenizer, 16, tags=PANX_TAGS, cache_dir=tmp_path,
                                       num_proc=num_proc)
    assert (report1.cache_hit, report2.cache_hit) == (False, True)
    assert report1.cache_file == report2.cache_file and rows(first) == rows(second)
    changed, report3 = prepare_features(card, examples, small_tokenizer, 6, tags=PANX_TAGS, cache_dir=tmp_path,
                                        num_proc=num_proc)
    assert not report3.cache_hit and report3.cache_file != report1.cache_file  # settings are in the key
    assert np.asarray(changed[0]["input_ids"]).shape == (6,) and len(first[0]["input_ids"]) == 8


@pytest.fixture(scope="module")
def panx_dev(shared_data):
    """The first 400 sentences of the real PAN-X English dev set, with right-branching trees. At
    max_length 8 they make over 1,000 windows: two record batches in the cache file (datasets writes
    1,000 rows a batch)."""
    if not (shared_data / "panx" / "dev-en.tsv").is_file():
        pytest.skip("PAN-X dev-en.tsv not found in the shared data")
    examples, _ = load_examples("panx", "en", "validation", data_dir=shared_data / "panx", allow_hub=False)
    for example in examples[:400]:
        example.segments[0].record = token_record(example.segments[0].tokens)
    return examples[:400]


def after_first_batch(path) -> int:
    """The byte offset where a cache file's first record batch ends (a kill between two batches)."""
    import pyarrow as pa

    with pa.OSFile(str(path)) as source:
        pa.ipc.open_stream(source).read_next_batch()
        return source.tell()


@pytest.mark.parametrize("damage", ["cut mid-batch", "cut between batches"])
def test_a_damaged_features_cache_file_is_rebuilt_and_named(panx_dev, mbert_tokenizer, tmp_path, damage):
    card = load_card("panx")
    build = dict(tags=PANX_TAGS, cache_dir=tmp_path)
    first, report = prepare_features(card, panx_dev, mbert_tokenizer, 8, **build)
    assert report.features > 1000
    expected, cache_file = first[:]["input_ids"], report.cache_file
    del first  # it maps the file that is damaged next
    data = open(cache_file, "rb").read()
    cut = len(data) // 2 if damage == "cut mid-batch" else after_first_batch(cache_file)
    with open(cache_file, "wb") as fh:
        fh.write(data[:cut])
    again, report = prepare_features(card, panx_dev, mbert_tokenizer, 8, **build)
    assert report.rebuilt_cache_files == [cache_file] and not report.cache_hit
    assert report.examples == 400 and again[:]["input_ids"] == expected
    assert open(cache_file, "rb").read() == data  # the rebuilt file is the original again
    _, report = prepare_features(card, panx_dev, mbert_tokenizer, 8, **build)
    assert report.cache_hit and report.rebuilt_cache_files == []


def test_a_full_disk_while_writing_the_features_cache_names_the_file_and_leaves_nothing(
        panx_dev, mbert_tokenizer, tmp_path, file_size_limit):
    card = load_card("panx")
    with file_size_limit(50_000), pytest.raises(OutputError) as caught:
        prepare_features(card, panx_dev, mbert_tokenizer, 8, tags=PANX_TAGS, cache_dir=tmp_path)
    cache_files = list(tmp_path.glob("features-*.arrow"))
    assert str(caught.value).startswith(f"cannot write {tmp_path}{os.sep}features-")
    assert str(caught.value).endswith(": file too large; free some space or choose another --cache-dir")
    assert os.listdir(tmp_path) == [] and cache_files == []  # no temp file, no partial cache file
    features, report = prepare_features(card, panx_dev, mbert_tokenizer, 8, tags=PANX_TAGS, cache_dir=tmp_path)
    in_memory, _ = prepare_features(card, panx_dev, mbert_tokenizer, 8, tags=PANX_TAGS)
    assert not report.cache_hit and features[:]["labels"] == in_memory[:]["labels"]


def test_a_features_cache_folder_that_cannot_be_created_is_named(small_tokenizer, tmp_path):
    (tmp_path / "cache").write_text("a file where the cache folder should be")
    example = tagged(["the", "dog"], ["O", "O"])
    with pytest.raises(OutputError, match=f"cannot create the folder {tmp_path / 'cache' / 'features'}: "
                                          f"{tmp_path / 'cache'} is a file, not a folder"):
        prepare_features(load_card("panx"), [example], small_tokenizer, 16, tags=PANX_TAGS,
                         cache_dir=tmp_path / "cache" / "features")


def test_labels_are_required_for_labelled_kinds(small_tokenizer):
    with pytest.raises(ValueError, match="pass tags="):
        prepare_features(load_card("panx"), [], small_tokenizer, 16)


def test_qa_context_first_puts_the_windowed_context_before_the_question_as_sg_net_does(small_tokenizer):
    """SG-Net's run_squad2.py: [CLS] passage [SEP] question [SEP], the passage (type 0) windowed as before and
    the answer found in it; the context keeps segment id 1 (the example's order), so decoding reads it."""
    from xsyn.data.decode import example_windows
    from xsyn.trees.conventions import InputConventions

    first = InputConventions(qa_context_first=True)
    features, report = prepare_features(load_card("xquad"), [qa_example(Answer("today", 25))], small_tokenizer, 12,
                                        doc_stride=2, conventions=first)
    w0, w1 = rows(features)
    assert small_tokenizer.convert_ids_to_tokens(w0["input_ids"]) == [
        "[CLS]", "the", "hearing", "is", "scheduled", "today", "[SEP]", "is", "the", "hearing", "today", "[SEP]"]
    assert small_tokenizer.convert_ids_to_tokens(w1["input_ids"])[:6] == ["[CLS]", "is", "scheduled", "today", ".",
                                                                          "[SEP]"]
    assert list(w0["token_type_ids"]) == [0] * 7 + [1] * 5 and list(w0["tree_segment"][1:6]) == [1] * 5
    assert (w0["window_start"], w0["window_end"], w1["window_start"], w1["window_end"]) == (0, 5, 2, 6)
    assert (w0["start_positions"], w0["end_positions"], w1["start_positions"]) == (5, 5, 3)
    (windows,) = example_windows(features, 1, last_segment=1)
    assert [list(w.positions) for w in windows] == [[1, 2, 3, 4, 5], [1, 2, 3, 4]]
    assert report.answers_outside_window == 0


def test_default_conventions_keep_the_feature_cache_key_of_before():
    """A run on the defaults names its features cache as before the conventions existed (its cache is kept)."""
    from xsyn.data.features import FeatureSettings
    from xsyn.trees.conventions import InputConventions

    plain = FeatureSettings("classification", 128, None)
    assert "conventions" not in plain.identity()
    assert FeatureSettings("classification", 128, None, conventions=InputConventions(tokenize_by="words")
                           ).identity()["conventions"] == {"tokenize_by": "words"}
