#!/usr/bin/env bash
# Where the tinygrad peer's time goes on a GPU (issue 53): on one quiet GPU, one after another,
# tinygrad's own recipe against our peer in every way (benchmarks/tinygrad_own.py), then `compare run`
# of the peer alone and interleaved with the two fastest sides, so the three figures come from one call.
# Each writes into $work (scripts/gpu-card.sh, sourced first when the caller has not).
# Usage: scripts/tinygrad-gap.sh NET [REPEATS, default 30]
set -uo pipefail
cd "$(dirname "$0")/.."
net="${1:?usage: scripts/tinygrad-gap.sh NET [REPEATS]}"
repeats="${2:-30}"
[ -n "${work-}" ] || source scripts/gpu-card.sh
export COMPARE_CACHE_DIR="$tuning" PYTHONUNBUFFERED=1 PYOPENCL_CTX="$platform:0" CUDA_VISIBLE_DEVICES=0
timed() { local name=$1 start; shift; start=$(date +%s); "$@" > "$work/$name.txt" 2>&1
          echo "$name: exit $?, $(( $(date +%s) - start )) s" | tee -a "$work/gap.txt"; }
timed "own-$net" "$python" benchmarks/tinygrad_own.py --nets "$net"
timed "alone-$net" "$python" -m compare run --net "$net" --backends tinygrad --repeats "$repeats" --warmup 5 \
    --out "$work/alone-$net.json"
timed "three-$net" "$python" -m compare run --net "$net" --backends tinygrad,vectorised-tiled,torch \
    --repeats "$repeats" --warmup 5 --interleave --out "$work/three-$net.json"
