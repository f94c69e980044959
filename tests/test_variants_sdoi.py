"""The `sdoi` variant's own behaviour (the checks every variant passes: test_models_variants.py): on tiny random BERTs,
against plain transformers `BertModel` with the same weights, attention probabilities recomputed from the definition,
or values worked out by hand; and here, what `reproduce=sgnet` gives it (SG-Net's released code, cooelf/SG-Net: the
mask `run_squad2.py: convert_examples_to_features` trains on, and `modeling.py`'s aggregation), worked out by hand on
a passage with a non-first piece."""

from __future__ import annotations

import math

import pytest
import torch
from variant_models import SHAPE as LIFTED_SHAPE
from variant_models import lifted

from xsyn.models.attention import attention_mask_for
from xsyn.models.configuration import XsynBertConfig
from xsyn.models.modeling import XsynBertModel
from xsyn.models.variants.sdoi.layers import CODE_MASK_VALUE, sdoi_output
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.vocab import UPOS_SPECIAL_ID
from xsyn.trees.batch import collate_trees
from xsyn.trees.conventions import InputConventions
from xsyn.trees.tensors import TreeTensors
from xsyn.trees.wordpiece import WordpieceAligner

PASSAGE = SyntaxRecord.from_words(["the", "dog", "chased", "a", "cat", "."], [2, 3, 0, 5, 3, 3],
                                  ["DET", "NOUN", "VERB", "DET", "NOUN", "PUNCT"],
                                  ["det", "nsubj", "root", "det", "obj", "punct"])
QUESTION = SyntaxRecord.from_words(["the", "dog", "is", "big"], [2, 4, 4, 0], ["DET", "NOUN", "AUX", "ADJ"],
                                   ["det", "nsubj", "cop", "root"])
SG_NET_INPUTS = InputConventions(tokenize_by="words", qa_context_first=True, carry_cut_dependents=True)
SHAPE = {"vocab_size": 40, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
         "intermediate_size": 64, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def sg_net_input(tokenizer):
    """[CLS] the dog chase ##d a cat . [SEP] the dog is big [SEP]: the passage first, as run_squad2.py puts it."""
    aligner = WordpieceAligner(tokenizer, conventions=SG_NET_INPUTS)
    question, passage = aligner.segment_pieces([QUESTION, PASSAGE])
    (tree,) = aligner.assemble([passage, question], stride=0, window_segment=0, segment_ids=[1, 0])
    return tree


def visible(mask) -> list[list[int]]:
    return [torch.nonzero(row).flatten().tolist() for row in mask]


def test_sg_nets_mask_hides_cls_and_a_pieces_own_column_unless_it_heads_another(small_tokenizer):
    """run_squad2.py sets a column over its subtree's pieces only when they are more than one: "the", "##d"
    (chased's later piece), "a", "." and the question's "the" and "is" head nothing and see only their ancestors;
    [CLS] is nobody's ancestor; the rows it leaves empty ([CLS], [SEP]) see every position."""
    tree = sg_net_input(small_tokenizer)
    assert small_tokenizer.convert_ids_to_tokens(tree.input_ids.tolist()) == [
        "[CLS]", "the", "dog", "chase", "##d", "a", "cat", ".", "[SEP]", "the", "dog", "is", "big", "[SEP]"]
    assert tree.token_type_ids.tolist() == [0] * 9 + [1] * 5 and tree.segment_id.tolist()[1:8] == [1] * 7
    code = TreeTensors.from_batch(collate_trees([tree])).sdoi_mask(False, True, "all")[0]
    everything = list(range(14))
    assert visible(code) == [everything, [2, 3], [2, 3], [3], [3], [3, 6], [3, 6], [3], everything,
                             [10, 12], [10, 12], [12], [12], everything]
    paper = TreeTensors.from_batch(collate_trees([tree])).sdoi_mask()[0]  # ancestors and itself, [CLS] among them
    assert visible(paper)[:5] == [[0], [0, 1, 2, 3], [0, 2, 3], [0, 3], [0, 3, 4]]


def test_an_empty_row_keeps_the_codes_minus_10000_shift(small_tokenizer):
    """A row SG-Net leaves all zero is `scores - 10000` everywhere: xsyn gives it the same additive value (whose
    float32 rounding is the code's), every other row its visible columns as BERT's 0."""
    model = XsynBertModel(XsynBertConfig(variant="sdoi", sdoi_cls_visible=False, sdoi_self="heads",
                                         sdoi_empty_rows="all", **SHAPE)).eval()
    tree = sg_net_input(small_tokenizer)
    tensors = TreeTensors.from_batch(collate_trees([tree]))
    mask = tensors.sdoi_mask(False, True, "all")
    additive = attention_mask_for(model, mask)
    shifted = additive.masked_fill(mask.all(-1)[:, None, :, None], CODE_MASK_VALUE)
    assert shifted[0, 0, 0].tolist() == [CODE_MASK_VALUE] * 14 and shifted[0, 0, 1, 2] == 0
    hidden = torch.randn(1, 14, 32)
    torch.testing.assert_close(sdoi_output(model, tensors, hidden), model.sdoi(hidden, shifted))


def test_the_softmax_aggregation_starts_where_alpha_does_and_mixes_as_sg_net_does():
    """modeling.py: H' = gamma (w0 H + w1 H_sdoi), (w0, w1) = softmax(w), w = [0.5, 0.5], gamma = 1: at the start
    the paper's 0.5 H + 0.5 H_sdoi; other trained values follow the formula."""
    torch.manual_seed(0)
    alpha = XsynBertModel(XsynBertConfig(variant="sdoi", **SHAPE)).eval()
    torch.manual_seed(0)
    soft = XsynBertModel(XsynBertConfig(variant="sdoi", sdoi_aggregation="softmax", sdoi_learn_alpha=True,
                                        **SHAPE)).eval()
    assert soft.sdoi.mix.tolist() == [0.5, 0.5] and soft.sdoi.gamma.tolist() == [1.0]
    assert soft.sdoi.mix.requires_grad and soft.sdoi.gamma.requires_grad
    hidden, mask = torch.randn(2, 5, 32), torch.zeros(2, 1, 5, 5)
    torch.testing.assert_close(soft.sdoi(hidden, mask), alpha.sdoi(hidden, mask))
    with torch.no_grad():
        soft.sdoi.mix.copy_(torch.tensor([0.0, math.log(3.0)]))  # softmax: (0.25, 0.75)
        soft.sdoi.gamma.fill_(2.0)
    guided = soft.sdoi.layer(hidden, mask)
    torch.testing.assert_close(soft.sdoi(hidden, mask), 2.0 * (0.25 * hidden + 0.75 * guided))
    quarter = XsynBertModel(XsynBertConfig(variant="sdoi", sdoi_aggregation="softmax", sdoi_alpha=0.25, **SHAPE))
    assert quarter.sdoi.mix.softmax(0).tolist() == pytest.approx([0.25, 0.75])


def test_a_softmax_aggregation_cannot_start_at_alpha_0_or_1():
    from huggingface_hub.errors import StrictDataclassClassValidationError

    with pytest.raises((StrictDataclassClassValidationError, ValueError), match="sdoi_alpha"):
        XsynBertConfig(variant="sdoi", sdoi_aggregation="softmax", sdoi_alpha=1, **SHAPE).check_syntax()


def test_sdoi_layer_reads_only_ancestors_and_mixes_by_alpha(plain, batch):
    model = lifted(plain, "sdoi")
    tree = TreeTensors(batch["tree_parent"], batch["tree_upos"], batch["tree_word"], batch["tree_segment"])
    mask = tree.sdoi_mask().unsqueeze(1)
    special = batch["tree_upos"][0] == UPOS_SPECIAL_ID
    reads = torch.where(special.unsqueeze(1), torch.eye(len(special), dtype=torch.bool), tree.ancestors[0])
    hidden = torch.randn(*batch["input_ids"].shape, LIFTED_SHAPE["hidden_size"])
    sdoi = model.sdoi
    with torch.no_grad():
        sdoi.alpha.fill_(0.0)
        base = sdoi(hidden, mask)
        for j in range(hidden.shape[1]):
            moved = hidden.clone()
            moved[0, j] += 1.0
            changed = (sdoi(moved, mask)[0] - base[0]).abs().amax(-1) > 1e-6
            assert changed.tolist() == reads[:, j].tolist()  # i moves iff j is i or its ancestor
        sdoi.alpha.fill_(0.3)
        torch.testing.assert_close(sdoi(hidden, mask), 0.3 * hidden + 0.7 * base)
