"""BERT self-attention that a syntax variant changes, and syntax masks in the attention function's form.

`SyntaxSelfAttention` is `BertSelfAttention` with two steps a variant overrides: `bias` adjusts the
query/key/value projections (the GAT's bias), `combine` adjusts the attention output (SLA/WLA's gated
local attention). Attention runs through transformers' attention functions (`sdpa` by default, or
`eager`, which also returns the probabilities).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import BertSelfAttention, eager_attention_forward

# attend(mask) -> (output, probabilities or None): the layer's attention over its own Q, K, V under `mask`
Attend = Callable[[torch.Tensor | None], tuple[torch.Tensor, torch.Tensor | None]]


class SyntaxSelfAttention(BertSelfAttention):
    """BERT self-attention reading the batch's syntax context (`xsyn_syntax`, built by the variant)."""

    def bias(self, syntax: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return query, key, value

    def combine(self, syntax: Any, hidden_states: torch.Tensor, output: torch.Tensor,
                weights: torch.Tensor | None, attend: Attend) -> tuple[torch.Tensor, torch.Tensor | None]:
        return output, weights

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                past_key_values=None, xsyn_syntax: Any = None, **kwargs):
        # past_key_values: part of BertSelfAttention's interface; an encoder keeps no cache
        if xsyn_syntax is None:
            raise ValueError("a syntax layer ran without its syntax context; call XsynBertModel (or a head) "
                             "with the batch's tree_* fields rather than the encoder directly")
        shape = (*hidden_states.shape[:-1], -1, self.attention_head_size)
        query = self.query(hidden_states).view(shape).transpose(1, 2)
        key = self.key(hidden_states).view(shape).transpose(1, 2)
        value = self.value(hidden_states).view(shape).transpose(1, 2)
        query, key, value = self.bias(xsyn_syntax, query, key, value)
        function = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
        dropout = self.dropout.p if self.training else 0.0

        def attend(mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
            return function(self, query, key, value, mask, dropout=dropout, scaling=self.scaling, **kwargs)

        output, weights = self.combine(xsyn_syntax, hidden_states, *attend(attention_mask), attend)
        return output.reshape(*hidden_states.shape[:-1], -1).contiguous(), weights


def attention_mask_for(mask: torch.Tensor, implementation: str | None, dtype: torch.dtype) -> torch.Tensor:
    """A (B, T, T) bool mask (True = attend) in the form the attention function expects, (B, 1, T, T).

    `sdpa` takes it as is; `eager` adds it to the scores, so it becomes 0 / most-negative.
    """
    mask = mask.unsqueeze(1)
    if implementation in (None, "sdpa"):
        return mask
    if implementation == "eager":
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(
            ~mask, torch.finfo(dtype).min)
    raise ValueError(f"attn_implementation={implementation!r} cannot apply a syntax mask; "
                     "load the model with attn_implementation='sdpa' (the default) or 'eager'")
