"""How kernels/winograd.cl cuts one layer into work-groups: plain
arithmetic, tested without a device.

A work-group of KG x TG x PG work-items takes TT = TG x RT output tiles
(m x m pixels each) and KG x KW output channels, each work-item a^2 / PG of
the a^2 positions, and stages the transformed input patches of its tiles,
TC input channels at a time, in local memory: a^2 x TC x TT floats
(a = m + 2), and with PG > 1 the tiles' products too (a^2 x TT x KG x KW).
The rule, per layer:

- on a GPU, two candidates, both measured at prepare (winograd.py): KW = 4
  (a float4 per work-item), up to GPU_ITEMS work-items, KG the largest of
  16, 8, 4, 2, 1 whose channel block wastes at most 1/8 of the output
  channels on padding, TG halved while the layer gives fewer work-groups
  than compute units, TC 16, 8 or 4 input channels (the most whose
  patches fit in GPU_LOCAL bytes; all of them where they are fewer); (a) every position in one work-item (PG = 1), RT = 2
  tiles per work-item for F(2x2), 1 for F(4x4): a^2 float4 accumulators
  each, 32 or 36 float4s of registers; (b) the positions split over
  PG = 4 (F(2x2)) or 6 (F(4x4)) work-items, one tile each: a batch-1 layer
  of few tiles gets PG times the work-items;
- on a CPU (PoCL) a work-group is a loop over its work-items on one core,
  each barrier a cut between loops: every input channel in one chunk
  (TC = XC4) where it fits, so that no accumulator lives across a barrier
  and the loops keep them in registers; KW = 8 (a float8: the peak kernel
  measured float8 multiply-adds at twice float4's on this machine's PoCL),
  one tile per work-item, CPU_TILES tiles a work-group, all output channels
  in one work-group so that each patch is transformed once.  Measured on
  ResNet-18's four stages (2-core EPYC, PoCL 3.1, other work sharing the
  cores: the least of 15 runs): 4 tiles a group against 16 1.2-1.3x
  faster, one tile a work-item against 2 or 4 1.2-2x; the channels in
  blocks over more work-groups (for the 7x7 stage's 4 tiles) 2.2x slower.
"""
from __future__ import annotations

from dataclasses import dataclass

from nets.errors import Unsupported

from .layout import round_up

GPU_ITEMS = 128             # work-items per work-group on a GPU
GPU_LOCAL = 32 * 1024       # local memory a GPU work-group may take for its patches
MAX_CHANNEL_WASTE = 0.125
CPU_TILES = 4              # tiles per work-group on a CPU (their patches stay in the core's first cache)


@dataclass(frozen=True)
class WinogradPlan:
    m: int       # output tile side: 2 or 4
    kw: int      # output channels per work-item
    kg: int      # work-items along the channels
    tg: int      # work-items along the tiles
    pg: int      # work-items along the a^2 positions
    rt: int      # tiles per work-item
    tc: int      # input channels per chunk
    kp: int      # output channels as U and the bias are stored: a multiple of kg * kw
    tiles: int   # output tiles of the layer (all images)

    @property
    def a(self) -> int:
        return self.m + 2

    @property
    def tt(self) -> int:
        return self.tg * self.rt

    @property
    def threads(self) -> int:
        return self.kg * self.tg * self.pg

    @property
    def local(self) -> tuple[int, int, int]:
        return (self.kg, self.tg, self.pg)

    @property
    def global_size(self) -> tuple[int, int, int]:
        return (self.kp // self.kw, -(-self.tiles // self.tt) * self.tg, self.pg)

    @property
    def groups(self) -> int:
        return (self.kp // (self.kg * self.kw)) * -(-self.tiles // self.tt)

    @property
    def local_bytes(self) -> int:
        return local_bytes(self.m, self.tc, self.tt, self.kg * self.kw if self.pg > 1 else 0)

    @property
    def label(self) -> str:
        """Tells a layer's candidates of one tile size apart."""
        split = f", positions over {self.pg}" if self.pg > 1 else ""
        return f"{self.kg}x{self.tg}x{self.pg} items, {self.rt} tile{'s' if self.rt > 1 else ''} each{split}"

    def defines(self) -> dict:
        return {"WM": self.m, "KW": self.kw, "KG": self.kg, "TG": self.tg, "PG": self.pg, "RT": self.rt,
                "TC": self.tc, "KP": self.kp}

    def describe(self) -> dict:
        return {"tile": f"{self.m}x{self.m}", "tiles_per_group": self.tt, "channels_per_item": self.kw,
                "positions_split": self.pg, "local": list(self.local), "chunk": self.tc,
                "work_groups": self.groups, "local_bytes": self.local_bytes}


def local_bytes(m: int, tc: int, tt: int, channels: int = 0) -> int:
    """Local memory of one work-group: the transformed patches of a chunk, and
    (positions split, `channels` of the group's) the products of its tiles."""
    return (m + 2) ** 2 * (tc + channels) * tt * 4


def tile_count(batch: int, h: int, w: int, m: int) -> int:
    return batch * -(-h // m) * -(-w // m)


def _chunk(m: int, c_stored: int, tt: int, budget: int, channels: int = 0, whole: bool = True) -> int | None:
    """The most input channels per chunk whose patches fit `budget` bytes: all of them (`whole`, or
    where they are 16 at most), else 16, 8 or 4."""
    for tc in ((c_stored,) if whole or c_stored <= 16 else ()) + (16, 8, 4):
        if c_stored % tc == 0 and local_bytes(m, tc, tt, channels) <= budget:
            return tc
    return None


def _fitted(m: int, tiles: int, c_in: int, c_out: int, kw: int, kg: int, tg: int, pg: int, rt: int, budget: int,
            max_group: int, max_items: tuple, enough_groups: int = 0, whole: bool = True) -> WinogradPlan | None:
    """The plan with these choices, TG halved while the layer gives fewer than `enough_groups`
    work-groups, and until the work-group and its local memory fit; None where they never do."""
    def groups(t: int) -> int:
        return (round_up(c_out, kg * kw) // (kg * kw)) * -(-tiles // (t * rt))
    while tg > 1 and groups(tg) < enough_groups:
        tg //= 2
    while tg > 1 and (kg * tg * pg > max_group or tg > max_items[1]):
        tg //= 2
    while kg > 1 and (kg * pg > max_group or kg > max_items[0]):
        kg //= 2
    if kg * tg * pg > max_group or kg > max_items[0] or tg > max_items[1] or pg > max_items[2]:
        return None
    kp = round_up(c_out, kg * kw)
    split = kg * kw if pg > 1 else 0
    tc = _chunk(m, c_in, tg * rt, budget, split, whole)
    while tc is None and tg > 1:
        tg //= 2
        tc = _chunk(m, c_in, tg * rt, budget, split, whole)
    return None if tc is None else WinogradPlan(m, kw, kg, tg, pg, rt, tc, kp, tiles)


def plan_winograd(m: int, batch: int, out_h: int, out_w: int, c_in_stored: int, c_out_stored: int, gpu: bool,
                  compute_units: int, max_group: int, max_items: tuple, local_mem: int) -> list[WinogradPlan]:
    """The module docstring's candidates for one layer (one on a CPU); Unsupported where none fits the device."""
    tiles = tile_count(batch, out_h, out_w, m)
    max_items = tuple(max_items) + (1,) * (3 - len(max_items))
    plans: list[WinogradPlan | None] = []
    if gpu:
        kw = 4
        kg = next(k for k in (16, 8, 4, 2, 1) if round_up(c_out_stored, k * kw) / c_out_stored - 1 <= MAX_CHANNEL_WASTE)
        budget = min(GPU_LOCAL, local_mem)
        rt = 2 if m == 2 else 1
        plans.append(_fitted(m, tiles, c_in_stored, c_out_stored, kw, kg, max(1, GPU_ITEMS // kg), 1, rt, budget,
                             max_group, max_items, compute_units, whole=False))
        pg = 4 if m == 2 else 6
        plans.append(_fitted(m, tiles, c_in_stored, c_out_stored, kw, kg, max(1, GPU_ITEMS // (kg * pg)), pg, 1,
                             budget, max_group, max_items, compute_units, whole=False))
    else:
        kw = 8 if c_out_stored % 8 == 0 else 4
        tg, kg = min(CPU_TILES, tiles), c_out_stored // kw
        while kg > 1 and (kg > max_group or kg > max_items[0]):
            kg //= 2
        plans.append(_fitted(m, tiles, c_in_stored, c_out_stored, kw, kg, tg, 1, 1, local_mem // 2, max_group,
                             max_items))
    found = [p for p in plans if p is not None]
    if not found:
        raise Unsupported(f"no work-group of Winograd {m}x{m} fits this device ({max_group} work-items, "
                          f"{local_mem} bytes of local memory)")
    return found
