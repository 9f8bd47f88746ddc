"""A 2x2 stride-2 max pool done by the output transform of the Winograd GEMM
conv before it (`vectorised`, `vectorised-tiled`; kernels/winograd_transforms.cl
POOL), where the pool alone reads the conv.

VGG-16 runs five such pools, each a launch of its own that reads the conv's
whole output once more (7-10 us each on an H200, about 0.04 ms of a 0.77 ms
pass).  Folded, the output transform takes the max of each 2x2 window of its
tile (the tile's side is even and tiles start at multiples of it, so no
window spans two tiles) and writes the pooled pixel alone.

The folded form must give the two kernels' output on a random input (the
same arithmetic, the max exact: a difference is a fault), and is measured
against them at prepare (measured.py), the faster kept; `fold_pools`
"always" folds unmeasured, "never" keeps the two kernels.  The layer-wise
checks keep the unfused ops, so the conv's own output is still checked.
"""
from __future__ import annotations

import numpy as np

from nets import Net

from .fold_choice import OWN, pair_outputs
from .measured import HOW, fastest_ms, rel_l2
from .net import bare
from .residual import FoldedIntoConv
from .winograd_gemm import WinogradGemmOp, with_pool

MODES = ("measured", "always", "never")
MAX_REL_L2 = 1e-6   # the two forms do the same float32 arithmetic
SEED = 41
FOLDED = "folded"


def foldable_pool(net: Net, j: int) -> int | None:
    """The index of the conv whose output transform can do layer j, or None: j a 2x2 stride-2 unpadded
    max pool, reading only a conv that nothing else reads; not where the conv or the pool is at the net's
    edge (their ops convert layouts)."""
    layer = net.layers[j]
    if (layer.kind != "maxpool" or tuple(layer.kernel) != (2, 2) or tuple(layer.stride) != (2, 2)
            or any(layer.padding) or len(net.sources(j)) != 1 or j == len(net.layers) - 1):
        return None
    i = net.sources(j)[0]
    if i <= 0 or net.layers[i].kind != "conv":
        return None
    readers = [k for k in range(len(net.layers)) if i in net.sources(k)]
    return i if readers == [j] else None


class FoldsPools:
    """A VectorisedNet mixin: fold_pools() runs each foldable max pool in the output transform of the
    Winograd GEMM form before it, where `fold_pools` says so (module docstring)."""

    def fold_pools(self, ops: list) -> None:
        folded, kept, records = {}, {}, {}
        for j, pool in enumerate(self.net.layers):
            i = foldable_pool(self.net, j)
            if i is None or not isinstance(bare(ops[i]), WinogradGemmOp):
                continue
            conv = self.net.layers[i].name
            if self.forms.fold_pools == "never":
                kept[pool.name] = "its own kernel: folding turned off (fold_pools='never')"
                continue
            if ops[i] is not self.ops[i] or ops[j] is not self.ops[j]:
                kept[pool.name] = f"its own kernel: it or {conv} is already folded into another kernel"
                continue
            pooled = with_pool(self, bare(ops[i]), j)
            x = np.random.default_rng(SEED + j).standard_normal(self.input_layout(i).canonical_shape)
            outs = pair_outputs(self, i, j, {OWN: [bare(ops[i]), bare(ops[j])], FOLDED: [pooled]},
                                x.astype(np.float32))
            err = rel_l2(outs[FOLDED], outs[OWN])
            record = {"rel_l2_against_own_kernels": float(f"{err:.2e}")}
            records[pool.name] = record
            if not err <= MAX_REL_L2:   # NaN too
                kept[pool.name] = f"its own kernel: folded, relative L2 {err:.1e} against the two kernels"
                continue
            # in the conv's place, as a residual add's fold: the conv's row of a pass's times holds both
            form, timed = [pooled, FoldedIntoConv(ops[j])], ""
            if self.forms.fold_pools == "measured":
                times = fastest_ms(self.rt, {FOLDED: form, OWN: [ops[i], ops[j]]})
                record["ms"] = {k: round(v, 4) for k, v in times.items()}
                self.config["measured_forms"] = HOW
                if times[OWN] < times[FOLDED]:
                    kept[pool.name] = (f"its own kernel: measured faster so ({times[OWN]:.4f} ms against "
                                       f"{times[FOLDED]:.4f} folded)")
                    continue
                timed = f"; measured {times[FOLDED]:.4f} ms against {times[OWN]:.4f} as two"
            ops[i], ops[j] = form
            folded[pool.name] = f"into {conv}'s Winograd output transform{timed}"
        self.config["pools_fused"] = folded
        if kept:
            self.config["pools_not_fused"] = kept
        if records:
            self.config["pool_folds"] = records
