#!/usr/bin/env bash
# Whether where the host's scheduler puts a process decides tinygrad's pass on a GPU (issue 53): the
# machine's CPU and NUMA layout, then benchmarks/tinygrad_own.py (tinygrad's recipe once, our peer in three
# fresh children) three times: free, pinned to the GPU's NUMA-local CPUs, and pinned to one CPU of each of
# those CPUs' cores.  Each group's output goes to $OUT as it ends.
# Usage: scripts/pinning-gpu.sh [NET, default resnet18] [SECONDS a group, default 85]
set -uo pipefail
cd "$(dirname "$0")/.."
net="${1:-resnet18}"
cap="${2:-85}"
[ -n "${work-}" ] || source scripts/gpu-card.sh >/dev/null 2>&1
export COMPARE_CACHE_DIR="$tuning" PYTHONUNBUFFERED=1 PYOPENCL_CTX="$platform:0" CUDA_VISIBLE_DEVICES=0
out="${OUT:-$work}"
bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -n 1)
dev=/sys/bus/pci/devices/$(echo "${bus: -12}" | tr 'A-F' 'a-f')
local=$(cat "$dev/local_cpulist" 2>/dev/null || echo "0-$(( $(nproc) - 1 ))")
# the first CPU of each core among the local ones (no two threads of one core)
percore=$(lscpu -p=CPU,CORE | grep -v '^#' | awk -F, -v want="$local" \
    'BEGIN { n = split(want, parts, ","); for (i = 1; i <= n; i++) { if (split(parts[i], r, "-") == 2) { for (c = r[1]; c <= r[2]; c++) ok[c] = 1 } else ok[parts[i]] = 1 } }
     ok[$1] && !seen[$2]++ { printf "%s%s", sep, $1; sep = "," }')
{ echo "GPU $bus, NUMA node $(cat "$dev/numa_node" 2>/dev/null), local CPUs $local, one per core: $percore"
  lscpu; lscpu -e; nvidia-smi topo -m; } > "$out/topology.txt" 2>&1
ways="own,peer,peer,peer"
group() { local name=$1; shift; timeout "$cap" "$@" "$python" benchmarks/tinygrad_own.py --nets "$net" --ways "$ways" \
    --repeats 60 > "$out/pin-$name.txt" 2>&1; echo "$name: exit $?" >> "$out/pin-$name.txt"; }
group free
group local taskset -c "$local"
group percore taskset -c "$percore"
