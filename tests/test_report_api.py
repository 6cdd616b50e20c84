"""The accuracy report's row for the integer API's own output (lmu_edge/report_trace.py): an int8 artifact whose
last layer has 16 bits converts its output to 8 bits, a tensor no float layer matches."""

import numpy as np
import pytest
from graphs import chain

import lmu_edge
from lmu_edge import report
from lmu_edge.metrics import sqnr_db


@pytest.mark.parametrize("reach", [0.5, 1.0])
def test_an_int8_api_narrower_than_the_last_layer_is_a_tensor_of_its_own(reach):
    """An int8 graph whose last layer has 16 bits converts its output to the int8 API at the calibrated range
    (issue 52's seed 175: a ReLU head, test outputs 1.39x that range, 36.5 dB at the last layer and 23.5 at the
    API, where the report's tensors ended at the last layer and blamed the LMU state). The conversion is a row of
    its own: its SQNR is the integer graph's output SQNR, it says how far the data go past its range and what
    share clips, and where it loses the most the diagnosis names it, and the clipping or the rounding. Calibrated
    on white noise, measured on constant inputs of ``reach`` (within the input's calibrated range), which the
    memory integrates: at 0.5 the outputs stay inside the API's range, at 1.0 they go past it."""
    g = lmu_edge.fold(chain(np.random.default_rng(175), n_in=2, q=8, theta=12.0))
    rng = np.random.default_rng(1)
    x_cal = rng.uniform(-1, 1, (8, 60, 2))
    x = reach * np.sign(rng.standard_normal((6, 1, 2))) * np.ones((6, 60, 2))
    qg = lmu_edge.quantize(g, x_cal, wide_layers=["pre", "lmu", "post"])
    assert isinstance(qg.layers[-1], lmu_edge.qir.QConvert)
    rows = report.tensor_table(g, qg, x)
    api, y = rows[-1], lmu_edge.simulate(g, x)
    assert [r["tensor"] for r in rows[-2:]] == ["out", "api"] and api["label"] == "model output at the int8 API"
    assert api["sqnr_db"] == pytest.approx(sqnr_db(lmu_edge.simulate(qg, x), y))
    lo, hi = api["type_range"]
    assert api["clipped"] == pytest.approx(float(np.mean((y < lo) | (y > hi))))
    assert (api["clipped"] > 0) == (reach == 1.0) == (api["range_used"] > 1), api
    assert api["sqnr_drop_db"] > 5, api  # the last layer's 16 bits are not where it is lost
    text = report.diagnose(rows)["text"]
    assert text.startswith("most of the error appears at model output at the int8 API"), text
    assert ("past it" in text) == (reach == 1.0) and ("rounds the last layer" in text) == (reach == 0.5), text
    # without a 16-bit last layer the API is that layer's own output: no row of its own
    plain = lmu_edge.quantize(g, x_cal)
    assert [r["tensor"] for r in report.tensor_table(g, plain, x)][-1] == "out"
