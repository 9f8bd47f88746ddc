#!/usr/bin/env bash
# The tuning farm's throughput on one machine of several GPUs, then a step of the real search:
#   1. one worker (GPU 0) searches ResNet-18's kernels, the costliest first, into a fresh folder, for T1 s;
#   2. a worker per GPU searches the same kernels, in the same order, into another fresh folder, for T1 s;
#      each kernel's finish time in both says how much sooner the farm gets through the same work;
#   3. a worker per GPU goes on with the four nets in the card's tuning folder for T3 s.
# The searches of 1 and 2 are merged into the card's choices too (they are real searches of this device).
# Usage: scripts/tinygrad-farm-throughput.sh T1 T3     (everything into OUT as farm-throughput-CARD.tgz)
set -uo pipefail
cd "$(dirname "$0")/.."
t1="${1:?usage: T1 T3}"; t3="${2:?usage: T1 T3}"
source scripts/gpu-card.sh   # $python, $card, $tuning, $platform, $work, gpu_pack
out=$work
gpus=$(nvidia-smi -L | wc -l)
export PYTHONUNBUFFERED=1 PYOPENCL_CTX="$platform:0"
echo "$card x$gpus, platform $platform, tuning $tuning, $(nproc) host cores" | tee "$out/farm.txt"
farm() {   # farm PORT WORKERS: a scheduler and WORKERS workers, one per GPU, each compiling on its share of the cores
    "$python" -m distributed.cli.dask_scheduler --port "$1" --no-dashboard > /dev/null 2>&1 &
    sleep 3
    for ((g = 0; g < $2; g++)); do
        PARALLEL=$(( $(nproc) / $2 )) PYOPENCL_CTX="$platform:$g" "$python" -m distributed.cli.dask_worker \
            tcp://127.0.0.1:"$1" --nthreads 1 --name "gpu$g" --no-dashboard > /dev/null 2>&1 &
    done
    "$python" -c "import distributed; distributed.Client('tcp://127.0.0.1:$1', timeout=60).wait_for_workers($2, timeout=120)"
}
tune() {   # tune PORT FOLDER BUDGET NETS
    COMPARE_CACHE_DIR="$2" "$python" -m compare tune --scope tinygrad --net "$4" --budget-s "$3" \
        --scheduler tcp://127.0.0.1:"$1" 2>&1 | grep -v "^[0-9:]* tinygrad: searching\|kernels searched at width 2, "
}
mkdir -p /tmp/one /tmp/all
farm 8791 1; echo "== one worker" >> "$out/farm.txt"; tune 8791 /tmp/one "$t1" resnet18 >> "$out/farm.txt"
farm 8792 "$gpus"; echo "== $gpus workers" >> "$out/farm.txt"; tune 8792 /tmp/all "$t1" resnet18 >> "$out/farm.txt"
"$python" - "$tuning" >> "$out/farm.txt" <<'PY'
import json, sys, glob, datetime
def finish(folder):
    (path,) = glob.glob(f"{folder}/tinygrad-search/*/choices.json")
    d = json.load(open(path))
    t = sorted(datetime.datetime.fromisoformat(c["when"]).timestamp() for c in d["kernels"])
    surveyed = [s for s in d["nets"]]
    return t, path
one, p1 = finish("/tmp/one"); many, p2 = finish("/tmp/all")
# the survey ends before the first search starts; a kernel's finish is counted from the first kernel's start
s1 = json.load(open(p1)); s2 = json.load(open(p2))
start1 = one[0] - s1["kernels"][0]["search_s"] if one else 0
start2 = min(datetime.datetime.fromisoformat(c["when"]).timestamp() - c["search_s"] for c in s2["kernels"]) if many else 0
k = min(len(one), len(many))
print(f"one worker: {len(one)} kernels; all workers: {len(many)} kernels in the same budget")
if k:
    a, b = one[k - 1] - start1, sorted(many)[k - 1] - start2
    print(f"the first {k} kernels (the costliest): one worker {a:.0f} s, all workers {b:.0f} s: {a / b:.2f}x")
PY
for f in /tmp/one /tmp/all; do cp "$(ls $f/tinygrad-search/*/choices.json)" "$out/choices-$(basename $f).json"; done
"$python" -c "
import sys; sys.path.insert(0, '.')
from pathlib import Path
from backends.peers.tinygrad_choices import ChoiceStore, Choices, DeviceId
import json, glob
for f in ('/tmp/one', '/tmp/all'):
    (p,) = glob.glob(f + '/tinygrad-search/*/choices.json'); d = json.load(open(p))
    dev = DeviceId(**d['device']); ChoiceStore(dev, Path('$tuning')).save(Choices.from_json(d, dev))
"
farm 8793 "$gpus"; echo "== $gpus workers, the four nets" >> "$out/farm.txt"
tune 8793 "$tuning" "$t3" resnet18,mobilenet-v2,vgg16,lenet >> "$out/farm.txt"
COMPARE_CACHE_DIR="$tuning" "$python" -m compare tune --scope tinygrad --net resnet18,mobilenet-v2,vgg16,lenet --show > "$out/depth.txt" 2>&1
gpu_pack farm-throughput
