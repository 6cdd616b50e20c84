"""Build the TFLite step model with TensorFlow and convert it (float32, int8, int16x8).

The step function (:class:`._floatstep.FloatStep`, shared with the ONNX
target) is written through :class:`TFOps` with plain TensorFlow ops that the TFLite
converter maps onto builtin ops (FULLY_CONNECTED, ADD, MUL, CONCATENATION,
RESHAPE, STRIDED_SLICE, CUMSUM, TANH, LOGISTIC, SOFTMAX, ...), so the models
run in LiteRT and in TFLite Micro.

Quantized LMU memory ("split" form)
-----------------------------------
Converted plainly, ``m' = m @ Abar^T + u * Bbar`` becomes one FULLY_CONNECTED
whose weights are 8-bit: ``Abar`` is close to the identity and its 8-bit
rounding changes the impulse response by ~20-30 %, which no state width can
repair. The split form writes each coefficient as a high part on the 8-bit
grid of its output channel plus the remainder::

    W_hi[:, c] = round(W[:, c] / s_c) * s_c,   s_c = max|W[:, c]| / 127
    W_lo       = W - W_hi                      (|W_lo| <= s_c / 2)
    m'         = m @ W_hi + m @ W_lo + u * Bbar       (:func:`._floatstep.split_weights`)

Both products are FULLY_CONNECTED ops over the same input; the converter
quantizes ``W_hi`` exactly (it is already on the per-channel grid) and
``W_lo`` with its own, 254 times finer scale, so the coefficients carry ~15
bits. The weights of an LMU's feedback loop (``FloatStep(split_loop=True)``)
are split the same way. With the state in balanced coordinates (:mod:`._stepplan`: every
Legendre coefficient of the state uses its whole integer range), the int16x8
model keeps the LMU within ~60 dB of float. In full int8 the state itself is
an 8-bit tensor, and its rounding every step limits the memory to ~20-25 dB
(measured, see docs/tflite_onnx.md) whatever the weights are, so the int8
model takes its state path from the int16x8 conversion (:mod:`._tflite_mixed`,
:func:`convert_int8_pair` gives the two conversions it splices): int8 in and out,
int16 state.

Headroom on int16 ranges
------------------------
The converter sets each tensor's range from the representative data alone, so
an input that drives the state past what calibration saw is clipped, and a
clipped state stays wrong for the whole window. int16 has bits to spare:
:func:`widen_int16_ranges` doubles the range of every int16 activation of the
int16x8 conversion (as the C target's int16x8 and the ONNX target's 16-bit
tensors do), so the int8 model's spliced state path has it too.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np

from lmu_edge import ir
from lmu_edge.qlinear import LOOP16_SPAN, RANGE16_HEADROOM
from lmu_edge.registry import require

from ._floatstep import FloatStep, layer_part
from ._stepplan import StatePlan, loop_tensors
from ._tflite_guard import check_scales, live_states, quantize_live, scales_ok


def _tf():
    return require("tensorflow", "tflite", "building TFLite models")


class TFOps:
    """The :class:`._floatstep.StepOps` backend that writes TensorFlow ops (inside a ``tf.function``)."""

    def __init__(self, tf):
        self.tf = tf
        self.layer, self.part, self._scope = None, "", None

    def enter_layer(self, layer):
        """Ops written from now on are named after ``layer`` (:meth:`_rescope`); ``None``: after the last."""
        self.layer, self.part = layer, ""
        self._rescope()

    def _rescope(self):
        """Leave the name scope of the previous layer part and enter ``<layer>.<part>/`` (``lmu.memory/``,
        ``lmu.hidden/``, ``dense/``): the converted model's tensors carry the layer's name (its Keras or
        torch name) and part, not TensorFlow's ``add_24``. A trailing ``/`` reuses the scope as it is."""
        if self._scope is not None:
            self._scope.__exit__(None, None, None)
            self._scope = None
        if self.layer is not None:
            name = re.sub(r"[^A-Za-z0-9_.\-]", "_", self.layer.name) + (f".{self.part}" if self.part else "")
            self._scope = self.tf.name_scope((name if name[:1].isalnum() else f"L{name}") + "/")
            self._scope.__enter__()

    def const(self, a):
        """A float32 ``tf.constant``."""
        return self.tf.constant(np.asarray(a, dtype=np.float32))

    def matmul(self, x, W, b=None):
        """``x @ W (+ b)``: FULLY_CONNECTED once converted."""
        y = self.tf.matmul(x, self.const(W))
        return y if b is None else y + self.const(b)

    def add(self, a, b):
        """``a + b``."""
        return a + b

    def sub(self, a, b):
        """``a - b``."""
        return a - b

    def maximum(self, a, b):
        """MAXIMUM."""
        return self.tf.maximum(a, b)

    def mul(self, a, b):
        """``a * b``."""
        return a * b

    def div(self, a, b):
        """``a / b`` for a step count ``b >= 1`` (the running mean's): ``a * rsqrt(b)^2``, RSQRT and MUL.
        TFLite's converter has no 16x8 DIV, and RSQRT / MUL have int8 and int16 kernels in LiteRT and
        TFLite Micro, so a model with a running mean converts to int16x8 and gets the int16 state path
        in int8."""
        r = self.tf.math.rsqrt(b)
        return a * (r * r)

    def unary(self, name, x):
        """RELU, RELU6, TANH, LOGISTIC or SOFTMAX."""
        tf = self.tf
        fns = {
            "relu": tf.nn.relu,
            "relu6": tf.nn.relu6,
            "tanh": tf.tanh,
            "sigmoid": tf.sigmoid,
            "softmax": lambda v: tf.nn.softmax(v, axis=-1),
        }
        return fns[name](x)

    def reshape(self, x, shape):
        """RESHAPE."""
        return self.tf.reshape(x, shape)

    def concat(self, xs, axis):
        """CONCATENATION."""
        return self.tf.concat(list(xs), axis=axis)

    def cols(self, x, start, stop):
        """STRIDED_SLICE ``x[:, start:stop]``."""
        return x[:, start:stop]

    def cumsum(self, x):
        """CUMSUM along axis 1."""
        return self.tf.cumsum(x, axis=1)

    def memory_path(self, on):
        """The tensors' types: nothing (the TFLite converter chooses every tensor's type itself); their
        names: the layer's part from now on (:func:`._floatstep.layer_part`)."""
        self.part = layer_part(self.layer, bool(on))
        self._rescope()


def build_module(
    graph: ir.Graph, plan: StatePlan, form: str, internal: bool, per_tensor: bool = False, split_uneven: bool = False
):
    """A ``tf.Module`` with a ``step`` function (and ``reset`` for the internal variant); ``per_tensor``:
    the split weights' high parts on the per-tensor grid (:data:`PER_TENSOR`)."""
    tf = _tf()
    if form not in ("plain", "split"):
        raise ValueError(f"unknown memory form {form!r}; known: plain, split")
    split = form == "split"
    fstep = FloatStep(graph, plan, split, split, per_tensor=per_tensor, split_uneven=split and split_uneven)
    ops = TFOps(tf)
    Module: Any = tf.Module  # imported at run time: mypy sees no class here
    F = graph.input_features
    spec = plan.spec

    # autograph=False: the step is Python over the graph's layers (no tensor-dependent control flow), so
    # AutoGraph's source rewriting of every FloatStep method only cost time (a quarter of a conversion's
    # wall time; the .tflite bytes are the same)
    if not internal:  # batch 1 here (TFLite Micro runs the stored shapes); the batch is opened at the end
        sig = [tf.TensorSpec((1, F), tf.float32, name="x")] + [
            tf.TensorSpec((1, s), tf.float32, name=n) for n, _, _, s in spec
        ]

        class Step(Module):
            @tf.function(input_signature=sig, autograph=False)
            def step(self, x, *states):
                y, new = fstep.step(ops, x, {n: v for (n, *_), v in zip(spec, states, strict=True)})
                out = {"y": y}
                out.update({f"{n}_out": new[n] for n, *_ in spec})
                return out

        m = Step()
        return m, [m.step.get_concrete_function()]

    class StepInternal(Module):
        def __init__(self):
            super().__init__()
            self.vars = [tf.Variable(np.zeros((1, s), np.float32), name=n) for n, _, _, s in spec]

        @tf.function(input_signature=[tf.TensorSpec((1, F), tf.float32, name="x")], autograph=False)
        def step(self, x):
            y, new = fstep.step(ops, x, {n: v.read_value() for (n, *_), v in zip(spec, self.vars, strict=True)})
            for (n, *_), v in zip(spec, self.vars, strict=True):
                v.assign(new[n])
            return {"y": y}

        @tf.function(input_signature=[], autograph=False)
        def step_reset(self):
            for (_, _, _, s), v in zip(spec, self.vars, strict=True):
                v.assign(tf.zeros((1, s), tf.float32))
            return {"done": tf.constant(0, tf.int32)}

    m = StepInternal()
    return m, [m.step.get_concrete_function(), m.step_reset.get_concrete_function()]


#: the modes whose FULLY_CONNECTED weights are quantized per tensor: every FULLY_CONNECTED of an
#: int16x8 model reads int16, and TFLite Micro's CMSIS-NN kernel takes per-channel weights with int8
#: inputs only (``tensorflow/lite/micro/kernels/cmsis_nn/fully_connected.cc``, Prepare: "Currently only
#: Int8 is supported for per channel quantization"). The int8 model's int16 state path is spliced from
#: the int16x8 conversion (:mod:`._tflite_mixed`), so its int16-input FULLY_CONNECTED ops are per tensor too
PER_TENSOR = ("int16x8",)


def convert(
    graph,
    plan: StatePlan,
    form: str,
    internal: bool,
    quantize: str,
    rep: dict | None,
    split_uneven=None,
    memory_room: float | None = None,
    loops: bool = True,
) -> bytes:
    """The ``.tflite`` flatbuffer of the step model (``memory_room``: see :func:`widen_int16_ranges`; ``loops``
    False: a feedback loop's int16 tensors keep 2x, as in int8's int16 half, :func:`convert_int8_pair`).

    ``rep`` (quantized modes): ``{"x": (S, F), <state>: (S, size)}`` in model
    coordinates, recorded by the float oracle on the calibration data. For the
    internal variant the states are not inputs: the calibration runs the
    representative inputs in their recorded order, so the variables follow the
    real trajectory.
    """
    tf = _tf()
    per_tensor = quantize in PER_TENSOR
    split_uneven = per_tensor if split_uneven is None else split_uneven
    module, fns = build_module(graph, plan, form, internal, per_tensor, split_uneven)
    conv = tf.lite.TFLiteConverter.from_concrete_functions(fns, module)
    # TF's converter option for per-tensor FULLY_CONNECTED weights (private, as TF names it; TF >= 2.16)
    conv._experimental_disable_per_channel_quantization_for_dense_layers = per_tensor
    if quantize != "float":
        if rep is None:
            raise ValueError("a quantized conversion needs the representative data rep")
        names = ["x"] + ([] if internal else [n for n, *_ in plan.spec])
        rep = live_states(rep, names[1:])
        S = rep["x"].shape[0]

        def data():
            for k in range(S):
                feed = {n: rep[n][k : k + 1].astype(np.float32) for n in names}
                yield ("step", feed) if internal else feed

        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = data
        if quantize == "int8":
            conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            io = tf.int8
        else:
            conv.target_spec.supported_ops = [
                tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
            ]
            io = tf.int16
        conv.inference_input_type = io
        conv.inference_output_type = io
    import warnings

    with warnings.catch_warnings():  # TF's own calibrator still builds a tf.lite.Interpreter: not the user's to fix
        warnings.filterwarnings("ignore", message=r"(?s).*tf\.lite\.Interpreter is deprecated")
        model = conv.convert()
        if quantize != "float":
            model = live_scales(model)
            if not scales_ok(model):  # a tensor 0 on every sample wrecked the weights of the op reading it
                conv._quantize = functools.partial(quantize_live, conv)  # (issue 52, seeds 26 and 30)
                model = live_scales(conv.convert())
    if quantize != "float":
        check_scales(model)  # before anything prepares it: LiteRT aborts the process on some scales
    if quantize != "float" and not internal:
        model = tie_state_scales(model, [n for n, *_ in plan.spec])
        if quantize == "int16x8":
            spans = loop_tensors(graph) if loops else None
            model = widen_int16_ranges(model, RANGE16_HEADROOM, memory_room=memory_room, loops=spans)
    return model


def convert_int8_pair(graph, plan: StatePlan, form: str, rep: dict) -> tuple:
    """The int8 and the int16x8 conversions of one step model (what :mod:`._tflite_mixed` splices);
    raises :class:`._tflite_mixed.SpliceError` when the int16x8 converter fails."""
    from ._tflite_mixed import SpliceError

    m8 = convert(graph, plan, form, False, "int8", rep, split_uneven=True)  # the int16x8 model's structure
    try:
        # int8's int16 half keeps a loop's 2x: the widening search weighs its bits there (issue 52, seed 18's
        # linear SimpleRNN cell: TFLite int8 32.6 -> 29.2 dB held out with the loop's 8x)
        m16 = convert(graph, plan, form, False, "int16x8", rep, loops=False)
    except Exception as e:
        raise SpliceError(f"the int16x8 conversion failed: {str(e).strip().splitlines()[0][:200]}") from e
    return m8, m16


#: ops whose int16 inputs and outputs must share one quantization: CONCATENATION, RESHAPE, SQUEEZE,
#: STRIDED_SLICE, SLICE, EXPAND_DIMS, MAXIMUM, MINIMUM, TRANSPOSE, GATHER, PACK, UNPACK, SPLIT
_SAME_SCALE = (2, 22, 43, 45, 65, 70, 55, 57, 39, 36, 83, 88, 49)
#: ops with a fixed int16 output scale (LOGISTIC, TANH, SOFTMAX, LOG_SOFTMAX): their tensors keep theirs
_FIXED_SCALE = (14, 28, 25, 50)


#: ops whose output :func:`live_scales` checks: ADD, SUB, MUL, FULLY_CONNECTED
_PRODUCTS = (0, 41, 18, 9)
#: an int8 / int16 output scale this many times finer than one step of its op's product is a point range (its
#: whole range spans less than that step; XNNPack refuses an int8 requantization by 256 or more): :func:`live_scales`
_DEAD_RATIO = {9: 2.0**8, 7: 2.0**16}


def live_scales(model: bytes) -> bytes:
    """``model`` with every int8 / int16 activation that the converter calibrated on a point range given its
    op's largest activation input scale instead.

    A unit that is constant on the calibration data (issue 52, seed 1000: a ReLU6 head whose input stayed
    negative, output 0 throughout) gets a range of [0, 0] and a scale of 3.6e-43 from the converter: LiteRT
    then aborts the process preparing the int16x8 model, and refuses the int8 one's FULLY_CONNECTED
    (``no_integer_overflow_from_quantization``). Its zero point still holds the constant 0, so a coarser
    scale changes no calibrated output. Tensors joined to it by an op of :data:`_SAME_SCALE` take the same
    scale, and the biases of the FULLY_CONNECTED ops that read them are rescaled (:func:`_rescale_fc_bias`)."""
    fb = require("tensorflow.lite.tools.flatbuffer_utils", "tflite", "editing TFLite models")
    m = fb.convert_bytearray_to_object(bytearray(model))
    sg = m.subgraphs[0]
    code = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in m.operatorCodes]

    def scale(t):
        q = sg.tensors[t].quantization if t >= 0 else None
        return None if q is None or q.scale is None or len(q.scale) == 0 else np.asarray(q.scale, np.float64)

    def constant(t):
        b = m.buffers[sg.tensors[t].buffer]
        return b.data is not None and len(b.data) > 0

    links: dict[int, set[int]] = {}
    for op in sg.operators:
        if code[op.opcodeIndex] in _SAME_SCALE:
            ts = [t for t in list(op.inputs) + list(op.outputs) if t >= 0 and not constant(t)]
            for a in ts:
                links.setdefault(a, set()).update(ts)
    new: dict[int, float] = {}
    for op in sg.operators:
        c = code[op.opcodeIndex]
        if c not in _PRODUCTS or not len(op.outputs) or sg.tensors[op.outputs[0]].type not in (7, 9):
            continue
        out = scale(op.outputs[0]) if op.outputs[0] not in new else None
        # the scales given so far: a point range feeding another (u = 0 @ x, then u + u) passes it on
        acts = [np.asarray([new[t]]) if t in new else scale(t) for t in op.inputs[:2] if t >= 0 and not constant(t)]
        if out is None or len(out) != 1 or not acts or any(a is None for a in acts):
            continue
        if c == 9:
            w = scale(op.inputs[1])
            product = float(acts[0].max() * (w.max() if w is not None else 1.0))
        else:
            product = float(np.prod([a.max() for a in acts])) if c == 18 else max(float(a.max()) for a in acts)
        if float(out[0]) * _DEAD_RATIO[sg.tensors[op.outputs[0]].type] >= product:
            continue
        group, todo = set(), [op.outputs[0]]
        while todo:
            t = todo.pop()
            if t not in group:
                group.add(t)
                todo.extend(links.get(t, ()))
        for t in group:
            new[t] = max(float(a.max()) for a in acts)
    if not new:
        return model
    for op in sg.operators:
        if code[op.opcodeIndex] == 9 and len(op.inputs) > 2 and op.inputs[2] >= 0 and op.inputs[0] in new:
            _rescale_fc_bias(m, sg, op, new[op.inputs[0]] / float(scale(op.inputs[0])[0]))
    for t, s in new.items():
        sg.tensors[t].quantization.scale = [s]
    return bytes(fb.convert_object_to_bytearray(m))


def _name(t) -> str:
    """A flatbuffer tensor or signature entry's name as text."""
    return t.name.decode() if isinstance(t.name, bytes) else t.name


#: the names of an LMU memory path's tensors: its part's scope (``<layer>.memory/``) and its state ``L<i>_m``
_MEMORY_TENSOR = re.compile(r"\.memory/|(^|_)L\d+_m(_out)?(:\d+)?$")


def widen_int16_ranges(
    model: bytes, factor: float, memory_room: float | None = None, loops: "re.Pattern | None" = None
) -> bytes:
    """``model`` with the range of every int16 activation widened ``factor`` times (zero point 0 stays).
    ``loops``: the tensors of a feedback loop (:func:`._stepplan.loop_tensors`) span LOOP16_SPAN times their
    calibrated range instead, as in the C target (issue 52, seed 1060: a SiLU SimpleRNN cell's state,
    TFLite int16x8 17.2 dB held out where C gave 51).
    ``memory_room``: an LMU memory path's tensors (:data:`_MEMORY_TENSOR`) are widened that many times instead,
    for a memory whose state-rounding noise the dynamics amplify (mixed precision's last resort).

    Tensors that must share a quantization (joined by an op of :data:`_SAME_SCALE`, or a state and its
    ``*_out``) are widened together or not at all; a group that holds a constant or the output of an op
    with a fixed int16 scale (:data:`_FIXED_SCALE`) keeps its range, and so does one that only such ops
    read. The int64 / int32 bias of a FULLY_CONNECTED reading a widened tensor is rescaled (its scale is
    input scale * weight scale).
    When TFLite cannot prepare the widened model, the model is returned unchanged."""
    fb = require("tensorflow.lite.tools.flatbuffer_utils", "tflite", "editing TFLite models")
    m = fb.convert_bytearray_to_object(bytearray(model))
    sg = m.subgraphs[0]
    code = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in m.operatorCodes]
    parent = list(range(len(sg.tensors)))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def join(ts):
        ts = [t for t in ts if t >= 0]
        for t in ts[1:]:
            parent[find(t)] = find(ts[0])

    fixed: set[int] = set()
    fixed_in: set[int] = set()  # read by a fixed-scale op (whose kernel rescales any input scale)
    read_else: set[int] = set()  # read by any other op
    for op in sg.operators:
        c = code[op.opcodeIndex]
        if c in _SAME_SCALE:
            join(list(op.inputs if c in (2, 55, 57, 83) else op.inputs[:1]) + list(op.outputs))
        if c in _FIXED_SCALE:
            fixed.update(t for t in op.outputs if t >= 0)
            fixed_in.update(t for t in op.inputs if t >= 0)
        elif c not in _SAME_SCALE:  # an op that only moves bytes joins its tensors instead
            read_else.update(t for t in op.inputs if t >= 0)
    for sig in m.signatureDefs:
        if sig.subgraphIndex != 0:
            continue
        outs = {_name(t): t.tensorIndex for t in sig.outputs}
        for t in sig.inputs:
            if f"{_name(t)}_out" in outs:  # a state and its update: one quantization
                join([t.tensorIndex, outs[f"{_name(t)}_out"]])

    def constant(t):
        b = m.buffers[sg.tensors[t].buffer]
        return b.data is not None and len(b.data) > 0

    keep = {find(t) for t in fixed} | {find(t) for t in range(len(sg.tensors)) if constant(t)}
    # what only a fixed-scale op reads keeps its range (beyond it the op's output barely moves; widened, the
    # int16 TANH of the matrix's RNN-path model gave TFLite Micro and LiteRT outputs a step apart), but where a
    # loop's values must pass (seed 1060: a TANH read the SiLU SimpleRNN cell's state). What another op reads
    # too widens: a SiLU's pre-activation (LOGISTIC and MUL) went 1.25x past its calibrated range held out and
    # clipped there (issue 52, seed 46: TFLite int16x8 31.4 dB where C gave 48.7; 61.4 with the headroom)
    keep_in = {find(t) for t in fixed_in} - {find(t) for t in read_else}
    looping = (
        set() if loops is None else {find(t) for t in range(len(sg.tensors)) if loops.search(_name(sg.tensors[t]))}
    )
    if loops is not None:  # by the signature's names too (the output y)
        for sig in m.signatureDefs:
            looping |= {find(t.tensorIndex) for t in list(sig.inputs) + list(sig.outputs) if loops.search(_name(t))}
    tight = set()
    if memory_room is not None:
        tight = {find(t) for t in range(len(sg.tensors)) if _MEMORY_TENSOR.search(_name(sg.tensors[t]))}
    widened: dict[int, float] = {}
    for i, t in enumerate(sg.tensors):
        q = t.quantization
        if t.type != 7 or q is None or q.scale is None or len(q.scale) != 1 or find(i) in keep:
            continue  # 7: int16
        if find(i) in keep_in and find(i) not in looping:
            continue
        f = memory_room if memory_room is not None and find(i) in tight else factor
        f = max(f, LOOP16_SPAN) if find(i) in looping else f
        q.scale = [float(q.scale[0]) * f]
        widened[i] = f
    for op in sg.operators:
        if code[op.opcodeIndex] == 9 and len(op.inputs) > 2 and op.inputs[0] in widened and op.inputs[2] >= 0:
            _rescale_fc_bias(m, sg, op, widened[op.inputs[0]])
    out = bytes(fb.convert_object_to_bytearray(m))
    try:
        check_scales(out)  # LiteRT aborts the process on some scales; this raises instead
        interpreter = require("ai_edge_litert.interpreter", "tflite", "running TFLite models in LiteRT").Interpreter
        interpreter(model_content=out).allocate_tensors()  # LiteRT: tf.lite.Interpreter is deprecated
    except Exception:  # noqa: BLE001 (an op this function does not know: keep the calibrated ranges)
        return model
    return out


def _rescale_fc_bias(m, sg, op, ratio: float) -> None:
    """The bias of FULLY_CONNECTED ``op`` after its input's scale was multiplied by ``ratio``: a bias's scale
    must stay input scale * weight scale, so it is multiplied by ``ratio`` and its integers divided by it
    (rounded), which keeps the real bias."""
    bt = sg.tensors[op.inputs[2]]
    buf = m.buffers[bt.buffer]
    bdt = np.int64 if bt.type == 4 else np.int32  # schema TensorType 4: int64 (16x8 layers)
    vals = np.frombuffer(bytes(bytearray(buf.data)), dtype=bdt).astype(np.float64)
    buf.data = np.frombuffer(np.round(vals / ratio).astype(bdt).tobytes(), dtype=np.uint8)
    bt.quantization.scale = [float(v) * ratio for v in bt.quantization.scale]


def _range(scale, zp, dtype):
    info = np.iinfo(dtype)
    return (info.min - zp) * scale, (info.max - zp) * scale


def tie_state_scales(model: bytes, state_names) -> bytes:
    """Give each external state input and its ``*_out`` output one quantization.

    The converter calibrates the two tensors separately, so their scales
    differ slightly, and a state handed back unchanged (as a device does)
    would be misread. Both get the union of the two ranges, and so does every
    tensor tied to them by an op that only moves bytes (RESHAPE, SQUEEZE,
    EXPAND_DIMS: its input and output must share one quantization; a ``d > 1``
    memory reshapes the state to ``(d, q)``). Where the update is the output of a LOGISTIC, TANH or
    SOFTMAX (a hidden state ``h``), both take that op's fixed quantization (:data:`._tflite_tflm.FIXED`):
    the union of the two ranges moved a TANH's int16 output to 1/32767 and an int8 LOGISTIC's off 1/256,
    which TFLite refuses (issue 52: "the LOGISTIC output scale"). The biases of the
    FULLY_CONNECTED ops that read any of these tensors are requantized to the
    new input scale (their scale must be input scale * weight scale).
    """
    fb = require("tensorflow.lite.tools.flatbuffer_utils", "tflite", "editing TFLite models")
    m = fb.convert_bytearray_to_object(bytearray(model))
    sg = m.subgraphs[0]
    sig = next(s for s in m.signatureDefs if s.subgraphIndex == 0)
    ins = {t.name.decode() if isinstance(t.name, bytes) else t.name: t.tensorIndex for t in sig.inputs}
    outs = {t.name.decode() if isinstance(t.name, bytes) else t.name: t.tensorIndex for t in sig.outputs}
    dtypes = {9: np.int8, 7: np.int16}  # schema TensorType codes
    fc_codes = {i for i, c in enumerate(m.operatorCodes) if max(c.builtinCode, c.deprecatedBuiltinCode) == 9}
    moves = {
        i
        for i, c in enumerate(m.operatorCodes)  # RESHAPE, SQUEEZE, EXPAND_DIMS
        if max(c.builtinCode, c.deprecatedBuiltinCode) in (22, 43, 70)
    }
    from ._tflite_tflm import FIXED

    fixed_out = {}  # output tensor of a fixed-scale op -> its (scale, zero point)
    for op in sg.operators:
        c = max(m.operatorCodes[op.opcodeIndex].builtinCode, m.operatorCodes[op.opcodeIndex].deprecatedBuiltinCode)
        if c in FIXED and len(op.outputs) and sg.tensors[op.outputs[0]].type in FIXED[c]:
            fixed_out[op.outputs[0]] = FIXED[c][sg.tensors[op.outputs[0]].type]
    links: dict[int, set[int]] = {}
    for op in sg.operators:
        if op.opcodeIndex in moves:
            links.setdefault(op.inputs[0], set()).add(op.outputs[0])
            links.setdefault(op.outputs[0], set()).add(op.inputs[0])

    def tied(*ts):
        group, todo = set(), list(ts)
        while todo:
            t = todo.pop()
            if t not in group:
                group.add(t)
                todo.extend(links.get(t, ()))
        return sorted(group)

    for name in state_names:
        ti, to = ins[name], outs[f"{name}_out"]
        a, b = sg.tensors[ti], sg.tensors[to]
        if a.type not in dtypes or a.quantization is None or a.quantization.scale is None:
            continue
        dt = dtypes[a.type]
        lo = min(
            _range(a.quantization.scale[0], a.quantization.zeroPoint[0], dt)[0],
            _range(b.quantization.scale[0], b.quantization.zeroPoint[0], dt)[0],
        )
        hi = max(
            _range(a.quantization.scale[0], a.quantization.zeroPoint[0], dt)[1],
            _range(b.quantization.scale[0], b.quantization.zeroPoint[0], dt)[1],
        )
        info = np.iinfo(dt)
        fixed = [fixed_out[t] for t in tied(ti, to) if t in fixed_out]
        if fixed:  # the update is a LOGISTIC / TANH / SOFTMAX output: its fixed quantization, for both
            s, z = fixed[0]
        elif dt == np.int16:  # symmetric
            s, z = max(-lo, hi) / info.max, 0
        else:
            s = (hi - lo) / (info.max - info.min)
            z = int(np.clip(round(info.min - lo / s), info.min, info.max))
        for t in tied(ti, to):
            if sg.tensors[t].quantization is None or not len(sg.tensors[t].quantization.scale):
                continue
            old = float(sg.tensors[t].quantization.scale[0])
            for op in sg.operators:
                if op.opcodeIndex in fc_codes and len(op.inputs) > 2 and op.inputs[0] == t and op.inputs[2] >= 0:
                    _rescale_fc_bias(m, sg, op, s / old)
            sg.tensors[t].quantization.scale = [float(s)]
            sg.tensors[t].quantization.zeroPoint = [int(z)]
    return bytes(fb.convert_object_to_bytearray(m))
