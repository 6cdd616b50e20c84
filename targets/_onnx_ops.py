"""The ``onnx`` target's model builder: :class:`OnnxOps` writes the float step (:class:`._floatstep.FloatStep`)
as ONNX nodes, :func:`build` makes the step and sequence models (float, or QDQ with a ``qdq`` map), and
:func:`ort_session` opens one in ONNX Runtime. Split from :mod:`.onnx` so that its quantization
(:mod:`._onnx_quant`) and the target share it without importing each other."""

from __future__ import annotations

import numpy as np

from lmu_edge.registry import require

from ._floatstep import FloatStep, layer_part

OPSET = 21  # int16 in QuantizeLinear / DequantizeLinear (the 16-bit LMU state)
#: the largest int8 weight of a MatMul with an 8-bit input (7 bits, ONNX Runtime's "reduce range"): the
#: fused QLinearMatMul on x86 CPUs without VNNI adds two uint8 x int8 products in 16 bits (ORT_SESSION_CONFIG)
SAFE_INT8 = 63
#: the name of the step and sequence models' symbolic batch dimension (any number of streams per call)
BATCH = "batch"
WIDE = "int16"  # a weight matrix's entry in a qdq map: 16-bit
TIGHT = "memory ranges"  # a widening candidate: the LMU memory path's int16 ranges at TIGHT16_HEADROOM (qdq)


def onnx_module():
    """The ``onnx`` package, or a one-line error naming the extra that installs it."""
    return require("onnx", "onnx", "building ONNX models")


class OnnxOps:
    """The :class:`._floatstep.StepOps` backend that writes ONNX nodes; ``qdq`` maps tensor names to
    ``(scale, zero_point, bits)``: the model is then a QDQ model (weights int8, activations behind
    QuantizeLinear / DequantizeLinear pairs)."""

    def __init__(self, graph, plan, qdq=None, prefix=""):
        self.onnx = onnx_module()
        self.h = self.onnx.helper
        self.graph, self.plan, self.qdq, self.p = graph, plan, qdq, prefix
        self.nodes, self.inits, self.n = [], [], 0
        self.values = []  # every activation tensor name (for calibration)
        self.wide = False  # while True, activations are LMU input / state: 16-bit in a QDQ model
        self.wide_values = set()
        self.weights = []  # the weight matrices' names (widening candidates)
        self.output = None  # the tensor the output y is (int16 with headroom in a QDQ model: the interface is float)
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


def info(h, name, shape):
    """A float tensor's value info for a graph's inputs and outputs (``h``: ``onnx.helper``)."""
    return h.make_tensor_value_info(name, 1, list(shape))  # 1 = FLOAT


def build(graph, plan, qdq=None, expose=False, split=None):
    """``(step model, sequence model, builder)``. ``split`` (by default: whether ``qdq`` is given) writes a
    dense memory's ``Abar`` as ``hi + lo`` (:class:`._floatstep.FloatStep`); the calibration model must
    split as the QDQ model does, so that every activation has the same name in both."""
    onnx = onnx_module()
    h = onnx.helper
    spec = plan.spec
    F, Fo = graph.input_features, graph.output_features
    B = BATCH  # a symbolic batch: one row per stream, each with its own state rows
    b = OnnxOps(graph, plan, qdq)
    states = {}
    for n, *_ in spec:
        b.wide = is_state(n)
        states[n] = b.act(n)
    b.wide = False
    split = qdq is not None if split is None else split
    y, new = FloatStep(graph, plan, split=split).step(b, b.act("x"), states)
    b.output = y
    outs = [h.make_node("Identity", [y], ["y"])] + [h.make_node("Identity", [new[n]], [f"{n}_out"]) for n, *_ in spec]
    o_info = [info(h, "y", (B, Fo))] + [info(h, f"{n}_out", (B, s)) for n, _, _, s in spec]
    if expose:  # every activation as an output, for calibration
        skip = {"x"} | {n for n, *_ in spec}
        o_info += [h.make_tensor_value_info(v, 1, None) for v in dict.fromkeys(b.values) if v not in skip]
    g = h.make_graph(
        b.nodes + outs,
        f"{graph.name}_step",
        [info(h, "x", (B, F))] + [info(h, n, (B, s)) for n, _, _, s in spec],
        o_info,
        b.inits,
    )
    step = h.make_model(g, opset_imports=[h.make_opsetid("", OPSET)], producer_name="lmu-edge")

    # Scan body: (states..., x_t) -> (states'..., y_t); the weights live in the body (ONNX Runtime's
    # QDQ weight fusions do not find initializers of an outer scope)
    body = h.make_graph(
        b.nodes + outs,
        "step_body",
        [info(h, n, (B, s)) for n, _, _, s in spec] + [info(h, "x", (B, F))],
        [info(h, f"{n}_out", (B, s)) for n, _, _, s in spec] + [info(h, "y", (B, Fo))],
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
        [info(h, "x_seq", ("T", B, F))] + [info(h, f"{n}_init", (B, s)) for n, _, _, s in spec],
        [info(h, "y_seq", ("T", B, Fo))] + [info(h, f"{n}_final", (B, s)) for n, _, _, s in spec],
        zeros + sizes,
    )
    seq = h.make_model(sg, opset_imports=[h.make_opsetid("", OPSET)], producer_name="lmu-edge")
    return step, seq, b


def is_state(name: str) -> bool:
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


def ort_session(model_bytes):
    """An ONNX Runtime CPU session of ``model_bytes`` with :data:`ORT_SESSION_CONFIG`."""
    ort = require("onnxruntime", "onnx", "running ONNX models in ONNX Runtime")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    for k, v in ORT_SESSION_CONFIG.items():
        so.add_session_config_entry(k, v)
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
