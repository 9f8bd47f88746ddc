"""What the host is asked through its libraries: where the user's cache lives (platformdirs, unless
COMPARE_CACHE_DIR names it) and how many CPUs the machine has (psutil), as the results record them."""
import os
import sys

import pytest

from backends import cache
from compare.hostinfo import host_info


def test_compare_cache_dir_names_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPARE_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "mine"
    assert cache.path("peak") == tmp_path / "mine" / "peak.json"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the XDG folders are Linux's")
def test_without_it_the_cache_is_the_users_as_before(tmp_path, monkeypatch):
    monkeypatch.delenv("COMPARE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "clblast-compare"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "clblast-compare"


def test_the_cpus_recorded_are_the_machines():
    assert host_info()["cpus"] == os.cpu_count()
