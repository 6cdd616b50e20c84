"""The streaming contract inside the TFLite file (issue 55): the ``step`` signature and a metadata entry
say what the ONNX files say, with the interface's quantization; the batch is open, so one LiteRT call
streams several interleaved sequences as separate streams do; ``lmu-edge inspect`` reads the contract
back; docs/streaming.md's LiteRT and TFLite Micro examples run as written."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

import lmu_edge

litert = pytest.importorskip("ai_edge_litert.interpreter")
pytest.importorskip("tensorflow")

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "examples" / "models" / "keras_digits.keras"
X = np.load(ROOT / "examples" / "models" / "keras_digits_test_x.npy")[:4].astype(np.float64)
CAL = np.load(ROOT / "examples" / "models" / "digits_calibration_x.npy")[:32]


@pytest.fixture(scope="module", params=["float", "int8", "int16x8"])
def art(request, tmp_path_factory):
    q = request.param
    out = tmp_path_factory.mktemp(f"tflite_{q}") / "a"
    kw = {"calibration": CAL} if q != "float" else {}
    return lmu_edge.convert(MODEL, target="tflite", out_dir=out, quantize=q, **kw), q


def _contract(path):
    from lmu_edge.targets import streaming

    return streaming.read_file(path)


def test_the_contract_matches_the_step_signature_and_its_quantization(art):
    a, q = art
    path = a.path / "model.tflite"
    c = _contract(path)
    it = litert.Interpreter(model_path=str(path))
    assert list(it.get_signature_list()) == ["step"]
    runner = it.get_signature_runner("step")
    ins, outs = runner.get_input_details(), runner.get_output_details()
    tensors = {c["input"]["name"]: c["input"], c["output"]["name"]: c["output"]}
    tensors.update({s["input"]: s for s in c["states"]})
    tensors.update({s["output"]: s for s in c["states"]})
    assert set(ins) == {"x"} | {s["input"] for s in c["states"]}
    assert set(outs) == {"y"} | {s["output"] for s in c["states"]}
    for name, d in {**ins, **outs}.items():
        t = tensors[name]
        assert list(d["shape_signature"]) == [-1, t["shape"][1]] and list(d["shape"]) == t["shape"]  # open batch
        assert np.dtype(d["dtype"]).name == t["dtype"]
        scale, zp = d["quantization"]
        assert (t.get("scale", 0.0), t.get("zero_point", 0)) == pytest.approx((scale, zp), rel=1e-7)
    # subgraph 0's order (TFLite Micro's indices) is the contract's order
    assert [d["index"] for d in it.get_input_details()] == [ins[n]["index"] for n in c["input_order"]]
    assert [d["index"] for d in it.get_output_details()] == [outs[n]["index"] for n in c["output_order"]]
    assert c["quantize"] == q and c["seq_len"] == 64 and c["every_step_is_an_answer"] is False
    assert "probabilities" in c["outputs_are"] and "one row per stream" in c["batch"]
    if q == "int8":
        assert c["input"]["dtype"] == c["output"]["dtype"] == "int8" and c["states"][0]["dtype"] == "int16"
        assert str(c["states"][0]["zero_point"]) in c["states"][0]["initial"]
    if q == "int16x8":  # 16-bit activations: the interface and the state int16, symmetric (zero point 0)
        assert c["input"]["dtype"] == c["output"]["dtype"] == c["states"][0]["dtype"] == "int16"
        assert c["input"]["zero_point"] == c["output"]["zero_point"] == c["states"][0]["zero_point"] == 0


def test_one_batched_call_streams_interleaved_sequences_as_separate_streams_do(art):
    """Two sequences, the second joining 9 steps after the first, through one LiteRT signature runner
    with a batch of 2 (LiteRT resizes the open batch): each row's outputs and state equal those of its
    sequence run alone at batch 1; bit for bit in int8 and int16x8, the state included."""
    a, q = art
    c = _contract(a.path / "model.tflite")
    step = litert.Interpreter(model_path=str(a.path / "model.tflite")).get_signature_runner("step")
    alone_step = litert.Interpreter(model_path=str(a.path / "model.tflite")).get_signature_runner("step")
    t_in = c["input"]

    def qx(v):
        if "scale" not in t_in:
            return v.astype(np.float32)
        lim = np.iinfo(np.dtype(t_in["dtype"]))  # int8, or int16 (int16x8)
        return np.clip(np.round(v / t_in["scale"]) + t_in["zero_point"], lim.min, lim.max).astype(t_in["dtype"])

    def zeros(n):
        return {s["input"]: np.full((n, s["shape"][1]), s.get("zero_point", 0), s["dtype"]) for s in c["states"]}

    alone = []
    for seq in X[:2]:
        st, ys = zeros(1), []
        for x_t in seq:
            out = alone_step(x=qx(x_t[None]), **st)
            st = {s["input"]: out[s["output"]] for s in c["states"]}
            ys.append((out["y"][0], {k: v[0] for k, v in st.items()}))
        alone.append(ys)
    lag, T = 9, X.shape[1]
    st, got = zeros(2), [[], []]
    for t in range(T + lag):
        if t == lag:  # stream 1 starts: its row of every state back to zeros
            for s in c["states"]:
                st[s["input"]][1] = s.get("zero_point", 0)
        out = step(x=qx(np.stack([X[0][min(t, T - 1)], X[1][max(t - lag, 0)]])), **st)
        st = {s["input"]: out[s["output"]] for s in c["states"]}
        for k, ok in ((0, t < T), (1, t >= lag)):
            if ok:
                got[k].append((out["y"][k], {n: v[k] for n, v in st.items()}))
    for k in range(2):
        for (y, s), (y1, s1) in zip(got[k], alone[k], strict=True):
            if q == "float":
                np.testing.assert_allclose(y, y1, rtol=0, atol=1e-6)
            else:
                np.testing.assert_array_equal(y, y1)
                for n in s:
                    np.testing.assert_array_equal(s[n], s1[n])


def test_inspect_reads_the_contract_back_from_a_tflite_file_and_refuses_other_files(art, tmp_path):
    from click.testing import CliRunner

    from lmu_edge.cli import main

    a, q = art
    c = _contract(a.path / "model.tflite")
    r = CliRunner().invoke(main, ["inspect", str(a.path)])
    assert r.exit_code == 0 and "64-step" in r.output and "Batch: dimension 0" in r.output, r.output
    assert f"Outputs, in order: {', '.join(c['output_order'])}." in r.output
    assert ("Quantized interface" in r.output) == (q != "float")
    r = CliRunner().invoke(main, ["inspect", str(a.path / "model.tflite"), "--json"])
    assert r.exit_code == 0 and json.loads(r.output) == c
    bad = tmp_path / "x.tflite"
    bad.write_bytes(b"\x18\x00\x00\x00TFL3" + b"\xff" * 40)  # the identifier, then nothing readable
    r = CliRunner().invoke(main, ["inspect", str(bad)])
    assert r.exit_code == 1 and str(bad) in r.output and len(r.output.strip().splitlines()) == 1, r.output
    bad.write_bytes(b"not a model at all")
    r = CliRunner().invoke(main, ["inspect", str(bad)])
    assert r.exit_code == 1 and "not a TFLite model" in r.output and len(r.output.strip().splitlines()) == 1


def test_the_docs_litert_and_tflite_micro_examples_stream_the_model(art):
    a, _ = art
    text = (ROOT / "docs" / "streaming.md").read_text()
    blocks = {b.splitlines()[0]: b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S)}
    ns = {"art_dir": str(a.path), "x_seqs": X[:3]}
    exec(compile(blocks["# LiteRT"], "docs/streaming.md", "exec"), ns)  # the page's own examples
    want = a.run(X[:3])
    tol = 1e-6 if "scale" not in ns["c"]["output"] else 1e-9  # int8: LiteRT is what the artifact runs
    np.testing.assert_allclose(ns["y"], want, rtol=0, atol=tol)
    exec(compile(blocks["# TFLite Micro"], "docs/streaming.md", "exec"), ns)
    np.testing.assert_allclose(ns["y_micro"][0], a.run(X[:1], runtime="tflm")[0], rtol=0, atol=1e-9)


def test_a_damaged_tflite_file_gives_the_contract_or_a_one_line_error(art, tmp_path):
    """The contract reader opens untrusted files: 300 copies of the model with bytes overwritten (seeded)
    each give a contract or an LmuEdgeError, never another exception."""
    from lmu_edge.errors import LmuEdgeError
    from lmu_edge.targets import streaming

    a, _ = art
    data = (a.path / "model.tflite").read_bytes()
    rng = np.random.default_rng(55)
    p = tmp_path / "m.tflite"
    outcomes = {"contract": 0, "refused": 0}
    for _ in range(300):
        b = bytearray(data)
        at = rng.integers(0, len(b), size=int(rng.integers(1, 9)))
        for i in at:
            b[int(i)] = int(rng.integers(0, 256))
        p.write_bytes(bytes(b))
        try:
            c = streaming.read_file(p)
            assert isinstance(c, dict) and isinstance(c["states"], list)
            streaming.describe(c)  # what inspect prints: no exception either
            outcomes["contract"] += 1
        except LmuEdgeError as e:
            assert "\n" not in str(e)
            outcomes["refused"] += 1
    assert outcomes["contract"] > 0 and outcomes["refused"] > 0, outcomes


def test_inspect_prints_a_files_text_as_printable_ascii(art):
    """A file's contract is untrusted text bound for a terminal: control characters (an ANSI escape, a
    carriage return) never reach it."""
    from lmu_edge.targets import streaming

    a, _ = art
    c = streaming.read_file(a.path / "model.tflite")
    c["sequence"] = "trained on \x1b[2J\r64-step\u202e sequences"
    text = streaming.describe(c)
    assert "64-step" in text and all(ch == "\n" or 32 <= ord(ch) < 127 for ch in text)
