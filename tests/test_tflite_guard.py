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


def _add_model(dtype: str, s1: float, s2: float, so: float, op: int = schema.BuiltinOperator.ADD) -> bytes:
    """One ``op`` (ADD or SUB) of two (1, 4) activations of ``dtype`` with scales s1, s2 and output scale so."""
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
    return out


@pytest.mark.parametrize(("dtype", "op", "s1", "s2", "so"), _cases())
def test_check_scales_refuses_an_add_exactly_where_litert_aborts(dtype, op, s1, s2, so, tmp_path):
    model = _add_model(dtype, s1, s2, so, op)
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
