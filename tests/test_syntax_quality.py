"""UAS and LAS of a parser against gold trees: hand-worked sentences, tokenisation mismatches,
and `xsyn parser-quality` on a real treebank with the model-free chain parser."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.syntax.conllu import parse_conllu, read_conllu
from xsyn.syntax.quality import attachment_scores, score_parser
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.treebanks import TreebankError

WORDS = ["The", "dog", "chased", "the", "cat", "."]
GOLD = SyntaxRecord.from_words(WORDS, [2, 3, 0, 5, 3, 3], ["DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT"],
                               ["det", "nsubj", "root", "det", "obj", "punct"])

CANT = """# sent_id = s1
# text = I can't go
1\tI\t_\tPRON\t_\t_\t4\tnsubj\t_\t_
2-3\tcan't\t_\t_\t_\t_\t_\t_\t_\t_
2\tca\t_\tAUX\t_\t_\t4\taux\t_\t_
3\tn't\t_\tPART\t_\t_\t4\tadvmod\t_\t_
4\tgo\t_\tVERB\t_\t_\t0\troot\t_\t_
"""


def test_gold_against_itself_is_perfect():
    scores = attachment_scores([GOLD], [GOLD])
    assert (scores.uas, scores.las, scores.words_f1, scores.mismatched_sentences) == (1.0, 1.0, 1.0, 0)


def test_one_wrong_head_and_one_wrong_label():
    # "cat" attached to "dog" (wrong head); the second "the" labelled nmod (right head, wrong label)
    parsed = SyntaxRecord.from_words(WORDS, [2, 3, 0, 5, 2, 3], GOLD.upos,
                                     ["det", "nsubj", "root", "nmod", "obj", "punct"])
    scores = attachment_scores([parsed, GOLD], [GOLD, GOLD])
    assert scores.uas == pytest.approx(11 / 12)
    assert scores.las == pytest.approx(10 / 12)


def test_a_multiword_token_left_whole_is_aligned_by_its_characters():
    gold = list(parse_conllu(CANT))
    # the parser kept "can't" as one word; it sits on the same characters as gold's "ca" + "n't"
    parsed = SyntaxRecord(["I", "can't", "go"], [3, 3, 0], ["PRON", "AUX", "VERB"], ["nsubj", "aux", "root"],
                          spans=[(0, 1), (2, 7), (8, 10)], text="I can't go")
    scores = attachment_scores([parsed], gold)
    # 3 parser words, 4 gold words, 3 aligned and all attached right: F1 = 2 * 3 / (3 + 4)
    assert scores.words_f1 == pytest.approx(6 / 7)
    assert scores.uas == pytest.approx(6 / 7) and scores.las == pytest.approx(6 / 7)
    assert scores.mismatches == ["sentence 1 (s1): the parser has 3 words, the gold tree 4; first difference "
                                 "at word 2: parser \"can't\", gold 'ca'"]


def test_records_that_cannot_be_aligned_say_how_to_parse():
    with pytest.raises(ValueError, match="2 parsed records for 1 gold sentences"):
        attachment_scores([GOLD, GOLD], [GOLD])
    tokens = SyntaxRecord(["The", "dog"], [2, 0], ["DET", "NOUN"], ["det", "root"], token_index=[0, 1])
    with pytest.raises(ValueError, match="or the gold words with parse_tokens"):
        attachment_scores([tokens], [GOLD])


def test_parser_quality_command_scores_the_chain_parser_on_ewt(tmp_path, shared_data):
    ud = shared_data / "ud"
    gold = list(read_conllu(ud / "UD_English-EWT" / "en_ewt-ud-dev.conllu"))[:60]
    # the chain parser heads every word by its right neighbour and makes the last word the root:
    # its UAS on gold words is the share of words whose gold head is exactly that
    expected = sum(h == (i + 2 if i + 1 < len(g.heads) else 0) for g in gold for i, h in enumerate(g.heads))
    expected /= sum(len(g.words) for g in gold)
    out = tmp_path / "quality.json"
    result = CliRunner().invoke(main, ["parser-quality", "--parser", "chain", "--treebanks", "en",
                                       "--treebank-dir", str(ud), "--input", "words", "--max-eval-examples", "60",
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    scores = json.loads(out.read_text())["en"]
    assert scores["treebank"] == "UD_English-EWT" and scores["split"] == "dev" and scores["sentences"] == 60
    assert scores["uas"] == pytest.approx(expected) and scores["mismatched_sentences"] == 0
    assert scores["las"] < scores["uas"]  # the chain labels everything `dep`

    text = CliRunner().invoke(main, ["parser-quality", "--parser", "chain", "--treebanks", "en",
                                     "--treebank-dir", str(ud), "--max-eval-examples", "60"])
    assert text.exit_code == 0, text.output
    assert "tokenised differently" in text.output and "first difference at word" in text.output


def test_parser_quality_names_an_output_folder_that_cannot_be_created(tmp_path, shared_data):
    (tmp_path / "scores").write_text("a file where the output folder should be")
    result = CliRunner().invoke(main, ["parser-quality", "--parser", "chain", "--treebanks", "en", "--treebank-dir",
                                       str(shared_data / "ud"), "--max-eval-examples", "5", "--output",
                                       str(tmp_path / "scores" / "en.json")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output == (f"Error: cannot create the folder {tmp_path / 'scores'}: {tmp_path / 'scores'} is a "
                             "file, not a folder; move that file away or choose another --output\n")


def test_parser_quality_names_unknown_treebanks(tmp_path):
    result = CliRunner().invoke(main, ["parser-quality", "--parser", "chain", "--treebanks", "xx",
                                       "--treebank-dir", str(tmp_path)])
    assert result.exit_code != 0 and "unknown language or treebank 'xx'" in result.output


def test_every_treebank_is_found_before_the_first_is_parsed(tmp_path):
    gold = tmp_path / "UD_English-EWT" / "en_ewt-ud-dev.conllu"
    gold.parent.mkdir()
    gold.write_text("1\tA\ta\tDET\t_\t_\t2\tdet\t_\t_\n2\tcat\tcat\tNOUN\t_\t_\t0\troot\t_\t_\n\n")
    (tmp_path / "UD_German-GSD").mkdir()  # a treebank folder without its dev file

    class Spy:
        calls: list = []

        def parse_texts(self, texts, lang):
            self.calls.append(lang)
            return [GOLD] * len(texts)

    for misspelt, message in ((["en", "xx"], "unknown language or treebank 'xx'"), (["en", "de"], "UD_German-GSD")):
        with pytest.raises(TreebankError, match=message):
            next(score_parser(Spy(), misspelt, tmp_path))
    assert Spy.calls == []  # nothing parsed (with a neural parser: minutes) before the bad name was found


@pytest.mark.parametrize(("content", "problem"), [
    ("1\tA\ta\tDET\t_\t_\t7\tdet\t_\t_\n2\tcat\tcat\tNOUN\t_\t_\t0\troot\t_\t_\n\n",
     ":1: word 1 has head 7, outside the sentence"),
    ("", ": no sentences to score"),
])
def test_parser_quality_names_a_bad_or_empty_treebank_file(tmp_path, content, problem):
    gold = tmp_path / "UD_English-EWT" / "en_ewt-ud-dev.conllu"
    gold.parent.mkdir()
    gold.write_text(content, encoding="utf-8")
    result = CliRunner().invoke(main, ["parser-quality", "--parser", "chain", "--treebanks", "en",
                                       "--treebank-dir", str(tmp_path)])
    assert result.exit_code == 1 and f"Error: {gold}{problem}" in result.output
    assert "Traceback" not in result.output and "nan" not in result.output
