"""Syntax records -> wordpiece trees: the dependency tree moved onto a tokenizer's pieces.

Conventions (Ahmad et al. 2021, section 2.2):
- the first piece of a word carries the word's head (the first piece of the head word);
- the later pieces of a word are children of its first piece;
- every sentence root, every `[SEP]` and every piece that maps to no word attach to `[CLS]`,
  the root of the whole input (pairs and multi-sentence contexts included).

The special tokens are placed as the tokenizer's own post-processor places them (BERT:
`[CLS] A [SEP] B [SEP]` with token types 0/1; RoBERTa and XLM-R: `<s> A </s></s> B </s>`, all type 0):
`SpecialTokens.of` reads the layout from the tokenizer, so no model family is named here.

SentencePiece tokenizers (XLM-R) mark a word's first piece with `▁` instead of marking the later
pieces with `##`. Their offsets may include the space before a word (`▁world` over " world"), a
piece may be the marker alone (`▁` before `他` when `▁他` is not in the vocabulary), and the text is
normalised (NFKC: `ﬁ` -> `fi`, full-width -> ASCII) before it is cut. Pieces are aligned on their
offsets into the original text with leading spaces dropped; a marker-only piece is an empty span at
the start of the next piece, so it is the first piece of that piece's word (where XTREME and
transformers' `word_ids` put a word's label), never a piece of no word.

Words and pieces are aligned through character spans (or gold-token indices for pre-tokenised
input), never through word order, so a parser that normalises or splits text cannot shift
anything. The words of a multiword token share one surface span: its pieces go to the word of
the group nearest the root and the other words are contracted into it; a word that received no
piece at all is contracted into its head.

When an input is longer than the model allows, kept pieces keep the distances of the full tree:
the tree arrays carry, after the sequence's own pieces, the removed ancestors of kept pieces
(at most a path per kept piece), so every shortest path between kept pieces survives. All
arrays are O(n); nothing n x n is ever stored.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tokenizers import Tokenizer

from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.vocab import (
    DEPREL_SPECIAL_ID,
    DEPREL_UNKNOWN_ID,
    UPOS_SPECIAL_ID,
    UPOS_UNKNOWN_ID,
    deprel_id,
    upos_id,
)

ROOT = -1  # parent of [CLS]
PAD = -2  # parent of a padding position
NO_SOURCE = -1

_MAX_INT16 = np.iinfo(np.int16).max


@dataclass
class SegmentPieces:
    """One segment's pieces with their tree, before special tokens and truncation."""

    ids: list[int]
    parent: list[int]  # index of the parent piece within the segment, or ROOT for [CLS]
    upos: list[int]
    deprel: list[int]
    word_index: list[int]  # the syntactic word a piece belongs to, -1 when it maps to none
    source: list[tuple[int, int]]  # char span in the segment's text, or (gold token, gold token + 1)
    unaligned: int  # pieces that map to no word
    wordless: int  # words that received no piece (contracted into their head)


@dataclass
class WordpieceTree:
    """One model input (single segment, pair, or window) with its O(n) syntax fields.

    Sequence fields have one entry per piece, `[CLS]` and `[SEP]` included. `parent` has one
    entry per tree node: the sequence's pieces first, then removed ancestors of kept pieces
    (only when the input was truncated or windowed). Specials have `word_index` -1 and
    `segment_id` -1.
    """

    input_ids: np.ndarray  # int32 (T,)
    token_type_ids: np.ndarray  # int8 (T,)
    parent: np.ndarray  # int16 (T + A,), ROOT at [CLS]
    upos: np.ndarray  # uint8 (T,)
    deprel: np.ndarray  # uint8 (T,)
    word_index: np.ndarray  # int16 (T,)
    segment_id: np.ndarray  # int8 (T,)
    source: np.ndarray  # int32 (T, 2): where each piece came from in its segment; -1 for specials
    window: tuple[int, int]  # [start, end) of the windowed segment's pieces kept in this input
    unaligned: int
    wordless: int
    truncated: int  # pieces of the full input not kept in this one

    def __len__(self) -> int:
        return len(self.input_ids)

    def syntax_nbytes(self) -> int:
        return sum(getattr(self, field.attribute).nbytes for field in SYNTAX_FIELDS)


@dataclass(frozen=True)
class SyntaxField:
    """One O(n) syntax field: its name in feature rows, batches and the model's arguments, and the
    `WordpieceTree` array it is read from."""

    name: str
    attribute: str
    padding: int  # the value of padded positions in a batch
    per_node: bool = False  # one entry per tree node (pieces, then removed ancestors), not per piece


# The syntax fields, from the wordpiece tree to the model: every feature row, batch and model call uses these names.
SYNTAX_FIELDS = (
    SyntaxField("tree_parent", "parent", PAD, per_node=True),
    SyntaxField("tree_upos", "upos", 0),
    SyntaxField("tree_deprel", "deprel", 0),
    SyntaxField("tree_word", "word_index", -1),
    SyntaxField("tree_segment", "segment_id", -1),
)


@dataclass(frozen=True)
class SpecialTokens:
    """Where a tokenizer puts its special tokens around one or more segments:
    `first + A + between + B + between + ... + last`, the first of `first` being the tree's root."""

    first: tuple[int, ...]
    between: tuple[int, ...]
    last: tuple[int, ...]
    segment_types: tuple[int, int]  # token type of the first segment, and of every later one (and its specials)

    @classmethod
    def of(cls, backend) -> SpecialTokens:
        """The layout of a `tokenizers.Tokenizer`'s post-processor, read off a probe pair."""
        pair = backend.encode("a", "b")
        seq = pair.sequence_ids
        a = [p for p, s in enumerate(seq) if s == 0]
        b = [p for p, s in enumerate(seq) if s == 1]
        ids = pair.ids
        layout = cls(first=tuple(ids[:a[0]]), between=tuple(ids[a[-1] + 1:b[0]]), last=tuple(ids[b[-1] + 1:]),
                     segment_types=(pair.type_ids[a[0]], pair.type_ids[b[0]]))
        single = backend.encode("a")
        a_ids = [ids[p] for p in a]
        expected = ([*layout.first, *a_ids, *layout.between, *(ids[p] for p in b), *layout.last],
                    [*layout.first, *a_ids, *layout.last])
        if not layout.first or (ids, single.ids) != expected or pair.type_ids != layout.types([len(a), len(b)]):
            raise ValueError("the tokenizer's special tokens do not follow `[CLS] A [SEP] B [SEP]` (or "
                             "`<s> A </s></s> B </s>`); xsyn needs a BERT- or RoBERTa-family tokenizer")
        return layout

    def count(self, segments: int) -> int:
        """Special tokens in an input of `segments` segments."""
        return len(self.first) + len(self.between) * (segments - 1) + len(self.last)

    def types(self, lengths: Sequence[int]) -> list[int]:
        """Token types of an input whose segments have `lengths` pieces: a segment's pieces and the
        specials after it take its type (BERT: 0 for the first segment, 1 after)."""
        types = [self.segment_types[0]] * len(self.first)
        for k, n in enumerate(lengths):
            after = self.between if k < len(lengths) - 1 else self.last
            types += [self.segment_types[min(k, 1)]] * (n + len(after))
        return types


class WordpieceAligner:
    """Tokenises segments with a Hugging Face fast tokenizer and maps their trees onto pieces.

    >>> aligner = WordpieceAligner(tokenizer, max_length=128)
    >>> tree = aligner.encode([premise_record, hypothesis_record])          # a pair
    >>> windows = aligner.encode([question, context], stride=128)           # QA sliding windows
    """

    def __init__(self, tokenizer, max_length: int | None = None):
        if not getattr(tokenizer, "is_fast", False):
            raise TypeError("xsyn needs a fast (Rust-backed) tokenizer for character offsets; "
                            f"got {type(tokenizer).__name__}")
        self.tokenizer = tokenizer
        self.max_length = max_length or min(tokenizer.model_max_length, 512)
        # A private copy of the Rust tokenizer without the padding and truncation a tokenizer.json
        # may carry (MiniLM's pads every input to 128): xsyn pads batches and windows inputs itself.

        serialised = tokenizer.backend_tokenizer.to_str()
        self.backend = Tokenizer.from_str(serialised)
        self.backend.no_padding()
        self.backend.no_truncation()
        self.specials = SpecialTokens.of(self.backend)
        self.word_start_marker = _word_start_marker(json.loads(serialised).get("pre_tokenizer"))

    # -- segments ---------------------------------------------------------------------------------

    def segment_pieces(self, records: Sequence[SyntaxRecord]) -> list[SegmentPieces]:
        """Tokenise many segments in one batched call and align each to its tree."""
        out: list[SegmentPieces | None] = [None] * len(records)
        raw = [i for i, r in enumerate(records) if r.token_index is None]
        pre = [i for i, r in enumerate(records) if r.token_index is not None]
        backend = self.backend
        if raw:
            texts = [records[i].text if records[i].text is not None else " ".join(records[i].words)
                     for i in raw]
            for i, text, enc in zip(raw, texts, backend.encode_batch(texts, add_special_tokens=False)):
                out[i] = align(records[i], enc.ids, text_units(text, enc.tokens, enc.offsets, self.word_start_marker))
        if pre:
            tokens = [_gold_tokens(records[i]) for i in pre]
            encs = backend.encode_batch(tokens, is_pretokenized=True, add_special_tokens=False)
            for i, enc in zip(pre, encs):
                units = [(w, w + 1) if w is not None else None for w in enc.word_ids]
                out[i] = align(records[i], enc.ids, units)
        return out  # type: ignore[return-value]

    # -- inputs -----------------------------------------------------------------------------------

    def encode(self, records: Sequence[SyntaxRecord], stride: int | None = None,
               window_segment: int = -1) -> list[WordpieceTree]:
        """Encode one input (1 or more segments). Returns one tree, or several windows.

        Without `stride`, an over-long input is truncated longest-first (one tree). With `stride`,
        the segment `window_segment` is cut into overlapping windows that share `stride` pieces,
        so every piece of it appears in at least one window (QA contexts, long NER sentences).
        """
        return self.assemble(self.segment_pieces(records), stride, window_segment)

    def assemble(self, segments: Sequence[SegmentPieces], stride: int | None = None,
                 window_segment: int = -1, max_other_length: int | None = None) -> list[WordpieceTree]:
        """`encode` from segment pieces; `max_other_length` first cuts every segment but
        `window_segment` to that many pieces (a QA question to `max_query_length`)."""
        budget = self.max_length - self.specials.count(len(segments))
        w = window_segment % len(segments)
        lengths = [len(s.ids) if max_other_length is None or k == w else min(len(s.ids), max_other_length)
                   for k, s in enumerate(segments)]
        if budget < len(segments):
            raise ValueError(f"a max length of {self.max_length} pieces leaves no room for {len(segments)} segments "
                             "and their special tokens; raise --max-length")
        if stride is None or sum(lengths) <= budget:
            keep = _longest_first(lengths, budget)
            return [self._build(segments, [(0, k) for k in keep], window_segment)]
        others = sum(lengths) - lengths[w]
        room = budget - others
        if room < 1:
            keep = _longest_first(lengths, budget)
            return [self._build(segments, [(0, k) for k in keep], window_segment)]
        if stride >= room:
            raise ValueError(f"stride {stride} must be smaller than the {room} pieces a window can hold")
        trees, start = [], 0
        while True:
            end = min(start + room, lengths[w])
            ranges = [(0, n) for n in lengths]
            ranges[w] = (start, end)
            trees.append(self._build(segments, ranges, w))
            if end >= lengths[w]:
                return trees
            start = end - stride

    def _build(self, segments: Sequence[SegmentPieces], ranges: list[tuple[int, int]],
               window_segment: int) -> WordpieceTree:
        specials = self.specials
        n = sum(hi - lo for lo, hi in ranges) + specials.count(len(segments))  # sequence length
        first = len(specials.first)
        ids = list(specials.first)
        upos, deprel = [UPOS_SPECIAL_ID] * first, [DEPREL_SPECIAL_ID] * first
        word, seg, source = [-1] * first, [-1] * first, [(NO_SOURCE, NO_SOURCE)] * first
        parent = [ROOT] + [0] * (first - 1)
        extra: list[int] = []  # tree nodes after the sequence: removed ancestors of kept pieces
        unaligned = wordless = truncated = 0
        for s, (piece, (lo, hi)) in enumerate(zip(segments, ranges)):
            offset = len(ids)
            node_of = {p: offset + p - lo for p in range(lo, hi)}  # segment piece -> tree node
            removed: list[int] = []
            for p in range(lo, hi):
                q = piece.parent[p]
                # Climb through removed ancestors, at most `max_length` of them per input: a real parse is
                # shallow, but a chain over a 20,000-word row would put every later word into every window
                # (a tree of 20,000 nodes, squared by the tree tensors); past the bound an ancestor hangs
                # from the root.
                while q != ROOT and q not in node_of and len(extra) + len(removed) < self.max_length:
                    node_of[q] = n + len(extra) + len(removed)
                    removed.append(q)
                    q = piece.parent[q]
                parent.append(node_of.get(piece.parent[p], 0))
            extra += [node_of.get(piece.parent[q], 0) for q in removed]
            ids += piece.ids[lo:hi]
            upos += piece.upos[lo:hi]
            deprel += piece.deprel[lo:hi]
            word += _within_int16(piece.word_index[lo:hi])
            seg += [s] * (hi - lo)
            source += piece.source[lo:hi]
            unaligned += sum(1 for w in piece.word_index[lo:hi] if w < 0)
            wordless += piece.wordless
            truncated += len(piece.ids) - (hi - lo)
            after = specials.between if s < len(segments) - 1 else specials.last
            ids += after
            upos += [UPOS_SPECIAL_ID] * len(after)
            deprel += [DEPREL_SPECIAL_ID] * len(after)
            word += [-1] * len(after)
            seg += [-1] * len(after)
            source += [(NO_SOURCE, NO_SOURCE)] * len(after)
            parent += [0] * len(after)
        tree = parent + extra
        if len(tree) > _MAX_INT16:
            raise ValueError(f"an input of {len(tree)} tree nodes exceeds int16; lower --max-length")
        wseg = window_segment % len(segments)
        return WordpieceTree(
            input_ids=np.asarray(ids, dtype=np.int32),
            token_type_ids=np.asarray(specials.types([hi - lo for lo, hi in ranges]), dtype=np.int8),
            parent=np.asarray(tree, dtype=np.int16),
            upos=np.asarray(upos, dtype=np.uint8),
            deprel=np.asarray(deprel, dtype=np.uint8),
            word_index=np.asarray(word, dtype=np.int16),
            segment_id=np.asarray(seg, dtype=np.int8),
            source=np.asarray(source, dtype=np.int32).reshape(-1, 2),
            window=ranges[wseg],
            unaligned=unaligned, wordless=wordless, truncated=truncated,
        )


def _within_int16(word: list[int]) -> list[int]:
    """A segment's kept word indices; past int16 (a window deep into a row of over 32,767 words), counted
    from its first kept word instead. The masks only compare a piece's word with its neighbour's, so this
    changes nothing the model sees, and the indices fit: an input holds at most `max_length` pieces."""
    if max(word, default=-1) <= _MAX_INT16:
        return word
    first = min(w for w in word if w >= 0)
    return [w - first if w >= 0 else w for w in word]


def _longest_first(lengths: list[int], budget: int) -> list[int]:
    """Pieces kept per segment when the longest segment loses its last piece until all fit."""
    keep = list(lengths)
    while sum(keep) > budget:
        longest = max(range(len(keep)), key=lambda i: keep[i])
        keep[longest] -= 1
    return keep


def _word_start_marker(pre_tokenizer: dict | None) -> str | None:
    """The character a SentencePiece pre-tokenizer (Metaspace) puts at word starts, `▁` in XLM-R;
    None for tokenizers without one (BERT's WordPiece marks continuations instead)."""
    if not isinstance(pre_tokenizer, dict):
        return None
    if pre_tokenizer.get("type") == "Metaspace":
        return pre_tokenizer.get("replacement")
    return next(filter(None, map(_word_start_marker, pre_tokenizer.get("pretokenizers") or [])), None)


def text_units(text: str, tokens: Sequence[str], offsets: Sequence[tuple[int, int]],
               marker: str | None = None) -> list[tuple[int, int] | None]:
    """Where each piece of raw `text` came from: its offsets without leading spaces (SentencePiece's
    `▁world` may cover " world"); a piece that is only the word-start `marker`, or only spaces, is
    the empty span at the start of the next piece with text (None when no piece follows)."""
    units: list[tuple[int, int] | None] = []
    for token, (start, end) in zip(tokens, offsets):
        while start < end and text[start].isspace():
            start += 1
        units.append((start, end) if start < end and token != marker else None)
    following = None
    for p in range(len(units) - 1, -1, -1):
        if units[p] is None:
            units[p] = None if following is None else (following, following)
        else:
            following = units[p][0]
    return units


def _gold_tokens(record: SyntaxRecord) -> list[str]:
    """The gold tokens behind a pre-tokenised record: its text split at spaces, or else rebuilt from
    its words (the words of one token share its index)."""
    units = record.units() or []
    n = max((end for _, end in units), default=0)
    if record.text is not None and len(record.text.split(" ")) == n:
        return record.text.split(" ")
    if any(end - start > 1 for start, end in units):
        raise ValueError(f"the record of {' '.join(record.words)[:60]!r} has words over several gold tokens "
                         "but no text to recover the tokens from; keep the tokens joined by spaces in `text`")
    tokens: dict[int, str] = {}
    for w, (t, _) in zip(record.words, units):
        tokens.setdefault(t, w)
    return [tokens.get(t, "") for t in range(n)]


def align(record: SyntaxRecord, ids: Sequence[int], units: Sequence[tuple[int, int]]) -> SegmentPieces:
    """Map one segment's tree onto its pieces.

    `units[p]` is where piece p came from: a character span for raw text, or
    `(token, token + 1)` for gold tokens, or None for a piece of no token.
    """
    n = len(record.words)
    spans = record.units()
    if spans is None:
        raise ValueError("a record needs character spans or gold-token indices to be aligned")
    rep = _group_leads(spans, _depths(record.heads))
    word_of_piece, first_piece = _words_of_pieces(units, spans, rep, n)
    parent, upos, deprel = _piece_tree(record, word_of_piece, first_piece, rep)
    wordless = sum(1 for i in range(n) if rep[i] == i and first_piece[i] < 0)
    source = [(u[0], u[1]) if u is not None else (NO_SOURCE, NO_SOURCE) for u in units]
    return SegmentPieces(list(ids), parent, upos, deprel, word_of_piece, source,
                         unaligned=word_of_piece.count(-1), wordless=wordless)


def _group_leads(spans: Sequence[tuple[int, int]], depth: Sequence[int]) -> list[int]:
    """Each word's group lead: words sharing a surface span (a multiword token) form a group led by the word
    nearest the root; any other word leads itself."""
    n = len(spans)
    rep = list(range(n))
    w = 0
    while w < n:
        end = w
        while end + 1 < n and spans[end + 1] == spans[w]:
            end += 1
        if end > w:
            lead = min(range(w, end + 1), key=lambda i: (depth[i], i))
            for i in range(w, end + 1):
                rep[i] = lead
        w = end + 1
    return rep


def _words_of_pieces(units: Sequence[tuple[int, int] | None], spans: Sequence[tuple[int, int]], rep: list[int],
                     n: int) -> tuple[list[int], list[int]]:
    """The word (group lead) each piece falls in, -1 for none, and each word's first piece (-1: none)."""
    starts = [s for s, _ in spans]
    word_of_piece: list[int] = []
    first_piece = [-1] * n
    for p, unit in enumerate(units):
        start = unit[0] if unit is not None else None
        g = bisect_right(starts, start) - 1 if start is not None else -1
        if g >= 0 and start < spans[g][1]:
            g = rep[g]
            if first_piece[g] < 0:
                first_piece[g] = p
        else:
            g = -1
        word_of_piece.append(g)
    return word_of_piece, first_piece


def _piece_tree(record: SyntaxRecord, word_of_piece: list[int], first_piece: list[int], rep: list[int]
                ) -> tuple[list[int], list[int], list[int]]:
    """Each piece's parent piece, UPOS id and relation id: a word's first piece hangs from its head's first
    piece, its other pieces from its first; pieces of no word hang from the root."""
    heads = record.heads

    def node(word: int) -> int:
        """Piece standing for `word` (0-based): its first piece, climbing past piece-less words."""
        while word >= 0:
            word = rep[word]
            if first_piece[word] >= 0:
                return first_piece[word]
            word = heads[word] - 1
        return ROOT

    parent, upos, deprel = [], [], []
    for p, g in enumerate(word_of_piece):
        if g < 0:
            parent.append(ROOT)
            upos.append(UPOS_UNKNOWN_ID)
            deprel.append(DEPREL_UNKNOWN_ID)
            continue
        parent.append(node(heads[g] - 1) if first_piece[g] == p else first_piece[g])
        upos.append(upos_id(record.upos[g]))
        deprel.append(deprel_id(record.deprels[g]))
    return parent, upos, deprel


def _depths(heads: Sequence[int]) -> list[int]:
    """Depth of every word (a root has depth 0); heads are 1-based, 0 = root."""
    depth = [-1] * len(heads)
    for start in range(len(heads)):
        path, w = [], start
        while w >= 0 and depth[w] < 0:
            path.append(w)
            w = heads[w] - 1
        d = depth[w] if w >= 0 else -1
        for v in reversed(path):
            d += 1
            depth[v] = d
    return depth
