"""`compare nets`: the built-in nets, their batch, input, layers, parameters and work per image."""
from __future__ import annotations

import nets

from ..terminal import table as fit_table


def cmd_nets(args) -> int:
    if args.json:
        from ..machine import emit
        emit("nets", {"nets": [{"name": n.name, "default_batch": n.default_batch, "input_shape": list(n.input_shape),
                                "layers": len(n.layers), "params": n.params(), "gflop_per_image": n.flops(1) / 1e9,
                                "description": n.description} for n in nets.NETS.values()]})
        return 0
    rows = [[n.name, n.default_batch, "x".join(map(str, n.input_shape)), len(n.layers), f"{n.params():,}",
             f"{n.flops(1) / 1e9:.3f}", n.description] for n in nets.NETS.values()]
    print(fit_table(rows, ["net", "batch", "input", "layers", "params", "GFLOP/image", "description"]))
    return 0
