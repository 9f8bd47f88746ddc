"""The residual add folded into the convolution before it (`baseline`,
`vectorised`, `vectorised-tiled`).

A library call cannot do this: the add reads the convolution's output from
memory once more, and is a launch of its own.  Here the convolution that
is the add's last input, and that nothing else reads, adds the add's other
input and applies the add's activation in its epilogue, writing straight
into the add's output buffer; the add then has nothing left to do in a
forward pass (run, run_timed: its time is 0 and `config` says why).

The layer-wise checks (run_layer, layer_outputs) keep the unfused ops, so
each layer's own output is still checked against the oracle.

What is shared is layout-free: which conv an add folds into, the ops that
replace the pair, and the -D constants naming the add's activation and its
other input's buffer.  Each net builds its own conv kernel with them
(fold_residual), in whatever layout its buffers use.
"""
from __future__ import annotations

from nets import Net

from ..opencl.launch import ACT_CODES
from ..opencl.net import LayerOp


def fusable_conv(net: Net, j: int) -> int | None:
    """The index of the conv that add `j` can fold into, or None: the add's
    last-computed input (so its other input is ready when the conv runs),
    a conv with no activation of its own read by the add alone; not where
    the conv or the add is at the net's edge (their ops convert layouts)."""
    layer = net.layers[j]
    if layer.kind != "add" or len(layer.inputs) != 2 or j == len(net.layers) - 1:
        return None
    i = max(net.sources(j))
    if i <= 0 or net.sources(j).count(i) != 1:
        return None
    conv = net.layers[i]
    if conv.kind != "conv" or conv.activation != "none":
        return None
    readers = [k for k in range(len(net.layers)) if i in net.sources(k)]
    return i if readers == [j] else None


class InPlaceOfConv(LayerOp):
    """An op that runs in place of a conv's own (`conv_op`): the net's input
    and output still go through that conv's buffers."""

    def __init__(self, conv_op):
        super().__init__(conv_op.layer, conv_op.index)
        self.conv_op = conv_op

    def write_input(self, x):
        self.conv_op.write_input(x)

    def read_output(self):
        return self.conv_op.read_output()


class ResidualConvOp(InPlaceOfConv):
    """The conv with the add in its epilogue: its input, weights and bias, then
    the add's other input and output.  `reduce`, `reduce_args`, `reduce_step`:
    a second kernel that finishes the sum and does the epilogue instead (a tiled
    conv whose sum is split)."""

    def __init__(self, conv_op, launch, residual, out, step: str, reduce=None, reduce_step: str = ""):
        super().__init__(conv_op)
        self.launch = launch
        self.step = step
        self.reduce, self.reduce_step = reduce, reduce_step
        if reduce is None:
            self.args = (conv_op.in_buf, *conv_op.args[1:-1], residual, out)
        else:   # the main kernel writes its parts as before; the adding kernel reads the residual
            self.args = conv_op.args
            scratch, bias = conv_op.reduce_args[:2]
            self.reduce_args = (scratch, bias, residual, out)

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(*self.args))
        if self.reduce is not None:
            rec.kernel(self.reduce_step, self.reduce(*self.reduce_args))


class FoldedIntoConv(LayerOp):
    """The add (or the max pool: pool_fold.py) whose work the conv before it did: nothing to enqueue."""

    def __init__(self, op):
        super().__init__(op.layer, op.index)
        self.op = op

    def enqueue(self, rec):
        pass

    def write_input(self, x):
        self.op.write_input(x)

    def read_output(self):
        return self.op.read_output()


class FoldsResidualAdds:
    """A HandwrittenNet mixin: fused_ops() folds each residual add into the conv
    before it, where fusable_conv() finds one and fold_residual() can build it;
    `residual_folds` keeps, per conv index, (add index, its -D constants, its
    other input) for folds that build on these (vectorised's dw_pw)."""

    def fused_ops(self):
        ops, fused = list(self.ops), {}
        self.residual_folds = {}
        for j, add in enumerate(self.net.layers):
            i = fusable_conv(self.net, j)
            if i is None:
                continue
            other = [s for s in self.net.sources(j) if s != i][0]
            res = self.layouts[other + 1]
            # the add's activation replaces the conv's (none); the residual is read through its own border
            extra = {"ACT": ACT_CODES[add.activation], "RESIDUAL": 1,
                     "RHP": res.hp, "RWP": res.wp, "RPT": res.pad_h, "RPL": res.pad_w}
            folded = self.fold_residual(i, j, extra, self.activations[other + 1])
            if folded is None:
                continue
            ops[i], ops[j] = folded, FoldedIntoConv(self.ops[j])
            self.residual_folds[i] = (j, extra, self.activations[other + 1])
            fused[add.name] = f"into {self.net.layers[i].name}'s epilogue (adds {self.net.layers[other].name if other >= 0 else 'input'})"
        self.config["residual_adds_fused"] = fused
        return ops

    def fold_residual(self, i: int, j: int, extra: dict, residual):
        """Conv i's op with add j in its epilogue (`extra`: its -D constants), writing
        add j's output buffer; None where conv i's kernel cannot take it."""
        raise NotImplementedError
