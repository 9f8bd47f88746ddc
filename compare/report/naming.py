"""Devices named as people know them: a GPU by its own name, PoCL by the CPU it runs on
("PoCL on an AMD EPYC (haswell)"), not by PoCL's device string ("pthread-haswell-AMD EPYC")."""
from __future__ import annotations

import re

from ..results import Device

# PoCL's CPU device: "pthread-<LLVM's name of the CPU>-<the CPU's model name>"
_POCL = re.compile(r"^(?:pthread|cpu)-(?P<arch>[\w.]+(?:-avx512)?)-(?P<cpu>.+)$")
_CLUTTER = re.compile(r"\((?:R|TM)\)|\bProcessor\b|\bCPU\b|\s+\d+-Core\b", re.I)


def _is_pocl(device: Device) -> bool:
    return "portable computing language" in str(device.platform or "").lower() or bool(_POCL.match(device.name))


def _parts(device: Device) -> tuple[str, str | None]:
    """(the CPU's model, LLVM's name of its architecture) of a PoCL device."""
    found = _POCL.match(device.name)
    cpu, arch = (found["cpu"], found["arch"]) if found else (device.name, None)
    return " ".join(_CLUTTER.sub("", cpu).split()), arch


def known_as(device: Device) -> str:
    """'NVIDIA H200', 'PoCL on an AMD EPYC (haswell)'."""
    if not _is_pocl(device):
        return device.name
    cpu, arch = _parts(device)
    article = "an" if cpu[:1].upper() in "AEIOU" else "a"
    return f"PoCL on {article} {cpu}" + (f" ({arch})" if arch else "")


def short(device: Device) -> str:
    """The name in a narrow column: 'H200', 'PoCL haswell'."""
    if _is_pocl(device):
        return f"PoCL {(_parts(device)[1] or 'CPU').split('-')[-1]}"
    words = [w for w in device.name.split() if w.upper() not in ("NVIDIA", "AMD", "INTEL")]
    model = [w for w in words if not re.fullmatch(r"\d+GB|HBM\d*e?|PCIe|SXM\d*", w, re.I)]
    return " ".join(model) or device.name
