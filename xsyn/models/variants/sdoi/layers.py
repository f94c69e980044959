"""The `sdoi` variant's layer: the syntax-guided layer of SG-Net (Zhang et al. 2020).

One extra Transformer layer (self-attention, feed-forward, residuals, LayerNorms: a `BertLayer`,
freshly initialised as in SG-Net, or a copy of the checkpoint's last layer with
`sdoi_init_from_last_layer`) reads BERT's final hidden states H with attention limited to each piece's
syntactic dependency of interest: its ancestors and itself (`TreeTensors.sdoi_mask`, computed from
the parent pointers, so right for non-projective trees; special tokens see themselves). Its
output is aggregated with BERT's:

    H' = alpha H + (1 - alpha) H_sdoi,

alpha = 0.5 by default, trained as an option. alpha = 1 gives BERT's output exactly.

SG-Net's released code (`sdoi_aggregation = "softmax"`, and the mask settings of `SdoiSettings`) mixes
H' = gamma (w0 H + w1 H_sdoi), (w0, w1) = softmax(w), and leaves rows with nothing to see all zero, which
its additive -10000 turns into BERT's attention over the whole padded input: xsyn shifts those rows by the
same -10000 (`CODE_MASK_VALUE`), so they round as the code's do.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import nn
from transformers import initialization as init
from transformers.models.bert.modeling_bert import BertLayer

from xsyn.models.attention import attention_mask_for, lean_attention

# SG-Net's additive mask value ((1 - M) * -10000): a row it leaves all zero keeps BERT's scores shifted by it, whose
# float32 rounding (about 1e-3 at 10,000) moves that row's output by up to ~3e-5; xsyn shifts them the same way.
CODE_MASK_VALUE = -10000.0

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
        learn = config.sdoi_learn_alpha
        if config.sdoi_aggregation == "softmax":  # SG-Net's modeling.py: gamma (softmax(w)[0] H + softmax(w)[1] H')
            self.mix = nn.Parameter(torch.empty(2), requires_grad=learn)
            self.gamma = nn.Parameter(torch.empty(1), requires_grad=learn)
        else:
            self.alpha = nn.Parameter(torch.empty(()), requires_grad=learn)

    def forward(self, hidden_states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """`mask` is the (B, 1, T, T) additive ancestor mask (`xsyn.models.attention.attention_mask_for`)."""
        guided = self.layer(hidden_states, mask)
        if hasattr(self, "mix"):
            w = self.mix.softmax(0).to(guided.dtype)
            return self.gamma.to(guided.dtype) * (w[0] * hidden_states + w[1] * guided)
        return torch.lerp(guided, hidden_states, self.alpha.to(guided.dtype))  # alpha H + (1 - alpha) H_sdoi


def init_weights(module: nn.Module, config: XsynBertConfig) -> None:
    if isinstance(module, SdoiLayer) and hasattr(module, "mix"):
        half = math.log(config.sdoi_alpha / (1 - config.sdoi_alpha)) / 2  # softmax(0.5 + h, 0.5 - h) = alpha
        init.copy_(module.mix, torch.tensor([0.5 + half, 0.5 - half]))
        init.ones_(module.gamma)
    elif isinstance(module, SdoiLayer):
        init.constant_(module.alpha, config.sdoi_alpha)


def sdoi_output(model: XsynBertModel, tree: TreeTensors, hidden: torch.Tensor) -> torch.Tensor:
    """BERT's output aggregated with the layer's under the batch's ancestor mask."""
    config = model.config
    mask = tree.sdoi_mask(config.sdoi_cls_visible, config.sdoi_self == "heads", config.sdoi_empty_rows)
    additive = attention_mask_for(model, mask)
    if config.sdoi_empty_rows == "all":  # SG-Net's rows of nothing: its -10000 on every position, rounding included
        additive = additive.masked_fill(mask.all(-1)[:, None, :, None], CODE_MASK_VALUE)
    return model.sdoi(hidden, additive)
