"""BERT self-attention that a syntax variant changes, and syntax masks in the attention function's form.

`SyntaxSelfAttention` is `BertSelfAttention` with two steps a variant overrides: `projection_terms` gives
what it adds to the query/key/value projections (the GAT's bias, added in their GEMMs), `attend` runs the
attention over them (SLA/WLA's gated local attention runs BERT's and the local one in one call). Attention
runs through transformers' attention functions (`sdpa` by default, or `eager`, which also returns the
probabilities).

Under autocast the three projections are one GEMM over the three weights, cast by one op, on the layer's
input cast once: BERT's three `nn.Linear`s would each cast the input (three low-precision copies kept for
the backward, where one serves) and their weight and bias, and each input gradient would go back to
float32 on its own before the three are summed; the one GEMM sums them in its float32 accumulator. In
float32 the three GEMMs read the input as it is (one GEMM would need a copy of the three weights each step).

Syntax masks are additive (0 where a key is visible, the dtype's most negative number elsewhere), built
once per step, in the dtype the attention computes in: a float32 mask with bfloat16 queries is read as
bfloat16 by cuDNN's attention (pytorch PR 191612), and a boolean one is converted again in every call.
BERT's padding mask reaches the layers in that form too (`padding_mask`), built by the model, not by
transformers (which reads the mask on the host first). On CUDA a forward pass chooses among the fused
attention backends of `SDPA_BACKENDS` only (`attention_backends`: cuDNN's is left out, see there).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import BertSelfAttention, eager_attention_forward

# attention(query, key, value, mask) -> (output (B, T, H, Dh), probabilities or None): the layer's attention
# function, with its dropout and scaling
Attention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None],
                     tuple[torch.Tensor, torch.Tensor | None]]
MASK_IMPLEMENTATIONS = (None, "sdpa", "eager")  # the attention functions that take an additive (B, 1, T, T) mask
PROJECTIONS = ("query", "key", "value")


class LeanSelfAttention(BertSelfAttention):
    """BERT self-attention whose projections are one GEMM under autocast (`project`): the attention of every
    layer a variant installs (sep's, sdoi's); `SyntaxSelfAttention` reads the batch's syntax too."""

    def projection_terms(self, syntax: Any) -> dict[str, Sequence[torch.Tensor]]:
        """What the variant adds to its projections, by name (`PROJECTIONS`): a (B, T, hidden) term that holds
        the projection's own bias (head h: columns h Dh .. (h + 1) Dh), as column blocks, each (B, T, k) or a
        (k,) vector for every token, whose concatenation is the term; none by default."""
        return {}

    def project(self, syntax: Any, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The (B, T, hidden) query, key and value projections of the layer's input, each plus its
        `projection_terms` (see the module docstring for the one GEMM under autocast)."""
        terms = self.projection_terms(syntax)
        linears = [getattr(self, name) for name in PROJECTIONS]
        dtype = compute_dtype(hidden_states.device, linears[0].weight.dtype)
        if dtype == linears[0].weight.dtype or any(type(linear) is not nn.Linear for linear in linears):
            return tuple(project_with(linear, hidden_states, joined(terms[name], hidden_states) if name in terms
                                      else None) for name, linear in zip(PROJECTIONS, linears))
        plain = [name for name in PROJECTIONS if name not in terms]  # biases no term holds: cast with the weights
        weight, *biases = cast_together([[linear.weight for linear in linears]]
                                        + ([[getattr(self, name).bias for name in plain]] if plain else []), dtype)
        h = hidden_states.to(dtype)
        if not terms:
            return F.linear(h, weight, biases[0]).chunk(3, dim=-1)
        own = dict(zip(plain, biases[0].view(len(plain), -1))) if plain else {}
        # one (B, T, 3 hidden) addend: the terms, and the other projections' biases for every token
        addend = joined([block for name in PROJECTIONS for block in terms.get(name, (own.get(name),))], h)
        return project_with(None, h, addend, weight).chunk(3, dim=-1)

    def attend(self, syntax: Any, hidden_states: torch.Tensor, query: torch.Tensor, key: torch.Tensor,
               value: torch.Tensor, attention_mask: torch.Tensor | None, attention: Attention
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The attention output (B, T, H, Dh) and probabilities (or None) over the (B, H, T, Dh) projections;
        `attention_mask` is BERT's (padding), `attention` the layer's attention function."""
        return attention(query, key, value, attention_mask)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                past_key_values=None, xsyn_syntax: Any = None, **kwargs):
        # past_key_values: part of BertSelfAttention's interface; an encoder keeps no cache
        shape = (*hidden_states.shape[:-1], -1, self.attention_head_size)
        query, key, value = (x.view(shape).transpose(1, 2) for x in self.project(xsyn_syntax, hidden_states))
        function = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager_attention_forward)
        dropout = self.dropout.p if self.training else 0.0

        def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
                      ) -> tuple[torch.Tensor, torch.Tensor | None]:
            return function(self, q, k, v, mask, dropout=dropout, scaling=self.scaling, **kwargs)

        output, weights = self.attend(xsyn_syntax, hidden_states, query, key, value, attention_mask, attention)
        return output.reshape(*hidden_states.shape[:-1], -1).contiguous(), weights


class SyntaxSelfAttention(LeanSelfAttention):
    """BERT self-attention reading the batch's syntax context (`xsyn_syntax`, built by the variant)."""

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                past_key_values=None, xsyn_syntax: Any = None, **kwargs):
        if xsyn_syntax is None:
            raise ValueError("a syntax layer ran without its syntax context; call XsynBertModel (or a head) "
                             "with the batch's tree_* fields rather than the encoder directly")
        return super().forward(hidden_states, attention_mask, past_key_values, xsyn_syntax, **kwargs)


def lean_attention(attention: BertSelfAttention) -> LeanSelfAttention:
    """A `LeanSelfAttention` to put in the place of a BERT layer's `attention` (a layer a variant builds), drawn
    aside from the random streams of the device it is on: the model's initialisation, which sets its weights,
    draws what it drew with BERT's attention there, and seeded runs keep their numbers."""
    device = attention.query.weight.device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        return LeanSelfAttention(attention.config, is_causal=attention.is_causal, layer_idx=attention.layer_idx)


def joined(blocks: Sequence[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    """Column blocks, each (B, T, k) or a (k,) vector for every token of `like` (B, T, .), as one (B, T, sum k)
    tensor (one op)."""
    return torch.cat([b if b.dim() == like.dim() else b.expand(*like.shape[:-1], -1) for b in blocks], dim=-1)


def project_with(linear: nn.Module | None, x: torch.Tensor, term: torch.Tensor | None,
                 weight: torch.Tensor | None = None) -> torch.Tensor:
    """x W^T + `term`, for a (B, T, out) `term` that holds the projection's own bias: the addition is the GEMM's
    (addmm's input), not an op after it; no term: the projection itself. `weight`: W where `linear` is None
    (the stacked projections). A wrapped projection (an adapter) runs its own forward instead."""
    if term is None:
        return linear(x)
    if linear is not None and type(linear) is not nn.Linear:
        return linear(x) + (term - linear.bias.to(term.dtype))
    weight = linear.weight if weight is None else weight
    # (B, T) merge into rows as views: `term` may be a slice of a stacked (B, T, n, out) tensor
    return torch.addmm(term.flatten(0, 1), x.flatten(0, 1), weight.t()).view(term.shape)


def compute_dtype(device: torch.device, weights: torch.dtype) -> torch.dtype:
    """The dtype products compute in on `device`: autocast's where it is on (mixed precision), else the weights'."""
    if torch.is_autocast_enabled(device.type):
        return torch.get_autocast_dtype(device.type)
    return weights


def cast_together(groups: Sequence[Sequence[torch.Tensor]], dtype: torch.dtype) -> list[torch.Tensor]:
    """Each group of tensors (parameters of equal trailing shape) as one tensor in `dtype`, stacked along the
    first dimension: under autocast, every layer's own cast of its weights is an op in the forward and one in
    the backward per weight; all groups here take one cast (of one flat vector, split back into views), so a
    step casts a variant's many small weights in two ops and their gradients in two. Where the tensors are in
    `dtype` already (no autocast), each group is only concatenated."""
    if all(t.dtype == dtype for group in groups for t in group):
        return [torch.cat(list(group)) if len(group) > 1 else group[0] for group in groups]
    flat = torch.cat([t.reshape(-1) for group in groups for t in group]).to(dtype)
    parts = flat.split([sum(t.numel() for t in group) for group in groups])
    return [part.view(-1, *group[0].shape[1:]) for part, group in zip(parts, groups)]


def additive_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, T, T) bool (True = attend) -> (B, 1, T, T) additive in `dtype`: 0 / the most negative number."""
    mask = mask.unsqueeze(1)
    return torch.full(mask.shape, torch.finfo(dtype).min, dtype=dtype, device=mask.device).masked_fill_(mask, 0)


def attention_mask_for(model: torch.nn.Module, mask: torch.Tensor) -> torch.Tensor:
    """A (B, T, T) bool syntax mask (True = attend) as the model's attention function takes it: (B, 1, T, T),
    additive, in the dtype the attention computes in (see the module docstring)."""
    implementation = model.config._attn_implementation
    if implementation not in MASK_IMPLEMENTATIONS:
        raise ValueError(f"attn_implementation={implementation!r} cannot apply a syntax mask; "
                         "load the model with attn_implementation='sdpa' (the default) or 'eager'")
    return additive_mask(mask, compute_dtype(mask.device, model.dtype))


def padding_mask(model: torch.nn.Module, attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """BERT's (B, T) padding mask (1 = a real piece) as the attention function takes it: (B, 1, 1, T), additive,
    in the dtype the attention computes in. Given the (B, T) mask, transformers first asks whether any piece is
    padding (`padding_mask.all()`: in eager mode a read that waits for the device, every forward pass) and then
    builds a (B, 1, T, T) mask; a 4-D mask it passes on as it is. Numerically the same: a hidden key's score
    goes to the dtype's most negative number instead of -inf, and its weight to 0 either way. A model whose
    attention function takes no such mask (flash_attention_2, flex) keeps the (B, T) one."""
    if attention_mask is None or attention_mask.dim() != 2 or \
            model.config._attn_implementation not in MASK_IMPLEMENTATIONS:
        return attention_mask
    return additive_mask(attention_mask.bool().unsqueeze(1), compute_dtype(attention_mask.device, model.dtype))


# The fused attention backends SDPA may choose on CUDA, in the order it tries them. cuDNN's is left out
# deliberately: it builds an execution plan for every new (B, T) shape (about 0.45 s forward and 0.55 s backward,
# modelscope/FunASR #3704), and torch 2.10+ tries it first on Hopper (huggingface/transformers #48163). A run's
# batches take tens of lengths an epoch and every evaluation batch may take another, so the plans cost seconds
# per shape where the kernel saves a fraction of a millisecond a step (on the H100, 200 steps: 66.5 s with 26
# shapes, 16.9 s with 2). Its masked backward is also wrong at T % 128 == 64 (NaN query gradients, pytorch issue
# 196678, torch 2.11+). Flash takes attention without a mask; memory-efficient takes the additive masks of padded
# batches and syntax layers; math is the fallback for what neither supports.
SDPA_BACKENDS = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)


def attention_backends(device: torch.device):
    """The context of a model's forward pass on `device`: on CUDA, SDPA chooses among `SDPA_BACKENDS`, in that
    order; elsewhere (the CPU) nothing changes. The backend is chosen in the forward pass, and the backward
    follows it. Entered once per forward pass of every model (`XsynBertModel.forward`: training, evaluation,
    prediction; the GAT alone: `syntax_probe`)."""
    if torch.device(device).type != "cuda":
        return contextlib.nullcontext()

    return sdpa_kernel(list(SDPA_BACKENDS), set_priority=True)
