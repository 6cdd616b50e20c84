"""tflite target: emit, run in LiteRT and TFLite Micro, compare with the float oracle (lmu_edge.simulate)."""

import json
import re

import numpy as np
import pytest

pytest.importorskip("tensorflow", reason="tensorflow not installed: pip install 'lmu-edge[tflite]'")
pytest.importorskip("ai_edge_litert", reason="ai-edge-litert not installed: pip install 'lmu-edge[tflite]'")
pytest.importorskip("tflite_micro", reason="tflite-micro not installed: pip install 'lmu-edge[tflite]'")

from conftest import matrix_model  # noqa: E402  (after the importorskip checks)
from target_models import CONFIGS, lmu_q64  # noqa: E402  (after the importorskip checks; shared with the ONNX tests)

import lmu_edge  # noqa: E402  (after the importorskip checks)
from lmu_edge import ir  # noqa: E402  (after the importorskip checks)
from lmu_edge.errors import ArtifactError  # noqa: E402  (after the importorskip checks)
from lmu_edge.metrics import relative_error, sqnr_db  # noqa: E402  (after the importorskip checks)
from lmu_edge.targets import _stepplan  # noqa: E402  (after the importorskip checks)

# float32 step models against the float64 oracle: the float32 rounding of a few hundred steps of a
# contracting recurrence stays near 1e-7 relative; 1e-5 is the bound.
FLOAT_TOL = 1e-5


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


#: a name TensorFlow or its converter makes up (``add_24``, ``MatMul_3``, ``arith.constant``,
#: ``serving_default_x:0``, ``PartitionedCall:0``): what tensors were called before issue 55
GENERATED = re.compile(r"^([A-Za-z]+(_\d+)?|arith\.constant\d*|serving_default_.*|PartitionedCall:\d+)$")


def _names_after_layers(model_path, graph):
    """The tensors of a .tflite file whose name is neither a layer's (``lmu.memory/MatMul``, ``dense/Relu``,
    joined by ``;`` where the converter fused ops) nor the streaming contract's (``x``, ``y``, each state and
    its ``_out``, with the suffix of an int8 / int16 copy), and the made-up ones."""
    from ai_edge_litert.interpreter import Interpreter

    states = [n for n, *_ in _stepplan.state_spec(graph)]
    contract = ["x", "y"] + states + [f"{n}_out" for n in states]
    layers = [re.sub(r"[^A-Za-z0-9_.\-]", "_", layer.name) for layer in graph.layers]
    bad = []
    for d in Interpreter(model_path=str(model_path)).get_tensor_details():
        for part in d["name"].split(";"):
            ours = any(part == c or part.startswith(c + "_") for c in contract)
            ours = ours or any(part.startswith((f"{ln}/", f"{ln}.")) for ln in layers)
            if GENERATED.match(part) and part not in contract or not ours:
                bad.append(d["name"])
    return bad


def _lmu_name(graph) -> str:
    return next(layer.name for layer in graph.layers if isinstance(layer, ir.LMU))


@pytest.mark.slow
def test_every_tensor_a_user_sees_is_named_after_its_layer(float_artifacts, quantized):
    """Issue 55: Netron, ``get_tensor_details`` and the widening messages showed ``add_24`` and
    ``MatMul_3;add_2``. Every tensor of the float models of the six configurations (each realization; Dense,
    LMU with and without a hidden cell, SimpleRNN, pooling) and of the int8 (int16 state path spliced in,
    widened) and int16x8 models is named after its layer and part, or after the streaming contract."""
    for name, art in float_artifacts.items():
        assert _names_after_layers(art.path / "model.tflite", CONFIGS[name]) == [], name
    g, arts = quantized
    for q in ("int8", "int16x8"):
        assert _names_after_layers(arts[q].path / "model.tflite", g) == [], q


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
    np.testing.assert_allclose(again, ys[:5], rtol=0, atol=1e-6)  # reset really zeroes the variables
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


CAL = np.random.default_rng(12).standard_normal((1, 2000, 1))


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    """The split form (the default) of both modes, and the plain conversion of each for comparison."""
    g = lmu_q64()
    d = tmp_path_factory.mktemp("tfl_q")
    arts = {
        q: lmu_edge.convert(g, "tflite", d / q, quantize=q, calibration=CAL, compare_plain=True)
        for q in ("int8", "int16x8")
    }
    arts.update(
        {
            f"{q}_plain": lmu_edge.convert(
                g, "tflite", d / f"{q}_plain", quantize=q, calibration=CAL, form="plain", compare_plain=False
            )
            for q in ("int8", "int16x8")
        }
    )
    return g, arts


@pytest.mark.slow
def test_int16x8_split_form_beats_the_plain_conversion(quantized):
    g, arts = quantized
    q = json.loads((arts["int16x8"].path / "report.json").read_text())["quantization"]
    # plain conversion: Abar as 8-bit weights (the issue measured ~14 dB); split form: measured 41.06 dB,
    # the plain one 15.49 with per-channel weights; 40.26 and 12.19 with the per-tensor weights TFLite
    # Micro's CMSIS-NN kernels need (issue 52; the conversion is deterministic)
    assert 11.5 <= q["plain"]["sqnr_db_vs_float"] < 13.0, q["plain"]
    assert q["sqnr_db_vs_float"] >= 40.0, q


@pytest.mark.slow
def test_int8_with_an_int16_state_path_beats_the_plain_conversion(quantized):
    g, arts = quantized
    rep = json.loads((arts["int8"].path / "report.json").read_text())
    q = rep["quantization"]
    # plain full-int8 conversion: Abar as 8-bit weights and an 8-bit state (the issue measured 12.7 dB);
    # split form with the int16 state path: 34.5 dB, below widen_db, so the hidden TANH and the input join
    # it: 37.9 (the TANH alone gave 35.8, short of 36); with the state path's per-tensor weights (issue 52,
    # TFLite Micro's CMSIS-NN kernels) 33.9 and 36.8 dB
    # README: 37.9 dB against the plain converter's 12
    assert q["state_path"] == "int16" and 11.5 <= q["plain"]["sqnr_db_vs_float"] < 12.5, q["plain"]
    assert q["sqnr_db_vs_float"] >= 36.5, q
    # the operators by their layer (issue 55: "TANH -> Tanh" named none)
    assert q["widened"] == [f"TANH -> {_lmu_name(g)}.hidden/Tanh", "input x"] and 33.5 < q["int8_sqnr_db"] < 35.0, q
    io = json.loads((art_io := arts["int8"].path / "io.json").read_text())
    dtypes = {d["name"]: d["dtype"] for d in io["inputs"] + io["outputs"]}
    assert dtypes == {"x": "int16", "y": "int8", "L1_m": "int16", "L1_m_out": "int16"}, art_io
    # builtin kernels that TFLite Micro has for int8 and int16x8 (FULLY_CONNECTED int16 in / int64 bias,
    # ADD and MUL int16, QUANTIZE int8 <-> int16)
    assert set(io["ops"]) == {"FULLY_CONNECTED", "ADD", "MUL", "QUANTIZE", "TANH"}
    assert rep["tflm_arena_bytes"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["int8", "int16x8"])
@pytest.mark.parametrize("runtime", ["litert", "tflm"])
def test_quantized_streams_at_30_db_in_each_runtime(quantized, mode, runtime):
    """2000 fresh white-noise steps, streamed with the state fed back as raw integers, as on a device."""
    g, arts = quantized
    x = np.random.default_rng(14).standard_normal((1, 2000, 1))
    ref = lmu_edge.simulate(g, x)
    split, plain = sqnr_db(arts[mode].run(x, runtime), ref), sqnr_db(arts[f"{mode}_plain"].run(x, runtime), ref)
    assert plain < 20 and split >= 30, (mode, runtime, split, plain)


@pytest.mark.slow
def test_int8_litert_and_tflite_micro_agree(quantized):
    g, arts = quantized
    art = arts["int8"]
    io = json.loads((art.path / "io.json").read_text())
    x = np.random.default_rng(13).standard_normal((1, 300, 1))
    y_lite, y_micro = art.run(x, "litert"), art.run(x, "tflm")
    lsb = io["outputs"][0]["scale"]
    # LiteRT (optimized kernels) and TFLite Micro (reference kernels) round some products differently;
    # the state is int16, so a difference of an LSB in it does not grow: the int8 outputs stay within
    # two LSBs over the whole sequence, as docs/tflite_onnx.md says, and differ on a few percent of them
    # (measured: 77 of 1200 by one LSB, 3 by two; 39 / 0 before the int16 ranges got 2x headroom)
    diff = np.rint(np.abs(y_lite - y_micro) / lsb)
    assert np.max(diff) <= 2
    assert 0.0 <= np.mean(diff > 0) <= 0.10, np.mean(diff > 0)
    ref = lmu_edge.simulate(g, x)
    assert abs(sqnr_db(y_micro, ref) - sqnr_db(y_lite, ref)) < 1


@pytest.mark.slow
def test_int8_all_int8_state_path_is_still_available(tmp_path):
    """``int8_state_path="int8"``: every tensor int8 (the state rounded to 8 bits each step, ~12 dB)."""
    g = lmu_q64()
    art = lmu_edge.convert(
        g,
        "tflite",
        tmp_path / "a",
        quantize="int8",
        calibration=CAL[:, :500],
        int8_state_path="int8",
        compare_plain=False,
    )
    io = json.loads((art.path / "io.json").read_text())
    assert {d["dtype"] for d in io["inputs"] + io["outputs"]} == {"int8"} and "QUANTIZE" not in io["ops"]
    q = json.loads((art.path / "report.json").read_text())["quantization"]
    assert q["state_path"] == "int8" and q["sqnr_db_vs_float"] < 25


@pytest.mark.slow
def test_int8_state_path_with_a_reshaped_state(tmp_path):
    """memory_d=2 reshapes the state to (d, q): the RESHAPE's input and output must keep one scale
    when the state's input and output scales are tied (they differed by 20 %: 3.6 dB before)."""
    g = CONFIGS["memory_d2_dense"]
    cal = np.random.default_rng(1).standard_normal((2, 100, 2))
    art = lmu_edge.convert(g, "tflite", tmp_path / "a", quantize="int8", calibration=cal, compare_plain=False)
    q = json.loads((art.path / "report.json").read_text())["quantization"]
    assert q["state_path"] == "int16" and q["sqnr_db_vs_float"] >= 30, q


def test_representative_steps_hold_the_calibration_extremes():
    """The converter calibrates on a subset of the calibration steps (representative_samples): the
    subset must hold each input and output column's extremes, or the int8 input and output clip there
    (a random 1,000 of the matrix's 2,560 steps missed the input's minimum, -2.47 against -2.15)."""
    from lmu_edge.targets import _stepplan

    g = CONFIGS["memory_d2_dense"]
    x = np.random.default_rng(5).standard_normal((4, 300, 2))
    full, sub = _stepplan.record(g, x), _stepplan.record(g, x, max_samples=100)
    assert 100 <= len(sub["x"]) <= 100 + 2 * (x.shape[2] + full["y"].shape[1])
    for k in ("x", "y"):
        assert np.array_equal(sub[k].min(axis=0), full[k].min(axis=0)), k
        assert np.array_equal(sub[k].max(axis=0), full[k].max(axis=0)), k


@pytest.mark.slow
def test_int8_widens_the_operators_8_bits_cannot_carry(tmp_path):
    """The matrix's sigmoid model (a sigmoid hidden cell, a tanh Activation as output): with only the LMU
    state path at 16 bits, 27.9 dB on the calibration data (28.2 on the test data), below 30. int8 takes
    the fewest more operators into the int16 path that lift the calibration SQNR to widen_db (36 dB or,
    where every candidate 16-bit misses it, within 0.5 dB of that); the int8 output then takes its
    calibrated range instead of the TANH's fixed [-1, 1] (8 bits over [-1, 1] held it to 29 dB).
    Measured 36.7 dB on the test data; the input and the output stay int8; TFLite Micro runs it."""
    from lmu_edge.targets import tflite as tflite_target

    src, x_cal, x_test, y_ref = matrix_model("ff_sigmoid_anylen_activation")
    art = lmu_edge.convert(src, "tflite", tmp_path / "w", quantize="int8", calibration=x_cal, compare_plain=False)
    q = json.loads((art.path / "report.json").read_text())["quantization"]
    assert q["widen_db"] == tflite_target.WIDEN_DB == 36.0
    assert q["int8_sqnr_db"] < 29.0 and q["sqnr_db_vs_float"] >= 33.0, q
    assert any(w.startswith("TANH") for w in q["widened"]), q["widened"]
    io = json.loads((art.path / "io.json").read_text())
    dtypes = {d["name"]: d["dtype"] for d in io["inputs"] + io["outputs"]}
    assert dtypes["x"] == dtypes["y"] == "int8", dtypes
    y_scale = next(d["scale"] for d in io["outputs"] if d["name"] == "y")
    assert y_scale < 0.5 * 2.0 / 255, y_scale  # narrower than [-1, 1]: the calibrated range
    assert sqnr_db(art.run(x_test), y_ref) >= 30.0
    y_lite, y_micro = art.run(x_test[:8], "litert"), art.run(x_test[:8], "tflm")
    assert np.max(np.rint(np.abs(y_lite - y_micro) / y_scale)) <= 2
    # off: the state path alone, as before
    off = lmu_edge.convert(
        src, "tflite", tmp_path / "o", quantize="int8", calibration=x_cal, compare_plain=False, widen_db=None
    )
    qo = json.loads((off.path / "report.json").read_text())["quantization"]
    assert "widened" not in qo and abs(qo["sqnr_db_vs_float"] - q["int8_sqnr_db"]) < 1e-9
    with pytest.raises(lmu_edge.errors.QuantizationError, match="widen_db"):
        lmu_edge.convert(src, "tflite", tmp_path / "b", quantize="int8", calibration=x_cal, widen_db="high")
    assert not (tmp_path / "b").exists()


@pytest.mark.slow
def test_int8_widening_makes_the_input_int16_where_8_bits_of_it_cap_the_model(tmp_path):
    """The RNN-path matrix model is held by an int8 input: the float64 model fed the int8-rounded test
    inputs is 24.9 dB from the float64 model (29.0 on the calibration data), so no choice of 16-bit
    operators behind an int8 input reaches 30 dB (25.5 dB until 2026-11-27). int8 makes the input
    int16 (read by the int16 state path directly) and nothing more: measured 34.5 dB on the test data.
    The output stays int8; TFLite Micro gives LiteRT's outputs."""
    src, x_cal, x_test, y_ref = matrix_model("rnn_h2m_m2m_simplernn")
    art = lmu_edge.convert(src, "tflite", tmp_path / "w", quantize="int8", calibration=x_cal, compare_plain=False)
    q = json.loads((art.path / "report.json").read_text())["quantization"]
    assert q["widened"] == ["input x"], q
    io = json.loads((art.path / "io.json").read_text())
    dtypes = {d["name"]: d["dtype"] for d in io["inputs"] + io["outputs"]}
    assert dtypes["x"] == "int16" and dtypes["y"] == "int8", dtypes
    # an int8 input at the calibration data's range caps the model below 30 dB
    lo, hi = min(float(x_cal.min()), 0.0), max(float(x_cal.max()), 0.0)
    sc = (hi - lo) / 255.0
    zp = int(np.clip(round(-128 - lo / sc), -128, 127))
    cap = sqnr_db(lmu_edge.simulate(src, (np.clip(np.rint(x_test / sc) + zp, -128, 127) - zp) * sc), y_ref)
    assert cap < 27.0, cap
    assert sqnr_db(art.run(x_test), y_ref) >= 30.0
    assert q["sqnr_db_vs_float"] >= 30.0 > q["int8_sqnr_db"]
    np.testing.assert_array_equal(art.run(x_test[:4], "litert"), art.run(x_test[:4], "tflm"))


def test_tflite_runtime_needs_its_python(float_artifacts, monkeypatch):
    monkeypatch.delenv("LMU_EDGE_TFLITE_RUNTIME_PYTHON", raising=False)
    with pytest.raises(ArtifactError, match="LMU_EDGE_TFLITE_RUNTIME_PYTHON"):
        float_artifacts["fir"].run(np.zeros((1, 3, 2)), runtime="tflite-runtime")


@pytest.mark.slow
def test_tflite_runtime_worker_when_configured(float_artifacts):
    import os

    if not os.environ.get("LMU_EDGE_TFLITE_RUNTIME_PYTHON"):
        pytest.skip(
            "LMU_EDGE_TFLITE_RUNTIME_PYTHON (a numpy<2 Python with tflite-runtime) not set; "
            "tests/numpy1/test_tflite_runtime.py covers this runtime"
        )
    art = float_artifacts["memory_d2_dense"]
    x = np.random.default_rng(4).standard_normal((2, 40, 2))
    err = relative_error(art.run(x, runtime="tflite-runtime"), lmu_edge.simulate(CONFIGS["memory_d2_dense"], x))
    assert err < FLOAT_TOL


@pytest.mark.slow
def test_int16_ranges_get_headroom_and_stay_consistent(tmp_path, monkeypatch):
    """int16x8: every int16 activation's range doubled (a state driven past the calibration range is not
    clipped), except tensors tied to a fixed-scale op (TANH, LOGISTIC, SOFTMAX) or a constant; a state
    and its update keep one quantization; each FULLY_CONNECTED bias scale stays input scale * weight
    scale. On ff_linear_td_before of the layer-option matrix calibrated on its first 16 sequences (as the
    matrix was before 2026-11-26: the test inputs then pass the calibrated ranges), without and with the
    headroom: 35.3 and 42.1 dB; with all 64 calibration sequences both give 43.5 dB (2026-11-26); 35.3 and
    40.0 with the per-tensor weights of issue 52 (TFLite Micro's CMSIS-NN kernels)."""
    from pathlib import Path

    from tensorflow.lite.tools import flatbuffer_utils as fb

    from lmu_edge.targets import _tflite_build

    here = Path(__file__).resolve().parents[1] / "examples" / "matrix"
    data = np.load(here / "ff_linear_td_before.npz")
    src = lmu_edge.load(here / "ff_linear_td_before.keras")
    y = lmu_edge.simulate(src, data["x_test"].astype(np.float64))
    got = {}
    for h in (1.0, 2.0):
        monkeypatch.setattr(_tflite_build, "RANGE16_HEADROOM", h)
        art = lmu_edge.convert(
            src, "tflite", tmp_path / str(h), quantize="int16x8", calibration=data["x_cal"][:16], tolerance=float("inf")
        )
        got[h] = (sqnr_db(art.run(data["x_test"]), y), (art.path / "model.tflite").read_bytes())
    assert got[2.0][0] >= 35.0 and got[2.0][0] >= got[1.0][0] + 4, {h: g[0] for h, g in got.items()}

    def tensors(model):
        m = fb.convert_bytearray_to_object(bytearray(model))
        return m, m.subgraphs[0]

    m1, s1 = tensors(got[1.0][1])
    m2, s2 = tensors(got[2.0][1])
    code = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in m2.operatorCodes]
    tanh_side = {
        t for op in s2.operators if code[op.opcodeIndex] in (14, 28, 25) for t in list(op.inputs) + list(op.outputs)
    }
    ratios = []
    for i, (a, b) in enumerate(zip(s1.tensors, s2.tensors, strict=True)):
        if (
            a.type == 7
            and a.quantization is not None
            and a.quantization.scale is not None
            and len(a.quantization.scale) == 1
        ):
            r = float(b.quantization.scale[0]) / float(a.quantization.scale[0])
            ratios.append(r)
            assert r == pytest.approx(2.0) or r == pytest.approx(1.0), (i, r)
            if i in tanh_side:
                assert r == pytest.approx(1.0)
    assert ratios.count(pytest.approx(2.0)) >= 5
    for op in s2.operators:  # the bias scale of every FULLY_CONNECTED is still input scale * weight scale
        if code[op.opcodeIndex] == 9 and len(op.inputs) > 2 and op.inputs[2] >= 0:
            x, w, bias = (s2.tensors[t].quantization for t in op.inputs[:3])
            want = float(x.scale[0]) * np.asarray(w.scale, np.float64)
            np.testing.assert_allclose(np.asarray(bias.scale, np.float64), want, rtol=1e-6)
    # a state and its update share one quantization, also where the update is a TANH output (fixed
    # scale): the SimpleRNN state h of the RNN-path matrix model
    rnn = np.load(here / "rnn_h2m_m2m_simplernn.npz")
    art = lmu_edge.convert(
        here / "rnn_h2m_m2m_simplernn.keras",
        "tflite",
        tmp_path / "rnn",
        quantize="int16x8",
        calibration=rnn["x_cal"],
        tolerance=float("inf"),
    )
    m3, s3 = tensors((art.path / "model.tflite").read_bytes())
    sig = m3.signatureDefs[0]

    def name(t):
        return t.name.decode() if isinstance(t.name, bytes) else t.name

    outs = {name(t): t.tensorIndex for t in sig.outputs}
    pairs = [(t.tensorIndex, outs[f"{name(t)}_out"]) for t in sig.inputs if f"{name(t)}_out" in outs]
    assert len(pairs) == 2  # the memory m and the hidden state h
    for ti, to in pairs:
        a, b = s3.tensors[ti].quantization, s3.tensors[to].quantization
        assert float(a.scale[0]) == float(b.scale[0]) and list(a.zeroPoint) == list(b.zeroPoint)


@pytest.mark.slow
def test_int16x8_gets_gptq_weights_and_beats_the_converters_own_rounding(tmp_path):
    # docs/matrix.md: with int16x8 the step model's weights are rounded by GPTQ before the converter sees
    # them (targets/_tflite_gptq.py, gptq_weights), each channel's largest weight at 127 steps of the chosen
    # scale, so the converter's per-channel max |w| / 127 keeps them. On the layer-option matrix's
    # rnn_tt_euler_dense_seq: 33.2 dB with the converter's rounding, 36.4 dB with GPTQ's (floor 35 dB);
    # with per-tensor weights (issue 52: one scale per matrix, uneven ones split) 36.7 and 44.0 dB.
    from ai_edge_litert.interpreter import Interpreter

    from lmu_edge.rounding import on_grid

    src, x_cal, x_test, y = matrix_model("rnn_tt_euler_dense_seq")
    kw = dict(quantize="int16x8", calibration=x_cal, compare_plain=False)
    on = lmu_edge.convert(src, "tflite", tmp_path / "on", **kw)
    off = lmu_edge.convert(src, "tflite", tmp_path / "off", weight_rounding="nearest", **kw)
    rep = {k: json.loads((a.path / "report.json").read_text())["quantization"] for k, a in (("on", on), ("off", off))}
    assert rep["on"]["weight_rounding"] == "gptq" and rep["off"]["weight_rounding"] == "nearest"
    s_on, s_off = (sqnr_db(a.run(x_test), y) for a in (on, off))
    assert s_on >= 35.0 and s_on >= s_off + 5, (s_on, s_off)
    # the Dense after the LMU (6 inputs, 1 output; no state scaling): the converter's own rounding is the
    # nearest point of W's grid, GPTQ's is another point with 127 steps at its largest weight
    W = next(lay for lay in src.layers if isinstance(lay, ir.Dense)).kernel

    def dense_kernel(art):
        it = Interpreter(model_path=str(art.path / "model.tflite"))
        it.allocate_tensors()
        t = next(t for t in it.get_tensor_details() if list(t["shape"]) == [1, 6] and t["dtype"] == np.int8)
        k = it.get_tensor(t["index"]).astype(np.int64)
        return k, k.T * t["quantization_parameters"]["scales"][None, :]

    k_off, w_off = dense_kernel(off)
    k_on, w_on = dense_kernel(on)
    np.testing.assert_allclose(w_off, on_grid(W, 8), rtol=1e-6)
    assert not np.allclose(w_on, w_off, rtol=1e-6)
    # ... and exactly the values gptq_weights gave the converter (the Dense after the LMU does not depend
    # on the state balance, so a plan without it gives the same): the converter kept GPTQ's scale
    from lmu_edge.targets import _stepplan
    from lmu_edge.targets._tflite_gptq import gptq_weights

    folded = lmu_edge.load(on.path / "model.lmu.npz")
    built = gptq_weights(folded, _stepplan.StatePlan(folded), x_cal, correct_bias=True)
    want = next(lay for lay in built.layers if isinstance(lay, ir.Dense)).kernel
    np.testing.assert_allclose(w_on, want, rtol=1e-6, atol=0)


@pytest.mark.slow
def test_the_weights_of_a_feedback_loop_are_split_too(tmp_path):
    # docs/tflite_onnx.md: the layer-option matrix's RNN-path model (hidden_to_memory, memory_to_memory,
    # SimpleRNN) has four weights in its loop; written as hi + lo like Abar, their 8-bit rounding no longer
    # circulates: int16x8 28.3 -> 41.5 dB (floor 35). Each split weight is one more FULLY_CONNECTED.
    src, x_cal, x_test, y = matrix_model("rnn_h2m_m2m_simplernn")
    art = lmu_edge.convert(src, "tflite", tmp_path / "a", quantize="int16x8", calibration=x_cal)
    assert sqnr_db(art.run(x_test), y) >= 35.0  # measured 41.5 dB
    # FULLY_CONNECTED ops: the input encoders and the output Dense once; Abar and the four loop weights (the
    # hidden and memory encoders, the hidden kernel, the recurrent kernel) twice each
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(art.path / "model.tflite"))
    assert sum(o["op_name"] == "FULLY_CONNECTED" for o in it._get_ops_details()) == 2 + 2 * 5
