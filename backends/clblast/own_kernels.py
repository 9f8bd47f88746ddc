"""Our own small kernels beside CLBlast (kernels/clblast_extras.cl): what
CLBlast has no routine for.  Their steps are labelled "(own kernel)"."""
from __future__ import annotations

from ..opencl.launch import ACT_CODES, Launch
from .conv_plan import ConvPlan

EXTRAS = "clblast_extras.cl"
LOCAL_SIZE = 64   # work-group size wanted for the own 1-D kernels (shrunk to what the device allows)


def own_kernel(rt, name: str, activation: str, size: tuple, local: tuple = (LOCAL_SIZE,), **defines) -> Launch:
    """One of our kernels from kernels/clblast_extras.cl, built for one
    layer's constants (the kernels skip the work-items past `size`)."""
    return Launch(rt, EXTRAS, name, {"ACT": ACT_CODES[activation], **defines}, size, local)


def own_step(what: str, activation: str) -> str:
    """A step's label: 'maxpool (own kernel)', 'bias+relu (own kernel)'."""
    return f"{what} (own kernel)" if activation == "none" else f"{what}+{activation} (own kernel)"


class Padder:
    """The explicit padding of an asymmetric pad: our `pad_copy` kernel from
    the layer's input into a buffer of its own; a no-op plan has none."""

    STEP = "pad (own kernel)"

    def __init__(self, owner, op, plan: ConvPlan, in_shape):
        self.launch = None
        if plan.explicit_pad is None:
            self.out_buf = op.in_buf
            return
        n, c, h, w = in_shape
        top, left, _, _ = plan.explicit_pad
        self.out_buf = owner.alloc(n * c * plan.height * plan.width * 4, f"padded input of {op.layer.name}")
        self.in_buf = op.in_buf
        self.launch = own_kernel(owner.rt, "pad_copy", "none", (plan.width, plan.height, n * c), (8, 8, 1),
                                 H=h, W=w, PH=plan.height, PW=plan.width, PT=top, PL=left)

    @property
    def steps(self) -> list[str]:
        return [self.STEP] if self.launch is not None else []

    def __call__(self, rec) -> None:
        if self.launch is not None:
            rec.kernel(self.STEP, self.launch(self.in_buf, self.out_buf))
