"""The nets this tool runs, as data: layer specs, seeded or user weights,
and the Keras and ONNX importers, as plain functions.  The bottom layer: it imports
nothing of `backends` or `compare`; its errors module (nets/errors.py) is
imported from every layer."""
from .errors import UserError

from .lenet import LENET
from .mobilenet_v2 import MOBILENET_V2
from .resnet18 import RESNET18
from .spec import (ACTIVATIONS, COSINE_EPS, NET_INPUT, STUDY_ACTIVATIONS, STUDY_KINDS, TRANSFORMER_FEATURES, TRANSFORMER_KINDS,
                   ZOO_ACTIVATIONS, Activation, Add, Attention, AvgPool, BatchNorm, Channels, Concat, Conv, Crop, Dense,
                   Feature, GlobalAvgPool, Layer, LayerKind, LayerNorm, MaxPool, Mul, Net, Softmax, SpaceToDepth,
                   Subsample, TakeToken, Tokens)
from .vgg16 import VGG16
from .vit_tiny import VIT_TINY

NETS = {net.name: net for net in (LENET, VGG16, RESNET18, MOBILENET_V2, VIT_TINY)}

__all__ = ["ACTIVATIONS", "COSINE_EPS", "NET_INPUT", "STUDY_ACTIVATIONS", "STUDY_KINDS", "TRANSFORMER_FEATURES", "TRANSFORMER_KINDS",
           "ZOO_ACTIVATIONS", "Attention", "Crop", "LayerNorm", "SpaceToDepth", "TakeToken", "Tokens",
           "Activation", "Add", "AvgPool", "BatchNorm",
           "Channels", "Concat", "Conv", "Dense", "Feature", "GlobalAvgPool", "Layer", "LayerKind", "MaxPool", "Mul",
           "Net", "Softmax", "Subsample", "NETS", "LENET", "VGG16", "RESNET18", "MOBILENET_V2", "VIT_TINY", "get_net"]


def get_net(name: str) -> Net:
    """A built-in net by name (compare/models.py also takes Keras and ONNX model files)."""
    if name in NETS:
        return NETS[name]
    raise UserError(f"unknown net {name!r}: choose one of {', '.join(NETS)}, "
                    f"or a model file (.keras, .h5 or .onnx)")
