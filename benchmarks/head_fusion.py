"""A net's head as one kernel (backends/handwritten/head_fused.py: the global
average pool and the dense layer that alone reads it) against the two
kernels, per net in one interleaved `compare run` (every backend prepared,
checked against the float64 oracle, its timed passes taken in turn with the
others').

Each hand-written backend runs three ways: as it is (`fuse_head` "measured":
fused where that measured faster at prepare), and as `<name>-head-always`
(fused wherever it can be) and `<name>-head-never` (the pool's kernel, then
the dense's chosen form).  These names exist only in this process.

    .venv/bin/python benchmarks/head_fusion.py [--nets resnet18,mobilenet-v2] [--batch B]
        [--backends vectorised,vectorised-tiled] [--repeats 10] [--warmup 2] [--out results/head]
        [--device D]

On a GPU (the default device where one is present), one command:
`benchmarks/head_fusion.py --repeats 10 --out results/head-gpu` (add `--device NVIDIA` to
pick it by name, `--batch 64` for a larger batch).

Printed per net, after `compare run`'s own tables: per backend, the whole
pass (compute, median) of each form in its fastest mode and the ratios
never / always and never / measured with their 95% intervals (above 1: the
fusion is faster; a winner named only where the interval excludes 1x), then
the head's time (the pool's layer and the dense's, each synced alone as
`compare run` times layers, wall) in each form, medians and ratios, and what
the measured form chose; the load average before and after.
"""
from __future__ import annotations

import sys

import backends
from backends.handwritten.head_fused import fusable

from fusion_options import Fusion, main, variants

HEAD = Fusion(option="fuse_head", tag="head", fusable=fusable, fused_key="head_fused", record_key="head",
              sites="the head (the pool's and the dense's layer wall times, each synced alone; ms, medians)")
VARIANTS = variants(HEAD, __name__)
globals().update({cls.__name__: cls for cls in VARIANTS.values()})   # where the registry looks them up
backends.REGISTRY.update({name: (__name__, cls.__name__) for name, cls in VARIANTS.items()})


if __name__ == "__main__":
    sys.exit(main(None, HEAD, __doc__, nets="resnet18,mobilenet-v2", repeats=10, out="results/head"))
