"""OpenCV DNN's tuned convolutions (ocl4dnn) on one device, as the `opencv`
backend reads them: the device's folder of configurations
(opencv_device.tuning_folder), how deep the tuning of a net's pass went
(a convolution is tuned where a file of its shape is there: ocl4dnn names
its files after the convolution's shape: vendor, compute units, kernel,
channels, groups, strides, dilations, input size rounded up to 16 and at
most 256, padding, batch, outputs...), and what each net's tuning said of
its candidates (compare-opencv.json, one locked JSON file).  `compare tune
--scope opencv` fills it (backends/tuning/opencv/)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nets import LayerKind, Net

from .. import store
from ..store import JsonFile, whole

SUMMARY = "compare-opencv.json"


def _tuning_size(x: int) -> int:
    """ocl4dnn's TUNING_SIZE: an input side as its key writes it (16-aligned, at most 256)."""
    return 256 if x > 256 else -(-x // 16) * 16


def _conv_tokens(net: Net, batch: int) -> list[set[str]]:
    """Per convolution of `net`: the shape part of ocl4dnn's file name (width before height), with the
    input channels counted whole or per group."""
    out = []
    for i, layer in enumerate(net.layers):
        if layer.kind != LayerKind.CONV:
            continue
        c, h, w = net.in_shape(i)
        (kh, kw), (sh, sw), (dh, dw) = layer.kernel, layer.stride, layer.dilation
        top, left = layer.padding[:2]
        out.append({f"_k{kw}x{kh}_cn{cn}_g{layer.groups}_s{sw}x{sh}_d{dw}x{dh}_b1_in{_tuning_size(w)}x"
                    f"{_tuning_size(h)}_p{left}x{top}_num{batch}_M{layer.out_channels}_"
                    for cn in {c, c // layer.groups}})
    return out


def net_key(net: Net, batch: int) -> str:
    return f"{net.name}@{batch}"


@dataclass(frozen=True)
class Tuning:
    """The folder of one device's tuned configurations."""

    folder: Path

    def files(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        return sorted(f.name for f in self.folder.iterdir() if f.is_file() and not f.name.startswith((".", SUMMARY)))

    def any(self) -> bool:
        return bool(self.files())

    def environment(self, read_only: bool) -> dict[str, str | None]:
        """OpenCV's environment: the folder, auto-tuning off (a run) or on (the tuning)."""
        return {"OPENCV_OCL4DNN_CONFIG_PATH": str(self.folder),
                "OPENCV_OCL4DNN_DISABLE_AUTO_TUNING": "1" if read_only else None,
                "OPENCV_OCL4DNN_FORCE_AUTO_TUNING": None}

    def depth(self, net: Net, batch: int) -> tuple[int, int] | None:
        """(convolutions of the pass with a configuration here, convolutions); None for a net of none."""
        convs = _conv_tokens(net, batch)
        if not convs:
            return None
        files = self.files()
        return sum(1 for names in convs if any(t in f for f in files for t in names)), len(convs)

    def _summary_file(self) -> JsonFile[dict]:
        def parse(data) -> store.Parsed[dict]:
            found = {k: v for k, v in store.obj(data, "the file").items() if whole(v)}
            kept = {k: v for k, v in found.items() if _is_record(k, v)}
            return store.Parsed(kept, len(found) - len(kept))

        return JsonFile(self.folder / SUMMARY, parse, lambda kept: f"the records of {len(kept or {})} nets kept",
                        dict, f".{SUMMARY}.lock", empty=lambda kept: not kept)

    def summary(self) -> dict:
        """Per net (net_key) what its tuning said; a damaged or foreign summary is set aside with what could
        be kept written back (backends/store/)."""
        got = self._summary_file().load()
        return got if got is not None else {}

    def note(self, net: Net, batch: int, record: dict) -> None:
        self._summary_file().update(lambda there: {**(there or {}), net_key(net, batch): record})

    def refusal(self, net: Net, batch: int) -> str:
        at = "" if batch == net.default_batch else f" --batch {batch}"
        return (f"no convolution of {net.name} at batch {batch} was auto-tuned on this device: `compare tune "
                f"--scope opencv --net {net.name}{at}` tunes them")


def _is_record(key: str, record) -> bool:
    """A net's record as note() writes it: under 'net@batch', its counts whole numbers where given."""
    if "@" not in key or not key.rsplit("@", 1)[1].isdigit() or not isinstance(record, dict):
        return False
    return all(isinstance(record.get(k), int) and not isinstance(record.get(k), bool)
               for k in ("convolutions", "tuned", "basic_only") if record.get(k) is not None)


def tuning_line(tuning: Tuning, net: Net, batch: int, tuned: bool) -> str:
    """One line for the reports: the mode's tuning, and how deep it went on this pass."""
    depth = tuning.depth(net, batch)
    record = tuning.summary().get(net_key(net, batch)) or {}
    basic = record.get("basic_only")
    how = (f"; ocl4dnn's candidates on this device: its basic kernel alone ({basic} convolutions of its tuning "
           f"pass fell back to it: no Intel subgroups)" if basic else "")
    if depth is None:
        found = "no convolution in the pass"
    else:
        found = f"{depth[0]} of {depth[1]} convolutions of the pass auto-tuned on this device"
        if record.get("complete") and record.get("tuned") == depth[0] < depth[1]:
            found += (f" (the other {depth[1] - depth[0]} are not ocl4dnn's to tune: a whole pass of its tuning "
                      f"tuned none of them)")
    where = f"ocl4dnn's configurations in {tuning.folder}, by `compare tune --scope opencv`"
    if tuned:
        return f"opencl-tuned: {found}{how}; none tuned at run time ({where})"
    return f"opencl: ocl4dnn's configurations by its heuristics; tuned mode: {found}{how} ({where})"
