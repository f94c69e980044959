"""Shared fixtures. Tests run offline and read real data from ../shared/data next to the checkout
(or from the folder that `XSYN_SHARED_DATA` names).

The device switch: `--device cuda` (or `XSYN_TEST_DEVICE=cuda`) runs the device tests on that GPU
and the fine-tuning tests on it through Accelerate; `--device cpu` keeps everything on the CPU. The
default, `auto`, takes the GPU where one exists. Asking for CUDA on a machine without it is an
error, not a silent CPU run. Tests that compare a device with the CPU take the `device` fixture,
which skips them (saying why) when the device is the CPU.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers/datasets are imported
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Parallel workers (`pytest -n N`) share the cores: each computes on its share of them, and so do the commands it
# starts (OpenMP threads beyond the cores spin against the other workers'). Set before torch is imported.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1) > 1:
    os.environ.setdefault("OMP_NUM_THREADS",
                          str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from ctrl_c import install as install_ctrl_c  # noqa: E402
from ctrl_c import pytest_runtest_protocol  # noqa: E402, F401  (the suite stops at the first Ctrl-C)

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("XSYN_SHARED_DATA") or REPO.parent / "shared" / "data")


def pytest_addoption(parser) -> None:
    parser.addoption("--device", default=os.environ.get("XSYN_TEST_DEVICE", "auto"),
                     help="Device of the device tests: auto (CUDA where available), cpu, cuda or cuda:N "
                          "[env XSYN_TEST_DEVICE].")


def resolve_test_device(name: str) -> str:
    """`auto` -> `cuda` where CUDA is available, else `cpu`; a CUDA device that is not there is an error."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise pytest.UsageError(f"--device {name} (XSYN_TEST_DEVICE): this machine has no CUDA device "
                                    "torch can use; run without it, or with --device cpu")
        index = int(name.partition(":")[2] or 0)
        if index >= torch.cuda.device_count():
            raise pytest.UsageError(f"--device {name}: only {torch.cuda.device_count()} CUDA device(s)")
        return name
    if name != "cpu":
        raise pytest.UsageError(f"--device {name}: choose auto, cpu, cuda or cuda:N")
    return name


def pytest_configure(config) -> None:
    install_ctrl_c()
    device = resolve_test_device(config.getoption("--device"))
    config.xsyn_device = device
    # Fine-tuning tests run under Accelerate, which takes a GPU wherever there is one: on a GPU
    # machine `--device cpu` keeps them on the CPU too (subprocesses inherit the setting).
    if device == "cpu" and config.getoption("--device") == "cpu":
        os.environ["ACCELERATE_USE_CPU"] = "true"


def pytest_report_header(config) -> str:
    return f"xsyn test device: {config.xsyn_device}"


@pytest.fixture(scope="session")
def device(pytestconfig) -> str:
    """The accelerator under test; tests comparing it with the CPU skip when there is none."""
    if pytestconfig.xsyn_device == "cpu":
        pytest.skip("no CUDA device under test (CPU only here): run with --device cuda or XSYN_TEST_DEVICE=cuda "
                    "on a machine with a GPU")
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # float32 comparisons need float32 matmuls
    torch.backends.cudnn.allow_tf32 = False
    return pytestconfig.xsyn_device


def cpu_process_env() -> dict[str, str]:
    """The environment of a test's CPU subprocess (also torchrun's ranks): Accelerate on the CPU, one thread, no GPU
    visible (on a GPU machine too: the comparisons are of process counts, not devices), offline, this checkout
    first on the path."""
    checkout = str(Path(__file__).resolve().parents[1])
    return {**os.environ, "HF_HUB_OFFLINE": "1", "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1",
            "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": os.pathsep.join(filter(None, [checkout,
                                                                                   os.environ.get("PYTHONPATH")]))}


def _xsyn_on_cpu(args: list[str], processes: int = 1) -> str:
    """Run `xsyn ARGS` on the CPU in one process, or as the README launches two (ACCELERATE_USE_CPU=true
    torchrun); its stdout. On the CPU on a GPU machine too: the comparisons are of process counts, not
    devices. `--standalone` takes a free rendezvous port, so parallel test workers (pytest -n) never meet.
    A failure shows the end of the output and of stderr, less the other ranks' waits for the one that
    failed (torchrun prefixes each rank's lines)."""
    import subprocess
    import sys

    launch = (["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes)]
              if processes > 1 else [])
    proc = subprocess.run([sys.executable, *launch, "-m", "xsyn", *args], env=cpu_process_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + "\n".join(
        line for line in proc.stderr.splitlines() if not line.startswith("[rank0]"))[-5000:]
    return proc.stdout


@pytest.fixture
def one_process_group(tmp_path):
    """A real gloo process group of this one process (file rendezvous in the test's folder), destroyed after."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.fixture(scope="session")
def xsyn_on_cpu():
    """`xsyn_on_cpu(args, processes=1)`: `xsyn ARGS` on the CPU in that many processes; its stdout."""
    return _xsyn_on_cpu


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` beside the checkout (real treebanks, benchmarks, the mBERT vocabulary)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA} (CI provides ../shared/data beside the clone)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def udpipe_model(shared_data, tmp_path_factory):
    """A small English tokenizer + tagger + parser: 200 EWT train sentences, about 20 s on two busy cores
    (the UDPipe tests and the offline experiment share it)."""
    from xsyn.syntax.parsing.udpipe import train_model

    train = shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-train.conllu"
    if not train.is_file():
        pytest.skip(f"EWT train split not found at {train}")
    return once_per_run(tmp_path_factory, "udpipe", lambda folder: train_model(train, folder / "en_ewt-small.udpipe"))


def once_per_run(tmp_path_factory, name: str, make) -> Path:
    """`make(folder)`'s file, made once per test run: parallel workers (`pytest -n`) share the run's folder, and
    the first to get there makes it while the others wait on its lock (a session fixture is otherwise made once
    per worker)."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's folder; each worker's own lies inside it
    folder, made = base / name, base / f"{name}.made"
    with FileLock(str(base / f"{name}.lock")):
        if not made.is_file():
            folder.mkdir(exist_ok=True)
            made.write_text(str(make(folder)), encoding="utf-8")
        return Path(made.read_text(encoding="utf-8"))


def fake_slurm(folder: Path) -> dict[str, str]:
    """`srun` and `sbatch` stand-ins: sbatch keeps each script it is given (submitted-N.sh, the last also as
    submitted.sh) and answers as SLURM does, with job ids 4242, 4243, ...; the environment that puts them first."""
    import os
    import stat

    folder.mkdir()
    body = (f'n=$(ls {folder} | grep -c "submitted-")\ncp "$1" {folder}/submitted-$n.sh\n'
            f'cp "$1" {folder}/submitted.sh\necho "Submitted batch job $((4242 + n))"')
    for name, text in (("srun", "exit 0"), ("sbatch", body)):
        path = folder / name
        path.write_text(f"#!/bin/sh\n{text}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


@pytest.fixture(scope="session")
def mbert_tokenizer(shared_data: Path):
    """The real mBERT (cased) wordpiece vocabulary as a fast tokenizer."""
    from transformers import BertTokenizerFast

    vocab = shared_data / "mbert_vocab" / "vocab.txt"
    if not vocab.is_file():
        pytest.skip(f"mBERT vocabulary not found at {vocab}")
    return BertTokenizerFast(vocab=str(vocab), do_lower_case=False)


@pytest.fixture(scope="session")
def small_tokenizer(tmp_path_factory):
    """A tiny lower-casing wordpiece vocabulary, so hand-worked examples know every piece."""
    from transformers import BertTokenizerFast

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "dog", "chase", "##d", "a", "cat", ".",
             "hearing", "is", "scheduled", "on", "issue", "today", "der", "hund", "lauft", "lau", "##ft",
             "zum", "haus", "un", "##believ", "##able", "big", "small"]
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(words) + "\n", encoding="utf-8")
    return BertTokenizerFast(vocab=str(path), do_lower_case=True)


XLMR_TOKENIZER = REPO / "tests" / "fixtures" / "xlmr_tokenizer"


@pytest.fixture(scope="module")
def plain(small_tokenizer):
    """A tiny random BertModel (`variant_models.SHAPE`): what a variant is lifted onto (`variant_models.lifted`)."""
    import torch
    from transformers import BertConfig, BertModel
    from variant_models import SHAPE

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(small_tokenizer), **SHAPE)
    return BertModel(cfg).eval()


@pytest.fixture(scope="module")
def batch(small_tokenizer):
    """The variants' tree batch: a pair (13 pieces) and a padded single sentence: [CLS] der hund lau ##ft zum haus
    [SEP]. (A test module with a `batch` of its own uses its own.)"""
    from variant_models import CHASED, HUND

    from xsyn.trees.batch import collate_trees
    from xsyn.trees.wordpiece import WordpieceAligner

    aligner = WordpieceAligner(small_tokenizer)
    return collate_trees([aligner.encode([CHASED, HUND])[0], aligner.encode([HUND])[0]])


@pytest.fixture(scope="session")
def xlmr_tokenizer():
    """An XLM-R-style SentencePiece tokenizer (Unigram, 3,000 pieces, NFKC, `▁` word starts,
    `<s> A </s></s> B </s>`) trained on shared text by scripts/make_xlmr_tokenizer.py."""
    from xsyn.models.tokenizers import load_tokenizer

    return load_tokenizer(XLMR_TOKENIZER)


@pytest.fixture(scope="session")
def xlmr_checkpoint(tmp_path_factory, xlmr_tokenizer) -> Path:
    """A plain XLM-R checkpoint as the hub has xlm-roberta-base (`XLMRobertaForMaskedLM`, its config and
    tokenizer), but tiny and random: 2 layers, hidden 32, 4 heads, on `xlmr_tokenizer`'s vocabulary."""
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

    torch.manual_seed(0)
    config = XLMRobertaConfig(vocab_size=len(xlmr_tokenizer), hidden_size=32, num_hidden_layers=2,
                              num_attention_heads=4, intermediate_size=64, max_position_embeddings=514,
                              type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=xlmr_tokenizer.pad_token_id)
    path = tmp_path_factory.mktemp("xlm-roberta-tiny")
    XLMRobertaForMaskedLM(config).save_pretrained(path)
    xlmr_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def example_conllu() -> Path:
    return REPO / "xsyn" / "examples" / "example.conllu"


@pytest.fixture
def file_size_limit():
    """A context manager: while it is open, a write that would grow a file past `limit` bytes fails with
    EFBIG (the first such write is cut short), as on a full device. Unlike chmod it stops root too."""
    resource = pytest.importorskip("resource", reason="file size limits need the resource module (POSIX)")
    import signal
    from contextlib import contextmanager

    @contextmanager
    def limited(limit: int):
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write, not a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        try:
            yield
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            signal.signal(signal.SIGXFSZ, previous)

    return limited


@pytest.fixture
def immutable():
    """Makes a folder unwritable even for root (tests run as root, whom chmod does not stop): chmod, and
    the immutable attribute where running as root; undone at the end."""
    import shutil
    import subprocess

    made = []

    def freeze(folder: Path) -> None:
        folder.chmod(0o555)
        if os.geteuid() == 0:
            if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)],
                                                                capture_output=True).returncode:
                pytest.skip("running as root, and this filesystem has no immutable attribute: chmod alone does "
                            "not stop root")
        made.append(folder)

    yield freeze
    for folder in made:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
        folder.chmod(0o755)


def stopped_before_results(monkeypatch) -> None:
    """Evaluations stop (Ctrl-C) just before writing results.json: every language scored is in `partial/`, as an
    evaluation interrupted at its end leaves it (a finished one removes `partial/`)."""
    import xsyn.run.evaluation

    real = xsyn.run.evaluation.atomic_write_json

    def write(path, data):
        if Path(path).name == "results.json":
            raise KeyboardInterrupt
        real(path, data)

    monkeypatch.setattr(xsyn.run.evaluation, "atomic_write_json", write)
