#!/usr/bin/env bash
# On an air-gapped NVIDIA machine (no registries), with this checkout and the
# .offline folder made by scripts/offline-bundle.sh: install what is missing,
# register NVIDIA's OpenCL driver if no ICD file names it, measure the
# device's peak, run LeNet-5 (batch 100) and VGG-16 (batch 1) on every
# backend, and write the results JSON and the report into one folder.
# Usage: scripts/run-offline.sh OUTDIR [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/run-offline.sh OUTDIR [REPEATS]}"
repeats="${2:-20}"
mkdir -p "$out"
log() { echo "== $*" >&2; }

source scripts/offline-env.sh

compare() { "$python" -m compare "$@"; }
compare devices | tee "$out/devices.txt"
compare peak | tee "$out/peak.txt"
for net in lenet vgg16; do
    log "running $net"
    # exit 1 means a check failed or a backend crashed: keep going, the report shows it
    code=0
    compare run --net "$net" --backends all --repeats "$repeats" --warmup 3 --out "$out/$net.json" \
        > "$out/$net.txt" || code=$?
    cat "$out/$net.txt"
    [ "$code" -le 1 ] || { log "compare run --net $net failed with exit code $code"; exit "$code"; }
done
compare report "$out/lenet.json" "$out/vgg16.json" --out "$out"
log "results and report in $out"
