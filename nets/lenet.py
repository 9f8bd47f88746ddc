"""LeNet-5 as in the study's tables 5.1 and 5.2 (LeCun et al. 1998, without the
final Gaussian connections): sigmoid after every layer, batch 100."""
from .spec import Conv, Dense, Net, Subsample

LENET = Net(
    name="lenet",
    input_shape=(1, 32, 32),
    default_batch=100,
    description="LeNet-5: C1 conv 5x5x6, S2 subsampling, C3 conv 5x5x16, S4, F5 400-120, F6 120-84",
    layers=(
        Conv("c1", "sigmoid", out_channels=6, kernel=(5, 5)),
        Subsample("s2", "sigmoid", kernel=(2, 2), stride=(2, 2)),
        Conv("c3", "sigmoid", out_channels=16, kernel=(5, 5)),
        Subsample("s4", "sigmoid", kernel=(2, 2), stride=(2, 2)),
        Dense("f5", "sigmoid", out_features=120),
        Dense("f6", "sigmoid", out_features=84),
    ),
)
