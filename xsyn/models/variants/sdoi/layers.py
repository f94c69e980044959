"""The `sdoi` variant's layer: the syntax-guided layer of SG-Net (Zhang et al. 2020).

One extra Transformer layer (self-attention, feed-forward, residuals, LayerNorms: a `BertLayer`,
freshly initialised as in SG-Net, or a copy of the checkpoint's last layer with
`sdoi_init_from_last_layer`) reads BERT's final hidden states H with attention limited to each piece's
syntactic dependency of interest: its ancestors and itself (`TreeTensors.sdoi_mask`, computed from
the parent pointers, so right for non-projective trees; special tokens see themselves). Its
output is aggregated with BERT's:

    H' = alpha H + (1 - alpha) H_sdoi,

alpha = 0.5 by default, trained as an option. alpha = 1 gives BERT's output exactly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn
from transformers import initialization as init
from transformers.models.bert.modeling_bert import BertLayer

from xsyn.models.attention import attention_mask_for, lean_attention

if TYPE_CHECKING:
    from xsyn.models.configuration import XsynBertConfig
    from xsyn.models.modeling import XsynBertModel
    from xsyn.trees.tensors import TreeTensors


class SdoiLayer(nn.Module):
    """BERT's output, aggregated with one more layer that attends under the SDOI mask."""

    def __init__(self, config: XsynBertConfig):
        super().__init__()
        self.layer = BertLayer(config)
        self.layer.attention.self = lean_attention(self.layer.attention.self)  # projections in one GEMM
        self.alpha = nn.Parameter(torch.empty(()), requires_grad=config.sdoi_learn_alpha)

    def forward(self, hidden_states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """`mask` is the (B, 1, T, T) additive ancestor mask (`xsyn.models.attention.attention_mask_for`)."""
        guided = self.layer(hidden_states, mask)
        return torch.lerp(guided, hidden_states, self.alpha.to(guided.dtype))  # alpha H + (1 - alpha) H_sdoi


def init_weights(module: nn.Module, config: XsynBertConfig) -> None:
    if isinstance(module, SdoiLayer):
        init.constant_(module.alpha, config.sdoi_alpha)


def sdoi_output(model: XsynBertModel, tree: TreeTensors, hidden: torch.Tensor) -> torch.Tensor:
    """BERT's output aggregated with the layer's under the batch's ancestor mask."""
    return model.sdoi(hidden, attention_mask_for(model, tree.sdoi_mask()))
