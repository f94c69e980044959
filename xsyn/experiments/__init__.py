"""`xsyn experiment`: a paper's table in one command. An experiment file names a grid of runs (tasks,
variants, seeds, models, settings), their evaluations and the baseline; every cell is a normal run
folder made by the code of `xsyn finetune` and `xsyn evaluate`; the report puts the papers' published
scores beside ours. Recipes for the papers come with xsyn (`recipes/`), their scores in `papers/`.
"""

from xsyn.experiments.experiment_file import Cell, Experiment, ExperimentError, Overrides, load_experiment, recipe_names

__all__ = ["Cell", "Experiment", "ExperimentError", "Overrides", "load_experiment", "recipe_names"]
