#!/usr/bin/env bash
# tinygrad's schedule search on every GPU of one machine through the tuning farm: a Dask scheduler here,
# one worker per GPU pinned to it by PYOPENCL_CTX=P:D, and `compare tune --scope tinygrad --scheduler`
# handing each worker the next kernel, the costliest first, into the card's tuning folder
# (reports/nvidia-h100/tuning or reports/nvidia-h200/tuning).  Then the depth, and the choices copied to OUT.
# One budget-limited step that continues the last: carry OUT's choices back into the folder and commit them.
# Usage: scripts/tinygrad-search-gpus.sh BUDGET_S [NETS]   (WIDTH=4 for another width, GPUS=1 to use fewer)
set -uo pipefail
cd "$(dirname "$0")/.."
budget="${1:?usage: scripts/tinygrad-search-gpus.sh BUDGET_S [NETS]}"
nets="${2:-resnet18,mobilenet-v2,vgg16,lenet}"
out="${OUT:-/tmp/tinygrad-out}"
mkdir -p "$out"
source scripts/gpu-card.sh   # $python, $card, $tuning, $platform
gpus=${GPUS:-$(nvidia-smi -L | wc -l)}
port=8786
export COMPARE_CACHE_DIR="$tuning" PYTHONUNBUFFERED=1 PARALLEL=$(( $(nproc) / gpus ))
echo "$card x$gpus, platform $platform, tuning $tuning, $PARALLEL compile processes per GPU" | tee "$out/search.txt"
"$python" -m distributed.cli.dask_scheduler --port $port --no-dashboard > "$out/scheduler.log" 2>&1 &
pids=($!)
sleep 3
for ((g = 0; g < gpus; g++)); do
    PYOPENCL_CTX="$platform:$g" "$python" -m distributed.cli.dask_worker tcp://127.0.0.1:$port --nthreads 1 \
        --name "gpu$g" --no-dashboard > "$out/worker$g.log" 2>&1 &
    pids+=($!)
done
"$python" -c "import distributed; distributed.Client('tcp://127.0.0.1:$port', timeout=60).wait_for_workers($gpus, timeout=120)"
PYOPENCL_CTX="$platform:0" "$python" -m compare tune --scope tinygrad --net "$nets" --budget-s "$budget" \
    --beam-width "${WIDTH:-2}" --scheduler tcp://127.0.0.1:$port 2>&1 | tee -a "$out/search.txt"
kill "${pids[@]}" 2>/dev/null
PYOPENCL_CTX="$platform:0" "$python" -m compare tune --scope tinygrad --net "$nets" --beam-width "${WIDTH:-2}" \
    --show > "$out/depth.txt" 2>&1
for d in "$tuning"/tinygrad-search/*/; do cp "$d/choices.json" "$out/choices-$(basename "$d").json"; done
