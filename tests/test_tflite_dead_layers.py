"""TFLite conversion of a model with a layer that is 0 on every input (issue 52, generated seeds 26 and 30)."""

import sys
from pathlib import Path

import numpy as np
import pytest

import lmu_edge
from lmu_edge.metrics import sqnr_db

sys.path.insert(0, str(Path(__file__).resolve().parent))

import graphs  # noqa: E402  (tests/ joins sys.path first)

pytest.importorskip("tensorflow")


def _dead_then_bias(rng):
    # a Dense(4, relu) that is 0 on every input (a unit that died in training: the LMU's tanh outputs are
    # within -/+1, so each pre-activation is within -4 -/+ 0.06 n_mid), then a Dense(5) whose output is its bias
    pre, mid, _ = graphs.chain(rng, q=6, theta=12.0).layers
    n_mid = mid.out_features(3)
    dead = lmu_edge.ir.Dense("dead", rng.uniform(-0.06, 0.06, (n_mid, 4)), np.full(4, -4.0), "relu")
    head = lmu_edge.ir.Dense("head", rng.standard_normal((4, 5)), rng.standard_normal(5), "linear")
    return lmu_edge.ir.Graph("deadbias", input_features=2, seq_len=None, layers=(pre, mid, dead, head))


def test_tflite_int16x8_converts_a_bias_behind_a_dead_relu(tmp_path):
    # before: the dead relu calibrated on [0, 1.2e-38] (int16 scale 3.6e-43); the int16x8 quantizer grew the
    # head's weight scale until its bias fit input scale * weight scale, to infinity, stored every weight and
    # bias as 0, and lmu-edge refused the model ("tensor 'head/add' ... has the quantization scale inf")
    g = _dead_then_bias(np.random.default_rng(52))
    x = np.random.default_rng(1).uniform(-1, 1, (16, 24, 2))
    x2 = np.random.default_rng(2).uniform(-1, 1, (8, 24, 2))
    upto_dead = lmu_edge.ir.Graph("d", input_features=2, layers=g.layers[:3])
    assert not np.any(lmu_edge.simulate(upto_dead, x))  # 0 throughout
    y = lmu_edge.simulate(g, x2)
    lmu_edge.save(g, tmp_path / "m.lmu.npz")
    art = lmu_edge.convert(tmp_path / "m.lmu.npz", "tflite", tmp_path / "o", quantize="int16x8", calibration=x)
    assert sqnr_db(art.run(x2), y) >= 35.0  # the bias, at the int16x8 floor
