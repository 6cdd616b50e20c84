"""The float oracle: runs an IR graph the way its source model's ``predict`` would.

* Recurrent layers run one step at a time (:class:`Stream` steps every layer
  per sample; :func:`simulate` runs layer by layer over whole sequences with
  the same step functions, which is the same arithmetic).
* Parallel-form LMU memories run as the papers do: a causal convolution of the
  encoded input with the impulse response, by FFT.

``simulate`` returns what ``predict`` returns: ``(N, T, F_out)``, or
``(N, F_out)`` when the model ends after an LMU with ``return_sequences=False``
or a pooling layer.
"""

from __future__ import annotations

import numpy as np

from . import budget, ir, lti, pade, parallel
from .arrays import check_input  # noqa: F401  (reference.check_input stays importable)
from .errors import ShapeError

# --- activations --------------------------------------------------------------------------


def activation(name: str, x: np.ndarray) -> np.ndarray:
    """Apply the named activation (linear, relu, relu6, tanh, sigmoid, softmax, silu) in float64."""
    if name == "linear":
        return x
    if name == "relu":
        return np.maximum(x, 0)
    if name == "relu6":
        return np.clip(x, 0, 6)
    if name == "tanh":
        return np.tanh(x)
    if name == "sigmoid":
        return 1 / (1 + np.exp(-x))
    if name == "silu":
        return x / (1 + np.exp(-x))
    if name == "softmax":
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))
        return e / np.sum(e, axis=-1, keepdims=True)
    raise ShapeError(f"unknown activation {name!r}; known: {', '.join(ir.ACTIVATIONS)}")


def _mm(x, w):
    """``x @ w`` for ``x`` of any rank, as one product of its rows (numpy multiplies a stack of matrices by a
    matrix one matrix at a time: the memory's ``(N, d, q)`` step took 2.5x as long)."""
    if x.ndim <= 2:
        return x @ w
    return (x.reshape(-1, x.shape[-1]) @ w).reshape(*x.shape[:-1], w.shape[-1])


def _c(a, dtype):
    return None if a is None else np.asarray(a, dtype=dtype)


class _Recorder:
    """Optional range recording for calibration: ``rec[key] = [min, max]`` over everything seen."""

    rec = None

    def _rec(self, key, a):
        if self.rec is not None and np.size(a):
            lo, hi = float(np.min(a)), float(np.max(a))
            old = self.rec.get(key)
            self.rec[key] = [lo, hi] if old is None else [min(old[0], lo), max(old[1], hi)]

    def _gram(self, key, a):
        """``rec[key] = (sum x x^T, sum x, count)`` over the rows ``x`` of ``a`` (its last axis the
        features): the inputs' second moment and mean, for rounding weights against them."""
        if self.rec is not None and np.size(a):
            rows = np.asarray(a, np.float64).reshape(-1, np.shape(a)[-1])
            G, s, n = self.rec.get(key, (0.0, 0.0, 0))
            self.rec[key] = (G + rows.T @ rows, s + rows.sum(axis=0), n + rows.shape[0])

    def _gram_later(self, key, a):
        """:meth:`_gram` of ``a``, summed once for a whole sequence by :meth:`flush`: one product per step
        of a 6400-feature state added a 6400 x 6400 matrix per step (32 s of a 50-step calibration)."""
        if self.rec is not None and np.size(a):
            self.__dict__.setdefault("_pending", {}).setdefault(key, []).append(np.asarray(a, np.float64))

    def flush(self):
        """Sum what :meth:`_gram_later` kept into ``rec``."""
        for key, parts in self.__dict__.pop("_pending", {}).items():
            self._gram(key, np.concatenate([p.reshape(-1, p.shape[-1]) for p in parts]))


# --- one layer, one step -------------------------------------------------------------------


class _DenseRun(_Recorder):
    def __init__(self, layer: ir.Dense, dtype):
        self.W, self.b, self.act = _c(layer.kernel, dtype), _c(layer.bias, dtype), layer.activation

    def reset(self, batch):
        pass

    def step(self, x):
        y = _mm(x, self.W)
        if self.b is not None:
            y = y + self.b
        self._rec("pre", y)
        return activation(self.act, y)

    seq = step  # works on (N, T, F) as well


class _ActRun(_DenseRun):
    def __init__(self, layer: ir.Activation, dtype):
        self.act = layer.activation

    def step(self, x):
        return activation(self.act, x)

    seq = step


class _PoolRun(_Recorder):
    def __init__(self, layer, dtype):
        self.dtype = dtype

    def reset(self, batch):
        self.sum, self.n = None, 0

    def step(self, x):
        self.sum = x.copy() if self.sum is None else self.sum + x
        self.n += 1
        return self.sum / self.dtype(self.n)

    def seq(self, X):
        n = np.arange(1, X.shape[1] + 1, dtype=self.dtype)[None, :, None]
        return np.cumsum(X, axis=1) / n


class _HiddenRun(_Recorder):
    def __init__(self, cell, dtype):
        self.cell = cell
        if cell is not None:
            self.W, self.b = _c(cell.kernel, dtype), _c(cell.bias, dtype)
            self.U = _c(getattr(cell, "recurrent_kernel", None), dtype)

    def __call__(self, z, h_prev):
        if self.cell is None:
            return z
        y = _mm(z, self.W)
        if self.U is not None:
            y = y + _mm(h_prev, self.U)
        if self.b is not None:
            y = y + self.b
        self._rec("pre", y)
        return activation(self.cell.activation, y)


class _LMURun(_Recorder):
    def __init__(self, layer: ir.LMU, n_in: int, dtype):
        self.L, self.dtype, self.n_in = layer, dtype, n_in
        self.enc, self.bias = _c(layer.input_encoders, dtype), _c(layer.encoder_bias, dtype)
        self.henc, self.menc = _c(layer.hidden_encoders, dtype), _c(layer.memory_encoders, dtype)
        self.hidden = _HiddenRun(layer.hidden, dtype)
        self.units = layer.out_features(n_in)
        mem = layer.memory
        if isinstance(mem, ir.ImpulseResponse):
            # stepping a parallel memory: the exact recurrence (analytic), or the kernel as FIR
            if mem.kernel is None:
                mem = ir.DenseSS(layer.discretizer, *lti.legendre_discrete(layer.order, layer.theta, layer.discretizer))
            else:
                mem = ir.FIR(mem.kernel)
        self.mem = mem
        self.AT = None  # set when the memory steps as a dense map
        if isinstance(mem, ir.DenseSS):
            self.AT, self.B = _c(mem.Abar, dtype).T.copy(), _c(mem.Bbar, dtype)
        elif isinstance(mem, ir.FIR):
            self.HT = _c(mem.kernel, dtype).T.copy()  # (L, q)
        elif isinstance(mem, ir.RungeKutta):
            self.coeffs = lti.structure_coefficients(layer.order, layer.theta).astype(dtype)
            if mem.substeps > 64 and 7 * mem.rk_order * mem.substeps > 2 * layer.order:
                # Many substeps: the step's own linear map (built by running the structured step on the
                # identity, lti.rk_map) costs 2 q^2 per sample instead of 7 r s q.
                M, N = lti.rk_map(layer.order, layer.theta, mem.rk_order, mem.substeps)
                self.AT, self.B = _c(M, dtype).T.copy(), _c(N, dtype)
        elif isinstance(mem, ir.Pade):
            # The implicit step's own linear map (lmu_edge.pade.pade_map: the structured O(q) step run on
            # the identity, then squared up to s substeps); the structured step itself loops over the
            # order in Python, which would make the oracle slow. tests/test_pade.py checks the two agree.
            M, N = pade.pade_map(layer.order, layer.theta, mem.orders, mem.substeps)
            self.AT, self.B = _c(M, dtype).T.copy(), _c(N, dtype)

    def reset(self, batch):
        L, dt = self.L, self.dtype
        self.m = np.zeros((batch, L.memory_d, L.order), dtype=dt)
        self.h = np.zeros((batch, self.units), dtype=dt)
        if isinstance(self.mem, ir.FIR):
            self.buf = np.zeros((batch, L.memory_d, self.HT.shape[0]), dtype=dt)

    def encode(self, x):
        u = _mm(x, self.enc)
        return u if self.bias is None else u + self.bias

    def memory_step(self, u):
        mem = self.mem
        if self.AT is not None:  # dense ZOH / Euler, Pade, or RK with many substeps
            m = self.m
            self.m = _mm(m, self.AT) + u[..., None] * self.B
        elif isinstance(mem, ir.RungeKutta):
            self.m = lti.rk_step(self.m, u, self.L.theta, mem.rk_order, mem.substeps, coeffs=self.coeffs)
        else:
            self.buf = np.concatenate([u[..., None], self.buf[..., :-1]], axis=-1)
            self.m = _mm(self.buf, self.HT)

    def step(self, x):
        N = x.shape[0]
        u = self.encode(x)
        if self.henc is not None:
            u = u + self.h @ self.henc
        if self.menc is not None:
            u = u + self.m.reshape(N, -1) @ self.menc
        self.memory_step(u)
        self.last = {"u": u, "state": self.m.reshape(N, -1)}  # for reports: the layer's internals this step
        z = self.m.reshape(N, -1)
        if self.L.input_to_hidden:
            z = np.concatenate([z, x], axis=-1)
        if self.rec is not None:
            self._rec("u", u)
            self._rec("m", self.m)
            self._rec("z", z)
            self._gram_later("z_gram", z)
            self.hidden.rec = self.rec
        self.h = self.hidden(z, self.h)
        return self.h

    def seq(self, X):
        if not self.L.is_parallel:
            self.reset(X.shape[0])
            return np.stack([self.step(X[:, t]) for t in range(X.shape[1])], axis=1)
        N, T = X.shape[:2]
        M = parallel_memory(self.L, self.encode(X), self.dtype)  # (N, T, d, q)
        Z = M.reshape(N, T, -1)
        if self.L.input_to_hidden:
            Z = np.concatenate([Z, X], axis=-1)
        if isinstance(self.L.hidden, ir.HiddenSimpleRNN):
            self.reset(N)
            out = []
            for t in range(T):
                self.h = self.hidden(Z[:, t], self.h)
                out.append(self.h)
            return np.stack(out, axis=1)
        return self.hidden(Z, None)

    def seq_last(self, X):
        """``seq(X)[:, -1:]`` without keeping every step: the output of a last-step model (a recurrence
        keeps its state only; a parallel memory is the kernel against the reversed input, one step)."""
        N, T = X.shape[:2]
        if not self.L.is_parallel or isinstance(self.L.hidden, ir.HiddenSimpleRNN):
            if self.L.is_parallel:
                return self.seq(X)[:, -1:]
            self.reset(N)
            for t in range(T):
                h = self.step(X[:, t])
            return h[:, None]
        H = parallel_kernel(self.L, T)  # (q, K)
        U = np.asarray(self.encode(X), np.float64)[:, ::-1][:, : H.shape[1]]  # (N, K, d), newest first
        m = np.einsum("qk,nkd->ndq", H, U).astype(self.dtype)
        z = m.reshape(N, 1, -1)
        if self.L.input_to_hidden:
            z = np.concatenate([z, X[:, -1:]], axis=-1)
        return self.hidden(z, None)


def parallel_kernel(layer: ir.LMU, length: int) -> np.ndarray:
    """The (q, min(length, L)) kernel a parallel-form layer convolves with (float64)."""
    mem = layer.memory
    kernel = getattr(mem, "kernel", None)  # ImpulseResponse and FIR carry a kernel
    if kernel is not None:
        return np.asarray(kernel[:, :length], dtype=np.float64)
    return lti.legendre_impulse_response(layer.order, layer.theta, length, layer.discretizer)


def parallel_memory(layer: ir.LMU, U: np.ndarray, dtype=np.float64) -> np.ndarray:
    """Memory ``(N, T, d, q)`` of a parallel-form layer for encoded inputs ``U (N, T, d)``,
    by FFT convolution with the impulse response (causal, ``H[:, 0]`` on the current input)."""
    N, T, d = U.shape
    H = parallel_kernel(layer, T)  # (q, K), K <= T
    K = H.shape[1]
    n = 1 << int(np.ceil(np.log2(max(T + K - 1, 1))))
    Hf = np.fft.rfft(H, n=n, axis=1).T  # (n/2+1, q)
    out = np.empty((N, T, d, layer.order), dtype=dtype)
    for i in range(N):  # one sequence at a time bounds memory
        Uf = np.fft.rfft(np.asarray(U[i], dtype=np.float64), n=n, axis=0)  # (n/2+1, d)
        out[i] = np.fft.irfft(Uf[:, :, None] * Hf[:, None, :], n=n, axis=0)[:T]
    return out


class _BandConvRun(_Recorder):
    """A :class:`~lmu_edge.ir.BandConv`: the last ``kernel_t`` frames, padded, convolved, pooled."""

    def __init__(self, layer: ir.BandConv, dtype):
        self.L, self.dtype = layer, dtype
        self.W, self.b = _c(layer.kernel, dtype), _c(layer.bias, dtype)

    def reset(self, batch):
        L = self.L
        self.hist = np.zeros((batch, L.kernel_t - 1, L.bands * L.channels_in), dtype=self.dtype)

    def _conv(self, X, T):
        """``X (N, T + kernel_t - 1, bands * channels_in)`` -> the activated, pooled ``(N, T, features)``."""
        L = self.L
        N = X.shape[0]
        X = X.reshape(N, X.shape[1], L.bands, L.channels_in)
        X = np.pad(X, ((0, 0), (0, 0), (L.pad_lo, L.pad_hi), (0, 0)))
        nb = L.conv_bands
        y = np.zeros((N, T, nb, L.channels_out), dtype=self.dtype)
        for j in range(L.kernel_t):
            for k in range(L.kernel_f):
                y += _mm(X[:, j : j + T, k : k + nb], self.W[j, k])
        if self.b is not None:
            y = y + self.b
        self._rec("pre", y)
        y = activation(L.activation, y)
        p = L.pool
        y = y[:, :, : L.out_bands * p].reshape(N, T, L.out_bands, p, L.channels_out).max(axis=3)
        return y.reshape(N, T, -1)

    def step(self, x):
        frames = np.concatenate([self.hist, x[:, None]], axis=1)
        self.hist = frames[:, 1:]
        return self._conv(frames, 1)[:, 0]

    def seq(self, X):
        N, T = X.shape[:2]
        self.reset(N)
        frames = np.concatenate([self.hist, X], axis=1)
        self.hist = frames[:, frames.shape[1] - (self.L.kernel_t - 1) :]
        return self._conv(frames, T)


_RUNNERS = {ir.Dense: _DenseRun, ir.Activation: _ActRun, ir.TimePooling: _PoolRun, ir.BandConv: _BandConvRun}


def _runners(graph: ir.Graph, dtype):
    out = []
    for layer, n_in, _, _ in graph.shapes():
        if isinstance(layer, ir.LMU):
            out.append(_LMURun(layer, n_in, dtype))
        else:
            out.append(_RUNNERS[type(layer)](layer, dtype))
    return out


def record_ranges(graph: ir.Graph, x) -> list:
    """Run a recurrent graph on ``x`` (float64) and return, per layer, the ranges of its input
    (``in``), output (``out``) and internals (LMU: ``u``, ``m``, ``z``, hidden ``pre``; Dense: ``pre``),
    the mean of each input feature over every step (``in_mean``), and the second moments of the inputs
    of each layer (``in_gram``) and of an LMU's hidden cell (``z_gram``; :meth:`_Recorder._gram`)."""
    if graph.form == "parallel":
        raise ShapeError("record_ranges needs a recurrent graph; fold it first")
    x, _ = check_input(graph, x)
    budget.check(budget.simulate_estimate(graph, x.shape[0], x.shape[1], "recording the ranges of"))
    recs = []
    X = x
    for r in _runners(graph, np.float64):
        r.rec = {}
        rec = r.rec
        _Recorder._rec(r, "in", X)
        rec["in_mean"] = np.asarray(X, np.float64).reshape(-1, X.shape[-1]).mean(axis=0)
        r._gram("in_gram", X)
        X = r.seq(X)
        r.flush()
        _Recorder._rec(r, "out", X)
        recs.append(rec)
    return recs


def simulate(graph: ir.Graph, x, dtype=np.float64) -> np.ndarray:
    """Run ``graph`` on ``x`` ``(N, T, F)`` (or ``(T, F)``); returns what ``predict`` returns."""
    if graph.quantized:
        from .intsim import simulate_quantized

        return simulate_quantized(graph, x)
    dtype = np.dtype(dtype).type
    x, batched = check_input(graph, x)
    est = budget.simulate_estimate(graph, x.shape[0], x.shape[1])
    budget.check(est)

    def run(X):  # a block of sequences (lmu_edge.parallel: the blocks depend on the work, not on the threads)
        with np.errstate(over="ignore", invalid="ignore"):
            for r in _runners(graph, dtype):
                # past a last-step LMU of a last-step model only per-step layers follow (ir.Graph.shapes)
                last = not graph.output_is_sequence and isinstance(r, _LMURun) and not r.L.return_sequences
                X = r.seq_last(X) if last else r.seq(X)
        return X

    n, t = x.shape[:2]
    X = parallel.by_rows(run, x.astype(dtype), parallel.blocks_for(n, t, est.ops / 2 / max(1, n * t)))
    if not np.all(np.isfinite(X)):
        raise ShapeError(
            f"graph {graph.name!r}: the simulation overflowed to inf / NaN: the model's weights or "
            f"inputs are far out of range (an unstable memory, or inputs at the limit of float)"
        )
    y = X if graph.output_is_sequence else X[:, -1]
    return y if batched else y[0]


#: the magnitude a seeded probe's values stay within (:func:`stable_steps`; ``conversion.PROBE_LIMIT``)
STABLE_LIMIT = 1e18
#: a probe is cut to its stable steps only where at least this many are: a model whose state passes the limit
#: sooner (more than 1e6x a step, so no float32 run carries it past a few steps) is refused, not verified on a
#: step or two. Issue 52's seed 1065 (an Euler memory of spectral radius 33, trained on 16 steps, its keras
#: float32 run finite there) passes 1e18 at step 9 of the probe: with 16 here every float target refused it
STABLE_MIN_STEPS = 4


def stable_steps(graph: ir.Graph, x, limit: float = STABLE_LIMIT) -> tuple:
    """``(k, part)``: the first ``k`` steps of ``x`` ``(N, T, F)`` keep every layer's output and every LMU's
    memory and hidden state within ``limit`` in magnitude (float64); ``part`` names what passes it at step
    ``k`` (``""`` where every step stays within it). An unstable model (a hidden recurrence whose gain
    exceeds 1) grows without bound on a long random input while a saturating layer after it keeps its
    outputs finite: float64 carries that state far longer than a float32 runtime can (issue 52, seed 5).

    A model whose values stay :data:`STABLE_FAST_MARGIN` inside ``limit`` over the whole of ``x`` (a layer at a
    time, parallel memories by FFT: :func:`_peak`) is answered without the step-by-step run, which only finds
    the step where something passes."""
    if _peak(graph, x) <= limit / STABLE_FAST_MARGIN:  # (NaN compares False: the run below names it)
        return x.shape[1], ""
    s = Stream(graph)
    s.reset(x.shape[0])
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(x.shape[1]):
            v = np.asarray(x[:, t], s.dtype)
            for layer, r in zip(graph.layers, s.runners, strict=True):
                v = r.step(v)
                for what, a in (
                    ("output", v),
                    ("memory", getattr(r, "m", None)),
                    ("hidden state", getattr(r, "h", None)),
                ):
                    if isinstance(a, np.ndarray) and not np.all(np.abs(a) <= limit):
                        return t, f"the {what} of layer {layer.name!r}"
    return x.shape[1], ""


#: :func:`stable_steps` skips its step-by-step run where the whole-sequence run's values stay this far inside the
#: limit: the two runs round differently (FFT against the recurrence), by far less than this factor
STABLE_FAST_MARGIN = 1e3


def _peak(graph: ir.Graph, x) -> float:
    """The largest magnitude of every layer's output and every LMU's memory and hidden state on ``x`` (NaN
    where one is not finite): what :func:`stable_steps` checks, a layer at a time over whole sequences. A
    parallel memory is the FFT convolution :meth:`_LMURun.seq` uses (the probe's 2000-4000 steps of a dense
    q x q recurrence took 1.9 s a float conversion: issue 52's seed 11, 11 s of its 71 s in CI)."""
    X = np.asarray(x, np.float64)
    peaks = [0.0]

    def seen(a) -> bool:  # False once a value is not finite (max() would pass a NaN over)
        peaks.append(float(np.max(np.abs(a), initial=0.0)))
        return bool(np.isfinite(peaks[-1]))

    with np.errstate(over="ignore", invalid="ignore"):
        for r in _runners(graph, np.float64):
            if isinstance(r, _LMURun) and not r.L.is_parallel:  # stepped: its memory seen at every step
                r.reset(X.shape[0])
                out = []
                for t in range(X.shape[1]):
                    out.append(r.step(X[:, t]))
                    if not seen(r.m):
                        return float("nan")
                X = np.stack(out, axis=1)
            else:
                if isinstance(r, _LMURun) and not seen(parallel_memory(r.L, r.encode(X))):
                    return float("nan")
                X = r.seq(X)
            if not seen(X):  # (an LMU's hidden state is its output)
                return float("nan")
    return max(peaks)


def stable_cut(graph: ir.Graph, x, limit: float = STABLE_LIMIT) -> tuple:
    """:func:`stable_steps` where a probe may be cut there: ``(k, part)`` where at least
    :data:`STABLE_MIN_STEPS` steps stay within ``limit`` and a later one passes it, else ``(T, "")``: the
    whole of ``x`` (stable, or diverging at once, as a model its conversion refuses does)."""
    k, part = stable_steps(graph, x, limit)
    return (k, part) if part and k >= STABLE_MIN_STEPS else (x.shape[1], "")


class Stream:
    """Step a recurrent graph one sample at a time: ``reset(batch)``, ``step(x_t)``.

    A parallel-form LMU is stepped by its exact recurrence (analytic kernels)
    or as a FIR of its stored kernel. ``step`` returns the model's output for
    the sequence seen so far (for a model that returns only the last step, the
    output it would give if the sequence ended here).
    """

    def __init__(self, graph: ir.Graph, dtype=np.float64):
        self.graph, self.dtype = graph, np.dtype(dtype).type
        self.runners = _runners(graph, self.dtype)
        self.reset()

    def reset(self, batch: int = 1) -> None:
        """Zero every state for ``batch`` independent streams."""
        self.batch = int(batch)
        for r in self.runners:
            r.reset(self.batch)

    def step(self, x_t) -> np.ndarray:
        """One input step ``(batch, features)`` -> this step's output."""
        x = np.asarray(x_t, dtype=self.dtype)
        single = x.ndim == 1
        x = x.reshape(-1, self.graph.input_features) if single else x
        if x.shape != (self.batch, self.graph.input_features):
            raise ShapeError(
                f"step: expected shape ({self.graph.input_features},) or "
                f"({self.batch}, {self.graph.input_features}), got {np.shape(x_t)}"
            )
        for r in self.runners:
            x = r.step(x)
        return x[0] if single else x
