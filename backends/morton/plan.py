"""The `morton` backend's plan, worked out on the host before anything is
allocated: each convolution's shapes and its steps (study, section 7.3.2),
which buffer of the two each step reads and writes, which zeroing steps
must run, and how large the two shared buffers must be.

A convolution is the study's 8 steps, 4 of them zeroing:

    1 zero   2 pad   3 zero   4 im2col   5 zero   6 morton-gemm   7 zero   8 unpad

Zeroing before a step exists so that the step's output buffer holds no
NaN poison or stale values where the *next* step reads.  So the zero
before a step runs exactly when the next step reads an element this step
does not write (`unwritten` below counts them), and then it zeroes the
region the next step reads.  Per step:

  pad          writes the H x W interior of each (H+2ph) x (W+2pw) map;
               im2col reads the border too whenever ph or pw > 0.
               With no padding the pad step itself is skipped: im2col
               reads the layer's input as it is.
  im2col       writes L x N*OH*OW of the L_pad x N_pad matrix B (C_4_2_C);
               the GEMM reads all of B (its dot products run over the
               padding rows, so they must be 0, never NaN: NaN*0 = NaN).
  morton-gemm  writes all of its M_pad x N_pad output; unpad reads a part.
  unpad        writes the whole N x K x OH x OW output the next layer reads.
"""
from __future__ import annotations

from dataclasses import dataclass, field

GEMM_WORK_GROUP = (4, 16)   # the study's best: 4 row pairs x 16 column pairs -> C in 8 x 32 blocks
INPUT = 2                   # the net's input buffer; 0 and 1 are the two shared buffers


def other(buffer: int) -> int:
    """The shared buffer a step writes when it reads `buffer`."""
    return 0 if buffer == INPUT else 1 - buffer


def round_up(n: int, m: int) -> int:
    return -(-n // m) * m


@dataclass(frozen=True)
class ConvShape:
    """One convolution of a whole batch as a Morton GEMM C = A B:
    A the filters (K x L, L = C*kh*kw) in R_2_4_R, B the batch's im2col
    (L x N*OH*OW, image n in columns n*OH*OW ..) in C_4_2_C, C row-major."""

    batch: int
    channels: int
    height: int
    width: int
    filters: int
    kernel: tuple
    stride: tuple
    pad: tuple
    work_group: tuple = GEMM_WORK_GROUP   # GEMM work-group (row pairs, column pairs)

    @property
    def padded_hw(self) -> tuple[int, int]:
        return self.height + 2 * self.pad[0], self.width + 2 * self.pad[1]

    @property
    def out_hw(self) -> tuple[int, int]:
        hp, wp = self.padded_hw
        return (hp - self.kernel[0]) // self.stride[0] + 1, (wp - self.kernel[1]) // self.stride[1] + 1

    @property
    def depth(self) -> int:          # L: rows of B, the GEMM's common dimension
        return self.channels * self.kernel[0] * self.kernel[1]

    @property
    def depth_pad(self) -> int:      # float4 quadruplets along L
        return round_up(self.depth, 4)

    @property
    def columns(self) -> int:        # columns of B and C: every output pixel of every image
        oh, ow = self.out_hw
        return self.batch * oh * ow

    @property
    def columns_pad(self) -> int:    # each work-group computes 2 * work_group[1] columns
        return round_up(self.columns, 2 * self.work_group[1])

    @property
    def filters_pad(self) -> int:    # ... and 2 * work_group[0] rows
        return round_up(self.filters, 2 * self.work_group[0])

    @property
    def in_floats(self) -> int:
        return self.batch * self.channels * self.height * self.width

    @property
    def padded_floats(self) -> int:
        hp, wp = self.padded_hw
        return self.batch * self.channels * hp * wp

    @property
    def out_floats(self) -> int:
        return self.filters * self.columns


@dataclass
class Step:
    """One of the study's non-zeroing steps, and the zeroing before it."""

    name: str          # pad, im2col, morton-gemm, unpad
    src: int           # buffer read: 0 or 1 (shared) or INPUT
    dst: int           # buffer written: 0 or 1
    writes: int        # floats written
    reads_next: int    # floats of dst the next step reads: the prefix a zero step clears
    unwritten: int     # elements the next step reads that this step does not write (for pad,
    #                    the whole border: with stride, some of it may go unread, but
    #                    with ph or pw > 0 the first window always reads some)

    @property
    def zero_first(self) -> bool:
        return self.unwritten > 0


def conv_steps(shape: ConvShape, src: int) -> list[Step]:
    """The steps of one convolution whose input lies in buffer `src`."""
    s = shape
    stages = []
    if any(s.pad):
        stages.append(("pad", s.in_floats, s.padded_floats, s.padded_floats - s.in_floats))
    b_floats = s.depth_pad * s.columns_pad
    stages.append(("im2col", s.depth * s.columns, b_floats, b_floats - s.depth * s.columns))
    stages.append(("morton-gemm", s.filters_pad * s.columns_pad, s.filters_pad * s.columns_pad, 0))
    stages.append(("unpad", s.out_floats, s.out_floats, 0))
    steps = []
    for name, writes, reads_next, unwritten in stages:
        steps.append(Step(name, src, other(src), writes, reads_next, unwritten))
        src = other(src)
    return steps


@dataclass
class LayerPlan:
    name: str
    kind: str
    src: int
    dst: int
    shape: ConvShape | None = None
    steps: list = field(default_factory=list)

    def step_names(self) -> list[str]:
        """A convolution's steps in order, the zero steps that run included."""
        names = []
        for st in self.steps:
            names += ["zero", st.name] if st.zero_first else [st.name]
        return names

    def describe(self) -> dict:
        if self.shape is None:
            return {"buffers": f"{_buffer_name(self.src)} -> {_buffer_name(self.dst)}"}
        study_step = {"pad": 1, "im2col": 3, "morton-gemm": 5, "unpad": 7}   # the study's step numbers
        run = [study_step[st.name] for st in self.steps if st.zero_first]
        return {"zero_steps_run": run,
                "zero_steps_skipped": [z for z in (1, 3, 5, 7) if z not in run],
                "pad_step": "runs" if self.steps[0].name == "pad" else "skipped: no padding",
                "gemm": f"{self.shape.filters_pad} x {self.shape.depth_pad} @ "
                        f"{self.shape.depth_pad} x {self.shape.columns_pad}",
                "buffers": f"{_buffer_name(self.src)} -> {_buffer_name(self.dst)}"}


@dataclass
class NetPlan:
    layers: list
    buffer_floats: int        # each of the two buffers
    sized_by: str             # the step that needs buffer_floats


def plan_net(net, batch: int, work_group: tuple = GEMM_WORK_GROUP) -> NetPlan:
    """Where every layer's steps read and write, and the two buffers' size.
    The net's input has a buffer of its own (so loading an input writes a
    whole buffer: Oclgrind 21.10 loses track of kernel writes to a buffer
    that the host wrote only in part)."""
    src = INPUT
    largest = (0, "nothing")
    layers = []
    for i, layer in enumerate(net.layers):
        out_floats = batch * _prod(net.out_shape(i))
        if layer.kind == "conv":
            c, h, w = net.in_shape(i)
            shape = ConvShape(batch, c, h, w, layer.out_channels, tuple(layer.kernel), tuple(layer.stride),
                              tuple(layer.pad), tuple(work_group))
            steps = conv_steps(shape, src)
            assert shape.out_floats == out_floats, (layer.name, shape.out_floats, out_floats)
            plan = LayerPlan(layer.name, layer.kind, src, steps[-1].dst, shape, steps)
            for st in steps:
                largest = max(largest, (st.reads_next, f"{st.name} of {layer.name}"))
        else:
            plan = LayerPlan(layer.name, layer.kind, src, other(src))
            largest = max(largest, (out_floats, f"output of {layer.name}"))
        layers.append(plan)
        src = plan.dst
    return NetPlan(layers, largest[0], largest[1])


def _prod(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _buffer_name(buffer: int) -> str:
    return "input" if buffer == INPUT else str(buffer)
