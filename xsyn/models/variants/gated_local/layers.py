"""Gated local/global attention: SLA (Li et al. 2021) and its word-window baseline WLA.

In every syntax layer a token i mixes two attentions over the same Q, K, V: a local one, masked
by the SLA tree mask (or the WLA window mask), and BERT's global one. The gate is per token and
shared by the heads, computed from the layer's input (the previous layer's hidden state):

    g_i = sigmoid(W_g h_i + b_g),   A_i = (g_i S_loc_i + (1 - g_i) S_glb_i) V.

Because a row's output is linear in its attention probabilities, A_i = g_i SDPA_loc_i +
(1 - g_i) SDPA_glb_i: no T x T probabilities materialised. Both attentions run in one fused
`scaled_dot_product_attention` call over the batch twice (BERT's mask for the first copy, the local
mask for the second: one (2B, 1, T, T) additive mask built once per step), which halves the calls and
their launches; the mix is `torch.lerp`. A closed gate (g = 0) is exactly BERT's attention.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from xsyn.models.attention import Attention, SyntaxSelfAttention, attention_mask_for

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
    return torch.lerp(global_, local, gate.to(global_.dtype))


def mix_weights(gate: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor | None:
    """The mixed attention probabilities (B, H, T, T) of the stacked (2B, H, T, T) ones, when the attention
    function returns them."""
    if weights is None:
        return None
    global_, local = weights.chunk(2)
    return mix(gate.transpose(1, 2), local, global_)


def local_attention_mask(model, local: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """The (2B, 1, T, T) additive mask of the stacked attention: BERT's (padded keys hidden; from the (B, T)
    `attention_mask`), then the (B, T, T) bool `local` mask, in the attention's dtype."""
    visible = torch.ones_like(local) if attention_mask is None else attention_mask.bool().unsqueeze(1).expand_as(local)
    return attention_mask_for(model, torch.cat([visible, local]))


class LocalSelfAttention(SyntaxSelfAttention):
    """A syntax layer of SLA or WLA: BERT's attention mixed, per token, with attention under the local mask
    (the batch's syntax context, in the attention function's form)."""

    def __init__(self, config: XsynBertConfig, layer_idx: int):
        super().__init__(config, layer_idx=layer_idx)
        self.gate = LocalAttentionGate(config.hidden_size)

    def attend(self, syntax: torch.Tensor, hidden_states: torch.Tensor, query: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor, attention_mask: torch.Tensor | None, attention: Attention
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
        # BERT's `attention_mask` is the first half of `syntax` (see local_attention_mask)
        output, weights = attention(*(torch.cat([x, x]) for x in (query, key, value)), syntax)
        global_, local = output.chunk(2)
        gate = self.gate(hidden_states)
        return mix(gate, local, global_), mix_weights(gate, weights)


def install_local_attention(model) -> None:
    """Give each syntax layer of an `XsynBertModel` the gated local attention (SLA and WLA)."""
    for i in model.config.syntax_layer_ids:
        model.encoder.layer[i].attention.self = LocalSelfAttention(model.config, layer_idx=i)
