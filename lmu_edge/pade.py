r"""An A-stable implicit realization of the Legendre memory in O(q) per substep.

The Legendre ``A`` (divided by theta, see :mod:`lmu_edge.lti`) factors as
``A = D (T - 1 1^T)`` with ``D = diag((2i+1)/theta)`` and ``T`` strictly lower
triangular, 2 where ``i + j`` is odd and 0 elsewhere. So for any real or
complex shift ``c``

.. math::

    (I - c A)\,x = b \iff (L + c\,d\,1^T)\,x = b,\qquad L = I - c D T,\ d = \mathrm{diag}(D),

and ``L`` is solved by forward substitution with two running sums (over the
even and the odd indices), the rank-one term by Sherman-Morrison with a vector
``w = L^{-1}(c d)`` that depends only on ``c`` and is computed once. One
solve costs O(q) (:func:`shifted_solve`).

A Pade approximant ``r = P/Q`` of ``exp`` with ``deg P <= deg Q`` is A-stable
for the diagonal and first two sub-diagonals (Ehle's theorem), and in partial
fractions ``r(z) = k + sum_j rho_j / (z - p_j)`` it needs one shifted solve
per pole; a conjugate pair of poles needs only one complex solve when the
state is real. :func:`pade_step` applies ``r(hA)`` with ``h = 1/s`` to the
input-augmented system ``[[A, B], [0, 0]]`` (input held over the sample, the
ZOH assumption), ``s`` times per sample. (Ehle, "A-stable methods and Pade
approximations to the exponential", SIAM J. Math. Anal. 1973.)
"""

from __future__ import annotations

import math

import numpy as np
import scipy.interpolate

from . import lti

PADE_ORDERS = ((1, 1), (2, 2), (2, 3), (3, 4), (4, 4))


def shifted_solve(b: np.ndarray, c: complex, theta: float) -> np.ndarray:
    """Solve ``(I - c A) x = b`` for the Legendre ``A`` of order ``b.shape[-1]`` in O(q).

    ``b`` has shape ``(..., q)`` (real or complex); ``c`` is a real or complex
    shift. Returns ``x`` of the same shape (complex when ``c`` or ``b`` is).
    """
    b = np.asarray(b)
    q = b.shape[-1]
    d = lti.structure_coefficients(q, theta)
    dtype = np.result_type(b.dtype, np.asarray(c).dtype, np.float64)
    y = _forward(b.astype(dtype), c * d)
    w = _forward((c * d).astype(dtype), c * d)           # L^{-1} (c d): depends on c only
    return y - w * (np.sum(y, axis=-1, keepdims=True) / (1.0 + np.sum(w)))


def _forward(b: np.ndarray, cd: np.ndarray) -> np.ndarray:
    """``L^{-1} b`` with ``L = I - diag(cd) T`` by forward substitution, O(q)."""
    y = np.empty_like(b)
    even = np.zeros(b.shape[:-1], dtype=b.dtype)         # running sum of y_j, j even, j < i
    odd = np.zeros(b.shape[:-1], dtype=b.dtype)
    for i in range(b.shape[-1]):
        if i % 2 == 0:
            y[..., i] = b[..., i] + 2 * cd[i] * odd
            even = even + y[..., i]
        else:
            y[..., i] = b[..., i] + 2 * cd[i] * even
            odd = odd + y[..., i]
    return y


def pade_fractions(m: int, n: int) -> tuple[float, np.ndarray, np.ndarray]:
    """``(k, rho, p)``: the ``[m/n]`` Pade approximant of ``exp`` as ``k + sum rho_j / (z - p_j)``."""
    if not (0 <= m <= n):
        raise ValueError(f"Pade orders must satisfy 0 <= m <= n, got [{m}/{n}]")
    taylor = [1.0 / math.factorial(k) for k in range(m + n + 1)]
    P, Q = scipy.interpolate.pade(taylor, n, m)
    p = np.roots(Q.coeffs)
    rho = P(p) / Q.deriv()(p)
    k = float(P.coeffs[0] / Q.coeffs[0]) if m == n else 0.0
    return k, rho, p


def pade_step(m: np.ndarray, u, theta: float, orders=(3, 4), substeps: int = 1) -> np.ndarray:
    """One sample of the memory by ``s`` substeps of ``r(hA)`` on the augmented system.

    ``m`` has shape ``(..., q)``, ``u`` shape ``m.shape[:-1]``. Each pole costs
    one O(q) shifted solve; of a conjugate pair only one (complex) is solved.
    """
    k, rho, p = pade_fractions(*orders)
    m = np.asarray(m, dtype=np.float64).copy()
    q = m.shape[-1]
    u = np.asarray(u, dtype=np.float64)[..., None]
    h = 1.0 / int(substeps)
    Bv = lti.structure_coefficients(q, theta) * (-1.0) ** np.arange(q)
    keep = [j for j in range(p.size) if p[j].imag >= -1e-12]     # one of each conjugate pair
    for _ in range(int(substeps)):
        out = k * m
        for j in keep:
            # rho / (hA_aug - p) [m; u] = -(rho/p) (I - (h/p) A_aug)^{-1} [m; u]; the input row is constant
            c = h / p[j]
            x = shifted_solve(m + c * Bv * u, c, theta)
            term = -(rho[j] / p[j]) * x
            out = out + (term.real if abs(p[j].imag) < 1e-12 else 2 * term.real)
        m = out
    return m


def pade_map(order: int, theta: float, orders=(3, 4), substeps: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The one-sample linear map ``m' = M m + N u`` of :func:`pade_step` (float64).

    One substep's map is built by running the structured step on the identity
    (O(q^2)); the ``s`` substeps by repeated squaring of the input-augmented
    map ``[[M1, N1], [0, 1]]`` (about ``log2 s`` products), so measuring a
    large substep count costs little more than a small one.
    """
    q, s = int(order), int(substeps)
    if s < 1:
        raise ValueError(f"substeps must be a positive integer, got {substeps!r}")
    M1 = _one_substep(np.eye(q), np.zeros(q), theta, orders, s).T
    N1 = _one_substep(np.zeros((1, q)), np.ones(1), theta, orders, s)[0]
    aug = np.zeros((q + 1, q + 1))
    aug[:q, :q], aug[:q, q], aug[q, q] = M1, N1, 1.0
    out, base = None, aug
    while s:
        if s & 1:
            out = base if out is None else base @ out
        s >>= 1
        if s:
            base = base @ base
    return out[:q, :q].copy(), out[:q, q].copy()


def _one_substep(m, u, theta, orders, substeps):
    """One substep of length ``1/substeps`` of :func:`pade_step`."""
    k, rho, p = pade_fractions(*orders)
    m = np.asarray(m, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)[..., None]
    q = m.shape[-1]
    h = 1.0 / int(substeps)
    Bv = lti.structure_coefficients(q, theta) * (-1.0) ** np.arange(q)
    out = k * m
    for j in range(p.size):
        if p[j].imag < -1e-12:
            continue
        c = h / p[j]
        term = -(rho[j] / p[j]) * shifted_solve(m + c * Bv * u, c, theta)
        out = out + (term.real if abs(p[j].imag) < 1e-12 else 2 * term.real)
    return out


def pade_cost(q: int, orders, substeps: int) -> tuple[int, int]:
    """``(operations, stored coefficients)`` per step, counting real operations.

    A real-pole solve: forward substitution (about 4q) and the rank-one
    correction (3q) plus the right-hand side and accumulation (4q): 11q. A
    complex solve costs about four times as many real operations (44q).
    Stored: the q numbers ``c_i`` and, per pole, the q-vector ``w`` (complex: 2q).
    """
    _, _, p = pade_fractions(*orders)
    real = int(np.sum(np.abs(p.imag) < 1e-12))
    pairs = (p.size - real) // 2
    ops = (11 * real + 44 * pairs) * q * int(substeps) + (q if orders[0] == orders[1] else 0) * int(substeps)
    return ops, q + q * (real + 2 * pairs)
