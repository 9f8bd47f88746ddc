"""The register cap a kernel is built with to run a larger work-group (backends/opencl/registers.py)."""
from types import SimpleNamespace

import pytest

from backends.opencl.registers import register_cap

NVIDIA = SimpleNamespace(extensions="cl_khr_fp64 cl_nv_compiler_options cl_nv_device_attribute_query")


@pytest.mark.parametrize("items, cap", [(1024, 64), (512, 128), (256, 248), (64, 248), (768, 80)])
def test_the_cap_fits_the_work_items_in_the_register_file(items, cap):
    assert register_cap(NVIDIA, items) == (f"-cl-nv-maxrregcount={cap}",)


@pytest.mark.parametrize("extensions", ["", "cl_khr_fp64 cl_khr_il_program", "cl_nv_compiler_options_x"])
def test_a_device_without_the_option_gets_none(extensions):
    assert register_cap(SimpleNamespace(extensions=extensions), 1024) == ()


def test_a_group_past_what_any_cap_fits_gets_none():
    assert register_cap(NVIDIA, 65536 // 4) == ()
