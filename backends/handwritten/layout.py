"""Device-side layouts of the hand-written backends (`baseline`, `vectorised`).

Every activation buffer carries the zero padding its *consumer* needs (the
study's table 7.1: YPH/YPHT/YPW/YPWT).  A convolution with pad p therefore
reads its input with no bounds checks, and its producer writes straight into
the interior of that padded buffer.  Pooling and dense layers need no
padding, so a max-pool reads an unpadded buffer and writes one padded for
the next conv (it "keeps" VGG's padding chain) or an unpadded one before a
dense layer (it "strips" it).

The border is filled with zeros once at prepare (the interior with NaN, so an
element a kernel fails to write still shows) and no kernel ever writes it.

The net's own input and output stay canonical on the device: a staging
buffer of each, converted to and from the first and last buffers by
kernels/layout.cl inside the timed forward pass (net.py).  pack() and
unpack() here are those kernels' reference, and serve the layer-wise checks.

In a graph a buffer may have several consumers (a ResNet block's input feeds
its first conv, its projection and its add): it carries, on each side, the
widest border any of them wants, and a consumer that wants less reads from
an offset into it.  Borders are per side (top, left, bottom, right), so an
asymmetric padding costs only the rows and columns it uses.

`vectorised` also pads channels to a multiple of 4 (float4 loads); those
extra channels hold zeros too.  Dense activations are stored as C = features,
H = W = 1, so one layout class serves both.

A concatenation's input may be written by its producer straight into its
slice of the concatenation's NHWC buffer (`vectorised`: handwritten/zoo.py):
that input's layout is then a view, `c_offset` channels into pixels of
`c_pitch` stored channels, with the concatenation's border.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def round_up(n: int, multiple: int) -> int:
    return -(-int(n) // int(multiple)) * int(multiple)


@dataclass(frozen=True)
class Layout:
    """One activation buffer: logical shape (batch, c, h, w), zero border of
    pad_h rows on top, pad_w columns on the left, pad_bottom rows below and
    pad_right columns on the right (these two default to pad_h and pad_w), channels
    stored as `c_stored` (>= c), order 'nchw' or 'nhwc'.  `flat`: the
    canonical host array is (batch, c) (a dense layer's output)."""

    batch: int
    c: int
    h: int
    w: int
    pad_h: int = 0
    pad_w: int = 0
    order: str = "nchw"
    c_stored: int | None = None
    flat: bool = False
    pad_bottom: int | None = None
    pad_right: int | None = None
    c_pitch: int | None = None   # stored channels per pixel of the buffer (a view of a concatenation's: more)
    c_offset: int = 0            # the view's first channel in each pixel

    def __post_init__(self):
        if self.order not in ("nchw", "nhwc"):
            raise ValueError(f"unknown layout order {self.order!r}")
        if self.c_stored is None:
            object.__setattr__(self, "c_stored", self.c)
        if self.pad_bottom is None:
            object.__setattr__(self, "pad_bottom", self.pad_h)
        if self.pad_right is None:
            object.__setattr__(self, "pad_right", self.pad_w)
        if self.c_stored < self.c:
            raise ValueError("c_stored must be at least c")
        if self.c_pitch is None:
            object.__setattr__(self, "c_pitch", self.c_stored)
        if self.c_offset + self.c > self.c_pitch or (self.c_pitch != self.c_stored and self.order != "nhwc"):
            raise ValueError("a view's channels must lie inside an NHWC buffer's pixels")

    # -- sizes
    @property
    def hp(self) -> int:   # stored height, border included
        return self.h + self.pad_h + self.pad_bottom

    @property
    def wp(self) -> int:
        return self.w + self.pad_w + self.pad_right

    @property
    def border(self) -> tuple:
        """(top, left, bottom, right)."""
        return (self.pad_h, self.pad_w, self.pad_bottom, self.pad_right)

    @property
    def is_view(self) -> bool:
        return self.c_pitch != self.c_stored or self.c_offset != 0

    @property
    def stored_shape(self) -> tuple:
        """The whole buffer's shape (a view's: the concatenation's)."""
        if self.order == "nchw":
            return (self.batch, self.c_stored, self.hp, self.wp)
        return (self.batch, self.hp, self.wp, self.c_pitch)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.stored_shape)) * 4

    @property
    def canonical_shape(self) -> tuple:
        return (self.batch, self.c) if self.flat else (self.batch, self.c, self.h, self.w)

    @property
    def is_canonical(self) -> bool:
        """True when the stored buffer holds exactly the canonical array's bytes
        (no border, no padding channels, and NCHW order or no order to keep):
        the net's edges then need no conversion."""
        plain = self.order == "nchw" or self.c == 1 or self.h * self.w == 1
        return not any(self.border) and self.c_stored == self.c and plain and not self.is_view

    @property
    def padded_vector(self) -> bool:
        """One pixel an item, no border, channels padded past c (a dense layer's vector stores): the canonical
        array is the stored one with the padding channels dropped."""
        return self.h * self.w == 1 and not any(self.border) and not self.is_view and self.c_stored > self.c

    def kernel_defines(self) -> dict:
        """The -D constants of kernels/layout.cl for this buffer."""
        return {"N": self.batch, "C": self.c, "H": self.h, "W": self.w, "CS": self.c_stored,
                "PH": self.pad_h, "PW": self.pad_w, "PB": self.pad_bottom, "PR": self.pad_right,
                "NHWC": int(self.order == "nhwc")}

    @property
    def order_name(self) -> str:
        """'NHWC', 'NCHW', with '+border' when it has one (names conversion steps)."""
        return self.order.upper() + ("+border" if any(self.border) else "")

    @property
    def canonical_name(self) -> str:
        return "NC" if self.flat else "NCHW"

    # -- host conversions (the reference for kernels/layout.cl, and layer-wise checks)
    def pack(self, x: np.ndarray, fill: float = 0.0) -> np.ndarray:
        """A canonical host array in this layout; border and extra channels
        hold `fill` (always 0 except for the NaN-interior template)."""
        x = np.asarray(x, np.float32).reshape(self.batch, self.c, self.h, self.w)
        out = np.zeros(self.stored_shape, np.float32)
        if fill:
            out.fill(fill)
        ph, pw, at = self.pad_h, self.pad_w, self.c_offset
        if self.order == "nchw":
            out[:, :self.c, ph:ph + self.h, pw:pw + self.w] = x
        else:
            out[:, ph:ph + self.h, pw:pw + self.w, at:at + self.c] = x.transpose(0, 2, 3, 1)
        return out

    def unpack(self, stored: np.ndarray) -> np.ndarray:
        """The canonical host array held in a stored one."""
        stored = stored.reshape(self.stored_shape)
        ph, pw, at = self.pad_h, self.pad_w, self.c_offset
        if self.order == "nchw":
            x = stored[:, :self.c, ph:ph + self.h, pw:pw + self.w]
        else:
            x = stored[:, ph:ph + self.h, pw:pw + self.w, at:at + self.c].transpose(0, 3, 1, 2)
        return np.ascontiguousarray(x).reshape(self.canonical_shape)

    def template(self) -> np.ndarray:
        """What a fresh buffer holds: zeros in the border and extra channels
        (read by consumers, never written), NaN in the interior (written by the
        producer every run; NaN shows an element it missed)."""
        interior = np.full((self.batch, self.c, self.h, self.w), np.nan, np.float32)
        return self.pack(interior)

    def describe(self) -> str:
        dims = "x".join(str(d) for d in self.stored_shape)
        extra = []
        if any(self.border):
            symmetric = self.border[:2] == self.border[2:]
            extra.append("border " + ",".join(str(p) for p in (self.border[:2] if symmetric else self.border)))
        if self.c_stored != self.c:
            extra.append(f"channels {self.c}->{self.c_stored}")
        if self.is_view:
            extra.append(f"channels {self.c_offset}..{self.c_offset + self.c - 1} of a concatenation's pixels, "
                         f"written in place")
        return f"{self.order.upper()} {dims}" + (f" ({', '.join(extra)})" if extra else "")


def consumer_pad(layer) -> tuple[int, int]:
    """The zero border layer `layer` wants around its input."""
    if layer is not None and layer.kind == "conv":
        return tuple(layer.pad)
    return (0, 0)


def consumer_border(layer) -> tuple[int, int, int, int]:
    """The zero border (top, left, bottom, right) layer `layer` wants around its input."""
    if layer is not None and layer.kind == "conv":
        return tuple(layer.padding)
    return (0, 0, 0, 0)


def net_layouts(net, batch: int, order: str, channel_multiple: int = 1) -> list[Layout]:
    """Layouts of the input buffer and of every layer's output buffer:
    entry 0 is the net's input, entry i+1 layer i's output.  Each carries
    per side the widest border of the layers that read it (in a chain: the
    one layer after it)."""
    borders = [[0, 0, 0, 0] for _ in net.shapes]
    for i, layer in enumerate(net.layers):
        for s in net.sources(i):
            borders[s + 1] = [max(a, b) for a, b in zip(borders[s + 1], consumer_border(layer))]
    layouts = []
    for i, shape in enumerate(net.shapes):
        ph, pw, pb, pr = borders[i]
        if len(shape) == 3:
            c, h, w = shape
            flat = False
        else:
            (c,), h, w, flat = shape, 1, 1, True
        layouts.append(Layout(batch, c, h, w, ph, pw, order, round_up(c, channel_multiple), flat, pb, pr))
    return layouts
