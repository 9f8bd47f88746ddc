"""The device peak: measured numbers are positive and cached; the user's figure wins."""
import pytest

from backends.opencl import peak as measure
from backends.opencl.runtime import get_runtime
from compare import peak


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


def test_user_figure_overrides(cache):
    got = peak.peak_for_run(get_runtime(), override_gflops=123.0)
    assert got == {"gflops": 123.0, "bandwidth_gbs": None, "source": "given by the user (--peak-gflops)"}
    assert not cache.exists()


def test_damaged_cache_is_measured_again(cache):
    cache.write_text("{broken")
    assert peak.peak_for_run(get_runtime())["source"].startswith("measured at the start")
