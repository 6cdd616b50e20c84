"""Specifications of the ONNX target's Q/DQ quantization that the generated mutants of targets/onnx.py found
unchecked (docs/testing.md, "Generated mutants"): each activation's scale and zero point from its
calibrated range, computed from the definition."""

import numpy as np
import pytest
from graphs import chain

import lmu_edge
from lmu_edge.qlinear import RANGE16_HEADROOM

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


def test_each_activation_takes_the_scale_and_zero_point_of_its_calibrated_range():
    """Spec (``onnx.Calibration.qdq``): an int8 activation of calibrated range [lo, hi] gets the scale
    (max(hi, 0) - min(lo, 0)) / 255 and the zero point round(-128 - min(lo, 0) / scale) in [-128, 127]; an int16
    one (the LMU state path, or widened) max(-lo, hi) times RANGE16_HEADROOM / 32767 and zero point 0; a range
    of exactly 0 gets scale 1 at either width (never 0)."""
    from lmu_edge.targets import _stepplan, onnx

    rng = np.random.default_rng(24)
    g = lmu_edge.fold(chain(rng, q=4, theta=6.0))
    cal = onnx.Calibration(g, _stepplan.StatePlan(g), rng.standard_normal((2, 20, 2)).astype(np.float32))
    some = next(n for n in cal.names if n not in cal.wide_values and n != "x")
    cal.lo["flat"] = cal.hi["flat"] = 0.0
    cal.names.append("flat")
    for widened in (frozenset(), frozenset({some, "flat"})):
        qdq = cal.qdq(widened)
        bits = {n: qdq[n][2] for n in cal.names}
        assert {8, 16} <= set(bits.values())
        for n in cal.names:
            scale, zp, b = qdq[n]
            lo, hi = cal.lo[n], cal.hi[n]
            if b == 8:
                a = min(lo, 0.0)
                want = (max(hi, 0.0) - a) / 255 if max(hi, 0.0) > a else 1.0
                assert scale == pytest.approx(want, rel=1e-6), n
                assert zp == int(np.clip(round(-128 - a / want), -128, 127)), n
            else:
                r = max(-lo, hi, 0.0) * RANGE16_HEADROOM
                assert scale == pytest.approx(r / 32767 if r > 0 else 1.0, rel=1e-6) and zp == 0, n
        assert qdq["flat"][0] == 1.0 and qdq["flat"][2] == (16 if widened else 8)
