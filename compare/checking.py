"""Outputs against the float64 oracle.

The metric is the relative L2 error ||out - ref|| / ||ref|| with a tolerance
per dtype (float32: 1e-4), plus the max abs error, top-1 agreement for
classifier outputs, and a hard failure for NaN/Inf.  Layer-wise checks feed
each layer the oracle's outputs of the layers it reads, so errors do not compound.
"""
from __future__ import annotations

import numpy as np

from .results import Check, Comparison

TOLERANCE = {"float32": 1e-4}


def compare_arrays(out: np.ndarray, ref: np.ndarray, tol: float = TOLERANCE["float32"],
                   name: str | None = None) -> Comparison:
    out = np.asarray(out)
    ref = np.asarray(ref, np.float64)
    if out.shape != ref.shape:
        return Comparison(False, name=name, note=f"shape {out.shape}, expected {ref.shape}")
    out64 = out.astype(np.float64)
    if not np.all(np.isfinite(out64)):
        bad = int(np.size(out64) - np.count_nonzero(np.isfinite(out64)))
        return Comparison(False, name=name, note=f"{bad} NaN/Inf values")
    ref_norm = float(np.linalg.norm(ref))
    diff = float(np.linalg.norm(out64 - ref))
    rel = diff / ref_norm if ref_norm > 0 else diff
    note = None
    if not np.any(out64):
        note = "output is all zeros" if ref_norm > 0 else "output and reference are all zeros"
    top1 = None
    if ref.ndim == 2 and ref.shape[1] > 1:
        top1 = float(np.mean(np.argmax(out64, axis=1) == np.argmax(ref, axis=1)))
    return Comparison(bool(rel <= tol), rel, float(np.max(np.abs(out64 - ref))) if out.size else 0.0,
                      name=name, top1=top1, note=note)


def check_prepared(prepared, x: np.ndarray, ref_outs: list[np.ndarray], layerwise: bool = True,
                   progress=None) -> Check:
    """End to end on `x`, and (if layerwise) each layer on the oracle's input."""
    net = prepared.net
    end = compare_arrays(prepared.forward(x), ref_outs[-1])
    layers = []
    if layerwise:
        for i, layer in enumerate(net.layers):
            if progress:
                progress(f"checking {layer.name}")
            inputs = [np.asarray(x if s < 0 else ref_outs[s], np.float32) for s in net.sources(i)]
            out = prepared.run_layer(i, inputs[0] if len(inputs) == 1 else inputs)
            layers.append(compare_arrays(out, ref_outs[i], name=layer.name))
    passed = end.passed and all(r.passed for r in layers)
    return Check("PASS" if passed else "FAIL", TOLERANCE["float32"], end, layers)
