r"""The linear memory of the LMU: Legendre state space, discretization, impulse responses.

Conventions (stated once here; every module of lmu-edge follows them)
--------------------------------------------------------------------
The continuous memory of order ``q`` and window ``theta`` (measured in time
steps: one sample is one unit of time) is

.. math::

    \theta \dot m(t) = A' m(t) + B' u(t),\qquad
    A_{ij} = \frac{2i+1}{\theta}\begin{cases}-1 & i<j\\ (-1)^{i-j+1} & i\ge j\end{cases},\qquad
    B_i = \frac{2i+1}{\theta}(-1)^i

(Chilkuri and Eliasmith, "Parallelizing Legendre Memory Unit Training", ICML 2021, eq. 8-9), written
here with ``A``, ``B`` already divided by theta.
A discretization with a step of one sample gives

.. math::

    m[k] = \bar A\, m[k-1] + \bar B\, u[k]

with column vectors. The impulse response is ``H[:, k] = Abar^k @ Bbar``, so
``H[:, 0] = Bbar``: the current input reaches the current state (as in
keras-lmu's parallel layer), and the state after a whole sequence is the causal
convolution ``m[t] = sum_{k=0}^{t} H[:, k] u[t-k]``.

* ZOH: ``Abar = expm(A)``, ``Bbar = A^{-1}(Abar - I) B`` (computed through the
  exponential of the augmented matrix, which needs no inverse).
* Euler: ``Abar = I + A``, ``Bbar = B``.

Arrays of states are stored with the state index last, ``m.shape == (..., q)``,
so that a batch of states is a 2-D array; the product ``A @ m`` of the
equations is ``a_matvec(m, theta)`` here.

``A @ m`` costs O(q) thanks to A's structure. With prefix sums
``P_i = sum_{j<=i} m_j``, ``S_i = sum_{j<=i} (-1)^j m_j`` and ``T = P_{q-1}``:

.. math::

    (A m)_i = c_i\,\big(P_i - T + (-1)^{i+1} S_i\big),\qquad c_i = \frac{2i+1}{\theta},

and ``(A m + B u)_i = c_i (P_i - T + (-1)^i (u - S_i))``. An explicit
Runge-Kutta step of order r in {1, 2, 4} with the input held over the sample
(the ZOH assumption) and ``s`` substeps of length ``1/s`` is built on it, so
the deployed RK form stores only the ``q`` numbers ``c_i``. Explicit RK is only
stable when ``|h * lambda|`` is small for the eigenvalues of A, so the substep
count is found by measurement (:mod:`lmu_edge.fold`), never assumed.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

RK_ORDERS = (1, 2, 4)
DISCRETIZERS = ("zoh", "euler")


def _check_order_theta(order: int, theta: float) -> None:
    if int(order) != order or order < 1:
        raise ValueError(f"order must be a positive integer, got {order!r}")
    if not np.isfinite(theta) or theta <= 0:
        raise ValueError(f"theta must be a positive number of steps, got {theta!r}")


def legendre_ab(order: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """Continuous Legendre ``A`` (q, q) and ``B`` (q,), divided by theta (float64)."""
    _check_order_theta(order, theta)
    q = int(order)
    i = np.arange(q)[:, None]
    j = np.arange(q)[None, :]
    sign = np.where(i < j, -1.0, (-1.0) ** (i - j + 1))
    A = (2 * i + 1) / theta * sign
    B = (2 * np.arange(q) + 1) * (-1.0) ** np.arange(q) / theta
    return A.astype(np.float64), B.astype(np.float64)


def discretize(A: np.ndarray, B: np.ndarray, method: str = "zoh") -> tuple[np.ndarray, np.ndarray]:
    """Discretize ``(A, B)`` with a step of one sample; returns ``(Abar, Bbar)``."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64).reshape(-1)
    q = A.shape[0]
    if method == "zoh":
        aug = np.zeros((q + 1, q + 1))
        aug[:q, :q] = A
        aug[:q, q] = B
        e = scipy.linalg.expm(aug)
        return e[:q, :q].copy(), e[:q, q].copy()
    if method == "euler":
        return np.eye(q) + A, B.copy()
    raise ValueError(f"unknown discretizer {method!r}; known: {', '.join(DISCRETIZERS)}")


def legendre_discrete(order: int, theta: float, method: str = "zoh") -> tuple[np.ndarray, np.ndarray]:
    """``(Abar, Bbar)`` of the Legendre memory (float64)."""
    return discretize(*legendre_ab(order, theta), method=method)


def structure_coefficients(order: int, theta: float) -> np.ndarray:
    """The ``q`` numbers ``c_i = (2i+1)/theta`` that define A and B."""
    _check_order_theta(order, theta)
    return (2 * np.arange(int(order), dtype=np.float64) + 1) / float(theta)


def _alternating(q: int, dtype) -> np.ndarray:
    return ((-1.0) ** np.arange(q)).astype(dtype)


def a_matvec(m: np.ndarray, theta: float | None = None, *, coeffs: np.ndarray | None = None) -> np.ndarray:
    """``A @ m`` in O(q) for states stored as ``(..., q)``."""
    m = np.asarray(m)
    q = m.shape[-1]
    if coeffs is None:
        if theta is None:
            raise ValueError("a_matvec needs theta or coeffs")
        c = structure_coefficients(q, theta)
    else:
        c = coeffs
    return _a(m, c, _alternating(q, m.dtype if m.dtype.kind == "f" else np.float64))


def _a(m, c, alt):
    """``A m`` (with A scaled by whatever ``c`` carries) in O(q)."""
    P = np.cumsum(m, axis=-1)
    S = np.cumsum(m * alt, axis=-1)
    return c * (P - P[..., -1:] - alt * S)


def _f(m, u, c, alt):
    """``A m + B u`` in O(q); ``u`` has shape ``m.shape[:-1] + (1,)``."""
    P = np.cumsum(m, axis=-1)
    S = np.cumsum(m * alt, axis=-1)
    return c * (P - P[..., -1:] + alt * (u - S))


def rk_step(
    m: np.ndarray, u, theta: float, rk_order: int = 4, substeps: int = 1, coeffs: np.ndarray | None = None
) -> np.ndarray:
    """One sample of the memory by explicit Runge-Kutta, input held over the sample.

    ``m`` has shape ``(..., q)`` and ``u`` shape ``m.shape[:-1]`` (or broadcastable).
    Returns the state after ``substeps`` steps of length ``h = 1/substeps``.

    For a linear system with the input held constant, every explicit RK method
    of order r in {1, 2, 4} (Euler, midpoint/Heun, classic RK4) computes the
    same polynomial of ``hA``: its degree-r Taylor expansion. It is evaluated
    here in the cheapest form, with ``hc_i`` folded into the coefficients::

        w1 = h (A m + B u),   w_{k+1} = h A w_k,
        m' = m + w1 + 1/2 (w2 + 1/3 (w3 + 1/4 w4))        (truncated after w_r)

    which is r structured products (7q, 14q, 28q operations per substep for
    r = 1, 2, 4) instead of the 4 stages of the tableau.
    """
    if rk_order not in RK_ORDERS:
        raise ValueError(f"rk_order must be one of {RK_ORDERS}, got {rk_order!r}")
    if int(substeps) != substeps or substeps < 1:
        raise ValueError(f"substeps must be a positive integer, got {substeps!r}")
    m = np.asarray(m)
    dtype = m.dtype if m.dtype.kind == "f" else np.dtype(np.float64)
    m = m.astype(dtype, copy=True)
    q = m.shape[-1]
    c = structure_coefficients(q, theta) if coeffs is None else np.asarray(coeffs, dtype=np.float64)
    hc = (c / float(substeps)).astype(dtype)
    alt = _alternating(q, dtype)
    u = np.asarray(u, dtype=dtype)[..., None]
    inv = [None] + [np.asarray(1.0 / k, dtype=dtype) for k in range(1, rk_order + 1)]
    for _ in range(int(substeps)):
        w = [_f(m, u, hc, alt)]
        for _k in range(1, rk_order):
            w.append(_a(w[-1], hc, alt))
        acc = w[-1]
        for k in range(rk_order - 1, 0, -1):  # Horner: w_k + acc / (k+1)
            acc = w[k - 1] + acc * inv[k + 1]
        m = m + acc
    return m


def rk_map(order: int, theta: float, rk_order: int = 4, substeps: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The exact one-sample linear map ``m' = M m + N u`` of :func:`rk_step` (float64).

    Built by running the structured step itself on the identity, so it is the
    map of the code that is deployed, not of a formula that is assumed.
    """
    q = int(order)
    M = rk_step(np.eye(q), np.zeros(q), theta, rk_order, substeps).T
    N = rk_step(np.zeros((1, q)), np.ones(1), theta, rk_order, substeps)[0]
    return M, N


def iter_impulse_response(Abar: np.ndarray, Bbar: np.ndarray, length: int, block: int = 512):
    """Yield ``(start, H_block)`` with ``H_block[:, k] = Abar^(start+k) Bbar``.

    Computed block by block with one matrix product per block (BLAS-3), so long
    responses of large systems cost ``2 q^2 length`` flops and ``q * block`` memory.
    """
    Abar = np.asarray(Abar, dtype=np.float64)
    v = np.asarray(Bbar, dtype=np.float64).reshape(-1)
    b = int(max(1, min(block, length)))
    first = np.empty((v.size, b))
    for k in range(b):
        first[:, k] = v
        v = Abar @ v
    yield 0, first
    if length <= b:
        return
    Ab = np.linalg.matrix_power(Abar, b)
    cur = first
    for start in range(b, length, b):
        cur = Ab @ cur
        n = min(b, length - start)
        yield start, cur[:, :n]


def impulse_response(Abar: np.ndarray, Bbar: np.ndarray, length: int) -> np.ndarray:
    """``H`` of shape ``(q, length)`` with ``H[:, k] = Abar^k @ Bbar``."""
    q = np.asarray(Bbar).size
    H = np.empty((q, int(length)))
    for start, blk in iter_impulse_response(Abar, Bbar, int(length)):
        H[:, start : start + blk.shape[1]] = blk
    return H[:, : int(length)]


def legendre_impulse_response(order: int, theta: float, length: int, method: str = "zoh") -> np.ndarray:
    """Impulse response ``(q, length)`` of the discretized Legendre memory (float64)."""
    return impulse_response(*legendre_discrete(order, theta, method), length)


def spectral_radius(M: np.ndarray) -> float:
    """Largest eigenvalue magnitude of a square matrix."""
    return float(np.max(np.abs(np.linalg.eigvals(np.asarray(M, dtype=np.float64)))))


def euler_stable_theta(order: int) -> float:
    """The theta above which Euler's step ``I + A`` of the order-``order`` Legendre memory is stable.

    With ``lam`` an eigenvalue of the continuous A at theta = 1, Euler's step has ``1 + lam / theta``,
    inside the unit circle exactly when ``theta > |lam|^2 / (-2 Re lam)``."""
    lam = np.linalg.eigvals(legendre_ab(order, 1.0)[0])
    return float(np.max(np.abs(lam) ** 2 / (-2.0 * np.minimum(lam.real, -1e-300))))


def growth(Abar: np.ndarray, Bbar: np.ndarray, steps: int, stop: float = math.inf) -> float:
    """``max_k max|Abar^k Bbar| / max|Bbar|`` over ``k < steps``: how much the memory's response to one
    input grows within ``steps`` (1 for a memory whose response only decays; ``inf`` past float64).
    ``Bbar``: a vector, or one column per input. Returns early once the growth passes ``stop``."""
    v = np.asarray(Bbar, np.float64).reshape(np.shape(Abar)[0], -1)
    b = float(np.max(np.abs(v))) or 1.0
    top = b
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(max(int(steps), 1) - 1):
            v = Abar @ v
            top = max(top, float(np.max(np.abs(v))))
            if not np.isfinite(top):
                return math.inf
            if top > stop * b:
                break
    return top / b


def feedback_system(Abar: np.ndarray, Bbar: np.ndarray, memory_encoders: np.ndarray) -> tuple:
    """``(A, B)`` of ``memory_d`` channels of the memory ``(Abar, Bbar)`` with the ``memory_to_memory``
    feedback ``u += m @ memory_encoders`` (``(d q, d)``; ``m`` flattened as ``channel * q + i``), the
    channels' inputs as B's columns: the linear loop whose powers say whether the state stays bounded."""
    Bv = np.asarray(Bbar, np.float64).reshape(-1)
    Me = np.asarray(memory_encoders, np.float64)
    q, d = Bv.size, Me.shape[1]
    A = np.kron(np.eye(d), np.asarray(Abar, np.float64))
    A += (Bv[None, :, None] * Me.T[:, None, :]).reshape(d * q, d * q)
    return A, np.kron(np.eye(d), Bv[:, None])


# --- per-step cost of each realization (per memory channel) -----------------------------


def dense_cost(q: int) -> tuple[int, int]:
    """``(operations, stored coefficients)`` of ``Abar @ m + Bbar * u``: q^2 + q MACs."""
    return 2 * q * q + 2 * q, q * q + q


_RK_OPS_PER_Q = {1: 7, 2: 14, 4: 28}


def rk_cost(q: int, rk_order: int, substeps: int) -> tuple[int, int]:
    """``(operations, stored coefficients)`` of :func:`rk_step`.

    ``w1 = h(A m + B u)`` is two prefix sums and four operations per element
    (6q), each further ``h A w`` two prefix sums and three (5q), each Horner
    level a multiply-add (2q), the final update q: 7q, 14q and 28q per substep
    for r = 1, 2, 4 ("Language Modeling using LMUs and Implicit Self-Attention", anonymous authors, a paper
    under double-blind review; appendix A.2 estimates about 6rq). Only the q numbers
    ``c_i`` are stored.
    """
    return _RK_OPS_PER_Q[rk_order] * q * int(substeps), q


def fir_cost(q: int, length: int) -> tuple[int, int]:
    """``(operations, stored coefficients)`` of a length-L convolution: L*q MACs."""
    return 2 * q * int(length), q * int(length)
