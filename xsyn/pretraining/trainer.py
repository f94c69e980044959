"""Pre-training the GAT on UD treebanks' gold trees, and probing it (the run behind `xsyn pretrain-gat`).

Ahmad et al. (2021) pre-train their GAT on UD parses of the source and target languages; their
code never released it. This is the reconstruction: the GAT reads BERT's word-piece embeddings
(frozen) plus UPOS embeddings under the tree mask (distance <= delta) of each treebank sentence
at word-piece level (`WordpieceAligner` + `collate_trees`; nothing is parsed), and is trained with
the structural-probe losses (tree distance and depth, Hewitt and Manning 2019) and, selectable,
SEPREM's dependency-distance prediction (`xsyn/models/variants/sep/distance.py`). Then the
probes are scored per treebank on its dev set (test for test-only treebanks) at word level (`probe.py`).

Sentences longer than the model's maximum are cut into overlapping windows for training (each
window keeps true tree distances) and counted; in evaluation they are counted and not scored.
Training runs through `xsyn.training.driver.train`, the loop fine-tuning runs (optimiser groups,
length-grouped seeded batches, logging, checkpoints, resume, the same run on one process or many),
with `PretrainTask` as its task; the probes are scored at the end, on the main process.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch import nn

from xsyn import provenance
from xsyn.models.factory import build_model
from xsyn.models.names import TINY
from xsyn.models.tokenizers import load_tokenizer
from xsyn.models.variants.gat import VARIANT as GAT
from xsyn.models.variants.gat import GatSettings, gat_output_size
from xsyn.models.variants.gat.layers import gat_encode, save_gat, syntax_probe
from xsyn.models.variants.sep.distance import SepDistanceHead, corrupt_mask, select_pairs
from xsyn.pretraining.probe import ProbeEvaluator
from xsyn.syntax.conllu import ConlluStats, read_conllu
from xsyn.syntax.record import SyntaxRecord
from xsyn.syntax.treebanks import languages, locate
from xsyn.training.driver import check_micro_batches, train, warn_fewer_processes
from xsyn.training.folder import RunFolder
from xsyn.training.log import read_step_log, untimed
from xsyn.training.loop import epoch_batches, micro_batches
from xsyn.training.processes import wait_for_everyone
from xsyn.training.settings import LoopSettings, loop_default, with_warmup
from xsyn.trees.batch import collate_trees, tree_features
from xsyn.trees.tensors import TreeTensors
from xsyn.trees.wordpiece import WordpieceAligner, WordpieceTree
from xsyn.utils.errors import InputError
from xsyn.utils.io import atomic_write_text
from xsyn.utils.schema import one_of, same_rule, strict, validated_field

OBJECTIVES = ("structural", "seprem")

logger = logging.getLogger(__name__)


def _objectives(value: list[str]) -> None:
    if not value:
        raise ValueError(f"choose one or more of {', '.join(OBJECTIVES)}")


@strict
@dataclass
class PretrainSettings(LoopSettings):
    """Everything that defines a run; written to `pretrain_config.json`: the loop's settings (`LoopSettings`, with
    pre-training's defaults) and these. A schema (`xsyn.utils.schema`): each field's rule is checked when the
    settings are made, and by `check_values` where a file or flag gives them."""

    treebanks: list[str]
    treebank_dir: str
    output_dir: str
    eval_treebanks: list[str] | None = None  # default: the training treebanks; ["all"]: every language
    gat_delta: int = same_rule(GatSettings, "gat_delta", 4)  # the variant's settings that a recipe sets
    gat_attention: str = same_rule(GatSettings, "gat_attention", "dot")
    dropout: bool = False  # the config's dropout in the GAT while pre-training (off: exact regression targets)
    objectives: list[str] = validated_field([_objectives, one_of(OBJECTIVES)], default_factory=lambda: ["structural"])
    train_split: str = "train"
    seprem_max_distance: int = 8
    model_settings: dict[str, Any] = field(default_factory=dict)  # further GAT settings (XsynBertConfig fields)
    # the loop's settings whose default differs from fine-tuning's
    epochs: float = loop_default("epochs", 1.0)
    learning_rate: float = loop_default("learning_rate", 1e-3)
    warmup_steps: int | None = loop_default("warmup_steps", None)  # a twentieth of the steps
    weight_decay: float = loop_default("weight_decay", 0.01)  # AdamW's default
    max_length: int = loop_default("max_length", 256)
    log_every: int = loop_default("log_every", 20)

    @property
    def evaluation_specs(self) -> list[str]:
        specs = self.eval_treebanks or self.treebanks
        return languages() if specs == ["all"] else specs


# -- data ---------------------------------------------------------------------------------------------

@dataclass
class TreebankData:
    """The sentences taken from one treebank split, and what happened to the others."""

    lang: str
    treebank: str
    split: str
    path: str
    sentences_in_file: int
    invalid: list[str]  # skipped by the reader, each with its reason
    records: list[SyntaxRecord] = field(repr=False, default_factory=list)

    def summary(self) -> dict:
        return {"lang": self.lang, "treebank": self.treebank, "split": self.split, "path": self.path,
                "sentences_in_file": self.sentences_in_file, "used": len(self.records),
                "invalid_skipped": len(self.invalid), "invalid_reasons": self.invalid[:10]}


def read_treebank(spec: str, directory: str | Path, split: str | None, limit: int | None, seed: int,
                  exclude_split: str | None = None) -> TreebankData:
    """One treebank split (default: its evaluation split, never `exclude_split`); `limit` keeps a
    seeded sample of the sentences, in file order."""
    found = locate(spec, directory)
    split = split or found.evaluation_split(exclude=exclude_split)
    path = found.path(split)
    stats = ConlluStats()
    records = list(read_conllu(path, lang=found.treebank.lang, skip_invalid=True, stats=stats))
    total = len(records)
    if limit is not None and total > limit:
        keep = sorted(random.Random(f"{seed}/{found.treebank.name}/{split}").sample(range(total), limit))
        records = [records[i] for i in keep]
    return TreebankData(found.treebank.lang, found.treebank.name, split, str(path),
                        total + len(stats.skipped), stats.skipped, records)


@dataclass
class Encoded:
    """Model inputs for a list of sentences: one tree per sentence, or several windows of one."""

    trees: list[WordpieceTree] = field(default_factory=list)
    sentence: list[int] = field(default_factory=list)  # the sentence each tree belongs to
    windowed: int = 0  # sentences cut into windows (training)
    too_long: int = 0  # sentences that do not fit (evaluation: counted, not scored)


def encode(aligner: WordpieceAligner, records: Sequence[SyntaxRecord], windows: bool) -> Encoded:
    """Word-piece trees of single-sentence inputs; over-long ones become windows, or count as too long."""
    stride = aligner.max_length // 4 if windows else None
    out = Encoded()
    for k, pieces in enumerate(aligner.segment_pieces(records)):
        trees = aligner.assemble([pieces], stride=stride)
        if not windows and trees[0].truncated:
            out.too_long += 1
            continue
        out.windowed += len(trees) > 1
        out.trees += trees
        out.sentence += [k] * len(trees)
    return out


# -- model ----------------------------------------------------------------------------------------------

class GatPretrainer(nn.Module):
    """The losses of one batch: the GAT's structural probes and, optionally, SEPREM's objective.

    It wraps the encoder so that Accelerate (DDP) sees one forward. Only the GAT (and the distance
    head) train; BERT's word-piece embeddings are read, frozen.
    """

    def __init__(self, encoder: nn.Module, objectives: Sequence[str], max_distance: int, dropout: bool = False):
        super().__init__()
        self.encoder = encoder
        self.objectives = tuple(objectives)
        self.dropout = dropout
        self.distance_head = (SepDistanceHead(gat_output_size(encoder.config), max_distance)
                              if "seprem" in self.objectives else None)
        encoder.requires_grad_(False)
        encoder.gat.requires_grad_(True)

    def train(self, mode: bool = True) -> GatPretrainer:
        """Only the GAT trains, and dropout is all that train mode switches on: on only with `dropout`."""
        return super().train(mode and self.dropout)

    def forward(self, **batch: torch.Tensor) -> dict[str, torch.Tensor]:
        losses = {}
        tree = TreeTensors(batch["tree_parent"], batch["tree_upos"], None, None)  # shared by both objectives
        if "structural" in self.objectives:
            probe = syntax_probe(self.encoder, **batch, tree=tree)
            losses["distance"], losses["depth"] = probe.distance_loss, probe.depth_loss
        if self.distance_head is not None:
            # SEPREM's masking draws, on the batch's device, seeded from the share's seed (see xsyn.training)
            generator = torch.Generator(batch["input_ids"].device).manual_seed(int(torch.randint(2**62, ())))
            pairs = select_pairs(tree.distances, batch["attention_mask"].bool(), generator)
            mask = corrupt_mask(tree.gat_mask(self.encoder.config.gat_delta), pairs, generator)
            gat_output = gat_encode(self.encoder, batch["input_ids"], tree, batch.get("tree_deprel"), mask)
            losses["seprem"] = self.distance_head.loss(gat_output, pairs, tree.distances)
        return losses


def build_encoder(settings: PretrainSettings):
    """The `gat` variant of the chosen BERT (no head), and its tokenizer."""
    tokenizer = load_tokenizer(settings.tokenizer or (None if settings.model == TINY else settings.model))
    encoder = build_model(settings.model, GAT.name, None, tokenizer=tokenizer, gat_delta=settings.gat_delta,
                          gat_attention=settings.gat_attention, **settings.model_settings)
    return encoder, tokenizer


# -- evaluation --------------------------------------------------------------------------------------------

@torch.no_grad()
def probe_scores(encoder: nn.Module, encoded: Encoded, records: Sequence[SyntaxRecord], batch_size: int,
                 pad_token_id: int, device: torch.device) -> dict[str, float | int]:
    """The structural-probe metrics of `encoded` (one tree per sentence) against the gold trees."""
    encoder.eval()
    evaluator = ProbeEvaluator()
    order = sorted(range(len(encoded.trees)), key=lambda k: len(encoded.trees[k]))
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        batch = collate_trees([encoded.trees[k] for k in chunk], pad_token_id)
        out = syntax_probe(encoder, **{k: v.to(device) for k, v in batch.items()})
        distances = out.predicted_distances.float().cpu().numpy()
        depths = out.predicted_depths.float().cpu().numpy()
        for row, k in enumerate(chunk):
            words, first = np.unique(encoded.trees[k].word_index, return_index=True)
            first, words = first[words >= 0], words[words >= 0]
            record = records[encoded.sentence[k]]
            evaluator.add(distances[row][np.ix_(first, first)], depths[row][first], record.heads, record.upos,
                          words=words)
    return evaluator.result()


# -- the run ---------------------------------------------------------------------------------------------

class PretrainTask:
    """GAT pre-training as the loop sees it: the treebanks' word-piece trees in seeded, length-grouped
    batches and the objectives' losses. The probes are scored once, after training (`probe_and_save`)."""

    count_items = None  # the losses are means over sentences' word pairs, not over labelled tokens

    def __init__(self, settings: PretrainSettings, accelerator, model: GatPretrainer, train: Encoded, pad: int):
        self.settings, self.accelerator, self.model, self.pad = settings, accelerator, model, pad
        self.features = [tree_features(t) for t in train.trees]
        self.lengths = [len(t) for t in train.trees]
        self.tree_fields = model.encoder.batch_tree_fields()  # the GAT's: the others never go to the device
        self.n_rows = len(self.features)
        self.description = f"GAT delta {settings.gat_delta}"
        self.hint = f"lower --learning-rate (now {settings.learning_rate:g})"

    def batches_of_epoch(self, epoch: int) -> list[list[int]]:
        return epoch_batches(self.n_rows, self.settings.batch_size, self.settings.seed, epoch,
                             self.lengths)

    def micro_batches(self, batch: list[int], processes: int) -> list[list[int]]:
        return micro_batches(batch, self.settings.grad_accum, processes)  # length-grouped already: cut equally

    def collate(self, indices: list[int]) -> dict[str, torch.Tensor]:
        return collate_trees([self.features[i] for i in indices], self.pad, self.tree_fields)

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        losses = self.model(**batch)
        return {"loss": sum(losses.values()), **losses}

    def evaluate(self) -> None:
        return None

    def on_best(self, state, result) -> None:  # never called: no evaluation during training
        raise AssertionError("GAT pre-training keeps no best checkpoint")


def run_pretraining(settings: PretrainSettings, progress: bool = False, resume: bool = False) -> dict:
    """Train, probe and write the output folder; returns the run summary (`pretrain_config.json`).

    Only the main process writes, holding the folder's writer lock throughout (a second pre-training into
    it is refused); the others return an empty summary. With `resume`, it continues from `state/` and ends
    as an uninterrupted run would."""
    with RunFolder(settings.output_dir).writing():
        return _pretrain(settings, progress, resume)


def _pretrain(settings: PretrainSettings, progress: bool, resume: bool) -> dict:

    # -- setup -----------------------------------------------------------------------------------
    accelerator = Accelerator()
    check_micro_batches(settings, accelerator.num_processes)
    warn_fewer_processes(accelerator.num_processes)
    set_seed(settings.seed)
    folder = RunFolder(settings.output_dir)
    train_data = [read_treebank(spec, settings.treebank_dir, settings.train_split,
                                settings.max_train_examples, settings.seed) for spec in settings.treebanks]
    trained = {data.treebank for data in train_data}
    eval_data = []
    for spec in settings.evaluation_specs:  # never score a treebank on the split it was trained on
        seen = locate(spec, settings.treebank_dir).treebank.name in trained
        eval_data.append(read_treebank(spec, settings.treebank_dir, None, settings.max_eval_examples,
                                       settings.seed, exclude_split=settings.train_split if seen else None))
    encoder, tokenizer = build_encoder(settings)
    if settings.max_length > encoder.config.max_position_embeddings:
        raise InputError(f"--max-length {settings.max_length} is longer than the "
                         f"{encoder.config.max_position_embeddings} positions the model {settings.model} has "
                         f"(max_position_embeddings): choose --max-length {encoder.config.max_position_embeddings} "
                         "or less")
    aligner = WordpieceAligner(tokenizer, max_length=settings.max_length)
    train_inputs = encode(aligner, [r for data in train_data for r in data.records], windows=True)
    if not train_inputs.trees:
        raise InputError(f"no training sentences in {', '.join(settings.treebanks)} "
                         f"({settings.train_split} split)")
    model = GatPretrainer(encoder, settings.objectives, settings.seprem_max_distance, settings.dropout)
    task = PretrainTask(settings, accelerator, model, train_inputs, tokenizer.pad_token_id)
    settings = with_warmup(settings, task.n_rows)  # pretrain_config.json records the steps
    if accelerator.is_main_process:
        logger.info(f"training the GAT (delta {settings.gat_delta}, {'+'.join(settings.objectives)}) on "
                    f"{task.n_rows} inputs from {sum(len(d.records) for d in train_data)} sentences")

    # -- the loop --------------------------------------------------------------------------------
    state = train(settings, task, accelerator, folder, resume=resume, show_progress=progress)
    settings = replace(settings, adamw_kernel=state.adamw_kernel)  # recorded as it ran (`auto` resolved)

    # -- finish ----------------------------------------------------------------------------------
    summary = {}
    if accelerator.is_main_process:
        training = {"steps": state.step, "seconds": state.train_seconds,
                    "data_wait_fraction": state.data_wait_seconds / max(state.train_seconds, 1e-9),
                    "inputs": task.n_rows, "windowed_sentences": train_inputs.windowed,
                    "processes": accelerator.num_processes, "max_length": settings.max_length,
                    "treebanks": [d.summary() for d in train_data], "curve": _curve(folder)}
        summary = probe_and_save(settings, accelerator.unwrap_model(task.model).encoder, tokenizer, aligner,
                                 eval_data, folder, training, accelerator.device)
    wait_for_everyone(accelerator)
    return summary


def _curve(folder: RunFolder) -> list[dict[str, float]]:
    """The logged steps' losses, learning rate, gradient norm and length (the step log's training lines; their
    seconds stay in the log: a resumed pre-training writes the same summary)."""
    return [{k: v for k, v in untimed(line).items() if k != "epoch"} for line in read_step_log(folder.train_log)
            if "loss" in line]


def probe_and_save(settings: PretrainSettings, encoder, tokenizer, aligner: WordpieceAligner,
                   eval_data: list[TreebankData], folder: RunFolder, training: dict, device) -> dict:
    """Score the probes on every evaluation treebank, then write the GAT, its probe metrics and the summary."""
    metrics, evaluation = {}, []
    for data in eval_data:
        encoded = encode(aligner, data.records, windows=False)
        metrics[data.lang] = probe_scores(encoder, encoded, data.records, settings.batch_size,
                                          tokenizer.pad_token_id, device)
        evaluation.append({**data.summary(), "too_long_not_scored": encoded.too_long})
    summary = {"settings": asdict(settings), "seed": settings.seed, **provenance(), "training": training,
               "evaluation": evaluation, "probe_metrics": metrics, "gat_config": encoder.config.to_diff_dict()}
    save_gat(encoder, folder.path)
    if settings.model == TINY:
        encoder.save_pretrained(folder.tiny_model)
        tokenizer.save_pretrained(folder.tiny_model)
    atomic_write_text(folder.probe_metrics, json.dumps(metrics, indent=2) + "\n")
    atomic_write_text(folder.pretrain_config, json.dumps(summary, indent=2, default=str) + "\n")
    return summary
