"""The step model's states (targets/_stepplan.py), which the TFLite and ONNX targets share.

Issue 52, seed 29: an LMUFeedforward of order 1 at theta 1 with Euler's discretization has ``Abar = 0``, so
its memory folds to an FIR of one tap. Its ring buffer held no past input that any step read: TFLite's
converter left that unread state input in float (int8: an internal error setting it, int16x8: refused)
and ONNX's calibration took the range of its empty slice (an internal error). A one-tap FIR without
``memory_to_memory`` now has no state; with it, the buffer is read and kept.
"""

import numpy as np
import pytest
from graphs import lmu

import lmu_edge
from lmu_edge import ir
from lmu_edge.metrics import sqnr_db
from lmu_edge.targets import _stepplan

FLOORS = {("tflite", "int8"): 30.0, ("tflite", "int16x8"): 35.0, ("onnx", "int8"): 30.0}


def _one_tap(rnn_path=False):
    rng = np.random.default_rng(29)
    pre = ir.Dense("pre", rng.standard_normal((2, 3)), rng.standard_normal(3) * 0.1, "relu")
    mid = lmu(rng, n_in=3, d=3, q=1, theta=1.0, disc="euler", memory=ir.FIR(np.array([[1.0]])), rnn_path=rnn_path)
    post = ir.Dense("post", rng.standard_normal((mid.out_features(3), 4)) * 0.5, None, "linear")
    return ir.Graph("one_tap", input_features=2, seq_len=None, layers=(pre, mid, post))


def test_a_one_tap_fir_keeps_a_buffer_only_where_its_feedback_reads_it():
    assert [s for s in _stepplan.state_spec(_one_tap()) if s[2] == "buf"] == []
    assert [s[3] for s in _stepplan.state_spec(_one_tap(rnn_path=True)) if s[2] == "buf"] == [3]


@pytest.mark.parametrize(("target", "mode"), list(FLOORS))
def test_a_one_tap_fir_converts_in_integers_and_meets_its_floor(tmp_path, target, mode):
    g = _one_tap()
    x = np.random.default_rng(1).uniform(-1, 1, (16, 24, 2))
    art = lmu_edge.convert(g, target, tmp_path / "o", quantize=mode, calibration=x, accuracy_report=False)
    x2 = np.random.default_rng(2).uniform(-1, 1, (8, 24, 2))
    assert sqnr_db(np.asarray(art.run(x2), np.float64), lmu_edge.simulate(g, x2)) >= FLOORS[(target, mode)]
