"""`compare weights`: a built-in net's seeded weights written as a .npz file."""
from __future__ import annotations

from pathlib import Path

import nets
from nets.errors import UserError
from nets.weights import init_weights, save_weights

from ..files import check_writable
from ..keep import keep_file
from ..models import SUFFIXES
from .common import unwritten


def cmd_weights(args) -> int:
    if Path(args.net).suffix.lower() in SUFFIXES:   # a model file carries its own weights: none are seeded for it
        raise UserError(f"--net {args.net} is a model file: `compare weights` writes the seeded weights of a built-in "
                        f"net ({', '.join(nets.NETS)}); a model file's weights are its own, read with it")
    net = nets.get_net(args.net)
    check_writable(args.out, "--out", room=net.params() * 4 + 2**16)
    weights = init_weights(net, args.seed)
    kept = keep_file(args.out, lambda tmp: save_weights(tmp, weights), "--out", "weights")
    unwritten([kept.problem])
    if args.json:
        from ..machine import emit
        emit("weights", {"net": net.name, "seed": args.seed, "out": args.out, "arrays": len(weights),
                         "params": net.params()})
        return 0
    print(f"wrote {len(weights)} arrays ({net.params():,} parameters) of {net.name}, seed {args.seed}, to {args.out}")
    return 0
