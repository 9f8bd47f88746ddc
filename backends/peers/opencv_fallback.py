"""Which of OpenCV's layers ran on the host, not the OpenCL device.

OpenCV's classic engine runs a layer's OpenCL implementation where it has
one and it succeeds (its program builds, the layer's case is covered), else
silently its CPU implementation on the host, the data mapped back and
forth.  It keeps no record of which ran, so we watch it: one pass in a
process of its own with OpenCV's own trace on (OPENCV_TRACE: every traced
function's region, nested, per thread), where each layer's region
(Net::Impl::forwardLayer, called once per layer in the order of its ids)
shows what ran under it.  A layer under which OpenCV's thread pool ran
(`parallel_for`, which every CPU implementation of the heavy layers uses:
convolution, pooling, fully connected, elementwise, eltwise, softmax) ran on
the host.  What this cannot see: a host fallback that does no parallel work
(a plain copy, a reshape); a region the trace cut short (its children
skipped) is reported as not known.  The OpenCL programs that failed to
build are read from OpenCV's own build log (its stderr).
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

FORWARD_TO_LAYER = "Net::Impl::forwardToLayer("
FORWARD_LAYER = "Net::Impl::forwardLayer("
HOST_WORK = "parallel_for"


def trace_environment(folder: Path) -> dict[str, str]:
    """Environment of a child whose OpenCV writes its trace into `folder`, every region kept."""
    folder.mkdir(parents=True, exist_ok=True)
    return {"OPENCV_TRACE": "1", "OPENCV_TRACE_LOCATION": str(folder / "trace"),
            "OPENCV_TRACE_DEPTH_OPENCV": "1000", "OPENCV_TRACE_MAX_CHILDREN_OPENCV": "1000000",
            "OPENCV_TRACE_MAX_CHILDREN": "1000000"}


@dataclass
class Region:
    location: int
    children: list = field(default_factory=list)
    skipped: bool = False   # the trace left some of its children out

    def functions(self, names: dict[int, str]) -> set[str]:
        found = {names.get(self.location, "")}
        for c in self.children:
            found |= c.functions(names)
        return found

    def cut_short(self) -> bool:
        return self.skipped or any(c.cut_short() for c in self.children)


def _locations(main: Path) -> tuple[dict[int, str], list[str]]:
    """The trace's locations (id -> function) and its threads' files."""
    names, threads = {}, []
    for line in main.read_text(errors="replace").splitlines():
        if line.startswith("l,"):
            row = next(csv.reader([line]))
            names[int(row[1])] = row[4]
        elif line.startswith("#thread file:"):
            threads.append(line.split(":", 1)[1].strip())
    return names, threads


def _regions(thread_file: Path) -> list[Region]:
    """The outermost regions of one thread, nested as they ran."""
    roots, stack = [], []
    for line in thread_file.read_text(errors="replace").splitlines():
        parts = line.split(",")
        if parts[0] == "b" and len(parts) >= 5:
            r = Region(int(parts[3]))
            (stack[-1].children if stack else roots).append(r)
            stack.append(r)
        elif parts[0] == "e" and stack:
            r = stack.pop()
            r.skipped = any(p.startswith("skip=") for p in parts[6:])
    return roots


def _walk(regions: list[Region]):
    for r in regions:
        yield r
        yield from _walk(r.children)


@dataclass(frozen=True)
class LayerPlaces:
    """Per OpenCV layer (getLayerNames' order): True ran on the host, False on the device, None not known."""

    host: tuple[bool | None, ...]
    why_unknown: str = ""


def layer_places(folder: Path, layer_count: int) -> LayerPlaces:
    """Where each of `layer_count` layers ran in the last pass of the trace in `folder`."""
    main = folder / "trace.txt"
    if not main.is_file():
        return LayerPlaces((None,) * layer_count, "OpenCV wrote no trace (a build without OPENCV_TRACE)")
    names, threads = _locations(main)
    passes = []
    for t in threads:
        for r in _walk(_regions(folder / t)):
            if FORWARD_TO_LAYER in names.get(r.location, ""):
                layers = [c for c in r.children if FORWARD_LAYER in names.get(c.location, "")]
                if layers:
                    passes.append(layers)
    if not passes:
        return LayerPlaces((None,) * layer_count, "the trace holds no pass of the net")
    layers = passes[-1]
    if len(layers) != layer_count + 1:   # the first is the input's
        return LayerPlaces((None,) * layer_count, f"the trace's pass ran {len(layers) - 1} layers, "
                                                  f"not the net's {layer_count}")
    host = []
    for r in layers[1:]:
        if r.cut_short():
            host.append(None)
        else:
            host.append(HOST_WORK in r.functions(names))
    return LayerPlaces(tuple(host))


_BUILD_FAILED = re.compile(r"^OpenCL program build log: (\S+)", re.M)


def failed_programs(log: str) -> list[str]:
    """The OpenCL programs OpenCV says failed to build, in its log ('dnn/activations')."""
    # dnn/dummy is OpenCV's probe of whether the device takes a build option, not a program it runs
    return [p for p in dict.fromkeys(_BUILD_FAILED.findall(log)) if p != "dnn/dummy"]
