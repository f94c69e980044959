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

Where the authors' released code builds inputs otherwise (the parent of `[SEP]` in a pair, each
parser word tokenised on its own, which segment a tie cuts, ...), `InputConventions`
(`xsyn.trees.conventions`) says how; its defaults are the conventions above.
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
    PUNCT_UPOS_ID,
    UPOS_IDS,
    UPOS_SPECIAL_ID,
    UPOS_UNKNOWN_ID,
    deprel_id,
    upos_id,
)
from xsyn.trees.conventions import ASCII_PUNCTUATION, DEFAULT_CONVENTIONS, InputConventions

ROOT = -1  # parent of [CLS]
PAD = -2  # parent of a padding position
NO_SOURCE = -1
_SYM_UPOS_ID = UPOS_IDS["SYM"]

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

    def __init__(self, tokenizer, max_length: int | None = None, conventions: InputConventions | None = None):
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
        self.conventions = conventions or DEFAULT_CONVENTIONS

    # -- segments ---------------------------------------------------------------------------------

    def segment_pieces(self, records: Sequence[SyntaxRecord]) -> list[SegmentPieces]:
        """Tokenise many segments in one batched call and align each to its tree."""
        if self.conventions.tokenize_by == "words":
            return self._word_pieces(records)
        out: list[SegmentPieces | None] = [None] * len(records)
        raw = [i for i, r in enumerate(records) if r.token_index is None]
        pre = [i for i, r in enumerate(records) if r.token_index is not None]
        backend = self.backend
        if raw:
            texts = [records[i].text if records[i].text is not None else " ".join(records[i].words)
                     for i in raw]
            for i, text, enc in zip(raw, texts, backend.encode_batch(texts, add_special_tokens=False)):
                out[i] = self._marked(align(records[i], enc.ids, text_units(text, enc.tokens, enc.offsets,
                                                                            self.word_start_marker)), enc.tokens)
        if pre:
            tokens = [_gold_tokens(records[i]) for i in pre]
            encs = backend.encode_batch(tokens, is_pretokenized=True, add_special_tokens=False)
            for i, enc in zip(pre, encs):
                units = [(w, w + 1) if w is not None else None for w in enc.word_ids]
                out[i] = self._marked(align(records[i], enc.ids, units), enc.tokens)
        return out  # type: ignore[return-value]

    def _word_pieces(self, records: Sequence[SyntaxRecord]) -> list[SegmentPieces]:
        """`tokenize_by="words"`: each word of each parse cut into pieces on its own, as the released codes call
        `tokenizer.tokenize(word)` word by word (a word that gives no piece is `[UNK]`, as Ahmad et al.'s
        `process_sentence` makes it). A piece's source is where its word lies: its characters inside the word
        where the word is the text's own characters (or the gold tokens' joined), else the word's whole span."""
        encs = self.backend.encode_batch([list(r.words) for r in records], is_pretokenized=True,
                                         add_special_tokens=False)
        unknown = (self.tokenizer.unk_token_id, self.tokenizer.unk_token)
        out = []
        for record, enc in zip(records, encs):
            ids, tokens, words, offsets = _each_word_pieced(record, enc, unknown)
            each_word = [(w, w + 1) for w in range(len(record.words))]
            pieces = align(record, ids, [each_word[w] for w in words], spans=each_word)
            pieces.source = _word_piece_sources(record, words, offsets)
            out.append(self._marked(pieces, tokens))
        return out

    def _marked(self, pieces: SegmentPieces, tokens: Sequence[str]) -> SegmentPieces:
        """`punctuation="ascii"`: PUNCT marks the pieces whose lower-cased text is in Li et al.'s ASCII string, and
        only those (a piece of another PUNCT word is SYM)."""
        if self.conventions.punctuation == "ascii":
            pieces.upos = [PUNCT_UPOS_ID if token and token.lower() in ASCII_PUNCTUATION
                           else _SYM_UPOS_ID if upos == PUNCT_UPOS_ID else upos
                           for token, upos in zip(tokens, pieces.upos)]
        return pieces

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
                 window_segment: int = -1, max_other_length: int | None = None,
                 segment_ids: Sequence[int] | None = None) -> list[WordpieceTree]:
        """`encode` from segment pieces; `max_other_length` first cuts every segment but
        `window_segment` to that many pieces (a QA question to `max_query_length`). `segment_ids` are the
        segments' `segment_id`s in the trees (default: their positions; a QA input with its context first keeps
        the example's order, so that the context is segment 1 wherever it stands)."""
        budget = self.max_length - self.specials.count(len(segments))
        w = window_segment % len(segments)
        lengths = [len(s.ids) if max_other_length is None or k == w else min(len(s.ids), max_other_length)
                   for k, s in enumerate(segments)]
        if budget < len(segments):
            raise ValueError(f"a max length of {self.max_length} pieces leaves no room for {len(segments)} segments "
                             "and their special tokens; raise --max-length")
        ids = list(range(len(segments))) if segment_ids is None else list(segment_ids)
        if stride is None and sum(lengths) > budget and self.conventions.truncation == "end":
            return [self._build(segments, self._cut_at_end(lengths), window_segment, ids, end=self.max_length)]
        if stride is None or sum(lengths) <= budget:
            keep = _longest_first(lengths, budget, self.conventions.truncation_tie)
            return [self._build(segments, [(0, k) for k in keep], window_segment, ids)]
        others = sum(lengths) - lengths[w]
        room = budget - others
        if room < 1:
            keep = _longest_first(lengths, budget, self.conventions.truncation_tie)
            return [self._build(segments, [(0, k) for k in keep], window_segment, ids)]
        if stride >= room:
            raise ValueError(f"stride {stride} must be smaller than the {room} pieces a window can hold")
        trees, start = [], 0
        while True:
            end = min(start + room, lengths[w])
            ranges = [(0, n) for n in lengths]
            ranges[w] = (start, end)
            trees.append(self._build(segments, ranges, w, ids))
            if end >= lengths[w]:
                return trees
            start = end - stride

    def _cut_at_end(self, lengths: Sequence[int]) -> list[tuple[int, int]]:
        """`truncation="end"`: the pieces each segment keeps when the whole input, special tokens included, is cut
        after `max_length` tokens (Li et al.'s `run.py: make_features` slices `input_ids[:max_length]`)."""
        position, ranges = len(self.specials.first), []
        for k, n in enumerate(lengths):
            kept = max(0, min(n, self.max_length - position))
            ranges.append((0, kept))
            position += kept + len(self.specials.between if k < len(lengths) - 1 else self.specials.last)
        return ranges

    def _build(self, segments: Sequence[SegmentPieces], ranges: list[tuple[int, int]],
               window_segment: int, segment_ids: Sequence[int], end: int | None = None) -> WordpieceTree:
        """One input of the segments' `ranges` of pieces; `end`: the sequence cut after that many tokens, the
        special tokens after it dropped (`truncation="end"`)."""
        specials, conventions = self.specials, self.conventions
        n = sum(hi - lo for lo, hi in ranges) + specials.count(len(segments))  # sequence length
        n = n if end is None else min(n, end)
        # Ahmad et al.'s pairs: each [SEP] hangs from the last piece of the segment before it (a single segment's
        # from [CLS], as theirs)
        anchored = conventions.sep_attachment == "segment_end" and len(segments) > 1
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
            # removed pieces become nodes n + len(extra) + ..., at most max_length of them per input
            carried = (piece.parent, node_of, removed, n + len(extra), self.max_length - len(extra))
            for p in range(lo, hi):
                _carry(piece.parent[p], *carried)
                parent.append(node_of.get(piece.parent[p], 0))
            after = list(specials.between if s < len(segments) - 1 else specials.last)
            after = after[:max(0, n - (len(ids) + hi - lo))]
            anchor = 0
            if anchored and after and piece.ids:
                _carry(len(piece.ids) - 1, *carried)  # its last piece, taken before truncation
                anchor = node_of.get(len(piece.ids) - 1, 0)
            if conventions.carry_cut_dependents and (lo, hi) != (0, len(piece.ids)):
                _carry_cut_dependents(lo, hi, *carried)
            extra += [node_of.get(piece.parent[q], 0) for q in removed]
            ids += piece.ids[lo:hi]
            upos += piece.upos[lo:hi]
            deprel += piece.deprel[lo:hi]
            word += _within_int16(piece.word_index[lo:hi])
            seg += [segment_ids[s]] * (hi - lo)
            source += piece.source[lo:hi]
            unaligned += sum(1 for w in piece.word_index[lo:hi] if w < 0)
            wordless += piece.wordless
            truncated += len(piece.ids) - (hi - lo)
            ids += after
            upos += [UPOS_SPECIAL_ID] * len(after)
            deprel += [DEPREL_SPECIAL_ID] * len(after)
            word += [-1] * len(after)
            seg += [-1] * len(after)
            source += [(NO_SOURCE, NO_SOURCE)] * len(after)
            parent += [anchor] * len(after)
        tree = parent + extra
        if len(tree) > _MAX_INT16:
            raise ValueError(f"an input of {len(tree)} tree nodes exceeds int16; lower --max-length")
        wseg = window_segment % len(segments)
        return WordpieceTree(
            input_ids=np.asarray(ids, dtype=np.int32),
            token_type_ids=np.asarray(specials.types([hi - lo for lo, hi in ranges])[:n], dtype=np.int8),
            parent=np.asarray(tree, dtype=np.int16),
            upos=np.asarray(upos, dtype=np.uint8),
            deprel=np.asarray(deprel, dtype=np.uint8),
            word_index=np.asarray(word, dtype=np.int16),
            segment_id=np.asarray(seg, dtype=np.int8),
            source=np.asarray(source, dtype=np.int32).reshape(-1, 2),
            window=ranges[wseg],
            unaligned=unaligned, wordless=wordless, truncated=truncated,
        )


def _carry(q: int, parents: Sequence[int], node_of: dict[int, int], removed: list[int], first_node: int,
           bound: int) -> None:
    """Give the removed piece q and its removed ancestors tree nodes after the sequence (numbered from
    `first_node` as `removed` grows), at most `bound` of them: a real parse is shallow, but a chain over a
    20,000-word row would put every later word into every window (a tree of 20,000 nodes, squared by the tree
    tensors); past the bound an ancestor hangs from the root."""
    while q != ROOT and q not in node_of and len(removed) < bound:
        node_of[q] = first_node + len(removed)
        removed.append(q)
        q = parents[q]


def _carry_cut_dependents(lo: int, hi: int, parents: Sequence[int], node_of: dict[int, int], removed: list[int],
                          first_node: int, bound: int) -> None:
    """`carry_cut_dependents`: for each kept piece (lo..hi) that heads pieces in the whole segment but none among
    the input's nodes, one of those pieces as a tree node too (a leaf: no path between other nodes passes it).
    Nodes are numbered from `first_node`, as `removed` grows; at most `bound` of them."""
    children: dict[int, list[int]] = {}
    for q, head in enumerate(parents):
        children.setdefault(head, []).append(q)
    for p in range(lo, hi):
        below = children.get(p, ())
        if below and len(removed) < bound and not any(c in node_of for c in below):
            node_of[below[0]] = first_node + len(removed)
            removed.append(below[0])


def _within_int16(word: list[int]) -> list[int]:
    """A segment's kept word indices; past int16 (a window deep into a row of over 32,767 words), counted
    from its first kept word instead. The masks only compare a piece's word with its neighbour's, so this
    changes nothing the model sees, and the indices fit: an input holds at most `max_length` pieces."""
    if max(word, default=-1) <= _MAX_INT16:
        return word
    first = min(w for w in word if w >= 0)
    return [w - first if w >= 0 else w for w in word]


def _longest_first(lengths: list[int], budget: int, tie: str = "first") -> list[int]:
    """Pieces kept per segment when the longest segment loses its last piece until all fit; of equally long
    segments the `tie` one ("first", or "last" as Ahmad et al.'s `utils_classify.py` cuts B when A is not longer)."""
    keep = list(lengths)
    order = range(len(keep)) if tie == "first" else range(len(keep) - 1, -1, -1)
    while sum(keep) > budget:
        longest = max(order, key=lambda i: keep[i])
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


def align(record: SyntaxRecord, ids: Sequence[int], units: Sequence[tuple[int, int]],
          spans: Sequence[tuple[int, int]] | None = None) -> SegmentPieces:
    """Map one segment's tree onto its pieces.

    `units[p]` is where piece p came from: a character span for raw text, or
    `(token, token + 1)` for gold tokens, or None for a piece of no token; `spans` where each word lies in
    the same terms (default: the record's own, `SyntaxRecord.units`).
    """
    n = len(record.words)
    spans = record.units() if spans is None else spans
    if spans is None:
        raise ValueError("a record needs character spans or gold-token indices to be aligned")
    rep = _group_leads(spans, _depths(record.heads))
    word_of_piece, first_piece = _words_of_pieces(units, spans, rep, n)
    parent, upos, deprel = _piece_tree(record, word_of_piece, first_piece, rep)
    wordless = sum(1 for i in range(n) if rep[i] == i and first_piece[i] < 0)
    source = [(u[0], u[1]) if u is not None else (NO_SOURCE, NO_SOURCE) for u in units]
    return SegmentPieces(list(ids), parent, upos, deprel, word_of_piece, source,
                         unaligned=word_of_piece.count(-1), wordless=wordless)


def _each_word_pieced(record: SyntaxRecord, enc, unknown: tuple[int, str]
                      ) -> tuple[list[int], list[str], list[int], list[tuple[int, int]]]:
    """The pieces of a pre-tokenised encoding of `record.words`, in order: ids, texts, each piece's word and its
    offsets inside the word; a word that gave no piece gets one `unknown` (id, text) over the whole word."""
    by_word: list[list[int]] = [[] for _ in record.words]
    for p, w in enumerate(enc.word_ids):
        if w is not None:
            by_word[w].append(p)
    ids, tokens, words, offsets = [], [], [], []
    for w, found in enumerate(by_word):
        if not found:
            ids.append(unknown[0])
            tokens.append(unknown[1])
            words.append(w)
            offsets.append((0, len(record.words[w])))
            continue
        for p in found:
            ids.append(enc.ids[p])
            tokens.append(enc.tokens[p])
            words.append(w)
            offsets.append(enc.offsets[p])
    return ids, tokens, words, offsets


def _word_piece_sources(record: SyntaxRecord, words: Sequence[int], offsets: Sequence[tuple[int, int]]
                        ) -> list[tuple[int, int]]:
    """Where each piece of a word cut on its own came from, in the record's terms (characters, or gold tokens)."""
    spans = record.units()
    if spans is None:
        raise ValueError("a record needs character spans or gold-token indices to be aligned")
    text = record.text
    gold = _gold_tokens(record) if record.token_index is not None else None
    sources = []
    for w, (a, b) in zip(words, offsets):
        start, end = spans[w]
        word = record.words[w]
        if gold is None and text is not None and text[start:end] == word:
            sources.append((start + a, start + max(b, a)))  # the piece's own characters
        elif gold is not None and end - start > 1 and "".join(gold[start:end]) == word:
            bounds = np.cumsum([0, *(len(t) for t in gold[start:end - 1])])  # the word's characters per gold token
            token = start + int(np.searchsorted(bounds, a, side="right")) - 1
            sources.append((token, token + 1))
        else:  # the word is not the text's own characters (an expanded multiword token, a normalised form)
            sources.append((start, end))
    return sources


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
