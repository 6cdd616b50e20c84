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
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

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
    w = _forward((c * d).astype(dtype), c * d)  # L^{-1} (c d): depends on c only
    return y - w * (np.sum(y, axis=-1, keepdims=True) / (1.0 + np.sum(w)))


def _forward(b: np.ndarray, cd: np.ndarray) -> np.ndarray:
    """``L^{-1} b`` with ``L = I - diag(cd) T`` by forward substitution, O(q)."""
    y = np.empty_like(b)
    even = np.zeros(b.shape[:-1], dtype=b.dtype)  # running sum of y_j, j even, j < i
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
    import scipy.interpolate  # here: a quarter of lmu-edge's import time (every CLI run), used only by folding

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
    keep = [j for j in range(p.size) if p[j].imag >= -1e-12]  # one of each conjugate pair
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
    return _power(M1, N1, s)


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


# --- the integer form's constants ------------------------------------------------------------


def step_constants(q: int, theta: float, orders=(3, 4), substeps: int = 1) -> dict:
    """The constants of one substep in the form the integer kernel runs (floats, complex per pole).

    Per kept pole ``j`` (one of each conjugate pair) with ``c = h / p_j``:
    ``gc = 2c / theta`` (so ``2 c d_i = (2i+1) gc`` and the input term ``c B_i u =
    (-1)^i (2i+1) (gc / 2) u``), the Sherman-Morrison vector ``w = L^{-1}(c d)``,
    ``inv = 1 / (1 + sum w)`` and the output weight ``coef = -(rho_j / p_j)``, doubled for a
    conjugate pair (its real part is taken). ``k`` is the polynomial part (0 below the diagonal).
    """
    k, rho, p = pade_fractions(*orders)
    d = lti.structure_coefficients(q, theta)
    h = 1.0 / int(substeps)
    gc, w, inv, coef = [], [], [], []
    for j in range(p.size):
        if p[j].imag < -1e-12:
            continue
        c = complex(h / p[j])
        wj = _forward((c * d).astype(complex), c * d)
        gc.append(2 * c / theta)
        w.append(wj)
        inv.append(1.0 / (1.0 + np.sum(wj)))
        coef.append(-(rho[j] / p[j]) * (1.0 if abs(p[j].imag) < 1e-12 else 2.0))
    return {"k": float(k), "gc": np.array(gc), "w": np.array(w), "inv": np.array(inv), "coef": np.array(coef)}


def constants_substep(m: np.ndarray, u, consts: dict) -> np.ndarray:
    """One substep with the given constants (:func:`step_constants`, possibly rounded), in float64:
    the integer kernel's formula without its roundings, so that the map of rounded constants can be
    measured. ``m`` has shape ``(..., q)``, ``u`` shape ``m.shape[:-1]``."""
    m = np.asarray(m, dtype=np.float64)
    q = m.shape[-1]
    a = 2.0 * np.arange(q) + 1.0
    alt = (-1.0) ** np.arange(q)
    u = np.asarray(u, dtype=np.float64)[..., None]
    out = consts["k"] * m
    for gc, w, inv, coef in zip(consts["gc"], consts["w"], consts["inv"], consts["coef"], strict=True):
        y = _forward((m + alt * a * (gc / 2) * u).astype(complex), a * gc / 2)
        x = y - w * (np.sum(y, axis=-1, keepdims=True) * inv)
        out = out + (coef * x).real
    return out


def constants_map(consts: dict, q: int, substeps: int) -> tuple[np.ndarray, np.ndarray]:
    """The one-sample map ``(M, N)`` of ``substeps`` substeps of :func:`constants_substep`."""
    M1 = constants_substep(np.eye(q), np.zeros(q), consts).T
    N1 = constants_substep(np.zeros((1, q)), np.ones(1), consts)[0]
    return _power(M1, N1, int(substeps))


def _power(M1, N1, s):
    q = M1.shape[0]
    aug = np.zeros((q + 1, q + 1))
    aug[:q, :q], aug[:q, q], aug[q, q] = M1, N1, 1.0
    out, base = np.eye(q + 1), aug
    while s:
        if s & 1:
            out = base @ out
        s >>= 1
        if s:
            base = base @ base
    return out[:q, :q].copy(), out[:q, q].copy()


# --- the integer node -----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class QPadeMemory:
    """The implicit Pade step in integers (run by :func:`lmu_edge.intsim.pade_memory_int`, mirrored by
    ``lmu_pade.h``). Work values carry ``guard`` more fractional bits than the state (fewer when
    negative); per substep, with ``mw = m`` at the work scale and ``uw = u`` at the work scale
    (``u_shift = u.frac - work frac``), for each kept pole ``j`` (complex, ``(re, im)`` pairs)::

        a_i = 2i + 1, (cr, ci) = a_i * gc_j
        b_i = mw_i + (-1)^i rnd(c * uw, gc_frac + 1)              (per component)
        y_i = b_i + rnd(c * S, gc_frac)    S = running sum of y over the indices of the other parity
        t = rnd(sum(y) * inv_j, inv_frac),  x_i = y_i - rnd(w_ji * t, w_frac)
        out_i += rnd(Re(coef_j * x_i), coef_frac)

    then ``m = sat(rnd(out + rnd(k * mw, k_frac), guard))``. Every product's operands are bounded
    (the quantizer chooses each fraction from the proven bounds) so that it fits in int64."""

    TYPE: ClassVar[str] = "q_pade_memory"
    num: int
    den: int
    substeps: int
    guard: int
    u_shift: int
    gc: np.ndarray  # (P, 2) int32
    gc_frac: int
    w: np.ndarray  # (P, q, 2) int32
    w_frac: int
    inv: np.ndarray  # (P, 2) int32
    inv_frac: int
    coef: np.ndarray  # (P, 2) int32
    coef_frac: int
    k: int = 0
    k_frac: int = 0

    def __post_init__(self):
        from .errors import ShapeError

        for name, ndim in (("gc", 2), ("w", 3), ("inv", 2), ("coef", 2)):
            a = np.array(getattr(self, name), copy=True)
            if a.dtype.kind not in "iu" or a.ndim != ndim or a.shape[-1] != 2:
                raise ShapeError(f"QPadeMemory.{name}: expected an integer array of {ndim} dimensions ending in 2")
            if a.size and (a.min() < -(1 << 31) or a.max() > (1 << 31) - 1):
                raise ShapeError(f"QPadeMemory.{name}: values outside int32")
            a.setflags(write=False)
            object.__setattr__(self, name, a)
        P = self.gc.shape[0]
        if self.w.shape[0] != P or self.inv.shape[0] != P or self.coef.shape[0] != P:
            raise ShapeError("QPadeMemory: gc, w, inv and coef need one row per pole")
        for name, lo, hi in (
            ("substeps", 1, 4096),
            ("guard", -24, 24),
            ("u_shift", -62, 62),
            ("gc_frac", 0, 62),
            ("w_frac", 0, 62),
            ("inv_frac", 0, 62),
            ("coef_frac", 0, 62),
            ("k_frac", 0, 62),
            ("k", -(1 << 31), (1 << 31) - 1),
        ):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= int(v) <= hi:
                raise ShapeError(f"QPadeMemory.{name}: expected an integer in [{lo}, {hi}], got {v!r}")


def _register():
    from . import ir

    types: dict = ir.NODE_TYPES  # quantized node types register themselves, as lmu_edge.qir's do
    types[QPadeMemory.TYPE] = QPadeMemory
    ir.INT_NODE_TYPES.add(QPadeMemory.TYPE)


_register()


# --- bounds and fractions for the integer form --------------------------------------------------


def int_bounds(q: int, consts: dict, bmax: float) -> list:
    """Per kept pole, bounds on the work values for ``|b_i| <= bmax``: ``|y|``, the running sums
    ``|S|``, ``|sum y|`` and ``|x|``, each the l1 row gain of the exact linear map from ``b``
    (computed on the identity), doubled to cover the roundings (each at most one work LSB per
    element, far below ``bmax >= 2^15`` times the same gains)."""
    a = 2.0 * np.arange(q) + 1.0
    even = np.arange(q) % 2 == 0
    out = []
    for gc, w, inv in zip(consts["gc"], consts["w"], consts["inv"], strict=True):
        Y = _forward(np.eye(q, dtype=complex), a * gc / 2)  # row k: L^{-1} e_k
        Se = np.cumsum(np.where(even, Y, 0), axis=1)
        So = np.cumsum(np.where(even, 0, Y), axis=1)
        sy = np.sum(Y, axis=1)
        X = Y - np.outer(sy * inv, w)
        out.append(
            {
                "y": 2 * bmax * float(np.abs(Y).sum(axis=0).max()),
                "S": 2 * bmax * float(max(np.abs(Se).sum(axis=0).max(), np.abs(So).sum(axis=0).max())),
                "sy": 2 * bmax * float(np.abs(sy).sum()),
                "x": 2 * bmax * float(np.abs(X).sum(axis=0).max()),
            }
        )
    return out


def frac_for(value: float, operand_bound: float, limit: float = 2.0**61) -> int:
    """Fractional bits of a constant of magnitude ``value``: the most for which it fits int32 and its
    product with an operand bounded by ``operand_bound`` stays below ``limit`` (int64 with room)."""
    cap = min((1 << 31) - 1, limit / max(operand_bound, 1.0))
    if value <= 0:
        return 30
    return max(0, min(62, int(math.floor(math.log2(cap / value)))))


def quantized_maps(order: int, theta: float, mem: QPadeMemory) -> tuple:
    """``(Mf, Nf, Mq, Nq)``: the float map of the Pade step and the map of its rounded integer constants
    (the integer kernel without its roundings), for reports."""
    consts = step_constants(order, theta, (mem.num, mem.den), mem.substeps)
    Mf, Nf = constants_map(consts, order, mem.substeps)

    def back(v, f):
        v = np.asarray(v, np.float64)
        return (v[..., 0] + 1j * v[..., 1]) * 2.0**-f

    cq = {
        "k": mem.k * 2.0**-mem.k_frac,
        "gc": back(mem.gc, mem.gc_frac),
        "w": back(mem.w, mem.w_frac),
        "inv": back(mem.inv, mem.inv_frac),
        "coef": back(mem.coef, mem.coef_frac),
    }
    Mq, Nq = constants_map(cq, order, mem.substeps)
    return Mf, Nf, Mq, Nq
