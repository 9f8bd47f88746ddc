"""The configuration spaces CLBlast 1.5.3's own tuners search, as data.

We drive the tuning search ourselves (each configuration timed through
CLBlast's real routine, put in force with OverrideParameters), so we need
the very sets CLBlast's tuner binaries would try, stage by stage:

- a tuner binary (clblast_tuner_xgemm, ...) runs one or more stages
  ("variations" V), each tuning one database kernel;
- a stage's candidates are the nested loops over its parameters, in the
  order the tuner lists them (first parameter outermost), keeping those that
  pass every constraint, fit the device's local memory, and whose work-group
  (a base size times some parameters) fits the device's per-dimension and
  total work-group limits;
- by default a stage tries all of them when its fraction is 1, else a random
  len // fraction of them.  CLBlast draws that sample with its C++ standard
  library's shuffle; we use our own fixed-seed order instead (same on every
  run), so our default search has CLBlast's size, not its exact members.

Parameter names: for every stage here, the tuner's parameters are exactly
the database kernel's parameters (checked against 1.5.3's database files;
`DATABASE_PARAMETERS` records them and the module refuses to load if a stage
drifts from them).  So a configuration dict is, as is, the complete set
OverrideParameters needs.  Some are pinned to one value in some stages
(e.g. KWI, KREG, STRM in xgemm V=1) but are still passed, since
OverrideParameters rejects an incomplete set.  The xgemv stages tune three
different kernels, whose names carry the stage number (WGS1, WGS2, WGS3...).

Local memory is counted for single precision (4-byte elements) unless
`elem_bytes` says otherwise, matching the project's use of CLBlast (fp32).
"""
from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass, field
from typing import Callable

SINGLE_BYTES = 4
# Fixed seed of our sampled stages' visiting order.  Changing it changes which
# configurations a default (prefix) search tries, so keep it constant.
SEARCH_SEED = 0x5EED_153

# Parameter names of each database kernel, as 1.5.3's src/database/kernels
# lists them (the order OverrideParameters stores them in; we pass a dict).
DATABASE_PARAMETERS: dict[str, tuple[str, ...]] = {
    "Xgemm": ("GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB",
              "NDIMC", "NWG", "SA", "SB", "STRM", "STRN", "VWM", "VWN"),
    "XgemmDirect": ("KWID", "MDIMAD", "MDIMCD", "NDIMBD", "NDIMCD", "PADA", "PADB",
                    "VWMD", "VWND", "WGD"),
    "Xgemv": ("WGS1", "WPT1"),
    "XgemvFast": ("VW2", "WGS2", "WPT2"),
    "XgemvFastRot": ("VW3", "WGS3", "WPT3"),
    "Xconvgemm": ("KWID", "MDIMAD", "MDIMCD", "NDIMBD", "NDIMCD", "PADA", "PADB",
                  "VWMD", "VWND", "WGD"),
}


@dataclass(frozen=True)
class DeviceLimits:
    local_mem_bytes: int
    max_work_group_size: int
    max_work_item_sizes: tuple[int, ...]


def limits_from_device(device) -> DeviceLimits:
    """The limits CLBlast's tuner reads from an OpenCL device (a pyopencl Device)."""
    return DeviceLimits(
        local_mem_bytes=int(device.local_mem_size),
        max_work_group_size=int(device.max_work_group_size),
        max_work_item_sizes=tuple(int(s) for s in device.max_work_item_sizes),
    )


# --- constraint predicates (all of CLBlast's are of these few shapes) -------

def _divides(a: int, b: int) -> bool:           # a is a multiple of b
    return a % b == 0


def _divides_product(a: int, b: int, c: int) -> bool:        # a multiple of b*c
    return a % (b * c) == 0


def _divides_product_over(a: int, b: int, c: int, d: int) -> bool:
    # a multiple of (b*c)/d with integer division, as CLBlast computes it
    # (in CLBlast's spaces b*c >= d always, so the divisor is never 0)
    return a % ((b * c) // d) == 0


def _equal(a: int, b: int) -> bool:
    return a == b


def _at_least(a: int, b: int) -> bool:
    return a >= b


@dataclass(frozen=True)
class Rule:
    """A predicate over some parameters' values, given positionally."""
    names: tuple[str, ...]
    holds: Callable[..., bool]


@dataclass(frozen=True)
class Stage:
    tuner: str               # binary name without clblast_tuner_
    variation: int           # CLBlast's V
    kernel: str              # database kernel the parameters belong to
    default_fraction: float  # 1: exhaustive; else the tuner samples len // fraction
    parameters: tuple[tuple[str, tuple[int, ...]], ...] = field(repr=False)
    rules: tuple[Rule, ...] = field(repr=False)
    # local memory in elements: a function of some parameters' values
    local_mem: Rule = field(repr=False)
    # work-group size: local_base[i] * value of local_mul[i], per dimension
    local_base: tuple[int, ...] = field(repr=False)
    local_mul: tuple[str, ...] = field(repr=False)

    @property
    def name(self) -> str:
        return f"{self.tuner} V={self.variation}"

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.parameters)

    @property
    def exhaustive(self) -> bool:
        # the tuner treats 0 like 1: no sampling
        return self.default_fraction in (0.0, 1.0)

    def configurations(self, limits: DeviceLimits, elem_bytes: int = SINGLE_BYTES
                       ) -> list[dict[str, int]]:
        """The valid set, in CLBlast's enumeration order (fresh dicts each call)."""
        names = self.parameter_names
        return [dict(zip(names, values)) for values in _valid(self, limits, elem_bytes)]

    def count(self, limits: DeviceLimits, elem_bytes: int = SINGLE_BYTES) -> int:
        """What the tuner prints as `* Found N configuration(s)`."""
        return len(_valid(self, limits, elem_bytes))

    def default_count(self, limits: DeviceLimits, elem_bytes: int = SINGLE_BYTES) -> int:
        """How many configurations the tuner tries by default."""
        n = self.count(limits, elem_bytes)
        return n if self.exhaustive else int(n / self.default_fraction)

    def search_order(self, limits: DeviceLimits, elem_bytes: int = SINGLE_BYTES
                     ) -> list[dict[str, int]]:
        """Every valid configuration, in the order our search visits them.

        Exhaustive stages keep enumeration order; sampled ones use a fixed
        pseudo-random permutation, so the first default_count entries are the
        default search, and any prefix is always the same configurations."""
        names = self.parameter_names
        valid = _valid(self, limits, elem_bytes)
        return [dict(zip(names, valid[i])) for i in _order(self, limits, elem_bytes)]


@functools.lru_cache(maxsize=None)
def _valid(stage: Stage, limits: DeviceLimits, elem_bytes: int) -> tuple[tuple[int, ...], ...]:
    """Value tuples of the valid configurations, in nested-loop order.

    Each check runs as soon as the last parameter it reads is set, which
    prunes whole subtrees; since every check only reads parameters already
    set, the survivors and their order are those of checking at the leaves."""
    names = stage.parameter_names
    choices = [values for _, values in stage.parameters]
    where = {n: i for i, n in enumerate(names)}
    checks: list[list[tuple[tuple[int, ...], Callable[..., bool]]]] = [[] for _ in names]

    def add(rule_names: tuple[str, ...], test: Callable[..., bool]) -> None:
        idx = tuple(where[n] for n in rule_names)
        checks[max(idx)].append((idx, test))

    for rule in stage.rules:
        add(rule.names, rule.holds)

    budget = limits.local_mem_bytes
    elements = stage.local_mem.holds
    add(stage.local_mem.names, lambda *v: elem_bytes * elements(*v) <= budget)

    base, item_max, group_max = stage.local_base, limits.max_work_item_sizes, limits.max_work_group_size

    def fits(*muls: int) -> bool:
        sizes = [b * m for b, m in zip(base, muls)]
        return (all(s <= m for s, m in zip(sizes, item_max))
                and math.prod(sizes) <= group_max)

    add(stage.local_mul, fits)

    found: list[tuple[int, ...]] = []
    current = [0] * len(names)
    last = len(names) - 1

    def walk(i: int) -> None:
        here = checks[i]
        for v in choices[i]:
            current[i] = v
            if all(test(*[current[j] for j in idx]) for idx, test in here):
                if i == last:
                    found.append(tuple(current))
                else:
                    walk(i + 1)

    walk(0)
    return tuple(found)


@functools.lru_cache(maxsize=None)
def _order(stage: Stage, limits: DeviceLimits, elem_bytes: int) -> tuple[int, ...]:
    order = list(range(len(_valid(stage, limits, elem_bytes))))
    if not stage.exhaustive:
        random.Random(SEARCH_SEED).shuffle(order)
    return tuple(order)


# --- the stages, from 1.5.3's src/tuning/kernels/*.hpp ----------------------

def _xgemm(v: int) -> Stage:
    # Parameter lists per variation, in the tuner's loop order.
    if v == 1:     # GEMMK 0, small set, exhaustive
        values = dict(GEMMK=(0,), MWG=(16, 32, 64), NWG=(16, 32, 64), KWG=(32,),
                      MDIMC=(8, 16, 32), NDIMC=(8, 16, 32), MDIMA=(8, 16, 32),
                      NDIMB=(8, 16, 32), KWI=(2,), VWM=(1, 2, 4), VWN=(1, 2, 4),
                      STRM=(0,), STRN=(0,), SA=(0, 1), SB=(0, 1), KREG=(1,))
    elif v == 2:   # GEMMK 0, large set, sampled
        values = dict(GEMMK=(0,), MWG=(16, 32, 64, 128), NWG=(16, 32, 64, 128),
                      KWG=(16, 32), MDIMC=(8, 16, 32), NDIMC=(8, 16, 32),
                      MDIMA=(8, 16, 32), NDIMB=(8, 16, 32), KWI=(2,),
                      VWM=(1, 2, 4, 8), VWN=(1, 2, 4, 8), STRM=(0, 1), STRN=(0, 1),
                      SA=(0, 1), SB=(0, 1), KREG=(1,))
    elif v == 11:  # GEMMK 1 (2D register tiling), small set, exhaustive
        values = dict(GEMMK=(1,), MWG=(16, 32, 64), NWG=(16, 32, 64), KWG=(1,),
                      MDIMC=(4, 8, 16), NDIMC=(4, 8, 16), MDIMA=(4, 8, 16),
                      NDIMB=(4, 8, 16), KWI=(1,), VWM=(1, 2, 4), VWN=(1, 2, 4),
                      STRM=(0,), STRN=(0,), SA=(0,), SB=(0,), KREG=(1, 2, 4))
    else:          # v == 12: GEMMK 1, large set, sampled
        values = dict(GEMMK=(1,), MWG=(8, 16, 32, 64, 128), NWG=(8, 16, 32, 64, 128),
                      KWG=(1,), MDIMC=(2, 4, 8, 16, 32), NDIMC=(2, 4, 8, 16, 32),
                      MDIMA=(2, 4, 8, 16, 32), NDIMB=(2, 4, 8, 16, 32), KWI=(1,),
                      VWM=(1, 2, 4, 8), VWN=(1, 2, 4, 8), STRM=(0,), STRN=(0,),
                      SA=(0,), SB=(0,), KREG=(1, 2, 4, 8, 16))
    rules = [
        Rule(("KWG", "KWI"), _divides),                     # the k loop unrolls by KWI
        Rule(("MWG", "MDIMC", "VWM"), _divides_product),    # whole work per thread in m
        Rule(("NWG", "NDIMC", "VWN"), _divides_product),    # ... and in n
        Rule(("MWG", "MDIMA", "VWM"), _divides_product),    # whole tile loads of A
        Rule(("NWG", "NDIMB", "VWN"), _divides_product),    # ... and of B
    ]
    if v in (1, 2):
        # the threads re-shaped to load A and B tiles must cover KWG exactly
        rules += [Rule(("KWG", "MDIMC", "NDIMC", "MDIMA"), _divides_product_over),
                  Rule(("KWG", "MDIMC", "NDIMC", "NDIMB"), _divides_product_over)]
    if v in (11, 12):
        rules += [Rule(("KREG", "VWN"), _divides),
                  Rule(("MDIMC", "MDIMA"), _equal), Rule(("NDIMC", "NDIMB"), _equal)]
    if v == 1:     # extra ties CLBlast adds only to shrink the exhaustive set
        rules += [Rule(("MDIMC", "MDIMA"), _equal), Rule(("NDIMC", "NDIMB"), _equal),
                  Rule(("SA", "SB"), _equal)]
    if v == 11:
        rules += [Rule(("VWN", "VWM"), _equal)]
    fraction = {1: 1.0, 2: 512.0, 11: 1.0, 12: 128.0}[v]
    return Stage(
        tuner="xgemm", variation=v, kernel="Xgemm", default_fraction=fraction,
        parameters=tuple((n, vals) for n, vals in values.items()),
        rules=tuple(rules),
        # A and B tiles cached in local memory when SA / SB are on
        local_mem=Rule(("SA", "KWG", "MWG", "SB", "NWG"),
                       lambda sa, kwg, mwg, sb, nwg: sa * kwg * mwg + sb * kwg * nwg),
        local_base=(1, 1), local_mul=("MDIMC", "NDIMC"),
    )


def _direct_rules(tie_threads: bool) -> tuple[Rule, ...]:
    # Same shape of rules as xgemm's kernel 0, over the direct kernel's names.
    rules = [
        Rule(("WGD", "KWID"), _divides),
        Rule(("WGD", "MDIMCD", "VWMD"), _divides_product),
        Rule(("WGD", "NDIMCD", "VWND"), _divides_product),
        Rule(("WGD", "MDIMAD", "VWMD"), _divides_product),
        Rule(("WGD", "NDIMBD", "VWND"), _divides_product),
        Rule(("WGD", "MDIMCD", "NDIMCD", "MDIMAD"), _divides_product_over),
        Rule(("WGD", "MDIMCD", "NDIMCD", "NDIMBD"), _divides_product_over),
    ]
    if tie_threads:
        rules += [Rule(("MDIMCD", "MDIMAD"), _equal), Rule(("NDIMCD", "NDIMBD"), _equal)]
    return tuple(rules)


# two padded WGD x WGD tiles (A and B) in local memory
_DIRECT_LOCAL_MEM = Rule(("WGD", "PADA", "PADB"),
                         lambda wgd, pada, padb: wgd * (wgd + pada) + wgd * (wgd + padb))


def _xgemm_direct(v: int) -> Stage:
    if v == 1:
        values = dict(WGD=(8, 16, 32), MDIMCD=(8, 16, 32), NDIMCD=(8, 16, 32),
                      MDIMAD=(8, 16, 32), NDIMBD=(8, 16, 32), KWID=(2,),
                      VWMD=(1, 2, 4, 8), VWND=(1, 2, 4, 8), PADA=(1,), PADB=(1,))
    else:
        values = dict(WGD=(8, 16, 32, 64), MDIMCD=(8, 16, 32), NDIMCD=(8, 16, 32),
                      MDIMAD=(8, 16, 32), NDIMBD=(8, 16, 32), KWID=(2, 8, 16),
                      VWMD=(1, 2, 4, 8), VWND=(1, 2, 4, 8), PADA=(0, 1), PADB=(0, 1))
    return Stage(
        tuner="xgemm_direct", variation=v, kernel="XgemmDirect",
        default_fraction=1.0 if v == 1 else 64.0,
        parameters=tuple(values.items()), rules=_direct_rules(tie_threads=v == 1),
        local_mem=_DIRECT_LOCAL_MEM, local_base=(1, 1), local_mul=("MDIMCD", "NDIMCD"),
    )


def _xconvgemm() -> Stage:
    # The direct GEMM kernel inside convgemm: no k unrolling, no padding.
    values = dict(WGD=(8, 16, 32), MDIMCD=(8, 16, 32), NDIMCD=(8, 16, 32),
                  MDIMAD=(8, 16, 32), NDIMBD=(8, 16, 32), KWID=(1,),
                  VWMD=(1, 2, 4, 8), VWND=(1, 2, 4, 8), PADA=(0,), PADB=(0,))
    return Stage(
        tuner="xconvgemm", variation=1, kernel="Xconvgemm", default_fraction=1.0,
        parameters=tuple(values.items()), rules=_direct_rules(tie_threads=False),
        local_mem=_DIRECT_LOCAL_MEM,
        # 3-D launch (patches, kernels, batch); the third dimension stays 1
        local_base=(1, 1, 1), local_mul=("MDIMCD", "NDIMCD"),
    )


def _xgemv(v: int) -> Stage:
    # Each variation is a different kernel; its parameter names end in V.
    wgs, wpt, vw = f"WGS{v}", f"WPT{v}", f"VW{v}"
    if v == 1:
        values = {wgs: (32, 64, 128, 256), wpt: (1, 2, 4)}
    elif v == 2:
        values = {wgs: (16, 32, 64, 128, 256), wpt: (1, 2, 4), vw: (1, 2, 4, 8)}
    else:
        values = {wgs: (16, 32, 64, 128), wpt: (1, 2, 4, 8, 16, 32), vw: (1, 2, 4, 8)}
    rules = []
    if v in (2, 3):
        rules.append(Rule((wpt, vw), _divides))    # whole vectors per thread
    if v == 3:
        rules.append(Rule((wgs, wpt), _at_least))
    if v == 3:   # a WGS3-long vector plus a WPT3 x WGS3 tile
        local_mem = Rule((wgs, wpt), lambda g, p: g + p * g)
    else:        # one WGS-long vector
        local_mem = Rule((wgs,), lambda g: g)
    return Stage(
        tuner="xgemv", variation=v,
        kernel={1: "Xgemv", 2: "XgemvFast", 3: "XgemvFastRot"}[v],
        default_fraction=1.0,   # this tuner takes no -fraction: always exhaustive
        parameters=tuple(values.items()), rules=tuple(rules),
        local_mem=local_mem, local_base=(1,), local_mul=(wgs,),
    )


STAGES: dict[str, tuple[Stage, ...]] = {
    "xgemm": tuple(_xgemm(v) for v in (1, 2, 11, 12)),
    "xgemm_direct": tuple(_xgemm_direct(v) for v in (1, 2)),
    "xgemv": tuple(_xgemv(v) for v in (1, 2, 3)),
    "xconvgemm": (_xconvgemm(),),
}

# Refuse to load if a stage's parameters are not exactly its kernel's
# database parameters: the dicts are handed to OverrideParameters unchanged.
for _stages in STAGES.values():
    for _s in _stages:
        if sorted(_s.parameter_names) != sorted(DATABASE_PARAMETERS[_s.kernel]):
            raise AssertionError(f"{_s.name}: parameters differ from {_s.kernel}'s")


def stages_for(name: str) -> tuple[Stage, ...]:
    """The stages of a tuner ('xgemm') or those tuning a database kernel ('XgemvFast')."""
    if name in STAGES:
        return STAGES[name]
    found = tuple(s for stages in STAGES.values() for s in stages if s.kernel == name)
    if not found:
        raise KeyError(f"no CLBlast tuner or tuned kernel named {name!r}")
    return found
