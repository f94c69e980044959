"""xsyn's config and model classes in transformers' Auto classes.

After `register_auto_classes()`, `AutoConfig`, `AutoModel` and `AutoModelFor{SequenceClassification,
TokenClassification,QuestionAnswering,MultipleChoice}.from_pretrained(checkpoint)` load a saved xsyn model like
any other. `import xsyn` arranges for this to run by itself (see `xsyn/__init__.py`). The joint
intent-slot head has no Auto class in transformers: load it with `xsyn.models.load_model`.
"""

from __future__ import annotations

_state = {"registered": False}


def register_auto_classes() -> None:
    """Register once; a call made while registration is under way (a nested import) returns at once."""
    if _state["registered"]:
        return
    _state["registered"] = True
    try:
        from transformers import (
            AutoConfig,
            AutoModel,
            AutoModelForMultipleChoice,
            AutoModelForQuestionAnswering,
            AutoModelForSequenceClassification,
            AutoModelForTokenClassification,
        )

        from xsyn.models.configuration import XsynBertConfig
        from xsyn.models.heads import (
            XsynBertForMultipleChoice,
            XsynBertForQuestionAnswering,
            XsynBertForSequenceClassification,
            XsynBertForTokenClassification,
        )
        from xsyn.models.modeling import XsynBertModel

        AutoConfig.register(XsynBertConfig.model_type, XsynBertConfig, exist_ok=True)
        for auto, model in ((AutoModel, XsynBertModel),
                            (AutoModelForSequenceClassification, XsynBertForSequenceClassification),
                            (AutoModelForTokenClassification, XsynBertForTokenClassification),
                            (AutoModelForQuestionAnswering, XsynBertForQuestionAnswering),
                            (AutoModelForMultipleChoice, XsynBertForMultipleChoice)):
            auto.register(XsynBertConfig, model, exist_ok=True)
    except BaseException:
        _state["registered"] = False
        raise
