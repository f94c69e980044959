"""Another package extends xsyn through entry points, as `pip install` would leave it: a syntax variant with a
setting of its own (group `xsyn.variants`), a task kind (`xsyn.task_kinds`) with a metric of its own
(`xsyn.metrics`). Nothing in xsyn is edited; the package is found after xsyn's modules were imported."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from xsyn.cli import main
from xsyn.data.kinds import KINDS
from xsyn.data.synth import write_vocab
from xsyn.metrics import METRICS
from xsyn.models.variants import VARIANT_REGISTRY
from xsyn.utils.registry import PluginError, Registry, UnknownName

PLUGIN = '''
"""xsyn_outside: a package that is not xsyn."""
from dataclasses import dataclass, replace

from xsyn.data.kinds import KINDS
from xsyn.metrics.base import Metric, percent
from xsyn.models.variants.base import SyntaxVariant
from xsyn.utils.schema import between, strict, validated_field


@strict
@dataclass
class ScaledSettings:
    scaled_factor: float = validated_field(between(0, 10), default=1.0)


class Scaled(SyntaxVariant):
    """BERT's last hidden state times `scaled_factor` (pooled again)."""

    name = "scaled"
    settings = ScaledSettings

    def output(self, model, tree, hidden):
        return hidden * model.config.scaled_factor


VARIANT = Scaled()


@dataclass(frozen=True)
class BalancedAccuracy(Metric):
    """The mean over gold classes of the share of the class predicted right."""

    id = "balanced_accuracy"
    primary = "balanced_accuracy"

    def example_counts(self, prediction, reference):
        return {f"total_{reference}": 1.0, f"correct_{reference}": float(prediction == reference)}

    def scores(self, totals):
        classes = [name[len("total_"):] for name in totals if name.startswith("total_")]
        return {"balanced_accuracy": sum(percent(totals["correct_" + c], totals["total_" + c])
                                         for c in classes) / len(classes)}


KIND = replace(KINDS["pair-classification"], name="paraphrase-pair")
'''

ENTRY_POINTS = """[xsyn.variants]
scaled = xsyn_outside:VARIANT

[xsyn.task_kinds]
paraphrase-pair = xsyn_outside:KIND

[xsyn.metrics]
balanced_accuracy = xsyn_outside:BalancedAccuracy
"""

REGISTRIES = (VARIANT_REGISTRY, KINDS, METRICS)


def install(folder: Path, entry_points: str = ENTRY_POINTS, module: str = PLUGIN) -> None:
    (folder / "xsyn_outside.py").write_text(module, encoding="utf-8")
    info = folder / "xsyn_outside-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: xsyn-outside\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    sys.modules.pop("xsyn_outside", None)  # the module as written now
    for registry in REGISTRIES:
        registry.refresh()


@pytest.fixture
def outside(tmp_path):
    folder = tmp_path / "site"
    folder.mkdir()
    yield folder
    sys.path.remove(str(folder))
    sys.modules.pop("xsyn_outside", None)
    for registry in REGISTRIES:
        registry.refresh()


def test_a_variant_and_a_task_kind_with_its_metric_from_another_package_fine_tune_and_evaluate(outside, tmp_path):
    from xsyn.models.configuration import XsynBertConfig
    from xsyn.models.modeling import XsynBertModel

    earlier = XsynBertConfig(num_hidden_layers=1, hidden_size=32, num_attention_heads=2, intermediate_size=64)
    install(outside)
    # registered after the config module was imported: every config, gat's included, still works
    assert XsynBertConfig(variant="gat", gat_delta=2).scaled_factor == 1.0
    assert XsynBertModel(earlier).config.scaled_factor == 1.0  # a config made before is checked as it is built

    listed = CliRunner().invoke(main, ["settings", "--variant", "scaled"])
    assert listed.exit_code == 0, listed.output
    assert [line.split()[:3] for line in listed.output.splitlines() if line.startswith("scaled_factor")] == [
        ["scaled_factor", "a", "number"]]

    card = tmp_path / "pairs.toml"
    card.write_text((Path(__file__).parents[1] / "tasks" / "synth.toml").read_text(encoding="utf-8")
                    .replace('name = "synth"', 'name = "pairs"')
                    .replace('kind = "pair-classification"', 'kind = "paraphrase-pair"')
                    .replace('metric = "accuracy"', 'metric = "balanced_accuracy"'), encoding="utf-8")
    run = tmp_path / "run"
    common = ["--task", str(card), "--variant", "scaled", "--model", "tiny", "--tokenizer",
              str(write_vocab(tmp_path / "vocab.txt")), "--train-lang", "svo", "--parser", "chain", "--quiet",
              "--max-train-examples", "32", "--set", "max_eval_examples=16", "--batch-size", "16",
              "--max-length", "24", "--max-steps", "2", "--cache-dir", str(tmp_path / "cache")]
    refused = CliRunner().invoke(main, ["finetune", *common, "--set", "scaled_factor=11.5"])
    assert refused.exit_code != 0 and "--set: scaled_factor: must be from 0 to 10, got 11.5" in refused.output
    trained = CliRunner().invoke(main, ["finetune", *common, "--set", "scaled_factor=2.5", "--output-dir", str(run)])
    assert trained.exit_code == 0, trained.output
    assert json.loads((run / "config.json").read_text())["model_settings"] == {"scaled_factor": 2.5}
    saved = json.loads((run / "best" / "config.json").read_text())
    assert (saved["variant"], saved["scaled_factor"]) == ("scaled", 2.5)

    scored = CliRunner().invoke(main, ["evaluate", "--model-dir", str(run), "--langs", "svo,sov",
                                       "--max-eval-examples", "12", "--quiet", "--output-dir", str(tmp_path / "ev")])
    assert scored.exit_code == 0, scored.output
    results = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert results["metric"] == "balanced_accuracy"
    for lang in ("svo", "sov"):  # the plugin's metric, worked out here from what was predicted
        rows = [json.loads(line) for line in (tmp_path / "ev" / "per_example" / f"test-{lang}.jsonl").open()]
        gold = [row["reference"] for row in rows]
        recalls = [100 * sum(row["prediction"] == row["reference"] == c for row in rows) / gold.count(c)
                   for c in set(gold)]
        assert len(rows) == 12 and results["per_language"][lang] == pytest.approx(sum(recalls) / len(recalls))


def test_the_built_in_name_lists_stay_built_in_with_a_plugin_installed(outside):
    """`VARIANTS` and `METRIC_IDS` are the built-in names even where a plug-in is installed before xsyn is imported
    (they were read from the registries, entry points included); `variant_names()` and `METRICS` list it."""
    import ast
    import os
    import subprocess

    install(outside)
    code = ("from xsyn.metrics import METRIC_IDS, METRICS; from xsyn.models.variants import VARIANTS, variant_names; "
            "print(VARIANTS, variant_names(), METRIC_IDS, tuple(METRICS), sep='\\n')")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join([str(outside), *sys.path])}).stdout
    variants, every_variant, metrics, every_metric = map(ast.literal_eval, shown.splitlines())
    assert variants == ("none", "gat", "sla", "wla", "sdoi", "sep") and every_variant == (*variants, "scaled")
    assert "balanced_accuracy" not in metrics and every_metric == (*metrics, "balanced_accuracy")


def test_a_broken_or_clashing_entry_point_is_named_with_its_package(outside):
    install(outside, "[xsyn.metrics]\nbalanced_accuracy = xsyn_outside:VARIANT\n")
    with pytest.raises(PluginError, match=r"entry point balanced_accuracy = xsyn_outside:VARIANT \(group "
                                          r"xsyn.metrics, package xsyn-outside\) must name a "
                                          r"xsyn.metrics.base.Metric whose name is 'balanced_accuracy'"):
        METRICS["balanced_accuracy"]
    install(outside, "[xsyn.task_kinds]\npair-classification = xsyn_outside:KIND\n")
    with pytest.raises(PluginError,
                       match="must name a xsyn.data.kinds.base.TaskKind whose name is 'pair-classification'"):
        KINDS.names()


def test_the_registry_loads_lazily_and_names_the_choices():
    registry = Registry("thing", {"json": "json:dumps", "three": 3})
    assert list(registry) == ["json", "three"] and "json" in registry and "jsn" not in registry
    assert registry["json"] is json.dumps and registry["three"] == 3
    with pytest.raises(UnknownName, match=r"^unknown thing 'jsno'; choose one of json, three; did you mean 'json'\?$"):
        registry["jsno"]
    registry.add("late", "json:loads")
    assert registry.names() == ("json", "three", "late") and registry["late"] is json.loads
    with pytest.raises(ValueError, match="thing 'late' is already registered as json:loads"):
        registry.add("late", "json:load")
