#!/usr/bin/env bash
# The whole fair comparison on one device, into one folder: the device and
# its peak; the CLBlast backends with CLBlast's database parameters; CLBlast
# and our tiles tuned for the device (TUNE_BUDGET seconds, default 900);
# LeNet-5 (batch 100) and VGG-16 (batch 1) on every backend, tuned, their
# timed passes round-robin (--interleave: drift hits every backend alike);
# the report of each.
# Usage: scripts/compare-all.sh OUTDIR [REPEATS]   (PYTHON: the interpreter, default .venv/bin/python)
# STEPS picks some of its three steps (default "untuned tune run"), for
# machines that cap one command's time; the tuning is kept in the cache
# (COMPARE_CACHE_DIR) from one step to the next.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/compare-all.sh OUTDIR [REPEATS]}"
repeats="${2:-20}"
python="${PYTHON:-.venv/bin/python}"
steps=" ${STEPS:-untuned tune run} "
mkdir -p "$out"
log() { echo "== $*" >&2; }
compare() { "$python" -m compare "$@"; }
# exit 1 means a check failed or a backend crashed: keep going, the report shows it
run() { local code=0; compare run "$@" || code=$?; [ "$code" -le 1 ] || { log "compare run $* exited $code"; exit "$code"; }; }

if [[ $steps == *" untuned "* ]]; then
    compare devices | tee "$out/devices.txt"
    compare peak | tee "$out/peak.txt"
    for net in lenet vgg16; do
        log "CLBlast with its database's parameters, $net"
        run --net "$net" --backends clblast,clblast-convgemm,clblast-best --clblast-params database \
            --repeats "$repeats" --warmup 3 --interleave --out "$out/$net-untuned.json" > "$out/$net-untuned.txt"
    done
    compare report "$out/lenet-untuned.json" "$out/vgg16-untuned.json" --out "$out/untuned"
fi
if [[ $steps == *" tune "* ]]; then
    log "tuning for ${TUNE_BUDGET:-900} s"
    compare tune --budget-s "${TUNE_BUDGET:-900}" | tee "$out/tune.txt"
fi
[[ $steps == *" run "* ]] || exit 0
for net in lenet vgg16; do
    log "every backend, $net"
    run --net "$net" --backends all --repeats "$repeats" --warmup 3 --interleave --out "$out/$net.json" \
        > "$out/$net.txt"
    cat "$out/$net.txt"
done
compare report "$out/lenet.json" "$out/vgg16.json" --out "$out"
log "results and report in $out"
