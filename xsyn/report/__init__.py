"""`xsyn report`: tables over runs and seeds, deltas against a baseline, and heatmaps.

It reads the run directories `xsyn evaluate` writes:

- `results.json`: task, variant, model, seed, metric, split, `per_language` {lang: score},
  optional `pairs` {row: {col: score}}, `n_examples`, `dropped`, `config`, optional
  `metric_options` (options of the metric, e.g. {"mode": "strict"});
- `per_example/{split}-{lang}.jsonl` and `per_example/{split}-{row}-{col}.jsonl`: one line per example,
  `{"id", "prediction", "reference"}`, which lets the report pair two runs by example id and
  recompute the metric on bootstrap resamples;
- `probe_metrics.json` (from `xsyn pretrain-gat`): {lang: {"uuas", "dist_spearman", ...}}.

Runs are grouped into experiments by (task, split, metric) and, within one, into systems by
(variant, model); the seeds of a system give mean and sample standard deviation (n - 1). Per system:
each language, the average over languages, and the transfer gap (the source language, `train_lang` of
the run's config or else en, minus the mean of the others; Ahmad et al. 2021 Table 7). Against the
baseline: the difference of means per language and per language pair (their Table 3), marked `*` when a
one-sided paired bootstrap gives p < alpha (`xsyn.metrics.bootstrap`) and `‡` when the papers' two-sided
t-test over seeds does (`xsyn.metrics.seeds`: paired by seed where both have the same seeds, Welch's
otherwise). `findings.analyse` reads the gains against language family, URIEL syntactic distance and
parser LAS (`xsyn report --analysis`; `findings_render` writes that section). For `mlqa` without a `lang`
option the context language is the pair's row (MLQA's matrix is context x question).

Written (`render`): report.md and report.json, CSVs, a per-language bar chart per experiment (seed sd
as error bars, the source language marked, chance where the task has one), pair heatmaps on one
colour scale per report with their axes named from `pair_axes`, each run's training curves, the caps
that limited a number; and with `latex=True` report.tex (`latex`).
"""

from xsyn.report.aggregate import BootstrapSettings, Comparison, Delta, Experiment, Report, Stat, System, build_report
from xsyn.report.render import write_report
from xsyn.report.runs import ProbeRun, ReportError, Run, find_runs, read_per_example, read_run

__all__ = ["BootstrapSettings", "Comparison", "Delta", "Experiment", "ProbeRun", "Report", "ReportError", "Run",
           "Stat", "System", "build_report", "find_runs", "read_per_example", "read_run", "write_report"]
