#!/usr/bin/env bash
# The first VGG-16 answer a user gets on a bare GPU machine (issue 53: under 60 s), timed on any machine by
# emptying every cache a first run fills: the driver's compiled kernels (CUDA_CACHE_PATH), pyopencl's and
# PoCL's (XDG_CACHE_HOME, POCL_CACHE_DIR), PyTorch's compiler's (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR),
# and our own (COMPARE_CACHE_DIR: a fresh copy of the card's committed tuning, as a checkout has it).  The
# set-up (installing) is not in the time.  What it printed and its wall time go to $OUT (or $work).
# Usage: scripts/first-answer-gpu.sh [NET, default vgg16] [BACKENDS, default clblast-best,vectorised-tiled,torch]
# PROFILE=1: the runner and its children under cProfile (backends/profiled.py), summed up in first-NET-profile.txt
# (the profile slows what it measures: its wall time is not the answer's)
set -uo pipefail
cd "$(dirname "$0")/.."
net="${1:-vgg16}"
backends="${2:-clblast-best,vectorised-tiled,torch}"
[ -n "${work-}" ] || source scripts/gpu-card.sh >/dev/null 2>&1
out="${OUT:-$work}"
cold=$(mktemp -d /tmp/cold.XXXXXX)
[ "${PROFILE:-0}" = 1 ] && export COMPARE_PROFILE_DIR="$cold/prof"
mkdir -p "$cold/tuning" && cp -r "$committed/." "$cold/tuning/"
start=$(date +%s.%N)
CUDA_CACHE_PATH="$cold/nv" XDG_CACHE_HOME="$cold/xdg" POCL_CACHE_DIR="$cold/pocl" TORCHINDUCTOR_CACHE_DIR="$cold/inductor" \
    TRITON_CACHE_DIR="$cold/triton" COMPARE_CACHE_DIR="$cold/tuning" PYOPENCL_CTX="$platform:0" CUDA_VISIBLE_DEVICES=0 \
    PYTHONUNBUFFERED=1 "$python" -m compare run --net "$net" --backends "$backends" --repeats 10 --warmup 3 --interleave \
    --out "$out/first-$net.json" > "$out/first-$net.txt" 2>&1
code=$?
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
# the runner's process draws its speed as it starts (compare/runner_draw.py): its figure says which it drew
drew=$("$python" -c "import json, sys; print(json.load(open(sys.argv[1]))['host']['plain_python_ms'])" \
    "$out/first-$net.json" 2>/dev/null || echo unknown)
echo "first $net answer ($backends), every cache empty: exit $code, $took s (the runner's plain Python: $drew ms)" \
    | tee -a "$out/first-$net.txt"
# where the time went, from the run's stages (compare/stages.py): seconds since its process started
"$python" -c "import json, sys
for s in json.load(open(sys.argv[1])).get('stages', []): print(f\"  {s['at_s']:7.1f} s  {s['name']}\")" \
    "$out/first-$net.json" 2>/dev/null | tee -a "$out/first-$net.txt"
[ "${PROFILE:-0}" = 1 ] && "$python" benchmarks/profile_summary.py "$cold/prof" --top 30 \
    > "$out/first-$net-profile.txt" 2>&1
rm -rf "$cold"
