"""A layernorm folded into the 1x1 conv that alone reads it (`vectorised`,
`vectorised-tiled`; issue 45): a ViT or Swin block's LN -> QKV projection
and LN -> MLP fc1, where tokens are (C, T, 1) maps and every Linear a 1x1.

The layernorm's scale and shift go into the 1x1's weights at prepare
(W' = W diag(scale), b' = b + W shift, in float64), so what is left of it
is each token's mean and 1/std, which the blocked 1x1 (kernels/pointwise.cl,
-D LNORM) works out itself from the layernorm's input: two passes over the
token's channels (the mean, then the variance of the centred values; not
E[x^2] - mean^2, which cancels where the mean is large against the spread),
then the product over the centred input (on a CPU copied to private
memory first, LN_COPY) and rstd * acc + b' in the epilogue.  One launch instead of two, and the normalised tokens never go
through global memory; the price is that the work-items of a token each
work out its statistics (2 C reads against their C x KW multiply-adds a
block of output channels).  So a work-item does NB blocks of the 1x1's
output channels one after the other, its pixels' statistics worked out
once for them: each NB of BLOCKS is a form (fewer statistics against
fewer work-items).

Where: conv i is a 1x1 stride-1 unpadded ungrouped conv whose one input is
a layernorm l with no activation of its own, and nothing else reads l's
output (the residual reads the block's input, not the layernorm's); l's
input is not a slice of a concatenation's buffer (the kernel reads whole
pixels); conv i's add is not folded into its epilogue (residual.py: kept
simple, say so).  Not fused otherwise, and `config["layernorm_not_fused"]`
says why.

`fuse_layernorm` (the nets' argument): "measured" (the default): per pair,
the fused forms against the layernorm's kernel followed by the 1x1's
chosen form (direct, blocked or vector: whichever won its own measuring),
timed with their launches (measured.py), the fastest kept; "always" (the
fastest fused form); "never".  Before timing, every form runs on one
random input whose tokens have a large mean (up to OFFSET times their
spread) and is compared with the pair computed in float64; a fused form
is refused where its relative L2 error passes MAX_REL_L2 (Winograd's and
the vector kernels' bound), "always" included.  `config["layernorm"]`
holds each pair's times, errors and choice; `config["layernorm_fused"]`
names each layernorm folded (the report's folded layers), and the fused
step is "layernorm+pointwise 1x1".  The layer-wise checks keep both
layers' own kernels, so each layer's output is still checked on its own;
the fused pair is checked end to end and at prepare.
"""
from __future__ import annotations

import numpy as np

from nets import LayerKind, Net

from ..base import layer_params
from ..opencl.launch import ACT_CODES, step_name
from ..reference.numpy_backend import _activate
from . import pointwise
from .fold_choice import OWN, choose, pair_errors
from .net import Folded, bare
from .residual import InPlaceOfConv

MODES = ("measured", "always", "never")
MAX_REL_L2 = 1e-5   # as Winograd's and cpu_conv's: a tenth of the float32 tolerance
OFFSET = 30.0       # the check's tokens: mean up to this many times their spread
SEED = 45           # of the check's input
COPY_MAX_CHANNELS = 1024   # LN_COPY's private copy: RP x this many floats a work-item at most
FUSED = "fused"
# blocks of output channels a work-item of the fused kernel: each of these (capped at the 1x1's), measured;
# on a CPU all of them too (a few work-items a core are enough there), on a GPU at most 16 (it needs many)
BLOCKS = {"cpu": (1, 4, 1 << 30), "gpu": (1, 4, 16)}


def fusable(net: Net, i: int) -> tuple[int | None, str]:
    """(the layernorm that conv i can fold, "") or (that layernorm or None, why not)."""
    layer = net.layers[i]
    sources = net.sources(i)
    if not pointwise.applies(layer) or len(sources) != 1 or sources[0] < 0:
        return None, ""
    l = sources[0]
    ln = net.layers[l]
    if ln.kind != LayerKind.LAYERNORM:
        return None, ""
    readers = [net.layers[k].name for k in range(len(net.layers)) if l in net.sources(k)]
    if readers != [layer.name]:
        return l, f"its output is read by {', '.join(readers)}: it must be written"
    if ln.activation != "none":
        return l, f"its activation ({ln.activation}) comes before {layer.name}'s weights"
    return l, ""


def folded_params(ln: dict, conv: dict) -> tuple[np.ndarray, np.ndarray]:
    """The 1x1's (K, C) weights and (K,) bias with the layernorm's scale and shift folded in, float64."""
    w = np.asarray(conv["weight"], np.float64)[:, :, 0, 0]
    return (w * np.asarray(ln["scale"], np.float64)[None, :],
            np.asarray(conv["bias"], np.float64) + w @ np.asarray(ln["bias"], np.float64))


def reference(x: np.ndarray, ln: dict, conv: dict, eps: float, activation: str) -> np.ndarray:
    """The pair in float64: x (N, C, H, W) -> (N, K, H, W)."""
    x = np.asarray(x, np.float64)
    mean = x.mean(axis=1, keepdims=True)
    d = x - mean
    norm = d / np.sqrt((d * d).mean(axis=1, keepdims=True) + eps)
    norm = norm * np.asarray(ln["scale"], np.float64)[None, :, None, None] \
        + np.asarray(ln["bias"], np.float64)[None, :, None, None]
    w = np.asarray(conv["weight"], np.float64)[:, :, 0, 0]
    y = np.einsum("kc,nchw->nkhw", w, norm) + np.asarray(conv["bias"], np.float64)[None, :, None, None]
    return _activate(y, activation)


def check_input(shape: tuple, seed: int = SEED) -> np.ndarray:
    """Random tokens (N, C, H, W) whose means lie up to OFFSET times their spread from 0."""
    rng = np.random.default_rng(seed)
    n, _, h, w = shape
    offsets = rng.uniform(-OFFSET, OFFSET, (n, 1, h, w))
    spread = rng.uniform(0.5, 2.0, (n, 1, h, w))
    return (offsets + spread * rng.standard_normal(shape)).astype(np.float32)


class LayerNormGemmOp(InPlaceOfConv):
    """The 1x1's op doing the layernorm before it too: host reads and writes are the 1x1's own op's."""

    def __init__(self, conv_op, launch, args: tuple, step: str):
        super().__init__(conv_op)
        self.launch, self.args, self.step = launch, args, step

    def enqueue(self, rec):
        rec.kernel(self.step, self.launch(*self.args))


def blocks(net, i: int) -> int:
    """Blocks of KW output channels of 1x1 i (pointwise.py's KW for the device)."""
    defines = pointwise._defines(net, i, net.layouts[i + 1])
    return defines["KP"] // defines["KW"]


def label(nb: int) -> str:
    return FUSED if nb == 1 else f"{FUSED}, {nb} blocks a work-item"


def build(net, l: int, i: int, ln_params: dict, conv_params: dict, nb: int = 1) -> LayerNormGemmOp:
    """Layernorm l and 1x1 i as one blocked-1x1 launch reading l's input and writing i's output,
    each work-item `nb` blocks of output channels (its pixels' statistics worked out once for them)."""
    ln, conv = net.net.layers[l], net.net.layers[i]
    src, dst = net.input_layout(l), net.layouts[i + 1]
    # on a CPU the centred pixels go to private memory first (kernels/pointwise.cl LN_COPY): 10-20%
    # faster on PoCL (AVX2) than centring each value in the product; a GPU would spill them
    copy = net.device == "cpu" and src.c_stored <= COPY_MAX_CHANNELS
    defines = {**pointwise._defines(net, i, dst, src), "ACT": ACT_CODES[conv.activation],
               "LNORM": 1, "LC": src.c, "LN_EPS": f"{float(ln.eps)!r}f", "NB": nb, "LN_COPY": int(copy)}
    kp = defines["KP"]
    w, b = folded_params(ln_params, conv_params)
    weight = np.zeros((src.c_stored, kp), np.float32)
    weight[:src.c, :dst.c] = w.T
    bias = np.zeros(kp, np.float32)
    bias[:dst.c] = b
    args = (net.activations[net.net.sources(l)[0] + 1],
            net.upload(weight, f"{conv.name} weights ({ln.name} folded in)"),
            net.upload(bias, f"{conv.name} bias ({ln.name} folded in)"), net.activations[i + 1])
    return LayerNormGemmOp(bare(net.ops[i]), pointwise._launch(net, i, defines), args,
                           step_name("layernorm+pointwise 1x1", conv.activation))


def errors(net, l: int, i: int, forms: dict, ln_params: dict, conv_params: dict) -> dict:
    """Each form's (a list of ops: the pair's work) relative L2 error against the pair in float64 on
    check_input(); the buffers are left as prepare made them."""
    ln, conv = net.net.layers[l], net.net.layers[i]
    src = net.input_layout(l)
    x = check_input(src.canonical_shape)
    ref = reference(x, ln_params, conv_params, ln.eps, conv.activation)
    return pair_errors(net, l, i, forms, x, ref)


class FusesLayerNorms:
    """A VectorisedNet mixin: fuse_layernorms() folds each layernorm into the 1x1 after it
    where `fuse_layernorm` says so (module docstring)."""

    fuse_layernorm = "measured"

    def fuse_layernorms(self, ops: list) -> None:
        fused, kept, records = {}, {}, {}
        for i, conv in enumerate(self.net.layers):
            l, why = fusable(self.net, i)
            if l is None:
                continue
            ln = self.net.layers[l]
            if self.forms.fuse_layernorm == "never":
                kept[ln.name] = "its own kernel: fusing turned off (fuse_layernorm='never')"
                continue
            if not why and self.input_layout(l).is_view:
                why = "its input is a slice of a concatenation's buffer (the 1x1 reads whole pixels)"
            if not why and i in getattr(self, "residual_folds", {}):
                why = f"{conv.name} has its add folded into its epilogue"
            if not why and ops[i] is not self.ops[i]:
                why = f"{conv.name} is already folded into another kernel"
            if why:
                kept[ln.name] = f"its own kernel: {why}"
                continue
            ln_params, conv_params = layer_params(self.net, self._weights, l), layer_params(self.net, self._weights, i)
            own = [ops[l], ops[i]]
            candidates, owned = {}, {}
            for nb in sorted({min(b, blocks(self, i)) for b in BLOCKS["cpu" if self.device == "cpu" else "gpu"]}):
                first = len(self.buffers)
                candidates[label(nb)] = build(self, l, i, ln_params, conv_params, nb)
                owned[label(nb)] = self.buffers[first:]
            err = errors(self, l, i, {OWN: [bare(o) for o in own], **{k: [op] for k, op in candidates.items()}},
                         ln_params, conv_params)
            fold = choose(self, ops, i, own, candidates, owned, err, {},
                          lambda: Folded(ops[l]), self.forms.fuse_layernorm, conv.name, MAX_REL_L2)
            records[ln.name] = fold.record
            if fold.best == OWN:
                kept[ln.name] = fold.kept(conv.name)
                continue
            ops[l], ops[i] = fold.forms[fold.best]
            fused[ln.name] = (f"into {conv.name}'s blocked 1x1 ({fold.best}: scale and shift in its weights, each "
                              f"token's mean and 1/std in its kernel{fold.timed()})")
        self.config["layernorm_fused"] = fused
        if kept:
            self.config["layernorm_not_fused"] = kept
        if records:
            self.config["layernorm"] = records
