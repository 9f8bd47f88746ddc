"""Published figures from the study this tool reproduces, shown beside ours
only when asked (`compare report --published`) and always labelled as such.

Source: S. Rovder, "Optimising Neural Network Inference on Low-Powered
GPUs" (2018), Mali-T628 GPU on an ODROID-XU3 board, times in milliseconds:
table 6.2 (LeNet-5, batch 100: CLBlast and the custom baseline's wall time)
and table 7.4 (VGG-16, batch 1: CLBlast, the vectorised and the Morton GEMM
systems).  CLBlast's VGG-16 pooling layers were not timed ("—").
"""
from __future__ import annotations

SOURCE = "Rovder 2018, Mali-T628, published"

# net -> backend -> layer -> ms
FIGURES: dict[str, dict[str, dict[str, float]]] = {
    "lenet": {
        "clblast": {"c1": 721.14, "s2": 579.78, "c3": 681.30, "s4": 550.48, "f5": 416.53, "f6": 405.32},
        "baseline": {"c1": 34.81, "s2": 17.30, "c3": 60.04, "s4": 17.35, "f5": 33.90, "f6": 30.92},
    },
    "vgg16": {
        "clblast": {
            "conv1_1": 874.732, "conv1_2": 1362.894, "conv2_1": 894.872, "conv2_2": 1257.292,
            "conv3_1": 796.761, "conv3_2": 1117.005, "conv3_3": 1117.776, "conv4_1": 772.710,
            "conv4_2": 1052.089, "conv4_3": 1050.759, "conv5_1": 1946.488, "conv5_2": 1947.286,
            "conv5_3": 1946.385, "fc1": 677.196, "fc2": 315.579, "fc3": 272.650},
        "vectorised": {
            "conv1_1": 71.756, "conv1_2": 513.390, "mp1": 94.202, "conv2_1": 281.243, "conv2_2": 547.064,
            "mp2": 59.221, "conv3_1": 284.008, "conv3_2": 568.757, "conv3_3": 566.790, "mp3": 40.145,
            "conv4_1": 315.924, "conv4_2": 1012.383, "conv4_3": 1011.882, "mp4": 31.477, "conv5_1": 327.361,
            "conv5_2": 336.554, "conv5_3": 327.602, "mp5": 28.797, "fc1": 608.650, "fc2": 92.939, "fc3": 46.313},
        "morton": {
            "conv1_1": 314.390, "conv1_2": 556.019, "mp1": 49.427, "conv2_1": 281.358, "conv2_2": 525.032,
            "mp2": 37.116, "conv3_1": 273.863, "conv3_2": 447.739, "conv3_3": 449.776, "mp3": 34.634,
            "conv4_1": 275.046, "conv4_2": 449.034, "conv4_3": 449.453, "mp4": 33.719, "conv5_1": 234.432,
            "conv5_2": 233.532, "conv5_3": 236.013, "mp5": 33.744, "fc1": 608.650, "fc2": 92.939, "fc3": 46.313},
    },
}

