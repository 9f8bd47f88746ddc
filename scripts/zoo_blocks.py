"""Issue 36's "done when": each block of the classification zoo, built small in
PyTorch (SqueezeNet's fire module, DenseNet's dense block, ShuffleNet-v2's
units, an Inception block with ceil-mode and padded pooling, MobileNet-v3's
and EfficientNet's blocks) and exported to ONNX, and a Keras model with
ZeroPadding2D, Rescaling and Concatenate (tests/onnx_models.py,
tests/keras_models.py), through `compare check --backends all` (layer by
layer and end to end against the float64 oracle), and each backend's output
against the framework's own.  One line per block and backend.

    .venv/bin/python scripts/zoo_blocks.py [--backends all] [--size 24]

A few minutes on PoCL (every backend compiles its kernels per block).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def _export(folder: Path, size: int, keras: bool = True) -> dict[str, tuple[str, np.ndarray]]:
    """Each block's model file, and the framework's output on the input saved as x.npy."""
    import onnx_models
    x = np.random.default_rng(0).random((2, 3, size, size), dtype=np.float32)
    np.save(folder / "x.npy", x)
    out = {}
    for name in onnx_models.ZOO_BLOCKS:
        path = folder / f"{name}.onnx"
        out[name] = (str(path), onnx_models.export(name, str(path), x))
    if not keras:
        return out
    # Keras in a child, as the tests do (TensorFlow beside PoCL breaks its compiler)
    from backends.isolated import Worker
    worker = Worker("keras zoo model")
    try:
        xk = (x * 255).astype(np.float32)
        np.save(folder / "xk.npy", xk)
        paths, y = worker.call("keras_models", "save", "zoo_model", str(folder), xk, ("keras",))
    finally:
        worker.close()
    out["keras-zoo"] = (paths["keras"], y)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", default="all")
    p.add_argument("--skip-keras", action="store_true", help="the ONNX blocks only (no TensorFlow here)")
    p.add_argument("--size", type=int, default=16, help="the images' height and width (the Keras model takes 16)")
    args = p.parse_args(argv)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="zoo-blocks-") as tmp:
        folder = Path(tmp)
        for name, (path, framework) in _export(folder, args.size, not args.skip_keras).items():
            x = folder / ("xk.npy" if name == "keras-zoo" else "x.npy")
            outs = folder / f"{name}-outs"
            run = subprocess.run([sys.executable, "-m", "compare", "check", "--net", path,
                                  "--backends", args.backends, "--input", str(x), "--save-outputs", str(outs)],
                                 capture_output=True, text=True, cwd=ROOT,
                                 env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
            failed += run.returncode != 0
            table = False
            for line in run.stdout.splitlines():
                if line.startswith("backend") and "rel L2" in line:
                    table = True
                    continue
                if table and line.strip() and not line.startswith("---"):
                    words = line.split()
                    backend = words[0]
                    status = next(w for w in words[1:] if not w.startswith("("))   # after a mode in brackets
                    saved = outs / f"{backend}.npy"
                    vs = ""
                    if saved.exists():
                        got = np.load(saved).astype(np.float64).reshape(framework.shape)
                        rel = np.linalg.norm(got - framework) / np.linalg.norm(framework)
                        vs = f"  vs framework {rel:.1e}"
                    note = line.split(None, 6)[-1] if status == "UNSUPPORTED" else ""
                    print(f"{name:20} {backend:18} {status:11}{vs}  {note[:120]}", flush=True)
                elif table and not line.strip():
                    table = False
            if run.returncode not in (0, 1):
                print(f"{name}: exit {run.returncode}: {run.stderr.strip().splitlines()[-1:]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
