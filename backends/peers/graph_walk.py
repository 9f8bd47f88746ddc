"""A forward pass over a net's graph for the peers: each layer fed the
outputs it names, each output let go once its last reader has run (so a
chain holds one or two at a time, as a framework's own executor would).

The same walk runs eagerly and under tracing (torch.compile, CUDA-graph
capture, tf.function): it is plain Python over the net's structure."""
from __future__ import annotations

from collections.abc import Callable

from nets import Net


class GraphWalk:
    """Which outputs each layer reads, and which it is the last to read."""

    def __init__(self, net: Net):
        self.sources = [net.sources(i) for i in range(len(net.layers))]
        last = {}
        for i, sources in enumerate(self.sources):
            for s in sources:
                if s >= 0:
                    last[s] = i
        self.done_after = [[s for s in sorted(set(sources)) if s >= 0 and last[s] == i]
                           for i, sources in enumerate(self.sources)]

    def run(self, x, layer: Callable[[int, list], object], keep: bool = False) -> list:
        """Every layer's output on the net's input `x`, layer i computed as
        layer(i, its inputs in order); without `keep`, an output no later
        layer reads is None in the list (the last layer's is always kept)."""
        outs = []
        for i, sources in enumerate(self.sources):
            outs.append(layer(i, [x if s < 0 else outs[s] for s in sources]))
            if not keep:
                for s in self.done_after[i]:
                    outs[s] = None
        return outs
