"""Another package extends xsyn through entry points, as `pip install` would leave it: a syntax variant with a
setting of its own (group `xsyn.variants`), a task kind (`xsyn.task_kinds`) with a metric of its own
(`xsyn.metrics`). Nothing in xsyn is edited; the package is found after xsyn's modules were imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
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
from xsyn.utils.schema import between, setting, strict


@strict
@dataclass
class ScaledSettings:
    scaled_factor: float = setting(1.0, check=between(0, 10), help="what BERT's output is multiplied by")


class Scaled(SyntaxVariant):
    """BERT's last hidden state times `scaled_factor` (pooled again)."""

    name = "scaled"
    settings = ScaledSettings
    options = {"scaled_factor": "BERT's output times this factor."}  # `finetune --scaled-factor`

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
XSYN = shutil.which("xsyn", path=str(Path(sys.executable).parent))  # the installed console script


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
    # the variant's own option, which the command takes without an edit of xsyn (checked by the same rule)
    assert "--scaled-factor FLOAT" in CliRunner().invoke(main, ["finetune", "--help"]).output
    refused = CliRunner().invoke(main, ["finetune", *common, "--scaled-factor", "11.5"])
    assert refused.exit_code != 0 and "--scaled-factor: must be from 0 to 10, got 11.5" in refused.output
    trained = CliRunner().invoke(main, ["finetune", *common, "--scaled-factor", "2.5", "--output-dir", str(run)])
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


BROKEN = PLUGIN + '''

@dataclass
class Claims:
    gat_residual: bool = True  # gat's own setting: taking it would change every gat run


class Claiming(Scaled):
    name = "claiming"
    settings = Claims


class OnBert(Scaled):
    name = "on-bert"
    settings = dataclass(type("OnBertSettings", (), {"__annotations__": {"hidden_dropout_prob": float},
                                                     "hidden_dropout_prob": 0.9}))


class Untyped(Scaled):
    name = "untyped"
    settings = {"factor": 1.0}


class Gat(Scaled):
    name = "gat"


CLAIMING, ON_BERT, UNTYPED, GAT = Claiming(), OnBert(), Untyped(), Gat()
'''

BROKEN_POINTS = """[xsyn.variants]
claiming = xsyn_outside:CLAIMING
on-bert = xsyn_outside:ON_BERT
untyped = xsyn_outside:UNTYPED
gat = xsyn_outside:GAT
gone = xsyn_outside_missing:VARIANT

[xsyn.task_kinds]
broken-kind = xsyn_outside_raises:KIND

[xsyn.metrics]
balanced_accuracy = xsyn_outside:VARIANT
"""

# what each broken entry point is refused for, after "entry point NAME = TARGET (group G, package xsyn-outside) "
REFUSALS = {
    (VARIANT_REGISTRY, "claiming"): "declares gat_residual, which variant 'gat' declares already",
    (VARIANT_REGISTRY, "on-bert"): "declares hidden_dropout_prob, which bert's config declares already",
    (VARIANT_REGISTRY, "untyped"): "declares settings = {'factor': 1.0}, which is not a settings schema",
    (VARIANT_REGISTRY, "gone"): "cannot be loaded (ModuleNotFoundError: No module named 'xsyn_outside_missing')",
    (KINDS, "broken-kind"): "cannot be loaded (RuntimeError: its import failed)",
    (METRICS, "balanced_accuracy"): "must name a xsyn.metrics.base.Metric whose name is 'balanced_accuracy'",
}


def test_a_broken_plugin_is_left_out_with_one_warning_and_refused_by_name(outside, caplog):
    from xsyn.data.kinds import label_columns
    from xsyn.models.configuration import XsynBertConfig
    from xsyn.models.variants import all_variants, get_variant, model_settings

    (outside / "xsyn_outside_raises.py").write_text("raise RuntimeError('its import failed')\n", encoding="utf-8")
    install(outside, BROKEN_POINTS, BROKEN)
    with caplog.at_level("WARNING", logger="xsyn"):
        for _ in range(2):  # read twice, warned once
            variants = [variant.name for variant in all_variants()]
            settings = model_settings()
            assert "labels" in label_columns() and "accuracy" in dict(METRICS.items())
    assert variants == ["none", "gat", "sla", "wla", "sdoi", "sep"]  # the gat of the package is not xsyn's
    assert get_variant("gat").__class__.__module__ == "xsyn.models.variants.gat"
    assert settings["gat_residual"] == (bool, False) and "hidden_dropout_prob" not in settings
    config = XsynBertConfig(variant="gat", num_hidden_layers=1, hidden_size=32, num_attention_heads=2)
    assert config.gat_residual is False and config.hidden_dropout_prob == 0.1  # nothing the plugins declared
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == len(set(warnings)) == len(REFUSALS) + 1
    assert any("entry point gat = xsyn_outside:GAT (group xsyn.variants, package xsyn-outside) takes the name 'gat' "
               "of xsyn's own variant: it is refused" in warning for warning in warnings)
    for (registry, name), problem in REFUSALS.items():
        where = f"entry point {name} = "
        assert sum(warning.startswith(where) and problem in warning for warning in warnings) == 1, (name, warnings)
        with pytest.raises(PluginError) as refused:  # asked for by name: its error, naming the package
            registry[name]
        assert str(refused.value).startswith(where) and "package xsyn-outside)" in str(refused.value)
        assert problem in str(refused.value)


def test_the_command_line_goes_on_past_a_broken_plugin_and_names_it_when_asked_for(tmp_path):
    """As a user meets it: an installed package whose parser and variant cannot be imported."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "xsyn_outside.py").write_text("raise ImportError('no module named mistyped')\n", encoding="utf-8")
    info = site / "xsyn_outside-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: xsyn-outside\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[xsyn.parsers]\nflat = xsyn_outside:ENTRY\n[xsyn.variants]\n"
                                           "mine = xsyn_outside:VARIANT\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(site), "HF_HUB_OFFLINE": "1"}
    helped = subprocess.run([XSYN, "--help"], capture_output=True, text=True, env=env)
    assert helped.returncode == 0 and "Commands:" in helped.stdout and "Traceback" not in helped.stderr
    assert helped.stderr.count("entry point flat = xsyn_outside:ENTRY (group xsyn.parsers, package xsyn-outside) "
                               "cannot be loaded (ImportError: no module named mistyped)") == 1
    asked = subprocess.run([XSYN, "settings", "--variant", "mine"], capture_output=True, text=True, env=env)
    assert asked.returncode == 1 and "Traceback" not in asked.stderr
    assert ("Error: entry point mine = xsyn_outside:VARIANT (group xsyn.variants, package xsyn-outside) cannot be "
            "loaded (ImportError: no module named mistyped); fix or uninstall that package") in asked.stderr


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
