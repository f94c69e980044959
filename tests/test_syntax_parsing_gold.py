"""`--parser gold`: the trees a task's data carries (UD CoNLL-U input) served as its parses, while every other
parser ignores them, so the same run can be made with gold and with predicted trees."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.data.cards import load_card
from xsyn.data.loading import load_examples
from xsyn.syntax.cache import ParseCache
from xsyn.syntax.parse import parse_segments
from xsyn.syntax.parsing import build_parser
from xsyn.syntax.parsing.base import ParsesNotFound
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.segment import Segment

# two EWT-like sentences whose trees are not the chain's (the chain heads each word on its right neighbour)
TREEBANK = """# sent_id = s1
# text = The dog barks.
1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\t_\t_\t3\tnsubj\t_\t_
3\tbarks\tbark\tVERB\t_\t_\t0\troot\t_\tSpaceAfter=No
4\t.\t.\tPUNCT\t_\t_\t3\tpunct\t_\t_

# sent_id = s2
# text = Cats sleep here
1\tCats\tcat\tNOUN\t_\t_\t2\tnsubj\t_\t_
2\tsleep\tsleep\tVERB\t_\t_\t0\troot\t_\t_
3\there\there\tADV\t_\t_\t2\tadvmod\t_\t_

"""
GOLD_HEADS = [[2, 3, 0, 3], [2, 0, 2]]
CHAIN_HEADS = [[2, 3, 4, 0], [2, 3, 0]]


@pytest.fixture
def ud_data(tmp_path):
    """A UD release layout (the udpos card's `ud` layout) holding one English treebank, all splits."""
    folder = tmp_path / "data" / "UD_English-EWT"
    folder.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (folder / f"en_ewt-ud-{split}.conllu").write_text(TREEBANK, encoding="utf-8")
    return tmp_path / "data"


def tree(words: list[str], heads: list[int]) -> SyntaxRecord:
    return SyntaxRecord(words, heads, ["X"] * len(words), ["dep" if h else "root" for h in heads],
                        token_index=list(range(len(words))), text=" ".join(words), lang="en")


def test_gold_serves_the_data_s_trees_and_the_other_parsers_ignore_them(tmp_path):
    given = tree(["Dogs", "bark"], [2, 0])
    segments = [Segment("en", tokens=["Dogs", "bark"], gold_tree=given), Segment("en", tokens=["Dogs", "bark"],
                                                                                 gold_tree=given)]
    report = parse_segments(segments, build_parser("gold"), ParseCache(tmp_path / "cache"))
    assert [s.record for s in segments] == [given, given]
    assert (report.gold, report.parsed, report.cache_hits) == (2, 0, 0)

    predicted = [Segment("en", tokens=["Dogs", "bark"], gold_tree=tree(["Dogs", "bark"], [0, 1]))]
    report = parse_segments(predicted, build_parser("chain"), ParseCache(tmp_path / "cache"))
    assert predicted[0].record.heads == [2, 0] and (report.gold, report.parsed) == (0, 1)


def test_gold_refuses_data_without_trees_naming_every_segment(tmp_path):
    segments = [Segment("en", text=f"Sentence {i}.", sent_id=f"p{i}") for i in range(7)]
    segments.append(Segment("en", tokens=["Has", "one"], gold_tree=tree(["Has", "one"], [0, 1])))
    with pytest.raises(ParsesNotFound) as caught:
        parse_segments(segments, build_parser("gold"), ParseCache(tmp_path / "cache"))
    message = str(caught.value)
    assert message.startswith("--parser gold has no parse for 7 segment(s) (the task's data carries no tree for them)")
    assert "[en] (sent_id p0) 'Sentence 0.'" in message and "... and 2 more" in message
    assert message.endswith("--parser gold needs data with trees (UD CoNLL-U input, e.g. the udpos task read from a "
                            "treebank); choose a parser (stanza, udpipe:MODEL, ...)")


def test_a_treebank_read_as_task_data_carries_its_trees_on_its_words(ud_data, tmp_path):
    examples, _ = load_examples(load_card("udpos"), "en", "test", str(ud_data), False)
    segments = [example.segments[0] for example in examples]
    assert [s.tokens for s in segments] == [["The", "dog", "barks", "."], ["Cats", "sleep", "here"]]
    parse_segments(segments, build_parser("gold"), ParseCache(tmp_path / "gold"))
    assert [s.record.heads for s in segments] == GOLD_HEADS
    assert [s.record.token_index for s in segments] == [[0, 1, 2, 3], [0, 1, 2]]
    examples, _ = load_examples(load_card("udpos"), "en", "test", str(ud_data), False)
    segments = [example.segments[0] for example in examples]
    parse_segments(segments, build_parser("chain"), ParseCache(tmp_path / "chain"))
    assert [s.record.heads for s in segments] == CHAIN_HEADS


def test_one_model_evaluated_with_gold_and_with_predicted_trees(ud_data, tmp_path):
    """The ablation of Sachan et al. (2021): the same fine-tuned model, scored on gold and on predicted parses."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "The", "dog", "barks", ".", "Cats",
                                "sleep", "here"]) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    common = ["--data-dir", str(ud_data), "--cache-dir", str(tmp_path / "cache"), "--quiet"]
    result = CliRunner().invoke(main, ["finetune", "--task", "udpos", "--variant", "gat", "--model", "tiny",
                                       "--tokenizer", str(vocab), "--parser", "gold", "--max-steps", "2",
                                       "--batch-size", "2", "--max-length", "32", "--output-dir", str(out), *common])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "data_report.json").read_text())
    assert report["train"]["parse"]["gold"] == 2 and report["train"]["parse"]["parsed"] == 0
    parses = {}
    for parser in ("gold", "chain"):
        folder = tmp_path / f"eval-{parser}"
        result = CliRunner().invoke(main, ["evaluate", "--model-dir", str(out), "--split", "test", "--langs", "en",
                                           "--parser", parser, "--output-dir", str(folder), *common])
        assert result.exit_code == 0, result.output
        assert json.loads((folder / "results.json").read_text())["config"]["parser"] == parser
        parses[parser] = json.loads((folder / "results.json").read_text())["data"]["en"]["parse"]
    assert (parses["gold"]["gold"], parses["gold"]["parsed"]) == (2, 0)  # the treebank's trees
    assert (parses["chain"]["gold"], parses["chain"]["parsed"]) == (0, 2)  # the same sentences, parsed
