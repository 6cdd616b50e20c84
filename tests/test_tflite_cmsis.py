"""TFLite int8 and int16x8 exports use only what TFLite Micro's CMSIS-NN kernels accept (issue 52).

Read from each exported flatbuffer by LiteRT's own tensor details, apart from lmu-edge's checker
(``targets/_tflite_tflm.py``), against the Prepare checks of the kernels a CMSIS-NN build of TFLite Micro
runs (tflite-micro, ``tensorflow/lite/micro/kernels/``; docs/tflite_onnx.md, "TFLite Micro kernels"):
FULLY_CONNECTED with an int16 input takes per-tensor int8 weights and zero points 0
(``cmsis_nn/fully_connected.cc``), int16 ADD / MUL / CONCATENATION zero points 0 (``cmsis_nn/add.cc``,
``cmsis_nn/mul.cc``, ``concatenation.cc``), an int8 CONCATENATION's inputs share its output's
quantization (``concatenation.cc``), LOGISTIC / TANH / SOFTMAX outputs their fixed quantization
(``logistic_common.cc``, ``tanh.cc``, ``softmax_common.cc``).
"""

import dataclasses
import json

import numpy as np
import pytest
from graphs import chain, heads
from target_models import CONFIGS

import lmu_edge
from lmu_edge import ir
from lmu_edge.metrics import sqnr_db
from lmu_edge.targets import _tflite_build, _tflite_tflm

MODES = ("int8", "int16x8")
#: op -> dtype -> (scale, zero point) of its output
FIXED = {
    "LOGISTIC": {np.int8: (1 / 256, -128), np.int16: (1 / 32768, 0)},
    "TANH": {np.int8: (1 / 128, 0), np.int16: (1 / 32768, 0)},
    "SOFTMAX": {np.int8: (1 / 256, -128), np.int16: (1 / 32768, 0)},
}


def _data(features, n, steps=40, seed=3):
    rng = np.random.default_rng(seed)
    t = np.arange(steps)[None, :, None]
    f = rng.uniform(0.02, 0.1, (n, 1, features))
    return np.sin(2 * np.pi * f * t + rng.uniform(0, 6.3, (n, 1, features))) + 0.3 * rng.standard_normal(
        (n, steps, features)
    )


def _concat_model():
    """The issue-52 class: an LMU without a hidden cell, ``input_to_hidden`` (the memory and the input
    joined by a CONCATENATION), memory_d 8, last step only, a softmax head."""
    rng = np.random.default_rng(52)
    g = chain(rng, n_in=1, d=8, q=12, theta=60.0, disc="euler", hidden=None, input_to_hidden=True)
    pre, mid, _ = g.layers
    mid = dataclasses.replace(mid, return_sequences=False)
    head = ir.Dense("head", rng.standard_normal((8 * 12 + 3, 5)) * 0.3, rng.standard_normal(5) * 0.1, "softmax")
    return lmu_edge.fold(ir.Graph("concat_i2h", input_features=1, seq_len=None, layers=(pre, mid, head)), "euler")


def _sigmoid_state_model():
    """The issue-52 class "a sigmoid on an RNN-path model" (order 4, hidden_to_memory and memory_to_memory):
    the SimpleRNN's sigmoid output is the state ``h`` fed back, and the head a sigmoid too."""
    rng = np.random.default_rng(4)
    pre, mid, post = chain(rng, q=4, theta=8.0, hidden="simple_rnn", rnn_path=True).layers
    mid = dataclasses.replace(mid, hidden=dataclasses.replace(mid.hidden, activation="sigmoid"))
    post = dataclasses.replace(post, activation="sigmoid")
    return lmu_edge.fold(ir.Graph("sigmoid_state", input_features=2, seq_len=None, layers=(pre, mid, post)))


#: calibration steps per graph: 40, and three windows of the concatenation model's theta of 60
STEPS = {"concat_i2h": 180}
GRAPHS = {
    "memory_d2_dense": lambda: CONFIGS["memory_d2_dense"],
    "rnn_path_simple_rnn": lambda: CONFIGS["rnn_path_simple_rnn"],
    "pooling": lambda: CONFIGS["pooling"],
    "heads": lambda: lmu_edge.fold(heads(np.random.default_rng(5))),
    "concat_i2h": _concat_model,
    "sigmoid_state": _sigmoid_state_model,
}


def _report(art) -> dict:
    return json.loads((art.path / "report.json").read_text())


def breaks(path) -> list:
    """Every op of the model at ``path`` whose tensors TFLite Micro's CMSIS-NN kernels refuse, read from
    LiteRT's tensor details."""
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(path))
    t = {d["index"]: d for d in interp.get_tensor_details()}

    def q(i):
        p = t[i]["quantization_parameters"]
        return [float(s) for s in p["scales"]], [int(z) for z in p["zero_points"]]

    out = []
    for op in interp._get_ops_details():
        name, ins, outs = op["op_name"], [i for i in op["inputs"] if i >= 0], list(op["outputs"])
        dt = t[outs[0]]["dtype"]
        if name == "FULLY_CONNECTED" and t[ins[0]]["dtype"] == np.int16:
            if t[ins[1]]["dtype"] != np.int8 or len(q(ins[1])[0]) != 1:
                out.append(f"{op['index']} {name}: int16 input, weights {t[ins[1]]['dtype']} x{len(q(ins[1])[0])}")
            if q(ins[0])[1] != [0] or q(outs[0])[1] != [0]:
                out.append(f"{op['index']} {name}: int16 zero points")
        if name in ("ADD", "MUL", "CONCATENATION") and dt == np.int16:
            if any(q(i)[1] != [0] for i in ins + outs if t[i]["dtype"] == np.int16):
                out.append(f"{op['index']} {name}: int16 zero points")
        if name == "CONCATENATION" and dt == np.int8 and any(q(i) != q(outs[0]) for i in ins):
            out.append(f"{op['index']} {name}: int8 inputs rescaled")
        if name in FIXED and dt in (np.int8, np.int16):
            s, z = FIXED[name][dt]
            (so, zo) = q(outs[0])
            if len(so) != 1 or abs(so[0] - s) > 1e-6 * s or zo != [z]:
                out.append(f"{op['index']} {name}: output {so} {zo}")
    return out


def broadcast_muls(path) -> list:
    """Every MUL of the model at ``path`` whose inputs differ in shape, read from LiteRT's tensor details:
    what TFLite Micro's CMSIS-NN MUL hands to its reference kernel (bench/tflm_m4.py saw it run no arm_*)."""
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=str(path))
    shape = {d["index"]: [int(v) for v in d["shape"]] for d in interp.get_tensor_details()}
    return [
        f"op {op['index']} MUL: broadcast {shape[op['inputs'][0]]} x {shape[op['inputs'][1]]}"
        for op in interp._get_ops_details()
        if op["op_name"] == "MUL" and len(op["inputs"]) == 2 and shape[op["inputs"][0]] != shape[op["inputs"][1]]
    ]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    d = tmp_path_factory.mktemp("cmsis")
    out = {}
    for name, make in GRAPHS.items():
        g = make()
        cal = _data(g.input_features, 8, steps=STEPS.get(name, 40))
        for mode in MODES:
            out[name, mode] = lmu_edge.convert(
                g, "tflite", d / f"{name}-{mode}", quantize=mode, calibration=cal, compare_plain=False
            )
    return out


@pytest.mark.slow
def test_the_fallback_check_sees_a_broadcast_mul(exports):
    # the comparison above would pass on empty lists: at least one export here broadcasts a MUL (the LMU's
    # [1, 1] x [1, n] input scaling, the node bench/tflm_m4.py saw run on TFLite Micro's reference kernels)
    found = [f for art in exports.values() for f in _report(art)["tflm_kernels"]["reference_fallbacks"]]
    assert found and all(" MUL: broadcast " in f for f in found), found


@pytest.mark.slow  # twelve quantized conversions (about a minute and a half on one core)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(GRAPHS))
def test_every_export_meets_the_cmsis_nn_kernels_checks(exports, name, mode):
    art = exports[name, mode]
    path = art.path / "model.tflite"
    assert breaks(path) == []
    assert _tflite_tflm.violations(path.read_bytes()) == []
    assert _report(art)["tflm_kernels"]["cmsis_nn"] == "accepted"
    # the report names the ops TFLite Micro prepares but runs on its reference kernels, as LiteRT reads them
    assert _report(art)["tflm_kernels"]["reference_fallbacks"] == broadcast_muls(path)
    ops = set(_report(art)["ops"])
    assert ops <= {
        "FULLY_CONNECTED",
        "ADD",
        "MUL",
        "TANH",
        "LOGISTIC",
        "SOFTMAX",
        "RESHAPE",
        "CONCATENATION",
        "QUANTIZE",
        "STRIDED_SLICE",
        "RSQRT",
        "SUB",
        "RELU",
    }, ops


@pytest.mark.slow  # uses the module's conversions
def test_the_int16_input_fully_connected_ops_are_there_and_per_tensor(exports):
    # the check above is not vacuous: every int16x8 model and every int8 model with an int16 state path
    # has FULLY_CONNECTED ops reading int16, and their weights carry one scale
    from ai_edge_litert.interpreter import Interpreter

    for (name, mode), art in exports.items():
        interp = Interpreter(model_path=str(art.path / "model.tflite"))
        t = {d["index"]: d for d in interp.get_tensor_details()}
        fc16 = [
            o
            for o in interp._get_ops_details()
            if o["op_name"] == "FULLY_CONNECTED" and t[o["inputs"][0]]["dtype"] == np.int16
        ]
        assert fc16, (name, mode)
        assert {len(t[o["inputs"][1]]["quantization_parameters"]["scales"]) for o in fc16} == {1}, (name, mode)


@pytest.mark.slow  # one int16x8 conversion
def test_per_channel_weights_are_caught_by_both_readers(tmp_path, monkeypatch):
    # the converter's per-channel weights, as every int16x8 export had before: both checks name them
    monkeypatch.setattr(_tflite_build, "PER_TENSOR", ())
    g = CONFIGS["memory_d2_dense"]
    art = lmu_edge.convert(
        g, "tflite", tmp_path / "pc", quantize="int16x8", calibration=_data(2, 8), compare_plain=False
    )
    path = art.path / "model.tflite"
    assert any("FULLY_CONNECTED: int16 input, weights" in b for b in breaks(path))
    assert any("weight scales (per-channel weights)" in v for v in _tflite_tflm.violations(path.read_bytes()))
    assert _report(art)["tflm_kernels"]["cmsis_nn"] != "accepted"


@pytest.mark.slow  # uses the module's conversions
def test_conform_restores_a_fixed_output_scale_and_the_checks_see_it(exports, tmp_path):
    # a LOGISTIC and a SOFTMAX output at another scale than the fixed one (as lmu-edge's own range edits
    # could leave it, the sigmoid head): TFLite refuses them; conform puts the fixed ones back
    from tensorflow.lite.tools import flatbuffer_utils as fb

    src = (exports["heads", "int8"].path / "model.tflite").read_bytes()
    m = fb.convert_bytearray_to_object(bytearray(src))
    sg = m.subgraphs[0]
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in m.operatorCodes]
    fixed = [op for op in sg.operators if codes[op.opcodeIndex] in (14, 25)]  # LOGISTIC, SOFTMAX
    assert len(fixed) == 2
    for op in fixed:
        q = sg.tensors[op.outputs[0]].quantization
        q.scale = [0.75 * q.scale[0]]
    bad = bytes(fb.convert_object_to_bytearray(m))
    (tmp_path / "bad.tflite").write_bytes(bad)
    assert {b.split()[1] for b in breaks(tmp_path / "bad.tflite")} == {"LOGISTIC:", "SOFTMAX:"}
    assert {v.split()[2] for v in _tflite_tflm.violations(bad)} == {"LOGISTIC:", "SOFTMAX:"}
    good = _tflite_tflm.conform(bad)
    (tmp_path / "good.tflite").write_bytes(good)
    assert breaks(tmp_path / "good.tflite") == []
    assert _tflite_tflm.conform(src) == src  # a conforming model is left as it is


@pytest.mark.slow  # uses the module's conversions
@pytest.mark.parametrize("mode", MODES)
def test_the_concatenation_model_runs_in_litert_and_tflite_micro_at_its_floor(exports, mode):
    # issue 52: XNNPack and TFLite Micro refused the int8 CONCATENATION whose state input lmu-edge had
    # rescaled; and the int16x8 conversion's extra QUANTIZE had sent the int8 model to an 8-bit state
    art = exports["concat_i2h", mode]
    x = _data(1, 4, steps=180, seed=9)
    ref = lmu_edge.simulate(art.graph, x)
    floor = {"int8": 30.0, "int16x8": 35.0}[mode]
    assert sqnr_db(art.run(x), ref) >= floor
    assert sqnr_db(art.run(x[:1], runtime="tflm"), ref[:1]) >= floor
    if mode == "int8":
        assert _report(art)["quantization"]["state_path"] == "int16"


@pytest.mark.slow  # uses the module's conversions
@pytest.mark.parametrize("mode", MODES)
def test_a_state_written_by_a_logistic_keeps_its_fixed_quantization(exports, mode):
    # the state h is a LOGISTIC output: tying h and h_out to the union of their ranges moved the
    # LOGISTIC's output off its fixed scale (TFLite refused it in int8; int16 got 1/32767); both now carry
    # the fixed one, so a device feeding h_out back reads it right
    art = exports["sigmoid_state", mode]
    io = json.loads((art.path / "io.json").read_text())
    by = {d["name"]: d for d in io["inputs"] + io["outputs"]}
    h, h_out = by["L1_h"], by["L1_h_out"]
    want = {"int16": (1 / 32768, 0), "int8": (1 / 256, -128)}[h["dtype"]]
    assert (h["scale"], h["zero_point"]) == (h_out["scale"], h_out["zero_point"]) == pytest.approx(want)
    x = _data(2, 4, steps=60, seed=9)
    assert sqnr_db(art.run(x), lmu_edge.simulate(art.graph, x)) >= {"int8": 30.0, "int16x8": 35.0}[mode]
