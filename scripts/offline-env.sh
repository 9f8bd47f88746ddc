# Sourced (`source scripts/offline-env.sh`) on an air-gapped NVIDIA machine,
# in a checkout that holds the .offline folder made by scripts/offline-bundle.sh:
# installs what is missing from there, registers NVIDIA's OpenCL driver when
# no ICD file names it, and exports PYTHONPATH (and OCL_ICD_VENDORS) so that
# `$python -m compare` and the benchmarks run from this checkout.
python="${PYTHON:-python3}"
_log() { echo "== $*" >&2; }

# Debian's CLBlast and OpenCL headers: only the packages the system lacks
_missing=()
for _deb in .offline/deb/*.deb; do
    dpkg -s "$(dpkg-deb -f "$_deb" Package)" >/dev/null 2>&1 || _missing+=("$_deb")
done
if [ "${#_missing[@]}" -gt 0 ]; then
    _log "installing ${_missing[*]}"
    dpkg -i --force-depends "${_missing[@]}" >/dev/null
fi

# pyopencl and pyclblast (built here against that CLBlast, about half a minute)
if ! "$python" -c "import pyopencl, pyclblast, tabulate, markdown_it" 2>/dev/null; then
    _log "installing .offline/whl"
    "$python" -m pip install -q --no-index --find-links .offline/whl pyopencl tabulate markdown-it-py cython scikit-build-core
    "$python" -m pip install -q --no-index --no-build-isolation --find-links .offline/whl .offline/whl/pyclblast-*.tar.gz
fi
# onnx, for an ONNX model (scripts/zoo_blocks.py exports the zoo's blocks with the torch there)
if ! "$python" -c "import onnx" 2>/dev/null && ls .offline/whl/onnx-*.whl >/dev/null 2>&1; then
    "$python" -m pip install -q --no-index --find-links .offline/whl onnx
fi
# tinygrad, the search-compiler peer (pure Python): without it the run says UNAVAILABLE
if ! "$python" -c "import tinygrad" 2>/dev/null && ls .offline/whl/tinygrad-*.whl >/dev/null 2>&1; then
    "$python" -m pip install -q --no-index --no-deps .offline/whl/tinygrad-*.whl
fi
# Dask's distributed, for the tuning farm
if ! "$python" -c "import distributed" 2>/dev/null && ls .offline-farm/whl/distributed-*.whl >/dev/null 2>&1; then
    "$python" -m pip install -q --no-index --no-deps .offline-farm/whl/{distributed,dask,locket,partd,tblib,tornado,zict}-*.whl
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

# bytecode for the packages a run imports, as pip writes it at install: without it (an image built with
# PYTHONDONTWRITEBYTECODE, or a folder this user cannot write) each process compiled torch's modules again,
# seconds in every child of a run (the H200 notes' step 48).  Where site-packages is not ours, a cache of our own.
unset PYTHONDONTWRITEBYTECODE
_site=$("$python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
[ -w "$_site" ] || export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-$HOME/.cache/compare-pycache}"
_heavy=()   # what a run imports in every child; compileall passes over what is compiled already
for _pkg in torch sympy triton numpy onnx tinygrad pyopencl cv2 networkx jinja2; do
    [ -d "$_site/$_pkg" ] && _heavy+=("$_site/$_pkg")
done
_log "compiling the bytecode of ${#_heavy[@]} packages"
"$python" -m compileall -q -j 0 "${_heavy[@]}" "$PWD"/{compare,backends,nets} >/dev/null 2>&1 || true

# NVIDIA ships libnvidia-opencl but the image may lack the ICD file naming it
if ! "$python" -c "import pyopencl as cl; import sys; sys.exit(not any('NVIDIA' in p.name for p in cl.get_platforms()))" 2>/dev/null; then
    _lib=$(ls /usr/local/nvidia/lib64/libnvidia-opencl.so.1 /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 2>/dev/null | head -n 1 || true)
    if [ -n "$_lib" ]; then
        _log "registering $_lib as an OpenCL ICD"
        _icd=$(mktemp -d)
        echo "$_lib" > "$_icd/nvidia.icd"
        cp /etc/OpenCL/vendors/*.icd "$_icd/" 2>/dev/null || true
        export OCL_ICD_VENDORS="$_icd"
    fi
fi
