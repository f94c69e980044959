"""Padding O(n) wordpiece trees into a batch of tensors (still O(n) per example).

A batch holds the model inputs (`input_ids`, `attention_mask`, `token_type_ids`) and the syntax
fields, named as in `xsyn.trees.wordpiece.SYNTAX_FIELDS` (the same names in feature rows and in
the model's arguments):

| key            | shape      | padding | meaning                                                  |
|----------------|------------|---------|----------------------------------------------------------|
| `tree_parent`  | (B, T + A) | PAD -2  | parent node; ROOT -1 at [CLS]; nodes >= T are removed    |
|                |            |         | ancestors of kept pieces (truncated or windowed inputs)  |
| `tree_upos`    | (B, T)     | 0       | UPOS id (`xsyn.syntax.vocab`)                            |
| `tree_deprel`  | (B, T)     | 0       | base relation id                                         |
| `tree_word`    | (B, T)     | -1      | the piece's word within its segment, -1 for specials     |
| `tree_segment` | (B, T)     | -1      | the piece's segment (0, 1, ...), -1 for specials         |

Every n x n structure is derived from these on the device (`xsyn.trees.tensors.TreeTensors`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np
import torch

from xsyn.trees.padding import PaddedLength
from xsyn.trees.wordpiece import SYNTAX_FIELDS, WordpieceTree


def tree_features(tree: WordpieceTree) -> dict[str, np.ndarray]:
    """The arrays of one input, as stored in a dataset (syntax fields keep their small dtypes)."""
    return {"input_ids": tree.input_ids, "token_type_ids": tree.token_type_ids,
            **{field.name: getattr(tree, field.attribute) for field in SYNTAX_FIELDS}}


def collate_trees(examples: Sequence[Mapping | WordpieceTree], pad_token_id: int = 0,
                  tree_fields: Collection[str] | None = None, pad_to_multiple_of: int | None = None,
                  pad_to: PaddedLength | None = None) -> dict[str, torch.Tensor]:
    """Pad examples (feature rows or `WordpieceTree`s) into a batch of long tensors, T pieces long: the
    longest input, rounded up to a multiple of `pad_to_multiple_of` where given, or to the length `pad_to`
    gives it (`xsyn.trees.padding`: fewer distinct shapes, so fewer plans and recompiles). The syntax fields
    are those named in `tree_fields` (what the model's variant reads: `XsynBertPreTrainedModel.batch_tree_fields`),
    all of them where it is None.

    Extra tree nodes of an example of length T_b move from T_b + k to T + k, after the padded
    sequence, so `tree_parent[:, :T]` lines up with `input_ids`.
    """
    feats = [tree_features(e) if isinstance(e, WordpieceTree) else e for e in examples]
    b = len(feats)
    lengths = np.fromiter((len(f["input_ids"]) for f in feats), dtype=np.int64, count=b)
    t = (pad_to or PaddedLength(pad_to_multiple_of or 1))(int(lengths.max()))
    out = {
        "input_ids": np.full((b, t), pad_token_id, dtype=np.int64),
        "attention_mask": np.zeros((b, t), dtype=np.int64),
        "token_type_ids": np.zeros((b, t), dtype=np.int64),
    }
    for i, (f, n) in enumerate(zip(feats, lengths)):
        out["input_ids"][i, :n] = f["input_ids"]
        out["attention_mask"][i, :n] = 1
        out["token_type_ids"][i, :n] = f["token_type_ids"]
    for field in SYNTAX_FIELDS:
        if tree_fields is None or field.name in tree_fields:
            out[field.name] = _pad_nodes(feats, lengths, t, field) if field.per_node else \
                _pad_pieces(feats, lengths, t, field)
    return {k: torch.from_numpy(v) for k, v in out.items()}


def _pad_pieces(feats: Sequence[Mapping], lengths: np.ndarray, t: int, field) -> np.ndarray:
    out = np.full((len(feats), t), field.padding, dtype=np.int64)
    for i, (f, n) in enumerate(zip(feats, lengths)):
        out[i, :n] = f[field.name]
    return out


def _pad_nodes(feats: Sequence[Mapping], lengths: np.ndarray, t: int, field) -> np.ndarray:
    """A per-node field: the sequence's pieces, then the extra nodes, shifted past the padded sequence."""
    extra = max(len(f[field.name]) - n for f, n in zip(feats, lengths))
    out = np.full((len(feats), t + extra), field.padding, dtype=np.int64)
    for i, (f, n) in enumerate(zip(feats, lengths)):
        p = np.asarray(f[field.name], dtype=np.int64)
        if len(p) > n:  # node ids of extra nodes move past the padded sequence
            p = np.where(p >= n, p + (t - n), p)
        out[i, :n] = p[:n]
        out[i, t:t + len(p) - n] = p[n:]
    return out


def length_sorted_windows(order: Sequence[int], lengths: Sequence[int], window: int) -> list[int]:
    """`order` with each run of `window` items stably sorted by length, longest first (so memory peaks
    at once): batches cut from it hold rows of similar length and pad little, while the order stays
    random from window to window."""
    return [i for start in range(0, len(order), window)
            for i in sorted(order[start:start + window], key=lambda i: -lengths[i])]
