"""Batched tree tensors: hand-worked examples, padding, and every sentence of seven treebanks.

Every hand-worked example runs twice: with the CPU kernel (`xsyn/trees/_kernel.c`) and with the
torch ops that every other device runs; on the treebanks the two must give identical tensors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from xsyn.syntax.conllu import read_conllu
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.vocab import UPOS_SPECIAL_ID
from xsyn.trees.batch import collate_trees
from xsyn.trees.tensors import (
    DEPENDENT,
    FURTHER,
    HEAD,
    PAD,
    ROOT,
    SELF,
    UNREACHABLE,
    TreeTensors,
    ancestor_matrix,
    cpu_kernel_built,
    edge_relations,
    gat_mask,
    sep_weights,
    tree_depth,
    tree_distances,
)
from xsyn.trees.wordpiece import WordpieceAligner


@pytest.fixture(params=[True, False], ids=["c-kernel", "torch-ops"])
def cpu_kernel(request):
    return request.param


def tree_tensors(batch, cpu_kernel=True):
    return TreeTensors(batch["tree_parent"], batch["tree_upos"], batch["tree_word"], batch["tree_segment"],
                       cpu_kernel=cpu_kernel)


def tensors(tokenizer, *records_per_input, cpu_kernel=True):
    aligner = WordpieceAligner(tokenizer)
    trees = [aligner.encode(list(records))[0] for records in records_per_input]
    return tree_tensors(collate_trees(trees), cpu_kernel), trees


@pytest.fixture()
def chased(small_tokenizer, example_conllu, cpu_kernel):
    """[CLS] the dog chase ##d a cat . [SEP] with parents [-1, 2, 3, 0, 3, 6, 3, 3, 0]."""
    rec = next(r for r in read_conllu(example_conllu) if r.sent_id == "en-1")
    return tensors(small_tokenizer, [rec], cpu_kernel=cpu_kernel)[0]


# Worked out by hand from the parents above (edges 0-3, 0-8, 3-2, 3-4, 3-6, 3-7, 2-1, 6-5).
CHASED_DISTANCES = [
    [0, 3, 2, 1, 2, 3, 2, 2, 1],
    [3, 0, 1, 2, 3, 4, 3, 3, 4],
    [2, 1, 0, 1, 2, 3, 2, 2, 3],
    [1, 2, 1, 0, 1, 2, 1, 1, 2],
    [2, 3, 2, 1, 0, 3, 2, 2, 3],
    [3, 4, 3, 2, 3, 0, 1, 3, 4],
    [2, 3, 2, 1, 2, 1, 0, 2, 3],
    [2, 3, 2, 1, 2, 3, 2, 0, 3],
    [1, 4, 3, 2, 3, 4, 3, 3, 0],
]
CHASED_ANCESTORS = [{0}, {0, 1, 2, 3}, {0, 2, 3}, {0, 3}, {0, 3, 4}, {0, 3, 5, 6}, {0, 3, 6}, {0, 3, 7}, {0, 8}]


def rows(mask):
    return [[int(v) for v in row] for row in mask[0]]


def test_distances_depth_and_ancestors_by_hand(chased):
    assert chased.distances[0].tolist() == CHASED_DISTANCES
    assert chased.depth[0].tolist() == [0, 3, 2, 1, 2, 3, 2, 2, 1]
    assert [set(torch.nonzero(r).flatten().tolist()) for r in chased.ancestors[0]] == CHASED_ANCESTORS


def test_gat_mask_is_distance_within_delta(chased):
    d = torch.tensor(CHASED_DISTANCES)
    for delta in (1, 2, 3):
        assert torch.equal(chased.gat_mask(delta)[0], d <= delta)
    with pytest.raises(ValueError, match="delta must be >= 1"):
        gat_mask(chased.distances, 0)


def test_edge_relations_tell_a_pieces_head_from_its_dependents(chased):
    # parents [-1, 2, 3, 0, 3, 6, 3, 3, 0]: H = j is i's head, D = j depends on i, S = self, . = further
    expected = ["S..D....D",
                ".SH......",
                ".DSH.....",
                "H.DSD.DD.",
                "...HS....",
                ".....SH..",
                "...H.DS..",
                "...H...S.",
                "H.......S"]
    code = {".": FURTHER, "S": SELF, "H": HEAD, "D": DEPENDENT}
    assert chased.edge_relations[0].tolist() == [[code[c] for c in row] for row in expected]
    padded = edge_relations(torch.tensor([[-1, 0, -2]]))  # padding is nobody's head nor dependent
    assert padded[0].tolist() == [[SELF, DEPENDENT, FURTHER], [HEAD, SELF, FURTHER], [FURTHER, FURTHER, SELF]]


def test_sla_mask_by_hand(chased):
    # Words: the | dog | chase ##d | a | cat | . ; a row sees word j iff min over its word and its
    # linear neighbours of the tree distance to j is <= m (here m = 1); [CLS]/[SEP] always visible.
    assert rows(chased.sla_mask(1)) == [
        [1, 1, 1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 0, 0, 0, 1],  # the: via dog -> chased
        [1, 1, 1, 1, 1, 0, 1, 1, 1],  # dog: via chased -> cat, .
        [1, 1, 1, 1, 1, 1, 1, 1, 1],  # chase: neighbours dog, a
        [1, 1, 1, 1, 1, 1, 1, 1, 1],  # ##d shares its word's row
        [1, 0, 1, 1, 1, 1, 1, 1, 1],  # a: neighbours chased, cat
        [1, 0, 0, 1, 1, 1, 1, 1, 1],  # cat
        [1, 0, 0, 1, 1, 1, 1, 1, 1],  # .: only one neighbour in the segment (cat)
        [1, 1, 1, 1, 1, 1, 1, 1, 1],
    ]
    assert rows(chased.sla_mask(0))[1] == [1, 1, 1, 0, 0, 0, 0, 0, 1]  # the: itself and neighbour dog
    punct = rows(chased.sla_mask(0, punct_visible=True))
    assert punct[1][7] == 1 and punct[1][6] == 0


def test_wla_mask_by_hand(chased):
    m = rows(chased.wla_mask(1))
    assert m[1] == [1, 1, 1, 0, 0, 0, 0, 0, 1]  # the: words 1..2
    assert m[3] == m[4] == [1, 0, 1, 1, 1, 1, 0, 0, 1]  # chased: dog, chased, a
    assert m[0] == [1] * 9


def test_sdoi_follows_true_ancestors_in_a_non_projective_tree(small_tokenizer, example_conllu, cpu_kernel):
    # "A hearing is scheduled on the issue today ." -- issue -> hearing crosses "is scheduled".
    rec = next(r for r in read_conllu(example_conllu) if r.sent_id == "en-2")
    tt, _ = tensors(small_tokenizer, [rec], cpu_kernel=cpu_kernel)
    sdoi = rows(tt.sdoi_mask())
    #           CLS a hearing is scheduled on the issue today . SEP
    assert sdoi[3] == [1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0]  # "is": itself, scheduled, [CLS]; not "hearing"
    assert sdoi[5] == [1, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0]  # "on": issue, hearing, scheduled
    assert sdoi[0] == [1] + [0] * 10 and sdoi[10] == [0] * 10 + [1]  # specials: themselves only
    # A subtree-span mask (SG-Net's released code) would put "hearing" (span a..issue) above "is".


def test_sep_weights_by_hand(chased):
    w = chased.sep_weights()[0]
    inv = [0, 1 / 3, 1 / 2, 1, 1 / 2, 1 / 3, 1 / 2, 1 / 2, 1]
    assert torch.allclose(w[0], torch.tensor(inv) / sum(inv))
    assert torch.allclose(w.sum(-1), torch.ones(9))


def test_padding_keeps_every_row_nonempty_and_softmax_finite(small_tokenizer, example_conllu, cpu_kernel):
    recs = list(read_conllu(example_conllu))
    dog = SyntaxRecord.from_words(["dog"], [0], ["NOUN"], ["root"])
    tt, trees = tensors(small_tokenizer, [recs[1]], [dog], cpu_kernel=cpu_kernel)
    n = len(trees[1])
    assert tt.distances[1, n:, :].eq(UNREACHABLE).all() and tt.distances[1, :n, n:].eq(UNREACHABLE).all()
    scores = torch.randn(tt.distances.shape)
    for mask in (tt.gat_mask(1), tt.sla_mask(3), tt.wla_mask(4), tt.sdoi_mask()):
        assert mask[1, n:, n:].equal(torch.eye(mask.shape[-1] - n, dtype=torch.bool))  # padding: itself only
        assert not mask[1, :n, n:].any()  # real pieces never see padding
        probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
        assert torch.isfinite(probs).all()
    assert sep_weights(tt.distances)[1, n:].eq(0).all()


def test_sep_weights_of_a_padded_batch_ignore_padding_and_leave_distances_intact(
        small_tokenizer, example_conllu, cpu_kernel):
    recs = list(read_conllu(example_conllu))
    dog = SyntaxRecord.from_words(["dog"], [0], ["NOUN"], ["root"])
    tt, trees = tensors(small_tokenizer, [recs[1]], [dog], cpu_kernel=cpu_kernel)
    n = len(trees[1])  # [CLS] dog [SEP], both dog and [SEP] attached to [CLS]
    w = tt.sep_weights()  # computed before the int16 distances, from the same cached floats
    assert torch.allclose(w[1, :n, :n], torch.tensor([[0, 1 / 2, 1 / 2], [2 / 3, 0, 1 / 3], [2 / 3, 1 / 3, 0]]))
    assert w[1, :, n:].eq(0).all() and w[1, n:].eq(0).all()  # exactly zero: no weight leaks onto padding
    assert tt.distances[1, :n, :n].tolist() == [[0, 1, 1], [1, 0, 2], [1, 2, 0]]
    assert torch.equal(w, sep_weights(tt.distances))


def _reference_distances(parent: np.ndarray) -> np.ndarray:
    n = len(parent)
    child = np.nonzero(parent >= 0)[0]
    graph = csr_matrix((np.ones(len(child)), (child, parent[child])), shape=(n, n))
    return shortest_path(graph, directed=False, unweighted=True)


def _word_distances(rec: SyntaxRecord) -> np.ndarray:
    """Distances between words (plus a root node 0) straight from the heads, by BFS."""
    n = len(rec.words)
    graph = csr_matrix((np.ones(n), (np.arange(1, n + 1), np.asarray(rec.heads))), shape=(n + 1, n + 1))
    return shortest_path(graph, directed=False, unweighted=True)[1:, 1:]


def all_tensors(tt):
    return {"distances": tt.distances, "depth": tt.depth, "ancestors": tt.ancestors, "gat 1": tt.gat_mask(1),
            "gat 3": tt.gat_mask(3), "sla 3": tt.sla_mask(3), "sla 1 punct": tt.sla_mask(1, punct_visible=True),
            "wla 1": tt.wla_mask(1), "wla 4": tt.wla_mask(4), "sdoi": tt.sdoi_mask(), "seprem": tt.sep_weights()}


def assert_same_tensors(kernel, torch_ops):
    """The CPU kernel's tensors are the torch ops' tensors: same dtype, shape and every value."""
    assert kernel._core is not None and torch_ops._core is None  # both paths really ran
    for (name, x), y in zip(all_tensors(kernel).items(), all_tensors(torch_ops).values()):
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert torch.equal(x, y), name


TREEBANKS = ["UD_English-EWT/en_ewt-ud-dev.conllu", "UD_German-GSD/de_gsd-ud-dev.conllu",
             "UD_Chinese-GSD/zh_gsd-ud-dev.conllu", "UD_Japanese-GSD/ja_gsd-ud-dev.conllu",
             "UD_Arabic-PUD/ar_pud-ud-test.conllu", "UD_Russian-GSD/ru_gsd-ud-dev.conllu",
             "UD_French-GSD/fr_gsd-ud-dev.conllu"]


@pytest.mark.parametrize("name", TREEBANKS, ids=[t.split("/")[0] for t in TREEBANKS])
def test_every_sentence_of_a_treebank_at_wordpiece_level(mbert_tokenizer, shared_data, name):
    records = list(read_conllu(shared_data / "ud" / name))
    aligner = WordpieceAligner(mbert_tokenizer, max_length=512)
    trees = [aligner.assemble([s])[0] for s in aligner.segment_pieces(records)]
    checked_words = 0
    for lo in range(0, len(trees), 64):
        chunk, recs = trees[lo:lo + 64], records[lo:lo + 64]
        b = collate_trees(chunk)
        tt = tree_tensors(b)
        assert_same_tensors(tt, tree_tensors(b, cpu_kernel=False))
        for i, (tree, rec) in enumerate(zip(chunk, recs)):
            n = len(tree)
            parent = tree.parent.astype(np.int64)
            dist = tt.distances[i, :n, :n].numpy()
            depth = tt.depth[i, :n].numpy()
            anc = tt.ancestors[i, :n, :n].numpy()
            np.testing.assert_array_equal(dist, _reference_distances(parent))  # independent BFS
            np.testing.assert_array_equal(dist, dist.T)
            kids = np.nonzero(parent >= 0)[0]
            assert (dist[kids, parent[kids]] == 1).all()
            assert depth[0] == 0 and (depth[1:] > 0).all()
            assert (anc.sum(1) == depth + 1).all()
            ii, jj = np.nonzero(anc)
            assert (dist[ii, jj] == depth[ii] - depth[jj]).all()
            # Between the first pieces of words, piece distances are the word tree's distances.
            if tree.wordless == 0 and len(set(rec.spans)) == len(rec.spans):
                first = [int(np.argmax(tree.word_index == w)) for w in range(len(rec.words))]
                np.testing.assert_array_equal(dist[np.ix_(first, first)], _word_distances(rec))
                checked_words += len(first)
    assert checked_words > 0.05 * sum(len(r) for r in records)  # ja: many words share a piece


def test_a_window_wider_than_the_input_stays_inside_its_segment(small_tokenizer):
    dog = SyntaxRecord.from_words(["dog"], [0], ["NOUN"], ["root"])
    cat = SyntaxRecord.from_words(["cat"], [0], ["NOUN"], ["root"])
    tt, _ = tensors(small_tokenizer, [dog, cat])  # [CLS] dog [SEP] cat [SEP]
    for k in (1, 10, 1000):
        assert rows(tt.wla_mask(k)) == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 1], [1] * 5, [1, 0, 1, 1, 1], [1] * 5]


def _units(word, segment, special):
    """Each piece's unit (a run of pieces of one word, or a lone piece), and each unit's first
    piece, segment and whether it is a word."""
    unit, first, unit_segment, is_word = [], [], [], []
    for p, (w, s) in enumerate(zip(word.tolist(), segment.tolist())):
        if not unit or special[p] or w < 0 or (w, s) != (word[p - 1], segment[p - 1]) or special[p - 1]:
            first.append(p)
            unit_segment.append(s)
            is_word.append(w >= 0 and not special[p])
        unit.append(len(first) - 1)
    return np.array(unit), np.array(first), np.array(unit_segment), np.array(is_word)


def _reference_wla(word, segment, special, k):
    """|unit(i) - unit(j)| <= k within a segment; specials see and are seen by every real piece."""
    unit = _units(word, segment, special)[0]
    same = (segment[:, None] == segment[None, :]) & (np.abs(unit[:, None] - unit[None, :]) <= k)
    return same | special[:, None] | special[None, :] | np.eye(len(word), dtype=bool)


def _reference_sla(dist, word, segment, special, m):
    """Li et al. eq. 2-3 at word level: word i sees word j iff min over i and its neighbouring
    words in the segment of the distance between first pieces is <= m; specials see and are seen
    by all."""
    unit, first, unit_segment, is_word = _units(word, segment, special)
    n = len(word)
    vis = special[:, None] | special[None, :] | np.eye(n, dtype=bool)
    for i in np.nonzero(~special)[0]:
        u = unit[i]
        near = [u] + [v for v in (u - 1, u + 1) if 0 <= v < len(first) and is_word[u] and is_word[v]
                      and unit_segment[v] == unit_segment[u]]
        for j in np.nonzero(~special)[0]:
            vis[i, j] |= min(dist[first[v], first[unit[j]]] for v in near) <= m
    return vis


def test_sla_and_wla_masks_of_pair_inputs_follow_their_definition(mbert_tokenizer, shared_data):
    """Pairs of real sentences (two segments, padding, windows from 1 word to the whole input)."""
    records = list(read_conllu(shared_data / "ud" / TREEBANKS[0]))[:96]
    aligner = WordpieceAligner(mbert_tokenizer, max_length=512)
    segments = aligner.segment_pieces(records)
    pairs = [aligner.assemble([segments[i], segments[i + 1]])[0] for i in range(0, len(segments), 2)]
    widest = 0
    for lo in range(0, len(pairs), 16):
        b = collate_trees(pairs[lo:lo + 16])
        tt = tree_tensors(b)
        assert_same_tensors(tt, tree_tensors(b, cpu_kernel=False))
        widest = max(widest, b["tree_upos"].shape[1])
        masks = {("sla", m): tt.sla_mask(m) for m in (0, 2)} | {("wla", k): tt.wla_mask(k) for k in (1, 4, 1000)}
        for i, tree in enumerate(pairs[lo:lo + 16]):
            n = len(tree)
            assert tree.wordless == 0
            word, segment = tree.word_index.astype(np.int64), tree.segment_id.astype(np.int64)
            special = tree.upos == UPOS_SPECIAL_ID
            dist = tt.distances[i, :n, :n].numpy()
            for (kind, size), mask in masks.items():
                expected = (_reference_sla(dist, word, segment, special, size) if kind == "sla"
                            else _reference_wla(word, segment, special, size))
                np.testing.assert_array_equal(mask[i, :n, :n].numpy(), expected, err_msg=f"{kind} {size}")
                assert not mask[i, :n, n:].any()
    assert widest >= 100  # a window of 1000 words takes the int32 path (t (t + 2) > 10,000)


def test_the_cpu_kernel_is_built_by_the_install():
    assert cpu_kernel_built(), "xsyn/trees/_kernel.c was not built: `pip install -e .` needs a C compiler"


def test_kernel_and_torch_ops_agree_on_truncated_batches_with_removed_ancestors(mbert_tokenizer, shared_data):
    # Japanese is head-final: cutting sentences at 12 pieces removes roots and other ancestors, which
    # travel as extra nodes after the padded sequence (N > T).
    records = list(read_conllu(shared_data / "ud" / "UD_Japanese-GSD" / "ja_gsd-ud-dev.conllu"))[:256]
    aligner = WordpieceAligner(mbert_tokenizer, max_length=12)
    trees = [aligner.assemble([s])[0] for s in aligner.segment_pieces(records)]
    widened = 0
    for lo in range(0, len(trees), 32):
        b = collate_trees(trees[lo:lo + 32])
        widened += b["tree_parent"].shape[1] > b["tree_upos"].shape[1]
        assert_same_tensors(tree_tensors(b), tree_tensors(b, cpu_kernel=False))
        parent = b["tree_parent"]  # the public functions, over all N nodes
        every_node = TreeTensors(parent, parent, parent, parent, cpu_kernel=False)  # fields of width N: T = N
        assert torch.equal(tree_depth(parent), every_node.depth)
        assert torch.equal(ancestor_matrix(parent), every_node.ancestors)
        assert torch.equal(tree_distances(parent), every_node.distances)
    assert widened == 8


BAD_PARENTS = {
    "two-node cycle": [ROOT, 2, 1],
    "three-node cycle": [ROOT, 2, 3, 1],
    "own parent": [ROOT, 1, 0],
    "parent past the row": [ROOT, 0, 3],
    "parent is padding": [ROOT, 3, 0, PAD],
    "below PAD": [ROOT, 0, -3],
}


@pytest.mark.parametrize("parent", BAD_PARENTS.values(), ids=BAD_PARENTS.keys())
def test_bad_parent_pointers_are_refused(parent, cpu_kernel):
    fields = torch.zeros(1, len(parent), dtype=torch.long)
    with pytest.raises(ValueError, match="tree_parent.*a parent must be ROOT"):
        TreeTensors(torch.tensor([parent]), fields, fields, fields, cpu_kernel=cpu_kernel).gat_mask(1)


# -- on the accelerator (`--device cuda`; skipped on a CPU-only machine) -----------------------------------

FLOAT_TENSORS = {"seprem"}  # a GPU sums in another order: equal up to rounding, not bit for bit


@pytest.mark.parametrize("name", TREEBANKS, ids=[t.split("/")[0] for t in TREEBANKS])
def test_tree_tensors_on_the_device_equal_the_cpu_kernels_on_every_batch(device, mbert_tokenizer, shared_data, name):
    records = list(read_conllu(shared_data / "ud" / name))
    aligner = WordpieceAligner(mbert_tokenizer, max_length=512)
    trees = [aligner.assemble([s])[0] for s in aligner.segment_pieces(records)]
    for lo in range(0, len(trees), 64):
        batch = collate_trees(trees[lo:lo + 64])
        on_device = tree_tensors({k: v.to(device) for k, v in batch.items()})
        assert on_device._core is None  # the torch ops ran, on the device
        for (key, x), y in zip(all_tensors(tree_tensors(batch)).items(), all_tensors(on_device).values()):
            assert y.device.type == torch.device(device).type, key
            assert x.dtype == y.dtype and x.shape == y.shape, key
            if key in FLOAT_TENSORS:
                torch.testing.assert_close(y.cpu(), x, rtol=1e-5, atol=1e-7, msg=f"{name} batch {lo}: {key}")
            else:
                assert torch.equal(y.cpu(), x), f"{name} batch {lo}: {key}"


@pytest.mark.parametrize("parent", BAD_PARENTS.values(), ids=BAD_PARENTS.keys())
def test_bad_parent_pointers_are_refused_on_the_device(device, parent):
    fields = torch.zeros(1, len(parent), dtype=torch.long, device=device)
    with pytest.raises(ValueError, match="tree_parent.*a parent must be ROOT"):
        TreeTensors(torch.tensor([parent], device=device), fields, fields, fields).gat_mask(1)


def test_every_tree_tensor_is_made_on_the_batchs_device_not_the_default_one(small_tokenizer, example_conllu):
    """Runs on CPU: with the default device set to `meta`, any tensor made without `device=` would be
    a meta tensor, and mixing it with the batch's CPU tensors fails or leaves a meta result."""
    batch = collate_trees([WordpieceAligner(small_tokenizer).encode([r])[0] for r in read_conllu(example_conllu)])
    for cpu_kernel in (True, False):
        with torch.device("meta"):
            tt = tree_tensors(batch, cpu_kernel)
            made = all_tensors(tt) | {"edge": tt.edge_relations}
        assert {key: x.device.type for key, x in made.items()} == dict.fromkeys(made, "cpu")
        assert all(torch.equal(x, y) for x, y in zip(made.values(), all_tensors(tree_tensors(batch)).values()))


def chain(n: int) -> list[torch.Tensor]:
    """One input of n pieces, each headed by its right neighbour (the `chain` control parser's tree)."""
    return [torch.tensor([[ROOT, *range(2, n), 0]]), torch.full((1, n), 3), torch.arange(n).unsqueeze(0),
            torch.zeros(1, n, dtype=torch.long)]


def check_under_mixed_precision(fields: list[torch.Tensor], dtype: torch.dtype) -> None:
    reference = all_tensors(TreeTensors(*fields, cpu_kernel=False))
    with torch.autocast(fields[0].device.type, dtype=dtype):
        mixed = all_tensors(TreeTensors(*fields, cpu_kernel=False))
    for key, x in reference.items():
        assert mixed[key].dtype == x.dtype and torch.equal(mixed[key], x), key


def test_tree_tensors_stay_exact_under_mixed_precision():
    """bf16 training runs the model under autocast; a depth of 399 is far past the whole numbers
    bfloat16 holds exactly (256), so a product of ancestor counts in bf16 would misplace distances."""
    fields = chain(400)  # [CLS] <- 399 <- 398 <- ... <- 1
    check_under_mixed_precision(fields, torch.bfloat16)
    tree = TreeTensors(*fields, cpu_kernel=False)
    assert tree.depth[0, 1].item() == 399 and tree.distances[0, 1, 399].item() == 398


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_tree_tensors_stay_exact_under_mixed_precision_on_the_device(device, dtype):
    check_under_mixed_precision([x.to(device) for x in chain(400)], dtype)
