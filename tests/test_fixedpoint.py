import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmu_edge import fixedpoint as fp
from lmu_edge.fixedpoint import FixedType

ints = st.integers(-(1 << 40), 1 << 40)


def exact_round(fr: Fraction, mode: str) -> int:
    fl = math.floor(fr)
    rem = fr - fl
    if mode == "floor":
        return fl
    if rem > Fraction(1, 2):
        return fl + 1
    if rem < Fraction(1, 2):
        return fl
    return {"half_up": fl + 1, "half_away": fl + 1 if fr > 0 else fl, "half_even": fl + (fl % 2)}[mode]


@settings(max_examples=300, deadline=None)
@given(x=ints, shift=st.integers(0, 20), mode=st.sampled_from(fp.ROUNDINGS))
def test_shift_round_is_exact_rational_rounding(x, shift, mode):
    got = int(fp.shift_round(np.int64(x), shift, mode))
    assert got == exact_round(Fraction(x, 1 << shift), mode)


@settings(max_examples=200, deadline=None)
@given(x=st.floats(-1e3, 1e3), width=st.integers(2, 32), frac=st.integers(-4, 24), mode=st.sampled_from(fp.ROUNDINGS))
def test_quantize_rounds_and_saturates(x, width, frac, mode):
    t = FixedType(width, frac, rounding=mode)
    n = int(t.quantize(x))
    assert t.min_int <= n <= t.max_int
    ideal = exact_round(Fraction(x) * Fraction(2) ** frac, mode)
    assert n == min(max(ideal, t.min_int), t.max_int)


@settings(max_examples=200, deadline=None)
@given(n=ints, width=st.integers(2, 32), signed=st.booleans())
def test_wrap_is_twos_complement(n, width, signed):
    t = FixedType(width, 0, signed=signed, saturation="wrap")
    got = int(t.saturate(n))
    assert (got - n) % (1 << width) == 0
    assert t.min_int <= got <= t.max_int


def test_type_ranges_and_c_types():
    t = FixedType(8, 7)
    assert (t.min_int, t.max_int) == (-128, 127)
    assert t.max == pytest.approx(127 / 128)
    assert t.c_type == "int8_t" and FixedType(12, 3).c_type == "int16_t" and FixedType(9, 0, False).c_type == "uint16_t"
    assert FixedType.from_dict(t.to_dict()) == t
    assert str(t) == "fixed<8,7>"


@pytest.mark.parametrize(
    "bad", [dict(width=0, frac=0), dict(width=8, frac=0, rounding="up"), dict(width=8, frac=0, saturation="clip")]
)
def test_bad_types_are_clear_errors(bad):
    with pytest.raises(ValueError, match="width|rounding|saturation"):
        FixedType(**bad)


def test_quantize_refuses_nan():
    with pytest.raises(ValueError, match="non-finite"):
        FixedType(8, 4).quantize([1.0, float("nan")])


@settings(max_examples=300, deadline=None)
@given(real=st.floats(1e-9, 1e3))
def test_quantize_multiplier_represents_the_real_multiplier(real):
    m, shift = fp.quantize_multiplier(real)
    if m == 0:
        assert real < 2.0**-31
        return
    assert (1 << 30) <= m < (1 << 31)
    # rounded to nearest: half an LSB of m, 2^-31 relative (exact in float: Sterbenz; the full specification
    # is tests/test_specs_fixedpoint.py)
    assert abs(m * 2.0 ** (shift - 31) - real) <= real * 2.0**-31


@settings(max_examples=300, deadline=None)
@given(a=st.integers(fp.INT32_MIN, fp.INT32_MAX), b=st.integers(fp.INT32_MIN, fp.INT32_MAX))
def test_srdhm_is_the_rounded_doubling_high_product(a, b):
    got = int(fp.saturating_rounding_doubling_high_mul(a, b))
    if a == b == fp.INT32_MIN:
        assert got == fp.INT32_MAX
    else:
        assert abs(Fraction(a * b, 1 << 31) - got) <= Fraction(1, 2)


@settings(max_examples=300, deadline=None)
@given(x=st.integers(fp.INT32_MIN, fp.INT32_MAX), e=st.integers(0, 31))
def test_rounding_divide_by_pot_rounds_half_away_from_zero(x, e):
    assert int(fp.rounding_divide_by_pot(x, e)) == exact_round(Fraction(x, 1 << e), "half_away")


@settings(max_examples=300, deadline=None)
@given(x=st.integers(-(1 << 24), 1 << 24), real=st.floats(1e-6, 0.999))
def test_multiply_by_quantized_multiplier_approximates_the_product(x, real):
    m, shift = fp.quantize_multiplier(real)
    got = int(fp.multiply_by_quantized_multiplier(x, m, shift))
    exact = x * m * Fraction(2) ** (shift - 31)
    assert abs(got - exact) <= 1  # two roundings of at most 1/2 each


def test_srdhm_and_mbqm_ties_follow_gemmlowp():
    """Exact ties (a*b an odd multiple of 2^30): gemmlowp's nudge 1 - 2^30 for negative products
    rounds them toward +inf, so -1.5 -> -1 and +1.5 -> 2. Random multipliers never tie; these do."""
    a = np.array([-3, 3, -1, 1, -5, 5], np.int64)
    b = np.full(a.shape, 1 << 30, np.int64)
    np.testing.assert_array_equal(fp.saturating_rounding_doubling_high_mul(a, b), [-1, 2, 0, 1, -2, 3])
    assert int(fp.multiply_by_quantized_multiplier(np.int64(-3), np.int64(1 << 30), np.int64(0))) == -1
