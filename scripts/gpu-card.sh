# Sourced by the GPU machine's scripts: installs from .offline (scripts/offline-env.sh, which sets $python),
# then sets $card (the GPU's name), $committed (the card's committed tuning folder: tuning is per card),
# $tuning (the folder the scripts tune into and read) and $platform (the NVIDIA OpenCL platform's index).
# $tuning is .gpu-state/<card>/tuning, ignored by git: a warm machine keeps it between calls (each call's
# working tree replaces the tracked files, so a search resumes from it, not from the older committed copy);
# a fresh machine starts it from the committed folder.  Each script ends by packing it and what it wrote into one file in OUT (gpu_pack).
source scripts/offline-env.sh >/dev/null
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
case "$card" in *H200*) committed=reports/nvidia-h200/tuning ;; *) committed=reports/nvidia-h100/tuning ;; esac
tuning=.gpu-state/$(basename "$(dirname "$committed")")/tuning
mkdir -p "$tuning" && cp -rn "$committed/." "$tuning/"
platform=${PLATFORM:-$("$python" -c "import pyopencl as cl; print([i for i, p in enumerate(cl.get_platforms()) if 'NVIDIA' in p.name][0])")}   # PLATFORM: another (a dry run on PoCL)
work=$(mktemp -d /tmp/gpu-work.XXXXXX)   # what a script writes (results, what it printed; logs/ for the rest)
mkdir -p "$work/logs"
gpu_pack() {   # gpu_pack NAME: $work and the tuning folder as one file in OUT (few files come back from a call):
    # `tar -xzf NAME-CARD.tgz -C reports/CARD --exclude ./logs` puts the results there and tuning/ over its tuning
    rm -rf "$work/tuning" && cp -r "$tuning" "$work/tuning" && find "$work/tuning" -name '*.lock' -o -name .lock | xargs rm -f
    tar -czf "${OUT:-/tmp}/$1-$(basename "$(dirname "$committed")").tgz" -C "$work" .
}
