#!/usr/bin/env bash
# On an air-gapped NVIDIA machine (no registries), with this checkout and the
# .offline folder made by scripts/offline-bundle.sh: install what is missing,
# register NVIDIA's OpenCL driver if no ICD file names it, and
# then run scripts/compare-all.sh: the device's peak, CLBlast untuned, CLBlast
# and our tiles tuned (TUNE_BUDGET seconds, default 900), both nets on every
# backend, the reports, into one folder.
# Usage: scripts/run-offline.sh OUTDIR [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/run-offline.sh OUTDIR [REPEATS]}"
repeats="${2:-20}"

source scripts/offline-env.sh

PYTHON="$python" exec scripts/compare-all.sh "$out" "$repeats"
