#!/usr/bin/env bash
# One scope's search (tinygrad or clblast) on every GPU of one machine through the tuning farm: a Dask
# scheduler here, one worker per GPU pinned to it by PYOPENCL_CTX=P:D, and `compare tune --scheduler`
# handing each worker the next piece of work (tinygrad: a kernel, the costliest first; clblast: a share of a
# problem's configurations) into the card's tuning folder (scripts/gpu-card.sh).  Then the depth, and
# everything packed into OUT as tune-SCOPE-CARD.tgz (scripts/gpu-card.sh says how to unpack it): commit it.
# Budget-limited and resumable: the next call (warm machine or fresh, from the committed folder) goes on.
# Carry .offline and .offline-farm (Dask's wheels, scripts/offline-bundle.sh) to the machine.
# Usage: scripts/tune-gpus.sh SCOPE BUDGET_S [NETS]   (WIDTH=4 for tinygrad's width, GPUS=1 to use fewer)
set -uo pipefail
cd "$(dirname "$0")/.."
scope="${1:?usage: scripts/tune-gpus.sh SCOPE BUDGET_S [NETS]}"
budget="${2:?usage: scripts/tune-gpus.sh SCOPE BUDGET_S [NETS]}"
nets="${3:-resnet18,mobilenet-v2,vgg16,lenet}"
source scripts/gpu-card.sh   # $python, $card, $tuning, $platform, $work, gpu_pack
out=$work
gpus=${GPUS:-$(nvidia-smi -L | wc -l)}
port=8786
# tinygrad: one kernel at a time per GPU (its search compiles on PARALLEL processes); CLBlast: a child per
# worker thread, side by side on the GPU (compiling is host work: 8 of them, as `compare tune --jobs` does)
width=(); threads=$(( $(nproc) / gpus / 2 )); (( threads > 8 )) && threads=8; (( threads < 1 )) && threads=1
[ "$scope" = tinygrad ] && width=(--beam-width "${WIDTH:-2}") && threads=1
export COMPARE_CACHE_DIR="$tuning" PYTHONUNBUFFERED=1 PARALLEL=$(( $(nproc) / gpus ))
echo "$scope: $card x$gpus, platform $platform, $threads worker threads and $PARALLEL compile processes per GPU" | tee -a "$out/$scope.txt"
"$python" -m distributed.cli.dask_scheduler --port $port --no-dashboard > "$out/logs/scheduler.log" 2>&1 &
pids=($!)
sleep 3
for ((g = 0; g < gpus; g++)); do
    PYOPENCL_CTX="$platform:$g" "$python" -m distributed.cli.dask_worker tcp://127.0.0.1:$port --nthreads "$threads" \
        --name "gpu$g" --no-dashboard >> "$out/logs/worker$g.log" 2>&1 &
    pids+=($!)
done
"$python" -c "import distributed; distributed.Client('tcp://127.0.0.1:$port', timeout=60).wait_for_workers($gpus, timeout=120)"
start=$(date +%s)
PYOPENCL_CTX="$platform:0" "$python" -m compare tune --scope "$scope" --net "$nets" --budget-s "$budget" \
    "${width[@]}" --scheduler tcp://127.0.0.1:$port 2>&1 | tee -a "$out/$scope.txt"
echo "$scope: $(( $(date +%s) - start )) s on $gpus GPUs" | tee -a "$out/$scope.txt"
kill "${pids[@]}" 2>/dev/null
wait 2>/dev/null
PYOPENCL_CTX="$platform:0" "$python" -m compare tune --scope "$scope" --net "$nets" "${width[@]}" \
    --show > "$out/$scope-depth.txt" 2>&1
gpu_pack "tune-$scope"
