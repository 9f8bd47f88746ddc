"""The CLBlast problems a net poses: each routine call the CLBlast backends
make, with the sizes they make it with, as one typed value.  The tuning
(search.py) is done per problem and the backends look their parameters up
by it, so a layer runs with what was found for exactly its call.

Sizes are row-major, as the backends call pyclblast:

  gemm      C (m x n) = A (m x k) B (k x n); with batch > 1 one product per
            image, A shared (stride 0), B and C one per image (the conv's
            im2col GEMM: W (K x C*KH*KW) col (C*KH*KW x OH*OW); dense at
            batch > 1: X (N x D) W (D x F), batch 1)
  gemv      y (rows) = W x, W stored (rows x cols), or stored (cols x rows)
            and transposed (the study's dense layout); a global average
            pool: the (N*C x H*W) input times a ones vector
  convgemm  xCONVGEMM of an NCHW batch: channels, height, width, kernel,
            pad, stride, kernels out, batch
  xgemm     the Xgemm kernel alone, as CLBlast's xgemm tuner runs it: column
            major, C (m x n) = A (m x k) B^T with B stored (n x k), every size
            a multiple of any configuration's tile, so the routine runs no pad
            or transpose kernel around it (`compare tune --as-tuner`: our
            search on the tuner's own terms, to compare with its figures)

A grouped convolution is N*G GEMMs of one group each (conv_plan.py), so
batch N*G; its xCONVGEMM is one call per image and group (batch 1, the
group's channels).  An asymmetric padding is padded explicitly first, so
its xCONVGEMM reads the padded size with pad 0.  A chain's layers (groups
1, symmetric padding) pose the same problems, with the same keys, as before.
"""
from __future__ import annotations

from dataclasses import dataclass

from .conv_plan import ConvPlan

GEMM, GEMV, CONVGEMM, XGEMM_ALONE = "gemm", "gemv", "convgemm", "xgemm"
TUNERS = {GEMM: ("xgemm_direct", "xgemm"), GEMV: ("xgemv",), CONVGEMM: ("xconvgemm",), XGEMM_ALONE: ("xgemm",)}
SIZES = {GEMM: 4, GEMV: 3, CONVGEMM: 11, XGEMM_ALONE: 3}
TILE_MULTIPLE = 128   # every MWG, NWG and KWG x KREG of xgemm's default search divides it


@dataclass(frozen=True)
class Problem:
    routine: str
    sizes: tuple[int, ...]

    @property
    def key(self) -> str:
        """A name a person can read and a file can carry."""
        s = self.sizes
        if self.routine == GEMM:
            return f"gemm {s[0]}x{s[1]}x{s[2]}" + (f" batch {s[3]}" if s[3] > 1 else "")
        if self.routine == GEMV:
            return f"gemv {s[0]}x{s[1]}" + (" transposed" if s[2] else "")
        if self.routine == XGEMM_ALONE:
            return f"xgemm alone {s[0]}x{s[1]}x{s[2]}"
        c, h, w, kh, kw, ph, pw, sh, sw, k, n = s
        return f"convgemm {c}x{h}x{w} k{kh}x{kw} p{ph}x{pw} s{sh}x{sw} out {k} batch {n}"

    @property
    def tuners(self) -> tuple[str, ...]:
        return TUNERS[self.routine]

    @property
    def flops(self) -> int:
        s = self.sizes
        if self.routine == GEMM:
            return 2 * s[0] * s[1] * s[2] * s[3]
        if self.routine == XGEMM_ALONE:
            return 2 * s[0] * s[1] * s[2]
        if self.routine == GEMV:
            return 2 * s[0] * s[1]
        c, h, w, kh, kw, ph, pw, sh, sw, k, n = s
        oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
        return 2 * n * k * oh * ow * c * kh * kw

    def to_json(self) -> dict:
        return {"routine": self.routine, "sizes": list(self.sizes)}

    @classmethod
    def from_json(cls, data: dict) -> "Problem":
        routine, sizes = data["routine"], tuple(int(v) for v in data["sizes"])
        if routine not in TUNERS or len(sizes) != SIZES[routine]:
            raise ValueError(f"not a CLBlast problem: {data!r}")
        return cls(routine, sizes)


def gemm(m: int, n: int, k: int, batch: int = 1) -> Problem:
    return Problem(GEMM, (int(m), int(n), int(k), int(batch)))


def xgemm_alone(problem: Problem) -> Problem:
    """A batch-1 im2col GEMM as the xgemm tuner would run it: m the output
    pixels (the routine problem's n), n the filters, every size rounded up to
    TILE_MULTIPLE (conv3_2 of VGG-16: 3200 x 256 x 2304)."""
    filters, pixels, k, _ = problem.sizes
    up = (lambda v: -(-v // TILE_MULTIPLE) * TILE_MULTIPLE)
    return Problem(XGEMM_ALONE, (up(pixels), up(filters), up(k)))


def gemv(rows: int, cols: int, transposed: bool) -> Problem:
    return Problem(GEMV, (int(rows), int(cols), int(bool(transposed))))


def convgemm(batch: int, in_shape, out_channels: int, kernel, pad, stride) -> Problem:
    c, h, w = in_shape
    return Problem(CONVGEMM, (int(c), int(h), int(w), int(kernel[0]), int(kernel[1]), int(pad[0]), int(pad[1]),
                              int(stride[0]), int(stride[1]), int(out_channels), int(batch)))


def conv_gemm(batch: int, in_shape, out_shape, kernel, channels_in=None) -> Problem:
    """The im2col GEMM of a convolution: W (K x C*KH*KW) col (C*KH*KW x OH*OW) per image."""
    c = in_shape[0] if channels_in is None else channels_in
    return gemm(out_shape[0], out_shape[1] * out_shape[2], c * kernel[0] * kernel[1], batch)


def plan_gemm(plan) -> Problem:
    """The GEMMs of a convolution's plan (conv_plan.ConvPlan): one per image and group."""
    return gemm(plan.kg, plan.out_plane, plan.ckk, plan.gemms)


def plan_convgemm(plan) -> Problem:
    """Its xCONVGEMM: the whole batch in one call, or one call per image and group."""
    shape = (plan.cg, plan.height, plan.width)
    batch = plan.batch if plan.groups == 1 else 1
    return convgemm(batch, shape, plan.kg, plan.kernel, plan.pad, plan.stride)


def plan_convgemm_calls(plan) -> int:
    """How many xCONVGEMM calls the conv makes per pass: one, or one per image and group."""
    return 1 if plan.groups == 1 else plan.gemms


def pooling_gemv(batch: int, in_shape) -> Problem:
    """A global average pool as xGEMV: the (N*C x H*W) input times a ones vector."""
    c, h, w = in_shape
    return gemv(batch * c, h * w, False)


def dense_gemm(batch: int, in_features: int, out_features: int) -> Problem:
    return gemm(batch, out_features, in_features, 1)


def _features(shape) -> int:
    d = 1
    for v in shape:
        d *= int(v)
    return d


def layer_compositions(net, batch: int, i: int) -> list[dict[Problem, int]]:
    """The ways the CLBlast backends may compose layer i, each as the calls one pass makes of its problems:
    a conv's im2col GEMMs (a grouped conv's are one batched call) or its xCONVGEMM (once per image and
    group when grouped); a batch-1 dense layer's GEMV with the weights either way round."""
    layer, src, dst = net.layers[i], net.in_shape(i), net.out_shape(i)
    if layer.kind == "conv":
        plan = ConvPlan.of(batch, src, dst, layer.kernel, layer.stride, layer.padding, layer.groups, layer.dilation)
        if layer.dilation != (1, 1):   # xCONVGEMM's problem key has no dilation: CLBlast's database runs it
            return [{plan_gemm(plan): 1}]
        return [{plan_gemm(plan): 1}, {plan_convgemm(plan): plan_convgemm_calls(plan)}]
    if layer.kind == "mul" and tuple(net.in_shapes(i)[1]) != tuple(src):   # a gate: N*C GEMMs 1 x H*W x 1
        return [{gemm(1, src[1] * src[2], 1, batch * src[0]): 1}]
    if layer.kind == "global_avgpool":
        return [{pooling_gemv(batch, src): 1}]
    if layer.kind == "subsample":   # the study's sparse convolution, C channels in and out
        return [{conv_gemm(batch, src, dst, layer.kernel): 1},
                {convgemm(batch, src, src[0], layer.kernel, (0, 0), layer.stride): 1}]
    if layer.kind == "dense" and batch == 1:
        return [{gemv(dst[0], _features(src), True): 1}, {gemv(dst[0], _features(src), False): 1}]
    if layer.kind == "dense":
        return [{dense_gemm(batch, _features(src), dst[0]): 1}]
    return []


def layer_calls(net, batch: int, i: int) -> list[tuple[Problem, int]]:
    """Every call the CLBlast backends may make for layer i (each composition), with how many times one
    pass makes it."""
    return [(p, n) for way in layer_compositions(net, batch, i) for p, n in way.items()]


def layer_problems(net, batch: int, i: int) -> list[Problem]:
    """Every call the CLBlast backends may make for layer i (each composition)."""
    return [p for p, _ in layer_calls(net, batch, i)]


def net_problems(net, batch: int) -> dict[Problem, list[str]]:
    """The distinct problems of a net, each with the layers that pose it, in layer order."""
    found: dict[Problem, list[str]] = {}
    for i, layer in enumerate(net.layers):
        for p in layer_problems(net, batch, i):
            found.setdefault(p, []).append(layer.name)
    return found


def net_calls(net, batch: int) -> dict[Problem, int]:
    """How many calls of each of the net's problems one forward pass makes (what the net pays for it),
    summed over the layers posing it, in layer order."""
    calls: dict[Problem, int] = {}
    for i in range(len(net.layers)):
        for p, n in layer_calls(net, batch, i):
            calls[p] = calls.get(p, 0) + n
    return calls


def net_compositions(net, batch: int) -> list[list[dict[Problem, int]]]:
    """Per layer that makes CLBlast calls, its compositions (layer_compositions), in layer order."""
    return [ways for i in range(len(net.layers)) if (ways := layer_compositions(net, batch, i))]


def covering(layers: list[list[dict[Problem, int]]], calls: dict[Problem, int]) -> list[list[dict[Problem, int]]]:
    """`layers`, and each problem of `calls` that no layer poses as a layer of its own (one composition)."""
    posed = {p for ways in layers for way in ways for p in way}
    return list(layers) + [[{p: n}] for p, n in calls.items() if p not in posed]


def cheapest_costs(layers: list[list[dict[Problem, int]]], time_of) -> dict[Problem, float]:
    """What each problem costs a pass of CLBlast at its best with its database (ms), taking in each layer the
    composition whose calls cost least (time_of(problem) x calls; summed over the layers); a problem of no
    layer's cheapest composition costs 0.  A layer with a problem time_of does not know is left out."""
    costs: dict[Problem, float] = {}
    for ways in layers:
        priced = []
        for way in ways:
            times = {p: time_of(p) for p in way}
            if any(t is None for t in times.values()):
                break
            priced.append((sum(times[p] * n for p, n in way.items()), way, times))
        else:
            if not priced:
                continue
            _, cheapest, times = min(priced, key=lambda x: x[0])
            for way in ways:
                for p in way:
                    costs.setdefault(p, 0.0)
            for p, n in cheapest.items():
                costs[p] += times[p] * n
    return costs
