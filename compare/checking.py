"""Outputs against the float64 oracle.

The metric is the relative L2 error ||out - ref|| / ||ref|| with a tolerance
per dtype (float32: 1e-4), plus the max abs error, top-1 agreement for
classifier outputs, and a hard failure for NaN/Inf.  Layer-wise checks feed
each layer the oracle's input to that layer, so errors do not compound.
"""
from __future__ import annotations

import numpy as np

TOLERANCE = {"float32": 1e-4}


def compare_arrays(out: np.ndarray, ref: np.ndarray, tol: float = TOLERANCE["float32"]) -> dict:
    out = np.asarray(out)
    ref = np.asarray(ref, np.float64)
    if out.shape != ref.shape:
        return {"passed": False, "rel_l2": None, "max_abs": None,
                "note": f"shape {out.shape}, expected {ref.shape}"}
    out64 = out.astype(np.float64)
    notes = []
    if not np.all(np.isfinite(out64)):
        bad = int(np.size(out64) - np.count_nonzero(np.isfinite(out64)))
        return {"passed": False, "rel_l2": None, "max_abs": None, "note": f"{bad} NaN/Inf values"}
    ref_norm = float(np.linalg.norm(ref))
    diff = float(np.linalg.norm(out64 - ref))
    rel = diff / ref_norm if ref_norm > 0 else diff
    if not np.any(out64) and ref_norm > 0:
        notes.append("output is all zeros")
    elif not np.any(out64):
        notes.append("output and reference are all zeros")
    result = {"passed": bool(rel <= tol), "rel_l2": rel,
              "max_abs": float(np.max(np.abs(out64 - ref))) if out.size else 0.0}
    if ref.ndim == 2 and ref.shape[1] > 1:
        result["top1"] = float(np.mean(np.argmax(out64, axis=1) == np.argmax(ref, axis=1)))
    if notes:
        result["note"] = "; ".join(notes)
    return result


def check_prepared(prepared, x: np.ndarray, ref_outs: list[np.ndarray], ref_in: np.ndarray,
                   layerwise: bool = True, progress=None) -> dict:
    """End to end on `x`, and (if layerwise) each layer on the oracle's input."""
    net = prepared.net
    end = compare_arrays(prepared.forward(x), ref_outs[-1])
    layers = []
    if layerwise:
        inputs = [ref_in] + ref_outs[:-1]
        for i, layer in enumerate(net.layers):
            if progress:
                progress(f"checking {layer.name}")
            out = prepared.run_layer(i, np.asarray(inputs[i], np.float32))
            layers.append({"name": layer.name, **compare_arrays(out, ref_outs[i])})
    passed = end["passed"] and all(r["passed"] for r in layers)
    return {"status": "PASS" if passed else "FAIL", "tolerance": TOLERANCE["float32"],
            "end_to_end": end, "layers": layers}
