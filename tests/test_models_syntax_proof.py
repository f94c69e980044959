"""Proof that syntax reaches the model: tiny BERTs trained from scratch on a task only the tree solves.

The task, "whose child is the marker?": a sentence of 10-14 filler words holds a marker `mk` and
two value words `va` and `vb`, one of each. The marker is a leaf of a random dependency tree and
its head is one of the two value words; the label (read at the marker) is which. Surface order
carries nothing: trees are random recursive trees over a random word order, neither value word
is a linear neighbour of the marker, and each sentence has one `va` and one `vb`. The other value
word is placed where no variant's syntax reaches from the marker: not its tree neighbour (GAT,
delta = 1), not its ancestor (SDOI), not in its SLA region (m = 1, neighbour-min over the marker
and its linear neighbours), and at least two tree hops away (SEPREM's inverse distance weighs it at
most half as much as the head). So `none` stays at chance and each variant can win only through the
tree it sees: its GAT encoder, its local mask, its ancestor mask, or its distance-weighted mix.

Every model is trained the same way (seed, data order, optimiser, steps) and scored on held-out
trees.

The GAT's structural probes, trained alone (BERT frozen, no task), must bring the predicted
squared distances to a Spearman correlation of at least 0.8 with the true tree distances of
held-out random trees, well above what the untrained GAT gives.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from xsyn.models.factory import build_model
from xsyn.models.tokenizers import load_tokenizer
from xsyn.models.variants.gat.layers import syntax_probe
from xsyn.syntax.record import SyntaxRecord
from xsyn.trees.batch import collate_trees
from xsyn.trees.wordpiece import WordpieceAligner

FILLERS = [f"w{i}" for i in range(200)]  # words rarely repeat within a sentence, as in text
SHAPE = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128,
         "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
SMALL_GAT = {"gat_layers": 2, "gat_heads": 2, "gat_head_size": 32}
STEPS, LEARNING_RATE, BATCH = 250, 1e-3, 32

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Models this small train fastest on one thread; two threads on a busy 2-core machine thrash."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = tmp_path_factory.mktemp("proof") / "vocab.txt"
    path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "va", "vb", "mk", *FILLERS]) + "\n")
    return load_tokenizer(path)


def random_heads(rng: np.random.Generator, n: int) -> list[int]:
    """A random recursive tree over a random word order (1-based heads, 0 = root)."""
    order = rng.permutation(n)
    heads = [0] * n
    for k in range(1, n):
        heads[order[k]] = int(order[rng.integers(0, k)]) + 1
    return heads


def hops(heads: list[int]) -> np.ndarray:
    """All-pairs tree distances by breadth-first search (independent of xsyn.trees.tensors)."""
    n = len(heads)
    neighbours = [[] for _ in range(n)]
    for i, h in enumerate(heads):
        if h:
            neighbours[i].append(h - 1)
            neighbours[h - 1].append(i)
    dist = np.full((n, n), -1)
    for source in range(n):
        dist[source, source] = 0
        queue = [source]
        for u in queue:
            for v in neighbours[u]:
                if dist[source, v] < 0:
                    dist[source, v] = dist[source, u] + 1
                    queue.append(v)
    return dist


def marker_sentence(rng: np.random.Generator) -> tuple[SyntaxRecord, int, int]:
    """One sentence of the task: (record, marker position, label)."""
    while True:
        n = int(rng.integers(10, 15))
        heads = random_heads(rng, n)
        has_child = {h - 1 for h in heads if h}
        markers = [i for i in range(n) if i not in has_child and heads[i] and abs(heads[i] - 1 - i) > 1]
        if not markers:
            continue
        marker = int(rng.choice(markers))
        head = heads[marker] - 1
        dist = hops(heads)
        ancestors, node = set(), marker
        while heads[node]:
            node = heads[node] - 1
            ancestors.add(node)
        near = [k for k in (marker - 1, marker, marker + 1) if 0 <= k < n]
        sla_region = {j for j in range(n) if min(dist[k, j] for k in near) <= 1}
        distractors = [j for j in range(n) if j not in sla_region | ancestors]
        if not distractors:
            continue
        other = int(rng.choice(distractors))
        label = int(rng.integers(0, 2))
        words = [str(w) for w in rng.choice(FILLERS, n)]
        upos = [str(u) for u in rng.choice(["NOUN", "VERB", "ADJ"], n)]
        words[marker], upos[marker] = "mk", "SYM"
        words[head], words[other] = ("va", "vb") if label == 0 else ("vb", "va")
        upos[head] = upos[other] = "PROPN"
        record = SyntaxRecord.from_words(words, heads, upos, ["root" if h == 0 else "dep" for h in heads])
        return record, marker, label


def marker_batches(tokenizer, seed: int, count: int, size: int) -> list[dict[str, torch.Tensor]]:
    rng = np.random.default_rng(seed)
    aligner = WordpieceAligner(tokenizer, max_length=32)
    examples = [marker_sentence(rng) for _ in range(count)]
    batches = []
    for start in range(0, count, size):
        chunk = examples[start:start + size]
        batch = collate_trees([aligner.encode([record])[0] for record, _, _ in chunk])
        labels = torch.full_like(batch["input_ids"], -100)
        for row, (_, marker, label) in enumerate(chunk):
            labels[row, marker + 1] = label  # every word is one piece; piece 0 is [CLS]
        batch["labels"] = labels
        batches.append(batch)
    return batches


@pytest.fixture(scope="module")
def task(tokenizer):
    return marker_batches(tokenizer, seed=1, count=2048, size=BATCH), marker_batches(tokenizer, 2, 512, 128)


def held_out_accuracy(tokenizer, task, variant: str, **settings) -> float:
    train, test = task
    torch.manual_seed(0)
    model = build_model("tiny", variant, "token", tokenizer=tokenizer, num_labels=2, **SHAPE, **settings)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 30))
    model.train()
    for step in range(STEPS):
        loss = model(**train[step % len(train)]).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        warmup.step()
    model.eval()
    right = total = 0
    with torch.no_grad():
        for batch in test:
            labels = batch.pop("labels")
            predicted = model(**batch).logits.argmax(-1)
            scored = labels != -100
            right += int((predicted[scored] == labels[scored]).sum())
            total += int(scored.sum())
            batch["labels"] = labels
    return right / total


@pytest.fixture(scope="module")
def baseline(tokenizer, task) -> float:
    return held_out_accuracy(tokenizer, task, "none")


def test_without_syntax_the_task_is_at_chance(baseline):
    assert 0.4 <= baseline <= 0.6


@pytest.mark.parametrize(("variant", "settings"), [
    ("gat", {"gat_delta": 1, "structural_loss_weight": 0.0, **SMALL_GAT}),  # task loss only
    ("sla", {"sla_distance": 1}),
    ("sdoi", {}),
    ("sep", {}),
])
def test_the_variant_learns_what_only_its_tree_shows(tokenizer, task, baseline, variant, settings):
    accuracy = held_out_accuracy(tokenizer, task, variant, **settings)
    assert accuracy >= baseline + 0.25, f"{variant}: {accuracy:.3f} vs none {baseline:.3f}"


# -- the structural probes alone -------------------------------------------------------------------------


def random_sentence(rng: np.random.Generator) -> SyntaxRecord:
    n = int(rng.integers(8, 15))
    heads = random_heads(rng, n)
    words = [str(w) for w in rng.choice(FILLERS, n)]
    upos = [str(u) for u in rng.choice(["NOUN", "VERB", "ADJ", "DET", "ADP"], n)]
    return SyntaxRecord.from_words(words, heads, upos, ["root" if h == 0 else "dep" for h in heads])


def word_distance_spearman(model, records: list[SyntaxRecord], batch) -> float:
    """Mean over sentences of Spearman(predicted squared distance, tree distance) over word pairs."""
    with torch.no_grad():
        predicted = syntax_probe(model, **batch).predicted_distances
    scores = []
    for row, record in enumerate(records):
        n = len(record.words)
        pairs = np.triu_indices(n, 1)
        words = predicted[row, 1:n + 1, 1:n + 1].numpy()  # piece 0 is [CLS]; every word is one piece
        scores.append(spearmanr(words[pairs], hops(record.heads)[pairs]).statistic)
    return float(np.mean(scores))


def test_structural_probe_loss_alone_teaches_the_gat_tree_distances(tokenizer):
    aligner = WordpieceAligner(tokenizer, max_length=32)
    rng = np.random.default_rng(3)
    train = [collate_trees([aligner.encode([random_sentence(rng)])[0] for _ in range(BATCH)]) for _ in range(64)]
    held_out = [random_sentence(rng) for _ in range(256)]  # drawn after the training trees: none repeats
    held_out_batch = collate_trees([aligner.encode([r])[0] for r in held_out])
    torch.manual_seed(0)
    model = build_model("tiny", "gat", None, tokenizer=tokenizer, **SHAPE, gat_delta=1, **SMALL_GAT).eval()
    model.requires_grad_(False)
    model.gat.requires_grad_(True)  # as in GAT pre-training: BERT's embeddings are read, frozen
    untrained = word_distance_spearman(model, held_out, held_out_batch)
    optimizer = torch.optim.AdamW(model.gat.parameters(), lr=LEARNING_RATE)
    warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 100))
    model.train()
    for step in range(300):
        probe = syntax_probe(model, **train[step % len(train)])
        optimizer.zero_grad()
        (probe.distance_loss + probe.depth_loss).backward()
        optimizer.step()
        warmup.step()
    trained = word_distance_spearman(model.eval(), held_out, held_out_batch)
    assert trained >= 0.8, f"Spearman {trained:.3f} (untrained GAT: {untrained:.3f})"
    assert trained >= untrained + 0.05
