"""``check_scales`` against LiteRT itself: it refuses a quantized ADD exactly where LiteRT would abort
the process preparing it (issue 52, seed 23: ``lmu-edge convert -t tflite`` died in ``allocate_tensors``
after the int8 widening search gave a memory's ADD an output scale 2.3 times finer than its general
int16 path can requantize to).

Each model is one ADD (or SUB, which LiteRT prepares at any multiplier) of two activations, built from the
schema, with scales drawn over six decades and multipliers over [1e-3, 1e3] and either side of 1; each is
prepared by LiteRT in a process of its own (an abort kills only that process), and the guard's verdict
must be LiteRT's.
"""

import subprocess
import sys

import numpy as np
import pytest
from tensorflow.lite.python import schema_py_generated as schema
from tensorflow.lite.tools import flatbuffer_utils as fbu

from lmu_edge.errors import QuantizationError
from lmu_edge.targets._tflite_guard import check_scales

#: TensorType, the left shift of the general ADD path
TYPES = {"int8": (schema.TensorType.INT8, 20), "int16": (schema.TensorType.INT16, 15)}


def _add_model(
    dtype: str, s1: float, s2: float, so: float, op: int = schema.BuiltinOperator.ADD, pot: bool = True
) -> bytes:
    """One ``op`` (ADD or SUB) of two (1, 4) activations of ``dtype`` with scales s1, s2 and output scale so;
    an ADD's option ``pot_scale_int16`` is ``pot``."""
    m = schema.ModelT()
    m.version = 3
    code = schema.OperatorCodeT()
    code.builtinCode, code.deprecatedBuiltinCode, code.version = op, op, 1
    m.operatorCodes = [code]
    m.buffers = [schema.BufferT()]
    sg = schema.SubGraphT()
    sg.tensors = []
    for name, s in (("a", s1), ("b", s2), ("y", so)):
        t = schema.TensorT()
        t.name, t.shape, t.type, t.buffer = name, [1, 4], TYPES[dtype][0], 0
        q = schema.QuantizationParametersT()
        q.scale, q.zeroPoint = [s], [0]
        t.quantization = q
        sg.tensors.append(t)
    o = schema.OperatorT()
    o.opcodeIndex, o.inputs, o.outputs = 0, [0, 1], [2]
    if op == schema.BuiltinOperator.ADD:
        o.builtinOptionsType, o.builtinOptions = schema.BuiltinOptions.AddOptions, schema.AddOptionsT()
        o.builtinOptions.potScaleInt16 = pot
    else:
        o.builtinOptionsType, o.builtinOptions = schema.BuiltinOptions.SubOptions, schema.SubOptionsT()
    sg.operators, sg.inputs, sg.outputs = [o], [0, 1], [2]
    m.subgraphs = [sg]
    return bytes(fbu.convert_object_to_bytearray(m))


PREPARE = (
    "import sys\n"
    "from ai_edge_litert.interpreter import Interpreter\n"
    "Interpreter(model_path=sys.argv[1]).allocate_tensors()\n"
)


def _litert_aborts(path) -> bool:
    """Whether LiteRT kills the process preparing the model at ``path`` (an exception is not an abort: the
    power-of-two int16 path refuses what it cannot shift with a RuntimeError, which lmu-edge catches)."""
    r = subprocess.run([sys.executable, "-c", PREPARE, str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 1, -6), r  # prepared, an exception, SIGABRT
    assert r.returncode != 1 or "RuntimeError" in r.stderr, r.stderr
    return r.returncode == -6


def _cases():
    rng = np.random.default_rng(23)
    out = []
    for dtype, (_, k) in TYPES.items():
        for op in (schema.BuiltinOperator.ADD, schema.BuiltinOperator.SUB):
            # the multiplier 2 max(s1, s2) / (2^k so) at 0.9 and 1.1 (either side of the abort) and drawn
            # log-uniformly over [1e-3, 1e3], with scales drawn over six decades
            for m in (0.9, 1.1, *np.exp(rng.uniform(np.log(1e-3), np.log(1e3), 2))):
                s1, s2 = np.exp(rng.uniform(np.log(1e-9), np.log(1e-3), 2))
                out.append((dtype, int(op), float(s1), float(s2), float(2 * max(s1, s2) / (2.0**k * m))))
    # int16 scales that are powers of two take LiteRT's shifting path, which raises instead of aborting (its
    # multipliers 64 and 1/2), unless one is 1e-2 off a power of two in log2 (the general path: 64 aborts)
    pot = [(2.0**-10, 2.0**-12, 2.0**-30), (2.0**-10, 2.0**-12, 2.0**-23), (2.0**-10.01, 2.0**-12, 2.0**-30)]
    out += [("int16", 0, *p) for p in pot]
    # TFLite's int16x8 quantizer writes pot_scale_int16 = false: powers of two take the general path then
    # (seed 1011 of issue 52: 2^-30, 2^-14, 2^-30, multiplier 4, aborted)
    out += [("int16", 0, *p, False) for p in [*pot, (2.0**-30, 2.0**-14, 2.0**-30), (2.0**-10, 2.0**-12, 2.0**-10)]]
    return [c if len(c) == 6 else (*c, True) for c in out]


@pytest.mark.parametrize(("dtype", "op", "s1", "s2", "so", "pot"), _cases())
def test_check_scales_refuses_an_add_exactly_where_litert_aborts(dtype, op, s1, s2, so, pot, tmp_path):
    model = _add_model(dtype, s1, s2, so, op, pot)
    (tmp_path / "m.tflite").write_bytes(model)
    aborts = _litert_aborts(tmp_path / "m.tflite")
    try:
        check_scales(model)
        refused = None
    except QuantizationError as e:
        refused = str(e)
    assert (refused is not None) == aborts, (aborts, refused)
    if refused:
        assert "\n" not in refused and "'y'" in refused and "must be below 1" in refused, refused


@pytest.mark.parametrize("mode", ["int8", "int16x8"])
def test_an_add_whose_sum_is_finer_than_its_terms_converts_through_tf_s_quantizer(mode, tmp_path):
    # issue 52, seeds 1036 and 1045: a term 0 on every sample (live_ranges gives it its op's input range) plus
    # a tiny one; the sum calibrates as small as the tiny term, a scale the ADD cannot requantize to, and
    # int16x8 was refused. live_ranges widens the sum's range to what the ADD takes (ADD_ROOM times it)
    import functools

    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    from lmu_edge.targets._tflite_guard import ADD_ROOM, quantize_live

    tiny = 1e-7

    @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
    def step(x):
        return tf.nn.relu(x - 10.0) + tiny * x  # x in [-1, 1]: the relu is 0 on every sample

    conv = tf.lite.TFLiteConverter.from_concrete_functions([step.get_concrete_function()], step)
    xs = np.random.default_rng(1).uniform(-1, 1, (32, 1, 4)).astype(np.float32)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([x] for x in xs)
    io = tf.int8 if mode == "int8" else tf.int16
    ops = tf.lite.OpsSet
    conv.target_spec.supported_ops = [
        ops.TFLITE_BUILTINS_INT8 if mode == "int8" else ops.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
    ]
    conv.inference_input_type = conv.inference_output_type = io
    conv._quantize = functools.partial(quantize_live, conv)
    model = conv.convert()
    check_scales(model)
    (tmp_path / "m.tflite").write_bytes(model)
    assert not _litert_aborts(tmp_path / "m.tflite")
    # the sum's scale: ADD_ROOM times the least its requantization takes (multiplier 1 / ADD_ROOM), no coarser
    m = schema.Model.GetRootAs(model, 0)
    sg = m.Subgraphs(0)
    codes = [
        max(c.BuiltinCode(), c.DeprecatedBuiltinCode()) for c in map(m.OperatorCodes, range(m.OperatorCodesLength()))
    ]
    adds = [op for op in map(sg.Operators, range(sg.OperatorsLength())) if codes[op.OpcodeIndex()] == 0]
    op = adds[-1]
    s1, s2, so_ = (float(sg.Tensors(t).Quantization().Scale(0)) for t in (op.Inputs(0), op.Inputs(1), op.Outputs(0)))
    k = 15 if mode == "int16x8" else 20
    assert abs(2.0 * max(s1, s2) / (2.0**k * so_) * ADD_ROOM - 1.0) < 0.05, (s1, s2, so_)
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    (i,), (o,) = it.get_input_details(), it.get_output_details()
    (si, zi), (so, zo) = i["quantization"], o["quantization"]
    info = np.iinfo(io.as_numpy_dtype)
    for x in xs[:8]:
        it.set_tensor(i["index"], np.clip(np.round(x / si) + zi, info.min, info.max).astype(info.dtype))
        it.invoke()
        y = (it.get_tensor(o["index"]).astype(np.float64) - zo) * so
        assert np.max(np.abs(y - tiny * x)) <= so + s2 + tiny * si, (y, tiny * x, so)  # an LSB of each
