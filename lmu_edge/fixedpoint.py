"""Fixed-point types and the integer operations every integer path shares.

A value ``x`` of type ``FixedType(width, frac, signed)`` is stored as the
integer ``round(x * 2**frac)``, saturated (or wrapped) to ``width`` bits. The
rounding and saturation rules are defined here, once; the C runtime
(``lmu_runtime.h``) mirrors them and the two are tested against each other.

Rounding modes (of an exact rational result to an integer):

``floor``      toward minus infinity: an arithmetic right shift, the cheapest in C
``half_up``    to nearest, ties toward plus infinity: ``(x + (1 << (s-1))) >> s``
``half_away``  to nearest, ties away from zero (TFLite's ``RoundingDivideByPOT``)
``half_even``  to nearest, ties to even (IEEE, numpy's ``round``)

Saturation: ``saturate`` clamps to the type's range, ``wrap`` keeps the low
``width`` bits (two's complement), as unchecked C arithmetic would.

The TFLite int8 requantization (a 32-bit fixed-point multiplier and a shift)
is here too: :func:`quantize_multiplier`, :func:`multiply_by_quantized_multiplier`.

All integer helpers take and return ``numpy.int64`` arrays; products of two
32-bit values fit in int64.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np

ROUNDINGS = ("floor", "half_up", "half_away", "half_even")
SATURATIONS = ("saturate", "wrap")
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True)
class FixedType:
    """A fixed-point number type: ``width`` bits, ``frac`` of them after the point.

    ``frac`` may be negative (a scale above one) or larger than ``width``
    (values below one half). The real value of the stored integer ``n`` is
    ``n * 2**-frac``.
    """

    TYPE: ClassVar[str] = "fixed_type"  # its node name in IR files
    width: int
    frac: int
    signed: bool = True
    rounding: str = "half_up"
    saturation: str = "saturate"

    def __post_init__(self):
        if not (1 <= int(self.width) <= 64) or int(self.width) != self.width:
            raise ValueError(f"FixedType width must be an integer in 1..64, got {self.width!r}")
        if int(self.frac) != self.frac:
            raise ValueError(f"FixedType frac must be an integer, got {self.frac!r}")
        if self.rounding not in ROUNDINGS:
            raise ValueError(f"unknown rounding {self.rounding!r}; known: {', '.join(ROUNDINGS)}")
        if self.saturation not in SATURATIONS:
            raise ValueError(f"unknown saturation {self.saturation!r}; known: {', '.join(SATURATIONS)}")

    # --- ranges ---------------------------------------------------------------------------
    @property
    def min_int(self) -> int:
        """The smallest stored integer."""
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def max_int(self) -> int:
        """The largest stored integer."""
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1

    @property
    def scale(self) -> float:
        """The real value of one least significant bit."""
        return math.ldexp(1.0, -self.frac)

    @property
    def min(self) -> float:
        """The smallest real value the type represents."""
        return self.min_int * self.scale

    @property
    def max(self) -> float:
        """The largest real value the type represents."""
        return self.max_int * self.scale

    @property
    def storage_bits(self) -> int:
        """Bits of the C integer type that holds it (8, 16, 32 or 64)."""
        for b in (8, 16, 32, 64):
            if self.width <= b:
                return b
        raise AssertionError

    @property
    def c_type(self) -> str:
        """The C integer type that stores it (``int16_t``, ``uint8_t``, ...)."""
        return f"{'' if self.signed else 'u'}int{self.storage_bits}_t"

    def __str__(self) -> str:
        s = "fixed" if self.signed else "ufixed"
        return f"{s}<{self.width},{self.frac}>"

    # --- conversions ----------------------------------------------------------------------
    def saturate(self, n) -> np.ndarray:
        """Bring integers into range by this type's saturation rule."""
        n = np.asarray(n, dtype=np.int64)
        if self.saturation == "saturate":
            return np.clip(n, self.min_int, self.max_int)
        if self.width == 64:
            return n
        mod = 1 << self.width
        w = np.bitwise_and(n, mod - 1)
        if self.signed:
            w = np.where(w > self.max_int, w - mod, w)
        return w.astype(np.int64)

    def quantize(self, x) -> np.ndarray:
        """Float to stored integer: ``round(x * 2**frac)`` with this type's rules."""
        x = np.asarray(x, dtype=np.float64)
        if not np.all(np.isfinite(x)):
            raise ValueError(f"cannot quantize non-finite values to {self}")
        y = np.ldexp(x, self.frac)
        return self.saturate(round_real(y, self.rounding))

    def dequantize(self, n) -> np.ndarray:
        """Stored integer to float: ``n * 2**-frac``."""
        return np.ldexp(np.asarray(n, dtype=np.float64), -self.frac)

    def to_dict(self) -> dict:
        """The fields as a JSON-ready dict (the IR file's form)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "FixedType":
        """The type a :meth:`to_dict` dict describes."""
        return cls(**d)


def round_real(y, rounding: str = "half_up") -> np.ndarray:
    """Round real numbers to integers (int64) by one of :data:`ROUNDINGS`."""
    y = np.asarray(y, dtype=np.float64)
    if rounding == "floor":
        r = np.floor(y)
    elif rounding == "half_up":
        r = np.floor(y + 0.5)
    elif rounding == "half_away":
        r = np.sign(y) * np.floor(np.abs(y) + 0.5)
    elif rounding == "half_even":
        r = np.round(y)
    else:
        raise ValueError(f"unknown rounding {rounding!r}; known: {', '.join(ROUNDINGS)}")
    return r.astype(np.int64)


def shift_round(x, shift: int, rounding: str = "half_up") -> np.ndarray:
    """``x / 2**shift`` rounded to an integer, exactly, for int64 ``x``.

    A negative ``shift`` is an exact left shift.
    """
    x = np.asarray(x, dtype=np.int64)
    shift = int(shift)
    if shift <= 0:
        return np.left_shift(x, -shift)
    if rounding == "floor":
        return np.right_shift(x, shift)
    half = np.int64(1) << np.int64(shift - 1)
    if rounding == "half_up":
        return np.right_shift(x + half, shift)
    q = np.right_shift(x, shift)  # floor
    rem = x - np.left_shift(q, shift)  # 0 <= rem < 2**shift
    if rounding == "half_away":
        up = (rem > half) | ((rem == half) & (x >= 0))
    elif rounding == "half_even":
        up = (rem > half) | ((rem == half) & (np.bitwise_and(q, 1) == 1))
    else:
        raise ValueError(f"unknown rounding {rounding!r}; known: {', '.join(ROUNDINGS)}")
    return q + up.astype(np.int64)


def mul_shift(a, b, shift: int, out: FixedType) -> np.ndarray:
    """``saturate(round(a * b / 2**shift))`` in the rounding and saturation of ``out``."""
    p = np.asarray(a, dtype=np.int64) * np.asarray(b, dtype=np.int64)
    return out.saturate(shift_round(p, shift, out.rounding))


# --- the TFLite requantization scheme ------------------------------------------------------


def quantize_multiplier(real: float) -> tuple[int, int]:
    """Split a positive real multiplier into ``(m, shift)``: ``real ~= m * 2**(shift - 31)``.

    ``m`` is an int32 in ``[2**30, 2**31)`` (or 0), as TFLite's ``QuantizeMultiplier``.
    """
    real = float(real)
    if real < 0 or not math.isfinite(real):
        raise ValueError(f"multiplier must be finite and >= 0, got {real!r}")
    if real == 0.0:
        return 0, 0
    mant, shift = math.frexp(real)
    m = int(math.floor(abs(mant) * (1 << 31) + 0.5))  # std::round: half away from zero (mant > 0)
    if m == (1 << 31):
        m //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        raise ValueError(f"multiplier {real!r} is too large for the int32 requantization scheme")
    return m, shift


def _trunc_shift31(a: np.ndarray) -> np.ndarray:
    """C's ``a / 2**31`` (truncation toward zero) of int64 ``a``: a negative ``a`` is biased by ``2**31 - 1``
    before the arithmetic shift (the same integers as ``-(|a| // 2**31)``, four times faster than numpy's
    integer division, which the integer reference spent most of its time in). One temporary, worked in
    place: the integer reference requantizes whole sequences (issue 54: 30% of a large conversion)."""
    t = a >> 63
    t &= np.int64((1 << 31) - 1)
    t += a
    t >>= 31
    return t


#: gemmlowp's rounding nudges of a product's sign: +2^30 (>= 0), 1 - 2^30 (< 0)
_NUDGE_POS, _NUDGE_NEG = np.int64(1 << 30), np.int64(1 - (1 << 30))


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """gemmlowp's ``SaturatingRoundingDoublingHighMul`` on int32 values (as int64 arrays)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudge = ab >> 63  # 0 where ab >= 0, all ones (-1) where ab < 0: it selects the negative nudge
    nudge &= _NUDGE_NEG - _NUDGE_POS
    nudge += _NUDGE_POS
    nudge += ab
    r = _trunc_shift31(nudge)
    if np.any(b == INT32_MIN) and np.any(a == INT32_MIN):  # the one product that overflows int32's doubling
        r = np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, r)
    return np.asarray(r, dtype=np.int64)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp's ``RoundingDivideByPOT``: ``x / 2**exponent``, ties away from zero.

    ``exponent`` may be an array broadcasting against ``x`` (per-channel shifts).
    """
    x = np.asarray(x, dtype=np.int64)
    e = np.asarray(exponent, dtype=np.int64)
    if not np.any(e):
        return x.copy()  # 2^0: nothing to round
    mask = np.left_shift(np.int64(1), e) - 1
    remainder = np.bitwise_and(x, mask)
    remainder -= x < 0  # round up where the remainder passes half the mask (half + 1 where x < 0)
    out = np.right_shift(x, e)
    out += remainder > np.right_shift(mask, 1)
    return out


def multiply_by_quantized_multiplier(x, multiplier, shift) -> np.ndarray:
    """TFLite's ``MultiplyByQuantizedMultiplier``: ``x * m * 2**(shift-31)``, rounded.

    ``x`` is int32 (as int64); ``multiplier`` and ``shift`` may be per-channel
    arrays broadcasting against ``x``. The result is int32 (as int64).
    """
    x = np.asarray(x, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    xl = np.clip(np.left_shift(x, left) if np.any(left) else x, INT32_MIN, INT32_MAX)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(xl, multiplier), right)


def div_round(a, n) -> np.ndarray:
    """``a / n`` rounded to nearest, ties away from zero, for int64 ``a`` and positive ``n``
    (C: ``(2a + sign(a) n) / (2n)`` with truncating division)."""
    a = np.asarray(a, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    num = 2 * a + np.where(a >= 0, n, -n)
    return _trunc_div_vec(num, 2 * n)


def _trunc_div_vec(a, d):
    q = np.abs(a) // d
    return np.where(a < 0, -q, q)
