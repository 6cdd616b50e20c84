"""The step model both the TFLite and the ONNX targets build: ``(x_t, state) -> (y_t, state')``.

A recurrent :class:`lmu_edge.ir.Graph` is one step function of a flat set of
named state vectors (shape ``(batch, size)`` each, a row per stream):

========================  =====================  ===========================================
layer                     state                  update
========================  =====================  ===========================================
LMU, dense / RK memory    ``L<i>_m``  (d*q)      ``m = Abar m + Bbar u`` (or the structured RK step)
LMU, FIR memory           ``L<i>_buf`` (d*L)     ring buffer of the last L encoded inputs
LMU with a recurrent      ``L<i>_h``  (units)    the hidden output of the previous step
hidden or hidden_to_memory
TimePooling               ``L<i>_mean`` (F),     running mean ``mean += (x - mean) / (n + 1)``
                          ``L<i>_n`` (1)         and the step count
BandConv                  ``L<i>_hist``          the last ``kernel_t - 1`` input frames, oldest first
                          ((kt-1)*F)
========================  =====================  ===========================================

Every state starts at zero. :func:`record` runs the float oracle
(:class:`lmu_edge.reference.Stream`) over calibration data and returns the
inputs and the states each step saw: the representative data for
quantization, and the ranges the ONNX QDQ model uses.

Quantized forms of the memory change coordinates: ``m = sigma * mt`` per
Legendre coefficient (``sigma_i`` = the largest ``|m_i|`` seen in
calibration), so that every coefficient of the state uses the whole range of
its integer type (``Abar`` becomes ``diag(1/sigma) Abar diag(sigma)``). The
map is exact in real arithmetic; :class:`StatePlan` holds the scales and the
recorded states are given in the model's coordinates.
"""

from __future__ import annotations

import re

import numpy as np

from lmu_edge import ir, reference


def state_spec(graph: ir.Graph) -> list:
    """``[(name, layer_index, kind, size)]`` of every state vector, in a fixed order."""
    out = []
    for i, (layer, n_in, n_out, _) in enumerate(graph.shapes()):
        if isinstance(layer, ir.LMU):
            mem = layer.memory
            if isinstance(mem, ir.ImpulseResponse):
                raise ValueError(f"layer {layer.name!r} is in parallel form; fold the graph first")
            if isinstance(mem, ir.FIR):
                if fir_reads_buffer(layer):
                    out.append((f"L{i}_buf", i, "buf", layer.memory_d * mem.kernel.shape[1]))
            else:
                out.append((f"L{i}_m", i, "m", layer.state_size))
            if isinstance(layer.hidden, ir.HiddenSimpleRNN) or layer.hidden_encoders is not None:
                out.append((f"L{i}_h", i, "h", n_out))
        elif isinstance(layer, ir.TimePooling):
            out.append((f"L{i}_mean", i, "mean", n_in))
            out.append((f"L{i}_n", i, "n", 1))
        elif isinstance(layer, ir.BandConv) and layer.kernel_t > 1:
            out.append((f"L{i}_hist", i, "hist", (layer.kernel_t - 1) * n_in))
    return out


def fir_reads_buffer(layer: ir.LMU) -> bool:
    """Whether an FIR memory's step reads its buffer of past inputs: not with a single tap and no
    ``memory_to_memory`` (``m = H u``; issue 52, seed 29: an Euler memory of order 1 at theta 1 has
    ``Abar = 0``). Such a buffer would be a state input nothing reads, which TFLite's converter leaves in
    float and ONNX calibrates as an empty slice, so it is no state at all."""
    mem = layer.memory
    assert isinstance(mem, ir.FIR)
    return mem.kernel.shape[1] > 1 or layer.memory_encoders is not None


#: the ONNX QDQ model counts a running mean's steps in 16 bits, exactly up to this many steps: its
#: calibration counts this high (16-bit ranges get 2x headroom, so the count's scale is 1). Past it the
#: count stops and the mean weighs each new step 1 / (2 COUNT_RANGE) (an exponential mean). Calibrated
#: from the calibration data alone, the count saturated at twice the calibration's length: the mean of a
#: 1,000-step stream of a matrix model calibrated on 40 steps lost 19 dB (docs/tflite_onnx.md).
COUNT_RANGE = 16383


def pooling_counts(graph: ir.Graph) -> list:
    """The names of the running means' step counts (``L<i>_n``) of ``graph``."""
    return [name for name, _, kind, _ in state_spec(graph) if kind == "n"]


def with_long_counts(graph: ir.Graph, rep: dict, count: int, rows: int = 16) -> dict:
    """``rep`` (inputs and states by name, a row per step) plus copies of its last ``rows`` rows whose
    running-mean counts are ``count - 1``: the step after them counts to ``count``, so a calibrator
    gives each count a range of at least ``count``. ``rep`` itself when the graph has no running mean."""
    counts = pooling_counts(graph)
    if not counts:
        return rep
    k = min(rows, rep["x"].shape[0])
    out = {}
    for name, v in rep.items():
        tail = np.full_like(v[-k:], count - 1) if name in counts else v[-k:]
        out[name] = np.concatenate([v, tail], axis=0)
    return out


def _read_state(runner, kind, batch):
    if kind == "m":
        return runner.m.reshape(batch, -1)
    if kind == "buf":
        return runner.buf.reshape(batch, -1)
    if kind == "h":
        return runner.h.reshape(batch, -1)
    if kind == "mean":
        return runner.sum / runner.n if runner.sum is not None else None
    if kind == "n":
        return np.full((batch, 1), float(runner.n))
    if kind == "hist":
        return runner.hist.reshape(batch, -1)
    raise AssertionError(kind)


def record(graph: ir.Graph, x: np.ndarray, max_samples: int = 0, seed: int = 0) -> dict:
    """Run the float oracle over ``x`` ``(N, T, F)`` step by step.

    Returns ``{"x": (S, F), "<state name>": (S, size), ..., "y": (S, F_out)}``: the
    input, the states *before* the step and the step's output, for every step
    of every sequence (or ``max_samples`` of them drawn at random, seeded, and
    those where an input column takes its extreme).
    """
    spec = state_spec(graph)
    N, T, F = x.shape
    s = reference.Stream(graph)
    s.reset(N)
    rows: dict[str, list] = {"x": [], "y": []}
    rows.update({name: [] for name, *_ in spec})
    for t in range(T):
        for name, i, kind, size in spec:
            v = _read_state(s.runners[i], kind, N)
            rows[name].append(np.zeros((N, size)) if v is None else np.array(v, dtype=np.float64))
        rows["x"].append(x[:, t])
        rows["y"].append(s.step(x[:, t]))
    out = {k: np.concatenate(v, axis=0) for k, v in rows.items()}
    S = out["x"].shape[0]
    if max_samples and S > max_samples:
        # a random subset and the steps where an input column takes its extreme: a converter
        # calibrating on the subset must see the calibration inputs' full range (a random
        # 1,000 of the matrix's 2,560 steps missed the input's minimum, -2.47 against -2.15, and the
        # int8 input then clipped: TFLite int8 of its tanh model lost 10 dB on the calibration data)
        idx = np.random.default_rng(seed).choice(S, max_samples, replace=False)
        idx = np.union1d(idx, [i for k in ("x", "y") for i in np.r_[out[k].argmin(axis=0), out[k].argmax(axis=0)]])
        out = {k: v[idx] for k, v in out.items()}
    return out


class StatePlan:
    """Coordinates of each memory state: ``m = sigma * mt`` (all ones in float models)."""

    def __init__(self, graph: ir.Graph, rec: dict | None = None, balance: bool = False):
        self.graph, self.spec = graph, state_spec(graph)
        self.sigma = {}
        for name, i, kind, _ in self.spec:
            layer = graph.layers[i]
            if kind == "m" and balance and rec is not None and isinstance(layer.memory, ir.DenseSS):
                m = np.abs(rec[name]).reshape(-1, layer.memory_d, layer.order).max(axis=(0, 1))
                sig = np.where(m > 0, m, max(float(m.max()), 1e-6))
                self.sigma[i] = sig / sig.max()  # relative scales: the largest stays at 1
            elif kind == "m":
                self.sigma[i] = np.ones(layer.order)

    def to_model(self, name: str, value: np.ndarray) -> np.ndarray:
        """A recorded state (oracle coordinates) in the model's coordinates."""
        for n, i, kind, _ in self.spec:
            if n == name and kind == "m":
                L = self.graph.layers[i]
                return (value.reshape(-1, L.memory_d, L.order) / self.sigma[i]).reshape(value.shape)
        return value

    def model_states(self, rec: dict) -> dict:
        """Every recorded state of ``rec`` (oracle coordinates) in the model's coordinates, by name."""
        return {name: self.to_model(name, rec[name]) for name, *_ in self.spec}


def loop_tensors(graph) -> re.Pattern | None:
    """The step model's tensors of a feedback loop that may run past its calibrated range, as the C target
    sizes them (:func:`lmu_edge.qlinear.grows`): a looping LMU's hidden state ``L<i>_h`` and its hidden
    cell's tensors, and the layers after it until one bounds their values. None where there is none."""
    from lmu_edge.qlinear import grows

    pats, grown, last = [], False, len(graph.layers) - 1
    for i, layer in enumerate(graph.layers):
        grown = grows(layer, grown)
        if not grown:
            continue
        if isinstance(layer, ir.LMU):
            pats += [rf"(^|_)L{i}_h(_out)?(:\d+)?$", "^" + re.escape(layer.name) + r"\.hidden/"]
        else:
            pats.append("^" + re.escape(layer.name) + "/")
        if i == last:
            pats.append(r"(^|_)y(:\d+)?$")
    return re.compile("|".join(pats)) if pats else None
