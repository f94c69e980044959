"""`import xsyn` makes saved checkpoints loadable with transformers' Auto classes (in a fresh process),
without importing torch or transformers itself; the config names every head's outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xsyn.models import SyntaxConfigError, XsynBertConfig, build_model, label_settings, load_model

REPO = Path(__file__).resolve().parents[1]
LABELS = ["entailment", "neutral", "contradiction"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def fresh_python(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_import_xsyn_and_its_command_line_load_neither_torch_nor_transformers():
    res = fresh_python("import xsyn, xsyn.cli, sys\n"
                       "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


@pytest.fixture(scope="module")
def checkpoints(small_tokenizer, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("checkpoints")
    out = {}
    for head, variant in (("sequence", "gat"), ("token", "sla"), ("qa", "sdoi"), ("intent_slot", "none")):
        model = build_model("tiny", variant, head, tokenizer=small_tokenizer,
                            **label_settings(head, LABELS, TAGS))
        model.save_pretrained(root / head)
        out[head] = root / head
    return out


def test_auto_classes_load_every_head_in_a_fresh_process_after_import_xsyn(checkpoints):
    code = f"""
import json, xsyn
from transformers import (AutoConfig, AutoModel, AutoModelForQuestionAnswering,
                          AutoModelForSequenceClassification, AutoModelForTokenClassification)
dirs = {json.dumps({k: str(v) for k, v in checkpoints.items()})}
out = {{
    "sequence": AutoModelForSequenceClassification.from_pretrained(dirs["sequence"]),
    "token": AutoModelForTokenClassification.from_pretrained(dirs["token"]),
    "qa": AutoModelForQuestionAnswering.from_pretrained(dirs["qa"]),
    "encoder": AutoModel.from_pretrained(dirs["intent_slot"]),
}}
config = AutoConfig.from_pretrained(dirs["intent_slot"])
print(json.dumps({{k: [type(m).__name__, m.config.variant, m.config.id2label] for k, m in out.items()}}))
print(json.dumps([type(config).__name__, config.intent_labels, config.slot_labels]))
"""
    res = fresh_python(code)
    assert res.returncode == 0, res.stderr
    models, config = (json.loads(line) for line in res.stdout.strip().splitlines())
    assert models["sequence"] == ["XsynBertForSequenceClassification", "gat", {"0": "entailment", "1": "neutral",
                                                                                 "2": "contradiction"}]
    assert models["token"][:2] == ["XsynBertForTokenClassification", "sla"]
    assert list(models["token"][2].values()) == TAGS
    assert models["qa"][:2] == ["XsynBertForQuestionAnswering", "sdoi"]
    assert models["encoder"][:2] == ["XsynBertModel", "none"]
    assert config == ["XsynBertConfig", LABELS, TAGS]


def test_import_xsyn_after_transformers_registers_at_once(checkpoints):
    code = f"""
from transformers import AutoModelForSequenceClassification as Auto
try:
    Auto.from_pretrained({str(checkpoints['sequence'])!r})
except ValueError as err:
    print("before import xsyn:", "xsyn_bert" in str(err))
import xsyn
print("after:", type(Auto.from_pretrained({str(checkpoints['sequence'])!r})).__name__)
"""
    res = fresh_python(code)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[:2] == ["before import xsyn: True", "after: XsynBertForSequenceClassification"]


def test_a_checkpoint_names_its_outputs_without_xsyn_task_json(checkpoints):
    sequence = load_model(checkpoints["sequence"])
    assert sequence.config.id2label == dict(enumerate(LABELS))
    assert sequence.config.label2id == {name: i for i, name in enumerate(LABELS)}
    assert sequence.classifier.out_features == 3
    joint = load_model(checkpoints["intent_slot"])
    assert (joint.config.intent_labels, joint.config.slot_labels) == (LABELS, TAGS)
    assert (joint.intent_classifier.out_features, joint.slot_classifier.out_features) == (3, 5)


def test_label_names_must_match_the_head_size():
    with pytest.raises(SyntaxConfigError, match="intent_labels: has 2 names but num_intents=3"):
        XsynBertConfig(num_hidden_layers=2, intent_labels=["a", "b"], num_intents=3)
