#!/usr/bin/env bash
# The headline runs on a GPU machine without network: each net on every backend in one interleaved run
# (`compare run --backends all --interleave`), with the card's committed tuning (reports/nvidia-h100/tuning
# or reports/nvidia-h200/tuning as COMPARE_CACHE_DIR: CLBlast's, the tiles', tinygrad's choices), the
# results and what each run printed into OUT, and what the runs added to the tuning folder (OpenCV's
# auto-tuning) as one tar file there.  Carry them back into reports/<card>/ and commit them.
# Usage: scripts/headline-gpu.sh NETS [REPEATS, default 10]
set -uo pipefail
cd "$(dirname "$0")/.."
nets="${1:?usage: scripts/headline-gpu.sh NETS [REPEATS]}"
repeats="${2:-10}"
out="${OUT:-/tmp/headline-out}"
mkdir -p "$out"
source scripts/gpu-card.sh   # $python, $card, $tuning, $platform
export COMPARE_CACHE_DIR="$tuning" PYTHONUNBUFFERED=1
echo "$card, tuning $tuning, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" | tee "$out/headline.txt"
before=$(mktemp)
find "$tuning" -type f | sort > "$before"
# OpenCV's auto-tuning (its opencl-tuned mode reads it; nothing is tuned at run time)
"$python" -m compare tune --scope opencv --net "$nets" --budget-s 120 > "$out/opencv-tune.txt" 2>&1
IFS=, read -ra all <<< "$nets"
for net in "${all[@]}"; do
    start=$(date +%s)
    "$python" -m compare run --net "$net" --backends all --repeats "$repeats" --warmup 3 --interleave \
        --out "$out/$net.json" > "$out/$net.txt" 2>&1
    echo "$net: exit $?, $(( $(date +%s) - start )) s" | tee -a "$out/headline.txt"
done
find "$tuning" -type f | sort | comm -13 "$before" - > "$out/new-tuning-files.txt"
[ -s "$out/new-tuning-files.txt" ] && tar -cf "$out/new-tuning.tar" -T "$out/new-tuning-files.txt"
true
