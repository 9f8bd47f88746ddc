"""How every OpenCV process of the `opencv` peer reads an ONNX model: the
classic engine (OpenCV 5 offers a new one beside it, which runs on the CPU
alone), DNN_BACKEND_OPENCV on DNN_TARGET_OPENCL; a model OpenCV refuses is
Unsupported in one line with OpenCV's own message.  Read from a file, never
a buffer (OpenCV 5's buffer overload crashed on a Python bytes object)."""
from __future__ import annotations

from nets.errors import Unsupported


def read_net(cv2, path: str):
    """The ONNX model in `path` as OpenCV's classic engine reads it, on DNN_BACKEND_OPENCV / DNN_TARGET_OPENCL."""
    try:
        if hasattr(cv2.dnn, "ENGINE_CLASSIC"):   # OpenCV 5 has a new engine beside it, on the CPU alone
            net = cv2.dnn.readNetFromONNX(path, cv2.dnn.ENGINE_CLASSIC)
        else:
            net = cv2.dnn.readNetFromONNX(path)
    except cv2.error as exc:
        raise Unsupported(f"OpenCV's ONNX importer refused the model: {first_line(exc)}") from None
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)
    net.setPreferableTarget(cv2.dnn.DNN_TARGET_OPENCL)
    return net


def first_line(exc: Exception) -> str:
    """OpenCV's error message without its file and function: what follows 'error:'."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    error = next((ln for ln in lines if "error:" in ln), lines[0] if lines else type(exc).__name__)
    return error.split("error:", 1)[-1].strip()


def read_net_at(path: str) -> None:
    """In a child: the model in `path` read as a run reads it (Unsupported where OpenCV refuses it)."""
    import cv2
    read_net(cv2, path)
