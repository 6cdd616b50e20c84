"""Exact specifications of the fixed-point primitives (lmu_edge/fixedpoint.py, lmu_edge/qir.py), as properties
over their whole input domain, each computed independently in exact rational arithmetic (Fraction).

The multiplier of the int32 requantization is the real multiplier rounded to nearest: within half an LSB of
m, so 2^-31 relative. A truncating multiplier is within one LSB (2^-30 relative): a tolerance of 2^-30
cannot tell the two apart, this one can."""

import math
from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lmu_edge import fixedpoint as fp
from lmu_edge import qir

#: the largest real multiplier the scheme holds: (2^31 - 1) 2^(30 - 31), rounded to nearest from below 2^30 - 1/4
LARGEST = math.nextafter(2.0**30 - 0.25, 0.0)
# every positive multiplier the scheme represents (shift -31..30), and some below 2^-32, where it is 0
multipliers = st.floats(min_value=2.0**-34, max_value=LARGEST, allow_subnormal=False)


@settings(max_examples=400)
@given(real=multipliers)
@example(real=1.0)
@example(real=0.5)
@example(real=(2**30 + 0.5) / 2**31)  # an exact tie between two multipliers: either is within half an LSB
@example(real=(2**31 - 0.25) / 2**31)  # rounds up to 2^31: m becomes 2^30 with the shift one larger
@example(real=0.1)  # truncation and rounding differ here (0.1 * 2^34 = ...9.6)
@example(real=2.0**-32)  # the smallest nonzero multiplier
@example(real=math.nextafter(2.0**-32, 0.0))  # just below it: rounds up to it
@example(real=2.0**-33)  # 0
@example(real=LARGEST)
def test_quantize_multiplier_rounds_to_nearest(real):
    """Spec: ``real = m 2^(shift - 31)`` with m in [2^30, 2^31) the real ``real 2^(31 - shift)`` rounded to
    nearest, so within 2^-31 relative; a multiplier that rounds below 2^-32 is 0 (shift 0)."""
    m, shift = fp.quantize_multiplier(real)
    if m == 0:
        assert shift == 0 and real < 2.0**-32
        return
    assert (1 << 30) <= m < (1 << 31) and -31 <= shift <= 30
    exact = Fraction(real) * Fraction(2) ** (31 - shift)
    assert abs(m - exact) <= Fraction(1, 2), (m, float(exact))
    assert abs(m * Fraction(2) ** (shift - 31) - Fraction(real)) <= Fraction(real) / 2**31


@pytest.mark.parametrize("real", [2.0**30 - 0.25, 2.0**30, 1e12, -1e-3, math.inf, math.nan])
def test_quantize_multiplier_refuses_what_the_scheme_cannot_hold(real):
    with pytest.raises(ValueError, match="multiplier"):
        fp.quantize_multiplier(real)


def _exact_mbqm16(acc: int, m: int, s: int) -> int:
    """TFLite's 16x8 requantization from its definition: the multiplier rounded half up to 16 bits (at most
    0x7FFF), the product rounded half up at 15 - s bits, clamped to int32."""
    m16 = min(math.floor(Fraction(m, 1 << 16) + Fraction(1, 2)), 0x7FFF)
    y = math.floor(Fraction(acc * m16, 1 << (15 - s)) + Fraction(1, 2))
    return min(max(y, fp.INT32_MIN), fp.INT32_MAX)


@settings(max_examples=300)
@given(
    acc=st.integers(-(1 << 47) + 1, (1 << 47) - 1),
    m=st.integers(1 << 30, (1 << 31) - 1),
    s=st.integers(-31, 14),
)
@example(acc=(1 << 47) - 1, m=(1 << 31) - 1, s=14)  # saturates at INT32_MAX
@example(acc=-(1 << 47) + 1, m=(1 << 31) - 1, s=14)  # and at INT32_MIN
@example(acc=-3, m=1 << 30, s=0)  # a tie: half up
def test_mbqm16_is_the_rounded_product_clamped_to_int32(acc, m, s):
    """Spec of the 16x8 requantization (qir.mbqm16) on the whole accumulator domain the quantizer proves
    (|acc| < 2^47), saturating at both ends of int32."""
    assert int(qir.mbqm16(acc, m, s)) == _exact_mbqm16(acc, m, s)


@settings(max_examples=300)
@given(x=st.integers(fp.INT32_MIN, fp.INT32_MAX), real=multipliers.filter(lambda r: r >= 2.0**-32))
@example(x=fp.INT32_MIN, real=LARGEST)
@example(x=fp.INT32_MAX, real=LARGEST)
def test_mbqm_is_within_one_of_the_exact_product_or_saturates(x, real):
    """Spec of the int32 requantization (multiply_by_quantized_multiplier) with a rounded-to-nearest
    multiplier: the exact ``x * real`` to within 1 + |x real| 2^-31 (two roundings, the multiplier's
    relative error), and saturated to int32 where the shift left overflows."""
    m, shift = fp.quantize_multiplier(real)
    got = int(fp.multiply_by_quantized_multiplier(x, m, shift))
    assert fp.INT32_MIN <= got <= fp.INT32_MAX
    if shift > 0 and not fp.INT32_MIN <= x * 2**shift <= fp.INT32_MAX:
        xl = min(max(x * 2**shift, fp.INT32_MIN), fp.INT32_MAX)  # the shifted input saturates first
        exact = Fraction(xl * m, 1 << 31)
        assert abs(got - exact) <= 1
        return
    exact = x * Fraction(real)
    assert abs(got - exact) <= 1 + abs(exact) / 2**31
