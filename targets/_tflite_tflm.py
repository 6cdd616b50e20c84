"""What TFLite Micro's kernels accept, checked and enforced on a quantized ``.tflite`` step model.

TFLite Micro built with ``OPTIMIZED_KERNEL_DIR=cmsis_nn`` (the build Arm users deploy) runs
FULLY_CONNECTED, ADD, MUL, SOFTMAX, MAXIMUM / MINIMUM (and the convolutions, pooling, ... that
lmu-edge does not emit) on CMSIS-NN, every other op on TFLite Micro's reference kernels. A kernel
checks its tensors' quantization in ``Prepare`` and ``AllocateTensors`` fails on a model that breaks
it. :func:`violations` lists every break of these checks (paths in the tflite-micro repository,
``tensorflow/lite/micro/kernels/``):

* FULLY_CONNECTED (``cmsis_nn/fully_connected.cc``): int16 input -> int8 weights with **one** scale
  ("Currently only Int8 is supported for per channel quantization"), input and output zero point 0;
  int8 input -> int8 weights, per channel allowed;
* ADD (``cmsis_nn/add.cc``): int16 -> both inputs and the output zero point 0;
* MUL (``cmsis_nn/mul.cc`` -> CMSIS-NN ``arm_elementwise_mul_s16``, which ignores the offsets: CMSIS-NN
  ``Source/BasicMathFunctions/arm_elementwise_mul_s16.c``): int16 -> zero points 0;
* CONCATENATION (``concatenation.cc``): int8 -> every input has the output's scale and zero point
  ("no re-scaling needed for Int8 quantized kernel"); int16 -> zero points 0;
* LOGISTIC (``logistic_common.cc``): int8 output zero point -128 (and scale 1/256, as TFLite's own
  kernel requires); int16 zero points 0, output scale 2^-15;
* TANH (``tanh.cc``; TFLite's kernel: output 1/128, zero point 0 in int8): int16 zero points 0;
* SOFTMAX (``softmax_common.cc``): int8 output 1/256, zero point -128; int16 zero points 0, output
  1/32768.

:func:`conform` makes a model meet the two that lmu-edge's own edits can break: it gives every
LOGISTIC / TANH / SOFTMAX output its fixed quantization, and puts a requantizing QUANTIZE (int8 ->
int8, which TFLite Micro's ``quantize.cc`` runs) before each CONCATENATION input whose quantization
differs from the output's (:func:`._tflite_build.tie_state_scales` rescales a state that a
CONCATENATION then reads: the issue-52 model ``Dense(8, relu) -> LMUFeedforward(memory_d=8,
input_to_hidden) -> Dense(5, softmax)`` failed in LiteRT's XNNPack and in TFLite Micro).
"""

from __future__ import annotations

import copy

from lmu_edge.registry import require

_FC, _ADD, _MUL, _CONCAT, _LOGISTIC, _TANH, _SOFTMAX, _QUANTIZE = 9, 0, 18, 2, 14, 28, 25, 114
_QUANTIZE_OPTIONS = 89  # schema BuiltinOptions.QuantizeOptions
_INT8, _INT16 = 9, 7  # schema TensorType
_NAMES = {_FC: "FULLY_CONNECTED", _ADD: "ADD", _MUL: "MUL", _CONCAT: "CONCATENATION"}
_NAMES.update({_LOGISTIC: "LOGISTIC", _TANH: "TANH", _SOFTMAX: "SOFTMAX"})
#: op -> TensorType -> (output scale, output zero point) the kernels require
FIXED = {
    _LOGISTIC: {_INT8: (1.0 / 256, -128), _INT16: (1.0 / 32768, 0)},
    _TANH: {_INT8: (1.0 / 128, 0), _INT16: (1.0 / 32768, 0)},
    _SOFTMAX: {_INT8: (1.0 / 256, -128), _INT16: (1.0 / 32768, 0)},
}


def _fb():
    return require("tensorflow.lite.tools.flatbuffer_utils", "tflite", "editing TFLite models")


def _code(c) -> int:
    return max(c.builtinCode, c.deprecatedBuiltinCode)


def _q(t) -> tuple:
    """``(scales, zero points)`` of a tensor (empty lists when it has none)."""
    q = t.quantization
    if q is None or q.scale is None:
        return [], []
    return [float(s) for s in q.scale], [int(z) for z in (q.zeroPoint if q.zeroPoint is not None else [])]


def violations(model: bytes) -> list:
    """Every break of the TFLite Micro (CMSIS-NN) kernels' quantization checks in subgraph 0 of ``model``
    (see the module docstring), one line each: ``"op 3 FULLY_CONNECTED: int16 input with 12 weight
    scales"``; empty when TFLite Micro with CMSIS-NN kernels can prepare every op."""
    m = _fb().convert_bytearray_to_object(bytearray(model))
    sg = m.subgraphs[0]
    out = []
    for k, op in enumerate(sg.operators):
        c = _code(m.operatorCodes[op.opcodeIndex])
        if c not in _NAMES or not len(op.inputs):
            continue
        where = f"op {k} {_NAMES[c]}"
        tin, tout = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
        (_, zin), (sout, zout) = _q(tin), _q(tout)
        ins16 = [sg.tensors[t] for t in op.inputs if t >= 0 and sg.tensors[t].type == _INT16]
        if c == _FC and tin.type == _INT16:
            w = sg.tensors[op.inputs[1]]
            ws, _ = _q(w)
            if w.type != _INT8:
                out.append(f"{where}: int16 input with weights of type {w.type}, not int8")
            if len(ws) != 1:
                out.append(f"{where}: int16 input with {len(ws)} weight scales (per-channel weights)")
            if zin != [0] or zout != [0]:
                out.append(f"{where}: int16 input / output zero points {zin} / {zout}, not 0")
        elif c in (_ADD, _MUL, _CONCAT) and ins16:
            zps = [_q(t)[1] for t in ins16] + [zout]
            if any(z != [0] for z in zps):
                out.append(f"{where}: int16 zero points {zps}, not 0")
        if c == _CONCAT and tout.type == _INT8:
            for t in op.inputs:
                if _q(sg.tensors[t]) != (sout, zout):
                    out.append(f"{where}: int8 input {_q(sg.tensors[t])} differs from the output's {(sout, zout)}")
        if c in FIXED and tout.type in FIXED[c]:
            s, z = FIXED[c][tout.type]
            if len(sout) != 1 or abs(sout[0] - s) > 1e-6 * s or zout != [z]:
                out.append(f"{where}: output quantization {(sout, zout)}, not the fixed {(s, z)}")
            if tout.type == _INT16 and zin != [0]:
                out.append(f"{where}: int16 input zero point {zin}, not 0")
    return out


def reference_fallbacks(model: bytes) -> list:
    """The ops of subgraph 0 that TFLite Micro built with CMSIS-NN prepares but runs on its reference
    kernels, one line each: a MUL whose two inputs differ in shape (``cmsis_nn/mul.cc`` calls CMSIS-NN's
    elementwise kernel only for equal shapes and broadcasts with ``reference_ops::BroadcastMul4DSlow``;
    measured by ``bench/tflm_m4.py``'s execution trace: the one node of each model that ran no ``arm_*``
    function). Slower, not wrong: the model still runs."""
    m = _fb().convert_bytearray_to_object(bytearray(model))
    sg = m.subgraphs[0]
    out = []
    for k, op in enumerate(sg.operators):
        if _code(m.operatorCodes[op.opcodeIndex]) == _MUL and len(op.inputs) == 2:
            a, b = (sg.tensors[t] for t in op.inputs)
            sa, sb = [int(v) for v in a.shape], [int(v) for v in b.shape]
            if sa != sb:
                out.append(f"op {k} MUL: broadcast {sa} x {sb}")
    return out


def conform(model: bytes) -> bytes:
    """``model`` with every LOGISTIC / TANH / SOFTMAX output at its fixed quantization (:data:`FIXED`)
    and a QUANTIZE int8 -> int8 before every CONCATENATION input whose quantization is not the output's;
    ``model`` itself when nothing changes."""
    fb = _fb()
    schema = require("tensorflow.lite.python.schema_py_generated", "tflite", "editing TFLite models")
    m = fb.convert_bytearray_to_object(bytearray(model))
    sg = m.subgraphs[0]
    changed = False
    requant = []
    for op in sg.operators:
        c = _code(m.operatorCodes[op.opcodeIndex])
        tout = sg.tensors[op.outputs[0]] if len(op.outputs) else None
        if c in FIXED and tout is not None and tout.type in FIXED[c] and tout.quantization is not None:
            s, z = FIXED[c][tout.type]
            if _q(tout) != ([s], [z]):
                tout.quantization.scale, tout.quantization.zeroPoint = [s], [z]
                changed = True
        if c == _CONCAT and tout is not None and tout.type == _INT8:
            for j, t in enumerate(op.inputs):
                if t >= 0 and _q(sg.tensors[t]) != _q(tout):
                    requant.append((op, j))
    if requant:
        qi = next((i for i, c in enumerate(m.operatorCodes) if _code(c) == _QUANTIZE), None)
        if qi is None:
            oc = schema.OperatorCodeT()
            oc.builtinCode, oc.deprecatedBuiltinCode, oc.version = _QUANTIZE, _QUANTIZE, 1
            m.operatorCodes.append(oc)
            qi = len(m.operatorCodes) - 1
        new_ops = []
        for op, j in requant:
            src = op.inputs[j]
            t = copy.deepcopy(sg.tensors[src])
            name = t.name.decode() if isinstance(t.name, bytes) else str(t.name)
            t.name = (name + "_requant").encode()
            t.buffer = 0
            t.quantization = copy.deepcopy(sg.tensors[op.outputs[0]].quantization)
            sg.tensors.append(t)
            dst = len(sg.tensors) - 1
            q = schema.OperatorT()
            q.opcodeIndex, q.inputs, q.outputs = qi, [src], [dst]
            q.builtinOptionsType, q.builtinOptions = _QUANTIZE_OPTIONS, schema.QuantizeOptionsT()
            new_ops.append((op, q))
            op.inputs[j] = dst
        ops: list = []
        for op in sg.operators:  # each QUANTIZE right before the CONCATENATION that reads it
            ops.extend(q for o, q in new_ops if o is op)
            ops.append(op)
        sg.operators = ops
        changed = True
    return bytes(fb.convert_object_to_bytearray(m)) if changed else model
