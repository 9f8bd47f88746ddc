#!/usr/bin/env bash
# Our tiles, then our prepare-time forms with them, measured on a GPU machine (`compare tune --scope
# tiles,forms`; SCOPE=tiles for the tiles alone), one GPU per net (round robin from GPU
# FIRST_GPU, default 0; CUDA_VISIBLE_DEVICES shows each run its GPU alone), into the card's tuning folder
# (scripts/gpu-card.sh; the tiles' cache keeps every net's layers).  Each GPU's nets share SECONDS_PER_GPU.
# Packed into OUT as tiles-CARD.tgz (scripts/gpu-card.sh says how to unpack it): commit it.
# Usage: scripts/tiles-gpus.sh SECONDS_PER_GPU NETS
set -uo pipefail
cd "$(dirname "$0")/.."
seconds="${1:?usage: scripts/tiles-gpus.sh SECONDS_PER_GPU NETS}"
nets="${2:?usage: scripts/tiles-gpus.sh SECONDS_PER_GPU NETS}"
source scripts/gpu-card.sh   # $python, $card, $tuning, $platform, $work, gpu_pack
first=${FIRST_GPU:-0}
gpus=$(( $(nvidia-smi -L | wc -l) - first ))
export COMPARE_CACHE_DIR="$tuning" PYTHONUNBUFFERED=1
IFS=, read -ra all <<< "$nets"
one_gpu() {   # the nets whose place in the list is g modulo the GPUs, one after another
    local g=$1 i mine=() net
    for ((i = g; i < ${#all[@]}; i += gpus)); do mine+=("${all[i]}"); done
    for net in "${mine[@]}"; do
        CUDA_VISIBLE_DEVICES=$((g + first)) PYOPENCL_CTX="$platform:0" "$python" -m compare tune --scope "${SCOPE:-tiles,forms}" \
            --net "$net" --budget-s $(( seconds / ${#mine[@]} )) > "$work/tiles-$net.txt" 2>&1
        echo "$net on GPU $((g + first)): exit $?" | tee -a "$work/tiles.txt"
    done
}
for ((g = 0; g < gpus && g < ${#all[@]}; g++)); do one_gpu "$g" & done
wait
gpu_pack tiles
