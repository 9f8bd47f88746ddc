"""LeNet-5 (batch 100) and VGG-16's layers on a 64x64 input (batch 1) on
every backend within the float32 tolerance of the float64 oracle: LeNet-5
end to end and layer by layer, VGG-16 end to end (its 16 layers compound:
one wrong layer fails it; layer-by-layer checks of its layer types run in test_layers.py, and
on VGG-16 itself in `compare check`).  A backend may refuse a net it
cannot run (UNSUPPORTED): only where that is its documented limit."""
import pytest

from compare.checking import check_prepared
from nets.errors import Unsupported

# (backend, net) pairs refused on purpose, with what the reason must say
REFUSED = {("fused", "vgg_case"): "of local memory for its activations"}


@pytest.mark.parametrize("which", ["lenet_case", "vgg_case"])
def test_net_matches_the_oracle(backend, which, request):
    case = request.getfixturevalue(which)
    try:
        prepared = backend.prepare(case.net, case.weights, case.batch)
    except Unsupported as exc:
        assert (backend.name, which) in REFUSED and REFUSED[backend.name, which] in str(exc), str(exc)
        return
    assert (backend.name, which) not in REFUSED, f"{backend.name} was expected to refuse {which}"
    try:
        result = check_prepared(prepared, case.x, case.ref, layerwise=which == "lenet_case")
    finally:
        prepared.close()
    assert result.status == "PASS", result
    assert result.end_to_end.top1 == 1.0
