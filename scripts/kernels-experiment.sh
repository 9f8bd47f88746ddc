#!/usr/bin/env bash
# Issue 39's GPU experiment in one command, on a bare NVIDIA machine with this
# checkout and the .offline folder of scripts/offline-bundle.sh: per net
# (ResNet-18, MobileNet-v2, VGG-16 at batch 1, LeNet-5 at 100), one
# interleaved `compare run` of our hand-written backends as they are and as
# their -direct selves (the kernels before issue 39: no Winograd, no block
# kernels, split sums as planned), PyTorch at its best and CLBlast at its best
# (tuned: the committed H100 tuning), every output checked against the
# float64 oracle; then Winograd's error on the device.  Everything lands in
# OUTDIR: <net>.json/.txt (compare run's own), <net>-summary.txt (ours
# against PyTorch and CLBlast, new against old, each layer's share of its
# roofline: benchmarks/kernels_vs_peers.py), winograd-error.txt.
# A budget keeps it inside a 10-minute device command: the nets left when it
# runs out are named at the end.
# Usage: scripts/kernels-experiment.sh OUTDIR   (BUDGET_S: seconds after which no new net starts, default 300)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/kernels-experiment.sh OUTDIR}"
mkdir -p "$out"
start=$SECONDS
if [ -d .offline ]; then
    source scripts/offline-env.sh
else
    python="${PYTHON:-.venv/bin/python}"
fi
export COMPARE_CACHE_DIR="${COMPARE_CACHE_DIR:-$PWD/reports/nvidia-h100/tuning}"
(nvidia-smi -L || true) > "$out/nvidia-smi.txt" 2>&1
"$python" -m compare devices > "$out/devices.txt" 2>&1 || true
"$python" benchmarks/kernels_vs_peers.py --nets resnet18,mobilenet-v2,vgg16,lenet:100 \
    --backends vectorised,vectorised-tiled,fused,torch,clblast-best --repeats 10 --warmup 3 \
    --budget-s "${BUDGET_S:-300}" --out "$out" 2>&1 | tee "$out/kernels-vs-peers.txt" || true
if [ $((SECONDS - start)) -lt 470 ]; then
    timeout $((530 - (SECONDS - start))) "$python" benchmarks/winograd_error.py --nets resnet18,vgg16 --random 10 --gpu-plans \
        > "$out/winograd-error.txt" 2>&1 || echo "winograd_error.py stopped (exit $?)" >> "$out/winograd-error.txt"
fi
echo "== done in $((SECONDS - start)) s; results in $out"
