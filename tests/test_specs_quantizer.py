"""Exact specifications of the quantizer's decisions, as properties over their whole input domain:

- an activation's zero point and scale (qlinear.qparams / qparams_bits) put both calibrated ends of
  the range on the grid within half an LSB after saturation: a zero point floored instead of rounded moves
  the minimum's integer one step out of range, where it saturates with up to a whole LSB of error;
- the fractional bits of stored coefficients (_quantization_memory.coeff_frac) keep every rounded
  coefficient within +-(2^(bits-1) - 1), for peaks of exactly +-2^k too, where a bound off by one lets the
  peak round to 2^(bits-1), which the stored int16 / int32 wraps to -2^(bits-1) (an FIR's stored kernel)."""

import math

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lmu_edge import ir
from lmu_edge import qlinear as qz
from lmu_edge._quantization_memory import Calibrated, coeff_frac, fir_memory
from lmu_edge.fixedpoint import FixedType


def _roundtrip(x: float, scale: float, zp: int, lo: int, hi: int) -> float:
    """``x`` quantized (rounded to nearest, saturated to [lo, hi]) with ``(scale, zp)`` and back."""
    q = min(max(round(x / scale) + zp, lo), hi)
    return (q - zp) * scale


ends = st.floats(min_value=0.0, max_value=1e6, allow_subnormal=False)


@settings(max_examples=500)
@given(neg=ends, pos=ends)
@example(neg=0.37, pos=1.0)  # the floored zero point: -60 for -59, the minimum 0.87 LSB off
@example(neg=0.0, pos=1.0)  # all positive: the zero point at the bottom
@example(neg=1.0, pos=0.0)  # all negative: at the top
@example(neg=0.0, pos=0.0)  # a constant zero
@example(neg=1.0, pos=1.0)
def test_int8_zero_point_round_trips_both_calibrated_ends_within_half_an_lsb(neg, pos):
    """Spec (qparams): for any calibrated range [lo, hi] (widened to hold 0), scale = (hi - lo) / 255 and a
    zero point in [-128, 127] such that lo, hi and 0 each round-trip through int8 within half an LSB."""
    lo, hi = -neg, pos
    scale, zp = qz.qparams(lo, hi)
    assert isinstance(zp, int) and -128 <= zp <= 127 and scale > 0
    tol = scale * (0.5 + 1e-9)  # float rounding of lo / scale: a hair over an exact tie
    for x in (lo, hi, 0.0):
        assert abs(_roundtrip(x, scale, zp, -128, 127) - x) <= tol, (x, scale, zp)
    if hi - lo >= 1e-12:
        assert math.isclose(scale * 255, hi - lo, rel_tol=1e-12)


@settings(max_examples=300)
@given(neg=ends, pos=ends)
@example(neg=0.37, pos=1.0)
def test_int16_scale_round_trips_both_calibrated_ends_within_half_an_lsb(neg, pos):
    """Spec (qparams_bits, 16 bits): symmetric, zero point 0, both calibrated ends (with the headroom factor
    left over) round-trip through int16 within half an LSB."""
    lo, hi = -neg, pos
    scale, zp = qz.qparams_bits(lo, hi, 16)
    assert zp == 0 and scale > 0
    for x in (lo, hi, qz.RANGE16_HEADROOM * lo, qz.RANGE16_HEADROOM * hi):
        assert abs(_roundtrip(x, scale, 0, -32768, 32767) - x) <= scale * (0.5 + 1e-9), (x, scale)


def _peaked(rng_seed: int, shape, k: int, sign: int) -> np.ndarray:
    """Entries below 2^k in magnitude, one of them exactly sign * 2^k (the peak)."""
    rng = np.random.default_rng(rng_seed)
    C = rng.uniform(-1, 1, shape) * 2.0**k * 0.999
    C.flat[rng.integers(C.size)] = sign * 2.0**k
    return C


@settings(max_examples=300)
@given(
    k=st.integers(-30, 20),
    sign=st.sampled_from([1, -1]),
    bits=st.integers(4, 32),
    seed=st.integers(0, 2**16),
    rows=st.integers(1, 6),
)
@example(k=-1, sign=1, bits=16, seed=0, rows=1)  # a peak of +0.5 at 16 bits: 16384, not 32768
@example(k=-1, sign=-1, bits=16, seed=0, rows=1)
@example(k=0, sign=1, bits=32, seed=0, rows=3)
def test_rounded_coefficients_never_pass_the_signed_range_for_power_of_two_peaks(k, sign, bits, seed, rows):
    """Spec (coeff_frac): with f = coeff_frac(C, bits), every round(C 2^f) lies in +-(2^(bits-1) - 1), and f
    is the most that holds for the unrounded values (one more fractional bit puts the peak past it)."""
    C = _peaked(seed, (rows, 5), k, sign)
    f = coeff_frac(C, bits)
    top = (1 << (bits - 1)) - 1
    Cq = np.round(C * 2.0**f)
    assert np.abs(Cq).max() <= top, (f, np.abs(Cq).max(), top)
    assert np.abs(C).max() * 2.0 ** (f + 1) > top


@settings(max_examples=150)
@given(k=st.integers(-12, 4), sign=st.sampled_from([1, -1]), seed=st.integers(0, 2**16), cb=st.sampled_from([16, 32]))
@example(k=-1, sign=1, seed=0, cb=16)  # the FIR kernel whose peak is +0.5
def test_fir_kernel_is_stored_rounded_to_nearest_and_never_wraps(k, sign, seed, cb):
    """Spec (fir_memory): the stored kernel (int16 or int32) is round(K 2^kernel_frac) exactly, within its
    coefficient width's signed range, and half an LSB from K, for kernels whose peak is +-2^k."""
    K = _peaked(seed, (4, 12), k, sign)
    notes: list = []
    node, *_ = fir_memory(ir.FIR(K), 4, 16, cb, FixedType(16, 12), notes, Calibrated(1.0))
    stored = np.asarray(node.kernel, np.int64)
    want = np.round(K * 2.0**node.kernel_frac)
    np.testing.assert_array_equal(stored, want)
    assert np.abs(stored).max() <= (1 << (node.coeff_bits - 1)) - 1
    assert np.abs(stored * 2.0**-node.kernel_frac - K).max() <= 2.0 ** -(node.kernel_frac + 1)
