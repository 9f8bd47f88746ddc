# Sourced by the GPU machine's scripts: installs from .offline (scripts/offline-env.sh, which sets $python),
# then sets $card (the GPU's name), $tuning (the card's committed tuning folder: tuning is per card) and
# $platform (the NVIDIA OpenCL platform's index, for PYOPENCL_CTX=$platform:GPU).
source scripts/offline-env.sh >/dev/null
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
case "$card" in *H200*) tuning=reports/nvidia-h200/tuning ;; *) tuning=reports/nvidia-h100/tuning ;; esac
platform=$("$python" -c "import pyopencl as cl; print([i for i, p in enumerate(cl.get_platforms()) if 'NVIDIA' in p.name][0])")
