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
python="${PYTHON:-python3}"
mkdir -p "$out"
log() { echo "== $*" >&2; }

# Debian's CLBlast and OpenCL headers: only the packages the system lacks
missing=()
for deb in .offline/deb/*.deb; do
    dpkg -s "$(dpkg-deb -f "$deb" Package)" >/dev/null 2>&1 || missing+=("$deb")
done
if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]}"
    dpkg -i --force-depends "${missing[@]}" >/dev/null
fi

# pyopencl and pyclblast (built here against that CLBlast, about half a minute)
if ! "$python" -c "import pyopencl, pyclblast, tabulate" 2>/dev/null; then
    log "installing .offline/whl"
    "$python" -m pip install -q --no-index --find-links .offline/whl pyopencl tabulate cython scikit-build-core
    "$python" -m pip install -q --no-index --no-build-isolation --find-links .offline/whl .offline/whl/pyclblast-*.tar.gz
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

# NVIDIA ships libnvidia-opencl but the image may lack the ICD file naming it
if ! "$python" -c "import pyopencl as cl; import sys; sys.exit(not any('NVIDIA' in p.name for p in cl.get_platforms()))" 2>/dev/null; then
    lib=$(ls /usr/local/nvidia/lib64/libnvidia-opencl.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 2>/dev/null | head -n 1 || true)
    if [ -n "$lib" ]; then
        log "registering $lib as an OpenCL ICD"
        icd=$(mktemp -d)
        echo "$lib" > "$icd/nvidia.icd"
        cp /etc/OpenCL/vendors/*.icd "$icd/" 2>/dev/null || true
        export OCL_ICD_VENDORS="$icd"
    fi
fi

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
