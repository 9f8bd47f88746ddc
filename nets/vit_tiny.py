"""A small vision transformer (Dosovitskiy et al. 2021, "An Image is Worth
16x16 Words", ViT-B/16's shape scaled down): a 32x32 RGB image cut into 8x8
patches, 16 tokens and a class token of 32 features, two encoder blocks of
2 heads with an MLP of 64, the class token's features into 10 classes.
Small enough to run on PoCL in seconds; built in so every backend's answer
for a transformer is in the report beside the four CNNs.

Layer names follow torchvision's vit_b_16: conv_proj, then per block
encoder_{b}: ln_1, the attention's in_proj (one 1x1 convolution for the
queries, keys and values of every token), the attention, out_proj, the
residual add, ln_2, the MLP's two linear layers (gelu between), the second
residual add; then the final ln and the head.  Tokens are (C, T, 1) maps
(nets/spec.py), so every Linear is a 1x1 convolution.
"""
from .spec import Add, Attention, Conv, Dense, LayerNorm, Net, TakeToken, Tokens

DIM, HEADS, MLP, BLOCKS, PATCH, CLASSES = 32, 2, 64, 2, 8, 10


def _block(b: int, block_input: str):
    name = f"encoder_{b}"
    yield LayerNorm(f"{name}_ln_1", eps=1e-6, inputs=(block_input,))
    yield Conv(f"{name}_in_proj", out_channels=3 * DIM, kernel=(1, 1))
    yield Attention(f"{name}_attention", heads=HEADS)
    yield Conv(f"{name}_out_proj", out_channels=DIM, kernel=(1, 1))
    yield Add(f"{name}_add_1", inputs=(f"{name}_out_proj", block_input))
    yield LayerNorm(f"{name}_ln_2", eps=1e-6)
    yield Conv(f"{name}_mlp_1", "gelu", out_channels=MLP, kernel=(1, 1))
    yield Conv(f"{name}_mlp_2", out_channels=DIM, kernel=(1, 1))
    yield Add(name, inputs=(f"{name}_mlp_2", f"{name}_add_1"))


def _layers():
    yield Conv("conv_proj", out_channels=DIM, kernel=(PATCH, PATCH), stride=(PATCH, PATCH))
    yield Tokens("tokens", class_token=True, position=True)
    previous = "tokens"
    for b in range(BLOCKS):
        yield from _block(b, previous)
        previous = f"encoder_{b}"
    yield LayerNorm("ln", eps=1e-6)
    yield TakeToken("class_token", index=0)
    yield Dense("head", out_features=CLASSES)


VIT_TINY = Net(
    name="vit-tiny",
    input_shape=(3, 32, 32),
    default_batch=1,
    description=f"ViT, small: 8x8 patches of a 32x32 image, {BLOCKS} encoder blocks of {HEADS} heads, "
                f"{DIM} features, MLP {MLP}, class token into {CLASSES} classes",
    layers=tuple(_layers()),
)
