"""Specifications the generated mutants of lmu_edge/fixedpoint.py and lmu_edge/qir.py found unchecked
(docs/testing.md, "Generated mutants"): cosmic-ray changed an operator or a constant and the specification
tests still passed. Each property computes its primitive's definition independently, in exact rational
arithmetic (Fraction)."""

import dataclasses
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lmu_edge import fixedpoint as fp
from lmu_edge import qir
from lmu_edge.errors import ShapeError

# operands whose product, shifted left by up to 8, still fits the int64 the helpers compute in
int24s = st.integers(min_value=-(2**23), max_value=2**23 - 1)


def _round_half_away(x: Fraction) -> int:
    """x rounded to the nearest integer, ties away from zero."""
    r = abs(x).numerator * 2 + abs(x).denominator  # 2|x| + 1 over 2: floor of it is |x| rounded half up
    n = r // (2 * abs(x).denominator)
    return n if x >= 0 else -n


@settings(max_examples=300)
@given(a=st.integers(min_value=-(2**40), max_value=2**40), n=st.integers(min_value=1, max_value=2**20))
@example(a=0, n=1)
@example(a=1, n=2)  # a tie: 1/2 rounds to 1
@example(a=-1, n=2)  # -1/2 rounds to -1
@example(a=3, n=2)
@example(a=5, n=3)  # 5/3 rounds to 2: a divisor of 3n reads 10/9 + ... as 1
@example(a=-7, n=4)
def test_div_round_is_the_quotient_rounded_half_away_from_zero(a, n):
    """Spec (the running-mean pool and the softmax divide by it): ``div_round(a, n)`` is a / n rounded to
    nearest, ties away from zero, for any int64 ``a`` and positive ``n`` (C: ``(2a + sign(a) n) / (2n)``)."""
    assert int(fp.div_round(a, n)) == _round_half_away(Fraction(a, n))


@settings(max_examples=300)
@given(a=int24s, b=int24s, shift=st.integers(min_value=-8, max_value=40), width=st.sampled_from([8, 16, 32]))
@example(a=3, b=5, shift=1, width=16)  # 15/2 = 7.5 rounds up to 8
@example(a=-3, b=5, shift=1, width=16)  # -7.5 rounds (half up) to -7
@example(a=2**23 - 1, b=2**23 - 1, shift=4, width=32)  # saturates at the top
@example(a=-(2**23), b=2**23 - 1, shift=4, width=32)  # and at the bottom
@example(a=7, b=9, shift=-2, width=16)  # a negative shift multiplies: 252
def test_mul_shift_is_the_rounded_product_saturated(a, b, shift, width):
    """Spec (the Q-format multiply every fixed-point layer uses): ``mul_shift(a, b, shift, out)`` is
    a b / 2^shift rounded half up (``out``'s rounding) and clamped to ``out``'s range (a negative shift
    multiplies by 2^-shift, exactly)."""
    out = fp.FixedType(width, 0)
    exact = Fraction(a * b) / Fraction(2) ** shift
    rounded = (exact + Fraction(1, 2)).__floor__()
    assert int(fp.mul_shift(a, b, shift, out)) == min(max(rounded, out.min_int), out.max_int)


@settings(max_examples=200)
@given(n=st.integers(min_value=-(2**15), max_value=2**15 - 1), frac=st.integers(min_value=-20, max_value=40))
@example(n=1, frac=3)  # one LSB of a type with 3 fractional bits is 1/8, not 8
@example(n=-5, frac=-2)
def test_dequantize_is_the_stored_integer_times_its_lsb(n, frac):
    """Spec: a stored integer ``n`` of ``FixedType(width, frac)`` is the real ``n 2^-frac`` (the module
    docstring); dequantize gives it exactly, and quantize of it gives ``n`` back."""
    t = fp.FixedType(16, frac)
    value = float(t.dequantize(n))
    assert Fraction(value) == n * Fraction(2) ** -frac
    assert int(t.quantize(value)) == n


@given(y=st.floats(min_value=-(2.0**40), max_value=2.0**40), name=st.sampled_from(fp.ROUNDINGS))
def test_a_rounding_named_at_run_time_rounds_as_its_literal(y, name):
    """Spec: a rounding mode is chosen by its name's value, not its identity: a name read from an IR file or
    built at run time (an equal string that is not the interned literal) rounds exactly as the literal does."""
    built = "".join(list(name))  # equal, not the same object
    assert built == name and built is not name
    assert int(fp.round_real(y, built)) == int(fp.round_real(y, name))


int16s = st.integers(min_value=-(2**15), max_value=2**15 - 1)


@settings(max_examples=100)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), xs=st.lists(int16s, min_size=1, max_size=64))
def test_lut16_interpolates_between_its_entries_every_128_inputs(seed, xs):
    """Spec (the int16 activation tables): entry i sits at x = -32768 + 128 i; between two entries the value is
    ``T[i] + round_half_up((T[i+1] - T[i]) f / 128)`` with i, f = divmod(x + 32768, 128); at an entry, T[i]."""
    # a table of 513 arbitrary int16 entries (drawn from the seed: hypothesis drawing 513 integers is slow)
    table = [int(v) for v in np.random.default_rng(seed).integers(-(2**15), 2**15, size=513)]
    got = qir.lut16(table, xs)
    for x, y in zip(xs, got, strict=True):
        i, f = divmod(x + 32768, 128)
        step = (Fraction((table[i + 1] - table[i]) * f, 128) + Fraction(1, 2)).__floor__()
        assert int(y) == table[i] + step
    at_entries = qir.lut16(table, [-32768 + 128 * i for i in range(512)])
    assert [int(y) for y in at_entries] == table[:512]


@dataclasses.dataclass
class _Fields:
    """A node with the integer fields a quantized layer read from a file carries (validate reads any dataclass)."""

    bits: int = 8
    guard: int = 0
    substeps: int = 1
    shift: int = 0
    in_bits: int = 8
    m_to_z: tuple = (1 << 30, 0, 0)


@pytest.mark.parametrize(
    "field, ok, bad",
    [
        ("bits", [8, 16], [7, 15, 17]),
        ("guard", [-32, 32], [-33, 33]),
        ("substeps", [1, 4096], [0, 4097]),
        ("shift", [-31, 30], [-32, 31]),
        ("in_bits", [8, 16], [7, 17]),
        ("m_to_z", [(0, -31, -128), (2**31 - 1, 30, 127), (1, -31)], [(0, -32, 0), (0, 31), (0, 0, 128), (-1, 0)]),
    ],
)
def test_validate_accepts_each_integer_field_at_its_ends_and_refuses_one_past(field, ok, bad):
    """Spec (quantized layers read from files): activations are 8 or 16 bits, a guard is in [-32, 32], substeps
    in [1, 4096] (limits.MAX_SUBSTEPS), a requantization (multiplier, shift[, zero point]) is in
    [0, 2^31 - 1] x [-31, 30] x [-128, 127]."""
    for v in ok:
        qir.validate(_Fields(**{field: v}), "layer")
    for v in bad:
        with pytest.raises(ShapeError, match=rf"layer\.{field}"):
            qir.validate(_Fields(**{field: v}), "layer")
