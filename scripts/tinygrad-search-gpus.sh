#!/usr/bin/env bash
# tinygrad's schedule search on every GPU of a machine at once, each GPU a share of the nets (one
# `compare tune --scope tinygrad` per GPU, pinned by PYOPENCL_CTX=P:D), into the tuning folder of the
# card (reports/nvidia-h100/tuning or reports/nvidia-h200/tuning): the choices file takes every writer's
# choices under its lock.  Then the depth, and the choices copied to OUT.  One budget-limited step that
# continues the last; carry OUT's choices back into the folder and commit them.
# Usage: scripts/tinygrad-search-gpus.sh BUDGET_S [NETS]   (WIDTH=4 for another width)
set -uo pipefail
cd "$(dirname "$0")/.."
budget="${1:?usage: scripts/tinygrad-search-gpus.sh BUDGET_S [NETS]}"
nets="${2:-resnet18,mobilenet-v2,vgg16,lenet}"
out="${OUT:-/tmp/tinygrad-out}"
mkdir -p "$out"
source scripts/offline-env.sh >/dev/null
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
case "$card" in *H200*) tuning=reports/nvidia-h200/tuning ;; *) tuning=reports/nvidia-h100/tuning ;; esac
platform=$("$python" -c "import pyopencl as cl; print([i for i, p in enumerate(cl.get_platforms()) if 'NVIDIA' in p.name][0])")
gpus=$(nvidia-smi -L | wc -l)
export COMPARE_CACHE_DIR="$tuning" PYTHONUNBUFFERED=1 PARALLEL=$(( $(nproc) / gpus ))
IFS=, read -ra all <<< "$nets"
echo "$card x$gpus, platform $platform, tuning $tuning, $PARALLEL compile processes per GPU" | tee "$out/search.txt"
for ((g = 0; g < gpus; g++)); do
    share=""
    for ((i = g; i < ${#all[@]}; i += gpus)); do share="$share${share:+,}${all[i]}"; done
    [ -n "$share" ] || continue
    PYOPENCL_CTX="$platform:$g" "$python" -m compare tune --scope tinygrad --net "$share" --budget-s "$budget" \
        --beam-width "${WIDTH:-2}" > "$out/gpu$g.txt" 2>&1 &
done
wait
"$python" -m compare tune --scope tinygrad --net "$nets" --beam-width "${WIDTH:-2}" --show > "$out/depth.txt" 2>&1
for d in "$tuning"/tinygrad-search/*/; do cp "$d/choices.json" "$out/choices-$(basename "$d").json"; done
