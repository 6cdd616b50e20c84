"""The streaming contract inside the ONNX files (issue 55): a user's script that knows nothing of
lmu-edge streams a model from the contract alone and gets the artifact's outputs; sequence.onnx resumes
a stream chunk by chunk through its state inputs and outputs."""

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


def _session(path, c):
    so = ort.SessionOptions()
    if c["quantize"] != "float":  # the contract's session line names the one entry it needs
        assert "session.disable_quant_qdq = 1" in c["session"]
        so.add_session_config_entry("session.disable_quant_qdq", "1")
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def test_the_contract_names_every_input_and_output_of_the_step_model_in_order(art):
    a, q = art
    m, c = _contract(a.path / "step.onnx")
    ins = [(i.name, [d.dim_value for d in i.type.tensor_type.shape.dim]) for i in m.graph.input]
    outs = [o.name for o in m.graph.output]
    assert ins == [("x", c["input"]["shape"])] + [(s["input"], s["shape"]) for s in c["states"]]
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
