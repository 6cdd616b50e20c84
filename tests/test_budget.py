"""The default error budget follows the target's state width; the report says which and why."""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from graphs import chain

import lmu_edge
from lmu_edge import folding as fold
from lmu_edge import ir

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("bits,expect", [(None, 1e-6), (8, 0.25 * 2.0**-7), (16, 0.25 * 2.0**-15), (32, 1e-6)])
def test_the_default_budget_is_a_quarter_lsb_of_the_state_at_least_1e6(bits, expect):
    b, why = fold.default_budget(bits)
    assert b == pytest.approx(expect, rel=1e-12)
    assert ("float" in why) if bits is None else (f"{bits}-bit state" in why and "LSB" in why)
    if bits == 32:
        assert "floored" in why


def test_state_width_of_each_target():
    # lmu_edge.precision decides the width; a target declares only where it differs (TFLite's int8 path)
    from lmu_edge import precision, registry

    def width(target, quantize, options):
        return precision.state_bits(quantize, options, registry.target(target))

    assert width("c", "float", {"state_bits": 16}) is None
    assert width("c", "int8", {"state_bits": 8}) == 8
    assert width("tflite", "int8", {"int8_state_path": "int8"}) == 8
    assert width("tflite", "int8", {"int8_state_path": "int8", "state_bits": 12}) == 12  # the user's width wins
    assert width("tflite", "int16x8", {}) == 16
    assert width("onnx", "int8", {}) == 16
    assert width("c", "int16", {}) == 32  # the int16 mode's default state
    assert width("c", "int16", {"state_bits": 24}) == 24
    assert width("c", "int16x8", {"state_bits": None}) == 16
    assert precision.state_bits("int8") == precision.DEFAULT_STATE_BITS


def test_the_state_width_default_is_written_once():
    # issue 56: the default 16 used to be written in four places; every module reads lmu_edge.precision
    import inspect

    from lmu_edge import precision, quantization

    assert inspect.signature(quantization.quantize).parameters["state_bits"].default == precision.DEFAULT_STATE_BITS
    src = "".join((ROOT / p).read_text() for p in ("targets/c.py", "lmu_edge/_cli_report.py", "lmu_edge/folding.py"))
    assert "STATE_BITS = {" not in src and "STATE_BITS.get(mode, 16)" not in src


def test_a_quantized_conversion_folds_to_the_state_budget_and_reports_it(tmp_path):
    rng = np.random.default_rng(9)
    g = chain(rng, q=64, theta=200.0)
    x = rng.standard_normal((2, 300, 2))
    # an 8-bit state's budget is a quarter of 2^-7
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        art = lmu_edge.convert(g, "c", tmp_path / "c8", quantize="int8", calibration=x, state_bits=8, measure=False)
    rep = json.loads((art.path / "report.json").read_text())
    assert rep["error_budget"]["value"] == pytest.approx(0.25 * 2.0**-7)
    assert "8-bit state" in rep["error_budget"]["why"]
    folded = lmu_edge.load(art.path / "model.lmu.npz")
    lay = folded.layers[1]
    assert lay.measurement.error <= 0.25 * 2.0**-7
    # a looser budget buys fewer substeps than the float budget would need
    strict = fold.candidates(g.layers[1], 1e-6, ["pade"])[0]
    loose = fold.candidates(g.layers[1], 0.25 * 2.0**-7, ["pade"])[0]
    assert loose.memory.substeps < strict.memory.substeps
    # a float conversion keeps 1e-6
    art = lmu_edge.convert(g, "c", tmp_path / "f", calibration=x, measure=False)
    rep = json.loads((art.path / "report.json").read_text())
    assert rep["error_budget"]["value"] == 1e-6 and "float" in rep["error_budget"]["why"]
    # a given budget is used as given
    art = lmu_edge.convert(g, "ir", tmp_path / "g", error_budget=1e-3)
    rep = json.loads((art.path / "report.json").read_text())
    assert rep["error_budget"] == {"value": 1e-3, "why": "given"}
    assert isinstance(lay.memory, (ir.DenseSS, ir.Pade, ir.RungeKutta))


def test_the_report_command_says_which_budget_it_used_and_why(tmp_path):
    import subprocess

    from conftest import lmu_edge_cli

    rng = np.random.default_rng(4)
    g = chain(rng, q=16, theta=60.0)
    model = lmu_edge.save(g, tmp_path / "m.lmu.npz")
    np.save(tmp_path / "x.npy", rng.standard_normal((4, 40, 2)))

    def report(out, *extra):
        args = ["report", model, "--data", tmp_path / "x.npy", "-o", tmp_path / out, "-q", *extra]
        r = subprocess.run(lmu_edge_cli() + [str(a) for a in args], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        rep = json.loads((tmp_path / out / "report.json").read_text())
        html = (tmp_path / out / "report.html").read_text()
        return r.stdout, rep, html

    # quantized with an 8-bit state: a quarter of its LSB, said in the output, the JSON and the HTML
    out, rep, html = report("q8", "--state-bits", "8", "-t", "c")
    assert rep["error_budget"]["value"] == pytest.approx(0.25 * 2.0**-7)
    assert "8-bit state" in rep["error_budget"]["why"] and "LSB" in rep["error_budget"]["why"]
    assert "error budget 0.00195: 8-bit state" in out
    assert "Error budget</b> of the LMU realizations: 0.00195 (8-bit state" in html
    (lay,) = rep["realizations"]
    assert lay["layer"] == g.layers[1].name and 0 <= lay["error"] <= 0.25 * 2.0**-7
    assert f"{lay['layer']}: {lay['realization']}, measured error" in out
    # TFLite keeps a 16-bit state next to an 8-bit C state: the widest state decides
    from lmu_edge._cli_report import report_budget

    b, why = report_budget(None, ("c", "tflite"), "int8", 8)
    assert b == pytest.approx(0.25 * 2.0**-15) and "16-bit state" in why and "widest" in why
    # float: 1e-6; a given budget is reported as given
    out, rep, html = report("f", "--quantize", "float", "-t", "ir")
    assert rep["error_budget"]["value"] == 1e-6 and "float target" in rep["error_budget"]["why"]
    out, rep, html = report("g", "--quantize", "float", "-t", "ir", "--error-budget", "1e-3")
    assert rep["error_budget"] == {"value": 1e-3, "why": "given"} and "error budget 0.001: given" in out
    # the implicit step is reported like any realization, under the 16-bit state's budget
    out, rep, html = report("p", "--realization", "pade", "-t", "c")
    (lay,) = rep["realizations"]
    assert lay["realization"].startswith("pade [3/4] x") and lay["error"] <= 0.25 * 2.0**-15
    assert rep["targets"][0]["bit_exact_host"] is True and rep["lmu"][0]["realization"].startswith("pade")
