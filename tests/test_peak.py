"""The device peak: measured numbers within what the device can do and repeatable, cached; the user's figure
wins."""
from types import SimpleNamespace

import pytest

from backends.opencl import peak as measure
from backends.opencl.runtime import get_runtime
from compare import peak
from compare.results import Peak


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(measure, "TARGET_MS", 5.0)   # short launches: this checks plumbing, not speed
    return tmp_path / "peak.json"


def test_measured_peak_is_cached_and_reused(cache):
    rt = get_runtime()
    first = peak.peak_for_run(rt)
    assert first["gflops"] > 0 and first["bandwidth_gbs"] > 0
    assert first["gflops"] == max(first["details"]["float4_gflops"], first["details"]["float8_gflops"])
    assert first["source"].startswith("measured at the start of this run")
    assert cache.exists()
    second = peak.peak_for_run(rt)
    assert second["gflops"] == first["gflops"]
    assert second["source"].startswith("measured by `compare peak` on this device")
    assert Peak(**second).gflops == first["gflops"]   # what a run's results hold (a second run used to crash here)


def test_the_peak_is_within_the_devices_bound_and_a_second_measurement_agrees(monkeypatch):
    # utilisation rests on this figure: a kernel that miscounted its FLOPs (or was optimised away) must fail here
    monkeypatch.setattr(measure, "TARGET_MS", 50.0)
    rt = get_runtime()
    first, second = (measure.measure_peak(rt, cap_s=4.0)["gflops"] for _ in range(2))
    assert 0.5 < first / second < 2.0
    if "CPU" in str(rt.info["type"]).upper():
        # a core's vector lanes x 2 (a multiply-add) x 2 (the most FMA pipes an x86 core has) at the device's clock
        lanes = rt.device.native_vector_width_float
        bound = rt.info["compute_units"] * rt.info["clock_mhz"] / 1e3 * lanes * 2 * 2
        assert bound / 16 <= max(first, second) <= bound, (first, second, bound)


def test_user_figure_overrides(cache):
    got = peak.peak_for_run(get_runtime(), override_gflops=123.0)
    assert got == {"gflops": 123.0, "bandwidth_gbs": None, "source": "given by the user (--peak-gflops)"}
    assert not cache.exists()


def test_damaged_cache_is_measured_again(cache):
    cache.write_text("{broken")
    assert peak.peak_for_run(get_runtime())["source"].startswith("measured at the start")


class _SlowDevice:
    """The mad chains on a simulated device that runs a thousand work-items a millisecond, so that no launch
    reaches TARGET_MS (1e9 ms), on a clock of its own that only its launches move: the cap is met at the same
    launch at any speed of the machine that runs the test.  Nothing is launched on the real device."""

    ITEMS_PER_MS = 1000

    def __init__(self, rt):
        self.build, self.now = rt.kernel, 0.0

    def clock(self) -> float:
        return self.now

    def kernel(self, *args, **kwargs):
        real = self.build(*args, **kwargs)   # built for real: its work-group size is the device's
        device = self

        class Kernel:
            def get_work_group_info(self, *info):
                return real.get_work_group_info(*info)

            def __call__(self, queue, global_size, *rest):
                start = device.now
                device.now += global_size[0] / device.ITEMS_PER_MS / 1e3
                profile = SimpleNamespace(start=start * 1e9, end=device.now * 1e9)   # in ns, as OpenCL's
                return SimpleNamespace(wait=lambda: None, profile=profile)
        return Kernel()


def test_the_peak_stops_at_its_cap_and_says_so(monkeypatch):
    rt = get_runtime()
    device = _SlowDevice(rt)
    monkeypatch.setattr(measure, "TARGET_MS", 1e9)   # a launch that never gets long enough
    monkeypatch.setattr(measure, "clock", device.clock)
    monkeypatch.setattr(rt, "kernel", device.kernel)
    monkeypatch.setattr(rt, "profiling_ok", True)
    monkeypatch.setattr(measure, "measure_bandwidth", lambda rt, progress: {"copy_kernel_gbs": 1.0})
    got = measure.measure_peak(rt, cap_s=2.0)
    assert device.now <= 2.0 * 0.8, f"the mad chains ran {device.now:.1f} s, past their share of the 2 s cap"
    assert got["gflops"] > 0 and got["details"]["capped"].startswith("the 2 s cap stopped the launches short")


def test_without_profiling_times_the_host_clock_times_the_peak(monkeypatch, cache):
    rt = get_runtime()
    monkeypatch.setattr(rt, "profiling_ok", False)   # as on Mesa's rusticl, whose events read 0-3 ns
    got = measure.measure_peak(rt, cap_s=3.0)
    assert got["details"]["timer"] == "host clock" and 0 < got["gflops"] < 1e5


def test_a_cached_peak_of_another_version_is_measured_again(cache):
    import json
    rt = get_runtime()
    peak.peak_for_run(rt)
    data = json.loads(cache.read_text())
    entry = next(iter(data.values()))
    assert entry["schema"] == "clblast-compare/peak" and entry["version"] == peak.VERSION
    for key in data:
        data[key] = {k: v for k, v in entry.items() if k not in ("schema", "version")}   # written before versions
    cache.write_text(json.dumps(data))
    assert peak.peak_for_run(rt)["source"].startswith("measured at the start")
