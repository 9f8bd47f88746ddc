#!/usr/bin/env bash
# tinygrad's schedule search (BEAM) of the nets' kernels on a GPU machine, one budget-limited step that
# continues the last: `compare tune --scope tinygrad` with the tuning folder TUNING (default
# reports/nvidia-h100/tuning) as COMPARE_CACHE_DIR, the costliest kernels of all the nets first.  Then the
# depth per net, and the choices copied to OUT (default /tmp/tinygrad-out): carry them back into TUNING
# (`cp -r OUT/tinygrad-search TUNING/`) before the next step, and commit them.
# The machine needs no network: tinygrad's wheel comes from .offline/whl (scripts/offline-bundle.sh) or
# .whl; pyopencl and NVIDIA's OpenCL registration as scripts/offline-env.sh does them (where .offline is).
# Usage: scripts/tinygrad-search.sh [BUDGET_S, default 450] [NETS, default lenet,resnet18,mobilenet-v2,vgg16]
#        WIDTH=4 for another search width (default 2, the backend's `searched` mode)
set -euo pipefail
cd "$(dirname "$0")/.."
budget="${1:-450}"
nets="${2:-lenet,resnet18,mobilenet-v2,vgg16}"
out="${OUT:-/tmp/tinygrad-out}"
tuning="${TUNING:-reports/nvidia-h100/tuning}"
mkdir -p "$out" "$tuning"

if [ -d .offline ]; then
    source scripts/offline-env.sh   # pyopencl, CLBlast, NVIDIA's ICD; sets $python
else
    python="${PYTHON:-python3}"     # a machine set up already (make setup: PYTHON=.venv/bin/python)
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
if ! "$python" -c "import tinygrad" 2>/dev/null; then
    wheel=$(ls .offline/whl/tinygrad-*.whl .whl/tinygrad-*.whl 2>/dev/null | head -n 1 || true)
    [ -n "$wheel" ] || { echo "no tinygrad wheel in .offline/whl or .whl (scripts/offline-bundle.sh fetches it)" >&2; exit 2; }
    "$python" -m pip install -q --no-index --no-deps "$wheel"
fi
export COMPARE_CACHE_DIR="$tuning" PYTHONUNBUFFERED=1
set +e
"$python" -m compare tune --scope tinygrad --net "$nets" --budget-s "$budget" --beam-width "${WIDTH:-2}" \
    2>&1 | tee "$out/tinygrad-tune.txt"
code=${PIPESTATUS[0]}
set -e
"$python" -m compare tune --scope tinygrad --net "$nets" --beam-width "${WIDTH:-2}" --show | tee "$out/tinygrad-depth.txt"
cp -r "$tuning/tinygrad-search" "$out/" 2>/dev/null || echo "no choices written yet" >&2
exit "$code"
