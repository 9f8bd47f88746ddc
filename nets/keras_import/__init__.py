"""Bring your own model: a Keras model (.keras or .h5), Sequential or
functional (skip connections), as one of our nets plus its trained weights
in our layouts.

Supported (what the image classifiers of keras.applications use): Conv2D
(valid or same padding, any strides, groups and dilation), DepthwiseConv2D,
SeparableConv2D (a depthwise then a 1x1 convolution), BatchNormalization
(folded into the convolution before it when the model is loaded, else the
per-channel affine map it is), ZeroPadding2D (the padding of the
convolution or pooling after it), MaxPooling2D and AveragePooling2D (valid
or same; a 'same' average pool divides by the input's elements in each
window, as TensorFlow does), GlobalAveragePooling2D, Add, Multiply
(elementwise, or by an (N, 1, 1, C) gate: squeeze-and-excitation),
Concatenate along the channels, Rescaling and Normalization (an affine map
per channel, folded into the convolution after it where exact:
nets/affine.py), Reshape between (N, C) and (N, 1, 1, C), Dense after
Flatten, GlobalAveragePooling2D or Dense, Flatten, Dropout (the identity at
inference), InceptionResNetV2's CustomScaleLayer (x + scale * r: the scale
folded into the convolution that makes r), and the activations linear,
relu, relu6, sigmoid, tanh, silu (swish), hard_silu (hard_swish),
hard_sigmoid and softmax (a layer of its own, last), given on a layer or
as a separate Activation/ReLU layer folded into the layer that makes its
input (when nothing else reads it; else a layer of its own, a selection of
every channel with the activation).  MobileNetV3's hard sigmoid written
with operators, relu6(x + 3) * (1 / 6), is one hardsigmoid.  Input is
channels_last (H, W, C) float32.  Everything else is refused with a
UserError naming the layer and what we lack, never approximated.

The package: load.py (a file: checked by saved_file.py, loaded by Keras),
model.py (the walk over a model's layers), table.py (each Keras class's
handler: cnn.py, merging.py, transformer.py; Keras operators on tensors:
operations.py), builder.py (our layers as they are made), layouts.py
(weights in our layouts).

Layouts: Conv2D kernel (FH,FW,C/g,K) -> (K,C/g,FH,FW); DepthwiseConv2D
kernel (FH,FW,C,M) -> (C*M,1,FH,FW), output channel c*M+m as Keras's.
'same' padding puts the odd row or column at the bottom or right, as
TensorFlow does.  Keras's Flatten reads an NHWC tensor in H,W,C order, ours
in C,H,W order, so the rows of the Dense weight after a Flatten are permuted.
"""
from .layouts import conv_kernel_from_keras, dense_rows_from_keras
from .load import load_keras
from .model import import_model

__all__ = ["conv_kernel_from_keras", "dense_rows_from_keras", "import_model", "load_keras"]
