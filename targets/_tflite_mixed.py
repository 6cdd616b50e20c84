"""Full-int8 TFLite model with an int16 state path, spliced from two conversions.

In a full-int8 TFLite graph every tensor is 8 bits, so the LMU state is
rounded to 8 bits every step; that rounding alone caps the memory at ~20-25 dB
SQNR against float (see docs/tflite_onnx.md), whatever the weights are. The
int16x8 conversion of the same step model keeps the state at 16 bits.
:func:`widen_state_path` takes both conversions of one TF step model (same
operators in the same order: the converter builds both from one MLIR graph)
and makes an int8 model whose *state path* is the int16x8 one:

* the state path ``R`` is every operator the next state depends on (the
  ancestors of the ``*_out`` state outputs: the memory update, and the
  encoders computing ``u``) and, with ``state_readers``, the
  FULLY_CONNECTED ops that read a state (the hidden layer's pre-activation:
  reading the state at 16 bits gains ~1 dB). Its operators, weights (int8),
  biases (int64) and activations (int16, symmetric) are taken from the
  int16x8 model;
* everything else (TANH of the hidden layer, the layers after the LMU) stays int8;
* where an int8 tensor enters ``R`` (the input ``x``) a QUANTIZE int8->int16
  is inserted, and where an ``R`` tensor feeds an int8 operator a QUANTIZE
  int16->int8 with the int8 model's quantization of that tensor: a one-off
  8-bit rounding, not fed back.

The inputs ``x`` and the output ``y`` are int8 (``x`` int16 where widening
finds that 8 bits of input hold the model under its target: ``wide_input``);
the state inputs and outputs are int16 (their quantization is in ``io.json``). All operators are builtin
kernels that TFLite Micro implements for these types (FULLY_CONNECTED int16x8
with int64 bias, ADD / MUL int16, QUANTIZE int8<->int16), checked by the
tests in both runtimes.
"""

from __future__ import annotations

import copy

import numpy as np

from lmu_edge.registry import require

from . import _tflite_contract

_QUANTIZE = 114  # schema BuiltinOperator.QUANTIZE
_QUANTIZE_OPTIONS = 89  # schema BuiltinOptions.QuantizeOptions
_INT8, _INT16 = 9, 7  # schema TensorType
_FC = 9  # schema BuiltinOperator.FULLY_CONNECTED


class SpliceError(ValueError):
    """The two conversions cannot be spliced (different structure, or a non-int16 state path)."""


def _code(c) -> int:
    return max(c.builtinCode, c.deprecatedBuiltinCode)


def _name(n) -> str:
    return n.decode() if isinstance(n, bytes) else n


def _signature_io(m):
    sig = next(s for s in m.signatureDefs if s.subgraphIndex == 0)
    return ({_name(t.name): t.tensorIndex for t in sig.inputs}, {_name(t.name): t.tensorIndex for t in sig.outputs})


def _is_const(m, sg, t) -> bool:
    buf = m.buffers[sg.tensors[t].buffer]
    return buf.data is not None and len(buf.data) > 0


def widen_state_path(
    model8: bytes,
    model16: bytes,
    state_names,
    state_readers: bool = True,
    extra=(),
    output_range=None,
    wide_input: bool = False,
) -> bytes:
    """The int8 model with its state path replaced by the int16x8 model's (see the module docstring), and
    the operators ``extra`` (indices into the int8 model's operators, :func:`candidate_ops`) with it.
    ``wide_input``: the model input ``x`` is int16 (the int16x8 model's quantization of it), read by R
    as it is and by int8 operators through a QUANTIZE int16->int8; for a model that 8 bits of input
    hold under its target. ``output_range``: ``(lo, hi)`` of the model output ``y`` on the calibration
    data; where R writes ``y`` (through a QUANTIZE int16->int8) the int8 ``y`` takes that range instead of the int8
    conversion's, which is fixed to [-1, 1] after a TANH (the matrix's sigmoid model, whose output
    spans a fifth of it: 8 bits over [-1, 1] alone held it to 29 dB)."""
    fb = require("tensorflow.lite.tools.flatbuffer_utils", "tflite", "editing TFLite models")
    schema = require("tensorflow.lite.python.schema_py_generated", "tflite", "editing TFLite models")
    a = fb.convert_bytearray_to_object(bytearray(model8))
    b = fb.convert_bytearray_to_object(bytearray(model16))
    if len(a.subgraphs) != 1 or len(b.subgraphs) != 1:
        raise SpliceError("only single-subgraph step models can be spliced")
    sa, sb = a.subgraphs[0], b.subgraphs[0]
    _match_requantize(a, b, schema)
    _requantize_early(a)
    _requantize_early(b)
    if len(sa.operators) != len(sb.operators):
        raise SpliceError(f"the int8 and int16x8 conversions differ: {len(sa.operators)} vs {len(sb.operators)} ops")
    for k, (oa, ob) in enumerate(zip(sa.operators, sb.operators, strict=True)):
        if (
            _code(a.operatorCodes[oa.opcodeIndex]) != _code(b.operatorCodes[ob.opcodeIndex])
            or len(oa.inputs) != len(ob.inputs)
            or len(oa.outputs) != len(ob.outputs)
        ):
            raise SpliceError(f"the int8 and int16x8 conversions differ at operator {k}")
    _rewire_requantized(a, b, _region(a, state_names, state_readers) | set(extra))
    ins_a, outs_a = _signature_io(a)
    ins_b, outs_b = _signature_io(b)
    # tensor correspondence a -> b, by operator position (graph inputs/outputs by signature name)
    t_ab = {ins_a[n]: ins_b[n] for n in ins_a}
    t_ab.update({outs_a[n]: outs_b[n] for n in outs_a})
    seen: dict = {}  # every int16x8 tensor an int8 one stands for: two where one conversion requantizes for some
    for oa, ob in zip(sa.operators, sb.operators, strict=True):  # readers only (seed 189: a softmax's output)
        for ta, tb in zip(list(oa.inputs) + list(oa.outputs), list(ob.inputs) + list(ob.outputs), strict=True):
            if ta >= 0:
                t_ab.setdefault(ta, tb)
                seen.setdefault(ta, set()).add(tb)

    producer = {t: k for k, op in enumerate(sa.operators) for t in op.outputs}
    region = _region(a, state_names, state_readers) | set(extra)
    for ta, tbs in seen.items():  # R reads such a tensor made outside it through one int16 copy per reading
        if len(tbs) > 1 and (producer.get(ta) in region or ta in set(sa.inputs)):
            raise SpliceError(f"tensor {ta} of the int8 model maps to two int16x8 tensors")

    def new_tensor(template, name_suffix):
        t = copy.deepcopy(template)
        t.name = (_name(t.name) + name_suffix).encode()
        sa.tensors.append(t)
        return len(sa.tensors) - 1

    # 1. operators of R: constants and activations from the int16x8 model
    region_tensors = set()
    for k in sorted(region):
        oa, ob = sa.operators[k], sb.operators[k]
        for j, (ta, tb) in enumerate(zip(oa.inputs, ob.inputs, strict=True)):
            if ta < 0:
                continue
            if _is_const(b, sb, tb):
                tt = copy.deepcopy(sb.tensors[tb])
                buf = schema.BufferT()
                buf.data = np.array(b.buffers[tt.buffer].data, dtype=np.uint8)
                a.buffers.append(buf)
                tt.buffer = len(a.buffers) - 1
                sa.tensors.append(tt)
                oa.inputs[j] = len(sa.tensors) - 1
            else:
                region_tensors.add(ta)
        region_tensors.update(oa.outputs)
    # activations of R: int16 with the int16x8 model's quantization; boundaries get a QUANTIZE
    graph_inputs = set(sa.inputs)
    state_inputs = {ins_a[n] for n in state_names}
    quant_ops = []

    def make_int16(ta):
        """Tensor ``ta`` int16 with the int16x8 model's quantization; operators outside R read an int8
        copy of it (the int8 model's quantization) made by a QUANTIZE."""
        outside = [
            (k, j) for k, op in enumerate(sa.operators) if k not in region for j, t in enumerate(op.inputs) if t == ta
        ]
        if outside:
            t8 = new_tensor(sa.tensors[ta], name_suffix="_int8")
            for k, j in outside:
                sa.operators[k].inputs[j] = t8
            quant_ops.append((ta, t8))
        sa.tensors[ta].type = _INT16
        sa.tensors[ta].quantization = copy.deepcopy(sb.tensors[t_ab[ta]].quantization)

    x_in = ins_a["x"] if wide_input else None
    if x_in is not None:  # x itself int16: R reads it directly, int8 operators an int8 copy
        if sb.tensors[t_ab[x_in]].type != _INT16:
            raise SpliceError("the input x is not int16 in the int16x8 conversion")
        make_int16(x_in)
        region_tensors.discard(x_in)
    model_outputs = set(sa.outputs) - {outs_a[f"{n}_out"] for n in state_names}
    for ta in sorted(region_tensors):
        tb = t_ab[ta]
        if sb.tensors[tb].type != _INT16 or sa.tensors[ta].type != _INT8:
            raise SpliceError(
                f"tensor {_name(sa.tensors[ta].name)!r} of the state path is not int8 / int16 in the two conversions"
            )
        made_in_r = producer.get(ta) in region or ta in state_inputs
        if made_in_r and ta in model_outputs:
            # a model output (y) made in R: R writes an int16 copy, a QUANTIZE gives the int8 output
            t16 = new_tensor(sb.tensors[tb], name_suffix="_int16")
            for k in region:
                op = sa.operators[k]
                op.outputs = [t16 if t == ta else t for t in op.outputs]
                op.inputs = [t16 if t == ta else t for t in op.inputs]
            quant_ops.append((t16, ta))
            if output_range is not None:
                lo, hi = min(float(output_range[0]), 0.0), max(float(output_range[1]), 0.0)
                if hi > lo:
                    q = sa.tensors[ta].quantization
                    sc = (hi - lo) / 255.0
                    q.scale, q.zeroPoint = [sc], [int(np.clip(round(-128 - lo / sc), -128, 127))]
        elif made_in_r:
            make_int16(ta)  # int8 consumers outside R read an int8 copy (the int8 model's quantization)
        else:
            # made outside R (an int8 op, or the int8 input x): R reads an int16 copy
            if ta not in graph_inputs and producer.get(ta) is None:
                raise SpliceError(f"tensor {_name(sa.tensors[ta].name)!r} has no producer")
            for tb in sorted(seen[ta]):  # one copy for each int16x8 quantization R's operators read it in
                t16 = new_tensor(sb.tensors[tb], name_suffix="_int16")
                sa.tensors[t16].buffer = sa.tensors[ta].buffer
                for k in region:
                    op, ob = sa.operators[k], sb.operators[k]
                    op.inputs = [t16 if t == ta and u == tb else t for t, u in zip(op.inputs, ob.inputs, strict=True)]
                quant_ops.append((ta, t16))

    # 2. opcodes: versions at least those of the int16x8 model, plus QUANTIZE
    versions: dict[int, int] = {}
    for c in b.operatorCodes:
        versions[_code(c)] = max(versions.get(_code(c), 1), c.version)
    for c in a.operatorCodes:
        c.version = max(c.version, versions.get(_code(c), 1))
    qi = next((i for i, c in enumerate(a.operatorCodes) if _code(c) == _QUANTIZE), None)
    if qi is None and quant_ops:
        c = schema.OperatorCodeT()
        c.builtinCode, c.deprecatedBuiltinCode, c.version = _QUANTIZE, _QUANTIZE, 1
        a.operatorCodes.append(c)
        qi = len(a.operatorCodes) - 1
    if any(sa.tensors[dst].type == _INT16 for _, dst in quant_ops):  # op_version.cc: int16 output -> 2
        a.operatorCodes[qi].version = max(a.operatorCodes[qi].version, 2)
    for src, dst in quant_ops:
        op = schema.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = qi, [src], [dst]
        op.builtinOptionsType, op.builtinOptions = _QUANTIZE_OPTIONS, schema.QuantizeOptionsT()
        sa.operators.append(op)
    sa.operators = _topological(sa.operators, set(sa.inputs))
    _min_runtime_version(a, b)
    _prune(a)
    return bytes(fb.convert_object_to_bytearray(a))


def _match_requantize(a, b, schema) -> None:
    """Give the int8 model ``a`` a QUANTIZE wherever only the int16x8 model ``b`` has one, so that the two
    list the same operators: the int16x8 converter requantizes an int16 input of a CONCATENATION whose
    scale is not the output's (int16 CONCATENATION does not rescale), where the int8 conversion's
    inputs already share the output's quantization (the issue-52 model with ``input_to_hidden`` and no
    hidden cell: 14 vs 15 ops, so its int8 model had fallen back to an 8-bit state, 8.5 dB). The int8
    QUANTIZE writes its input's tensor in the int8 quantization the reading operator needs (a
    CONCATENATION's output's, else the input's own). Nothing changes when the counts already agree or
    the difference is not such QUANTIZE ops (and the int8 ones of :func:`_drop_own_requantize`), or where
    an int8 CONCATENATION would then read another quantization than its output's."""
    if len(a.subgraphs[0].operators) == len(b.subgraphs[0].operators):
        return
    work = copy.deepcopy(a)
    if _requantize_into(work, b, schema) and (_concats_agree(work) or not _concats_agree(a)):
        a.subgraphs[0].__dict__.update(work.subgraphs[0].__dict__)  # in place: the caller holds a.subgraphs[0]
        a.operatorCodes[:], a.buffers[:] = work.operatorCodes, work.buffers


def _rewire_requantized(a, b, region) -> None:
    """The operators of R (``region``) in the int8 model ``a`` read a QUANTIZE's input where the int16x8 model ``b``
    reads it unrequantized: the int8 conversion requantized a softmax's output for every reader, the int16x8 one
    only for the CONCATENATION whose scale it must share (seed 189), and one int8 tensor stood for two int16x8
    ones. R takes the int16x8 model's constants, so its operators may read what that model's read."""
    sa, sb = a.subgraphs[0], b.subgraphs[0]
    made_a = {t: k for k, op in enumerate(sa.operators) for t in op.outputs}
    made_b = {t: k for k, op in enumerate(sb.operators) for t in op.outputs}
    for k in region:
        oa, ob = sa.operators[k], sb.operators[k]
        for j, (ta, tb) in enumerate(zip(oa.inputs, ob.inputs, strict=True)):
            q = made_a.get(ta) if ta >= 0 else None
            if q is None or _code(a.operatorCodes[sa.operators[q].opcodeIndex]) != _QUANTIZE:
                continue
            src = sa.operators[q].inputs[0]
            if made_b.get(tb) is not None and made_b.get(tb) == made_a.get(src):
                oa.inputs[j] = src


def _requantize_early(m) -> None:
    """``m``'s operators (in place) with each QUANTIZE right after the operator that writes its input (first where
    nothing does), an order both conversions agree on: the converter puts the requantization of a softmax's
    output to its fixed scale straight after the SOFTMAX in the int8 model and just before its reader in the
    int16x8 one (issue 52, seed 189: operator 12 against 18), and the splice pairs operators by position (it
    had fallen back to an 8-bit state: -6.3 dB). Every operator still follows what it reads."""
    sg = m.subgraphs[0]
    quant = [op for op in sg.operators if _code(m.operatorCodes[op.opcodeIndex]) == _QUANTIZE]
    if not quant:
        return
    rest = [op for op in sg.operators if _code(m.operatorCodes[op.opcodeIndex]) != _QUANTIZE]
    made = {t for op in rest for t in op.outputs}
    out: list = []

    def place(tensors):  # the QUANTIZE ops reading these, each followed by those reading it
        for q in [q for q in quant if q.inputs[0] in tensors]:
            quant.remove(q)
            out.append(q)
            place(set(q.outputs))

    by_quant = {t for q in quant for t in q.outputs}
    place({q.inputs[0] for q in quant if q.inputs[0] not in made | by_quant})
    for op in rest:
        out.append(op)
        place(set(op.outputs))
    sg.operators = out + quant  # none left unless a QUANTIZE reads itself


def _concats_agree(a) -> bool:
    """Whether every int8 CONCATENATION of ``a`` reads its activations in its output's quantization."""
    sa = a.subgraphs[0]

    def q(t):
        qt = sa.tensors[t].quantization
        return (list(qt.scale), list(qt.zeroPoint)) if qt is not None and qt.scale is not None else None

    return all(
        q(t) == q(op.outputs[0])
        for op in sa.operators
        if _code(a.operatorCodes[op.opcodeIndex]) == 2 and sa.tensors[op.outputs[0]].type == _INT8
        for t in op.inputs
        if t >= 0 and not _is_const(a, sa, t)
    )


def _requantize_into(a, b, schema) -> bool:
    """:func:`_match_requantize` on ``a`` in place; whether it made the two list the same operators."""
    sa, sb = a.subgraphs[0], b.subgraphs[0]
    extra = [
        k
        for k, op in enumerate(sb.operators)
        if _code(b.operatorCodes[op.opcodeIndex]) == _QUANTIZE
        and sb.tensors[op.inputs[0]].type == _INT16
        and sb.tensors[op.outputs[0]].type == _INT16
        and not _is_const(b, sb, op.inputs[0])
    ]
    if not extra or len(sa.operators) == len(sb.operators):
        return False
    if not _drop_own_requantize(a, len(sb.operators) - len(extra)):
        return False
    rest = [k for k in range(len(sb.operators)) if k not in set(extra)]
    if any(
        _code(a.operatorCodes[sa.operators[i].opcodeIndex]) != _code(b.operatorCodes[sb.operators[k].opcodeIndex])
        for i, k in enumerate(rest)
    ):
        return False
    a_of = {k: i for i, k in enumerate(rest)}  # b's operator index -> a's
    qi = next((i for i, c in enumerate(a.operatorCodes) if _code(c) == _QUANTIZE), None)
    if qi is None:
        c = schema.OperatorCodeT()
        c.builtinCode, c.deprecatedBuiltinCode, c.version = _QUANTIZE, _QUANTIZE, 1
        a.operatorCodes.append(c)
        qi = len(a.operatorCodes) - 1
    made = {}
    for k in extra:
        tq = sb.operators[k].outputs[0]
        readers = [(a_of[r], j) for r in rest for j, t in enumerate(sb.operators[r].inputs) if t == tq]
        sources = {sa.operators[i].inputs[j] for i, j in readers}
        if len(sources) != 1:
            return False
        src = sources.pop()
        t = copy.deepcopy(sa.tensors[src])
        t.name = (_name(t.name) + "_requantized").encode()
        t.buffer = 0
        i0 = readers[0][0]
        if _code(a.operatorCodes[sa.operators[i0].opcodeIndex]) == 2:  # CONCATENATION: its output's
            t.quantization = copy.deepcopy(sa.tensors[sa.operators[i0].outputs[0]].quantization)
        sa.tensors.append(t)
        for i, j in readers:
            sa.operators[i].inputs[j] = len(sa.tensors) - 1
        op = schema.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = qi, [src], [len(sa.tensors) - 1]
        op.builtinOptionsType, op.builtinOptions = _QUANTIZE_OPTIONS, schema.QuantizeOptionsT()
        made[k] = op
    ops_a = iter(list(sa.operators))
    sa.operators = [made[k] if k in made else next(ops_a) for k in range(len(sb.operators))]
    return True


def _drop_own_requantize(a, n: int) -> bool:
    """Whether the int8 model ``a`` lists ``n`` operators, after dropping, where that makes it so, its own
    int8 -> int8 QUANTIZE ops of activations (a SOFTMAX's fixed 1/256 output requantized for a
    CONCATENATION that also feeds a FULLY_CONNECTED: issue 52, seed 25, 34 vs 35 ops with the int16x8
    model's two int16 QUANTIZE ops, so its int8 model had fallen back to an 8-bit state, -1.6 dB). The
    readers of a dropped QUANTIZE's output read its input (a FULLY_CONNECTED's bias rescaled to that
    input's scale); a CONCATENATION among them gets its QUANTIZE back from :func:`_match_requantize`.
    Nothing is dropped where a reader is any other op or the output is the model's."""
    sa = a.subgraphs[0]
    if len(sa.operators) == n:
        return True
    own = [
        k
        for k, op in enumerate(sa.operators)
        if _code(a.operatorCodes[op.opcodeIndex]) == _QUANTIZE
        and sa.tensors[op.inputs[0]].type == _INT8
        and sa.tensors[op.outputs[0]].type == _INT8
        and not _is_const(a, sa, op.inputs[0])
        and op.outputs[0] not in sa.outputs
    ]
    if len(sa.operators) - len(own) != n:
        return False
    readers = {
        k: [
            (i, j)
            for i, op in enumerate(sa.operators)
            for j, t in enumerate(op.inputs)
            if t == sa.operators[k].outputs[0]
        ]
        for k in own
    }
    codes = {i: _code(a.operatorCodes[sa.operators[i].opcodeIndex]) for r in readers.values() for i, _ in r}
    if any(c not in (_FC, 2) for c in codes.values()):  # FULLY_CONNECTED and CONCATENATION only
        return False
    for k in own:
        src, dst = sa.operators[k].inputs[0], sa.operators[k].outputs[0]
        ratio = float(sa.tensors[src].quantization.scale[0]) / float(sa.tensors[dst].quantization.scale[0])
        for i, j in readers[k]:
            op = sa.operators[i]
            op.inputs[j] = src
            if codes[i] == _FC and len(op.inputs) > 2 and op.inputs[2] >= 0:  # bias scale: input's * weight's
                bt = sa.tensors[op.inputs[2]]
                dt = np.int64 if bt.type == 4 else np.int32  # schema TensorType 4: int64
                v = np.frombuffer(bytes(bytearray(a.buffers[bt.buffer].data)), dtype=dt) / ratio
                a.buffers[bt.buffer].data = np.frombuffer(np.round(v).astype(dt).tobytes(), dtype=np.uint8)
                bt.quantization.scale = [float(x) * ratio for x in bt.quantization.scale]
    sa.operators = [op for k, op in enumerate(sa.operators) if k not in set(own)]
    return True


def _region(a, state_names, state_readers: bool) -> set:
    """R, by operator index: the ancestors of the state outputs, and (``state_readers``) the
    FULLY_CONNECTED ops reading a state."""
    sa = a.subgraphs[0]
    ins_a, outs_a = _signature_io(a)
    producer = {t: k for k, op in enumerate(sa.operators) for t in op.outputs}
    region, todo = set(), [outs_a[f"{n}_out"] for n in state_names]
    while todo:
        kp = producer.get(todo.pop())
        if kp is None or kp in region:
            continue
        region.add(kp)
        todo.extend(t for t in sa.operators[kp].inputs if t >= 0)
    if state_readers:
        fc = {k for k, op in enumerate(sa.operators) if _code(a.operatorCodes[op.opcodeIndex]) == _FC}
        states = {ins_a[n] for n in state_names} | {outs_a[f"{n}_out"] for n in state_names}
        region |= {k for k in fc if set(sa.operators[k].inputs) & states}
    return region


def candidate_ops(model8: bytes, model16: bytes, state_names, state_readers: bool = True) -> dict:
    """The operators :func:`widen_state_path` can take into R as ``extra``, one at a time: ``{index:
    "OPNAME -> output tensor name"}``; not those whose splice fails (an output that is not int16 in the
    int16x8 conversion). An operator writing the model's output writes an int16 copy that a QUANTIZE
    makes the int8 output: the output stays int8 (the input is a candidate of its own: ``wide_input``)."""
    fb = require("tensorflow.lite.tools.flatbuffer_utils", "tflite", "editing TFLite models")
    schema = require("tensorflow.lite.python.schema_py_generated", "tflite", "editing TFLite models")
    a = fb.convert_bytearray_to_object(bytearray(model8))
    # indices as widen_state_path reads extra: after the QUANTIZE ops _match_requantize inserts
    _match_requantize(a, fb.convert_bytearray_to_object(bytearray(model16)), schema)
    _requantize_early(a)
    sa = a.subgraphs[0]
    region = _region(a, state_names, state_readers)
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    _tflite_contract.name_tensors(a)  # each operator by the name its output has in the written model
    out = {}
    for k, op in enumerate(sa.operators):
        if k in region:
            continue
        try:
            widen_state_path(model8, model16, state_names, state_readers, extra=(k,))
        except SpliceError:
            continue
        code = _code(a.operatorCodes[op.opcodeIndex])
        out[k] = f"{names.get(code, code)} -> {_name(sa.tensors[op.outputs[0]].name)}"
    return out


def _min_runtime_version(a, b) -> None:
    """The spliced model needs the newer of the two conversions' ``min_runtime_version`` metadata."""

    def get(m):
        md = next((md for md in m.metadata or [] if _name(md.name) == "min_runtime_version"), None)
        if md is None:
            return None, ()
        text = bytes(bytearray(m.buffers[md.buffer].data)).split(b"\0")[0].decode(errors="replace")
        return md, tuple(int(v) for v in text.split(".") if v.isdigit())

    (ma, va), (mb, vb) = get(a), get(b)
    if ma is not None and mb is not None and vb > va:
        a.buffers[ma.buffer].data = np.array(b.buffers[mb.buffer].data, dtype=np.uint8)


def _prune(m) -> None:
    """Drop the tensors and buffers nothing reads any more (the int8 weights of the state path)."""
    sg = m.subgraphs[0]
    used = sorted(
        {t for op in sg.operators for t in list(op.inputs) + list(op.outputs) if t >= 0}
        | set(sg.inputs)
        | set(sg.outputs)
    )
    t_map = {old: new for new, old in enumerate(used)}
    sg.tensors = [sg.tensors[t] for t in used]
    for op in sg.operators:
        op.inputs = [t_map[t] if t >= 0 else t for t in op.inputs]
        op.outputs = [t_map[t] for t in op.outputs]
    sg.inputs = [t_map[t] for t in sg.inputs]
    sg.outputs = [t_map[t] for t in sg.outputs]
    for sig in m.signatureDefs or []:
        for t in list(sig.inputs or []) + list(sig.outputs or []):
            t.tensorIndex = t_map[t.tensorIndex]
    keep = sorted({0} | {t.buffer for t in sg.tensors} | {md.buffer for md in (m.metadata or [])})
    b_map = {old: new for new, old in enumerate(keep)}
    m.buffers = [m.buffers[i] for i in keep]
    for t in sg.tensors:
        t.buffer = b_map[t.buffer]
    for md in m.metadata or []:
        md.buffer = b_map[md.buffer]


def _topological(ops, inputs):
    """Operators in an order where every tensor is made before it is read (stable otherwise)."""
    made = set(inputs)
    produced = {t for op in ops for t in op.outputs}
    out, left = [], list(ops)
    while left:
        for k, op in enumerate(left):
            if all(t < 0 or t in made or t not in produced for t in op.inputs):
                out.append(op)
                made.update(op.outputs)
                del left[k]
                break
        else:
            raise SpliceError("the spliced graph has a cycle")
    return out


def builder(m8: bytes, m16: bytes, states, tight16, y_range):
    """``build(wide)``: the int8 model with its int16 state path and the candidates ``wide`` spliced from
    the int16x8 conversion ``m16`` (``"x"``: an int16 input; ``"tight"``: ``tight16()`` instead of ``m16``)."""
    from . import _tflite_tflm

    def build(wide):
        ops = sorted(k for k in wide if k not in ("x", "tight", "y"))
        return _tflite_tflm.conform(
            widen_state_path(
                m8,
                tight16() if "tight" in wide else m16,
                states,
                extra=ops,
                output_range=(2 * min(y_range[0], 0.0), 2 * max(y_range[1], 0.0)) if "y" in wide else y_range,
                wide_input="x" in wide,
            )
        )

    return build
