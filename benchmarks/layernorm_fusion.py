"""The layernorm folded into the 1x1 after it (backends/handwritten/
layernorm_fused.py) against the layernorm as its own kernel, in one
interleaved `compare run` (every backend prepared, checked against the
float64 oracle, its timed passes taken in turn with the others').

Each hand-written backend runs three ways: as it is (`fuse_layernorm`
"measured": fused per pair where that measured faster at prepare), and as
`<name>-ln-always` (fused wherever it can be) and `<name>-ln-never` (the
layernorm its own kernel, the 1x1 whatever form its own measuring chose).
These names exist only in this process.

    .venv/bin/python benchmarks/layernorm_fusion.py [--net vit-tiny] [--batch B]
        [--backends vectorised,vectorised-tiled] [--repeats 5] [--warmup 2] [--out results/layernorm]
        [--device D]

On a GPU (the default device where one is present), one command:
`benchmarks/layernorm_fusion.py --batch 64 --repeats 10 --out results/layernorm-gpu`.

Printed, after `compare run`'s own tables: the load average before and
after; per backend, the whole pass (compute, median) of each form in its
fastest mode and the ratios never / always and never / measured with their
95% intervals (above 1: the fusion is faster; a winner named only where the
interval excludes 1x), then the same ratios within each mode; then per
layernorm that feeds a 1x1, the pair's time (the layernorm's layer and the
1x1's, each synced alone as `compare run` times layers, wall) in each
form, medians and ratios, and what the measured form chose.
"""
from __future__ import annotations

import sys

import backends
from backends.handwritten.layernorm_fused import fusable

from fusion_options import Fusion, main, variants

LAYERNORM = Fusion(option="fuse_layernorm", tag="ln", fusable=fusable, fused_key="layernorm_fused",
                   record_key="layernorm",
                   sites="per pair (the layernorm's and the 1x1's layer wall times, each synced alone; ms, medians)")
VARIANTS = variants(LAYERNORM, __name__)
globals().update({cls.__name__: cls for cls in VARIANTS.values()})   # where the registry looks them up
backends.REGISTRY.update({name: (__name__, cls.__name__) for name, cls in VARIANTS.items()})


if __name__ == "__main__":
    sys.exit(main(None, LAYERNORM, __doc__, nets="vit-tiny", repeats=5, out="results/layernorm"))
