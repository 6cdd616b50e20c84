"""The ``onnx`` target: an ONNX step model and a whole-sequence Scan model, built with onnx.helper.

Files:

``step.onnx``
    ``(x [B, F], L<i>_m [B, size], ...) -> (y [B, F_out], L<i>_m_out, ...)``: the
    state is explicit, the caller feeds each ``*_out`` back (zeros to reset); the
    batch ``B`` is a symbolic dimension, one row per stream.
``sequence.onnx``
    ``x_seq [T, B, F], <state>_init [B or 1, size] -> y_seq [T, B, F_out], <state>_final``:
    the same step as the body of a ``Scan`` whose carried values are the states
    (starting at ``<state>_init``, zeros by default).

The step is :class:`._floatstep.FloatStep` (the same description the TFLite
target converts), written as ONNX nodes by :class:`OnnxOps`.

Opset 21 (QuantizeLinear / DequantizeLinear with per-axis scales and int16), no TensorFlow.
``quantize="int8"`` writes QDQ models: weights as int8 initializers (symmetric, per output channel;
7-bit where an 8-bit activation reads them, int16 where a 16-bit one does, so that ONNX Runtime's
default session computes them as written: :data:`ORT_SESSION_CONFIG`) behind DequantizeLinear, every
activation behind an int8 QuantizeLinear / DequantizeLinear pair, and the LMU's input ``u``, its memory
update and its state (which integrate over theta steps) behind int16 pairs (symmetric), each pair's
scale from lmu_edge's own calibration (the ranges every tensor of the float step model takes when it
is run over the calibration data). The LMU weights use the split form of the TFLite target (``Abar =
hi + lo``; int16, as the state reads them).

int8 is mixed precision where 8 bits cannot carry the model (option ``widen_db``, default
:data:`WIDEN_DB`): when the QDQ model's SQNR against the float oracle on the calibration data is below
it, :func:`widen` makes the fewest activations and weight matrices 16-bit that lift it there (the
output stays int8), or gives the LMU memory path its calibrated ranges with less headroom (:data:`TIGHT`).
The layer-option matrix needs it: five of its ten models were at 17-29 dB with 8 bits everywhere but
the LMU state, 8-bit activations and, on the RNN-path model, 8-bit weights in its feedback loop being
the limit (docs/tflite_onnx.md). ``widen_db=None`` keeps every tensor but the LMU state path 8-bit.

Runtimes: ``onnxruntime`` (default; runs ``sequence.onnx``), ``onnx-reference``
(``onnx.reference.ReferenceEvaluator`` on ``sequence.onnx``); ``stream`` steps ``step.onnx``.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from lmu_edge import reference, widening
from lmu_edge.errors import ArtifactError
from lmu_edge.metrics import relative_error, sqnr_db
from lmu_edge.qlinear import RANGE16_HEADROOM, TIGHT16_HEADROOM
from lmu_edge.registry import require

from . import _stepplan
from ._floatstep import FloatStep, layer_part

QUANTIZE = ("float", "int8")
RUNTIMES = ("onnxruntime", "onnx-reference")
DEFAULT_RUNTIME = "onnxruntime"
OPSET = 21  # int16 in QuantizeLinear / DequantizeLinear (the 16-bit LMU state)
#: int8's mixed precision (option ``widen_db``; None: int8 everywhere but the LMU state path): where the
#: calibration SQNR misses this, activations and weight matrices are made 16-bit (:func:`widen`). The
#: floor is 30 dB on unseen inputs; on the layer-option matrix the test SQNR sat up to 3.1 dB below the
#: calibration SQNR, hence 6 dB of margin.
WIDEN_DB = 36.0
WIDE = "int16"  # a weight matrix's entry in a qdq map: 16-bit
TIGHT = "memory ranges"  # a widening candidate: the LMU memory path's int16 ranges at TIGHT16_HEADROOM (qdq)
OPTIONS: dict = {"calibration_steps": 2000, "widen_db": WIDEN_DB, "widen_steps": 20000}
STEP, SEQ = "step.onnx", "sequence.onnx"
#: the largest int8 weight of a MatMul with an 8-bit input (7 bits, ONNX Runtime's "reduce range"): the
#: fused QLinearMatMul on x86 CPUs without VNNI adds two uint8 x int8 products in 16 bits (ORT_SESSION_CONFIG)
SAFE_INT8 = 63
#: the name of the step and sequence models' symbolic batch dimension (any number of streams per call)
BATCH = "batch"


def _onnx():
    return require("onnx", "onnx", "building ONNX models")


class OnnxOps:
    """The :class:`._floatstep.StepOps` backend that writes ONNX nodes; ``qdq`` maps tensor names to
    ``(scale, zero_point, bits)``: the model is then a QDQ model (weights int8, activations behind
    QuantizeLinear / DequantizeLinear pairs)."""

    def __init__(self, graph, plan, qdq=None, prefix=""):
        self.onnx = _onnx()
        self.h = self.onnx.helper
        self.graph, self.plan, self.qdq, self.p = graph, plan, qdq, prefix
        self.nodes, self.inits, self.n = [], [], 0
        self.values = []  # every activation tensor name (for calibration)
        self.wide = False  # while True, activations are LMU input / state: 16-bit in a QDQ model
        self.wide_values = set()
        self.weights = []  # the weight matrices' names (widening candidates)
        self.output = None  # the tensor the output y is (kept 8-bit: int8 I/O)
        self._ints = {}  # int64 vectors (shapes, slice bounds, axes) -> initializer name
        self._axis = None  # CumSum's axis
        self.bits: dict = {}  # a QDQ model's activation (its DequantizeLinear output) -> its bits
        self.layer = None  # the layer being written (:meth:`enter_layer`) and its part: tensor names
        self.part = ""
        self._taken: set = set()

    def enter_layer(self, layer):
        """Tensors written from now on belong to ``layer`` (:meth:`name`)."""
        self.layer, self.part = layer, ""

    def name(self, base):
        """A fresh tensor name that says which layer of the user's model wrote it, and its part of that
        layer: ``<layer>.<part>.<base>`` (``lmu.memory.matmul``, ``lmu.hidden.tanh``, ``dense.softmax``,
        ``<...>.w`` a weight), then ``_2``, ``_3`` ... for the next ones of the same name. The names
        depend on the layer's own structure alone, so they are stable, and the same in the calibration
        and the QDQ model (:class:`Calibration` keys the ranges by them)."""
        self.n += 1
        where = "" if self.layer is None else f"{self.layer.name}." + (f"{self.part}." if self.part else "")
        nm, k = f"{self.p}{where}{base}", 1
        while nm in self._taken:
            k += 1
            nm = f"{self.p}{where}{base}_{k}"
        self._taken.add(nm)
        return nm

    def const(self, a, dtype=np.float32, wide=False, top8=127):
        """A float initializer, or (quantized) a weight matrix as int8 in ``[-top8, top8]`` (int16 where
        ``qdq`` names it :data:`WIDE` or ``wide``) behind DequantizeLinear, symmetric per output channel."""
        a = np.asarray(a, dtype=dtype)
        nm = self.name("w")
        if a.ndim == 2:
            self.weights.append(nm)
        if self.qdq is None or a.ndim != 2:
            self.inits.append(self.onnx.numpy_helper.from_array(a, nm))
            return nm
        top, qt = (32767, np.int16) if wide or self.qdq.get(nm) == WIDE else (top8, np.int8)
        s = np.abs(a).max(axis=0) / float(top)
        s = np.where(s > 0, s, 1.0).astype(np.float32)
        qa = np.clip(np.round(a / s), -top, top).astype(qt)
        self.inits += [
            self.onnx.numpy_helper.from_array(qa, nm + "_q"),
            self.onnx.numpy_helper.from_array(s, nm + "_s"),
            self.onnx.numpy_helper.from_array(np.zeros(s.shape, qt), nm + "_z"),
        ]
        self.nodes.append(self.h.make_node("DequantizeLinear", [nm + "_q", nm + "_s", nm + "_z"], [nm], axis=1))
        return nm

    def ints(self, values):
        """An int64 initializer holding ``values`` (one per distinct value)."""
        key = tuple(int(v) for v in values)
        if key not in self._ints:
            nm = self._ints[key] = self.name("shape")
            self.inits.append(self.onnx.numpy_helper.from_array(np.array(key, np.int64), nm))
        return self._ints[key]

    def op(self, op_type, inputs, **attrs):
        """A node ``op_type(inputs)``; returns its output (behind Q/DQ in a QDQ model)."""
        out = self.name(op_type.lower())
        self.nodes.append(self.h.make_node(op_type, list(inputs), [out], **attrs))
        return self.act(out)

    def act(self, t):
        """Record an activation; in a QDQ model put it behind Q/DQ with its calibrated scale."""
        self.values.append(t)
        if self.wide:
            self.wide_values.add(t)
        if self.qdq is None or t not in self.qdq:
            return t
        s, z, bits = self.qdq[t]
        sn, zn = t + "_qs", t + "_qz"
        self.inits += [
            self.onnx.numpy_helper.from_array(np.array(s, np.float32), sn),
            self.onnx.numpy_helper.from_array(np.array(z, np.int16 if bits == 16 else np.int8), zn),
        ]
        q, dq = t + "_q", t + "_dq"
        self.bits[dq] = bits
        self.nodes += [
            self.h.make_node("QuantizeLinear", [t, sn, zn], [q]),
            self.h.make_node("DequantizeLinear", [q, sn, zn], [dq]),
        ]
        return dq

    # --- _floatstep.StepOps ---------------------------------------------------------------------

    def matmul(self, x, W, b=None):
        """MatMul (and Add of the bias)."""
        # what ONNX Runtime's default session computes as the QDQ graph says (ORT_SESSION_CONFIG): a 16-bit
        # input reads 16-bit weights (no fused kernel takes them; int8 ones became MatMulNBits, which rounds
        # that input to 8 bits), an 8-bit input reads 7-bit weights (QLinearMatMul: x86 without VNNI sums
        # uint8 x int8 pairs in int16, and 2 * 255 * 127 saturates where 2 * 255 * 63 does not)
        bits = self.bits.get(x)
        y = self.op("MatMul", [x, self.const(W, wide=bits == 16, top8=SAFE_INT8 if bits == 8 else 127)])
        return y if b is None else self.op("Add", [y, self.const(np.asarray(b)[None, :])])

    def add(self, a, b):
        """Add."""
        return self.op("Add", [a, b])

    def sub(self, a, b):
        """Sub."""
        return self.op("Sub", [a, b])

    def maximum(self, a, b):
        """Max."""
        return self.op("Max", [a, b])

    def mul(self, a, b):
        """Mul."""
        return self.op("Mul", [a, b])

    def div(self, a, b):
        """Div."""
        return self.op("Div", [a, b])

    def unary(self, name, x):
        """Relu, Clip(0, 6), Tanh, Sigmoid or Softmax (last axis)."""
        if name == "relu6":
            return self.op("Clip", [x, self.const(np.float32(0)), self.const(np.float32(6))])
        if name == "softmax":
            return self.op("Softmax", [x], axis=-1)
        return self.op({"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid"}[name], [x])

    def reshape(self, x, shape):
        """Reshape."""
        return self.op("Reshape", [x, self.ints(shape)])

    def concat(self, xs, axis):
        """Concat."""
        return self.op("Concat", list(xs), axis=axis)

    def cols(self, x, start, stop):
        """Slice of columns ``start:stop`` (axis 1)."""
        return self.op("Slice", [x, self.ints([start]), self.ints([stop]), self.ints([1])])

    def cumsum(self, x):
        """CumSum along axis 1 (its axis is a 0-d int64 tensor)."""
        if self._axis is None:
            self._axis = self.const(1, np.int64)
        return self.op("CumSum", [x, self._axis])

    def memory_path(self, on):
        """Activations written while ``on`` are the LMU's input and memory: 16-bit in a QDQ model; the
        names of the tensors written from now on say the layer's part (:func:`._floatstep.layer_part`)."""
        self.wide = bool(on)
        self.part = layer_part(self.layer, self.wide)


def _info(h, name, shape):
    return h.make_tensor_value_info(name, 1, list(shape))  # 1 = FLOAT


def build(graph, plan, qdq=None, expose=False, split=None):
    """``(step model, sequence model, builder)``. ``split`` (by default: whether ``qdq`` is given) writes a
    dense memory's ``Abar`` as ``hi + lo`` (:class:`._floatstep.FloatStep`); the calibration model must
    split as the QDQ model does, so that every activation has the same name in both."""
    onnx = _onnx()
    h = onnx.helper
    spec = plan.spec
    F, Fo = graph.input_features, graph.output_features
    B = BATCH  # a symbolic batch: one row per stream, each with its own state rows
    b = OnnxOps(graph, plan, qdq)
    states = {}
    for n, *_ in spec:
        b.wide = _is_state(n)
        states[n] = b.act(n)
    b.wide = False
    split = qdq is not None if split is None else split
    y, new = FloatStep(graph, plan, split=split).step(b, b.act("x"), states)
    b.output = y
    outs = [h.make_node("Identity", [y], ["y"])] + [h.make_node("Identity", [new[n]], [f"{n}_out"]) for n, *_ in spec]
    o_info = [_info(h, "y", (B, Fo))] + [_info(h, f"{n}_out", (B, s)) for n, _, _, s in spec]
    if expose:  # every activation as an output, for calibration
        skip = {"x"} | {n for n, *_ in spec}
        o_info += [h.make_tensor_value_info(v, 1, None) for v in dict.fromkeys(b.values) if v not in skip]
    g = h.make_graph(
        b.nodes + outs,
        f"{graph.name}_step",
        [_info(h, "x", (B, F))] + [_info(h, n, (B, s)) for n, _, _, s in spec],
        o_info,
        b.inits,
    )
    step = h.make_model(g, opset_imports=[h.make_opsetid("", OPSET)], producer_name="lmu-edge")

    # Scan body: (states..., x_t) -> (states'..., y_t); the weights live in the body (ONNX Runtime's
    # QDQ weight fusions do not find initializers of an outer scope)
    body = h.make_graph(
        b.nodes + outs,
        "step_body",
        [_info(h, n, (B, s)) for n, _, _, s in spec] + [_info(h, "x", (B, F))],
        [_info(h, f"{n}_out", (B, s)) for n, _, _, s in spec] + [_info(h, "y", (B, Fo))],
        b.inits,
    )
    zeros = [onnx.numpy_helper.from_array(np.zeros((1, s), np.float32), f"{n}_init") for n, _, _, s in spec]
    # each initial state is broadcast to the batch of x_seq: the default (one zero row) starts every
    # stream at zero, a given [batch, size] state resumes each stream, a [1, size] one starts all alike
    rows = [
        h.make_node("Shape", ["x_seq"], ["batch_rows"], start=1, end=2),
        *(h.make_node("Concat", ["batch_rows", f"{n}_size"], [f"{n}_shape"], axis=0) for n, *_ in spec),
        *(h.make_node("Expand", [f"{n}_init", f"{n}_shape"], [f"{n}_start"]) for n, *_ in spec),
    ]
    sizes = [onnx.numpy_helper.from_array(np.array([s], np.int64), f"{n}_size") for n, _, _, s in spec]
    scan = h.make_node(
        "Scan",
        [f"{n}_start" for n, *_ in spec] + ["x_seq"],
        [f"{n}_final" for n, *_ in spec] + ["y_seq"],
        body=body,
        num_scan_inputs=1,
    )
    # the initial states are inputs with a default (their initializer: zeros), so a stream can be resumed
    # chunk by chunk by feeding one chunk's <name>_final as the next chunk's <name>_init
    sg = h.make_graph(
        rows + [scan],
        f"{graph.name}_sequence",
        [_info(h, "x_seq", ("T", B, F))] + [_info(h, f"{n}_init", (B, s)) for n, _, _, s in spec],
        [_info(h, "y_seq", ("T", B, Fo))] + [_info(h, f"{n}_final", (B, s)) for n, _, _, s in spec],
        zeros + sizes,
    )
    seq = h.make_model(sg, opset_imports=[h.make_opsetid("", OPSET)], producer_name="lmu-edge")
    return step, seq, b


def _is_state(name: str) -> bool:
    """An LMU memory state (``L<i>_m``, ``L<i>_buf``) or a running mean and its count (``L<i>_mean``,
    ``L<i>_n``): kept at 16 bits in a QDQ model."""
    return name.endswith(("_m", "_buf", "_mean", "_n"))


#: ONNX Runtime session settings the QDQ model needs: none. ORT's CPU provider fuses QDQ patterns into
#: integer kernels; the ones it picks for this placement compute what the QDQ graph says (QLinearMatMul,
#: QLinearAdd, QLinearSoftmax on 8-bit tensors: integer products, one rounding of the result). What did
#: not: int8 weights behind DequantizeLinear that a 16-bit activation (the LMU's state and input) reads,
#: which ORT fuses into MatMulNBits, whose default accuracy level 4 rounds that activation to 8 bits per
#: block (the GunPoint model of examples/models: 15.2 dB against 28.9 dB unfused; the matrix's sigmoid
#: model 14.2 against 31.8 on an AMD EPYC, ORT 1.32). Those weights are int16 now (:meth:`OnnxOps.matmul`):
#: no fused kernel takes them, and ORT's defaults give the unfused SQNR (docs/tflite_onnx.md).
ORT_SESSION_CONFIG: dict = {}


def _ort_session(model_bytes):
    ort = require("onnxruntime", "onnx", "running ONNX models in ONNX Runtime")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    for k, v in ORT_SESSION_CONFIG.items():
        so.add_session_config_entry(k, v)
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


class Calibration:
    """The range of every activation of the float step model over the calibration data, and from them
    the QDQ model's quantization (:meth:`qdq`), with any of :attr:`candidates` made 16-bit."""

    def __init__(self, graph, plan, x, inputs=None):
        """Run the float step model over ``x``; the input ``x`` of the model takes the range of ``inputs``
        (default ``x``: the whole calibration data, where ``x`` is a part). It is built with the QDQ model's structure
        (``split=True``): tensors are named by their position in the graph, and a split memory adds
        nodes, so a float model without the split would hand every tensor after the first dense memory
        another tensor's range (fixed: it cost 10-37 dB on the layer-option matrix)."""
        step, _, builder = build(graph, plan, expose=True, split=True)
        sess = _ort_session(step.SerializeToString())
        self.names = [o.name for o in sess.get_outputs()]
        lo = {n: np.inf for n in self.names}
        hi = {n: -np.inf for n in self.names}
        self.spec = spec = plan.spec
        counts = _stepplan.pooling_counts(graph)
        T = x.shape[1]
        # a running mean's count: one more pass that counts up to COUNT_RANGE sets its 16-bit scale to 1
        starts = [{}] * len(x) + ([{n: max(_stepplan.COUNT_RANGE - T, 0) for n in counts}] if counts else [])
        for seq, start in zip(list(x) + list(x[:1]) * bool(counts), starts, strict=True):
            st = {n: np.full((1, s), start.get(n, 0), np.float32) for n, _, _, s in spec}
            for x_t in seq:
                res = dict(zip(self.names, sess.run(None, {"x": x_t[None].astype(np.float32), **st}), strict=True))
                st = {n: res[f"{n}_out"] for n, *_ in spec}
                for n, v in res.items():
                    lo[n], hi[n] = min(lo[n], float(v.min())), max(hi[n], float(v.max()))
        # the model input: int8 like every target's (it fed the first MatMul as float until 2026-11-26)
        inputs = np.asarray(x if inputs is None else inputs)
        self.names.append("x")
        lo["x"], hi["x"] = float(inputs.min()), float(inputs.max())
        self.lo, self.hi, self.wide_values = lo, hi, builder.wide_values
        # what widening may make 16-bit: the 8-bit activations inside the model, the 8-bit states (a
        # SimpleRNN's h, quantized as its update), the weight matrices, and last the model input x: where
        # 8 bits of input alone hold a model under the target (the matrix's RNN-path LMU: 24.9 dB on its
        # test data), its Q/DQ pair becomes int16. The interface stays float32 either way; the output
        # stays int8 (its 8 bits cost the matrix at most a few tenths of a dB).
        made = set(builder.values)
        self.weights = list(builder.weights)
        self.candidates = (
            [n for n in self.names if n in made and n not in self.wide_values and n not in ("x", builder.output)]
            + [n for n, *_ in spec if not _is_state(n)]
            + list(builder.weights)
            + ["x", TIGHT]
        )

    def _wide(self, n, room=RANGE16_HEADROOM):
        r = max(-self.lo[n], self.hi[n], 0.0) * room
        return (np.float32(r / 32767.0 if r > 0 else 1.0), 0, 16)

    def qdq(self, widened=frozenset()) -> dict:
        """Scale, zero point and bits of every activation: int8 asymmetric, except the LMU input and state
        and the ``widened`` activations (int16, symmetric, zero point 0, with headroom: less on the LMU's
        with :data:`TIGHT`); a ``widened`` weight matrix maps to :data:`WIDE`."""
        qdq, room = {}, TIGHT16_HEADROOM if TIGHT in widened else RANGE16_HEADROOM
        for n in self.names:
            if n in self.wide_values or n in widened:
                qdq[n] = self._wide(n, room if n in self.wide_values else RANGE16_HEADROOM)
                continue
            a, b = min(self.lo[n], 0.0), max(self.hi[n], 0.0)
            s = (b - a) / 255.0 if b > a else 1.0
            qdq[n] = (np.float32(s), int(np.clip(round(-128 - a / s), -128, 127)), 8)
        for n, *_ in self.spec:  # a state is quantized as its update was (the same values, one step later)
            wide = _is_state(n) or n in widened
            qdq[n] = self._wide(f"{n}_out", room if _is_state(n) else RANGE16_HEADROOM) if wide else qdq[f"{n}_out"]
        qdq.update({n: WIDE for n in widened if n not in qdq and n != TIGHT})
        return qdq


def _calibrate(graph, plan, x) -> dict:
    """The QDQ model's quantization from the float step model's ranges on ``x`` (:class:`Calibration`)."""
    return Calibration(graph, plan, x).qdq()


def _sqnr(graph, plan, qdq, x, ref) -> float:
    """SQNR (dB) of the QDQ model ``qdq`` on ``x`` against ``ref``, in ONNX Runtime as one batch (50x faster)."""
    sess, xs = _ort_session(build(graph, plan, qdq)[1].SerializeToString()), np.swapaxes(x, 0, 1).astype(np.float32)
    y = np.swapaxes(sess.run(None, {"x_seq": xs})[0], 0, 1)  # ORT's batched kernels may round an element apart
    return sqnr_db(y if graph.output_is_sequence else y[:, -1], ref)


def widen(graph, plan, cal: Calibration, x, target_db: float) -> tuple:
    """Mixed precision: the fewest activations and weight matrices made 16-bit that lift the QDQ
    model's SQNR on ``x`` to ``target_db`` (:func:`lmu_edge.widening.narrow`). Returns ``(widened, sqnr
    of the result, sqnr with none widened)``."""
    ref = reference.simulate(graph, x)
    return widening.narrow(cal.candidates, lambda wide: _sqnr(graph, plan, cal.qdq(wide), x, ref), target_db)


def _widen_db(v):
    return widening.widen_db_option(v, "onnx", WIDEN_DB)


def emit(graph, out_dir, options) -> dict:
    """Write ``step.onnx`` and ``sequence.onnx`` (float or int8 QDQ) for the folded graph."""
    onnx = _onnx()
    out_dir = Path(out_dir)
    quantize = options.get("quantize", "float")
    plan = _stepplan.StatePlan(graph)
    qdq = None
    report: dict[str, Any] = {"opset": OPSET}
    widening: dict[str, Any] = {}
    if quantize == "int8":
        cal = options["calibration"]
        steps = int(options.get("calibration_steps", 2000))
        cal = cal[: max(1, steps // cal.shape[1])]
        rec = _stepplan.record(graph, cal)
        plan = _stepplan.StatePlan(graph, rec, balance=True)
        calib = Calibration(graph, plan, cal, inputs=options["calibration"])
        qdq = calib.qdq()
        widen_db = _widen_db(options.get("widen_db", WIDEN_DB))
        if widen_db is not None:
            x = options["calibration"]  # the search runs the model 2N+ times: on at most widen_steps steps
            x = x[: max(1, int(options.get("widen_steps", 20000)) // x.shape[1])]
            widened, _, before = widen(graph, plan, calib, x, widen_db)
            qdq = calib.qdq(widened)
            widening = {
                "widen_db": widen_db,
                "int8_sqnr_db": before,
                "widened": [n for n in calib.candidates if n in widened and n != TIGHT],
                **({"memory_ranges": f"calibrated, {TIGHT16_HEADROOM}x headroom"} if TIGHT in widened else {}),
                "widened_weights": [n for n in calib.weights if n in widened],  # the weight matrices among them
            }
    step, seq, _ = build(graph, plan, qdq)
    _write_contract(step, seq, graph, quantize)
    for m in (step, seq):
        onnx.checker.check_model(m, full_check=True)
    (out_dir / STEP).write_bytes(step.SerializeToString())
    (out_dir / SEQ).write_bytes(seq.SerializeToString())
    report["nodes"] = {"step": len(step.graph.node), "scan_body": len(seq.graph.node[0].attribute[0].g.node)}
    if quantize != "float":
        x = options["calibration"]
        y = _run_seq(_ort_session(seq.SerializeToString()), x)
        y = y if graph.output_is_sequence else y[:, -1]
        ref = reference.simulate(graph, x)
        report["quantization"] = {
            "onnxruntime_session_config": dict(ORT_SESSION_CONFIG),  # what a user's sessions need too
            "error_vs_float": relative_error(y, ref),
            "sqnr_db_vs_float": sqnr_db(y, ref),
            "note": (
                "int8 QDQ (int16 LMU input and state) with calibrated per-tensor activations and "
                "per-channel weights (int16 where a 16-bit activation reads them), measured against the "
                "float oracle on the calibration data in ONNX Runtime with its default session options "
                "(QDQ fusion on)"
            ),
            **widening,
        }
    return {"files": [STEP, SEQ], "tolerance": None if quantize != "float" else 1e-4, "report": report}


def _write_contract(step, seq, graph, quantize) -> None:
    """The streaming contract (:mod:`.streaming`) as both models' ``doc_string`` and ``metadata_props``."""
    from . import streaming

    session = (
        "ONNX Runtime: default session options (its QDQ fusions compute this placement as written; "
        "no session config entry is needed)"
        if quantize != "float"
        else ""
    )
    c = streaming.contract(
        graph,
        quantize,
        interface="float32 (quantization, if any, is inside the model as QuantizeLinear / DequantizeLinear)",
        extra={
            "file": STEP,
            "sequence_model": (
                f"{SEQ} takes x_seq [T, batch, F] and optional initial states <name>_init [batch or 1, size] "
                "(default zeros) and returns y_seq [T, batch, outputs] and the final states <name>_final: "
                "feed them as the next chunk's <name>_init to resume a stream"
            ),
            "session": session,
        },
    )
    for m in (step, seq):
        m.doc_string = streaming.describe(c)
        entry = m.metadata_props.add()
        entry.key, entry.value = streaming.KEY, json.dumps(c, sort_keys=True)


def _run_seq(sess_or_ref, x):
    with np.errstate(over="ignore", invalid="ignore"):  # onnx.reference: numpy's exp on a sigmoid's large input
        out = [np.asarray(sess_or_ref.run(None, {"x_seq": s[:, None, :].astype(np.float32)})[0], np.float64) for s in x]
    return np.stack([y[:, 0] for y in out])


@contextlib.contextmanager
def _received(artifact, runtime, model, doing):
    """A received model that fails to load or to run (fuzz seed 6, input 2562: dims edited and resealed) is
    refused in one line; while convert writes one (``sealed`` None) the exception is a bug of ours and stays one."""
    try:
        yield
    except Exception as e:
        if getattr(artifact, "sealed", None) is None:
            raise
        msg = " ".join(str(e).split())[:160]
        raise ArtifactError(
            f"{artifact.path}/{model}: {runtime} cannot {doing} it ({msg}); convert the model again"
        ) from None


def _runner(artifact, runtime, model=SEQ):
    from lmu_edge import limits  # parsed from the bytes checked against the seal, external data refused

    data = artifact.sealed_bytes(model)
    limits.check_onnx(data, f"{artifact.path}/{model}")
    with _received(artifact, runtime, model, "load"):
        if runtime == "onnxruntime":
            return _ort_session(data)
        if runtime == "onnx-reference":
            onnx = _onnx()
            from onnx.reference import ReferenceEvaluator

            return ReferenceEvaluator(onnx.load_from_string(data))
    raise ArtifactError(f"onnx: unknown runtime {runtime!r}")


def run(artifact, x, runtime):
    """Run ``sequence.onnx`` over ``x`` ``(N, T, F)`` in ``runtime``; what the source model's predict returns."""
    sess = _runner(artifact, runtime)
    with _received(artifact, runtime, SEQ, "run"):
        y = _run_seq(sess, x)
    return y if artifact.graph.output_is_sequence else y[:, -1]


class _Stream:
    """Steps ``step.onnx`` with explicit state: every batch row in one call (the model's batch is open)."""

    def __init__(self, artifact, runtime):
        self.sess, self.artifact, self.runtime = _runner(artifact, runtime, STEP), artifact, runtime
        self.spec = _stepplan.state_spec(artifact.graph)
        self.names = ["y"] + [f"{n}_out" for n, *_ in self.spec]
        self.reset()

    def reset(self, batch: int = 1):
        self.batch = batch
        self.st = {n: np.zeros((batch, s), np.float32) for n, _, _, s in self.spec}

    def step(self, x_t):
        x = np.asarray(x_t, dtype=np.float32)
        rows = x.reshape(-1, x.shape[-1])
        with _received(self.artifact, self.runtime, STEP, "run"):
            res = dict(zip(self.names, self.sess.run(self.names, {"x": rows, **self.st}), strict=True))
        self.st = {n: res[f"{n}_out"] for n, *_ in self.spec}
        y = np.asarray(res["y"], np.float64)
        return y[0] if x.ndim == 1 else y


def stream(artifact, runtime):
    """``step.onnx`` in ``runtime`` with explicit state, one sample at a time."""
    return _Stream(artifact, runtime)


def check(artifact, x) -> dict:
    """The error against the source model in ``onnx.reference`` too (ONNX Runtime is checked by convert)."""
    y = artifact.run(x[:1], runtime="onnx-reference")
    return {"error_vs_source_onnx-reference": relative_error(y, artifact.reference(x[:1]))}
