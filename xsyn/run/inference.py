"""Running a model over features and scoring its predictions, on one or several processes.

Evaluation batches are length-bucketed (features sorted by length, so padding is minimal), and their
length is rounded as training's is (`xsyn.trees.padding`: a multiple of 8, a few lengths per language), so
that a language's batches take few shapes. Under
Accelerate each process runs its share of the batches; the outputs are padded to a common shape,
gathered, and put back in place by feature index, so a sample repeated to even out the processes'
batches counts once and padding rows (index -1) not at all.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import partial
from typing import Any

import numpy as np
import torch
from accelerate.utils import extract_model_from_parallel

from xsyn.data.decode import decode, metric_options, references
from xsyn.data.features import INDEX_COLUMNS, collate_features, sequence_lengths
from xsyn.data.kinds import label_columns, output_keys
from xsyn.metrics import compute, primary_score
from xsyn.training.device_rules import resolve_length_budget
from xsyn.trees.padding import PaddedLength, batch_figures
from xsyn.utils.progress import Progress


class IndexedRows(torch.utils.data.Dataset):
    """Feature rows that also say which row they are, so gathered outputs can be put back in order."""

    def __init__(self, rows: Sequence[dict[str, np.ndarray]]):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {**self.rows[i], "feature_index": i}


def make_collate(pad_token_id: int, pad_to: PaddedLength | None = None, tree_fields: Collection[str] | None = None):
    """The DataLoader's collate function: `xsyn.data.features.collate_features`, the one place that batches;
    `tree_fields`: the syntax fields the model reads (`XsynBertPreTrainedModel.batch_tree_fields`; None: all)."""
    return partial(collate_features, pad_token_id=pad_token_id, pad_to=pad_to, tree_fields=tree_fields)


def model_inputs(batch: dict[str, torch.Tensor], with_labels: bool, keep: Collection[str] = ()
                 ) -> dict[str, torch.Tensor]:
    """What the model reads of a collated batch (and the `keep` columns its caller reads), taken on the host,
    before the copy to the device: the rest (`example_index`, unread labels) never goes there. A batch without
    padding carries no attention mask (read here on the host, for free): the model then builds none, and on a
    GPU its attention may take the Flash kernel, which takes no mask."""
    drop = set(INDEX_COLUMNS) | (set() if with_labels else set(label_columns()))
    inputs = {k: v for k, v in batch.items() if k not in drop or k in keep}
    mask = inputs.get("attention_mask")
    if mask is not None and mask.device.type == "cpu" and mask.numpy().all():
        del inputs["attention_mask"]
    return inputs


def batch_collate(model, pad_token_id: int, pad_to: PaddedLength | None = None, *, with_labels: bool,
                  keep: Collection[str] = ()):
    """The collate function of `model`'s batches (an `XsynBertPreTrainedModel`, possibly wrapped by Accelerate):
    its variant's tree fields, its inputs (with the labels, for training) and the `keep` columns, nothing else."""
    fields = extract_model_from_parallel(model).batch_tree_fields()
    collate = make_collate(pad_token_id, pad_to, fields)
    return lambda rows: model_inputs(collate(rows), with_labels, keep)


def padding(config, device_type: str) -> dict[str, int | None]:
    """How a run's settings (a RunConfig) pad batches on `device_type`, as `model_outputs` takes it: a run's
    recorded (resolved) length budget as it is, an `auto` as the device's (`xsyn.training.device_rules`)."""
    multiple, most = resolve_length_budget(config.pad_to_multiple_of, config.max_batch_lengths, device_type)
    return {"pad_to_multiple_of": multiple, "max_batch_lengths": most}


def length_buckets(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Batches of row indices with similar lengths (longest first, so memory peaks at once); the order of
    rows of one length is theirs (a stable sort)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def prediction_batches(rows: Sequence[dict[str, np.ndarray]], batch_size: int, processes: int,
                       pad_to_multiple_of: int | None = None, max_batch_lengths: int | None = None
                       ) -> tuple[list[list[int]], PaddedLength]:
    """The batches `model_outputs` runs (each on one process) and the length it pads them to.

    `batch_size` counts over all processes, as in training: Accelerate hands each process whole
    batches in turn, so each holds `batch_size / processes` rows."""
    lengths = [max(sequence_lengths(row)) for row in rows]
    return (length_buckets(lengths, -(-batch_size // processes)),
            PaddedLength.fit(lengths, pad_to_multiple_of, max_batch_lengths))


def prediction_figures(rows: Sequence[dict[str, np.ndarray]], batch_size: int, processes: int,
                       pad_to_multiple_of: int | None = None, max_batch_lengths: int | None = None
                       ) -> dict[str, Any]:
    """The real and padded tokens and distinct shapes of the batches `model_outputs` runs over `rows`."""
    batches, pad_to = prediction_batches(rows, batch_size, processes, pad_to_multiple_of, max_batch_lengths)
    return batch_figures(([n for i in batch for n in sequence_lengths(rows[i])] for batch in batches), pad_to)


@torch.no_grad()
def model_outputs(model, rows: Sequence[dict[str, np.ndarray]], accelerator, batch_size: int, pad_token_id: int,
                  progress: bool = False, pad_to_multiple_of: int | None = None,
                  max_batch_lengths: int | None = None) -> dict[str, list[np.ndarray]]:
    """Per feature, the model's output arrays (`logits`, `start_logits`, ...), in row order.
    `progress` shows a bar over the batches (on the main process); the batches are `prediction_batches`'."""
    batches, pad_to = prediction_batches(rows, batch_size, accelerator.num_processes, pad_to_multiple_of,
                                         max_batch_lengths)
    loader = torch.utils.data.DataLoader(IndexedRows(rows), batch_sampler=batches,
                                         collate_fn=batch_collate(model, pad_token_id, pad_to, with_labels=False,
                                                                  keep=("feature_index",)))
    loader = accelerator.prepare_data_loader(loader, device_placement=True)
    was_training = model.training
    model.eval()
    collected: dict[str, list[np.ndarray | None]] = {}
    # a bar on a terminal, plain lines elsewhere (a bar's redraws would fill a log with carriage returns)
    bar = Progress(len(loader), "predict", "batches", enabled=progress and accelerator.is_main_process)
    for batch in loader:
        out = model(**{k: v for k, v in batch.items() if k != "feature_index"})
        index = _gather(accelerator, batch["feature_index"], pad_index=-1).tolist()
        for key in output_keys():
            value = getattr(out, key, None)
            if value is None:
                continue
            slot = collected.setdefault(key, [None] * len(rows))
            for i, row in zip(index, _gather(accelerator, value.float()).cpu().numpy()):
                if i >= 0:
                    slot[i] = row
        bar.update(1)
    bar.close()
    model.train(was_training)
    missing = [k for k, v in collected.items() if any(x is None for x in v)]
    if missing:
        raise RuntimeError(f"outputs for some features never came back ({', '.join(missing)}); "
                           "this is a bug in batching across processes")
    return collected  # type: ignore[return-value]


def _gather(accelerator, tensor: torch.Tensor, pad_index: int = 0) -> torch.Tensor:
    """All processes' rows; batches of different sizes and lengths are padded to a common shape."""
    if accelerator.num_processes == 1:
        return tensor
    for dim in range(min(tensor.ndim, 2)):
        tensor = accelerator.pad_across_processes(tensor, dim=dim, pad_index=pad_index)
    return accelerator.gather(tensor)


def decode_and_score(card, examples, features, outputs: dict[str, list[np.ndarray]], labels: Sequence[str],
                     tags: Sequence[str], n_best: int = 20, max_answer_length: int = 30) -> dict[str, Any]:
    """Decode outputs into one prediction per example (the card's kind) and score them (its metric)."""
    predictions, decode_report = decode(card.task_kind, examples, features, outputs, metric=card.metric,
                                        labels=labels, tags=tags, n_best=n_best, max_answer_length=max_answer_length)
    gold = references(card.task_kind, examples, card.metric, task=card.name)
    options = metric_options(card.metric, examples, labels)
    scores = compute(card.metric, predictions, gold, **options)
    return {"predictions": predictions, "references": gold, "scores": scores,
            "primary": primary_score(card.metric, scores), "metric_options": options,
            "decode": vars(decode_report)}
