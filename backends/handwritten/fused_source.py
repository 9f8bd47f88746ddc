"""OpenCL C for `fused`, written per net: the whole net as one kernel, one
work-group per image, activations in local memory.

An image's activations are canonical C, H, W arrays in two local buffers
used in turn (layer i reads one and writes the other), so layer i's output
is layer i+1's input with no global memory in between; the first layer
reads the image from global memory, the last writes its output there.
Each layer is a loop in which the work-items of the group share the
layer's outputs (output o, o + LSZ, ...), then a barrier.  Weights stay in
global memory (read-only, and on a GPU in its caches).  Shapes are
constants of the source, so the compiler unrolls what it can.

Index arithmetic that divides is unsigned: LLVM then needs no `freeze`
before splitting a division from its remainder, an instruction Oclgrind's
uninitialised-value check cannot run.
"""
from __future__ import annotations

from kernels import expand_includes

ACTIVATION = {"none": "{}", "relu": "relu({})", "sigmoid": "sigmoid({})"}


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _chw(shape) -> tuple[int, int, int]:
    return (shape[0], shape[1], shape[2]) if len(shape) == 3 else (shape[0], 1, 1)


def layer_block(layer, in_shape, out_shape, params: list[str], src: str, dst: str) -> str:
    """One layer as a loop over its outputs: `src`, `dst` the pointers (with
    their address space) to this image's input and output; `params` the
    kernel arguments holding its parameters."""
    c, h, w = _chw(in_shape)
    k, oh, ow = _chw(out_shape)
    act = ACTIVATION[layer.activation]
    head = (f"    {{   // {layer.name}: {layer.kind} {'x'.join(map(str, in_shape))} -> {'x'.join(map(str, out_shape))}\n"
            f"        {src};\n        {dst};\n"
            f"        for (uint o = lid; o < {_size(out_shape)}u; o += LSZ) {{\n")
    where = (f"            const uint ch = o / {oh * ow}u, r = o - ch * {oh * ow}u;\n"
             f"            const uint oy = r / {ow}u, ox = r - oy * {ow}u;\n")
    if layer.kind == "conv":
        (fh, fw), (sh, sw), (ph, pw) = layer.kernel, layer.stride, layer.pad
        body = (where +
                f"            float acc = {params[1]}[ch];\n"
                f"            for (uint ci = 0; ci < {c}u; ci++)\n"
                f"                for (uint fy = 0; fy < {fh}u; fy++) {{\n"
                f"                    const int iy = (int)(oy * {sh}u + fy) - {ph};\n"
                f"                    if (iy < 0 || iy >= {h}) continue;\n"
                f"                    for (uint fx = 0; fx < {fw}u; fx++) {{\n"
                f"                        const int ix = (int)(ox * {sw}u + fx) - {pw};\n"
                f"                        if (ix < 0 || ix >= {w}) continue;\n"
                f"                        acc += in[(ci * {h}u + (uint)iy) * {w}u + (uint)ix]"
                f" * {params[0]}[((ch * {c}u + ci) * {fh}u + fy) * {fw}u + fx];\n"
                f"                    }}\n                }}\n"
                f"            out[o] = {act.format('acc')};\n")
    elif layer.kind in ("subsample", "maxpool"):
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
    else:
        raise ValueError(f"fused: no code for layer kind {layer.kind!r}")
    return head + body + "        }\n    }\n"


def _params(index: int, layer, in_shape) -> list[str]:
    return [f"p{index}_{name}" for name in layer.param_shapes(in_shape)]


def _signature(name: str, blocks_params: list[list[str]]) -> str:
    args = ["__global const float * restrict x", "__global float * restrict y"]
    args += [f"__global const float * restrict {p}" for ps in blocks_params for p in ps]
    return f"__kernel void {name}({', '.join(args)})"


PREAMBLE = ('#define ACT 0   // common.h wants one; each layer names its own activation\n'
            '#include "common.h"\n\n')


def local_floats(net) -> tuple[int, int]:
    """Floats of the two local buffers: layer i's output lives in buffer (i + 1) % 2."""
    sizes = [0, 0]
    for i in range(len(net.layers) - 1):   # the first layer reads the image from global memory
        sizes[(i + 1) % 2] = max(sizes[(i + 1) % 2], _size(net.out_shape(i)))
    return sizes[0], sizes[1]


def net_source(net) -> tuple[str, list[str]]:
    """The whole net as kernel `net_fused`, and the parameter names its
    arguments take after x and y, in order ('<layer>.<param>')."""
    n0, n1 = local_floats(net)
    layers = net.layers
    params = [_params(i, layer, net.in_shape(i)) for i, layer in enumerate(layers)]
    n_in, n_out = _size(net.in_shape(0)), _size(net.output_shape)
    body = ["    const uint lid = get_local_id(0), img = get_group_id(0);\n",
            f"    __local float buf0[{max(n0, 1)}], buf1[{max(n1, 1)}];\n"]
    for i, layer in enumerate(layers):
        src = (f"__global const float *in = x + img * {n_in}u" if i == 0
               else f"__local const float *in = buf{i % 2}")
        dst = (f"__global float *out = y + img * {n_out}u" if i == len(layers) - 1
               else f"__local float *out = buf{(i + 1) % 2}")
        body.append(layer_block(layer, net.in_shape(i), net.out_shape(i), params[i], src, dst))
        if i < len(layers) - 1:
            body.append("    barrier(CLK_LOCAL_MEM_FENCE);\n")
    names = [f"{layer.name}.{p.split('_', 1)[1]}" for layer, ps in zip(layers, params) for p in ps]
    return expand_includes(PREAMBLE + _signature("net_fused", params) + "\n{\n" + "".join(body) + "}\n"), names


def layer_source(net, index: int) -> tuple[str, list[str]]:
    """Layer `index` alone as kernel `layer_fused`: global memory in and out
    (for the layer-wise checks and per-layer timings), and its parameter names."""
    layer = net.layers[index]
    params = _params(index, layer, net.in_shape(index))
    n_in, n_out = _size(net.in_shape(index)), _size(net.out_shape(index))
    body = ("    const uint lid = get_local_id(0), img = get_group_id(0);\n"
            + layer_block(layer, net.in_shape(index), net.out_shape(index), params,
                          f"__global const float *in = x + img * {n_in}u",
                          f"__global float *out = y + img * {n_out}u"))
    names = [f"{layer.name}.{p.split('_', 1)[1]}" for p in params]
    return expand_includes(PREAMBLE + _signature("layer_fused", [params]) + "\n{\n" + body + "}\n"), names
