"""tflite target: emit, run in LiteRT and TFLite Micro, compare with the float oracle (lmu_edge.simulate)."""

import json

import numpy as np
import pytest

pytest.importorskip("tensorflow", reason="tensorflow not installed: pip install 'lmu-edge[tflite]'")
pytest.importorskip("ai_edge_litert", reason="ai-edge-litert not installed: pip install 'lmu-edge[tflite]'")
pytest.importorskip("tflite_micro", reason="tflite-micro not installed: pip install 'lmu-edge[tflite]'")

import lmu_edge  # noqa: E402
from lmu_edge import ir, lti  # noqa: E402
from lmu_edge.errors import ArtifactError  # noqa: E402
from lmu_edge.metrics import relative_error, sqnr_db  # noqa: E402

from graphs import chain  # noqa: E402

# float32 step models against the float64 oracle: the float32 rounding of a few hundred steps of a
# contracting recurrence stays near 1e-7 relative; 1e-5 is the bound.
FLOAT_TOL = 1e-5


def configurations():
    rng = np.random.default_rng(7)
    fir_kernel = lti.legendre_impulse_response(6, 10.0, 25)
    return {
        "memory_d2_dense": lmu_edge.fold(chain(rng, q=8, theta=12.0, d=2)),
        "rnn_path_simple_rnn": lmu_edge.fold(chain(rng, q=6, theta=10.0, d=2, hidden="simple_rnn", rnn_path=True)),
        "rk4": lmu_edge.fold(chain(rng, q=6, theta=10.0), "rk4"),
        "fir": lmu_edge.fold(chain(rng, q=6, theta=10.0, memory=ir.ImpulseResponse(fir_kernel, "truncated")), "fir"),
        "pooling": lmu_edge.fold(ir.Graph("pool", 2, chain(rng, q=6, theta=10.0).layers[:2]
                                          + (ir.TimePooling("pool"), ir.Dense("out", rng.standard_normal((5, 3)), None, "softmax")))),
        "last_step": lmu_edge.fold(chain(rng, q=6, theta=10.0, return_sequences=False, hidden=None)),
    }


CONFIGS = configurations()


@pytest.fixture(scope="module")
def float_artifacts(tmp_path_factory):
    d = tmp_path_factory.mktemp("tflite_float")
    return {k: lmu_edge.convert(g, "tflite", d / k) for k, g in CONFIGS.items()}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("runtime", ["litert", "tflm"])
def test_float_matches_the_oracle(float_artifacts, name, runtime):
    art = float_artifacts[name]
    x = np.random.default_rng(1).standard_normal((2, 60, 2))
    err = relative_error(art.run(x, runtime=runtime), lmu_edge.simulate(CONFIGS[name], x))
    assert err < FLOAT_TOL, (name, runtime, err)


@pytest.mark.slow
def test_float_report_and_files(float_artifacts):
    art = float_artifacts["memory_d2_dense"]
    rep = json.loads((art.path / "report.json").read_text())
    assert rep["verification"]["passed"] and rep["verification"]["error_vs_source_tflm"] < FLOAT_TOL
    assert rep["tflm_arena_bytes"] > 0 and rep["variant"] == "external"
    io = json.loads((art.path / "io.json").read_text())
    assert [d["name"] for d in io["inputs"]] == ["x", "L1_m"] and io["states"] == ["L1_m"]


@pytest.fixture(scope="module")
def internal(tmp_path_factory):
    g = CONFIGS["rnn_path_simple_rnn"]
    return g, lmu_edge.convert(g, "tflite", tmp_path_factory.mktemp("tfl_int") / "a", variant="internal")


@pytest.mark.slow
@pytest.mark.parametrize("runtime", ["litert", "tflm"])
def test_internal_state_streams_like_the_oracle_and_resets(internal, runtime):
    g, art = internal
    theta = g.layers[1].theta
    T = int(10 * theta)
    x = np.random.default_rng(2).standard_normal((T, 2))
    ref = lmu_edge.simulate(g, x)
    s = art.stream(runtime)
    s.reset()
    ys = np.stack([s.step(x_t) for x_t in x])
    assert relative_error(ys, ref) < FLOAT_TOL
    s.reset()
    again = np.stack([s.step(x_t) for x_t in x[:5]])
    np.testing.assert_allclose(again, ys[:5], rtol=0, atol=1e-6)     # reset really zeroes the variables
    io = json.loads((art.path / "io.json").read_text())
    assert {"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"} <= set(io["ops"])
    assert [d["name"] for d in io["inputs"]] == ["x"]


@pytest.mark.slow
def test_external_state_streams_over_ten_theta(float_artifacts):
    g = CONFIGS["memory_d2_dense"]
    art = float_artifacts["memory_d2_dense"]
    x = np.random.default_rng(3).standard_normal((2, 130, 2))
    ref = lmu_edge.simulate(g, x)
    s = art.stream("litert")
    s.reset(batch=2)
    ys = np.stack([s.step(x[:, t]) for t in range(130)], axis=1)
    assert relative_error(ys, ref) < FLOAT_TOL


def lmu_q64():
    """The issue's model: one q=64, theta=200 LMU (dense ZOH) with a tanh hidden layer."""
    rng = np.random.default_rng(11)
    return lmu_edge.fold(chain(rng, n_in=1, q=64, theta=200.0, units=8), "zoh")


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    g = lmu_q64()
    cal = np.random.default_rng(12).standard_normal((1, 2000, 1))
    d = tmp_path_factory.mktemp("tfl_q")
    return g, {q: lmu_edge.convert(g, "tflite", d / q, quantize=q, calibration=cal) for q in ("int8", "int16x8")}


@pytest.mark.slow
def test_int16x8_split_form_beats_the_plain_conversion(quantized):
    g, arts = quantized
    q = json.loads((arts["int16x8"].path / "report.json").read_text())["quantization"]
    # plain conversion: Abar as 8-bit weights (the issue measured ~14 dB); split form: >= 30 dB
    assert q["plain"]["sqnr_db_vs_float"] < 20
    assert q["sqnr_db_vs_float"] >= 30, q


@pytest.mark.slow
def test_int8_runs_in_tflite_micro_and_reports_its_error(quantized):
    g, arts = quantized
    art = arts["int8"]
    rep = json.loads((art.path / "report.json").read_text())
    assert rep["tflm_arena_bytes"] > 0
    q = rep["quantization"]
    assert np.isfinite(q["sqnr_db_vs_float"]) and "plain" in q
    io = json.loads((art.path / "io.json").read_text())
    assert {d["dtype"] for d in io["inputs"]} == {"int8"}
    x = np.random.default_rng(13).standard_normal((1, 300, 1))
    y_lite, y_micro = art.run(x, "litert"), art.run(x, "tflm")
    lsb = io["outputs"][0]["scale"]
    # LiteRT (XNNPACK / optimized kernels) and TFLite Micro (reference kernels) round some products
    # differently; the first steps agree within an LSB or two, later a 1-LSB difference in an 8-bit
    # recurrent state is carried on, so over the sequence only the error against float is comparable.
    assert np.max(np.abs(y_lite[:, :3] - y_micro[:, :3])) <= 2.01 * lsb
    ref = lmu_edge.simulate(g, x)
    assert abs(sqnr_db(y_micro, ref) - sqnr_db(y_lite, ref)) < 3


def test_tflite_runtime_needs_its_python(float_artifacts, monkeypatch):
    monkeypatch.delenv("LMU_EDGE_TFLITE_RUNTIME_PYTHON", raising=False)
    with pytest.raises(ArtifactError, match="LMU_EDGE_TFLITE_RUNTIME_PYTHON"):
        float_artifacts["fir"].run(np.zeros((1, 3, 2)), runtime="tflite-runtime")


@pytest.mark.slow
def test_tflite_runtime_worker_when_configured(float_artifacts):
    import os
    if not os.environ.get("LMU_EDGE_TFLITE_RUNTIME_PYTHON"):
        pytest.skip("LMU_EDGE_TFLITE_RUNTIME_PYTHON (a numpy<2 Python with tflite-runtime) not set; "
                    "tests/numpy1/test_tflite_runtime.py covers this runtime")
    art = float_artifacts["memory_d2_dense"]
    x = np.random.default_rng(4).standard_normal((2, 40, 2))
    assert relative_error(art.run(x, runtime="tflite-runtime"), lmu_edge.simulate(CONFIGS["memory_d2_dense"], x)) < FLOAT_TOL
