"""The overflow proofs behind the generated C's kernel flags.

Each function bounds, from the quantized weights alone (or from the quantizer's proven state bound), an
accumulator of one integer kernel, and says whether a narrower, faster path computes the same integers:
an int8 layer's accumulator (:func:`qlinear_acc_bound`, read by the 32-bit ``.acc30`` path) and the
dense memory's 32-bit sums (``chunk``, ``step32``, ``wrap32``). :mod:`.c_codegen` writes their answers
into ``<prefix>.c`` next to the proof; ``tests/test_specs_proofs.py`` and ``tests/test_kernels_arm.py``
check them against exhaustive and worst-case inputs.
"""

from __future__ import annotations

import math

import numpy as np

from .. import qir


def qlinear_acc_bound(q: qir.QLinear) -> int:
    """A bound on |acc_j| = |bias_j + sum_i (x_i - zp) w_ji| over every row j and every int8 input x of the
    first part of an int8 layer: ``max_j |bias_j| + max |x - zp| sum_i |w_ji|`` with x in [-128, 127], so
    ``max |x - zp| = max(127 - zp, zp + 128)``."""
    p = q.parts[0]
    zp = int(p.in_zp)
    w = np.abs(np.asarray(p.kernel, dtype=np.int64)).sum(axis=0)  # (n_out,): sum_i |w_ji|
    b = np.abs(np.asarray(q.bias, dtype=np.int64)) if q.bias is not None else np.zeros_like(w)
    return int((b + max(127 - zp, zp + 128) * w).max(initial=0))


def dense_acc32(coeffs, state_bits: int) -> int:
    """1 when the dense memory's sum over C m provably fits a 32-bit accumulator, else 0.

    Proof: |m_j| <= 2^(state_bits - 1) for a saturated state of ``state_bits`` bits, so every partial
    sum of row i is bounded in absolute value by ``sum_j |C_ij| * 2^(state_bits - 1)``; when the largest
    such row bound is at most 2^31 - 1 no partial sum overflows int32 (the B u term is added in 64 bits)."""
    c = np.abs(np.asarray(coeffs, dtype=np.int64))
    if c.size == 0:
        return 1
    bound = int(c.reshape(c.shape[0], -1).sum(axis=1).max()) << (int(state_bits) - 1)
    return 1 if bound <= 2**31 - 1 else 0


def dense_chunk(coeffs, state_bits: int) -> int:
    """The most consecutive columns of the dense memory whose sum over C m provably fits int32.

    Returns the largest ``k`` (1 <= k <= q) such that for every row i and every chunk of columns
    ``[a k, (a + 1) k)`` the bound ``sum_j |C_ij| * 2^(state_bits - 1)`` is at most 2^31 - 1 (|m_j| <=
    2^(state_bits - 1)), so every partial sum inside a chunk is exact in 32 bits. ``k >= q`` is
    :func:`dense_acc32`'s whole-row proof. Returns 0 when even one column can overflow (a 32-bit state):
    the kernels then sum in 64 bits (the generic kernels ignore k below q; for an order-1 memory a 1 here
    would read as the whole row proven)."""
    c = np.abs(np.asarray(coeffs, dtype=np.int64))
    c = c.reshape(c.shape[0], -1)
    q = c.shape[1]
    if q == 0:
        return 1
    limit = (2**31 - 1) >> (int(state_bits) - 1)
    for k in range(q, 0, -1):
        pad = -q % k
        sums = np.pad(c, ((0, 0), (0, pad))).reshape(c.shape[0], -1, k).sum(axis=2)
        if int(sums.max()) <= limit:
            return k
    return 0


def dense_step32(coeffs, B, u_bound: int, coeff_frac: int, state_bits: int) -> bool:
    """Whether every row's rounded step of the dense memory fits well inside int32.

    With ``S_i = sum_j |C_ij| 2^(state_bits - 1) + |B_i| u_bound`` (|m_j| <= 2^(state_bits - 1),
    |u| <= u_bound), the exact sum plus the rounding half lies in ``[-S_i, S_i + 2^(coeff_frac - 1)]``,
    so its floor over ``2^coeff_frac`` has magnitude below 2^30 when ``S_i + 2^coeff_frac <= 2^(30 +
    coeff_frac)``. Then the Cortex-M kernels take the step from the low word of the shifted 64-bit sum
    and add m_i (|m_i| <= 2^15 for a state of at most 16 bits) without overflow. Needs 1 <= coeff_frac
    <= 31 and a state of at most 16 bits."""
    if not 1 <= int(coeff_frac) <= 31 or int(state_bits) > 16:
        return False
    c = np.abs(np.asarray(coeffs, dtype=object)).reshape(len(B), -1)
    b = np.abs(np.asarray(B, dtype=object))
    s = c.sum(axis=1) * (1 << (int(state_bits) - 1)) + b * int(u_bound)
    return bool(max(s, default=0) + (1 << int(coeff_frac)) <= 1 << (30 + int(coeff_frac)))


def dense_wrap32(state_bound_lsb: float, proven: bool, delta: bool, coeff_frac: int, state_bits: int) -> bool:
    """Whether every row's whole sum ``T_i = B_i u + sum_j C_ij m_j + 2^(coeff_frac - 1)`` of a dense
    memory provably lies in int32, so that 32-bit sums that wrap on overflow are exact.

    The quantizer's proof that no input drives the state past ``state_bound_lsb`` (in LSBs; ``proven``)
    bounds the step, not only the state: the state never saturates, so the new state is ``m_i + step_i``
    (delta form) or ``step_i`` (direct form), and both it and ``m_i`` are at most ``b = floor(bound)``
    in magnitude. So ``|step_i| <= K`` with ``K = 2 b`` (delta) or ``b`` (direct), and ``step_i =
    floor(T_i / 2^coeff_frac)`` puts ``T_i`` in ``[-K 2^cf, (K + 1) 2^cf - 1]``, inside int32 when
    ``(K + 1) 2^cf <= 2^31``. A partial sum may leave int32 on the way; its low 32 bits are still right
    (addition modulo 2^32), and the end result is the exact one. Much stronger than
    :func:`dense_chunk`'s bound, which must hold for any state vector, including ones the memory never
    reaches (a whole row of the bench model would need 38 bits there). Holds for reachable states:
    those from reset and any input. A state of at most 16 bits (the 16 x 16 kernel)."""
    if not proven or not 1 <= int(coeff_frac) <= 31 or int(state_bits) > 16:
        return False
    b = math.floor(float(state_bound_lsb) * (1 + 1e-9))  # the bound is a float sum: a hair of margin
    if b > (1 << (int(state_bits) - 1)) - 1:
        return False
    k = 2 * b if delta else b
    return (k + 1) << int(coeff_frac) <= 1 << 31
