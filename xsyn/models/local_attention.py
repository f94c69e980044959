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

from typing import TYPE_CHECKING

import torch
from torch import nn

from xsyn.models.attention import Attend, SyntaxSelfAttention

if TYPE_CHECKING:
    from xsyn.models.configuration import XsynBertConfig


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



class LocalSelfAttention(SyntaxSelfAttention):
    """A syntax layer of SLA or WLA: BERT's attention mixed, per token, with attention under the local mask
    (the batch's syntax context, in the attention function's form)."""

    def __init__(self, config: XsynBertConfig, layer_idx: int):
        super().__init__(config, layer_idx=layer_idx)
        self.gate = LocalAttentionGate(config.hidden_size)

    def combine(self, syntax: torch.Tensor, hidden_states: torch.Tensor, output: torch.Tensor,
                weights: torch.Tensor | None, attend: Attend) -> tuple[torch.Tensor, torch.Tensor | None]:
        local, local_weights = attend(syntax)
        gate = self.gate(hidden_states)
        return mix(gate, local, output), mix_weights(gate, local_weights, weights)


def install_local_attention(model) -> None:
    """Give each syntax layer of an `XsynBertModel` the gated local attention (SLA and WLA)."""
    for i in model.config.syntax_layer_ids:
        model.encoder.layer[i].attention.self = LocalSelfAttention(model.config, layer_idx=i)
