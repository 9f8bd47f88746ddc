#!/usr/bin/env bash
# Installs what clblast-compare needs on a fresh Debian or Ubuntu machine:
# Debian's OpenCL loader, PoCL and Mesa's rusticl (two CPU OpenCL devices), CLBlast with its tuners and Oclgrind
# through apt-get where missing, then the package into ./.venv.
# Usage: scripts/setup.sh [pip extras, default test,tensorflow]
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-test,tensorflow}"

packages="pocl-opencl-icd mesa-opencl-icd ocl-icd-opencl-dev libclblast-dev clblast-utils clinfo oclgrind"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "setup: apt-get install$missing"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends $missing
fi

python=$(command -v python3.11 || command -v python3)
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# pyclblast has no wheel: pip builds it against Debian's CLBlast (about a minute)
.venv/bin/python -m pip install -q -e ".[$extras]"
