"""The float step of a recurrent graph, written once over a small ops interface.

The TFLite target (TensorFlow ops, :mod:`._tflite_build`) and the ONNX target
(ONNX nodes, :mod:`.onnx`) run the same step function
``(x_t, states) -> (y_t, states')`` (state names and layout: :mod:`._stepplan`).
:class:`FloatStep` states it once, for every layer and every memory realization
those targets support; a backend only says how to write each elementary op
(:class:`StepOps`: about a dozen methods). Adding a layer or a realization is one
entry in :data:`FloatStep.LAYERS` or :data:`FloatStep.MEMORIES` and the method it
names; adding a runtime that can express these ops is one backend class.

The step, per layer (``d`` memory channels of order ``q``, states in the
coordinates of :class:`._stepplan.StatePlan`, ``m = sigma * mt``)::

    Dense            y = act(x W + b)
    Activation       y = act(x)
    TimePooling      n' = n + 1,  mean' = mean + (x - mean) / n'
    BandConv         w = [hist, x],  hist' = w without its oldest frame,
                     y_r = act(w T_r + b)  (T_r: the convolution as one matrix, pool member r's bands),
                     y = max_r y_r  (element-wise maximum ops)
    LMU              u  = x E_x + b_u [+ h E_h] [+ m E_m]           (encoders)
                     m' = memory update of u (below)
                     h  = act(m' W_m + [x W_x] + [h R] + b)  or  [m', x] without a hidden layer

    memory update    DenseSS     m' = m Abar^T + u Bbar          (``split``: Abar^T = hi + lo, both 8-bit exact)
                     RungeKutta  the structured step of :func:`lmu_edge.lti.rk_step` (CUMSUM, no q*q matrix)
                     FIR         buf' = [u, buf[:, :K-1]],  m' = buf' H^T

Every tensor is a batch of row vectors, one row per stream: a memory's ``(d, q)``
rows of stream ``b`` are rows ``b*d .. b*d+d-1`` of the ``(-1, q)`` reshape, so the
batch dimension may be left open (the ONNX and TFLite step models take any batch,
each row with its own state). A backend sees the exact same sequence of op calls
for a given graph, so the TFLite and the ONNX models compute the same arithmetic
in the same order.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np

from lmu_edge import ir, lti
from lmu_edge.errors import UnsupportedLayerError

from . import _stepplan
from ._stepplan import StatePlan

#: activations of :class:`lmu_edge.ir.Dense`, :class:`lmu_edge.ir.Activation` and LMU hidden layers
ACTIVATIONS = ("linear", "relu", "relu6", "tanh", "sigmoid", "softmax", "silu")
#: the ones a backend writes as one op (:meth:`StepOps.unary`); the others are composed here
UNARY = ("relu", "relu6", "tanh", "sigmoid", "softmax")


class StepOps(Protocol):
    """What a backend writes: each method returns the backend's tensor (a TF tensor, an ONNX value name).

    Shapes are 2-D ``(rows, cols)`` except scalar constants; broadcasting
    follows numpy's rules (both TensorFlow and ONNX use them).
    """

    def const(self, a: Any) -> Any:
        """A float32 constant holding ``a`` (a scalar or an array)."""

    def matmul(self, x: Any, W: np.ndarray, b: np.ndarray | None = None) -> Any:
        """``x @ W`` (``+ b`` when given; ``b`` has one entry per column of ``W``)."""

    def add(self, a: Any, b: Any) -> Any:
        """``a + b``."""

    def sub(self, a: Any, b: Any) -> Any:
        """``a - b``."""

    def mul(self, a: Any, b: Any) -> Any:
        """``a * b`` (element-wise)."""

    def div(self, a: Any, b: Any) -> Any:
        """``a / b`` (element-wise); ``b`` is a step count, ``b >= 1`` (the running mean's only use)."""

    def maximum(self, a: Any, b: Any) -> Any:
        """The element-wise maximum of ``a`` and ``b`` (a band convolution's pooling)."""

    def unary(self, name: str, x: Any) -> Any:
        """The activation ``name`` (one of :data:`UNARY`; softmax over the last axis)."""

    def reshape(self, x: Any, shape: tuple) -> Any:
        """``x`` reshaped to ``shape`` (row-major)."""

    def concat(self, xs: Sequence[Any], axis: int) -> Any:
        """The tensors ``xs`` joined along ``axis``."""

    def cols(self, x: Any, start: int, stop: int) -> Any:
        """``x[:, start:stop]``."""

    def cumsum(self, x: Any) -> Any:
        """The inclusive cumulative sum of ``x`` along its columns (axis 1)."""

    def memory_path(self, on: bool) -> None:
        """Tensors written from now on are (``on``) or are not on a path that integrates over time: an
        LMU's input ``u`` and memory, a running mean and its step count.

        A quantizing backend keeps them wider than the other activations (the
        ONNX QDQ model: 16 bits); a float backend ignores it.
        """


def activation(ops: StepOps, name: str, x: Any) -> Any:
    """The activation ``name`` of :data:`ACTIVATIONS` applied to ``x``."""
    if name == "linear":
        return x
    if name == "silu":
        return ops.mul(x, ops.unary("sigmoid", x))
    if name in UNARY:
        return ops.unary(name, x)
    raise ValueError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}")


def layer_part(layer: Any, memory_path: bool) -> str:
    """The part of ``layer`` a backend names its tensors after (``<layer>.<part>``) once
    :meth:`StepOps.memory_path` turns ``memory_path`` on or off: an LMU's ``memory`` (its input ``u`` and
    memory update), then its ``hidden`` cell (``out`` without one); a running mean's ``mean``."""
    kind = getattr(layer, "TYPE", "")
    if kind == "lmu":
        return "memory" if memory_path else ("hidden" if layer.hidden is not None else "out")
    return "mean" if kind == "time_pooling" and memory_path else ""


def split_weights(W: np.ndarray, per_tensor: bool = False) -> tuple:
    """``(W_hi, W_lo)``: ``W_hi`` on the symmetric per-output-channel 8-bit grid (``per_tensor``: on the
    whole matrix's grid, for a converter that quantizes the weights per tensor), ``W_lo = W - W_hi``."""
    W = np.asarray(W, dtype=np.float64)
    s = np.abs(W).max(axis=None if per_tensor else 0, keepdims=True) / 127.0
    s = np.where(s > 0, s, 1.0)
    hi = np.round(W / s) * s
    return hi, W - hi


#: a weight matrix whose output channels' largest weights differ by more than this factor loses more than
#: a bit on its smaller channels on one per-tensor int8 grid: with ``split_uneven`` it is split too
UNEVEN = 2.0


def uneven(W: np.ndarray) -> bool:
    """Whether one int8 scale for all of ``W``'s output channels costs its smallest channel more than a bit
    (:data:`UNEVEN`); a matrix with a zero channel counts as uneven only through its nonzero ones."""
    peaks = np.abs(np.asarray(W, dtype=np.float64)).max(axis=0)
    peaks = peaks[peaks > 0]
    return bool(len(peaks) and peaks.max() > UNEVEN * peaks.min())


def conv_matrix(layer: ir.BandConv) -> np.ndarray:
    """``T (pool, kernel_t * bands * channels_in, out_bands * channels_out)``: the band convolution as
    matrices on the window of frames (oldest first), one per pool member ``r`` (output band
    ``p * pool + r`` in column block ``p``); the zero padding is the rows left out."""
    kt, kf, ci, co = layer.kernel.shape
    B, P = layer.bands, layer.out_bands
    K = np.asarray(layer.kernel, np.float64)
    T = np.zeros((layer.pool, kt, B, ci, P, co))
    for r in range(layer.pool):
        for p in range(P):
            b_out = p * layer.pool + r
            for k in range(kf):
                band = b_out + k - layer.pad_lo
                if 0 <= band < B:
                    T[r, :, band, :, p, :] = K[:, k]
    return T.reshape(layer.pool, kt * B * ci, P * co)


def _lookup(table: dict, obj: Any, what: str, where: str):
    """The entry of ``table`` for ``type(obj)`` or its nearest base class."""
    for t in type(obj).__mro__:
        if t in table:
            return table[t]
    raise UnsupportedLayerError(
        f"{where}: {type(obj).__name__} has no float step (TFLite, ONNX); supported "
        f"{what}: {', '.join(t.__name__ for t in table)}"
    )


class FloatStep:
    """The step function of a recurrent graph, emitted through a :class:`StepOps` backend.

    ``split``: write a dense memory's ``Abar`` as two matrices (:func:`split_weights`), for
    backends that quantize weights to 8 bits (see :mod:`._tflite_build`). ``split_loop``: the same
    for the weights of an LMU's feedback loop (hidden and memory encoders, a SimpleRNN's recurrent
    kernel, the hidden kernel with ``hidden_to_memory``): their 8-bit rounding circulates through the
    state (the layer-option matrix's RNN-path model in TFLite int16x8: 28.3 -> 41.5 dB). It costs a
    second matmul and an add per weight, whose output an 8-bit activation rounds on its own: ONNX int8
    lost 4 dB on that model with it, so only the TFLite target asks for it. ``per_tensor``: the split's
    high part on the per-tensor grid, for a converter that quantizes these weights per tensor (TFLite's
    int16x8, for TFLite Micro's CMSIS-NN kernels: :mod:`._tflite_build`).
    """

    #: layer type -> the method that writes it: ``(self, ops, i, layer, x, states, new) -> y``
    LAYERS = {
        ir.Dense: "_dense",
        ir.Activation: "_activation",
        ir.TimePooling: "_pooling",
        ir.BandConv: "_band_conv",
        ir.LMU: "_lmu",
    }
    #: memory realization -> the method that writes its update: ``(self, ops, i, L, m2, u2) -> m2'``
    MEMORIES = {ir.DenseSS: "_dense_memory", ir.RungeKutta: "_rk_memory"}

    def __init__(
        self,
        graph: ir.Graph,
        plan: StatePlan,
        split: bool = False,
        split_loop: bool = False,
        per_tensor: bool = False,
        split_uneven: bool = False,
    ):
        self.graph, self.plan, self.split, self.split_loop = graph, plan, bool(split), bool(split_loop)
        self.per_tensor, self.split_uneven = bool(per_tensor), bool(split_uneven)
        for layer in graph.layers:
            _lookup(self.LAYERS, layer, "layers", f"layer {layer.name!r}")

    def step(self, ops: StepOps, x: Any, states: dict) -> tuple:
        """``(y, new_states)``: ``states`` maps state names to ``(batch, size)`` tensors of ``ops``."""
        new: dict = {}
        enter = getattr(ops, "enter_layer", None)  # a backend that names its tensors after the layers
        for i, layer in enumerate(self.graph.layers):
            write = getattr(self, _lookup(self.LAYERS, layer, "layers", f"layer {layer.name!r}"))
            if enter is not None:
                enter(layer)
            x = write(ops, i, layer, x, states, new)
        if enter is not None:
            enter(None)
        return x, new

    # --- layers --------------------------------------------------------------------------------

    def _dense(self, ops, i, layer: ir.Dense, x, states, new):
        return activation(ops, layer.activation, self._ff_matmul(ops, x, layer.kernel, layer.bias))

    def _activation(self, ops, i, layer: ir.Activation, x, states, new):
        return activation(ops, layer.activation, x)

    def _pooling(self, ops, i, layer: ir.TimePooling, x, states, new):
        mean, n = states[f"L{i}_mean"], states[f"L{i}_n"]
        ops.memory_path(True)  # the mean and its count integrate over every step, as a memory does
        n1 = ops.add(n, ops.const(np.float32(1)))
        mean = ops.add(mean, ops.div(ops.sub(x, mean), n1))
        ops.memory_path(False)
        new[f"L{i}_mean"], new[f"L{i}_n"] = mean, n1
        return mean

    def _band_conv(self, ops, i, layer: ir.BandConv, x, states, new):
        n = layer.bands * layer.channels_in
        w = x
        if layer.kernel_t > 1:
            w = ops.concat([states[f"L{i}_hist"], x], axis=1)
            new[f"L{i}_hist"] = ops.cols(w, n, layer.kernel_t * n)
        T = conv_matrix(layer)
        b = None if layer.bias is None else np.tile(np.asarray(layer.bias, np.float64), layer.out_bands)
        y = None
        for r in range(layer.pool):
            y_r = activation(ops, layer.activation, self._ff_matmul(ops, w, T[r], b))
            y = y_r if y is None else ops.maximum(y, y_r)
        return y

    def _ff_matmul(self, ops, x, W, b=None):
        """``x @ W (+ b)`` for a feed-forward weight: split as ``hi @ x + lo @ x`` with ``split_uneven`` where
        one per-tensor scale would cost its smaller channels (:func:`uneven`)."""
        if not (self.split_uneven and uneven(W)):
            return ops.matmul(x, W, b)
        hi, lo = split_weights(W, self.per_tensor)
        return ops.add(ops.matmul(x, hi, b), ops.matmul(x, lo))

    def _fir_matmul(self, ops, buf, H):
        """``buf @ H^T``, in the split form (TFLite's, and ONNX's QDQ build) as ``hi + lo`` (:func:`split_weights`):
        a trained raw kernel's taps at the lags a short sequence reaches can be a few percent of their row's largest
        (issue 52's seed 192: 3.8%, 2 of int8's 7 bits on the taps that mattered: TFLite int8 and int16x8 20.6 dB).
        The memory's own feedback (``memory_encoders`` reading the previous ``m``) reads it the same way."""
        if not self.split:
            return ops.matmul(buf, H.T)
        hi, lo = split_weights(H.T, self.per_tensor)
        return ops.add(ops.matmul(buf, hi), ops.matmul(buf, lo))

    def _loop_matmul(self, ops, x, W, b=None):
        """``x @ W (+ b)`` for a weight inside a feedback loop, as ``hi @ x + lo @ x`` with ``split_loop``."""
        if not self.split_loop:
            return ops.matmul(x, W, b)
        hi, lo = split_weights(W, self.per_tensor)
        return ops.add(ops.matmul(x, hi, b), ops.matmul(x, lo))

    def _lmu(self, ops, i, L: ir.LMU, x, states, new):
        d, q, mem = L.memory_d, L.order, L.memory
        hk = f"L{i}_h"
        h_prev = states.get(hk)
        ops.memory_path(True)
        u = self._ff_matmul(ops, x, L.input_encoders, L.encoder_bias)
        if L.hidden_encoders is not None:
            u = ops.add(u, self._loop_matmul(ops, h_prev, L.hidden_encoders))
        if isinstance(mem, ir.FIR):
            H = np.asarray(mem.kernel, dtype=np.float64)  # (q, K)
            K = H.shape[1]
            if not _stepplan.fir_reads_buffer(L):  # one tap: m = H u, no past input kept
                buf = ops.reshape(u, (-1, 1))
            else:
                buf = ops.reshape(states[f"L{i}_buf"], (-1, K))
                if L.memory_encoders is not None:  # m_prev from the previous buffer
                    m_prev = ops.reshape(self._fir_matmul(ops, buf, H), (-1, d * q))
                    u = ops.add(u, self._loop_matmul(ops, m_prev, L.memory_encoders))
                buf = ops.concat([ops.reshape(u, (-1, 1)), ops.cols(buf, 0, K - 1)], axis=1)
                new[f"L{i}_buf"] = ops.reshape(buf, (-1, d * K))
            m_flat = ops.reshape(self._fir_matmul(ops, buf, H), (-1, d * q))
            rows = np.ones(d * q)
        else:
            update = getattr(self, _lookup(self.MEMORIES, mem, "memories (and FIR)", f"layer {L.name!r}"))
            m_prev = states[f"L{i}_m"]  # model coordinates: m = sigma * mt
            rows = np.tile(self.plan.sigma[i], d)
            if L.memory_encoders is not None:
                u = ops.add(u, self._loop_matmul(ops, m_prev, np.asarray(L.memory_encoders) * rows[:, None]))
            m2 = ops.reshape(m_prev, (-1, q))
            u2 = ops.reshape(u, (-1, 1))
            m2 = update(ops, i, L, m2, u2)
            m_flat = ops.reshape(m2, (-1, d * q))
            new[f"L{i}_m"] = m_flat
        ops.memory_path(False)
        if L.hidden is None:  # fold sigma into the consumer's rows
            z = m_flat if np.all(rows == 1) else ops.mul(m_flat, ops.const(rows[None, :]))
            h = ops.concat([z, x], axis=1) if L.input_to_hidden else z
        else:
            Wk = np.asarray(L.hidden.kernel, dtype=np.float64).copy()
            Wk[: d * q] *= rows[:, None]
            if L.hidden_encoders is not None:  # hidden_to_memory: the hidden kernel is in the loop
                pre = self._loop_matmul(ops, m_flat, Wk[: d * q], L.hidden.bias)
            else:
                pre = self._ff_matmul(ops, m_flat, Wk[: d * q], L.hidden.bias)
            if L.input_to_hidden:
                pre = ops.add(pre, self._ff_matmul(ops, x, Wk[d * q :]))
            if isinstance(L.hidden, ir.HiddenSimpleRNN):
                pre = ops.add(pre, self._loop_matmul(ops, h_prev, L.hidden.recurrent_kernel))
            h = activation(ops, L.hidden.activation, pre)
        if hk in states:
            new[hk] = h
        return h

    # --- memory realizations: (d, q) state rows, (d, 1) input column ---------------------------

    def _dense_memory(self, ops, i, L: ir.LMU, m2, u2):
        """``m' = m Abar^T + u Bbar`` in the state's coordinates (``Abar`` as ``hi + lo`` when split)."""
        mem, sigma = L.memory, self.plan.sigma[i]
        assert isinstance(mem, ir.DenseSS)
        W = np.asarray(mem.Abar, dtype=np.float64).T * sigma[:, None] / sigma[None, :]
        Bt = np.asarray(mem.Bbar, dtype=np.float64) / sigma
        if self.split:
            hi, lo = split_weights(W, self.per_tensor)
            am = ops.add(ops.matmul(m2, hi), ops.matmul(m2, lo))
        else:
            am = ops.matmul(m2, W)
        return ops.add(am, ops.mul(u2, ops.const(Bt)))  # (q,): a fold into the encoder keeps a vector bias

    def _rk_memory(self, ops, i, L: ir.LMU, m, u):
        """The structured RK step of :func:`lmu_edge.lti.rk_step` (two CUMSUMs per stage, no q*q matrix)."""
        mem, q = L.memory, L.order
        assert isinstance(mem, ir.RungeKutta)
        hc = ops.const((lti.structure_coefficients(q, L.theta) / mem.substeps)[None, :])
        alt = ops.const(((-1.0) ** np.arange(q))[None, :])

        def f(w, uu):
            P = ops.cumsum(w)
            S = ops.cumsum(ops.mul(w, alt))
            inner = ops.sub(ops.sub(P, ops.cols(P, q - 1, q)), ops.mul(alt, S))
            if uu is not None:
                inner = ops.add(inner, ops.mul(alt, uu))
            return ops.mul(hc, inner)

        r = mem.rk_order
        for _ in range(mem.substeps):
            w = [f(m, u)]
            for _k in range(1, r):
                w.append(f(w[-1], None))
            acc = w[-1]
            for k in range(r - 1, 0, -1):  # Horner: w_k + acc / (k+1)
                acc = ops.add(w[k - 1], ops.mul(acc, ops.const(np.float32(1.0 / (k + 1)))))
            m = ops.add(m, acc)
        return m
