"""xsyn's config and model classes in transformers' Auto classes.

After `register_auto_classes()`, `AutoConfig`, `AutoModel` and `AutoModelFor{SequenceClassification,
TokenClassification,QuestionAnswering,MultipleChoice}.from_pretrained(checkpoint)` load a saved xsyn model (of any
encoder family: `xsyn_bert`, `xsyn_xlm_roberta`, ...) like any other. `import xsyn` arranges for
this to run by itself (see `xsyn/__init__.py`). The joint intent-slot head has no Auto class in
transformers: load it with `xsyn.models.load_model`.
"""

from __future__ import annotations

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMultipleChoice,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from xsyn.models.encoders import family_classes
from xsyn.models.families import FAMILIES

_state = {"registered": False}


def register_auto_classes() -> None:
    """Register once; a call made while registration is under way (a nested import) returns at once."""
    if _state["registered"]:
        return
    _state["registered"] = True
    try:
        autos = {None: AutoModel, "sequence": AutoModelForSequenceClassification,
                 "token": AutoModelForTokenClassification, "qa": AutoModelForQuestionAnswering,
                 "multiple_choice": AutoModelForMultipleChoice}
        for family in FAMILIES.values():  # BERT's classes, XLM-R's, RoBERTa's
            classes = family_classes(family)
            AutoConfig.register(family.xsyn_type, classes.config, exist_ok=True)
            for head, auto in autos.items():
                auto.register(classes.config, classes.model if head is None else classes.heads[head], exist_ok=True)
    except BaseException:
        _state["registered"] = False
        raise
