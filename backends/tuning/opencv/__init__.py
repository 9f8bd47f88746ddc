"""The `opencv` scope of `compare tune`: OpenCV DNN's own auto-tuning of its
OpenCL convolutions (search.py), run by scope.py; the `opencv` backend
reads what it tuned through backends/peers/opencv_tuning.py."""
