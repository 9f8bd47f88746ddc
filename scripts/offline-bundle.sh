#!/usr/bin/env bash
# Prepares, on a machine that reaches the package registries, what an
# air-gapped NVIDIA machine needs to run clblast-compare: Python wheels and
# Debian packages in ./.offline (git-ignored), and Dask's farm apart in ./.offline-farm (carry it only
# where a farm runs: the device's working tree is capped at 64 MB).  Then carry the checkout with
# .offline to the GPU machine and run scripts/run-offline.sh there.
# Usage: scripts/offline-bundle.sh [python version of the GPU machine, default 3.12]
set -euo pipefail
cd "$(dirname "$0")/.."
pyver="${1:-3.12}"
python=$(command -v python3.11 || command -v python3)
rm -rf .offline .offline-farm
mkdir -p .offline/whl .offline/deb .offline-farm/whl

platforms="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
# pyopencl and what it imports; tabulate; markdown-it-py (the report's HTML); what building pyclblast needs (onnx and OpenCV's
# opencv-python-headless are in the GPU machine's image already)
"$python" -m pip download -q --only-binary=:all: --python-version "$pyver" --implementation cp $platforms \
    -d .offline/whl pyopencl tabulate markdown-it-py cython scikit-build-core
# Dask's distributed, the tuning farm (`compare tune --scheduler`): itself and what the image lacks of its needs
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp $platforms \
    -d .offline-farm/whl distributed dask locket partd tblib tornado zict
# the project's own small dependencies the image may lack (the locked stores, the cache folder, the host's probes,
# the progress display and terminal tables)
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp $platforms \
    -d .offline/whl filelock platformdirs psutil rich pygments
# pyclblast has no wheel: its source builds there against Debian's CLBlast
"$python" -m pip download -q --no-deps --no-binary pyclblast -d .offline/whl pyclblast==1.4.0
# tinygrad, the `tinygrad` peer: pure Python, no dependencies
"$python" -m pip download -q --no-deps --only-binary=:all: -d .offline/whl "tinygrad>=0.14,<0.15"
rm -f .offline/whl/numpy-*.whl   # numpy is there already; the GPU machine's own build stays

(cd .offline/deb && apt-get download -q libclblast1 libclblast-dev clblast-utils ocl-icd-libopencl1 ocl-icd-opencl-dev \
    opencl-c-headers opencl-clhpp-headers clinfo)
rm -f .offline/whl/cython-*.whl   # pyclblast builds with the image's own
du -sh .offline .offline-farm
ls .offline/whl .offline/deb .offline-farm/whl
