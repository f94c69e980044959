"""The variant registry: a variant is one folder plus one registry line, and nothing outside the registry
knows a variant (or a head) by its name."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import xsyn
from xsyn.models import variants
from xsyn.models.heads import HEAD_CLASSES
from xsyn.models.variants import get_variant, register_variant, variant_names
from xsyn.models.variants.base import LossTerm, Pretraining, SyntaxConfigError, SyntaxVariant
from xsyn.utils.schema import setting, strict

# -- a variant defined here, in the test file alone ----------------------------------------------------


class ToyMix(nn.Module):
    """Adds a learned multiple of each piece's UPOS id to BERT's output: the simplest use of the trees."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.zeros(()))

    def forward(self, hidden: torch.Tensor, upos: torch.Tensor) -> torch.Tensor:
        return hidden + self.scale * upos.unsqueeze(-1).to(hidden.dtype)


class Toy(SyntaxVariant):
    name = "toy"
    losses = (LossTerm(("toy_loss",), "initializer_range"),)  # weighed by an existing config number
    parameter_markers = ("toy",)

    def batch_fields(self, config) -> tuple[str, ...]:
        return ("tree_parent", "tree_upos")

    def install(self, model) -> None:
        model.toy = ToyMix()

    def init_weights(self, module: Any, config) -> None:
        if isinstance(module, ToyMix):
            module.scale.data.fill_(0.5)

    def output(self, model, tree, hidden: torch.Tensor) -> torch.Tensor:
        return model.toy(hidden, tree.upos)

    def auxiliary_losses(self, model, context, tree, batch, hidden, with_losses) -> dict[str, torch.Tensor]:
        return {"toy_loss": model.toy.scale.pow(2)} if with_losses else {}


TOY = Toy()


@pytest.fixture
def toy():
    register_variant("toy", f"{__name__}:TOY")
    yield get_variant("toy")
    variants.VARIANT_REGISTRY.remove("toy")  # leave the registry as the other tests expect it


def test_a_variant_registered_from_outside_the_package_fine_tunes_through_the_normal_path(toy, tmp_path):
    from xsyn.data.cards import load_card
    from xsyn.data.synth import write_vocab
    from xsyn.models.factory import load_model
    from xsyn.run.settings import resolve
    from xsyn.run.train import finetune

    out = tmp_path / "run"
    flags = {"model": "tiny", "tokenizer": str(write_vocab(tmp_path / "vocab.txt")), "parser": "chain",
             "train_lang": "svo", "max_train_examples": 16, "max_eval_examples": 16, "batch_size": 8,
             "max_length": 24, "max_steps": 2, "eval_every": 2, "log_every": 1, "output_dir": str(out),
             "cache_dir": str(tmp_path / "cache")}
    summary = finetune(resolve("synth", "toy", load_card("synth"), {}, flags), progress=False)
    assert summary["variant"] == "toy" and summary["steps"] == 2
    steps = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    logged = [line for line in steps if "loss" in line]
    assert [line["step"] for line in logged] == [1, 2] and all(line["toy_loss"] > 0 for line in logged)
    # loss = task + initializer_range (0.02) * toy_loss, as the variant's LossTerm says
    assert logged[0]["loss"] == pytest.approx(logged[0]["task_loss"] + 0.02 * logged[0]["toy_loss"], rel=1e-5)
    model = load_model(out / "best")  # config.json keeps the name; the registry gives the variant back
    assert model.config.variant == "toy" and [name for name, _ in model.bert.syntax_parameters()] == ["toy.scale"]
    assert model.bert.toy.scale.item() != 0.5  # trained


def test_an_experiment_file_may_name_a_registered_variant(toy, tmp_path):
    from xsyn.experiments.experiment_file import load_experiment

    path = tmp_path / "toy.toml"
    path.write_text('tasks = ["synth"]\nvariants = ["none", "toy"]\nseeds = [1]\nmodels = ["tiny"]\n'
                    '[settings]\nparser = "chain"\n')
    assert [cell.name for cell in load_experiment(path).cells] == ["synth/none-seed1", "synth/toy-seed1"]


def test_an_unknown_variant_is_named_with_the_registered_ones():
    registered = ", ".join(variant_names())  # the built-in ones: none, gat, sla, wla, sdoi, sep
    with pytest.raises(SyntaxConfigError, match=f"unknown variant 'tree'; choose one of {registered}$"):
        get_variant("tree")
    with pytest.raises(SyntaxConfigError, match="unknown variant 'gta'; .*; did you mean 'gat'"):
        get_variant("gta")
    with pytest.raises(ValueError, match="already registered"):
        register_variant("gat", "somewhere:ELSE")


class ToyWithModule(Toy):
    name = "toy_module"

    def load_pretrained(self, model, directory) -> None:
        model.toy.scale.data.fill_(1.0)


def test_a_pretrained_option_for_a_variant_without_a_module_names_the_registered_ones_that_have_one(toy):
    from xsyn.models.variants import check_pretrained
    from xsyn.run.workflow import finetune_settings

    register_variant("toy_module", ToyWithModule())
    try:
        check_pretrained("gat", "--pretrained-syntax")  # gat has one: nothing to say
        with pytest.raises(SyntaxConfigError, match=r"^--freeze-pretrained: variant 'toy' has no pre-trained syntax "
                                                    r"module; drop --freeze-pretrained, or choose a variant that has "
                                                    r"one \(gat, toy_module\)$"):
            finetune_settings(task="synth", variant="toy", model="tiny", parser="chain", freeze_pretrained=True)
    finally:
        variants.VARIANT_REGISTRY.remove("toy_module")


@strict
@dataclass
class ToySettings:
    toy_depth: int = setting(2, help="the toy's depth")


class ToyPretrained(ToyWithModule):
    name = "toyp"
    settings = ToySettings
    pretraining = Pretraining({"toy_depth": "how deep the toy pre-trains"})


def test_the_pretraining_command_and_its_options_are_the_declaring_variants(monkeypatch):
    from click.testing import CliRunner

    from xsyn.cli import main

    shown = " ".join(CliRunner().invoke(main, ["pretrain-gat", "--help"]).output.split())
    assert "--gat-delta INTEGER GAT attention reaches tree distance <= delta" in shown  # gat's `pretraining`
    assert "--gat-attention TEXT dot: the paper's eq. 2" in shown and "--toy-depth" not in shown
    register_variant("toyp", ToyPretrained())
    monkeypatch.setattr(get_variant("gat"), "pretraining", None)  # the toy is now the variant xsyn pre-trains
    try:
        listed = CliRunner().invoke(main, ["--help"]).output
        assert "pretrain-toyp" in listed and "pretrain-gat" not in listed
        shown = " ".join(CliRunner().invoke(main, ["pretrain-toyp", "--help"]).output.split())
        assert "Usage: main pretrain-toyp" in shown and "--toy-depth INTEGER how deep the toy pre-trains" in shown
        assert "--gat-delta" not in shown
        assert CliRunner().invoke(main, ["pretrain-gat", "--help"]).exit_code == 2  # no such command now
    finally:
        variants.VARIANT_REGISTRY.remove("toyp")


def test_the_pretrained_variants_options_and_the_recipes_are_pretraining_settings():
    """`xsyn.pretraining` trains the declaring variant's module: each option it declares, and each recipe's value,
    is a `PretrainSettings` field, and a recipe's model settings are the variant's or BERT's."""
    from dataclasses import fields

    from xsyn.pretraining.recipes import MODEL_SETTINGS, RECIPES
    from xsyn.pretraining.trainer import PretrainSettings

    variant = variants.pretraining_variant()
    own = {f.name for f in fields(PretrainSettings)}
    assert variant.name == "gat" and set(variant.pretraining.options) <= own and MODEL_SETTINGS in own
    for recipe in RECIPES.values():
        assert set(recipe) <= own and set(recipe[MODEL_SETTINGS]) <= set(variant.setting_names())


def test_the_command_line_and_the_cards_read_the_registry_without_importing_torch():
    import subprocess
    import sys

    code = ("import sys\nfrom xsyn.models.variants import all_variants, model_settings\n"
            "from xsyn.data.cards import list_tasks, load_card\n"
            "print([v.name for v in all_variants()], model_settings()['gat_delta'][0].__name__, "
            "load_card('pawsx').hyperparameters['gat']['gat_delta'], 'torch' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.stdout.strip() == f"{list(variant_names())} int 4 False", res.stderr


SHARED_FOLDERS = {"gated_local"}  # the base sla and wla share, not a variant (see its docstring)


def test_a_built_in_variant_is_one_folder_and_one_registry_line():
    """`variants/<name>/__init__.py` declares the variant, registered under its folder's name; its torch modules
    are `layers.py` beside it (or the shared base's), reached through `layers()` alone: no hook imports."""
    folder = Path(variants.__file__).parent
    declared = {path.parent.name for path in folder.glob("*/__init__.py")} - SHARED_FOLDERS
    built_in = {name for name in variant_names() if type(get_variant(name)).__module__.startswith("xsyn.")}
    assert declared == built_in and "gat" in declared
    for name in declared:
        variant = get_variant(name)
        assert type(variant).__module__ == f"xsyn.models.variants.{name}"
        if type(variant).install is not SyntaxVariant.install:  # it has modules of its own
            layers = variant.layers()
            assert layers is variant.layers() and Path(layers.__file__).name == "layers.py"
            assert Path(layers.__file__).parent.name in {name} | SHARED_FOLDERS
    for path in folder.glob("*/__init__.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nested = [node.lineno for function in ast.walk(tree) if isinstance(function, ast.FunctionDef)
                  for node in ast.walk(function) if isinstance(node, ast.Import | ast.ImportFrom)]
        assert nested == [], f"{path}: imports inside hooks; reach the layers through self.layers()"


def test_the_cards_paper_names_come_from_the_variants():
    assert variants.paper_names() == {"delta": "gat_delta", "alpha": "structural_loss_weight",
                                      "gat_dim": "gat_head_size", "m": "sla_distance",
                                      "punct_visible": "sla_punct_visible", "k": "wla_window"}


@pytest.mark.parametrize("variant", variant_names())
def test_each_variants_settings_are_config_attributes_with_their_schemas_rules(variant):
    from xsyn.models.configuration import XsynBertConfig

    settings = get_variant(variant).settings
    if settings is None:
        return
    config = XsynBertConfig()
    for name, field in settings.__dataclass_fields__.items():
        assert getattr(config, name) == field.default  # every registered variant's settings, at their defaults
        rules = field.metadata.get("validator")
        if rules is not None:  # a setting with a rule: a value that breaks it is named, as --set names it
            bad = {"str": "nonsense"}.get(type(field.default).__name__, -5)
            with pytest.raises(SyntaxConfigError, match=f"^{name}: "):
                XsynBertConfig(**{name: bad})


# -- the architecture: names are the registry's --------------------------------------------------------

HEAD_NAMES = tuple(HEAD_CLASSES)  # the head registry's names


def _names_compared(tree: ast.AST, names: set[str], subject: str) -> list[int]:
    """Lines comparing an expression about `subject` (`config.variant`, `head`, or a loop variable over
    `variants`) with one of `names` (==, !=, in, not in), calls handing one of `names` to a function about
    `subject` as a literal (`build_model(..., "gat")`), or tables keyed by two or more of them."""
    loops = {target.id for node in ast.walk(tree) if isinstance(node, ast.comprehension | ast.For)
             and subject in ast.unparse(node.iter) for target in ast.walk(node.target) if isinstance(target, ast.Name)}

    def about(node: ast.AST) -> bool:
        text = ast.unparse(node)
        return subject in text or any(isinstance(n, ast.Name) and n.id in loops for n in ast.walk(node))

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            constants = {c.value for operand in operands for c in ast.walk(operand)
                         if isinstance(c, ast.Constant) and isinstance(c.value, str)}
            if constants & names and any(about(o) for o in operands):
                found.append(node.lineno)
        elif isinstance(node, ast.Call) and subject == "variant":
            literal = [a for a in node.args if isinstance(a, ast.Constant) and a.value in names]
            if literal and ast.unparse(node.func).split(".")[-1] in ("build_model", "resolve", "build", "get_variant"):
                found.append(node.lineno)
        elif isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if len(keys & names) >= 2 and subject == "variant":
                found.append(node.lineno)
    return found


def test_no_module_outside_the_registry_tests_a_variant_or_a_head_by_name():
    package = Path(xsyn.__file__).parent
    offenders = {}
    for path in package.rglob("*.py"):
        relative = path.relative_to(package).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lines = []
        if not relative.startswith("models/variants/"):
            lines += _names_compared(tree, set(variant_names()), "variant")
        if relative != "models/heads.py":
            lines += _names_compared(tree, set(HEAD_NAMES), "head")
        if lines:
            offenders[relative] = lines
    assert offenders == {}


def test_the_architecture_check_finds_a_name_comparison():
    code = ('if config.variant == "sdoi": pass\nif head in ("qa", "token"): pass\n'
            'PAPERS = {"gat": 1, "sla": 2}\n'
            'chosen = [v for v in variants.split(",") if v != "none"]\n'  # the bench's old baseline rule
            'encoder = build_model(settings.model, "gat", None)\n'  # pre-training's old variant
            'if options.get("quoting") == "none": pass\n')  # a word, not a variant
    tree = ast.parse(code)
    assert sorted(_names_compared(tree, set(variant_names()), "variant")) == [1, 3, 4, 5]
    assert _names_compared(tree, set(HEAD_NAMES), "head") == [2]


def test_the_models_package_has_no_import_circle():
    """Every import counts (TYPE_CHECKING and function-level ones too): the variants and the layers they install
    name transformers' base classes, never the config or model modules that read the registry."""
    import grimp

    graph = grimp.build_graph("xsyn", include_external_packages=False)
    models = sorted(m for m in graph.modules if m.startswith("xsyn.models"))
    circles = [(a, b) for i, a in enumerate(models) for b in models[i + 1:]
               if graph.chain_exists(a, b) and graph.chain_exists(b, a)]
    assert circles == []
