"""Named GAT pre-training settings (`xsyn pretrain-gat --recipe NAME`), as nanoGPT keeps its
presets in `config/*.py`: a library caller reaches them as the command does.

A --config file, the options given and --set win over a recipe's values.
"""

from __future__ import annotations

import logging
from typing import Any

MODEL_SETTINGS = "model_settings"  # a recipe's (and PretrainSettings') table of further model settings

# Each recipe: PretrainSettings fields, its model settings under MODEL_SETTINGS.
RECIPES: dict[str, dict[str, Any]] = {
    # Ahmad et al.'s GAT: dot-product attention, no residual, no positions (PretrainSettings' defaults).
    "paper": {"gat_delta": 4, "gat_attention": "dot", "learning_rate": 1e-3, MODEL_SETTINGS: {}},
    # A good tree encoder (docs/finetune.md, "Pre-train the GAT"): UUAS 0.996 on EWT dev with a tiny model at delta 1.
    "strong": {"gat_delta": 1, "gat_attention": "additive", "learning_rate": 3e-4,
               MODEL_SETTINGS: {"gat_residual": True, "gat_deprel_embeddings": True, "gat_edge_direction": True,
                                "gat_position_embeddings": True, "gat_layers": 6, "probe_rank": 256}},
}
# Setting names of pretrain_config.json files written before pre-training took fine-tuning's names (and before its
# table of model settings took fine-tuning's name).
RENAMED = {"delta": "gat_delta", "steps": "max_steps", "max_train_sentences": "max_train_examples",
           "max_eval_sentences": "max_eval_examples", "save_every": "checkpointing_steps", "gat": MODEL_SETTINGS}


def current_names(data: dict[str, Any], where: str) -> dict[str, Any]:
    """`data` (settings a file gives) under today's names: a former name (`RENAMED`) is read as its new one, with a
    warning naming `where`."""
    for old, new in RENAMED.items():
        if old in data:
            logging.getLogger("xsyn").warning(f"{where}: setting {old} is now {new}")
            data = {**{key: value for key, value in data.items() if key != old}, new: data[old]}
    return data


def describe(name: str) -> str:
    """A recipe's values in one line, for the command's help."""
    recipe = RECIPES[name]
    values = [f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}"
              for key, value in recipe.items() if key != MODEL_SETTINGS]
    return f"{name}: " + ", ".join(values + [f"{k}={str(v).lower()}" for k, v in recipe[MODEL_SETTINGS].items()])


def recipes_help() -> str:
    """`xsyn pretrain-gat --recipe`'s help: what wins over a recipe, and each recipe's values."""
    return ("Named settings (xsyn/pretraining/recipes.py); a --config file, explicit flags and --set override them. "
            + "; ".join(describe(name) for name in RECIPES)
            + " (strong: additive attention, residual, relation and position embeddings, edge direction, 6 layers, "
              "full-rank probes).")
