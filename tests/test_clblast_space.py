"""The configuration spaces of CLBlast 1.5.3's tuners (backends.tuning.clblast.space),
checked against counts the tuner binaries themselves printed.  No OpenCL needed."""
from __future__ import annotations

import itertools
import math

import pytest

from backends.tuning.clblast.space import (
    DATABASE_PARAMETERS, STAGES, DeviceLimits, Stage, limits_from_device, stages_for,
)

H100 = DeviceLimits(local_mem_bytes=49152, max_work_group_size=1024,
                    max_work_item_sizes=(1024, 1024, 64))
POCL = DeviceLimits(local_mem_bytes=1048576, max_work_group_size=4096,
                    max_work_item_sizes=(4096, 4096, 4096))


def pocl_capped(size: int) -> DeviceLimits:
    # PoCL under POCL_MAX_WORK_GROUP_SIZE=size caps the group and every dimension
    return DeviceLimits(1048576, size, (size, size, size))


def stage(tuner: str, variation: int) -> Stage:
    (found,) = [s for s in STAGES[tuner] if s.variation == variation]
    return found


# (tuner, V) -> (configurations found, tried by default).
# H100: CLBlast 1.5.3's xgemm and xgemm_direct tuners on an H100 (measured);
# xgemv and xconvgemm derived from the module (they match PoCL's, observed,
# as no limit binds for them at either device's sizes).
H100_COUNTS = {
    ("xgemm", 1): (578, 578), ("xgemm", 2): (120800, 235),
    ("xgemm", 11): (407, 407), ("xgemm", 12): (16566, 129),
    ("xgemm_direct", 1): (46, 46), ("xgemm_direct", 2): (8420, 131),
    ("xgemv", 1): (12, 12), ("xgemv", 2): (30, 30), ("xgemv", 3): (68, 68),
    ("xconvgemm", 1): (193, 193),
}

# Observed on this machine's PoCL (pthread-skylake-avx512-AMD EPYC: 1 MiB local
# memory, work-group 4096, item sizes 4096^3) with Debian's clblast-utils 1.5.3:
# each tuner's `* Found N configuration(s)` lines, all stages, run as e.g.
#   clblast_tuner_xgemm -precision 32 -m 256 -n 256 -k 256 -fraction 100000
# (the huge fraction tries no configuration, so every stage prints at once;
# xgemv takes no -fraction and was left to run).  The same runs under
# POCL_MAX_WORK_GROUP_SIZE=128 and =64, where the work-group limits bind.
# Default counts: xgemm_direct -fraction 64 printed "Exploring a random
# subset of 131 configuration(s)" for V=2.
POCL_OBSERVED = {
    POCL: {("xgemm", 1): 578, ("xgemm", 2): 120800, ("xgemm", 11): 407,
           ("xgemm", 12): 16566, ("xgemm_direct", 1): 46, ("xgemm_direct", 2): 8420,
           ("xgemv", 1): 12, ("xgemv", 2): 30, ("xgemv", 3): 68, ("xconvgemm", 1): 193},
    pocl_capped(128): {("xgemm", 1): 320, ("xgemm", 2): 75168, ("xgemm", 11): 371,
                       ("xgemm", 12): 14822, ("xgemm_direct", 1): 30,
                       ("xgemm_direct", 2): 4112, ("xgemv", 1): 9, ("xgemv", 2): 24,
                       ("xgemv", 3): 68, ("xconvgemm", 1): 118},
    pocl_capped(64): {("xgemm", 1): 128, ("xgemm", 2): 26912, ("xgemm", 11): 289,
                      ("xgemm", 12): 12902, ("xgemm_direct", 1): 14,
                      ("xgemm_direct", 2): 1520, ("xgemv", 1): 6, ("xgemv", 2): 18,
                      ("xgemv", 3): 50, ("xconvgemm", 1): 46},
}

ALL_STAGES = [s for stages in STAGES.values() for s in stages]


def test_stage_table():
    assert {t: [s.variation for s in ss] for t, ss in STAGES.items()} == {
        "xgemm": [1, 2, 11, 12], "xgemm_direct": [1, 2], "xgemv": [1, 2, 3], "xconvgemm": [1]}
    assert [s.kernel for s in STAGES["xgemv"]] == ["Xgemv", "XgemvFast", "XgemvFastRot"]
    assert stage("xgemm", 2).name == "xgemm V=2"
    assert stages_for("xgemm") == STAGES["xgemm"]
    assert [s.name for s in stages_for("XgemvFast")] == ["xgemv V=2"]
    assert [s.name for s in stages_for("XgemmDirect")] == ["xgemm_direct V=1", "xgemm_direct V=2"]
    with pytest.raises(KeyError):
        stages_for("xdot")


@pytest.mark.parametrize("key", sorted(H100_COUNTS), ids=lambda k: f"{k[0]} V={k[1]}")
def test_h100_counts(key):
    s = stage(*key)
    assert (s.count(H100), s.default_count(H100)) == H100_COUNTS[key]
    assert len(s.configurations(H100)) == H100_COUNTS[key][0]


def test_h100_default_totals():
    assert sum(s.default_count(H100) for s in STAGES["xgemm"]) == 1349
    assert sum(s.default_count(H100) for s in STAGES["xgemm_direct"]) == 177


@pytest.mark.parametrize("limits", list(POCL_OBSERVED), ids=["pocl", "pocl-wg128", "pocl-wg64"])
def test_pocl_counts_as_observed(limits):
    observed = POCL_OBSERVED[limits]
    assert {k: stage(*k).count(limits) for k in observed} == observed
    assert stage("xgemm_direct", 2).default_count(POCL) == 131


@pytest.mark.parametrize("s", ALL_STAGES, ids=lambda s: s.name)
def test_every_configuration_is_a_complete_override(s):
    wanted = set(DATABASE_PARAMETERS[s.kernel])
    configs = s.configurations(H100)
    assert configs and all(set(c) == wanted for c in configs)
    assert all(isinstance(v, int) for c in configs[:50] for v in c.values())


@pytest.mark.parametrize("s", ALL_STAGES, ids=lambda s: s.name)
def test_search_order_is_a_fixed_permutation(s):
    from backends.tuning.clblast import space
    order = s.search_order(H100)
    valid = s.configurations(H100)
    keys = [tuple(c.values()) for c in order]       # every dict lists the names in one order
    assert len(set(keys)) == len(keys) == len(valid)          # no duplicates, nothing missing
    assert set(keys) == {tuple(c.values()) for c in valid}
    if s.exhaustive:
        assert order == valid
    # recomputed from scratch: the same order
    space._valid.cache_clear()
    space._order.cache_clear()
    assert s.search_order(H100) == order
    # a default search is the prefix: the first default_count entries
    n = s.default_count(H100)
    assert s.search_order(H100)[:n] == order[:n]


def test_sampled_order_is_pinned():
    # The seed fixes which configurations a default search tries; these are
    # its first picks (a changed seed or order would change past results).
    first = stage("xgemm_direct", 2).search_order(H100)[0]
    assert first == {"WGD": 64, "MDIMCD": 8, "NDIMCD": 16, "MDIMAD": 8, "NDIMBD": 16,
                     "KWID": 8, "VWMD": 4, "VWND": 2, "PADA": 0, "PADB": 1}
    first = stage("xgemm", 2).search_order(H100)[0]
    assert (first["MWG"], first["NWG"], first["KWG"], first["MDIMC"], first["NDIMC"],
            first["MDIMA"], first["NDIMB"], first["VWM"], first["VWN"]) == (
        64, 64, 32, 8, 32, 32, 32, 2, 1)


@pytest.mark.parametrize("limits", [H100, pocl_capped(64),
                                    DeviceLimits(16384, 256, (256, 256, 256))],
                         ids=["h100", "wg64", "small"])
@pytest.mark.parametrize("s", [s for s in ALL_STAGES
                               if math.prod(len(v) for _, v in s.parameters) < 100_000],
                         ids=lambda s: s.name)
def test_pruned_enumeration_equals_leaf_checking(s, limits):
    # Brute force, as CLBlast does it: every combination in nested-loop order,
    # all checks at the leaf.  The module prunes early; the result must agree.
    names = s.parameter_names
    expected = []
    for values in itertools.product(*(v for _, v in s.parameters)):
        c = dict(zip(names, values))
        ok = all(r.holds(*(c[n] for n in r.names)) for r in s.rules)
        ok = ok and 4 * s.local_mem.holds(*(c[n] for n in s.local_mem.names)) <= limits.local_mem_bytes
        local = [b * c[n] for b, n in zip(s.local_base, s.local_mul)]
        ok = ok and all(x <= m for x, m in zip(local, limits.max_work_item_sizes))
        ok = ok and math.prod(local) <= limits.max_work_group_size
        if ok:
            expected.append(c)
    assert s.configurations(limits) == expected


def _contains(s: Stage, limits: DeviceLimits, elem_bytes: int = 4, **values) -> bool:
    return any(all(c[k] == v for k, v in values.items())
               for c in s.configurations(limits, elem_bytes=elem_bytes))


def test_xgemm_constraints():
    v1, v2, v11, v12 = STAGES["xgemm"]
    # KWG=16 with 8x8 threads reshaped to MDIMA=32: KDIMA = 64/32 = 2 divides 16 (kept);
    # MDIMC=NDIMC=32, MDIMA=8: KDIMA = 1024/8 = 128 does not divide KWG <= 32 (dropped)
    assert _contains(v2, H100, KWG=16, MDIMC=8, NDIMC=8, MDIMA=32)
    assert not _contains(v2, H100, MDIMC=32, NDIMC=32, MDIMA=8)
    # MWG=16 is not a multiple of MDIMC*VWM = 8*4
    assert not _contains(v2, H100, MWG=16, MDIMC=8, VWM=4)
    assert _contains(v2, H100, MWG=32, MDIMC=8, VWM=4)
    # V=1 ties SA to SB; V=2 does not
    assert not _contains(v1, H100, SA=1, SB=0)
    assert _contains(v2, H100, SA=1, SB=0)
    # kernel 1: KREG a multiple of VWN, and V=11 ties VWM to VWN
    assert not _contains(v12, H100, KREG=2, VWN=4)
    assert _contains(v12, H100, KREG=4, VWN=4)
    assert not _contains(v11, H100, VWM=1, VWN=2)
    # 32x32 threads: 1024 fits an H100's work-group, not a 256-limit device
    assert _contains(v2, H100, MDIMC=32, NDIMC=32)
    assert not _contains(v2, DeviceLimits(1 << 20, 256, (256, 256, 256)), MDIMC=32, NDIMC=32)


def test_xgemm_local_memory():
    v2 = stage("xgemm", 2)
    # both 32x128 tiles cached: 4 * (32*128 + 32*128) = 32768 bytes
    big = dict(MWG=128, NWG=128, KWG=32, SA=1, SB=1)
    assert _contains(v2, DeviceLimits(32768, 1024, (1024, 1024, 64)), **big)
    assert not _contains(v2, DeviceLimits(32767, 1024, (1024, 1024, 64)), **big)
    # doubles need twice as much
    assert not _contains(v2, DeviceLimits(32768, 1024, (1024, 1024, 64)), elem_bytes=8, **big)
    assert _contains(v2, DeviceLimits(65536, 1024, (1024, 1024, 64)), elem_bytes=8, **big)


def test_xgemm_direct_and_xconvgemm_constraints():
    d1, d2 = STAGES["xgemm_direct"]
    (conv,) = STAGES["xconvgemm"]
    # WGD=8 is not a multiple of MDIMCD*VWMD = 8*2
    assert not _contains(d2, H100, WGD=8, MDIMCD=8, VWMD=2)
    assert _contains(d2, H100, WGD=16, MDIMCD=8, VWMD=2)
    # V=1 ties the loading threads to the computing ones
    assert not _contains(d1, H100, MDIMCD=8, MDIMAD=16)
    assert _contains(d2, H100, MDIMCD=8, MDIMAD=16)
    # KWID must divide WGD
    assert not _contains(d2, H100, WGD=8, KWID=16)
    # convgemm: KDIMAD = 32*32/8 = 128 does not divide WGD <= 32
    assert not _contains(conv, H100, MDIMCD=32, NDIMCD=32, MDIMAD=8)
    assert _contains(conv, H100, MDIMCD=32, NDIMCD=32, MDIMAD=32, NDIMBD=32)
    # padded 64x64 tiles: 4 * 2 * 64 * 65 = 33280 bytes
    assert _contains(d2, DeviceLimits(33280, 1024, (1024, 1024, 64)), WGD=64, PADA=1, PADB=1)
    assert not _contains(d2, DeviceLimits(33279, 1024, (1024, 1024, 64)), WGD=64, PADA=1, PADB=1)


def test_xgemv_constraints():
    g1, g2, g3 = STAGES["xgemv"]
    # VW must divide WPT
    assert not _contains(g2, H100, WPT2=2, VW2=4)
    assert _contains(g2, H100, WPT2=4, VW2=4)
    # the rotated kernel needs WGS3 >= WPT3
    assert not _contains(g3, H100, WGS3=16, WPT3=32)
    assert _contains(g3, H100, WGS3=32, WPT3=32)
    # WGS3=128, WPT3=32: 4 * (128 + 32*128) = 16896 bytes of local memory
    assert _contains(g3, DeviceLimits(16896, 1024, (1024,)), WGS3=128, WPT3=32)
    assert not _contains(g3, DeviceLimits(16895, 1024, (1024,)), WGS3=128, WPT3=32)
    # the work-group is WGS wide
    assert not _contains(g1, DeviceLimits(1 << 20, 128, (128,)), WGS1=256)


def test_limits_from_device():
    class FakeDevice:
        local_mem_size = 49152
        max_work_group_size = 1024
        max_work_item_sizes = [1024, 1024, 64]
    assert limits_from_device(FakeDevice()) == H100
