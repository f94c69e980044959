"""The encoder families xsyn lifts: BERT, and the RoBERTa family (XLM-R, RoBERTa) that shares BERT's layers.

transformers' XLM-R and RoBERTa encoders are BERT's code under other names (the same self-attention,
layer, encoder, pooler and forward pass) with other embeddings: position ids count from the padding
index + 1 and skip padding, one token type. So an xsyn encoder is always BERT's layers (where the
variants install their syntax modules) with the family's embeddings, its config defaults and the name
its checkpoints keep the encoder under (`bert.`, `roberta.`). What differs per family is data here,
found by the checkpoint's `model_type` or the xsyn config's; the model code never names a family.

Adding a family with BERT's layer structure (e.g. CamemBERT) is one `EncoderFamily` entry. Classes are
named by import path and resolved on first use, so the command line reads this module without torch.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xsyn.utils.errors import InputError
from xsyn.utils.registry import Registry

_XLMR = "transformers.models.xlm_roberta.modeling_xlm_roberta"
_ROBERTA = "transformers.models.roberta.modeling_roberta"
_BERT = "transformers.models.bert.modeling_bert"
_CAMEMBERT = "transformers.models.camembert.modeling_camembert"


@dataclass(frozen=True)
class EncoderFamily:
    """One family: what its checkpoints are called, and the parts xsyn takes from transformers for it.

    - `checkpoint_types`: the `model_type` of the plain checkpoints it lifts;
    - `xsyn_type`: the `model_type` of xsyn's config (saved models, Auto classes), `stem` its class names
      (`Xsyn<stem>Model`, `Xsyn<stem>ForSequenceClassification`, ...);
    - `embeddings`: the embeddings module (BERT's layers come after it);
    - `prefix`: where a checkpoint keeps the encoder's weights (`roberta.embeddings...`);
    - `sequence_head`: the sentence classifier on the first token, or None for BERT's pooler + linear layer;
    - `padded_positions`: position ids count from the padding index + 1 and skip padding (RoBERTa);
    - `config`: transformers' config class (its defaults: the padding index, ...);
    - `plain`: transformers' own classes per head (`None` = the bare encoder), the models xsyn must equal
      with syntax off;
    - `paper`: its BibTeX, cited by model cards.
    """

    name: str
    checkpoint_types: tuple[str, ...]
    xsyn_type: str
    stem: str
    embeddings: str
    prefix: str
    sequence_head: str | None
    padded_positions: bool
    config: str
    plain: dict[str | None, str] = field(default_factory=dict)
    paper: str = ""


def _plain(module: str, stem: str) -> dict[str | None, str]:
    return {None: f"{module}:{stem}Model", "sequence": f"{module}:{stem}ForSequenceClassification",
            "token": f"{module}:{stem}ForTokenClassification", "qa": f"{module}:{stem}ForQuestionAnswering"}


_BERT_PAPER = """@inproceedings{devlin-etal-2019-bert,
  title = "{BERT}: Pre-training of Deep Bidirectional Transformers for Language Understanding",
  author = "Devlin, Jacob and Chang, Ming-Wei and Lee, Kenton and Toutanova, Kristina",
  booktitle = "Proceedings of the 2019 Conference of the North {A}merican Chapter of the Association for
               Computational Linguistics: Human Language Technologies, Volume 1 (Long and Short Papers)",
  year = "2019",
  publisher = "Association for Computational Linguistics",
  url = "https://aclanthology.org/N19-1423",
  pages = "4171--4186"
}"""
_XLMR_PAPER = """@inproceedings{conneau-etal-2020-unsupervised,
  title = "Unsupervised Cross-lingual Representation Learning at Scale",
  author = "Conneau, Alexis and Khandelwal, Kartikay and Goyal, Naman and Chaudhary, Vishrav and Wenzek, Guillaume
            and Guzm{\\'a}n, Francisco and Grave, Edouard and Ott, Myle and Zettlemoyer, Luke and Stoyanov, Veselin",
  booktitle = "Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics",
  year = "2020",
  publisher = "Association for Computational Linguistics",
  url = "https://aclanthology.org/2020.acl-main.747",
  pages = "8440--8451"
}"""
_ROBERTA_PAPER = """@article{liu-etal-2019-roberta,
  title = "{RoBERTa}: A Robustly Optimized {BERT} Pretraining Approach",
  author = "Liu, Yinhan and Ott, Myle and Goyal, Naman and Du, Jingfei and Joshi, Mandar and Chen, Danqi and
            Levy, Omer and Lewis, Mike and Zettlemoyer, Luke and Stoyanov, Veselin",
  journal = "arXiv preprint arXiv:1907.11692",
  year = "2019",
  url = "https://arxiv.org/abs/1907.11692"
}"""
_CAMEMBERT_PAPER = """@inproceedings{martin-etal-2020-camembert,
  title = "{C}amem{BERT}: a Tasty {F}rench Language Model",
  author = "Martin, Louis and Muller, Benjamin and Ortiz Su{\\'a}rez, Pedro Javier and Dupont, Yoann and
            Romary, Laurent and de la Clergerie, {\\'E}ric and Seddah, Djam{\\'e} and Sagot, Beno{\\^\\i}t",
  booktitle = "Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics",
  year = "2020",
  publisher = "Association for Computational Linguistics",
  url = "https://aclanthology.org/2020.acl-main.645",
  pages = "7203--7219"
}"""
XSYN_BERT = "xsyn_bert"

FAMILIES: Registry[EncoderFamily] = Registry("encoder family", {family.name: family for family in (
    EncoderFamily("bert", ("bert",), XSYN_BERT, "Bert", f"{_BERT}:BertEmbeddings", "bert", None, False,
                  "transformers:BertConfig", _plain(_BERT, "Bert"), _BERT_PAPER),
    EncoderFamily("xlm-roberta", ("xlm-roberta",), "xsyn_xlm_roberta", "XLMRoberta",
                  f"{_XLMR}:XLMRobertaEmbeddings", "roberta", f"{_XLMR}:XLMRobertaClassificationHead", True,
                  "transformers:XLMRobertaConfig", _plain(_XLMR, "XLMRoberta"), _XLMR_PAPER),
    EncoderFamily("roberta", ("roberta",), "xsyn_roberta", "Roberta", f"{_ROBERTA}:RobertaEmbeddings", "roberta",
                  f"{_ROBERTA}:RobertaClassificationHead", True, "transformers:RobertaConfig",
                  _plain(_ROBERTA, "Roberta"), _ROBERTA_PAPER),
    EncoderFamily("camembert", ("camembert",), "xsyn_camembert", "Camembert", f"{_CAMEMBERT}:CamembertEmbeddings",
                  "roberta", f"{_CAMEMBERT}:CamembertClassificationHead", True, "transformers:CamembertConfig",
                  _plain(_CAMEMBERT, "Camembert"), _CAMEMBERT_PAPER),
)}, of=EncoderFamily, name_of=lambda family: family.name, error=InputError)


def family_named(name: str) -> EncoderFamily:
    """A family by its name (`bert`, `xlm-roberta`, ...); else an `InputError` listing them."""
    return FAMILIES[name]


def tokenizer_family(tokenizer: Any) -> EncoderFamily | None:
    """The family a tokenizer belongs to: by its class, as transformers' tokenizer table pairs classes with
    model types, else by the `model_type` of a config.json beside it (a checkpoint's folder); None for a
    generic tokenizer (`TokenizersBackend`, `PreTrainedTokenizerFast`) that says neither."""
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING_NAMES

    own = type(tokenizer).__name__.removesuffix("Fast")
    for family in FAMILIES.values():
        for model_type in family.checkpoint_types:
            names = TOKENIZER_MAPPING_NAMES.get(model_type) or ()
            names = (names,) if isinstance(names, str) else names
            if own in {name.removesuffix("Fast") for name in names if name}:
                return family
    config = Path(str(getattr(tokenizer, "name_or_path", "") or "")) / "config.json"
    try:
        model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None
    return _by_type().get(model_type)


def _by_type() -> dict[str, EncoderFamily]:
    return {t: f for f in FAMILIES.values() for t in (*f.checkpoint_types, f.xsyn_type)}


def family_of(model_type: str, source: str = "the model") -> EncoderFamily:
    """The family of a checkpoint's or an xsyn config's `model_type`; else an `InputError` listing them."""
    by_type = _by_type()
    if model_type not in by_type:
        known = ", ".join(t for f in FAMILIES.values() for t in f.checkpoint_types)
        raise InputError(f"{source} is a {model_type!r} model; xsyn's variants are built on encoders with BERT's "
                         f"layers: model_type {known} (or a saved xsyn model)")
    return by_type[model_type]


def resolve(target: str) -> Any:
    """The object at "module:attribute"."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)
