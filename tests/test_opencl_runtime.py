"""The OpenCL plumbing: device choice, program cache, build errors with the
log, allocation limits, NaN poisoning, work-group fitting, step recording."""
import os
import subprocess
import sys

import numpy as np
import pytest

from backends.opencl import workgroups
from backends.opencl.net import Recorder, event_ms
from backends.opencl.runtime import KernelBuildError, all_devices, get_runtime, select_device
from backends.opencl.workgroups import Limits, fits, limits, shrink
from nets.errors import UserError

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


def test_shrink_fits_the_device_and_the_built_kernel():
    rt = get_runtime()
    kernel = rt.program(ADD_ONE, {"ADD": 1}).add_one
    lim = limits(rt, kernel)
    fitted = shrink((4 * lim.max_group, 4, 4), lim)
    assert int(np.prod(fitted)) <= lim.max_group and fits(fitted, lim)
    assert shrink((1, 4, 4), lim) == (1, 4, 4)
    assert shrink((64, 16), Limits(32, (8, 8))) == (4, 8)   # each dimension within its own limit too


def test_build_fitting_rebuilds_until_the_kernel_takes_its_work_group(monkeypatch):
    # a kernel whose work-group is a -D constant: the first choice is made under the
    # device's limit; the built kernel accepts only 16, so it is chosen again and rebuilt
    rt = get_runtime()
    built = []
    monkeypatch.setattr(workgroups, "limits", lambda rt_, kernel=None: Limits(256 if kernel is None else 16, (256,) * 3))
    monkeypatch.setattr(rt, "kernel", lambda f, n, d: built.append(d["WG"]) or object())
    choice, _ = workgroups.build_fitting(rt, "x.cl", "k", lambda lim: min(64, lim.max_group),
                                         lambda wg: {"WG": wg}, lambda wg: wg)
    assert choice == 16 and built == [64, 16]


def _busy_kernel(rt):
    src = ("__kernel void busy(__global float *a) { int i = get_global_id(0); float v = a[i]; "
           "for (int k = 0; k < 2000; k++) v = v * 0.999f + 0.5f; a[i] = v; }")
    return rt.program(src).busy


def test_a_marker_span_covers_the_kernels_inside_it():
    rt = get_runtime()
    busy = _busy_kernel(rt)
    buf = rt.upload(np.zeros(1 << 14, np.float32), "test")
    rec = Recorder(rt.queue)
    rec.kernel("first", busy(rt.queue, (1 << 14,), None, buf))
    inside = []
    with rec.library("two-kernels"):
        inside.append(busy(rt.queue, (1 << 14,), None, buf))
        inside.append(busy(rt.queue, (1 << 14,), None, buf))
    rt.finish()
    first, span = rec.steps()
    assert (first.name, first.how, span.name, span.how) == ("first", "event", "two-kernels", "markers")
    own = sum(event_ms(e) for e in inside)
    assert own > 0 and span.ms >= own   # the span holds both kernels, run one after the other
    _, _, before, after = rec._pending[1]
    assert before.profile.end <= inside[0].profile.start and inside[1].profile.end <= after.profile.end


def test_no_opencl_platform_is_one_clear_line(tmp_path):
    env = dict(os.environ, OCL_ICD_VENDORS=str(tmp_path), OCL_ICD_FILENAMES="")
    proc = subprocess.run([sys.executable, "-m", "compare", "devices"], env=env, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: no OpenCL platform found: install a driver (e.g. apt-get install pocl-opencl-icd for the CPU) "
        "or check OCL_ICD_VENDORS"]
