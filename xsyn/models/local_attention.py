"""Gated local/global attention: SLA (Li et al. 2021) and its word-window baseline WLA.

In every syntax layer a token i mixes two attentions over the same Q, K, V: a local one, masked
by the SLA tree mask (or the WLA window mask), and BERT's global one. The gate is per token and
shared by the heads, computed from the layer's input (the previous layer's hidden state):

    g_i = sigmoid(W_g h_i + b_g),   A_i = (g_i S_loc_i + (1 - g_i) S_glb_i) V.

Because a row's output is linear in its attention probabilities, A_i = g_i SDPA_loc_i +
(1 - g_i) SDPA_glb_i: two fused `scaled_dot_product_attention` calls, no T x T probabilities
materialised. A closed gate (g = 0) is exactly BERT's attention.
"""

from __future__ import annotations

import torch
from torch import nn


class LocalAttentionGate(nn.Module):
    """g = sigmoid(W_g h + b_g), one value per token: (B, T, H) -> (B, T, 1, 1)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.proj = nn.Linear(hidden_size, 1)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.proj(hidden_states)).unsqueeze(-1)


def mix(gate: torch.Tensor, local: torch.Tensor, global_: torch.Tensor) -> torch.Tensor:
    """g local + (1 - g) global, for outputs (B, T, H, Dh) with a (B, T, 1, 1) gate."""
    return global_ + gate * (local - global_)


def mix_weights(gate: torch.Tensor, local: torch.Tensor | None, global_: torch.Tensor | None
                ) -> torch.Tensor | None:
    """The mixed attention probabilities (B, H, T, T), when the attention function returns them."""
    if local is None or global_ is None:
        return None
    return mix(gate.transpose(1, 2), local, global_)


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
