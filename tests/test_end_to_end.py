"""LeNet-5 (batch 100) and VGG-16 (batch 1) on every backend, end to end and
layer by layer, within the float32 tolerance of the float64 oracle."""
import pytest

from compare.checking import check_prepared


@pytest.mark.parametrize("which", ["lenet_case", "vgg_case"])
def test_net_matches_the_oracle(backend, which, request):
    case = request.getfixturevalue(which)
    prepared = backend.prepare(case.net, case.weights, case.batch)
    try:
        result = check_prepared(prepared, case.x, case.ref)
    finally:
        prepared.close()
    assert result.status == "PASS", result
    assert result.end_to_end.top1 == 1.0
