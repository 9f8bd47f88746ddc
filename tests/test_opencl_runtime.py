"""The OpenCL plumbing: device choice, program cache, build errors with the
log, allocation limits, NaN poisoning, work-group fitting, step recording."""
import os
import subprocess
import sys

import numpy as np
import pytest

from backends.opencl_net import Recorder
from backends.opencl_runtime import KernelBuildError, all_devices, get_runtime, select_device
from compare.errors import UserError

pytestmark = pytest.mark.filterwarnings("ignore::pyopencl.CompilerWarning")

ADD_ONE = "__kernel void add_one(__global float *a) { int i = get_global_id(0); a[i] += ADD; }"


def test_default_and_named_device_selection():
    devices = all_devices()
    assert devices
    index, plat, dev = devices[0]
    assert select_device(index).int_ptr == dev.int_ptr
    assert select_device(dev.name.split()[0].lower()).int_ptr in {d.int_ptr for _, _, d in devices}
    with pytest.raises(UserError, match="no OpenCL device matches 'no-such-gpu'; devices here: 0:0"):
        select_device("no-such-gpu")


def test_pyopencl_ctx_is_honoured(monkeypatch):
    monkeypatch.setenv("PYOPENCL_CTX", "0:0")
    assert select_device().int_ptr == all_devices()[0][2].int_ptr
    monkeypatch.setenv("PYOPENCL_CTX", "9:9")
    with pytest.raises(UserError, match="matches '9:9'"):
        select_device()


def test_programs_are_built_once_per_source_and_defines():
    rt = get_runtime()
    a = rt.program(ADD_ONE, {"ADD": 1})
    assert rt.program(ADD_ONE, {"ADD": 1}) is a
    assert rt.program(ADD_ONE, {"ADD": 2}) is not a
    buf = rt.upload(np.zeros(8, np.float32), "test")
    rt.program(ADD_ONE, {"ADD": 2}).add_one(rt.queue, (8,), None, buf)
    np.testing.assert_array_equal(rt.read(buf, (8,)), np.full(8, 2, np.float32))


def test_build_failure_carries_the_build_log():
    rt = get_runtime()
    with pytest.raises(KernelBuildError) as err:
        rt.program("__kernel void broken(__global float *a) { a[0] = undefined_name; }", label="broken.cl")
    text = str(err.value)
    assert text.startswith("building broken.cl failed on ")
    assert "undefined_name" in text


def test_allocation_beyond_the_device_limit_is_refused():
    rt = get_runtime()
    too_big = rt.info["max_alloc_bytes"] + 4
    with pytest.raises(UserError, match=r"im2col of conv9 needs .* MiB in one buffer, more than .* allows \(MAX_MEM_ALLOC_SIZE"):
        rt.alloc(too_big, "im2col of conv9")


def test_new_buffers_are_poisoned_with_nan():
    rt = get_runtime()
    buf = rt.alloc(64, "poisoned")
    assert np.all(np.isnan(rt.read(buf, (16,))))


def test_fit_local_size_respects_limits():
    rt = get_runtime()
    limit = rt.info["max_work_group_size"]
    fitted = rt.fit_local_size((limit, 4, 4))
    assert int(np.prod(fitted)) <= limit
    assert rt.fit_local_size((1, 4, 4)) == (1, 4, 4)


def test_recorder_times_kernels_and_bracketed_library_calls():
    rt = get_runtime()
    add_one = rt.program(ADD_ONE, {"ADD": 1}).add_one
    buf = rt.upload(np.zeros(1 << 16, np.float32), "test")
    rec = Recorder(rt.queue)
    rec.kernel("first", add_one(rt.queue, (1 << 16,), None, buf))
    with rec.library("two-kernels"):
        add_one(rt.queue, (1 << 16,), None, buf)
        add_one(rt.queue, (1 << 16,), None, buf)
    rt.finish()
    steps = rec.steps()
    assert [(s.name, s.how) for s in steps] == [("first", "event"), ("two-kernels", "markers")]
    assert all(s.ms >= 0 for s in steps)
    assert rt.read(buf, (4,)).tolist() == [3, 3, 3, 3]


def test_no_opencl_platform_is_one_clear_line(tmp_path):
    env = dict(os.environ, OCL_ICD_VENDORS=str(tmp_path), OCL_ICD_FILENAMES="")
    proc = subprocess.run([sys.executable, "-m", "compare", "devices"], env=env, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: no OpenCL platform found: install a driver (e.g. apt-get install pocl-opencl-icd for the CPU) "
        "or check OCL_ICD_VENDORS"]
