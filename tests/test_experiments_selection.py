"""Hyperparameter search with model selection on dev (`[search]`, `xsyn.experiments.selection`): the
papers tune learning rate, epochs and thresholds on dev and report the chosen point's runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from xsyn.experiments.cells import cell_state
from xsyn.experiments.experiment_file import ExperimentError, Overrides, load_experiment
from xsyn.experiments.selection import read_dev_score, select

SEARCH_FILE = """
tasks = ["synth"]
variants = ["none", "gat"]
seeds = [1, 2]
models = ["tiny"]
baseline = "none"
[settings]
parser = "chain"
[grid.gat]
gat_delta = [1, 2]
[search]
learning_rate = [1e-4, 3e-4]
[search.gat]
epochs = [1, 2]
[evaluation]
split = "test"
langs = ["svo", "sov"]
"""


def _experiment(tmp_path: Path, text: str = SEARCH_FILE):
    path = tmp_path / "search.toml"
    path.write_text(text, encoding="utf-8")
    return load_experiment(path, Overrides(runs_dir=str(tmp_path / "runs")))


def test_a_search_makes_cells_for_every_variant_and_evaluates_dev_for_the_choice(tmp_path):
    experiment = _experiment(tmp_path)
    none = [c for c in experiment.cells if c.variant == "none"]
    gat = [c for c in experiment.cells if c.variant == "gat"]
    assert len(none) == 2 * 2  # learning rates x seeds: the baseline is searched too
    assert len(gat) == 2 * 2 * 2 * 2  # gat_delta (grid) x learning rates x epochs x seeds
    assert {c.searched for c in gat} == {("learning_rate", "epochs")}
    assert {c.system for c in gat} == {(("gat_delta", 1),), (("gat_delta", 2),)}
    assert "synth/gat-gat_delta=2-learning_rate=0.0003-epochs=1-seed2" in [c.name for c in gat]
    assert experiment.evaluation_of("synth").splits == ("test",)  # dev is scored by each fine-tune itself
    cell = next(c for c in gat if dict(c.grid) == {"gat_delta": 2, "learning_rate": 3e-4, "epochs": 2})
    config = experiment.config(cell)
    assert (config.learning_rate, config.epochs, config.model_settings["gat_delta"]) == (3e-4, 2, 2)


def test_a_setting_both_compared_and_searched_is_refused(tmp_path):
    with pytest.raises(ExperimentError, match="gat_delta is both in \\[grid\\]"):
        _experiment(tmp_path, SEARCH_FILE + "\n[task.synth.search]\ngat_delta = [1, 4]\n")


def test_the_best_mean_dev_point_is_chosen_per_system_and_only_complete_points_compete(tmp_path):
    experiment = _experiment(tmp_path)
    dev = {}  # cell name -> dev score, invented so that the means are known
    for cell in experiment.cells:
        point = dict(cell.grid)
        score = 50.0 + 10 * (point["learning_rate"] == 3e-4) + point.get("epochs", 0) + cell.seed
        if cell.variant == "gat" and (point["gat_delta"], point["learning_rate"], point["epochs"]) == (1, 1e-4, 2):
            score = 99.0 if cell.seed == 1 else None  # the best-looking point, one seed missing: not a candidate yet
        dev[cell.name] = score
    finished = [c for c in experiment.cells if dev[c.name] is not None]
    shown, selections = select(experiment, "synth", finished,
                               dev_score=lambda folder: dev[str(folder.relative_to(experiment.runs_dir))])
    chosen = {(s.variant, s.system): (dict(s.chosen), round(s.dev_score, 6), s.incomplete) for s in selections}
    assert chosen[("none", ())] == ({"learning_rate": 3e-4}, 61.5, 0)  # means 51.5 vs 61.5
    assert chosen[("gat", (("gat_delta", 1),))] == ({"learning_rate": 3e-4, "epochs": 2}, 63.5, 1)
    assert chosen[("gat", (("gat_delta", 2),))] == ({"learning_rate": 3e-4, "epochs": 2}, 63.5, 0)
    assert len(shown) == 3 * 2 and all(dict(c.grid)["learning_rate"] == 3e-4 for c in shown)
    assert {s.dev_language for s in selections} == {"svo"}  # the training language's dev set


def test_ties_go_to_the_point_listed_first(tmp_path):
    experiment = _experiment(tmp_path)
    none = [c for c in experiment.cells if c.variant == "none"]
    shown, (selection,) = select(experiment, "synth", none, dev_score=lambda folder: 70.0)
    assert dict(selection.chosen) == {"learning_rate": 1e-4}


def test_the_dev_score_is_the_one_the_fine_tune_kept_its_best_checkpoint_on(tmp_path):
    folder = tmp_path / "cell"
    folder.mkdir()
    (folder / "validation_results.json").write_text(json.dumps({"step": 40, "metric": "accuracy", "primary": 81.25,
                                                                "scores": {"accuracy": 81.25}}))
    assert read_dev_score(folder) == 81.25
    (folder / "validation_results.json").write_text('{"step": 40, "primary": NaN}')
    assert read_dev_score(folder) is None and read_dev_score(tmp_path / "none") is None


def test_without_a_search_every_finished_cell_is_shown(tmp_path):
    experiment = _experiment(tmp_path, SEARCH_FILE.split("[search]")[0] + "[evaluation]\nlangs = [\"svo\"]\n")
    shown, selections = select(experiment, "synth", experiment.cells[:3])
    assert shown == experiment.cells[:3] and selections == []


def test_a_task_can_have_its_own_models_and_search(tmp_path):
    text = SEARCH_FILE.replace('models = ["tiny"]', 'models = ["tiny"]\n') + (
        '\n[task.synth]\nmodels = ["tiny", "my/bert-large"]\nsearch = { learning_rate = [5e-6, 1e-5, 2e-5] }\n')
    experiment = _experiment(tmp_path, text)
    assert experiment.models_of("synth") == ["tiny", "my/bert-large"]
    none = [c for c in experiment.cells if c.variant == "none"]
    assert len(none) == 2 * 3 * 2 and {c.model for c in none} == {"tiny", "my/bert-large"}
    assert any(c.name.startswith("synth/none-my_bert-large-learning_rate=5e-06") for c in none)


PAPERS = Path(__file__).resolve().parents[1].parent / "shared" / "papers"


def test_li2021_tables_1_and_2_match_the_paper_text_and_its_printed_averages():
    """Each bundled row of Tables 1 and 2, laid out as the paper prints it, is a line of the paper's text;
    the Avg. column (mean of CoLA MCC, SST-2 Acc, CoNLL F1, FCE F0.5) is the mean of the bundled primaries."""
    from xsyn.experiments.papers import load_paper

    li = load_paper("li2021")
    printed_average = {("base", "none"): 74.6, ("base", "wla"): 75.0, ("base", "sla"): 75.3,
                       ("large", "none"): 76.9, ("large", "wla"): 76.6, ("large", "sla"): 77.4}
    columns = [("cola", "mcc"), ("sst2", "accuracy"), ("conll_ner", "precision"), ("conll_ner", "recall"),
               ("conll_ner", "f1"), ("fce", "precision"), ("fce", "recall"), ("fce", "f0.5")]
    rows = {}
    for size in ("base", "large"):
        uncased, cased = f"bert-{size}-uncased", f"bert-{size}-cased"
        for variant in ("none", "wla", "sla"):
            values = []
            for task, score in columns:
                (table,) = [t for t in li.scores_for(task, uncased if task in ("cola", "sst2") else cased)
                            if t.score == score]
                assert table.table == f"Table 1 ({size})"
                values.append(table.systems[variant]["en"])
            primaries = [values[0], values[1], values[4], values[7]]
            assert abs(sum(primaries) / 4 - printed_average[(size, variant)]) < 0.051
            rows[(size, variant)] = values
    assert li.scores_for("cola", "bert-large-uncased")[0].split == "validation"
    assert li.scores_for("fce", "bert-base-cased")[0].split == "test"
    pairs = {task: li.scores_for(task, "bert-base-uncased")[0] for task in ("qnli", "rte", "mrpc", "stsb")}
    if not PAPERS.is_dir():
        return  # the numbers' agreement with their own averages is checked; the text is not here
    text = next(PAPERS.glob("002_*.txt")).read_text(encoding="utf-8")
    for size, params in (("base", "110M"), ("large", "340M")):
        line = "\t".join(["BERT (Our reimplementation)", params, f"{printed_average[(size, 'none')]:.1f}",
                          *(f"{v:.1f}" for v in rows[(size, "none")])])
        assert line in text
        wla = "\t".join(["+ WLA", "+0.01M" if size == "base" else "+0.02M",
                         f"{printed_average[(size, 'wla')]:.1f}", *(f"{v:.1f}" for v in rows[(size, "wla")])])
        assert wla in text
        sla_numbers = [float(x) for x in text.split(f"+ SLA\t{'+0.01M' if size == 'base' else '+0.02M'}\t")[1]
                       .split("\n")[0].replace("^{\\uparrow}", "").replace("[↑]", "").replace("↑", "")
                       .replace("^", "").split()]
        assert sla_numbers == [printed_average[(size, "sla")], *rows[(size, "sla")]]
    for variant, name in (("none", "BERT"), ("sla", "+SLA")):
        assert "\t".join([name, *(f"{pairs[t].systems[variant]['en']:.1f}" for t in ("qnli", "rte", "mrpc",
                                                                                          "stsb"))]) in text


def test_ahmad2021_tables_5_and_6_match_the_paper_text():
    """Table 6's rows as the text prints them (digits run together, MTOP's '-' for ja/pt/tr/zh, then the
    average) and Table 5's exact match after each F1."""
    from xsyn.experiments.papers import load_paper

    ahmad = load_paper("ahmad2021")
    if not PAPERS.is_dir():
        pytest.skip(f"the paper texts are not at {PAPERS}")
    text = next(PAPERS.glob("004_*.txt")).read_text(encoding="utf-8")
    for task, gap in (("mtop", "----"), ("matis", "")):
        for score in ("intent_accuracy", "slot_f1"):
            (table,) = [t for t in ahmad.scores_for(task, "bert-base-multilingual-cased") if t.score == score]
            for variant in ("none", "gat"):
                values = [table.systems[variant][lang] for lang in table.languages]
                assert "".join(f"{v:.1f}" for v in values) + gap + f"{table.average[variant]:.1f}" in text
    (em,) = [t for t in ahmad.scores_for("mlqa", "bert-base-multilingual-cased") if t.score == "exact_match"]
    for variant, start in (("none", "80.5/67.2"), ("gat", "80.4/67.3")):
        # F1/EM for en es de ar hi vi zh, then the average (the text runs the rows together)
        pairs = re.findall(r"\d+\.\d/\d+\.\d", text[text.index(start):])[:8]
        assert [float(pair.split("/")[1]) for pair in pairs] == [
            *(em.systems[variant][lang] for lang in em.languages), em.average[variant]]


PRETRAIN_FILE = SEARCH_FILE.split("[search]")[0] + """
[pretrain]
variants = ["gat"]
treebanks = ["en"]
max_steps = 3
[evaluation]
langs = ["svo"]
"""


def test_a_pretrain_table_pretrains_once_per_model_before_the_gat_cells(tmp_path, monkeypatch):
    """Every gat cell starts from the one pre-trained GAT of its model; none cells never wait for it."""
    from xsyn.experiments import pretrain

    experiment = _experiment(tmp_path, PRETRAIN_FILE)
    gat = next(c for c in experiment.cells if c.variant == "gat")
    none = next(c for c in experiment.cells if c.variant == "none")
    assert experiment.config(gat).pretrained_syntax is None  # listed before the pre-training exists
    assert [s.state for s in pretrain.pretrain_states(experiment)] == ["to do"]
    settings = pretrain.pretrain_settings(experiment, "tiny")
    assert (settings.model, settings.treebanks, settings.max_steps) == ("tiny", ["en"], 3)
    assert Path(settings.output_dir) == tmp_path / "runs" / "pretrain" / "tiny"
    assert settings.gat_delta == 4  # the paper recipe's, under the table's values
    runs = []

    def fake_run(settings, progress=False, resume=False):  # writes the files a pre-trained GAT folder holds
        runs.append((settings.output_dir, resume))
        folder = Path(settings.output_dir)
        (folder / "gat.safetensors").write_bytes(b"")
        (folder / "gat_config.json").write_text(json.dumps({"gat_layers": 2, "gat_heads": 2, "gat_head_size": 8,
                                                            "gat_delta": 4}))

    monkeypatch.setattr("xsyn.pretraining.trainer.run_pretraining", fake_run)
    for _ in range(2):
        pretrain.ensure_pretrained(experiment, "tiny")
    assert runs == [(settings.output_dir, False)]
    assert experiment.config(gat).pretrained_syntax == settings.output_dir
    assert experiment.config(none).pretrained_syntax is None
    assert [s.state for s in pretrain.pretrain_states(experiment)] == ["done"]


def test_a_pretraining_that_ends_without_its_files_is_an_error_not_a_loop(tmp_path, monkeypatch):
    """ensure_pretrained runs the pre-training until the variant's `pretrained_files` are there: one that returns
    without them (a bug, a crash swallowed) is refused, naming the missing files, instead of run again forever."""
    from xsyn.experiments import pretrain

    experiment = _experiment(tmp_path, PRETRAIN_FILE)
    runs = []
    monkeypatch.setattr("xsyn.pretraining.trainer.run_pretraining", lambda settings, **_: runs.append(1) or (
        Path(settings.output_dir) / "gat_config.json").write_text("{}"))
    with pytest.raises(ExperimentError, match="the pre-training ended without writing gat.safetensors; its "):
        pretrain.ensure_pretrained(experiment, "tiny")
    assert runs == [1]


def test_a_released_code_pretrains_the_module_its_cells_will_load(tmp_path):
    """`reproduce = "ahmad2021"` in [settings]: the pre-trained GAT is the code's (additive, its xavier draws,
    its UPOS rows), or its gat cells could not load it; the [pretrain] table's own values still win."""
    from xsyn.experiments import pretrain

    text = PRETRAIN_FILE.replace("[settings]\n", '[settings]\nreproduce = "ahmad2021"\n', 1)
    settings = pretrain.pretrain_settings(_experiment(tmp_path, text), "tiny")
    assert settings.gat_attention == "additive"
    assert {k: settings.model_settings[k] for k in ("gat_weight_init", "gat_special_upos")} == {
        "gat_weight_init": "xavier", "gat_special_upos": "separate"}
    own = text.replace("max_steps = 3\n", 'max_steps = 3\ngat_attention = "dot"\n', 1)
    assert pretrain.pretrain_settings(_experiment(tmp_path, own), "tiny").gat_attention == "dot"
    assert pretrain.pretrain_settings(_experiment(tmp_path, PRETRAIN_FILE), "tiny").gat_attention == "dot"


@pytest.mark.parametrize("table, message", [
    ("variants = [\"sla\"]\n", "pretrain.variants: expected a list of the file's variants"),
    ("output_dir = \"x\"\n", "pretrain.output_dir: set per model by the experiment"),
    ("treebank = [\"en\"]\n", "pretrain.treebank: unknown key; did you mean 'treebanks'?"),
    ("seed = \"3\"\n", "pretrain.seed: expected an integer, got '3'"),
    ("recipe = \"fast\"\n", "pretrain.recipe: 'fast' is not one of"),
])
def test_a_bad_pretrain_table_is_refused_before_anything_runs(tmp_path, table, message):
    from xsyn.experiments import pretrain

    text = PRETRAIN_FILE.replace('variants = ["gat"]\n', table) if table.startswith("variants") else (
        PRETRAIN_FILE.replace("max_steps = 3\n", "max_steps = 3\n" + table))
    with pytest.raises(ExperimentError) as err:
        pretrain.pretrain_settings(_experiment(tmp_path, text), "tiny")
    assert message in str(err.value) and str(err.value).startswith(str(tmp_path))


def test_a_missing_parser_model_lists_the_cells_and_run_refuses_to_start(tmp_path):
    """A recipe names a UDPipe folder the user must supply: status still lists every cell; run says what is
    missing before anything runs."""
    from xsyn.experiments.local import run_local

    text = SEARCH_FILE.replace('parser = "chain"', f'parser = "udpipe:{tmp_path / "no-models"}"')
    experiment = _experiment(tmp_path, text)
    ((message, cells),) = experiment.missing_inputs.items()
    assert "no-models does not exist" in message and len(cells) == len(experiment.cells)
    assert cell_state(experiment, experiment.cells[0]).needs.startswith("parser 'udpipe:")
    # what a cell needs was found once, when the file was read: a state resolves nothing again (per cell, that was
    # quadratic over li2021's 2,340 cells)
    experiment.missing_parser_model = experiment.config = None
    assert cell_state(experiment, experiment.cells[-1]).needs == message
    with pytest.raises(ExperimentError, match="no-models does not exist.* cells need it"):
        run_local(experiment, gpus=[])
    assert not (tmp_path / "runs").exists()  # nothing started


def test_the_papers_recipes_list_every_cell_of_their_tables():
    """li2021: Table 1 (4 tasks x base/large x BERT/WLA/SLA), Table 2 (4 tasks, base, BERT/SLA), Table 3
    (3 Chinese tasks x 3 systems); each system over the paper's grid (lr 2 x epochs 3, CoNLL lr 3 x epochs 2;
    m 2 for SLA, k 3 for WLA) and 5 seeds. sgnet: SQuAD 2.0 and RACE over lr 4 x batch 3, MLQA and XQuAD."""
    from collections import Counter

    from xsyn.experiments.experiment_file import load_experiment as load

    li = load("li2021")
    per_system = {"none": 6, "wla": 6 * 3, "sla": 6 * 2}  # search points
    expected = {task: 2 * 5 * sum(per_system.values()) for task in ("cola", "sst2", "conll_ner", "fce")}
    expected.update({task: 5 * (per_system["none"] + per_system["sla"]) for task in ("qnli", "rte", "mrpc", "stsb")})
    expected.update({task: 5 * sum(per_system.values()) for task in ("chnsenticorp", "msra_ner", "cged")})
    assert Counter(cell.task for cell in li.cells) == expected and len(li.cells) == 2340
    assert {c.model for c in li.cells if c.task == "fce"} == {"bert-base-cased", "bert-large-cased"}
    cola = li.config(next(c for c in li.cells if c.task == "cola" and c.variant == "sla"))
    assert (cola.eval_every, cola.batch_size, cola.max_length, cola.parser) == (500, 32, 128, "spacy:en_core_web_sm")
    assert li.evaluation_of("cola").splits == ("validation",) and li.evaluation_of("fce").splits == ("test",)
    sgnet = load("sgnet")
    assert Counter(cell.task for cell in sgnet.cells) == {"squad_v2": 4 * 3 * 2 * 3, "race": 4 * 3 * 2 * 3,
                                                         "mlqa": 2 * 3, "xquad": 2 * 3}
    assert sgnet.config(next(c for c in sgnet.cells if c.task == "race")).max_length == 384
