"""onnx target: emit, check, run in ONNX Runtime and onnx.reference, compare with lmu_edge.simulate."""

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx not installed: pip install 'lmu-edge[onnx]'")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed: pip install 'lmu-edge[onnx]'")

from graphs import chain  # noqa: E402  (tests/graphs.py: small seeded IR graphs)
from test_targets_tflite import CONFIGS, lmu_q64  # noqa: E402  (after the importorskip checks; the same model configurations)

import lmu_edge  # noqa: E402  (after the importorskip checks)
from lmu_edge.metrics import relative_error, sqnr_db  # noqa: E402  (after the importorskip checks)

FLOAT_TOL = 1e-5  # float32 models against the float64 oracle (see test_targets_tflite)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    d = tmp_path_factory.mktemp("onnx")
    return {k: lmu_edge.convert(g, "onnx", d / k) for k, g in CONFIGS.items()}


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("runtime", ["onnxruntime", "onnx-reference"])
def test_float_matches_the_oracle(artifacts, name, runtime):
    x = np.random.default_rng(1).standard_normal((2, 60, 2))
    err = relative_error(artifacts[name].run(x, runtime=runtime), lmu_edge.simulate(CONFIGS[name], x))
    assert err < FLOAT_TOL, (name, runtime, err)


@pytest.mark.parametrize("name", ["memory_d2_dense", "rk4"])
def test_models_pass_the_full_checker_at_opset_19(artifacts, name):
    for f in ("step.onnx", "sequence.onnx"):
        m = onnx.load(artifacts[name].path / f)
        onnx.checker.check_model(m, full_check=True)
        assert m.opset_import[0].version >= 19
    seq = onnx.load(artifacts[name].path / "sequence.onnx")
    assert [n.op_type for n in seq.graph.node] == ["Scan"]


def test_step_model_streams_like_the_sequence_model_and_resets(artifacts):
    g = CONFIGS["rnn_path_simple_rnn"]
    T = int(10 * g.layers[1].theta)
    x = np.random.default_rng(2).standard_normal((2, T, 2))
    ref = lmu_edge.simulate(g, x)
    s = artifacts["rnn_path_simple_rnn"].stream()
    s.reset(batch=2)
    ys = np.stack([s.step(x[:, t]) for t in range(T)], axis=1)
    assert relative_error(ys, ref) < FLOAT_TOL
    s.reset()
    np.testing.assert_allclose(s.step(x[0, 0]), ys[0, 0], rtol=0, atol=1e-7)


@pytest.mark.slow
def test_int8_qdq_is_measured(tmp_path):
    g = lmu_q64()
    cal = np.random.default_rng(12).standard_normal((1, 1000, 1))
    art = lmu_edge.convert(g, "onnx", tmp_path / "q", quantize="int8", calibration=cal)
    m = onnx.load(art.path / "step.onnx")
    ops = {n.op_type for n in m.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    q = json.loads((art.path / "report.json").read_text())["quantization"]
    # measured on this seed (2026-11-24): 26.8 dB, error 0.076 of the output scale; a wrong scale or a
    # dropped state Q/DQ pair costs far more
    assert q["sqnr_db_vs_float"] >= 24.0 and q["error_vs_float"] < 0.1, q
    x = cal[:, :200]
    y_ort, y_ref = art.run(x), art.run(x, runtime="onnx-reference")
    # ORT fuses QDQ into integer kernels, the reference evaluator computes Q/DQ in float: compared
    # against float with the same bound, not bit for bit
    ref = lmu_edge.simulate(g, x)
    assert relative_error(y_ref, ref) < 2 * max(relative_error(y_ort, ref), 0.05)


@pytest.mark.slow
def test_int8_qdq_keeps_the_lmu_state_at_16_bits(tmp_path):
    # the state integrates over theta steps: at 8 bits it cost 5-10 dB; opset 21 Q/DQ carry int16
    g = lmu_q64()
    rng = np.random.default_rng(21)
    cal, x = rng.standard_normal((1, 600, 1)), rng.standard_normal((1, 300, 1))
    art = lmu_edge.convert(g, "onnx", tmp_path / "q", quantize="int8", calibration=cal)
    m = onnx.load(art.path / "step.onnx")
    assert m.opset_import[0].version >= 21
    zp = {i.name: onnx.numpy_helper.to_array(i).dtype for i in m.graph.initializer if i.name.endswith("_qz")}
    state = [n for n in zp if n.startswith("L") and n.endswith("_m_qz")]
    assert state and all(zp[n] == np.int16 for n in state)
    assert any(d == np.int8 for d in zp.values())  # the other activations stay 8-bit
    ref = lmu_edge.simulate(g, x)
    # measured 22.6 dB (ONNX Runtime) on this order-64 model; the floor (30 dB) is not met yet:
    # the 8-bit activations around the memory are the remaining error (see docs/matrix.md)
    assert sqnr_db(art.run(x), ref) >= 21.0
    assert sqnr_db(art.run(x, runtime="onnx-reference"), ref) >= 21.0


def test_int8_qdq_with_signed_activations_meets_the_floor(tmp_path):
    """A model whose int8 activations take both signs (ReLU Dense, LMU with a tanh hidden cell, linear Dense):
    every zero point matters. Measured 34.9 dB (ONNX Runtime) and 35.6 dB (reference evaluator) on this
    seed (2026-11-25); a zero point computed with the wrong sign gives 20.0 dB."""
    rng = np.random.default_rng(31)
    g = lmu_edge.fold(chain(rng, q=8, theta=12.0), "zoh")
    cal, x = rng.standard_normal((2, 200, 2)), rng.standard_normal((2, 200, 2))
    art = lmu_edge.convert(g, "onnx", tmp_path / "q", quantize="int8", calibration=cal)
    ref = lmu_edge.simulate(g, x)
    assert sqnr_db(art.run(x), ref) >= 33.0
    assert sqnr_db(art.run(x, runtime="onnx-reference"), ref) >= 33.0
