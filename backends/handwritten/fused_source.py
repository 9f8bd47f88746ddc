"""OpenCL C for `fused`, written per net: the whole net as one kernel, one
work-group per image, activations in local memory.

An image's activations are canonical C, H, W arrays in one local array: each
layer's output has its place there from the layer that writes it to the last
that reads it, and a place is used again once it is free (`plan`), so a
residual branch or a transformer's block fits as a chain does.  The first
layers read the image from global memory, the last writes its output there.
Each layer is a loop in which the work-items of the group share the layer's
outputs (output o, o + LSZ, ...), then a barrier; a layer norm and an
attention first work out per-pixel figures (means, scores) into a scratch
place of their own.  Weights stay in global memory (read-only, and on a GPU
in its caches).  Shapes are constants of the source, so the compiler unrolls
what it can.

Index arithmetic that divides is unsigned: LLVM then needs no `freeze`
before splitting a division from its remainder, an instruction Oclgrind's
uninitialised-value check cannot run.
"""
from __future__ import annotations

from kernels import expand_includes

ACTIVATION = {"none": "{0}", "relu": "relu({0})", "sigmoid": "sigmoid({0})", "relu6": "relu6({0})",
              "tanh": "tanh({0})", "hardsigmoid": "hardsigmoid({0})", "hardswish": "({0}) * hardsigmoid({0})",
              "silu": "({0}) * sigmoid({0})", "gelu": "gelu({0})", "gelu_tanh": "gelu_tanh({0})"}
KINDS = ("conv", "subsample", "maxpool", "dense", "add", "layernorm", "tokens", "take_token", "attention")
CHANNEL_BLOCKS = (4, 3, 2)   # a conv's output channels a work-item may compute together (net_source's `blocked`)
MIN_ITEMS = 256              # ... while its layer still gives a group of that many work-items work


def refusal(layer) -> str | None:
    """Why `fused` has no code for `layer`, or None."""
    if layer.kind not in KINDS:
        return f"no code for layer kind {layer.kind!r}"
    if layer.activation not in ACTIVATION:
        return f"no code for activation {layer.activation!r}"
    if layer.kind == "conv" and (layer.groups != 1 or tuple(layer.dilation) != (1, 1)):
        return "no code for a grouped or dilated convolution"
    if layer.kind == "maxpool" and any(layer.padding):
        return "no code for a padded max pool"
    if layer.kind == "attention" and (layer.window != (0, 0) or any(layer.shift) or layer.grid
                                      or layer.position_bias or layer.cosine):
        return "no code for windowed, shifted, grid, biased or cosine attention (only the whole map's)"
    return None


def _scratch(layer, in_shape) -> int:
    """Floats of local memory a layer needs for itself while it runs."""
    c, h, w = _chw(in_shape)
    if layer.kind == "layernorm":
        return 2 * h * w                       # each pixel's mean and 1/std
    if layer.kind == "attention":
        return layer.heads * (h * w) ** 2     # each head's scores, then its weights
    return 0


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _chw(shape) -> tuple[int, int, int]:
    return (shape[0], shape[1], shape[2]) if len(shape) == 3 else (shape[0], 1, 1)


def channel_block(layer, out_shape, items: int = MIN_ITEMS) -> int:
    """Output channels a work-item of a conv computes together (each input value it loads then serves that many
    multiply-adds): the most of CHANNEL_BLOCKS that divides the channels and leaves the group `items` work at
    least, else 1."""
    k, oh, ow = _chw(out_shape)
    return next((g for g in CHANNEL_BLOCKS if k % g == 0 and k // g * oh * ow >= items), 1)


def layer_block(layer, in_shape, out_shape, params: list[str], srcs: list[str], dst: str, scratch: str = "",
                block: int = 1) -> str:
    """One layer as a loop over its outputs: `srcs` (the first named `in`, each `in0`, `in1`...) and `dst`
    the pointers (with their address space) to this image's inputs and output; `scratch` the local pointer
    `sc` to the layer's own scratch place, where it needs one; `params` the kernel arguments holding its
    parameters; `block`: a conv's output channels a work-item computes together (channel_block)."""
    c, h, w = _chw(in_shape)
    k, oh, ow = _chw(out_shape)
    act = ACTIVATION[layer.activation]
    pointers = "".join(f"        {p};\n" for p in (*srcs, dst, scratch) if p)
    first = "        __local const float *in = in0;\n" if srcs[0].startswith("__local") else \
        "        __global const float *in = in0;\n"
    head = (f"    {{   // {layer.name}: {layer.kind} {'x'.join(map(str, in_shape))} -> {'x'.join(map(str, out_shape))}\n"
            + pointers + first)
    if layer.kind in ("layernorm", "attention"):
        return head + _two_phase(layer, c, h * w, params, act) + "    }\n"
    if layer.kind == "conv":
        return head + _conv_block(layer, (c, h, w), (k, oh, ow), params, act, block) + "        }\n    }\n"
    head += f"        for (uint o = lid; o < {_size(out_shape)}u; o += LSZ) {{\n"
    where = (f"            const uint ch = o / {oh * ow}u, r = o - ch * {oh * ow}u;\n"
             f"            const uint oy = r / {ow}u, ox = r - oy * {ow}u;\n")
    if layer.kind in ("subsample", "maxpool"):
        (fh, fw), (sh, sw) = layer.kernel, layer.stride
        base = f"in[(ch * {h}u + oy * {sh}u + fy) * {w}u + ox * {sw}u + fx]"
        if layer.kind == "subsample":
            first, step = "0.0f", f"v += {base};"
            result = f"v * ({params[0]}[ch] / {fh * fw}.0f) + {params[1]}[ch]"
        else:
            first, step = f"in[(ch * {h}u + oy * {sh}u) * {w}u + ox * {sw}u]", f"v = max_keep_nan(v, {base});"
            result = "v"
        body = (where +
                f"            float v = {first};\n"
                f"            for (uint fy = 0; fy < {fh}u; fy++)\n"
                f"                for (uint fx = 0; fx < {fw}u; fx++)\n"
                f"                    {step}\n"
                f"            out[o] = {act.format(result)};\n")
    elif layer.kind == "dense":
        n_in, n_out = _size(in_shape), _size(out_shape)
        body = (f"            float acc = {params[1]}[o];\n"
                f"            for (uint i = 0; i < {n_in}u; i++)\n"
                f"                acc += in[i] * {params[0]}[i * {n_out}u + o];\n"
                f"            out[o] = {act.format('acc')};\n")
    elif layer.kind == "add":
        total = " + ".join(f"in{j}[o]" for j in range(len(srcs)))
        body = f"            out[o] = {act.format(total)};\n"
    elif layer.kind == "tokens":   # (C, H, W) -> (C, T, 1): the class token first, then the pixels row by row
        t, cls = oh, layer.class_token
        pixel = f"in[ch * {h * w}u + t - {int(cls)}u]"
        value = f"(t == 0u ? {params[0]}[ch] : {pixel})" if cls else pixel
        pos = f" + {params[-1]}[o]" if layer.position else ""
        body = (f"            const uint ch = o / {t}u, t = o - ch * {t}u;\n"
                f"            out[o] = {act.format(value + pos)};\n")
    elif layer.kind == "take_token":   # (C, T, 1) -> (C, 1, 1)
        body = f"            out[o] = {act.format(f'in[o * {h}u + {layer.index}u]')};\n"
    else:
        raise ValueError(f"fused: no code for layer kind {layer.kind!r}")
    return head + body + "        }\n    }\n"


def _conv_block(layer, in_chw, out_chw, params: list[str], act: str, g: int) -> str:
    """A conv's loop with `g` output channels a work-item (1: one): item o is channel block cb = o / (OH * OW)
    and pixel r; the input value of each tap is loaded once for the g multiply-adds."""
    (c, h, w), (k, oh, ow) = in_chw, out_chw
    (fh, fw), (sh, sw), (ph, pw) = layer.kernel, layer.stride, layer.pad
    # unpadded, every tap of an output lies inside the input (out_shape rounds down): no checks to run
    inside = not any(layer.padding)
    weight = f"{params[0]}[(((cb * {g}u + {{j}}u) * {c}u + ci) * {fh}u + fy) * {fw}u + fx]"
    return (f"        for (uint o = lid; o < {k // g * oh * ow}u; o += LSZ) {{\n"
            f"            const uint cb = o / {oh * ow}u, r = o - cb * {oh * ow}u;\n"
            f"            const uint oy = r / {ow}u, ox = r - oy * {ow}u;\n"
            + "".join(f"            float acc{j} = {params[1]}[cb * {g}u + {j}u];\n" for j in range(g)) +
            f"            for (uint ci = 0; ci < {c}u; ci++)\n"
            f"                for (uint fy = 0; fy < {fh}u; fy++) {{\n"
            f"                    const int iy = (int)(oy * {sh}u + fy) - {ph};\n"
            + ("" if inside else f"                    if (iy < 0 || iy >= {h}) continue;\n") +
            f"                    for (uint fx = 0; fx < {fw}u; fx++) {{\n"
            f"                        const int ix = (int)(ox * {sw}u + fx) - {pw};\n"
            + ("" if inside else f"                        if (ix < 0 || ix >= {w}) continue;\n") +
            f"                        const float v = in[(ci * {h}u + (uint)iy) * {w}u + (uint)ix];\n"
            + "".join(f"                        acc{j} += v * {weight.format(j=j)};\n" for j in range(g)) +
            f"                    }}\n                }}\n"
            + "".join(f"            out[(cb * {g}u + {j}u) * {oh * ow}u + r] = {act.format(f'acc{j}')};\n"
                      for j in range(g)))


def _two_phase(layer, c: int, p: int, params: list[str], act: str) -> str:
    """A layer norm or an attention over the P pixels of a (C, P) map: its per-pixel figures into `sc`, a
    barrier, then the outputs (an attention: scores, softmax, weighted sums, a barrier between each)."""
    if layer.kind == "layernorm":
        return (f"        for (uint q = lid; q < {p}u; q += LSZ) {{\n"
                f"            float s = 0.0f;\n"
                f"            for (uint ch = 0; ch < {c}u; ch++) s += in[ch * {p}u + q];\n"
                f"            const float mean = s / {c}.0f;\n"
                f"            float v = 0.0f;\n"
                f"            for (uint ch = 0; ch < {c}u; ch++) {{ const float d = in[ch * {p}u + q] - mean; v += d * d; }}\n"
                f"            sc[q] = mean;\n"
                f"            sc[{p}u + q] = rsqrt(v / {c}.0f + {float(layer.eps)!r}f);\n"
                f"        }}\n"
                f"        barrier(CLK_LOCAL_MEM_FENCE);\n"
                f"        for (uint o = lid; o < {c * p}u; o += LSZ) {{\n"
                f"            const uint ch = o / {p}u, q = o - ch * {p}u;\n"
                f"            const float y = (in[o] - sc[q]) * sc[{p}u + q] * {params[0]}[ch] + {params[1]}[ch];\n"
                f"            out[o] = {act.format('y')};\n"
                f"        }}\n")
    heads, cq = layer.heads, c // 3                    # the input holds queries, keys, values: 3 x C channels
    dh = cq // heads
    scale = layer.scale or 1.0 / dh ** 0.5
    return (f"        for (uint e = lid; e < {heads * p * p}u; e += LSZ) {{   // scores: head, query, key\n"
            f"            const uint hd = e / {p * p}u, r = e - hd * {p * p}u, i = r / {p}u, j = r - i * {p}u;\n"
            f"            float s = 0.0f;\n"
            f"            for (uint d = 0; d < {dh}u; d++)\n"
            f"                s += in[(hd * {dh}u + d) * {p}u + i] * in[({cq}u + hd * {dh}u + d) * {p}u + j];\n"
            f"            sc[e] = s * {scale!r}f;\n"
            f"        }}\n"
            f"        barrier(CLK_LOCAL_MEM_FENCE);\n"
            f"        for (uint row = lid; row < {heads * p}u; row += LSZ) {{   // softmax over the keys\n"
            f"            __local float *r = sc + row * {p}u;\n"
            f"            float m = r[0];\n"
            f"            for (uint j = 1; j < {p}u; j++) m = fmax(m, r[j]);\n"
            f"            float sum = 0.0f;\n"
            f"            for (uint j = 0; j < {p}u; j++) {{ r[j] = exp(r[j] - m); sum += r[j]; }}\n"
            f"            const float inv = 1.0f / sum;\n"
            f"            for (uint j = 0; j < {p}u; j++) r[j] *= inv;\n"
            f"        }}\n"
            f"        barrier(CLK_LOCAL_MEM_FENCE);\n"
            f"        for (uint o = lid; o < {cq * p}u; o += LSZ) {{   // the values' weighted sums\n"
            f"            const uint ch = o / {p}u, i = o - ch * {p}u;\n"
            f"            __local const float *r = sc + ((ch / {dh}u) * {p}u + i) * {p}u;\n"
            f"            float acc = 0.0f;\n"
            f"            for (uint j = 0; j < {p}u; j++) acc += r[j] * in[({2 * cq}u + ch) * {p}u + j];\n"
            f"            out[o] = {act.format('acc')};\n"
            f"        }}\n")


def _params(index: int, layer, in_shape) -> list[str]:
    return [f"p{index}_{name}" for name in layer.param_shapes(in_shape)]


def _signature(name: str, blocks_params: list[list[str]], inputs: int = 1) -> str:
    xs = ["x"] if inputs == 1 else [f"x{j}" for j in range(inputs)]
    args = [f"__global const float * restrict {x}" for x in xs] + ["__global float * restrict y"]
    args += [f"__global const float * restrict {p}" for ps in blocks_params for p in ps]
    return f"__kernel void {name}({', '.join(args)})"


PREAMBLE = ('#define ACT 0   // common.h wants one; each layer names its own activation\n'
            '#include "common.h"\n\n')


def plan(net) -> tuple[dict, int]:
    """Where each layer's output (but the last's, which goes to global memory) and each layer's scratch
    live in the one local array: {("out" | "scratch", i): offset}, and the array's floats.  A place is
    held from the layer that writes it to the last that reads it, and given again once free (first fit)."""
    n = len(net.layers)
    last_read = {i: max((j for j in range(n) if i in net.sources(j)), default=i) for i in range(n - 1)}
    wanted = []   # (first layer, last layer, floats, key), in the order the layers write them
    for i, layer in enumerate(net.layers):
        need = _scratch(layer, net.in_shape(i))
        if need:
            wanted.append((i, i, need, ("scratch", i)))
        if i < n - 1:
            wanted.append((i, last_read[i], _size(net.out_shape(i)), ("out", i)))
    places, held, top = {}, [], 0   # held: (offset, floats, last layer)
    for first, last, size, key in wanted:
        held = [h for h in held if h[2] >= first]   # free once its last reader has run
        at = 0
        for offset, floats, _ in sorted(held):
            if at + size <= offset:
                break
            at = max(at, offset + floats)
        places[key] = at
        held.append((at, size, last))
        top = max(top, at + size)
    return places, top


def local_floats(net) -> int:
    """Floats of the local array one image's activations and scratch need (`plan`)."""
    return plan(net)[1]


def _source_pointers(net, i: int, places: dict, n_in: int) -> list[str]:
    out = []
    for j, s in enumerate(net.sources(i)):
        if s < 0:
            out.append(f"__global const float *in{j} = x + img * {n_in}u")
        else:
            out.append(f"__local const float *in{j} = lm + {places[('out', s)]}u")
    return out


def net_source(net, blocked: bool = False) -> tuple[str, list[str]]:
    """The whole net as kernel `net_fused`, and the parameter names its
    arguments take after x and y, in order ('<layer>.<param>'); `blocked`: each conv's work-items compute
    channel_block() output channels each."""
    places, floats = plan(net)
    layers = net.layers
    params = [_params(i, layer, net.in_shape(i)) for i, layer in enumerate(layers)]
    n_in, n_out = _size(net.in_shape(0)), _size(net.output_shape)
    body = ["    const uint lid = get_local_id(0), img = get_group_id(0);\n",
            f"    __local float lm[{max(floats, 1)}];\n"]
    for i, layer in enumerate(layers):
        dst = (f"__global float *out = y + img * {n_out}u" if i == len(layers) - 1
               else f"__local float *out = lm + {places[('out', i)]}u")
        scratch = f"__local float *sc = lm + {places[('scratch', i)]}u" if ("scratch", i) in places else ""
        block = channel_block(layer, net.out_shape(i)) if blocked and layer.kind == "conv" else 1
        body.append(layer_block(layer, net.in_shape(i), net.out_shape(i), params[i],
                                _source_pointers(net, i, places, n_in), dst, scratch, block))
        if i < len(layers) - 1:
            body.append("    barrier(CLK_LOCAL_MEM_FENCE);\n")
    names = [f"{layer.name}.{p.split('_', 1)[1]}" for layer, ps in zip(layers, params) for p in ps]
    return expand_includes(PREAMBLE + _signature("net_fused", params) + "\n{\n" + "".join(body) + "}\n"), names


def layer_source(net, index: int) -> tuple[str, list[str]]:
    """Layer `index` alone as kernel `layer_fused`: global memory in (x0, x1... for each input) and out
    (for the layer-wise checks and per-layer timings), and its parameter names."""
    layer = net.layers[index]
    params = _params(index, layer, net.in_shape(index))
    shapes = net.in_shapes(index)
    n_out = _size(net.out_shape(index))
    need = _scratch(layer, net.in_shape(index))
    srcs = [f"__global const float *in{j} = x{j if len(shapes) > 1 else ''} + img * {_size(shape)}u"
            for j, shape in enumerate(shapes)]
    body = ("    const uint lid = get_local_id(0), img = get_group_id(0);\n"
            + (f"    __local float lm[{need}];\n" if need else "")
            + layer_block(layer, net.in_shape(index), net.out_shape(index), params, srcs,
                          f"__global float *out = y + img * {n_out}u",
                          "__local float *sc = lm" if need else ""))
    names = [f"{layer.name}.{p.split('_', 1)[1]}" for p in params]
    return expand_includes(PREAMBLE + _signature("layer_fused", [params], len(shapes)) + "\n{\n" + body + "}\n"), names
