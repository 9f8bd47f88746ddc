"""How `vectorised-tiled` cuts one convolution into work-groups: the tile
shapes it may use, and the rule that picks a tile and a split of the sum
per layer and per device.  Plain arithmetic, so it is tested without a device.

The convolution is an implicit GEMM of M = images x output pixels rows by
K = output channels columns, summed over FH x FW x input channels
(kernels/tiled_conv.cl).  A tile of TM x TN outputs per work-group, RM x RN
per work-item: bigger blocks reuse each loaded value more, but give fewer
work-groups, and a GPU whose compute units outnumber the work-groups idles.

The rule, per layer:
1. channels: only tiles whose TN wastes at most 1/8 of the work on padding
   channels (VGG's 64-channel layers take TN <= 64, LeNet's 8-channel C1
   TN = 8); if none does, the least wasteful.  Of those, on a GPU, the
   tiles with 8 x 8 blocks per work-item where there are any: smaller
   blocks ran 25-55% slower on layers that gave every tile enough work;
2. on a GPU, each such tile with each split KSPLIT of the sum is scored by
   a model of its time, the waves of work-groups that the compute units run
   one after another times the work of one work-group:
       ceil(work-groups / compute units) x TM x TN x ceil(slices / KSPLIT).
   KSPLIT is a power of two up to MAX_SPLIT, each part keeps at least
   MIN_SLICES slices, and a tile is split only while it has fewer than two
   work-groups per compute unit (splitting further only adds partial sums
   to add up).  The lowest score wins; ties go to the larger tile (each
   value loaded feeds more multiply-adds), then to the smaller split;
3. on a CPU (PoCL) a work-group is a loop on one core: the largest tile
   that fits the channels, no split.

The model was checked against every tile and split on every VGG-16 and
LeNet-5 conv layer on an NVIDIA H200 (benchmarks/tiles.py; the output is
reports/nvidia-h200/tiles.txt): the earlier rule (smaller tiles until every
compute unit had a work-group, never a split) ran VGG's conv4 and conv5
layers 1.5x and 3.5x slower than the fastest plan.
"""
from __future__ import annotations

from dataclasses import dataclass

from nets.errors import Unsupported

from .layout import round_up


@dataclass(frozen=True)
class Tile:
    tm: int   # output pixels per work-group
    tn: int   # output channels per work-group
    rm: int   # pixels per work-item
    rn: int   # channels per work-item

    def __post_init__(self):
        # the kernel moves float4s: blocks are multiples of 4 and divide the tile
        if self.rm % 4 or self.rn % 4 or self.tm % self.rm or self.tn % self.rn:
            raise ValueError(f"tile {self.tm}x{self.tn} with {self.rm}x{self.rn} blocks: blocks must be "
                             f"multiples of 4 that divide the tile")

    @property
    def local(self) -> tuple[int, int]:
        return (self.tn // self.rn, self.tm // self.rm)

    @property
    def threads(self) -> int:
        return (self.tn // self.rn) * (self.tm // self.rm)

    def __str__(self):
        return f"{self.tm}x{self.tn} ({self.rm}x{self.rn} per work-item)"


# largest register blocks first
TILES = (
    Tile(128, 128, 8, 8),
    Tile(128, 64, 8, 8),
    Tile(64, 64, 8, 8),
    Tile(64, 32, 8, 4),
    Tile(32, 32, 4, 4),
    Tile(128, 16, 8, 4),
    Tile(64, 8, 4, 4),
)
MAX_CHANNEL_WASTE = 0.125
MIN_SLICES = 8
MAX_SPLIT = 16


@dataclass(frozen=True)
class ConvPlan:
    tile: Tile
    tk: int           # reduction slice: floats of one filter tap's channels
    kp: int           # output channels as the weights are stored: a multiple of tn
    ksplit: int       # work-groups sharing one tile's sum
    pixel_tiles: int  # tiles along the output pixels

    @property
    def groups(self) -> int:
        return self.pixel_tiles * (self.kp // self.tile.tn) * self.ksplit

    @property
    def global_size(self) -> tuple[int, int, int]:
        tx, ty = self.tile.local
        return (self.kp // self.tile.tn * tx, self.pixel_tiles * ty, self.ksplit)

    def describe(self) -> dict:
        return {"tile": str(self.tile), "slice": self.tk, "split": self.ksplit,
                "work_groups": self.groups, "local": list(self.tile.local)}


def slice_length(c_stored: int) -> int:
    """The longest slice (16, 8 or 4 floats) that divides the stored input channels."""
    for tk in (16, 8, 4):
        if c_stored % tk == 0:
            return tk
    raise ValueError(f"stored channels {c_stored} are not a multiple of 4")


def _fits(tile: Tile, max_group: int, max_items: tuple) -> bool:
    tx, ty = tile.local
    return tile.threads <= max_group and tx <= max_items[0] and ty <= max_items[1]


def local_bytes(tile: Tile, tk: int) -> int:
    """Local memory of one work-group (kernels/tiled_conv.cl's As and Bs)."""
    return 16 * tk * (tile.tm // 4 + 1 + tile.tn // 4)


def plan_conv(pixels: int, channels: int, c_in_stored: int, taps: int, compute_units: int,
              gpu: bool, max_group: int, max_items: tuple, tiles=TILES, ksplit: int | None = None,
              max_local: int | None = None) -> ConvPlan:
    """The rule of the module docstring for one layer: `pixels` = M, `channels`
    the stored output channels, `taps` = FH * FW, `max_local` the device's
    local memory in bytes.  `tiles` and `ksplit` narrow the choice
    (benchmarks/tiles.py sweeps them).  Unsupported when no tile fits."""
    tk = slice_length(c_in_stored)
    usable = [t for t in tiles if _fits(t, max_group, max_items)
              and (max_local is None or local_bytes(t, tk) <= max_local)]
    if not usable:
        memory = f" and {max_local} bytes of local memory" if max_local is not None else ""
        raise Unsupported(f"no tile of vectorised-tiled fits this device's work-groups ({max_group} work-items"
                          f"{memory}); the smallest needs {min(t.threads for t in tiles)} work-items and "
                          f"{min(local_bytes(t, tk) for t in tiles)} bytes")
    waste = {t: round_up(channels, t.tn) / channels - 1 for t in usable}
    narrow = [t for t in usable if waste[t] <= MAX_CHANNEL_WASTE]
    if not narrow:
        least = min(waste.values())
        narrow = [t for t in usable if waste[t] == least]
    slices = taps * c_in_stored // tk

    def plan(t: Tile, k: int) -> ConvPlan:
        return ConvPlan(t, tk, round_up(channels, t.tn), k, -(-pixels // t.tm))

    if not gpu:
        return plan(narrow[0], ksplit or 1)
    blocks = [t for t in narrow if (t.rm, t.rn) == (8, 8)] or narrow

    def splits(t: Tile) -> list[int]:
        if ksplit is not None:
            return [ksplit]
        out = [1]
        while (out[-1] < MAX_SPLIT and slices // (2 * out[-1]) >= MIN_SLICES
               and plan(t, out[-1]).groups < 2 * compute_units):
            out.append(2 * out[-1])
        return out

    def score(p: ConvPlan) -> tuple:
        waves = -(-p.groups // compute_units)
        return (waves * p.tile.tm * p.tile.tn * -(-slices // p.ksplit), -p.tile.tm * p.tile.tn, p.ksplit)

    return min((plan(t, k) for t in blocks for k in splits(t)), key=score)
