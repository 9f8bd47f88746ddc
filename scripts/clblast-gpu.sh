#!/usr/bin/env bash
# CLBlast's default search on one GPU of this machine, without a farm (`compare tune --scope clblast`,
# children side by side on GPU 0), into the card's tuning folder (scripts/gpu-card.sh); then its depth, and
# everything packed into OUT as clblast-CARD.tgz (scripts/gpu-card.sh says how to unpack it): commit it.
# Budget-limited and resumable.  Usage: scripts/clblast-gpu.sh BUDGET_S NETS [--verify-only]
set -uo pipefail
cd "$(dirname "$0")/.."
budget="${1:?usage: scripts/clblast-gpu.sh BUDGET_S NETS [--verify-only]}"
nets="${2:?usage: scripts/clblast-gpu.sh BUDGET_S NETS [--verify-only]}"
source scripts/gpu-card.sh   # $python, $card, $tuning, $platform, $work, gpu_pack
# the verification builds every candidate side by side first: the driver's cache must hold them all
export COMPARE_CACHE_DIR="$tuning" PYTHONUNBUFFERED=1 CUDA_CACHE_MAXSIZE=4294967296
start=$(date +%s)
CUDA_VISIBLE_DEVICES=0 PYOPENCL_CTX="$platform:0" "$python" -m compare tune --scope clblast --net "$nets" \
    --budget-s "$budget" "${@:3}" 2>&1 | tee -a "$work/clblast.txt"
echo "clblast: $(( $(date +%s) - start )) s" | tee -a "$work/clblast.txt"
CUDA_VISIBLE_DEVICES=0 PYOPENCL_CTX="$platform:0" "$python" -m compare tune --scope clblast --net "$nets" --show \
    > "$work/clblast-depth.txt" 2>&1
gpu_pack clblast
