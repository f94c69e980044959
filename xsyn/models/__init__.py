"""The model layer: syntax variants of any BERT checkpoint, task heads, and their loading.

    from xsyn.models import build_model, load_model, load_tokenizer

    tokenizer = load_tokenizer("bert-base-multilingual-cased")      # or a vocab.txt / directory
    model = build_model("bert-base-multilingual-cased", "gat", "sequence", num_labels=3, gat_delta=4)
    out = model(**batch, labels=labels)                              # batch from xsyn.trees.batch.collate_trees
    out.loss, out.task_loss, out.distance_loss, out.depth_loss, out.logits
    model.save_pretrained(d); model = load_model(d)                  # variant, settings and head restored
    build_model(..., "sequence", **label_settings("sequence", labels=["0", "1"]))  # names in config.id2label

- `model`: `tiny` (random 2-layer BERT on the given tokenizer), a hub name, or a local directory.
- `variant`: `none`, `gat` (Ahmad et al. 2021), `sla`, `wla` (Li et al. 2021), `sdoi` (SG-Net), `sep`
  (SEPREM), or one another package adds (entry-point group `xsyn.variants`, or `register_variant`); settings
  are `XsynBertConfig` fields passed as keyword arguments (each variant's folder in `xsyn.models.variants`
  lists its own).
- `head`: `sequence`, `token`, `qa`, `multiple_choice`, `intent_slot` (`HEAD_CLASSES`), or None for the bare
  `XsynBertModel`.
- GAT checkpoints (`xsyn.models.variants.gat.layers`, on a gat model or its head): `save_gat(model, d)`,
  `load_gat(model, d)`, `freeze_gat(model)`, `gat_state_dict(model)`; `syntax_probe(model, **batch)` runs the
  GAT and its structural probes alone. Fine-tuning reaches them through the variant's hooks
  (`load_pretrained`, `freeze_pretrained`).
- QA answers over sliding windows (n-best, maximum length) are decoded by `xsyn.data.decode`.

Names are imported on first use, so `import xsyn.models` (and `xsyn --help`) stays light.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "build_model": "factory", "load_model": "factory", "label_settings": "factory",
    "register_auto_classes": "auto",
    "load_tokenizer": "tokenizers", "TINY": "names",
    "XsynBertConfig": "configuration", "SyntaxConfigError": "configuration", "VARIANTS": "variants",
    "get_variant": "variants", "register_variant": "variants", "SyntaxVariant": "variants.base",
    "XsynBertModel": "modeling",
    "XsynBertForSequenceClassification": "heads", "XsynBertForTokenClassification": "heads",
    "XsynBertForQuestionAnswering": "heads", "XsynBertForMultipleChoice": "heads", "XsynBertForIntentSlot": "heads",
    "HEAD_CLASSES": "heads",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'xsyn.models' has no attribute {name!r}")
    return getattr(importlib.import_module(f"xsyn.models.{_EXPORTS[name]}"), name)
