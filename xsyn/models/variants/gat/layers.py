"""The GAT syntax encoder of Ahmad et al. (2021), its structural probes, and the attention bias.

Input: BERT's word-piece embeddings (the same table as BERT's, not a copy) plus a UPOS embedding
(and, as an option, a relation embedding). L_g layers of k-head attention restricted to tree
distance <= delta; no feed-forward sublayer, no residual, no position embeddings (the paper's
design; `gat_residual` and `gat_position_embeddings` add the last two as options); a final
LayerNorm (as in the released code) keeps G's scale fixed for the bias it feeds.

- `dot` attention (paper eq. 2): query = key = T = X W_T, value = X W_V, scaled dot product, run
  by torch's fused `scaled_dot_product_attention` under the tree mask (additive, in the compute dtype).
- `additive` attention (the released code, Velickovic et al. 2018): h = X W,
  e_ij = LeakyReLU_0.2(a_1 . h_i + a_2 . h_j), output sum_j softmax_j(e_ij) h_j.

The tree mask is symmetric, so neither form can tell a piece's head from its dependents. The
opt-in `gat_edge_direction` adds a learned logit per layer, head and relation of key to query
(self, head, dependent, further; `xsyn.trees.tensors.edge_relations`): a layer can then read the
head alone, and stacked layers gather each piece's chain of ancestors, what a tree-distance
embedding needs (Hewitt and Manning's squared distances are sums over the path).

Without positions, two identical words in mirrored places of a tree (the objects "cat" of "cat
chased cat") have the same input and the same neighbourhood, so no GAT can tell them apart, nor
put them at their distance from each other. The opt-in `gat_position_embeddings` adds BERT's
position embeddings (the model's own table, like the word embeddings) to the GAT input.

Structural probes (Hewitt and Manning 2019) read G: predicted squared distances
||theta1 (g_i - g_j)||^2 and squared norms ||theta2 g_i||^2, trained with L1 against tree distances
(normalised by n^2) and depths (normalised by n), n counting `[CLS]` and `[SEP]`.

Initial weights: BERT's N(0, initializer_range) for every GAT weight, or, with `gat_weight_init = "xavier"`,
the released code's draws (each head's projection and score vectors from xavier_uniform with gain 1.414, the
probes from U(-0.05, 0.05)); `gat_special_upos = "separate"` embeds [CLS] and [SEP] apart, as its UPOS ids
do (`released_upos_ids`).

`GatSyntaxEncoder`'s `state_dict` is the whole GAT checkpoint (embeddings of UPOS/relations,
layers, LayerNorm, probes); the word embeddings are BERT's and are not part of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes
from torch import nn
from torch.nn import functional as F
from transformers import initialization as init
from transformers.utils import ModelOutput

from xsyn.models.attention import (
    SyntaxSelfAttention,
    additive_mask,
    attention_backends,
    cast_together,
    compute_dtype,
)
from xsyn.models.variants.gat import GAT_CONFIG, GAT_WEIGHTS, GatContext, bias_target_names, gat_output_size
from xsyn.syntax.vocab import DEPREL_VOCAB_SIZE, PAD_ID, UPOS_SPECIAL_ID, UPOS_UNKNOWN_ID, UPOS_VOCAB_SIZE
from xsyn.trees.tensors import EDGE_RELATIONS, UNREACHABLE, TreeTensors
from xsyn.utils.errors import InputError, MissingInputError
from xsyn.utils.io import atomic_write_bytes, atomic_write_text

if TYPE_CHECKING:
    from xsyn.models.configuration import XsynBertConfig
    from xsyn.models.modeling import XsynBertModel
    from xsyn.models.variants.base import SyntaxBatch

# The relation logits are this multiple of their parameters, so that they move at 10x the
# optimiser's rate: singling out the head needs logits of several units.
RELATION_BIAS_SCALE = 10.0
# Settings that fix what a GAT checkpoint is (its shapes, its inputs, its wiring); they must match to load one.
GAT_SHAPE_FIELDS = ("hidden_size", "gat_layers", "gat_heads", "gat_head_size", "gat_attention",
                    "gat_deprel_embeddings", "gat_residual", "gat_edge_direction", "gat_position_embeddings",
                    "probe_rank", "gat_special_upos")
XAVIER_GAIN = 1.414  # the released code's gain (graph_utils.py: GraphAttentionHead)
PROBE_INIT_BOUND = 0.05  # the released code's probes: U(-0.05, 0.05) (TwoWordPSDProbe, OneWordPSDProbe)


class DotGatLayer(nn.Module):
    """One GAT layer with query = key (paper eq. 2), fused attention under the tree mask."""

    def __init__(self, in_size: int, heads: int, head_size: int, dropout: float):
        super().__init__()
        self.heads, self.head_size, self.dropout = heads, head_size, dropout
        self.tied_query_key = nn.Linear(in_size, heads * head_size)
        self.value = nn.Linear(in_size, heads * head_size)

    def parameter_groups(self) -> list[list[torch.Tensor]]:
        """Both projections' weights and biases, stacked (`cast_together`): one GEMM gives both."""
        return [[self.tied_query_key.weight, self.value.weight], [self.tied_query_key.bias, self.value.bias]]

    def forward(self, x: torch.Tensor, mask: torch.Tensor, bias: torch.Tensor | None = None,
                parameters: list[torch.Tensor] | None = None) -> torch.Tensor:
        """`mask`: the additive (B, 1, T, T) tree mask in the compute dtype; `bias`: relation logits (B, k, T, T);
        `parameters`: `parameter_groups` stacked (and cast) by the encoder, for all its layers at once."""
        b, t, _ = x.shape
        # both projections in one GEMM over the stacked weights (their names, and checkpoints, unchanged)
        weight, stacked_bias = parameters or cast_together(self.parameter_groups(), x.dtype)
        projected = F.linear(x, weight, stacked_bias)
        qk, v = (y.view(b, t, self.heads, self.head_size).transpose(1, 2) for y in projected.chunk(2, dim=-1))
        attn_mask = mask if bias is None else mask + bias.to(mask.dtype)
        out = F.scaled_dot_product_attention(qk, qk, v, attn_mask=attn_mask,
                                             dropout_p=self.dropout if self.training else 0.0)
        return out.transpose(1, 2).reshape(b, t, -1)


class AdditiveGatLayer(nn.Module):
    """One Velickovic-style GAT layer, as in the released code (value = the projected input)."""

    def __init__(self, in_size: int, heads: int, head_size: int, dropout: float):
        super().__init__()
        self.heads, self.head_size, self.dropout = heads, head_size, dropout
        self.project = nn.Linear(in_size, heads * head_size, bias=False)
        self.score_query = nn.Parameter(torch.empty(heads, head_size))
        self.score_key = nn.Parameter(torch.empty(heads, head_size))

    def parameter_groups(self) -> list[list[torch.Tensor]]:
        return [[self.project.weight]]

    def forward(self, x: torch.Tensor, mask: torch.Tensor, bias: torch.Tensor | None = None,
                parameters: list[torch.Tensor] | None = None) -> torch.Tensor:
        b, t, _ = x.shape
        weight = parameters[0] if parameters else self.project.weight
        h = F.linear(x, weight).view(b, t, self.heads, self.head_size).transpose(1, 2)  # (B, k, T, d)
        src = torch.einsum("bktd,kd->bkt", h, self.score_query)
        dst = torch.einsum("bktd,kd->bkt", h, self.score_key)
        scores = F.leaky_relu(src.unsqueeze(-1) + dst.unsqueeze(-2), 0.2)
        if bias is not None:
            scores = scores + bias
        scores = scores + mask  # the additive tree mask
        weights = F.dropout(scores.softmax(-1), p=self.dropout, training=self.training)
        return (weights @ h).transpose(1, 2).reshape(b, t, -1)


class GatEmbedding(nn.Embedding):
    """An embedding of the GAT's input (UPOS, relations): BERT's rule, or the code's (`init_weights`)."""


class StructuralProbe(nn.Linear):
    """A probe's projection theta (no bias): BERT's rule, or the code's U(-0.05, 0.05) (`init_weights`)."""

    def __init__(self, in_size: int, rank: int):
        super().__init__(in_size, rank, bias=False)


class GatSyntaxEncoder(nn.Module):
    """Tree-masked graph attention over word-piece + UPOS embeddings, with structural probes."""

    def __init__(self, config: XsynBertConfig):
        super().__init__()
        hidden, out = config.hidden_size, gat_output_size(config)
        self.separate_specials = config.gat_special_upos == "separate"
        self.upos_embeddings = GatEmbedding(UPOS_VOCAB_SIZE + self.separate_specials, hidden, padding_idx=PAD_ID)
        self.deprel_embeddings = (GatEmbedding(DEPREL_VOCAB_SIZE, hidden, padding_idx=PAD_ID)
                                  if config.gat_deprel_embeddings else None)
        layer_class = DotGatLayer if config.gat_attention == "dot" else AdditiveGatLayer
        self.layers = nn.ModuleList(
            layer_class(hidden if i == 0 else out, config.gat_heads, config.gat_head_size,
                        config.attention_probs_dropout_prob)
            for i in range(config.gat_layers))
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.residual = config.gat_residual
        # One learned logit per layer, head and edge relation (self, head, dependent, further).
        self.relation_bias = (nn.Parameter(torch.zeros(config.gat_layers, EDGE_RELATIONS, config.gat_heads))
                              if config.gat_edge_direction else None)
        self.layer_norm = nn.LayerNorm(out, eps=config.layer_norm_eps)
        self.distance_probe = StructuralProbe(out, config.probe_rank)  # theta1
        self.depth_probe = StructuralProbe(out, config.probe_rank)  # theta2

    def forward(self, word_embeddings: torch.Tensor, upos: torch.Tensor, mask: torch.Tensor,
                deprel: torch.Tensor | None = None, relations: torch.Tensor | None = None,
                parameters: list[list[torch.Tensor]] | None = None) -> torch.Tensor:
        """G (B, T, k d_g) from word-piece embeddings (B, T, H), UPOS ids and the (B, T, T) tree mask;
        `relations` (B, T, T, from `edge_relations`) is read when the config sets `gat_edge_direction`;
        `parameters`: `layer_parameters` where the step cast them already (`step_parameters`)."""
        x = word_embeddings + self.upos_embeddings(released_upos_ids(upos) if self.separate_specials else upos)
        mask = additive_mask(mask, compute_dtype(x.device, x.dtype))  # once for all layers, in their dtype
        if self.deprel_embeddings is not None:
            x = x + self.deprel_embeddings(deprel)
        parameters = parameters or self.layer_parameters(mask.dtype)
        for index, layer in enumerate(self.layers):
            bias = (None if self.relation_bias is None
                    else F.embedding(relations, RELATION_BIAS_SCALE * self.relation_bias[index]).permute(0, 3, 1, 2))
            y = self.dropout(layer(x, mask, bias, parameters[index]))
            x = x + y if self.residual and y.shape == x.shape else y
        return self.layer_norm(x)

    def layer_parameters(self, dtype: torch.dtype) -> list[list[torch.Tensor]]:
        """Every layer's stacked projection weights in `dtype`, cast once for all layers (`cast_together`)."""
        return _cast_by_owner([layer.parameter_groups() for layer in self.layers], dtype)

    def probe(self, gat_output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Predicted squared distances (B, T, T) and squared norms (depths) (B, T) from G.

        In float32 whatever the autocast: |p_i|^2 + |p_j|^2 - 2 p_i.p_j cancels, and in bfloat16 (8
        bits of mantissa) the difference of norms in the hundreds loses the small tree distances the
        structural loss is about."""
        with torch.autocast(gat_output.device.type, enabled=False):
            # both probes in one GEMM over their stacked weights
            weight = torch.cat([self.distance_probe.weight, self.depth_probe.weight]).float()
            p, q = F.linear(gat_output.float(), weight).chunk(2, dim=-1)
            sq = p.pow(2).sum(-1)
            # |p_i|^2 + |p_j|^2 - 2 p_i.p_j in one batched GEMM with its addend
            distances = torch.baddbmm(sq.unsqueeze(2) + sq.unsqueeze(1), p, p.transpose(1, 2), alpha=-2).clamp(min=0)
            depths = q.pow(2).sum(-1)
        return distances, depths


def released_upos_ids(upos: torch.Tensor) -> torch.Tensor:
    """The UPOS ids as Ahmad et al.'s code numbers them (`processors/constants.py: UPOS_MAP`): padding 0, the 17
    tags 1-17, [CLS] 18, [SEP] 19, a piece of unknown UPOS 20, from xsyn's (one special id 18 for both, unknown
    19). [CLS] is the first position of every input; a special token after it is a [SEP]."""
    later = torch.arange(upos.shape[1], device=upos.device) > 0
    ids = torch.where(upos == UPOS_UNKNOWN_ID, UPOS_VOCAB_SIZE, upos)
    return torch.where((upos == UPOS_SPECIAL_ID) & later, UPOS_UNKNOWN_ID, ids)


def structural_loss(predicted_distances: torch.Tensor, predicted_depths: torch.Tensor,
                    distances: torch.Tensor, depths: torch.Tensor, attention_mask: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """L1 probe losses, averaged over sequences: sum_ij |d^_ij - d_ij| / n^2 and sum_i |n^_i - depth_i| / n.

    n counts a sequence's pieces including `[CLS]`/`[SEP]`; padding and pairs in different trees
    are left out.
    """
    real = attention_mask.bool()
    n = real.sum(1, dtype=predicted_depths.dtype).clamp(min=1)
    pairs = real.unsqueeze(2) & real.unsqueeze(1) & (distances < UNREACHABLE)
    # each term's weight in its sequence's normalised sum and in the mean over sequences (0 where left out), so
    # that a loss is one product and one sum, and its backward one product
    per_sequence = n * len(n)
    dist = ((predicted_distances - distances).abs() * (pairs / (per_sequence * n)[:, None, None])).sum()
    depth = ((predicted_depths - depths).abs() * (real / per_sequence[:, None])).sum()
    return dist, depth


class SyntaxBias(nn.Module):
    """The projections G^Q_l, G^K_l (and/or G^V_l) of one layer's bias G G^X_l on its first `syntax_heads`
    heads: run for all layers at once by `syntax_biases`, added by the layer in its own projections' GEMMs."""

    def __init__(self, config: XsynBertConfig):
        super().__init__()
        self.heads = config.syntax_heads
        self.head_size = config.hidden_size // config.num_attention_heads
        self.projections = nn.ModuleDict({
            target: nn.Linear(gat_output_size(config), self.heads * self.head_size)
            for target in bias_target_names(config.bias_targets)})


def gat_context(model: XsynBertModel, tree: TreeTensors, batch: SyntaxBatch) -> GatContext:
    """G and every syntax layer's bias terms, computed once per batch."""
    # the GAT's and the biases' weights in the compute dtype, by one cast for the step
    layers, biases = step_parameters(model, compute_dtype(batch.input_ids.device, model.dtype))
    gat_output = gat_encode(model, batch.input_ids, tree, batch.tree_deprel, position_ids=batch.position_ids,
                            word_embeddings=batch.word_embeddings, parameters=layers)
    return GatContext(gat_output, syntax_biases(model, gat_output, biases))


def init_weights(module: nn.Module, config: XsynBertConfig) -> None:
    """The rule for the GAT's own parameters (after BERT's for Linear/Embedding/LayerNorm; a module's own children
    are initialised before it, so the `xavier` draws here replace BERT's)."""
    xavier = config.gat_weight_init == "xavier"
    if isinstance(module, AdditiveGatLayer):
        if xavier:  # the code's W (in x d), a1, a2 (d x 1) per head: this layer's rows of each head
            _per_head_xavier(module.project.weight, module.heads)
            _per_head_xavier(module.score_query, module.heads)
            _per_head_xavier(module.score_key, module.heads)
        else:
            init.normal_(module.score_query, std=config.initializer_range)
            init.normal_(module.score_key, std=config.initializer_range)
    elif isinstance(module, DotGatLayer) and xavier:  # not in the code (its GAT is additive): its draw all the same
        _per_head_xavier(module.tied_query_key.weight, module.heads)
        _per_head_xavier(module.value.weight, module.heads)
    elif isinstance(module, StructuralProbe) and xavier:
        init.uniform_(module.weight, -PROBE_INIT_BOUND, PROBE_INIT_BOUND)
    elif isinstance(module, GatEmbedding) and xavier:  # transformers 2.x (the code's) draws the padding row too,
        init.normal_(module.weight, std=config.initializer_range)  # where BERT's rule now zeroes it
    elif isinstance(module, GatSyntaxEncoder) and module.relation_bias is not None:
        init.zeros_(module.relation_bias)  # no preference among the relations at first


def _per_head_xavier(weight: torch.Tensor, heads: int) -> None:
    """Each head's block of rows (d x in, or 1 x d for a score vector) from xavier_uniform with the code's gain: the
    bound sqrt(6 / (in + d)) of its own (in x d) W, not of the stacked heads'. Leaves loaded weights alone."""
    if getattr(weight, "_is_hf_initialized", False):
        return
    with torch.no_grad():
        for block in weight.view(heads, -1, weight.shape[-1]):
            nn.init.xavier_uniform_(block, gain=XAVIER_GAIN)


def syntax_biases(model: XsynBertModel, gat_output: torch.Tensor, parameters: list[torch.Tensor] | None = None
                  ) -> dict[int, dict[str, tuple[torch.Tensor, torch.Tensor]]]:
    """What every syntax layer adds to its projections' GEMMs, as column blocks: G G^X_l + b_l on the syntax
    heads' columns, in one GEMM over all layers' stacked weights (one kernel and one backward, where a GEMM
    per layer and target launches 12 to 36 times as many) whose bias also holds the projection's own bias on
    those columns, then the own bias's other columns. The layer joins the blocks into its GEMM's addend, so the
    step keeps no full-width copy per layer and target, and the backward hands the stacked GEMM only the
    syntax heads' columns of each gradient. `parameters`: `bias_parameter_groups` in the compute dtype where
    the step cast them already (`step_parameters`)."""
    projections = _bias_projections(model)
    weight, bias, own = parameters or cast_together(bias_parameter_groups(model),
                                                    compute_dtype(gat_output.device, gat_output.dtype))
    own = own.view(len(projections), -1)  # (n, hidden)
    width = bias.shape[0] // len(projections)
    heads, rest = own.split([width, own.shape[1] - width], dim=1)
    stacked = F.linear(gat_output, weight, bias + heads.flatten())  # (B, T, n w)
    biases: dict[int, dict[str, tuple[torch.Tensor, torch.Tensor]]] = {}
    # `split`'s and `unbind`'s backwards are one concatenation each
    for (_, i, target, _), part, others in zip(projections, stacked.split(width, dim=-1), rest.unbind(0)):
        biases.setdefault(i, {})[target] = (part, others)
    return biases


def _bias_projections(model: XsynBertModel) -> list[tuple[nn.Module, int, str, nn.Linear]]:
    """(attention, layer, target, projection) of every syntax layer's bias projections, in their stacked order."""
    layers = _gat_model(model).encoder.layer
    return [(layers[i].attention.self, i, target, projection) for i in model.config.syntax_layer_ids
            for target, projection in layers[i].attention.self.syntax_bias.projections.items()]


def bias_parameter_groups(model: XsynBertModel) -> list[list[torch.Tensor]]:
    """The bias projections' weights, their biases, and their BERT projections' own biases (`cast_together`)."""
    projections = _bias_projections(model)
    return [[projection.weight for *_, projection in projections], [projection.bias for *_, projection in projections],
            [getattr(attention, target).bias for attention, _, target, _ in projections]]


def step_parameters(model: XsynBertModel, dtype: torch.dtype) -> tuple[list[list[torch.Tensor]], list[torch.Tensor]]:
    """The GAT layers' (`GatSyntaxEncoder.layer_parameters`) and the syntax biases' (`bias_parameter_groups`)
    weights in `dtype`, by one cast for the step."""
    encoder = _gat_model(model)
    owners = [layer.parameter_groups() for layer in encoder.gat.layers] + [bias_parameter_groups(model)]
    *layers, biases = _cast_by_owner(owners, dtype)
    return layers, biases


def _cast_by_owner(owners: list[list[list[torch.Tensor]]], dtype: torch.dtype) -> list[list[torch.Tensor]]:
    """`cast_together` of every owner's groups in one call, handed back by owner."""
    flat = iter(cast_together([group for groups in owners for group in groups], dtype))
    return [[next(flat) for _ in groups] for groups in owners]


class GatSelfAttention(SyntaxSelfAttention):
    """A syntax layer of the `gat` variant: BERT's attention with the GAT bias on its first heads (the
    batch's syntax context is a `GatContext`)."""

    def __init__(self, config: XsynBertConfig, layer_idx: int):
        super().__init__(config, layer_idx=layer_idx)
        self.syntax_bias = SyntaxBias(config)

    def projection_terms(self, syntax: GatContext) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return syntax.biases[self.layer_idx]


def gat_encode(model: XsynBertModel, input_ids: torch.Tensor, tree: TreeTensors, deprel: torch.Tensor | None = None,
               mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
               word_embeddings: torch.Tensor | None = None, parameters: list[list[torch.Tensor]] | None = None
               ) -> torch.Tensor:
    """G (B, T, k d_g) of a batch's trees by the GAT of `model` (an `XsynBertModel` of variant `gat`, or a
    head on one), under `mask` (default: tree distance <= gat_delta). `word_embeddings` is the encoder's
    lookup of `input_ids` where it was made already (the model's forward shares it); `parameters` the GAT
    layers' weights where the step cast them already (`step_parameters`).

    The input is BERT's word-piece embeddings, plus its position embeddings (of `position_ids`,
    by default those the encoder's embeddings use: 0..T-1 in BERT, from the padding index + 1 over
    the pieces that are not padding in XLM-R) where the config sets `gat_position_embeddings`.
    """
    encoder = _gat_model(model)
    embeddings, config = encoder.embeddings, encoder.config
    words = embeddings.word_embeddings(input_ids) if word_embeddings is None else word_embeddings
    if config.gat_position_embeddings:
        if position_ids is None and encoder.family.padded_positions:
            position_ids = embeddings.create_position_ids_from_input_ids(input_ids, embeddings.padding_idx)
        elif position_ids is None:
            position_ids = torch.arange(input_ids.shape[1], device=input_ids.device)
        words = words + embeddings.position_embeddings(position_ids)
    mask = tree.gat_mask(config.gat_delta) if mask is None else mask
    relations = tree.edge_relations if config.gat_edge_direction else None
    return encoder.gat(words, tree.upos, mask, deprel, relations, parameters)


@dataclass
class ProbeOutput(ModelOutput):
    """The GAT's structural probes on one batch, with their targets and L1 losses."""

    predicted_distances: torch.FloatTensor | None = None  # (B, T, T) squared distances
    predicted_depths: torch.FloatTensor | None = None  # (B, T) squared norms
    distances: torch.LongTensor | None = None  # (B, T, T) tree distances
    depths: torch.LongTensor | None = None  # (B, T) tree depths
    distance_loss: torch.FloatTensor | None = None
    depth_loss: torch.FloatTensor | None = None
    gat_output: torch.FloatTensor | None = None


def syntax_probe(model: XsynBertModel, input_ids: torch.Tensor, tree_parent: torch.Tensor, tree_upos: torch.Tensor,
                 attention_mask: torch.Tensor | None = None, tree_deprel: torch.Tensor | None = None,
                 *, tree: TreeTensors | None = None, **unused) -> ProbeOutput:
    """Run only the GAT of `model` and its probes (no BERT layers): predictions, targets and L1 losses.

    Takes a whole collated batch (`**batch`); fields the GAT does not read are ignored. `tree`
    passes the batch's tree tensors where the caller has already built them.
    """
    encoder = _gat_model(model)
    encoder.check_batch_fields({"input_ids": input_ids, "tree_parent": tree_parent, "tree_upos": tree_upos,
                                "tree_deprel": tree_deprel, "tree_word": None, "tree_segment": None})
    if tree is None:
        tree = TreeTensors(tree_parent, tree_upos, None, None)
    with attention_backends(input_ids.device):  # the GAT's attention, as in the model's forward
        gat_output = gat_encode(encoder, input_ids, tree, tree_deprel)
    predicted_distances, predicted_depths = encoder.gat.probe(gat_output)
    real = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
    distance_loss, depth_loss = structural_loss(predicted_distances, predicted_depths, tree.distances,
                                                tree.depth, real)
    return ProbeOutput(predicted_distances=predicted_distances, predicted_depths=predicted_depths,
                       distances=tree.distances, depths=tree.depth, distance_loss=distance_loss,
                       depth_loss=depth_loss, gat_output=gat_output)


def gat_state_dict(model: XsynBertModel) -> dict[str, torch.Tensor]:
    """The GAT checkpoint: UPOS (and relation) embeddings, GAT layers, LayerNorm, probes."""
    return _gat_model(model).gat.state_dict()


def save_gat(model: XsynBertModel, directory: str | Path) -> None:
    """Write the GAT checkpoint of `model`: `gat.safetensors` and the shape settings in `gat_config.json`."""
    encoder = _gat_model(model)
    directory = Path(directory)
    tensors = {k: v.detach().contiguous() for k, v in encoder.gat.state_dict().items()}
    atomic_write_bytes(directory / GAT_WEIGHTS, safetensors_bytes(tensors))
    settings = {name: getattr(encoder.config, name) for name in GAT_SHAPE_FIELDS + ("gat_delta",)}
    atomic_write_text(directory / GAT_CONFIG, json.dumps(settings, indent=2) + "\n")


def load_gat(model: XsynBertModel, directory: str | Path) -> None:
    """Load a GAT checkpoint (from `save_gat` / `xsyn pretrain-gat`) into `model`; shapes must match."""
    encoder = _gat_model(model)
    encoder.gat.load_state_dict(load_gat_state(directory, encoder.config))


def freeze_gat(model: XsynBertModel) -> None:
    """Stop training the GAT and its probes (the syntax-bias projections stay trainable)."""
    _gat_model(model).gat.requires_grad_(False)


def load_gat_state(directory: str | Path, config: XsynBertConfig) -> dict[str, torch.Tensor]:
    """Read a GAT checkpoint written by `save_gat`, checking it fits `config`'s shapes."""
    directory = Path(directory)
    settings_path, weights_path = directory / GAT_CONFIG, directory / GAT_WEIGHTS
    for path in (settings_path, weights_path):
        if not path.is_file():
            raise MissingInputError(f"{path} not found: a GAT checkpoint directory holds {GAT_CONFIG} "
                                    f"and {GAT_WEIGHTS} (written by save_gat / `xsyn pretrain-gat`)")
    settings = json.loads(settings_path.read_text(encoding="utf-8"))
    for name in GAT_SHAPE_FIELDS:
        if name in settings and settings[name] != getattr(config, name):
            raise InputError(f"{settings_path}: the GAT was trained with {name}={settings[name]!r} but this "
                             f"model has {name}={getattr(config, name)!r}; build the model with the same value")
    return load_file(weights_path)


def pretrained_gat_settings(directory: str | Path) -> dict[str, Any]:
    """The model settings a pre-trained GAT (an `xsyn pretrain-gat` folder) was built with, BERT's width aside."""
    path = Path(directory) / GAT_CONFIG
    if not path.is_file():
        raise MissingInputError(f"{directory}: {path} not found; point it at an `xsyn pretrain-gat` output folder")
    saved = json.loads(path.read_text(encoding="utf-8"))
    return {k: saved[k] for k in GAT_SHAPE_FIELDS if k in saved and k != "hidden_size"}


def _gat_model(model: XsynBertModel) -> XsynBertModel:
    """The `XsynBertModel` under `model` (itself, or a head's encoder), which must have a GAT."""
    encoder = model.base_model
    if getattr(encoder, "gat", None) is None:  # installed by the gat variant
        raise ValueError(f"this model's variant is {encoder.config.variant!r}; GAT operations need variant 'gat'")
    return encoder
