"""The integer form of one layer's linear part and its activation, as :mod:`lmu_edge.quantization` builds it.

Activation types (:func:`qparams`: asymmetric int8; :func:`qparams_bits`: symmetric int16 with one bit of
headroom), a weight matrix on its per-channel grid with the requantization of its products
(:func:`part`), the fused activation tables (:func:`lut`: 256 int8 or 513 interpolated int16 entries),
softmax (:func:`softmax`) and the whole fused layer (:func:`linear`). The graph pass and the LMU layer
are :mod:`lmu_edge.quantization`; the memory's fixed-point types :mod:`lmu_edge._quantization_memory`.
"""

from __future__ import annotations

import numpy as np

from . import ir, qir, reference
from .errors import QuantizationError
from .fixedpoint import quantize_multiplier
from .rounding import grid_scale, per_channel

LUT_ACTIVATIONS = ("tanh", "sigmoid", "silu")


def qparams(lo: float, hi: float) -> tuple:
    """Asymmetric int8 ``(scale, zero_point)`` covering ``[lo, hi]`` and zero."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi - lo < 1e-12:
        hi = lo + 1e-6
    scale = (hi - lo) / 255.0
    zp = int(np.clip(round(-128 - lo / scale), -128, 127))
    return scale, zp


def qparams_bits(lo: float, hi: float, bits: int = 8) -> tuple:
    """``(scale, zero_point)`` of an activation of ``bits`` bits covering ``[lo, hi]``: :func:`qparams` for 8,
    symmetric with zero point 0 for 16 (as TFLite's 16x8 mode)."""
    if bits == 8:
        return qparams(lo, hi)
    a = max(abs(float(lo)), abs(float(hi)), 1e-9) * RANGE16_HEADROOM
    return a / 32767.0, 0


def _q8(x, scale, zp, bits=8):
    return np.clip(np.round(np.asarray(x) / scale) + zp, *qir.act_range(bits))


#: int16x8: calibrated activation ranges are widened by this factor (one of the 16 bits): inputs beyond the
#: calibration data by up to 2x are not clipped (measured on the layer-option matrix: +11 dB on two models)
RANGE16_HEADROOM = 2.0
#: TFLite / ONNX mixed precision's last resort for an LMU memory path whose state rounding the dynamics
#: amplify: its 16-bit ranges get this headroom instead (the C target's rule for an unproven state). None at
#: all (1.0) fitted the calibration and clipped held-out states: issue 52 seed 25's ONNX int8 fell from 29.5 to
#: 25.0 dB (states up to 1.04x the calibrated maximum per tensor)
TIGHT16_HEADROOM = 1.25
#: int16x8: z (the int16 view of the LMU state) spans the proven state bound, up to this many times the calibrated
#: range (3 of the 16 bits; 64x cost issue 52's slow Euler memories 12-17 dB, where the proven bound of a long
#: window is 37x what a short sequence reaches; the matrix's models measure the same at 8x as at 64x)
Z16_SPAN = 8.0
#: 16-bit activations: the hidden cell of a feedback loop (a SimpleRNN cell, or hidden_to_memory) with an
#: unbounded activation (linear, ReLU, SiLU; ReLU6 up to 6) is sized to this many times its calibrated range
#: (Z16_SPAN, as the memory's z), not RANGE16_HEADROOM's 2x: a loop whose gain passes 1 can run far past what
#: the calibration drove it to on inputs inside the calibrated range (issue 52, seed 1041: a ReLU SimpleRNN
#: cell of recurrent spectral radius 1.05 reached 1.86 on 64 calibration sequences and 9.85 on 3 of 32
#: held-out step sequences: C int16 4.4 dB); 3 more of the 16 bits, where the floors ask 45 dB
LOOP16_SPAN = Z16_SPAN
#: the unbounded activations LOOP16_SPAN applies to (ReLU6's output stays capped at 6)
LOOP16_ACTS = ("linear", "relu", "relu6", "silu")


#: the narrowest span a feedback loop's 16-bit values are tried at: their calibrated range, no headroom (issue
#: 52, seed 105: two stacked SimpleRNN loops whose 16-bit h at the 2x headroom left C int16 41.8 dB, under 45;
#: what the held-out check then measures decides whether it clips)
LOOP16_TIGHT_SPAN = 1.0


def loop_range(act: str, rng, span: float = LOOP16_SPAN) -> tuple:
    """``rng`` (a calibrated ``(lo, hi)``) scaled for a feedback loop's hidden cell at 16 bits: the ``span``
    (LOOP16_SPAN by default) asks, as RANGE16_HEADROOM will be applied on top by :func:`qparams_bits` (a span
    under it, LOOP16_TIGHT_SPAN, narrows the range by as much)."""
    k = float(span) / RANGE16_HEADROOM
    lo, hi = float(rng[0]), float(rng[1])
    if act == "relu6":  # no wider than what covers 6 with the headroom, never narrower than calibrated
        return lo, min(hi * k, max(hi, 6.0 / RANGE16_HEADROOM))
    return lo * k, hi * k


#: int16x8: the input range of the tanh / sigmoid tables (beyond it the output is within half an LSB of its limit)
_LUT16_CAP = {"tanh": 8.0, "sigmoid": 12.0}


def bias_bits(W, bits, in_scale, bias):
    """``bits``, or fewer when ``bits > 8``: the most weight bits (at least 8) for which the int32 bias at
    the first part's scale ``in_scale * max|W| / qmax`` fits (16-bit weights make that scale 2^8 times
    finer than int8's, and a large bias against small inputs and weights would overflow int32)."""
    if bias is None or bits <= 8:
        return bits
    wmax = np.max(np.abs(np.asarray(W, np.float64)), axis=0)
    b = np.abs(np.asarray(bias, np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        room = np.where(b > 0, (2**31 - 1) * in_scale * np.where(wmax > 0, wmax, 1e-12) / b, np.inf)
    qmax = float(np.min(room, initial=np.inf))
    while bits > 8 and (1 << (bits - 1)) - 1 > qmax:
        bits -= 1
    return bits


def bias_scale(W, bits, in_scale, bias, scale=None):
    """The per-channel weight scales of a layer's first part (the one its bias is added in): ``scale`` (or
    :func:`lmu_edge.rounding.grid_scale`'s), each raised where the int32 bias at ``in_scale`` times it would
    not fit, else ``scale`` itself. A channel whose weights are tiny (or zero: its grid scale is 1e-12) next
    to its bias gave a bias of 2e10 and more (issue 52, seed 58: a ``Dense(16, softmax)`` on one feature;
    every C integer mode refused it). The coarser grid costs that channel's weights at most
    ``|bias| 2^-32 / in_scale`` times an input, far under the bias's own rounding at a 16-bit input."""
    if bias is None:
        return scale
    s = grid_scale(W, bits) if scale is None else np.asarray(scale, np.float64)
    b = np.abs(np.asarray(bias, np.float64))
    top = (1 << 31) - 1
    fits = np.round(b / (float(in_scale) * s)) <= top
    if np.all(fits):
        return scale
    return np.where(fits, s, b / (top * float(in_scale)) * (1.0 + 1e-9))


def _requant(real):
    pairs = [quantize_multiplier(float(r)) for r in np.atleast_1d(real)]
    return (np.array([p[0] for p in pairs], np.int32), np.array([p[1] for p in pairs], np.int32))


def part(W, bits, in_scale, in_zp, out_scale, act_bits=8, w_scale=None):
    """``(QPart, per-channel weight scales)``: ``W`` on its per-channel grid of ``bits`` and the requantization
    of its products from ``in_scale`` to ``out_scale``; refused where a 16x8 accumulator could overflow."""
    Wq, sw = per_channel(W, bits, w_scale)
    M, S = _requant(in_scale * sw / out_scale)
    if act_bits == 16:
        if int(S.max(initial=0)) > 14:
            raise QuantizationError(
                f"a 16x8 layer needs a requantization multiplier below 2^14, got 2^{int(S.max())}: the "
                f"activation ranges are degenerate; check the calibration data or use --quantize int8"
            )
        # |acc| <= n * 2^15 * wmax + |bias| must stay below 2^47, the range mbqm16 is exact for
        limit = 1 << 24 if bits <= 8 else 1 << (47 - 15 - (bits - 1) - 1)
        if Wq.shape[0] >= limit:
            raise QuantizationError(
                f"a layer with 16-bit activations and {bits}-bit weights takes fewer than {limit} inputs "
                f"(its accumulator must stay below 2^47), got {Wq.shape[0]}; use fewer weight bits"
            )
    return qir.QPart(Wq, int(in_zp), M, S), sw


def lut(fn, in_scale, in_zp, out_scale, out_zp, act_bits=8):
    """The table of ``fn`` from one activation type to another: 256 int8 entries, or 513 int16 ones read
    with linear interpolation."""
    if act_bits == 16:
        q = np.arange(qir.LUT16_SIZE) * 128 - 32768  # the last entry (32768) closes the last segment
        return _q8(fn(in_scale * q), out_scale, 0, 16).astype(np.int16)
    q = np.arange(-128, 128)
    y = fn(in_scale * (q - in_zp))
    return _q8(y, out_scale, out_zp).astype(np.int8)


def act_out(act, in_q, out_range, act_bits=8):
    """Output qparams of an activation. ``in_q``: the ``(scale, zero_point)`` of its input.

    int8 tanh / sigmoid: the range of the table itself, ``[f(lowest input), f(highest input)]`` (with
    zero), so no output is ever clipped and none of the 256 codes is spent outside what the input can
    reach; TFLite fixes 1/128 (tanh) and 1/256 (sigmoid), which wastes most codes when the input spans a
    fraction of the activation's range (a tanh input of +-0.5 reaches 46 of tanh's 256 int8 codes:
    +3.5 dB on the layer-option matrix's tanh model, +2.4 on the sigmoid one). 16 bits: fixed full
    scale. Other activations: the calibrated output range."""
    if act in ("tanh", "sigmoid"):
        if act_bits == 16:
            return 1.0 / 32768, 0
        s_in, zp_in = in_q
        lo, hi = (reference.activation(act, np.array([s_in * (v - zp_in)]))[0] for v in qir.act_range(8))
        return qparams(float(lo), float(hi))
    return qparams_bits(out_range[0], out_range[1], act_bits)


#: an output range below this fraction of its pre-activation's is a point (see :func:`live_range`)
DEAD_RANGE = 2.0**-12


def live_range(act, pre_range, out_range) -> tuple:
    """The output range to size an activation on: the calibrated one, unless it is (nearly) a point while
    the pre-activation is not. A ReLU whose input stayed negative on every calibration sequence (issue 52,
    seed 1000: a dead ``Dense(3, relu6)`` head, output 0 throughout) got a scale of 1e-6 / 255, whose
    requantization multiplier no 16x8 kernel takes; then the activation over the pre-activation's
    symmetric span stands in (the output stays exact: zero is on the grid)."""
    a = max(abs(float(pre_range[0])), abs(float(pre_range[1])))
    if act == "softmax" or a == 0.0 or max(abs(float(out_range[0])), abs(float(out_range[1]))) >= DEAD_RANGE * a:
        return out_range
    y = reference.activation(act, np.array([-a, 0.0, a]))
    return float(min(y.min(), out_range[0])), float(max(y.max(), out_range[1]))


def linear(parts, bias, act, pre_range, out_range, name, act_bits=8):
    """QLinear with the activation fused: ``(QLinear, out_scale, out_zp)``.

    ``parts`` holds ``(W, in_scale, in_zp, bits[, w_scale])`` (``w_scale``:
    :func:`lmu_edge.rounding.per_channel`); ``bias`` is float (added in part 0)."""
    ab = act_bits
    out_range = live_range(act, pre_range, out_range)
    if act in LUT_ACTIVATIONS or act == "softmax":
        if ab == 16 and act in _LUT16_CAP:  # the headroom, then the cap (beyond it the output is flat)
            a = min(max(abs(pre_range[0]), abs(pre_range[1]), 1e-9) * RANGE16_HEADROOM, _LUT16_CAP[act])
            acc_scale, acc_zp = a / 32767.0, 0
        else:
            acc_scale, acc_zp = qparams_bits(pre_range[0], pre_range[1], ab)
    else:
        acc_scale, acc_zp = qparams_bits(out_range[0], out_range[1], ab)
    qparts, s0 = [], None
    for k, (W, s_in, zp_in, bits, *w_scale) in enumerate(parts):
        if k == 0:
            bits = bias_bits(W, bits, s_in, bias)
            w_scale = [bias_scale(W, bits, s_in, bias, *w_scale)]
        p, sw = part(W, bits, s_in, zp_in, acc_scale, ab, *w_scale)
        qparts.append(p)
        if k == 0:
            s0 = s_in * sw
    qb = None if bias is None else np.round(np.asarray(bias) / s0)
    if ab == 16 and qb is not None and np.abs(qb).max(initial=0) > (1 << 31) - 1:
        raise QuantizationError(f"layer {name!r}: the bias does not fit int32 at its 16x8 scale; use --quantize int8")
    qb = None if qb is None else np.clip(qb, -(1 << 31), (1 << 31) - 1).astype(np.int32)
    lo, hi = qir.act_range(ab)
    if act == "relu":
        lo = acc_zp
    elif act == "relu6":
        lo, hi = acc_zp, int(min(hi, acc_zp + round(6.0 / acc_scale)))
    table, out_scale, out_zp = None, acc_scale, acc_zp
    if act in LUT_ACTIVATIONS:
        out_scale, out_zp = act_out(act, (acc_scale, acc_zp), out_range, ab)
        table = lut(lambda v: reference.activation(act, v), acc_scale, acc_zp, out_scale, out_zp, ab)
    return qir.QLinear(tuple(qparts), acc_zp, lo, hi, qb, table, in_bits=ab), out_scale, out_zp


def _softmax_lut(scale, act_bits=8):
    if act_bits == 16:
        d = np.arange(qir.LUT16_SIZE) * 128  # read with interpolation at max - x in 0..65535
        return np.round(np.exp(-d * scale) * 65536).astype(np.int32)
    d = np.arange(256)
    return np.round(np.exp(-d * scale) * 65536).astype(np.int32)


def softmax_type(act_bits) -> tuple:
    """``(scale, zero_point)`` of a softmax output of ``act_bits`` (fixed, as TFLite's: [0, 1) in full)."""
    return (1.0 / 32768, 0) if act_bits == 16 else (1.0 / 256, -128)


def softmax(name, scale, act_bits):
    """``(QSoftmax, out_scale, out_zp)`` for an input of ``scale``: its exp table and fixed output type."""
    s, zp = softmax_type(act_bits)
    return qir.QSoftmax(name, _softmax_lut(scale, act_bits), s, zp, bits=act_bits), s, zp


def loops_back(layer) -> bool:
    """Whether ``layer`` is an LMU whose hidden cell sits in a feedback loop (a SimpleRNN cell, or
    hidden_to_memory) with an unbounded activation: its 16-bit h is sized by LOOP16_SPAN."""
    return (
        isinstance(layer, ir.LMU)
        and layer.hidden is not None
        and layer.hidden.activation in LOOP16_ACTS
        and (isinstance(layer.hidden, ir.HiddenSimpleRNN) or layer.hidden_encoders is not None)
    )


def grows(layer, grown: bool) -> bool:
    """Whether the values after ``layer`` may run past their calibrated range as a loop's do: from a looping
    LMU on, through the layers with unbounded activations, until one bounds them (tanh, sigmoid, softmax) or
    another LMU takes them in (its own ranges, as before)."""
    if isinstance(layer, ir.LMU):
        return loops_back(layer)
    act = getattr(layer, "activation", "linear")
    return grown and act in LOOP16_ACTS


def loop_grown(rec: dict, act: str, span: float = LOOP16_SPAN) -> dict:
    """A layer's calibrated ranges, where it follows a feedback loop at 16 bits: its pre-activation and its
    unbounded output widened as the loop's h is (:func:`loop_range`), so that values the loop reaches beyond
    the calibration pass through (issue 52, seed 1041: the silu head after the loop)."""
    out = dict(rec)
    if "pre" in rec:
        out["pre"] = loop_range("linear", rec["pre"], span)
    if act in LOOP16_ACTS:
        out["out"] = loop_range(act, rec["out"], span)
    return out
