"""clblast-best's xGEMMSTRIDEDBATCHED compositions (backends/clblast/strided.py): CLBlast's indirect
kernel drops the offset and stride of a matrix it takes without a copy, which made Swin v2's attention
0.25-0.34 off whenever a layer's measuring chose the strided, indirect composition.  Each composition is
checked alone here (in a child process: its overrides hold for the whole process): right, or refused
in one line that says why; never wrong."""
import pytest

from compare.checking import compare_arrays
from nets import Attention, Conv, Net
from nets.errors import Unsupported

from conftest import backend_or_skip

# Swin v2's windows: 8x8 tokens, heads of 32 channels; both the CLBlast database's tiles and most
# tuned ones divide the GEMMs' sizes, so the indirect kernel takes some matrices without a copy
WINDOWS = Net("windows", (192, 16, 16), (Attention("cosine", heads=2, window=(8, 8), shift=(4, 4),
                                                   position_bias=True, cosine=True),))
# a grouped 1x1 conv at batch 2: one call per image, the second at an offset
GROUPED = Net("grouped", (64, 8, 8), (Conv("grouped", out_channels=64, kernel=(1, 1), groups=2),))
REASON = "refused: CLBlast's xGEMMSTRIDEDBATCHED computes"


@pytest.fixture(autouse=True)
def clblast_best_here():
    backend_or_skip("clblast-best")


def _best_alone(net, only):
    """(config, output, oracle output) of clblast-best left `only` composition, or None where it was refused
    for a strided-batched GEMM that CLBlast computes wrong."""
    from backends.isolated import call_isolated
    try:
        return call_isolated("clblast-best check", "run_checks", "best_prepared", net, 2, None, 0, only)
    except Unsupported as exc:
        assert REASON in str(exc) and "\n" not in str(exc), exc
        return None


@pytest.mark.parametrize("only", ["pointer-batched-direct", "pointer-batched-indirect",
                                  "strided-batched-direct", "strided-batched-indirect"])
def test_every_attention_composition_is_right_or_refused(only):
    got = _best_alone(WINDOWS, only)
    if got is None:
        assert only.startswith("strided"), "only xGEMMSTRIDEDBATCHED is refused"
        return
    config, y, ref = got
    assert config["layers"]["cosine"].startswith(only + ":")
    check = compare_arrays(y, ref)
    assert check.passed, f"{only}: relative L2 error {check.rel_l2:.2e}"


@pytest.mark.parametrize("only", ["gemm-direct", "gemm-indirect", "gemm-batched-direct", "gemm-batched-indirect"])
def test_every_grouped_conv_composition_is_right_or_refused(only):
    got = _best_alone(GROUPED, only)
    if got is None:
        assert "batched" not in only, "only xGEMMSTRIDEDBATCHED is refused"
        return
    config, y, ref = got
    check = compare_arrays(y, ref)
    assert check.passed, f"{only}: relative L2 error {check.rel_l2:.2e}"


def test_only_a_call_with_offsets_or_gaps_between_its_matrices_is_tried(monkeypatch):
    from backends.clblast import strided
    from backends.clblast.strided import StridedGemm

    def tried(*args):
        raise AssertionError("a packed call was tried")
    monkeypatch.setattr(strided, "_try", tried)
    packed = StridedGemm(4, 6, 3, 4, 6, 6, (12, 18, 24), (0, 0, 0), a_transp=True)   # A stored 3 x 4
    strided.require_right(None, None, packed)
    assert packed.packed()
    assert not StridedGemm(4, 6, 3, 3, 6, 6, (12, 18, 24), (0, 5, 0)).packed()
    assert not StridedGemm(4, 6, 3, 3, 6, 6, (0, 18, 24), (0, 0, 0)).packed()   # the weights shared
