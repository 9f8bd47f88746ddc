#!/usr/bin/env bash
# Where the tinygrad peer's time goes on a GPU (issue 53), in one call on one GPU, one run after another:
# tinygrad's own recipe (benchmarks/tinygrad_own.py), then `compare run` of the peer alone without and with
# the check against the oracle (in a drawn process not kept; with one draw in the timed one, where it leaves
# a graph a layer), interleaved with the two
# fastest sides, and among the sides that hold GPU contexts of their own (CLBlast's children, OpenCV's),
# every side the fastest of DRAWS processes.  Every output is packed into $OUT/gap-NET.tgz as each run ends
# (a call brings back a few files only; a call cut short keeps the runs it finished).
# Usage: scripts/tinygrad-gap.sh NET [REPEATS, default 20]   (DRAWS, default 3)
set -uo pipefail
cd "$(dirname "$0")/.."
net="${1:?usage: scripts/tinygrad-gap.sh NET [REPEATS]}"
repeats="${2:-20}"
draws="${DRAWS:-3}"
[ -n "${work-}" ] || source scripts/gpu-card.sh >/dev/null 2>&1
export COMPARE_CACHE_DIR="$tuning" PYTHONUNBUFFERED=1 PYOPENCL_CTX="$platform:0" CUDA_VISIBLE_DEVICES=0
out=$work
timed() { local name=$1 start; shift; start=$(date +%s); "$@" > "$out/$name.txt" 2>&1
          echo "$name: exit $?, $(( $(date +%s) - start )) s" | tee -a "$out/gap.txt"
          tar -czf "${OUT:-/tmp}/gap-$net.tgz" -C "$out" --exclude ./logs .; }
run() { local name=$1 backends=$2; shift 2
        timed "$name-$net" "$python" -m compare run --net "$net" --backends "$backends" --repeats "$repeats" \
            --warmup 5 --draws "$draws" --out "$out/$name-$net.json" "$@"; }
timed "own-$net" "$python" benchmarks/tinygrad_own.py --nets "$net" --ways own,peer-timed --draws "$draws"
run alone-unchecked tinygrad --mode performance
run alone tinygrad
run alone-one-draw tinygrad --draws 1   # one draw: its layer-wise check in the timed process, as before
run three tinygrad,vectorised-tiled,torch --interleave
run crowd tinygrad,vectorised-tiled,torch,clblast,clblast-convgemm,clblast-best,opencv --interleave --mode performance
