"""Issue 44's padding and shape targets, measured on real English rows: the shared PAWS-X and XNLI dev files used
as training data (no training file is available), mBERT's vocabulary, batch 32, max length 128.

    HF_HUB_OFFLINE=1 python scripts/batch_shapes.py [--shared ../shared/data] [--epochs 3]
        [--langs en,zh] [--tasks pawsx,xnli] [--device cuda|cpu] [--work DIR] [--json OUT]

Per task and batching (`default`: xsyn's settings; `random`: random batches padded to their longest row, as
before issue 44) and per epoch: the padded share of the tokens computed and the distinct (B, T) of the training
batches (`TrainingBatches.figures`, what `train_results.json` records); and per language of the task's dev
files, the evaluation's (batch 64; `prediction_figures`, what `results.json` records). Targets: training padded
share <= 12% and <= 10 distinct shapes an epoch on both tasks, evaluation <= 12 distinct shapes per language.
No model runs: the rows are featurised (the `chain` parser) and batched as a run on `--device` would batch them
(its `auto` settings resolved there, as `xsyn finetune` resolves them: `xsyn.training.device_rules`; the targets
are a GPU's, where shapes cost).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS = {"padded_share": 0.12, "training_shapes": 10, "evaluation_shapes": 12}


def task_figures(task: str, shared: Path, work: Path, epochs: int, langs: list[str] | None,
                 device: str = "cuda") -> dict:
    from dataclasses import replace

    from xsyn.benchmarks.loop import BATCHINGS  # the same two schemes `xsyn bench loop` times
    from xsyn.data.cards import load_card
    from xsyn.run.checks import check_model
    from xsyn.run.inference import padding, prediction_figures
    from xsyn.run.settings import resolve
    from xsyn.run.task_data import load_task_data, make_parsers
    from xsyn.run.train import TrainingBatches, with_device_rules

    data = work / task
    data.mkdir(parents=True, exist_ok=True)
    langs = [lang for lang in sorted(p.name[4:-4] for p in (shared / task).glob("dev-*.tsv"))
             if langs is None or lang in langs]
    for lang in langs:
        shutil.copy(shared / task / f"dev-{lang}.tsv", data / f"dev-{lang}.tsv")
    shutil.copy(shared / task / "dev-en.tsv", data / "train-en.tsv")
    card = load_card(task)
    vocab = str(shared / "mbert_vocab" / "vocab.txt")
    config = resolve(task, "none", card, {}, {"model": "tiny", "tokenizer": vocab, "data_dir": str(data),
                                              "parser": "chain", "cache_dir": str(work / "cache"),
                                              "batch_size": 32, "max_length": 128, "eval_batch_size": 64})
    tokenizer, parser = check_model(config.model, config.tokenizer, config.tiny_family)[0], make_parsers(config)
    train, names = load_task_data(card, config, tokenizer, "train", {s: "en" for s in card.segments}, parsers=parser)
    out: dict = {"rows": len(train.rows()), "languages": langs, "device": device, "batchings": {}}
    for name, settings in BATCHINGS.items():
        run = with_device_rules(replace(config, **settings), {}, device)
        batcher = TrainingBatches(run, train.rows())
        evaluation = {}
        for lang in langs:
            dev, _ = load_task_data(card, run, tokenizer, "validation", {s: lang for s in card.segments}, names=names,
                                    parsers=parser)
            evaluation[lang] = prediction_figures(dev.rows(), run.eval_batch_size, 1, **padding(run, device))
        out["batchings"][name] = {
            "ladder": list(batcher.pad_to.ladder), "multiple": batcher.pad_to.multiple,
            "micro_batch_split": run.micro_batch_split,
            "epochs": [batcher.figures(batcher.of_epoch(epoch)) for epoch in range(epochs)],
            "evaluation": evaluation}
    return out


def text(results: dict) -> str:
    lines = []
    for task, found in results.items():
        for name, b in found["batchings"].items():
            shares = ", ".join(f"{e['padded_share']:.1%}" for e in b["epochs"])
            shapes = ", ".join(str(e["distinct_shapes"]) for e in b["epochs"])
            evaluation = ", ".join(f"{lang} {v['distinct_shapes']} ({v['padded_share']:.1%})"
                                   for lang, v in b["evaluation"].items())
            ladder = b["ladder"] or f"every multiple of {b['multiple']}"
            lines.append(f"{task} ({found['rows']} rows) {name}: training padded share per epoch {shares}; "
                         f"distinct shapes {shapes}; lengths {ladder}")
            lines.append(f"    evaluation shapes (padded share) per language: {evaluation}")
    return "\n".join(lines)


def misses(results: dict) -> list[str]:
    found = []
    for task, figures in results.items():
        default = figures["batchings"]["default"]
        for epoch, e in enumerate(default["epochs"]):
            if e["padded_share"] > TARGETS["padded_share"] or e["distinct_shapes"] > TARGETS["training_shapes"]:
                found.append(f"{task} epoch {epoch}: {e['padded_share']:.1%} padded, {e['distinct_shapes']} shapes")
        found += [f"{task} {lang} evaluation: {v['distinct_shapes']} shapes"
                  for lang, v in default["evaluation"].items() if v["distinct_shapes"] > TARGETS["evaluation_shapes"]]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--langs", default=None, help="Comma-separated dev languages evaluated [default: all].")
    parser.add_argument("--tasks", default="pawsx,xnli", help="Comma-separated tasks [default: pawsx,xnli].")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="Whose `auto` settings batch "
                        "the rows [default: cuda, where shapes cost].")
    parser.add_argument("--work", type=Path, default=None, help="Keep the data and feature caches here.")
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures to this file.")
    args = parser.parse_args()
    langs = args.langs.split(",") if args.langs else None
    with tempfile.TemporaryDirectory(prefix="xsyn-batch-shapes-") as scratch:
        work = args.work or Path(scratch)
        results = {task: task_figures(task, args.shared, work, args.epochs, langs, args.device)
                   for task in args.tasks.split(",")}
    print(text(results))
    missed = misses(results)
    print("targets met" if not missed else "targets missed: " + "; ".join(missed))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
