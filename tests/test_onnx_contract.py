"""The streaming contract inside the ONNX files (issue 55): a user's script that knows nothing of
lmu-edge streams a model from the contract alone and gets the artifact's outputs; sequence.onnx resumes
a stream chunk by chunk through its state inputs and outputs; one batched call streams several
interleaved sequences as separate calls do; int8 runs under ONNX Runtime's default session options."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

import lmu_edge

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "examples" / "models" / "keras_digits.keras"
X = np.load(ROOT / "examples" / "models" / "keras_digits_test_x.npy")[:6].astype(np.float64)
CAL = np.load(ROOT / "examples" / "models" / "digits_calibration_x.npy")[:32]
KEY = "lmu_edge.streaming_contract"


@pytest.fixture(scope="module", params=["float", "int8"])
def art(request, tmp_path_factory):
    q = request.param
    out = tmp_path_factory.mktemp(f"onnx_{q}") / "a"
    kw = {"calibration": CAL} if q != "float" else {}
    return lmu_edge.convert(MODEL, target="onnx", out_dir=out, quantize=q, **kw), q


def _contract(path):
    m = onnx.load(str(path))
    props = {p.key: p.value for p in m.metadata_props}
    return m, json.loads(props[KEY])


def _session(path, c, fused=True):
    """ONNX Runtime's default session (``fused``), or one with its QDQ fusions off."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if c["quantize"] != "float":  # the contract says no session entry is needed
        assert "default session options" in c["session"] and "disable" not in c["session"]
    if not fused:
        so.add_session_config_entry("session.disable_quant_qdq", "1")
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def test_the_contract_names_every_input_and_output_of_the_step_model_in_order(art):
    a, q = art
    m, c = _contract(a.path / "step.onnx")

    def dims(v):
        return [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]

    ins = [(i.name, dims(i)) for i in m.graph.input]
    outs = [o.name for o in m.graph.output]
    batch = lambda shape: ["batch", *shape[1:]]  # noqa: E731  (the contract's shapes are one stream's)
    assert ins == [("x", batch(c["input"]["shape"]))] + [(s["input"], batch(s["shape"])) for s in c["states"]]
    assert [dims(o) for o in m.graph.output] == [batch(c["output"]["shape"])] + [batch(s["shape"]) for s in c["states"]]
    assert c["input_order"] == ["x"] + [s["input"] for s in c["states"]] and "one row per stream" in c["batch"]
    assert outs == c["output_order"] == ["y"] + [s["output"] for s in c["states"]]
    assert c["quantize"] == q and c["seq_len"] == 64 and c["every_step_is_an_answer"] is False
    assert "probabilities" in c["outputs_are"] and "last step" in c["sequence"]
    assert "64-step" in m.doc_string and "feed each <name>_out back" in m.doc_string
    assert {p.key for p in onnx.load(str(a.path / "sequence.onnx")).metadata_props} == {KEY}


def test_a_script_that_reads_only_the_contract_streams_what_the_artifact_computes(art):
    a, _ = art
    path = a.path / "step.onnx"
    _, c = _contract(path)
    sess = _session(path, c)
    got = []
    for seq in X:
        state = {s["input"]: np.zeros(s["shape"], np.float32) for s in c["states"]}  # "initial": zeros
        for x_t in seq:
            res = dict(
                zip(
                    c["output_order"],
                    sess.run(c["output_order"], {"x": x_t[None].astype(np.float32), **state}),
                    strict=True,
                )
            )
            state = {s["input"]: res[s["output"]] for s in c["states"]}
        got.append(res["y"][0])
    np.testing.assert_allclose(np.array(got), a.run(X), rtol=0, atol=1e-6)


def test_sequence_onnx_resumes_a_stream_chunk_by_chunk(art):
    a, _ = art
    path = a.path / "sequence.onnx"
    _, c = _contract(path)
    sess = _session(path, c)
    finals = [f"{s['input']}_final" for s in c["states"]]
    for seq in X[:3]:
        xs = seq[:, None, :].astype(np.float32)
        whole = sess.run(["y_seq"], {"x_seq": xs})[0]
        y1, *st = sess.run(["y_seq"] + finals, {"x_seq": xs[:23]})  # default initial state: zeros
        feed = {f"{s['input']}_init": v for s, v in zip(c["states"], st, strict=True)}
        y2 = sess.run(["y_seq"], {"x_seq": xs[23:], **feed})[0]
        np.testing.assert_array_equal(np.concatenate([y1, y2]), whole)
        y_wrong = sess.run(["y_seq"], {"x_seq": xs[23:]})[0]  # without the state the stream restarts
        assert not np.allclose(y_wrong, whole[23:])


def test_the_docs_example_streams_the_model(art):
    a, _ = art
    text = (ROOT / "docs" / "streaming.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, flags=re.S)[0]
    ns = {"art_dir": str(a.path), "x_seq": X[0]}
    exec(compile(code, "docs/streaming.md", "exec"), ns)  # the page's own example, as a user runs it
    np.testing.assert_allclose(ns["y"], a.run(X[:1])[0], rtol=0, atol=1e-6)


def test_inspect_reads_the_contract_back_from_the_artifact_and_refuses_other_files(art, tmp_path):
    from click.testing import CliRunner

    from lmu_edge.cli import main

    a, _ = art
    _, c = _contract(a.path / "step.onnx")
    r = CliRunner().invoke(main, ["inspect", str(a.path)])
    assert r.exit_code == 0 and "Outputs, in order: y, L0_m_out." in r.output and "64-step" in r.output
    r = CliRunner().invoke(main, ["inspect", str(a.path / "sequence.onnx"), "--json"])
    assert r.exit_code == 0 and json.loads(r.output) == c
    bad = tmp_path / "x.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    r = CliRunner().invoke(main, ["inspect", str(bad)])
    assert r.exit_code == 1 and "not an ONNX model" in r.output and len(r.output.strip().splitlines()) == 1


def test_one_batched_call_streams_interleaved_sequences_as_separate_streams_do(art):
    """Two sequences, the second started 9 steps after the first, stepped together through one batched
    step.onnx (a row each, with its own state rows) give each stream's outputs of separate calls."""
    a, _ = art
    path = a.path / "step.onnx"
    _, c = _contract(path)
    sess = _session(path, c)
    names = c["output_order"]

    def run(x, state):
        res = dict(zip(names, sess.run(names, {"x": x.astype(np.float32), **state}), strict=True))
        return res["y"], {s["input"]: res[s["output"]] for s in c["states"]}

    lag, T = 9, X.shape[1]
    zeros = lambda n: {s["input"]: np.zeros((n, s["shape"][1]), np.float32) for s in c["states"]}  # noqa: E731  (one line beside its only use)
    alone = []
    for seq in X[:2]:
        st, ys = zeros(1), []
        for x_t in seq:
            y, st = run(x_t[None], st)
            ys.append(y[0])
        alone.append(np.array(ys))
    both, got = zeros(2), [[], []]
    for t in range(T + lag):  # stream 1 joins at step `lag`: its row starts from zeros there
        if t == lag:
            for s in c["states"]:
                both[s["input"]][1] = 0.0
        rows = np.stack([X[0][min(t, T - 1)], X[1][max(t - lag, 0)]])
        y, both = run(rows, both)
        if t < T:
            got[0].append(y[0])
        if t >= lag:
            got[1].append(y[1])
    seq_sess = _session(a.path / "sequence.onnx", c)
    ys = seq_sess.run(["y_seq"], {"x_seq": X[:2].transpose(1, 0, 2).astype(np.float32)})[0].transpose(1, 0, 2)
    if c["quantize"] == "float":
        for k in range(2):
            np.testing.assert_allclose(np.array(got[k]), alone[k], rtol=0, atol=1e-6)
        np.testing.assert_allclose(ys, np.array(alone), rtol=0, atol=1e-6)
        return
    # int8: not bit for bit (test below): ONNX Runtime's QuantizeLinear rounds a value on a rounding boundary
    # differently at another tensor length, and the stream drifts by a few output steps (measured: 6 of 640
    # outputs, up to 12 steps, 41.2 dB), so batching is held to the widening target (36 dB) and most
    # outputs equal
    from lmu_edge.metrics import sqnr_db

    for k in range(2):
        assert sqnr_db(np.array(got[k], np.float64), alone[k]) >= 36.0
        assert sqnr_db(ys[k].astype(np.float64), alone[k]) >= 36.0
        assert np.mean(np.array(got[k]) != alone[k]) < 0.05


@pytest.mark.xfail(
    strict=True,
    reason="ONNX Runtime 1.32's QuantizeLinear rounds x / scale differently at another tensor length (with "
    "every graph optimization off too): int8 digits batched vs alone, a state or an output differs at some "
    "steps; with power-of-two scales none did (2026-12-06), which would cost the 8-bit tensors up to a bit",
)
def test_int8_batched_steps_equal_separate_steps_bit_for_bit(art):
    a, q = art
    if q == "float":
        pytest.skip("the int8 artifact's property")  # the float model is bit for bit (test above: 1e-6)
    path = a.path / "step.onnx"
    _, c = _contract(path)
    sess = _session(path, c)
    names = c["output_order"]
    st2 = {s["input"]: np.zeros((2, s["shape"][1]), np.float32) for s in c["states"]}
    st1 = [{s["input"]: np.zeros((1, s["shape"][1]), np.float32) for s in c["states"]} for _ in range(2)]
    differ = 0
    for t in range(X.shape[1]):
        r2 = dict(zip(names, sess.run(names, {"x": X[:2, t].astype(np.float32), **st2}), strict=True))
        st2 = {s["input"]: r2[s["output"]] for s in c["states"]}
        for k in range(2):
            r1 = dict(zip(names, sess.run(names, {"x": X[k : k + 1, t].astype(np.float32), **st1[k]}), strict=True))
            st1[k] = {s["input"]: r1[s["output"]] for s in c["states"]}
            differ += any(not np.array_equal(r1[n][0], r2[n][k]) for n in names)
    assert differ == 0, differ


def test_int8_meets_its_documented_error_under_onnx_runtimes_default_session(art):
    """The int8 model in ONNX Runtime's default session (QDQ fusions on, as a user gets it): on held-out
    digits it is within the documented floor of the float model (docs/tflite_onnx.md: int8 ONNX >= 30 dB,
    the layer-option matrix's floor) and within 2 output steps of the unfused QDQ graph on every output.
    Before the 16-bit weights for 16-bit inputs, the fused model differed from the unfused one by 12
    output steps (0.047, scale 1/255) here: ORT's MatMulNBits rounded the LMU's 16-bit state to 8 bits."""
    from lmu_edge.metrics import sqnr_db

    a, q = art
    if q == "float":
        pytest.skip("the int8 artifact's property")  # not a missing tool: this parameter has no QDQ graph
    xt = np.load(ROOT / "examples" / "models" / "keras_digits_test_x.npy")[:48].astype(np.float32)
    path = a.path / "sequence.onnx"
    _, c = _contract(path)
    fused, plain = _session(path, c), _session(path, c, fused=False)
    y = fused.run(["y_seq"], {"x_seq": xt.transpose(1, 0, 2)})[0][-1]
    y0 = plain.run(["y_seq"], {"x_seq": xt.transpose(1, 0, 2)})[0][-1]
    ref = lmu_edge.simulate(lmu_edge.load(MODEL), xt.astype(np.float64))
    assert sqnr_db(y, ref) >= 30.0, sqnr_db(y, ref)
    assert np.abs(y - y0).max() <= 2 / 255 + 1e-7, np.abs(y - y0).max()
    assert json.loads((a.path / "report.json").read_text())["quantization"]["onnxruntime_session_config"] == {}
