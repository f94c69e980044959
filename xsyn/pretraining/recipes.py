"""Named GAT pre-training settings (`xsyn pretrain-gat --recipe NAME`), as nanoGPT keeps its
presets in `config/*.py`: a library caller reaches them as the command does.

A --config file, the options given and --set win over a recipe's values.
"""

from __future__ import annotations

from typing import Any

RECIPES: dict[str, dict[str, Any]] = {
    # Ahmad et al.'s GAT: dot-product attention, no residual, no positions (PretrainSettings' defaults).
    "paper": {"gat_delta": 4, "gat_attention": "dot", "learning_rate": 1e-3, "gat": {}},
    # A good tree encoder (docs/finetune.md, "Pre-train the GAT"): UUAS 0.996 on EWT dev with a tiny model at delta 1.
    "strong": {"gat_delta": 1, "gat_attention": "additive", "learning_rate": 3e-4,
               "gat": {"gat_residual": True, "gat_deprel_embeddings": True, "gat_edge_direction": True,
                       "gat_position_embeddings": True, "gat_layers": 6, "probe_rank": 256}},
}
# Setting names of pretrain_config.json files written before pre-training took fine-tuning's names.
RENAMED = {"delta": "gat_delta", "steps": "max_steps", "max_train_sentences": "max_train_examples",
           "max_eval_sentences": "max_eval_examples", "save_every": "checkpointing_steps"}


def describe(name: str) -> str:
    """A recipe's values in one line, for the command's help."""
    recipe = RECIPES[name]
    values = [f"{key}={recipe[key]:g}" if isinstance(recipe[key], float) else f"{key}={recipe[key]}"
              for key in ("gat_delta", "gat_attention", "learning_rate")]
    return f"{name}: " + ", ".join(values + [f"{k}={str(v).lower()}" for k, v in recipe["gat"].items()])


def recipes_help() -> str:
    """`xsyn pretrain-gat --recipe`'s help: what wins over a recipe, and each recipe's values."""
    return ("Named settings (xsyn/pretraining/recipes.py); a --config file, explicit flags and --set override them. "
            + "; ".join(describe(name) for name in RECIPES)
            + " (strong: additive attention, residual, relation and position embeddings, edge direction, 6 layers, "
              "full-rank probes).")
