"""The bit-exact oracle: runs a quantized graph in integers exactly as the C runtime does.

Tensors between layers are int8 values (int16 in the ``int16x8`` mode; held in
int64 arrays here); the LMU state is the layer's ``state_type`` (8..32 bits).
Every multiply-accumulate that the C code does in int32 is checked here to stay
in int32; the 16x8 layers accumulate in int64 (proven below 2^47: ``n`` inputs
of at most 2^15 times weights of at most 2^7) and requantize with
:func:`lmu_edge.qir.mbqm16`. One step of a
:class:`~lmu_edge.qir.QLMU`::

    mz_prev = clamp8(z_zp + MBQM(m_prev, m_to_z))                  (only with memory_to_memory)
    (clamp16 and zero points 0 in the int16x8 mode)
    u  = QLinear(encoder; x [, h_prev] [, mz_prev])               u in u_type, zero point 0
    m  = memory update (dense delta/direct, RK, FIR; see lmu_edge.qir)
    mz = clamp8(z_zp + MBQM(m, m_to_z))
    z  = concat(mz, clamp8(z_zp + MBQM(x - x_zp, x_to_z))) if input_to_hidden else mz
    h  = QLinear(hidden; z [, h_prev]) if hidden else z
    h  = softmax(h) (as QSoftmax)                                (a softmax hidden cell: hidden_softmax)
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any, Optional

import numpy as np

from . import ir, pade, parallel, qir
from .arrays import check_input
from .errors import ShapeError
from .fixedpoint import div_round, shift_round
from .fixedpoint import multiply_by_quantized_multiplier as mbqm

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


def _check_i32(acc, where):
    if acc.size and (acc.min() < I32_MIN or acc.max() > I32_MAX):
        raise OverflowError(f"{where}: int32 accumulator overflow (this is a bug in the quantizer; please report it)")


#: ``id(w)`` -> (a weak reference to ``w``, ``w`` as float64, ``w``'s largest column sum of magnitudes), for
#: the read-only weight arrays of the quantized layers: constant, so computed once, not at every step
_WEIGHT_TERMS: dict = {}


def _weight_terms(w) -> tuple:
    """``(w as float64, largest column sum of |w|)``; kept per array where ``w`` cannot change (read-only, and
    so is what it views)."""
    fixed = (
        isinstance(w, np.ndarray)
        and not w.flags.writeable
        and (w.base is None or (isinstance(w.base, np.ndarray) and not w.base.flags.writeable))
    )
    if fixed:
        hit = _WEIGHT_TERMS.get(id(w))
        if hit is not None and hit[0]() is w:
            return hit[1], hit[2]
    wi = np.asarray(w, np.int64)
    terms = (wi.astype(np.float64), float(np.abs(wi).sum(axis=-2).max()) if wi.size else 0.0)
    if fixed:
        key = id(w)
        _WEIGHT_TERMS[key] = (weakref.ref(w, _forget(key)), *terms)
    return terms


def _forget(key: int):
    """The weak reference's callback: the array is gone, so is its entry (its id may come again)."""

    def drop(_ref) -> None:
        _WEIGHT_TERMS.pop(key, None)

    return drop


def imatmul(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``x @ w`` of integer arrays, exactly, as int64. Through float64 (BLAS) where no partial sum can reach
    2^53 (``max|x|`` times ``w``'s largest column sum of magnitudes): every product and sum is then an exact
    integer in float64. Else in int64, which numpy multiplies without BLAS, four to five times slower."""
    x = np.asarray(x, np.int64)
    if x.ndim > 2:  # one product of the stacked rows: numpy multiplies a stack matrix by matrix (2.5x slower)
        return imatmul(x.reshape(int(np.prod(x.shape[:-1])), x.shape[-1]), w).reshape(*x.shape[:-1], np.shape(w)[-1])
    wf, colsum = _weight_terms(w)
    if x.size and wf.size and float(np.abs(x).max()) * colsum < 2.0**53:
        return (x.astype(np.float64) @ wf).astype(np.int64)
    return x @ np.asarray(w, np.int64)


def linear(q: qir.QLinear, inputs: list) -> np.ndarray:
    """Integer ``QLinear`` on ``inputs`` (one int array ``(N, n_in_p)`` per part)."""
    total: Any = 0
    wide = q.in_bits == 16
    for k, (p, x) in enumerate(zip(q.parts, inputs, strict=True)):
        acc = imatmul(np.asarray(x, np.int64) - p.in_zp, p.kernel)
        if k == 0 and q.bias is not None:
            acc = acc + q.bias.astype(np.int64)
        if wide:
            if acc.size and np.abs(acc).max() >= 1 << 47:
                raise OverflowError("QLinear: 16x8 accumulator beyond 2^47 (a bug in the quantizer; please report it)")
            total = total + qir.mbqm16(acc, p.multiplier.astype(np.int64), p.shift.astype(np.int64))
        else:
            _check_i32(acc, "QLinear")
            total = total + mbqm(acc, p.multiplier.astype(np.int64), p.shift.astype(np.int64))
    y = np.clip(q.out_zp + total, q.clamp_min, q.clamp_max)
    if q.lut is not None:
        y = qir.lut16(q.lut, y) if wide else q.lut.astype(np.int64)[y + 128]
    return y


def requant8(v, multiplier, shift, zp, bits: int = 8) -> np.ndarray:
    """Requantize int32 values ``v`` to int8 (int16 with ``bits=16``): ``clip(zp + mbqm(v, multiplier,
    shift))`` to the activation range."""
    return np.clip(zp + mbqm(v, multiplier, shift), *qir.act_range(bits))


class _Run:
    def reset(self, batch):
        pass

    def step(self, x):
        """One step ``(N, F)`` -> ``(N, F_out)`` (every runner defines it)."""
        raise NotImplementedError

    def seq(self, x):
        """``(N, T, F)`` -> ``(N, T, F_out)``: the steps of a stateless layer, all at once."""
        N, T = x.shape[:2]
        y = self.step(x.reshape(N * T, -1))
        return y.reshape(N, T, -1)


class _InputRun(_Run):
    def __init__(self, layer):
        self.L = layer

    def step(self, x):
        return x


class _DenseRun(_Run):
    def __init__(self, layer):
        self.L = layer

    def step(self, x):
        return linear(self.L.linear, [x])


class _BandConvRun(_Run):
    def __init__(self, layer: qir.QBandConv):
        self.L = layer
        self.zp = int(layer.linear.parts[0].in_zp)

    def reset(self, batch):
        L = self.L
        self.hist = np.full((batch, L.kernel_t - 1, L.bands * L.channels_in), self.zp, np.int64)

    def _conv(self, frames):
        """``(M, kernel_t, bands * channels)`` windows of frames -> ``(M, out_bands * filters)``."""
        L = self.L
        M, c = frames.shape[0], L.channels_in
        grid = frames.reshape(M, L.kernel_t, L.bands, c)
        grid = np.pad(grid, ((0, 0), (0, 0), (L.pad_lo, L.pad_hi), (0, 0)), constant_values=self.zp)
        nb = L.out_bands * L.pool  # the bands pooling would drop are not computed (as in C)
        patches = np.stack([grid[:, :, b : b + L.kernel_f].reshape(M, -1) for b in range(nb)], axis=1)
        y = linear(L.linear, [patches.reshape(M * nb, -1)]).reshape(M, L.out_bands, L.pool, -1).max(axis=2)
        return y.reshape(M, -1)

    def step(self, x):
        frames = np.concatenate([self.hist, np.asarray(x, np.int64)[:, None]], axis=1)
        self.hist = frames[:, 1:]
        return self._conv(frames)

    def seq(self, x):
        L = self.L
        N, T = x.shape[:2]
        frames = np.concatenate([self.hist, np.asarray(x, np.int64)], axis=1)  # (N, kernel_t - 1 + T, F)
        self.hist = frames[:, T:]
        win = np.lib.stride_tricks.sliding_window_view(frames, L.kernel_t, axis=1)  # (N, T, F, kernel_t)
        return self._conv(np.moveaxis(win, -1, 2).reshape(N * T, L.kernel_t, -1)).reshape(N, T, -1)


class _LutRun(_Run):
    def __init__(self, layer):
        self.lut, self.bits = layer.lut.astype(np.int64), layer.bits

    def step(self, x):
        return qir.lut16(self.lut, x) if self.bits == 16 else self.lut[x + 128]


class _ConvertRun(_Run):
    def __init__(self, layer: qir.QConvert):
        self.L = layer

    def step(self, x):
        L = self.L
        if L.bits == 16:
            return (x - L.in_zp) * 128
        return requant8(x, L.multiplier, L.shift, L.out_zp, 8)


class _SoftmaxRun(_Run):
    def __init__(self, layer):
        self.lut, self.bits = layer.exp_lut.astype(np.int64), layer.bits

    def step(self, x):
        d = np.max(x, axis=-1, keepdims=True) - x
        if self.bits == 16:
            e = qir.lut16(self.lut, d - 32768)
            s = np.sum(e, axis=-1, keepdims=True)
            return np.clip(div_round(e * 32768, s), 0, 32767)
        e = self.lut[d]
        s = np.sum(e, axis=-1, keepdims=True)
        return np.clip(div_round(e * 256, s) - 128, -128, 127)


class _PoolRun(_Run):
    def __init__(self, layer):
        self.L = layer

    def reset(self, batch):
        self.sum: Any = 0  # the running sum per sequence and feature (an array after the first step)
        self.n = 0

    def seq(self, x):
        L = self.L
        T = x.shape[1]
        prev = self.sum[:, None] if np.ndim(self.sum) else self.sum
        sums = prev + np.cumsum(x - L.in_zp, axis=1)
        n = self.n + np.arange(1, T + 1, dtype=np.int64)[None, :, None]
        self.sum, self.n = sums[:, -1], self.n + T
        mean8 = div_round(sums * 256, n)
        return np.clip(L.out_zp + mbqm(mean8, L.multiplier, L.shift), *qir.act_range(L.bits))

    def step(self, x):
        L = self.L
        self.sum = self.sum + (x - L.in_zp)
        self.n += 1
        mean8 = div_round(self.sum * 256, self.n)
        return np.clip(L.out_zp + mbqm(mean8, L.multiplier, L.shift), *qir.act_range(L.bits))


_ALT: dict = {}


def _alt(q):
    if q not in _ALT:
        _ALT[q] = np.where(np.arange(q) % 2 == 0, 1, -1).astype(np.int64)
    return _ALT[q]


class _LMURun(_Run):
    def __init__(self, layer: qir.QLMU, n_in: int, x_zp: int):
        self.L, self.n_in, self.x_zp = layer, n_in, x_zp
        self.st, self.ut = layer.state_type, layer.u_type
        mem: Any = layer.memory  # one of the memory node types (narrowed below)
        if isinstance(mem, qir.QDenseMemory):
            self.CT = mem.coeffs.astype(np.int64).T.copy()
            self.CT.setflags(write=False)  # constant: imatmul keeps its float64 form and bound term
            self.B = mem.B.astype(np.int64)
        elif isinstance(mem, qir.QFIRMemory):
            self.KT = mem.kernel.astype(np.int64).T.copy()  # (L, q)
            self.KT.setflags(write=False)
            self.fir_shift = mem.kernel_frac + self.ut.frac - self.st.frac
        elif isinstance(mem, pade.QPadeMemory):
            pass
        else:
            self.hc = mem.hc.astype(np.int64)
        self.softmax = _SoftmaxRun(layer.hidden_softmax) if layer.hidden_softmax is not None else None
        self.max_abs_state = 0
        self.mz_table: Optional[np.ndarray] = None  # _mz's table (a state of <= 16 bits)

    def reset(self, batch):
        L = self.L
        self.m = np.zeros((batch, L.memory_d, L.order), np.int64)
        self.h = np.full(
            (batch, L.hidden.units if L.hidden is not None else 0),
            qir.h_reset_zp(L),
            np.int64,
        )
        if isinstance(L.memory, qir.QFIRMemory):
            self.buf = np.zeros((batch, L.memory_d, L.memory.kernel.shape[1]), np.int64)

    def _mz(self, m):
        L = self.L
        flat = m.reshape(m.shape[0], -1)
        if L.state_type.width > 16:
            return requant8(flat, L.m_to_z[0], L.m_to_z[1], L.z_zp, L.act_bits)
        if self.mz_table is None:  # a state of <= 16 bits: the requantization of each of its 2^16 values, once
            self.mz_table = requant8(np.arange(-(1 << 15), 1 << 15), L.m_to_z[0], L.m_to_z[1], L.z_zp, L.act_bits)
        return self.mz_table[flat + (1 << 15)]

    def _memory(self, u):
        L, st, m = self.L, self.st, self.m
        mem: Any = L.memory
        if isinstance(mem, qir.QDenseMemory):
            acc = u[..., None] * self.B + imatmul(m, self.CT)
            step = shift_round(acc, mem.coeff_frac, st.rounding)
            return st.saturate(m + step if mem.form == "delta" else step)
        if isinstance(mem, qir.QFIRMemory):
            self.buf = np.concatenate([u[..., None], self.buf[..., :-1]], axis=-1)
            return st.saturate(shift_round(imatmul(self.buf, self.KT), self.fir_shift, st.rounding))
        if isinstance(mem, pade.QPadeMemory):
            return pade_memory_int(m, u, mem, st)
        alt, hc, f, g = _alt(L.order), self.hc, mem.hc_frac, mem.guard
        um = shift_round(u, self.ut.frac - st.frac - g, st.rounding)[..., None]
        xt = dataclasses.replace(st, width=st.width + g, frac=st.frac + g)  # the working value's type
        x = shift_round(m, -g)
        for _ in range(mem.substeps):
            P = np.cumsum(x, axis=-1)
            S = np.cumsum(x * alt, axis=-1)
            w = [shift_round(hc * (P - P[..., -1:] + alt * (um - S)), f, st.rounding)]
            for _k in range(1, mem.rk_order):
                P = np.cumsum(w[-1], axis=-1)
                S = np.cumsum(w[-1] * alt, axis=-1)
                w.append(shift_round(hc * (P - P[..., -1:] - alt * S), f, st.rounding))
            acc = w[-1]
            for k in range(mem.rk_order - 1, 0, -1):
                acc = w[k - 1] + shift_round(acc * qir.RK_INV16[k + 1], 16, st.rounding)
            x = xt.saturate(x + acc)
        return st.saturate(shift_round(x, g, st.rounding))

    def seq(self, x):
        L = self.L
        if L.hidden_to_memory or L.memory_to_memory or (L.hidden is not None and L.hidden_recurrent):
            return np.stack([self.step(x[:, t]) for t in range(x.shape[1])], axis=1)  # feedback: step by step
        N, T = x.shape[:2]
        u = linear(L.encoder, [x.reshape(N * T, -1)]).reshape(N, T, -1)
        ms = []
        for t in range(T):  # the memory alone is recurrent
            self.m = self._memory(u[:, t])
            ms.append(self.m)
        M = np.stack(ms, axis=1)  # (N, T, d, q)
        self.last = {"u": u[:, -1], "state": self.m.reshape(N, -1)}
        self.max_abs_state = max(self.max_abs_state, int(np.max(np.abs(M))) if M.size else 0)
        z = self._mz(M.reshape(N * T, -1))
        if L.input_to_hidden:
            assert L.x_to_z is not None
            mult, sh, zp = L.x_to_z
            z = np.concatenate([z, requant8(x.reshape(N * T, -1) - zp, mult, sh, L.z_zp, L.act_bits)], axis=-1)
        if L.hidden is None:
            return z.reshape(N, T, -1)
        y = linear(L.hidden, [z])
        if self.softmax is not None:
            y = self.softmax.step(y)
        self.h = y.reshape(N, T, -1)[:, -1]
        return y.reshape(N, T, -1)

    def step(self, x):
        L = self.L
        parts = [x]
        if L.hidden_to_memory:
            parts.append(self.h)
        if L.memory_to_memory:
            parts.append(self._mz(self.m))
        u = linear(L.encoder, parts)
        self.m = self._memory(u)
        self.last = {"u": u, "state": self.m.reshape(self.m.shape[0], -1)}  # for reports
        self.max_abs_state = max(self.max_abs_state, int(np.max(np.abs(self.m))) if self.m.size else 0)
        z = self._mz(self.m)
        if L.input_to_hidden:
            assert L.x_to_z is not None  # set by the quantizer whenever input_to_hidden
            mult, sh, zp = L.x_to_z
            z = np.concatenate([z, requant8(x - zp, mult, sh, L.z_zp, L.act_bits)], axis=-1)
        if L.hidden is None:
            return z
        h = linear(L.hidden, [z, self.h] if L.hidden_recurrent else [z])
        self.h = self.softmax.step(h) if self.softmax is not None else h
        return self.h


def pade_memory_int(m, u, mem, st) -> np.ndarray:
    """One sample of the implicit Pade step in integers (:class:`lmu_edge.pade.QPadeMemory`), exactly as
    ``lmu_pade.h`` computes it: ``m`` state integers ``(..., q)``, ``u`` encoder outputs ``m.shape[:-1]``.

    The forward substitution is sequential in the order; it runs on Python integers per state vector
    (numpy's per-call overhead would dominate at these sizes), everything else vectorised."""
    m = np.asarray(m, np.int64)
    q = m.shape[-1]
    r = st.rounding
    gf, g = mem.gc_frac, mem.guard
    uw = shift_round(np.asarray(u, np.int64), mem.u_shift, r)[..., None]
    gc, w, inv, coef = (a.astype(np.int64) for a in (mem.gc, mem.w, mem.inv, mem.coef))
    a = 2 * np.arange(q, dtype=np.int64) + 1
    alt = _alt(q)
    half = 1 << (gf - 1)
    for _ in range(mem.substeps):
        mw = shift_round(m, -g, r)
        out = shift_round(mem.k * mw, mem.k_frac, r) if mem.k else np.zeros_like(mw)
        for j in range(gc.shape[0]):
            cr, ci = a * gc[j, 0], a * gc[j, 1]
            br = mw + alt * shift_round(cr * uw, gf + 1, r)
            bi = alt * shift_round(ci * uw, gf + 1, r)
            yr, yi = _forward_int(br, bi, cr.tolist(), ci.tolist(), gf, half, r)
            syr, syi = yr.sum(axis=-1, keepdims=True), yi.sum(axis=-1, keepdims=True)
            tr = shift_round(syr * inv[j, 0] - syi * inv[j, 1], mem.inv_frac, r)
            ti = shift_round(syr * inv[j, 1] + syi * inv[j, 0], mem.inv_frac, r)
            xr = yr - shift_round(w[j, :, 0] * tr - w[j, :, 1] * ti, mem.w_frac, r)
            xi = yi - shift_round(w[j, :, 0] * ti + w[j, :, 1] * tr, mem.w_frac, r)
            out = out + shift_round(coef[j, 0] * xr - coef[j, 1] * xi, mem.coef_frac, r)
        m = st.saturate(shift_round(out, g, r))
    return m


def _forward_int(br, bi, cr, ci, gf, half, rounding):
    """``y_i = b_i + rnd(c_i * S_i)`` with the running sums ``S`` over the other parity (complex)."""
    shape = br.shape
    BR, BI = br.reshape(-1, shape[-1]).tolist(), bi.reshape(-1, shape[-1]).tolist()
    YR, YI = [], []
    if rounding == "half_up":

        def rnd(v):
            return (v + half) >> gf
    else:

        def rnd(v):
            return int(shift_round(np.int64(v), gf, rounding))

    for row_r, row_i in zip(BR, BI, strict=True):
        s = [[0, 0], [0, 0]]  # [parity][re, im]
        yr, yi = [], []
        for i, (b_r, b_i) in enumerate(zip(row_r, row_i, strict=True)):
            sr, si = s[1 - (i & 1)]
            c_r, c_i = cr[i], ci[i]
            v_r = b_r + rnd(c_r * sr - c_i * si)
            v_i = b_i + rnd(c_r * si + c_i * sr)
            own = s[i & 1]
            own[0] += v_r
            own[1] += v_i
            yr.append(v_r)
            yi.append(v_i)
        YR.append(yr)
        YI.append(yi)
    return np.array(YR, np.int64).reshape(shape), np.array(YI, np.int64).reshape(shape)


def _runners(graph: ir.Graph):
    qir.check_widths(graph.layers)
    out, zp = [], 0
    r: _Run
    for layer, n_in, _, _ in graph.shapes():
        if isinstance(layer, qir.QInput):
            r = _InputRun(layer)
        elif isinstance(layer, qir.QDense):
            r = _DenseRun(layer)
        elif isinstance(layer, qir.QBandConv):
            r = _BandConvRun(layer)
        elif isinstance(layer, qir.QLut):
            r = _LutRun(layer)
        elif isinstance(layer, qir.QSoftmax):
            r = _SoftmaxRun(layer)
        elif isinstance(layer, qir.QPool):
            r = _PoolRun(layer)
        elif isinstance(layer, qir.QLMU):
            r = _LMURun(layer, n_in, zp)
        elif isinstance(layer, qir.QConvert):
            r = _ConvertRun(layer)
        else:
            raise ShapeError(
                f"layer {layer.name!r} ({type(layer).__name__}) is not a quantized layer; "
                f"quantize the whole graph with lmu_edge.quantize"
            )
        zp = layer.out_zp
        out.append(r)
    return out


def act_bits(graph: ir.Graph) -> int:
    """Width of the quantized graph's integer API (its input and output): 8, or 16 for an ``int16x8``
    graph (and a mixed int8 graph whose input is 16-bit)."""
    first = graph.layers[0]
    return int(getattr(first, "bits", 8))


def layer_bits(layer) -> int:
    """Width of a quantized layer's input and output activations (a :class:`qir.QConvert`: its output's)."""
    if isinstance(layer, (qir.QDense, qir.QBandConv)):
        return int(layer.linear.in_bits)
    if isinstance(layer, qir.QLMU):
        return int(layer.act_bits)
    return int(getattr(layer, "bits", 8))


def mixed(graph: ir.Graph) -> bool:
    """Whether the quantized graph mixes 8- and 16-bit activations (:class:`qir.QConvert` layers)."""
    return any(isinstance(lay, qir.QConvert) for lay in graph.layers)


def act_dtype(graph: ir.Graph):
    """numpy dtype of the quantized graph's integer API (int8, or int16 for ``int16x8``)."""
    return np.int16 if act_bits(graph) == 16 else np.int8


def input_qparams(graph: ir.Graph) -> tuple:
    """``(scale, zero_point)`` of the quantized graph's int8 input."""
    first = graph.layers[0]
    if not isinstance(first, qir.QInput):
        raise ShapeError("a quantized graph starts with a QInput layer")
    return first.out_scale, first.out_zp


def output_qparams(graph: ir.Graph) -> tuple:
    """``(scale, zero_point)`` of the quantized graph's int8 output."""
    last = graph.layers[-1]
    return last.out_scale, last.out_zp


def quantize_input(graph: ir.Graph, x) -> np.ndarray:
    """Float inputs -> int8 / int16 (round half away from zero, saturate), as the C float API does."""
    scale, zp = input_qparams(graph)
    q = np.sign(x) * np.floor(np.abs(np.asarray(x, np.float64) / scale) + 0.5)
    return np.clip(q + zp, *qir.act_range(act_bits(graph))).astype(np.int64)


def dequantize_output(graph: ir.Graph, y) -> np.ndarray:
    """The int8 outputs ``y`` of ``graph`` as floats: ``scale * (y - zero_point)``."""
    scale, zp = output_qparams(graph)
    return (np.asarray(y, np.float64) - zp) * scale


class IntStream:
    """Step a quantized graph in integers: ``reset(batch)``, ``step(x_int8) -> y_int8``."""

    def __init__(self, graph: ir.Graph):
        self.graph = graph
        self.runners = _runners(graph)
        self.reset()

    def reset(self, batch: int = 1):
        """Zero every state for ``batch`` independent streams."""
        for r in self.runners:
            r.reset(batch)

    def step(self, xq):
        """One int8 input step ``(batch, features)`` -> the int8 output of this step."""
        x = np.asarray(xq, np.int64)
        for r in self.runners:
            x = r.step(x)
        return x

    def run(self, xq, chunk: int = 512) -> np.ndarray:
        """Whole sequences ``(batch, T, features)`` -> every step's output ``(batch, T, F_out)``, the same
        integers as :meth:`step` at every step (and the same state after), ``chunk`` steps at a time:
        the layers without feedback take a chunk in one product; an LMU steps only its memory."""
        x = np.asarray(xq, np.int64)
        out = []
        for t0 in range(0, x.shape[1], chunk):
            y = x[:, t0 : t0 + chunk]
            for r in self.runners:
                y = r.seq(y)
            out.append(y)
        return np.concatenate(out, axis=1) if out else np.zeros((x.shape[0], 0, 0), np.int64)

    def state_peaks(self) -> dict:
        """Largest |state integer| each LMU layer reached since construction."""
        return {r.L.name: r.max_abs_state for r in self.runners if isinstance(r, _LMURun)}


def memory_response(layer: qir.QLMU, u) -> np.ndarray:
    """Run only ``layer``'s memory update on encoder outputs ``u`` ``(T, memory_d)`` (integers of
    ``layer.u_type``, e.g. at its clamp) from a zero state; returns the state integers ``(T, d*order)``.

    This is the C kernel's contract alone, without the encoder: the tool to drive a state to its
    proven bound with a worst-case input."""
    r = _LMURun(layer, 0, 0)
    r.reset(1)
    out = []
    for u_t in np.asarray(u, np.int64):
        r.m = r._memory(u_t[None, :])
        out.append(r.m.reshape(-1).copy())
    return np.array(out, np.int64).reshape(len(out), -1)


def run_int(graph: ir.Graph, xq) -> np.ndarray:
    """int8 inputs ``(N, T, F)`` -> int8 outputs of every step ``(N, T, F_out)`` (int64 array); large runs
    split over threads by sequence (:mod:`lmu_edge.parallel`: the same integers)."""
    xq = np.asarray(xq, np.int64)

    def run(x):
        s = IntStream(graph)
        s.reset(x.shape[0])
        return s.run(x)

    return parallel.by_rows(run, xq, parallel.blocks_for(xq.shape[0], xq.shape[1], parallel.numbers_in(graph.layers)))


def simulate_quantized(graph: ir.Graph, x) -> np.ndarray:
    """Float in, float out, through the exact integer arithmetic (what ``lmu_edge.simulate`` does
    for a quantized graph)."""
    x, batched = check_input(graph, x)
    y = dequantize_output(graph, run_int(graph, quantize_input(graph, x)))
    y = y if graph.output_is_sequence else y[:, -1]
    return y if batched else y[0]
