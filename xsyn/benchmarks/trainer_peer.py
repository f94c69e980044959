"""The transformers side of `xsyn bench peer`: what a researcher who does not use xsyn runs, `transformers.Trainer`
fine-tuning a sequence-pair classifier, or `Trainer.predict` scoring one, on the same rows and settings.

    python -m xsyn.benchmarks.trainer_peer SPEC.json RESULT.json

SPEC holds `mode` (train or predict), the model, the files (XTREME's PAWS-X layout: sentence1, sentence2, label,
tab-separated, csv-quoted) and the run's settings, taken from xsyn's own resolved settings by `xsyn.benchmarks.peer`.
It runs in its own process (one thread, as xsyn's side) and writes what it measured: the training loop's wall and
CPU seconds (on_train_begin to on_train_end), the tokens its batches held and were padded to (counted in its
collator, as they ran), the held-out accuracy, and the seconds of each phase.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)


def read_pairs(path: str | Path) -> list[tuple[str, str, int]]:
    """The (sentence1, sentence2, label) rows of an XTREME PAWS-X file."""
    with open(path, encoding="utf-8", newline="") as handle:
        return [(row[0], row[1], int(row[2])) for row in csv.reader(handle, delimiter="\t")]


def encode(tokenizer, rows: list[tuple[str, str, int]], max_length: int) -> list[dict[str, Any]]:
    """The rows as the Trainer's examples, unpadded (its collator pads each batch)."""
    encoded = tokenizer([r[0] for r in rows], [r[1] for r in rows], truncation=True, max_length=max_length)
    return [{**{key: values[i] for key, values in encoded.items()}, "labels": rows[i][2]} for i in range(len(rows))]


class CountingCollator:
    """Pads as DataCollatorWithPadding does, and counts the real and padded tokens of every batch it made."""

    def __init__(self, tokenizer):
        self.inner = DataCollatorWithPadding(tokenizer)
        self.rows = self.real = self.padded = 0

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = self.inner(features)
        self.rows += len(features)
        self.real += int(batch["attention_mask"].sum())
        self.padded += batch["attention_mask"].numel()
        return batch


class Clock(TrainerCallback):
    """The wall and CPU clocks at the start and end of the training loop."""

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = (time.perf_counter(), time.process_time())

    def on_train_end(self, args, state, control, **kwargs):
        self.end = (time.perf_counter(), time.process_time())


def arguments(spec: dict[str, Any]) -> TrainingArguments:
    """The Trainer's settings: xsyn's run's (batch, epochs or steps, schedule, clipping, seed), no saving or logging
    during training, one CPU process; its own defaults otherwise (fused AdamW, a linear schedule)."""
    return TrainingArguments(
        output_dir=spec["out"], per_device_train_batch_size=spec["batch_size"],
        per_device_eval_batch_size=spec["eval_batch_size"], num_train_epochs=spec["epochs"],
        max_steps=spec.get("max_steps") or -1, learning_rate=spec["learning_rate"], weight_decay=spec["weight_decay"],
        warmup_steps=spec["warmup_steps"], max_grad_norm=spec["max_grad_norm"] or 0.0, seed=spec["seed"],
        train_sampling_strategy="group_by_length" if spec.get("group_by_length") else "random", eval_strategy="no",
        save_strategy="no",
        logging_strategy="no", report_to="none", disable_tqdm=True, use_cpu=True, dataloader_pin_memory=False)


def accuracy(output) -> float:
    return float((np.argmax(output.predictions, axis=-1) == output.label_ids).mean() * 100)


def train(spec: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(spec["model"])
    train_rows, dev_rows = encode(tokenizer, read_pairs(spec["train"]), spec["max_length"]), None
    if spec.get("dev"):
        dev_rows = encode(tokenizer, read_pairs(spec["dev"]), spec["max_length"])
    data_seconds = time.perf_counter() - started
    model = AutoModelForSequenceClassification.from_pretrained(spec["model"], num_labels=2)
    collator, clock = CountingCollator(tokenizer), Clock()
    trainer = Trainer(model=model, args=arguments(spec), train_dataset=train_rows, data_collator=collator,
                      callbacks=[clock])
    trained = trainer.train()
    examples, real, padded = collator.rows, collator.real, collator.padded  # the batches trained on
    after = time.perf_counter()
    result = {"train_seconds": clock.end[0] - clock.start[0], "train_cpu_seconds": clock.end[1] - clock.start[1],
              "examples": examples, "steps": trained.global_step, "real_tokens": real, "padded_tokens": padded,
              "padded_share": round(1 - real / padded, 4) if padded else 0.0, "data_seconds": data_seconds}
    if dev_rows is not None:
        result["accuracy"] = accuracy(trainer.predict(dev_rows))
    if spec.get("save"):
        trainer.save_model(spec["out"])
        tokenizer.save_pretrained(spec["out"])
    result["after_seconds"] = time.perf_counter() - after
    return result


def predict(spec: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(spec["model"])
    rows = encode(tokenizer, read_pairs(spec["rows"]), spec["max_length"])
    data_seconds = time.perf_counter() - started
    model = AutoModelForSequenceClassification.from_pretrained(spec["model"], num_labels=2)
    collator = CountingCollator(tokenizer)
    trainer = Trainer(model=model, args=arguments(spec), data_collator=collator)
    begun = time.perf_counter()
    output = trainer.predict(rows)
    return {"forward_seconds": time.perf_counter() - begun, "data_seconds": data_seconds,
            "accuracy": accuracy(output), "examples": len(rows), "real_tokens": collator.real,
            "padded_tokens": collator.padded, "padded_share": round(1 - collator.real / collator.padded, 4)}


def main(argv: list[str]) -> None:
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    torch.set_num_threads(spec.get("threads", 1))
    result = train(spec) if spec["mode"] == "train" else predict(spec)
    Path(argv[1]).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
