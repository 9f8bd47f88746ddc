"""scripts/zoo_survey.py's verdict for a net that fails end to end only (issue 45, EfficientNetV2L): the
net's conditioning when the framework's own float32 output is as far from its float64 one as ours from
the oracle, and a FAIL of ours when the framework's float32 is close to its float64."""
import importlib.util
from pathlib import Path

import numpy as np

_spec = importlib.util.spec_from_file_location("zoo_survey", Path(__file__).parent.parent / "scripts" / "zoo_survey.py")
survey = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(survey)

END_TO_END_ONLY = ("backend    check    rel L2    max abs    worst layer (rel L2)    top-1 agree    note\n"
                   "---------  -------  --------  ---------  ----------------------  -------------  ----\n"
                   "numpy      FAIL     1.4e+00   9.9e-01    block7a 3.1e-07         0%\n")
A_LAYER_WRONG = END_TO_END_ONLY.replace("block7a 3.1e-07", "block7a 2.0e-01")


def test_conditioning_is_said_when_the_framework_is_as_far_in_float32():
    line = survey._conditioning(END_TO_END_ONLY, 1.41, "keras")
    assert line.startswith("float32 itself: Keras's own float32 output is 1.4e+00") and "\n" not in line


def test_a_failure_stays_ours_when_the_framework_holds_in_float32_or_a_layer_is_wrong():
    assert survey._conditioning(END_TO_END_ONLY, 1e-6, "keras") == ""
    assert survey._conditioning(A_LAYER_WRONG, 1.41, "torchvision") == ""
    assert survey._conditioning(END_TO_END_ONLY, None, "keras") == ""


def test_framework_float32_error(tmp_path):
    y64 = np.array([[1.0, 2.0, 2.0]])
    np.save(tmp_path / "m-y64.npy", y64)
    np.save(tmp_path / "m-y.npy", (y64 + [[0.0, 0.0, 3.0]]).astype(np.float32))
    assert survey._framework_float32(tmp_path, "m", "keras") == 1.0   # |(0, 0, 3)| / |(1, 2, 2)|
    assert survey._framework_float32(tmp_path, "absent", "keras") is None


def test_a_model_checked_on_fewer_images_says_so(tmp_path):
    """compare check's refusal for the host's memory names how many images fit; the survey reads it, and its
    line then says the input was one image, measured against the framework's output on that image alone."""
    refusal = ("error: vit_h_14 at the 2 images of x.npy needs about 8.2 GiB of host memory (...), more than 80% "
               "of the 7.0 GiB available; an input of 1 images fits")
    assert survey.FITS.search(refusal).group(1) == "1"
    assert survey.FITS.search(refusal.replace("an input of 1 images fits", "not even batch 1 fits")) is None
    rows = [{"source": "torchvision", "model": "vit_h_14", "input": "224x224", "images": 1, "status": "PASS",
             "vs_framework": 1e-6},
            {"source": "torchvision", "model": "vit_b_16", "input": "224x224", "status": "PASS", "vs_framework": 1e-6}]
    table = survey.render(rows, "numpy")
    assert "| vit_h_14 | 224x224, 1 image | PASS |" in table and "| vit_b_16 | 224x224 | PASS |" in table
    assert "2 of 2 run" in table
    y = np.array([[1.0, 2.0], [5.0, 5.0]])
    np.save(tmp_path / "m-y.npy", y)
    (tmp_path / "m-outs").mkdir()
    np.save(tmp_path / "m-outs" / "numpy.npy", y[:1] * 1.5)   # ours on the first image alone
    assert survey._against_framework(tmp_path, "m", images=1) == 0.5


def test_redo_refuses_a_model_it_cannot_run(tmp_path, monkeypatch):
    """--redo of a model the survey does not list here (torchvision absent) would lose its kept line."""
    import pytest
    monkeypatch.setattr(survey, "torch_names", lambda: [])
    with pytest.raises(SystemExit):
        survey.main(["--out", str(tmp_path / "zoo.md"), "--redo", "vit_h_14"])
    assert not (tmp_path / "zoo.md").exists()


def test_statuses_skip_a_wrapped_cells_next_line():
    table = ("backend    check    rel L2    max abs    worst layer (rel L2)                  top-1 agree    note\n"
             "---------  -------  --------  ---------  ------------------------------------  -------------  ----\n"
             "numpy      PASS     3.5e-07   2.1e-06    features_features_5_features_5_3_mlp  100%\n"
             "                                         _mlp_3_MatMul 3.4e-07\n"
             "torch      FAIL     1.0e+00   2.0e+00    head 1.0e+00                          0%\n")
    assert survey._statuses(table) == {"numpy": "PASS", "torch": "FAIL"}
