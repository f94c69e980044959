"""Golden runs: each syntax variant, fine-tuned for three steps on the tiny model through `xsyn finetune`,
gives bit-identical weights, step losses and dev scores to those recorded in
`fixtures/golden_variants.json`.

Why: refactors of the model code (the variant registry, the Auto registration, the heads' signatures)
must leave what a run computes unchanged. A fixed seed, one CPU thread and the real fine-tuning path
(card, data, batches, dropout, optimiser, the variant's extra losses and random draws) make the result a
function of the code alone, and a SHA-256 over the saved tensors catches a change in any bit of any weight.

Regenerate with `python tests/test_models_golden.py --regenerate` (HF_HUB_OFFLINE=1, from the checkout
root) ONLY when a change is meant to change results: a corrected formula in a variant, a new default, a new
torch pin, a new variant (which needs its own entry). Say so in the commit message. Never regenerate to make
a refactor pass: a refactor that changes these numbers changed behaviour. The fixture records the torch
version and CPU instruction set it was made on; elsewhere the floating-point kernels differ, so the test
skips there, saying so.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "golden_variants.json"
# Each variant's settings, given in full so that an edit of the synth card cannot move the numbers: the GAT
# the card scales to the tiny model, the learned SDOI alpha, and SEPREM's distance-prediction loss (with its
# random pair selection and corruption), so that every variant runs its every path.
VARIANT_SETTINGS: dict[str, list[str]] = {
    "none": [], "sla": [], "wla": [],
    "gat": ["--set", "gat_delta=1", "--set", "syntax_heads=1", "--set", "structural_loss_weight=0.5", "--set",
            "gat_layers=2", "--set", "gat_heads=2", "--set", "gat_head_size=32"],
    "sdoi": ["--set", "sdoi_learn_alpha=true"],
    "sep": ["--set", "sep_distance_loss_weight=0.5"],
}
RUN = ["--task", "synth", "--model", "tiny", "--train-lang", "svo", "--parser", "chain", "--quiet",
       "--max-train-examples", "32", "--set", "max_eval_examples=32", "--batch-size", "8", "--max-length", "24",
       "--max-steps", "3", "--eval-every", "3", "--set", "log_every=1", "--seed", "7",
       "--learning-rate", "3e-4", "--set", "warmup_steps=0"]  # the schedule the fixture was recorded with


def platform() -> dict[str, str]:
    """What the float results depend on besides the code."""
    import torch

    return {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def weights_sha256(folder: Path) -> str:
    """SHA-256 over every saved tensor (name, dtype, shape, bytes) in name order."""
    from safetensors.torch import load_file

    digest = hashlib.sha256()
    for name, tensor in sorted(load_file(folder / "model.safetensors").items()):
        digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}\n".encode())
        digest.update(tensor.contiguous().numpy().tobytes())
    return digest.hexdigest()


def golden_run(variant: str, root: Path) -> dict[str, Any]:
    """Fine-tune `variant` as `xsyn finetune` does, single-threaded on the CPU; what the fixture records."""
    import torch
    from click.testing import CliRunner

    from xsyn.cli import main
    from xsyn.data.synth import write_vocab

    out = root / variant
    vocab = root / "vocab.txt"
    if not vocab.is_file():
        write_vocab(vocab)
    args = ["finetune", *RUN, "--variant", variant, *VARIANT_SETTINGS[variant], "--tokenizer", str(vocab),
            "--cache-dir", str(root / "cache"), "--output-dir", str(out)]
    threads, cpu_only = torch.get_num_threads(), os.environ.get("ACCELERATE_USE_CPU")
    torch.set_num_threads(1)
    os.environ["ACCELERATE_USE_CPU"] = "true"
    try:
        result = CliRunner().invoke(main, args)
    finally:
        torch.set_num_threads(threads)
        if cpu_only is None:
            del os.environ["ACCELERATE_USE_CPU"]
        else:
            os.environ["ACCELERATE_USE_CPU"] = cpu_only
    assert result.exit_code == 0, result.output
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text(encoding="utf-8").splitlines()]
    validation = json.loads((out / "validation_results.json").read_text(encoding="utf-8"))
    return {"settings": VARIANT_SETTINGS[variant], "weights_sha256": weights_sha256(out / "best"),
            "losses": [{k: v for k, v in line.items() if k.endswith("loss")} for line in log if "loss" in line],
            "dev": validation["scores"], "best_step": validation["step"]}


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    recorded = json.loads(FIXTURE.read_text(encoding="utf-8"))
    if recorded["platform"] != platform():
        pytest.skip(f"{FIXTURE.name} was recorded on {recorded['platform']}, this is {platform()}: float kernels "
                    "differ; regenerate it here (see this module's docstring) to compare on this platform")
    return recorded


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("golden")


def test_the_fixture_covers_every_variant_xsyn_builds():
    from xsyn.models.variants import VARIANTS

    recorded = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert sorted(recorded["runs"]) == sorted(VARIANTS) == sorted(VARIANT_SETTINGS)


@pytest.mark.parametrize("variant", sorted(VARIANT_SETTINGS))
def test_a_seeded_finetune_gives_the_recorded_weights_losses_and_dev_scores(golden, root, variant):
    expected = golden["runs"][variant]
    run = golden_run(variant, root)
    assert run["settings"] == expected["settings"]  # the fixture was made with these settings
    assert run["losses"] == expected["losses"]
    assert run["dev"] == expected["dev"] and run["best_step"] == expected["best_step"]
    assert run["weights_sha256"] == expected["weights_sha256"]


def regenerate() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        runs = {variant: golden_run(variant, Path(folder)) for variant in sorted(VARIANT_SETTINGS)}
    FIXTURE.write_text(json.dumps({"platform": platform(), "runs": runs}, indent=1, sort_keys=True) + "\n",
                       encoding="utf-8")
    print(f"wrote {FIXTURE}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--regenerate"]:
        sys.exit(f"usage: python {Path(__file__).name} --regenerate  (read the module docstring first)")
    regenerate()
