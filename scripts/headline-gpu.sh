#!/usr/bin/env bash
# The headline runs on a GPU machine without network: each net on every backend in one interleaved run
# (`compare run --backends all --interleave`) with the card's tuning (scripts/gpu-card.sh: CLBlast's and
# tinygrad's choices; our tiles and OpenCV's auto-tuning measured first for that net, so both sides of the
# hand-written/engine comparison run at their best on the card).  The nets run one after another on GPU 0;
# GPUS=N runs N at once, one GPU each (CUDA_VISIBLE_DEVICES: OpenCL, CUDA and tinygrad's child then see that
# GPU alone), every ratio still from one net's interleaved run on one GPU, but the host is shared.  Results,
# what each run printed and the tuning folder go into OUT as headline-CARD.tgz (scripts/gpu-card.sh says how
# to unpack it).
# Usage: scripts/headline-gpu.sh NETS [REPEATS, default 10]   (GPUS=N to run N nets at once;
# TUNE=opencv TUNE_S=60 where the card's tiles and forms are committed, TUNE= where its tuning is committed whole;
# DRAWS: the processes each side in child processes is drawn in, the fastest kept, default 3: compare/draws.py;
# OWN=0 leaves out tinygrad's own recipe, benchmarks/tinygrad_own.py, run after each net otherwise; COMMIT names the code
# where the copy of the checkout has a stale .git, as the device's has)
set -uo pipefail
cd "$(dirname "$0")/.."
nets="${1:?usage: scripts/headline-gpu.sh NETS [REPEATS]}"
repeats="${2:-10}"
source scripts/gpu-card.sh   # $python, $card, $tuning, $platform, $work, gpu_pack
out=$work
# one net at a time by default: two nets at once on one host slowed the host-bound sides (steps 33-34 of the
# H200 notes: ResNet-18's tinygrad peer 1.53x its own recipe beside MobileNet-v2's run, 1.10x alone)
gpus=${GPUS:-1}
export COMPARE_CACHE_DIR="$tuning" PYTHONUNBUFFERED=1
echo "$card x$gpus, commit ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}" | tee -a "$out/headline.txt"
IFS=, read -ra all <<< "$nets"
one_gpu() {   # the nets whose place in the list is g modulo the GPUs, one after another on GPU g
    local g=$1 i net start
    for ((i = g; i < ${#all[@]}; i += gpus)); do
        net=${all[i]}
        start=$(date +%s)
        [ -n "${TUNE-tiles,forms,opencv}" ] && CUDA_VISIBLE_DEVICES=$g PYOPENCL_CTX="$platform:0" "$python" -m compare tune \
            --scope "${TUNE-tiles,forms,opencv}" --net "$net" --budget-s "${TUNE_S:-240}" > "$out/logs/$net-tune.txt" 2>&1
        CUDA_VISIBLE_DEVICES=$g PYOPENCL_CTX="$platform:0" "$python" -m compare run --net "$net" --backends all \
            --repeats "$repeats" --warmup 3 --interleave --draws "${DRAWS:-3}" --out "$out/$net.json" > "$out/$net.txt" 2>&1
        echo "$net on GPU $g: exit $?, $(( $(date +%s) - start )) s" | tee -a "$out/headline.txt"
        # the net's files at once, so a call cut short in the benchmark below keeps the run
        tar -czf "${OUT:-/tmp}/net-$net.tgz" -C "$out" "$net.json" "$net.txt" 2>/dev/null
        # tinygrad's own recipe beside the peer in the same call (issue 53: the peer within 1.05x of it), the two
        # sampled in turn: the host's phases (the H200 notes' step 35) fall on both alike
        [ "${OWN:-1}" = 1 ] && CUDA_VISIBLE_DEVICES=$g PYOPENCL_CTX="$platform:0" "$python" benchmarks/tinygrad_own.py \
            --nets "$net" --ways own,peer-timed --interleave --draws "${DRAWS:-3}" > "$out/$net-tinygrad-own.txt" 2>&1
        # and again with the benchmark's
        tar -czf "${OUT:-/tmp}/net-$net.tgz" -C "$out" "$net.json" "$net.txt" "$net-tinygrad-own.txt" 2>/dev/null
    done
}
for ((g = 0; g < gpus && g < ${#all[@]}; g++)); do one_gpu "$g" & done
wait
gpu_pack headline
