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
