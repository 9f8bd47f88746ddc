"""Which forms of the same work `vectorised` and `vectorised-tiled` may run
per layer (docs/kernels.md): one typed, checked choice per fold or kernel
form, each "measured" (the faster kept at prepare) unless a caller, a
benchmark or a test, forces one.  The words each choice takes stay beside
the code that acts on them (dw_pw.FOLDS, winograd.MODES, ...); they are
checked here, once, when the choices are made."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

from .blocks import MODES as BLOCK_MODES
from .cpu_conv import Variant, parse_mode
from .dw_pw import FOLDS
from .first_conv import MODES as READ_INPUT_MODES
from .head_fused import MODES as HEAD_MODES
from .layernorm_fused import MODES as LAYERNORM_MODES
from .pointwise import MODES as POINTWISE_MODES
from .pool_fold import MODES as POOL_MODES
from .transform_chain import MODES as CHAIN_MODES
from .winograd import MODES as WINOGRAD_MODES

SPLIT_SUMS = ("measured", "planned")


@dataclass(frozen=True)
class Forms:
    """`vectorised`'s choices.  Each names the module that acts on it."""

    # a depthwise conv and the 1x1 conv that alone reads it as one kernel (dw_pw.py)
    fold_depthwise: str = "measured"
    # a 3x3 stride-1 conv as Winograd F(2x2) or F(4x4), or forced to one plan of them (winograd.py)
    winograd: str = "measured"
    # an inverted residual and the next one's expand as one kernel (blocks.py)
    fuse_blocks: str = "measured"
    # a 1x1 conv as the register-blocked GEMM (pointwise.py)
    pointwise: str = "measured"
    # an ungrouped or depthwise conv as a kernel shaped for the device's vector width, or one
    # variant "VW,NV,RP" of it forced (cpu_conv.py)
    cpu_conv: str = "measured"
    # a layernorm inside the 1x1 conv that alone reads it (layernorm_fused.py)
    fuse_layernorm: str = "measured"
    # a global average pool and the dense layer that alone reads it as one kernel (head_fused.py)
    fuse_head: str = "measured"
    # a 2x2 max pool in the Winograd GEMM output transform of the conv before it (pool_fold.py)
    fold_pools: str = "measured"
    # a Winograd GEMM output transform doing the next conv's input transform too (transform_chain.py)
    chain_transforms: str = "measured"

    # the words each field takes; cpu_conv's are parsed instead (a variant is three numbers)
    CHOICES: ClassVar[dict[str, tuple]] = {
        "fold_depthwise": FOLDS, "winograd": WINOGRAD_MODES, "fuse_blocks": BLOCK_MODES, "pointwise": POINTWISE_MODES,
        "fuse_layernorm": LAYERNORM_MODES, "fuse_head": HEAD_MODES, "split_sums": SPLIT_SUMS,
        "fold_pools": POOL_MODES, "read_input": READ_INPUT_MODES, "chain_transforms": CHAIN_MODES}

    def __post_init__(self):
        for f in fields(self):
            value, words = getattr(self, f.name), self.CHOICES.get(f.name)
            if words is not None and value not in words:
                raise ValueError(f"{f.name} {value!r}: one of {', '.join(words)}")
        parse_mode(self.cpu_conv)   # its own clear error for a bad one

    @property
    def cpu_mode(self) -> str | Variant:
        """cpu_conv read: "measured", "never", "always", or the Variant it forces."""
        return parse_mode(self.cpu_conv)

    def forces(self, field: str) -> bool:
        """Whether `field` forces one form everywhere (neither measured nor turned off)."""
        return getattr(self, field) not in ("measured", "never")


@dataclass(frozen=True)
class TiledForms(Forms):
    """`vectorised-tiled`'s choices: vectorised's, whether a tile's split sum is kept only where it
    measured faster than the same tile in one kernel ("measured": split_choice.py) or as planned, and
    whether the first conv reads the net's input itself."""

    split_sums: str = "measured"
    # the net's first conv reading the input itself, no conversion kernel before it (first_conv.py)
    read_input: str = "measured"
