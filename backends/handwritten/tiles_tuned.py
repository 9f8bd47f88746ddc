"""Tiles of `vectorised-tiled` chosen by measurement: `compare tune` times
every tile and split on each conv layer of the nets (checking each output)
and keeps the fastest per layer and device (backends/cache.py, kind
'tiles').  A layer found there runs with its measured tile and split; any
other with the cost model's (tiled_plan.py)."""
from __future__ import annotations

from .. import cache, store
from .tiled_plan import Tile

KIND = "tiles"


def layer_key(batch: int, in_shape, layer) -> str:
    """What fixes a conv layer's kernel: batch, input shape, filters, window, stride, padding."""
    return (f"n{batch} in{'x'.join(map(str, in_shape))} k{layer.out_channels} "
            f"w{layer.kernel[0]}x{layer.kernel[1]} s{layer.stride[0]}x{layer.stride[1]} "
            f"p{'x'.join(map(str, layer.pad))}")   # (rows, cols), or (top, left, bottom, right)


def check_entry(entry, where: str) -> None:
    """One device's entry of the tiles' cache, as the tiles' search writes it (store.Foreign naming what is not):
    per layer key its tile (four whole numbers) and its split."""
    layers = store.need(store.obj(entry, where), "layers", store.obj, where)
    for key, found in layers.items():
        at = f"{where}.layers[{key[:60]!r}]"
        tile = store.need(store.obj(found, at), "tile", store.array, at)
        if len(tile) != 4 or not all(store.whole_number(t, f"{at}.tile") > 0 for t in tile):
            raise store.Foreign(f"{at}.tile is not 4 whole numbers above 0")
        Tile(*tile)   # a tile the kernel cannot run is refused there (ValueError)
        if store.need(found, "ksplit", store.whole_number, at) < 1:
            raise store.Foreign(f"{at}.ksplit is below 1")


class TunedTiles(cache.DeviceEntry):
    KIND = KIND

    def choice(self, key: str) -> tuple[Tile, int] | None:
        found = (self.entry or {}).get("layers", {}).get(key)
        if not found:
            return None
        return Tile(*found["tile"]), int(found["ksplit"])

    def source(self, key: str) -> str:
        if self.choice(key) is None:
            return "cost model (tiled_plan.py)"
        return f"measured by `compare tune` on {str(self.entry.get('tuned', '?'))[:10]}"
