"""How far a realization of an LMU memory is from the layer's reference: impulse-response measurement.

Every candidate realization of a layer's memory is a linear one-step map
``m' = M m + N u``. For measuring, the map is built as dense matrices (an RK
step is a linear map: :func:`lmu_edge.lti.rk_map` runs the structured step on
the identity), so measuring costs the same for every realization; only the
deployed form is structured. Its impulse response ``M^k N`` is compared with
the reference (:class:`Reference`) over a horizon of at least ``5 * theta`` steps:

* the exact float64 response of the layer's ``(order, theta, discretizer)``
  when the source model's memory is analytic;
* the layer's stored kernel (zero beyond its length) when the source model
  convolved with a truncated or learned kernel.

The error is ``max|H - H_ref| / max|H_ref|`` (relative to the output scale, as
everywhere in lmu-edge); :func:`measure` returns it with the spectral radius
and the realization's cost as a :class:`Candidate`. The search that picks one
candidate per layer is :mod:`lmu_edge.folding`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from . import ir, limits, lti, pade
from .errors import FoldError

CACHE_BYTES = limits.CACHE_BYTES  # keep the reference response in memory up to this size
#: the block size of the cached reference response, and so of every candidate compared with it: both are
#: computed with the same powers ``Abar^block``, so the dense map of the layer's own discretizer measures
#: exactly zero, not the float64 rounding that different powerings leave (grown by an unstable Euler
#: source to over the float budget: docs/realizations.md)
REF_BLOCK = 256


@dataclass(frozen=True)
class Candidate:
    """One measured realization of one layer."""

    name: str
    memory: ir.Memory  # the realization node (ir.DenseSS, ir.RungeKutta, ir.Pade, ir.FIR)
    measurement: ir.Measurement
    ok: bool  # within budget and stable
    note: str = ""  # why a search stopped early, when it did

    def describe(self) -> str:
        """One line for ``inspect``: name, substeps, error, cost, storage and whether it is within budget."""
        m = self.measurement
        extra = f", {self.memory.substeps} substeps" if isinstance(self.memory, (ir.RungeKutta, ir.Pade)) else ""
        rho = "not computed (over budget)" if math.isnan(m.spectral_radius) else f"{m.spectral_radius:.6f}"
        note = f" ({self.note})" if self.note else ""
        return (
            f"{self.name}{extra}: error {m.error:.2e}, {m.ops_per_step} ops/step, "
            f"{m.coeffs_stored} coefficients, state {m.state_size}, spectral radius {rho}{note}"
        )


def map_radius(memory, lam: np.ndarray) -> float:
    """Spectral radius of a realization's one-sample map from the eigenvalues ``lam`` of ``A``: the map is
    a function of ``A`` (``exp`` for ZOH, ``1 + z`` for Euler, the degree-r Taylor polynomial of ``z/s``
    to the power ``s`` for RK, the Pade approximant of ``z/s`` to the power ``s``), so its eigenvalues
    are that function of ``lam``: one eigenvalue problem per layer instead of one per candidate."""
    lam = np.asarray(lam, dtype=complex)
    with np.errstate(over="ignore", invalid="ignore"):
        if isinstance(memory, ir.DenseSS):
            f = np.exp(lam) if memory.method == "zoh" else 1.0 + lam
            return float(np.max(np.abs(f)))
        if isinstance(memory, ir.RungeKutta):
            z = lam / memory.substeps
            t, term = np.ones_like(z), np.ones_like(z)
            for n in range(1, memory.rk_order + 1):
                term = term * z / n
                t = t + term
            return float(np.max(np.abs(t)) ** memory.substeps)
        if isinstance(memory, ir.Pade):
            k, rho, p = pade.pade_fractions(*memory.orders)
            z = lam / memory.substeps
            r = k + np.sum(rho[None, :] / (z[:, None] - p[None, :]), axis=1)
            return float(np.max(np.abs(r)) ** memory.substeps)
    raise TypeError(f"no spectral-radius formula for {type(memory).__name__}")


class Reference:
    """The response a layer's realizations are measured against."""

    def __init__(self, layer: ir.LMU, horizon: Optional[int] = None, stride: int = 1):
        self.layer = layer
        if int(stride) != stride or stride < 1:
            raise FoldError(f"the measuring stride must be a positive integer, got {stride!r}")
        self.stride = int(stride)
        self._sampled: Optional[tuple] = None
        self._scale: Optional[tuple] = None
        self._rho: Optional[float] = 0.0  # a finite kernel is stable
        self.kernel: Optional[np.ndarray] = None
        self._cache: Optional[np.ndarray] = None
        mem = layer.memory
        base = max(int(math.ceil(5 * layer.theta)), 32)
        if isinstance(mem, ir.ImpulseResponse) and mem.kernel is not None:
            self.kernel = np.asarray(mem.kernel, dtype=np.float64)
            # past a truncated kernel's end the reference is zero: measure at least 5 theta beyond it,
            # so a realization's tail there (what the source model cut off) counts as error
            self.length = max(base, self.kernel.shape[1] + (base if mem.provenance == "truncated" else 0))
            self.what = f"stored {mem.provenance} kernel ({self.kernel.shape[1]} steps)"
        else:
            self.Abar, self.Bbar = lti.legendre_discrete(layer.order, layer.theta, layer.discretizer)
            self.length = base
            self.what = f"exact float64 {layer.discretizer} response"
            self._rho = None  # computed when a candidate needs it (an eigenvalue problem)
        if horizon is not None:
            self.length = max(self.length, int(horizon))
        if self.stride > 1 and self.length > SAMPLE_HEAD:  # a sampled measurement says so wherever it is shown
            self.what += f", sampled every {self.stride} steps past the first {SAMPLE_HEAD} of {self.length}"

    @property
    def rho(self) -> float:
        """Spectral radius of the reference map (0 for a finite kernel)."""
        if self._rho is None:
            self._rho = map_radius(ir.DenseSS(self.layer.discretizer, self.Abar, self.Bbar), self.eig_a)
        return self._rho

    @property
    def eig_a(self) -> np.ndarray:
        """Eigenvalues of the layer's continuous ``A`` (divided by theta): computed once per layer, they
        give the spectral radius of every candidate map through its step's function (:func:`map_radius`)."""
        if getattr(self, "_eig", None) is None:
            self._eig = np.linalg.eigvals(lti.legendre_ab(self.layer.order, self.layer.theta)[0])
        return self._eig

    def response(self, length: int) -> Optional[np.ndarray]:
        """The whole reference response ``(q, length)``, computed once and kept when it fits
        in :data:`CACHE_BYTES` (every candidate is compared with it); ``None`` otherwise."""
        if self.kernel is not None or self.layer.order * length * 8 > CACHE_BYTES:
            return None
        if self._cache is None or self._cache.shape[1] < length:
            blocks = lti.iter_impulse_response(self.Abar, self.Bbar, length, REF_BLOCK)
            self._cache = np.concatenate([blk for _, blk in blocks], axis=1)
        return self._cache[:, :length]

    def sampled(self, length: int, block: int = 512):
        """``(steps, H_block)`` blocks of the reference at the steps :func:`_sampled` measures (every step
        below :data:`SAMPLE_HEAD`, then every :attr:`stride`-th); kept in memory when they fit in
        :data:`CACHE_BYTES`."""
        if self._sampled is not None and self._sampled[0] == (length, block):
            yield from self._sampled[1]
            return
        head = _head(length, self.stride)
        n = head + len(range(head, length, self.stride))
        keep = self.layer.order * n * 8 <= CACHE_BYTES
        if self.kernel is None:
            gen = _sampled(self.Abar, self.Bbar, length, self.stride, block)
        else:
            gen = ((st, self.at(st)) for st in _sample_steps(length, self.stride, block))
        out = []
        for steps, blk in gen:
            if keep:
                out.append((steps, blk))
            yield steps, blk
        if keep:
            self._sampled = ((length, block), out)

    def sampled_scale(self, length: int) -> float:
        """``max|H_ref|`` for a sampled measurement: over the sampled steps and every step around the
        :data:`SAMPLE_REFINE` largest sampled values (one per block), so that it does not depend on the
        candidate (and an early stop agrees with a full comparison)."""
        if self._scale is not None and self._scale[0] == length:
            return self._scale[1]
        head, best, prev = _head(length, self.stride), 0.0, None
        peaks: list = []
        for st, b in self.sampled(length):
            e = np.max(np.abs(b), axis=0)
            best = max(best, float(np.max(e)))
            j = int(np.argmax(e))
            if st[j] >= head:
                before = (st[j - 1], b[:, j - 1]) if j else prev
                peaks = sorted(peaks + [(float(e[j]), before)], key=lambda x: -x[0])[:SAMPLE_REFINE]
            prev = (st[-1], b[:, -1])
        for _, (k, vb) in peaks:
            for step in range(int(k) + 1, min(int(k) + 2 * self.stride, length)):
                vb = self.advance(vb, step)
                best = max(best, float(np.max(np.abs(vb))))
        self._scale = (length, best)
        return best

    def at(self, steps: np.ndarray) -> np.ndarray:
        """The stored kernel's columns at ``steps`` (zero beyond its end)."""
        assert self.kernel is not None
        K = self.kernel.shape[1]
        out = np.zeros((self.kernel.shape[0], len(steps)))
        inside = steps < K
        out[:, inside] = self.kernel[:, steps[inside]]
        return out

    def advance(self, vec: np.ndarray, step: int) -> np.ndarray:
        """The reference at ``step`` given its column ``vec`` at ``step - 1``."""
        if self.kernel is None:
            return self.Abar @ vec
        return self.at(np.array([step]))[:, 0]

    def blocks(self, length: int, block: int = 512):
        """``(start, H_block)``: the reference over ``length`` steps in blocks of ``block`` columns."""
        H = self.response(length)
        if H is not None:
            for start in range(0, length, block):
                yield start, H[:, start : start + block]
            return
        if self.kernel is None:
            yield from lti.iter_impulse_response(self.Abar, self.Bbar, length, block)
            return
        q, K = self.kernel.shape
        for start in range(0, length, block):
            n = min(block, length - start)
            blk = np.zeros((q, n))
            if start < K:
                part = self.kernel[:, start : start + n]
                blk[:, : part.shape[1]] = part
            yield start, blk


def _stable(rho: float, ref: Reference) -> bool:
    """Below one, or no worse than a source layer that is itself unstable (an Euler
    discretization with theta small against the order grows without bound, and the
    dense Euler realization reproduces exactly that)."""
    return bool(np.isfinite(rho) and (rho < 1.0 or rho <= ref.rho * (1 + 1e-12)))


def _map_error(
    M, N, ref: Reference, length: int, budget: Optional[float] = None, radius: Optional[Callable[[], float]] = None
) -> tuple[float, float]:
    """``(relative error, spectral radius)`` of the map's impulse response against ``ref``.

    When the reference response is cached its scale is known up front, so with a
    ``budget`` the comparison stops at the first block whose error already exceeds
    it (the error returned is then a lower bound, above the budget) and the
    spectral radius (an eigenvalue problem) is computed only for a map that meets
    the budget: failing candidates cost a fraction of a full measurement.
    ``radius`` computes it without an eigenvalue problem of the map (:func:`map_radius`).
    """

    def spectral():
        return radius() if radius is not None else lti.spectral_radius(M)

    if ref.stride > 1:
        return _sampled_error(M, N, ref, length, budget, spectral)
    H = ref.response(length)
    scale = float(np.max(np.abs(H))) if H is not None else 0.0
    early = budget is not None and H is not None and scale > 0
    if not early:
        rho = spectral()
        if not _stable(rho, ref):
            return math.inf, rho
    worst, blk = 0.0, (REF_BLOCK if H is not None else 512)
    with np.errstate(over="ignore", invalid="ignore"):
        for (s0, a), (s1, b) in zip(lti.iter_impulse_response(M, N, length, blk), ref.blocks(length, blk), strict=True):
            assert s0 == s1 and a.shape == b.shape
            d = np.max(np.abs(a - b))
            if not np.isfinite(d):
                return math.inf, (math.nan if early else rho)
            worst = max(worst, float(d))
            if H is None:
                scale = max(scale, float(np.max(np.abs(b))))
            elif early and budget is not None and worst > budget * scale:
                return worst / scale, math.nan
    if early:
        rho = spectral()
        if not _stable(rho, ref):
            return math.inf, rho
    return (worst / scale if scale > 0 else worst), rho


#: a sampled measurement (stride > 1) measures the first steps at every step (where the stiff modes the
#: realizations get wrong have not yet decayed) ...
SAMPLE_HEAD = 1024
#: ... then every stride-th step, and again at every step around the largest sampled errors (this many)
SAMPLE_REFINE = 4


def _head(length: int, stride: int) -> int:
    """How many first steps a measurement with ``stride`` compares at every step."""
    return min(length, max(1, SAMPLE_HEAD)) if stride > 1 else length


def _sample_steps(length: int, stride: int, block: int = 512):
    """The steps a measurement with ``stride`` compares, in blocks of at most ``block``."""
    head = _head(length, stride)
    for s0 in range(0, head, block):
        yield np.arange(s0, min(head, s0 + block))
    tail = np.arange(head, length, stride)
    for s0 in range(0, tail.size, block):
        yield tail[s0 : s0 + block]


def _sampled(M, N, length: int, stride: int, block: int = 512):
    """``(steps, H_block)``: the impulse response of ``(M, N)`` at the steps of :func:`_sample_steps`,
    the sampled part by powers of ``M^stride`` (binary powering, one product per block after the first)."""
    head = _head(length, stride)
    last = None
    for s0, blk in lti.iter_impulse_response(M, N, head, block):
        yield np.arange(s0, s0 + blk.shape[1]), blk
        last = blk[:, -1]
    n = len(range(head, length, stride))
    if n == 0 or last is None:
        return
    Mt = np.linalg.matrix_power(np.asarray(M, dtype=np.float64), stride)
    for s0, blk in lti.iter_impulse_response(Mt, M @ last, n, block):
        yield head + stride * np.arange(s0, s0 + blk.shape[1]), blk


def _sampled_error(M, N, ref: "Reference", length: int, budget, spectral) -> tuple[float, float]:
    """:func:`_map_error` with ``ref.stride > 1``: the error at every step of the first
    :data:`SAMPLE_HEAD`, at every ``stride``-th step after them, and at every step between the
    neighbours of the :data:`SAMPLE_REFINE` largest sampled errors (one per block of samples). The
    scale is the largest reference value at the sampled steps. Never larger than the error at every step
    (it is a maximum over a subset, relative to :meth:`Reference.sampled_scale`, itself no larger than
    the scale at every step); ``tests/test_fold.py`` checks it against the full comparison."""
    early = budget is not None and ref._sampled is not None
    scale = ref.sampled_scale(length) if early else 0.0
    early = early and scale > 0
    if not early:
        rho = spectral()
        if not _stable(rho, ref):
            return math.inf, rho
    worst, head = 0.0, _head(length, ref.stride)
    peaks: list = []  # (error, previous step, candidate and reference there, step of the peak)
    prev = None
    with np.errstate(over="ignore", invalid="ignore"):
        for (st, a), (st2, b) in zip(_sampled(M, N, length, ref.stride), ref.sampled(length), strict=True):
            assert a.shape == b.shape and st[0] == st2[0]
            e = np.max(np.abs(a - b), axis=0)
            if not np.all(np.isfinite(e)):
                return math.inf, (math.nan if early else rho)
            worst = max(worst, float(np.max(e)))
            if early and budget is not None and worst > budget * scale:
                return worst / scale, math.nan
            j = int(np.argmax(e))
            if st[j] >= head:  # a sampled step: its neighbourhood is measured at every step below
                before = (st[j - 1], a[:, j - 1], b[:, j - 1]) if j else prev
                peaks = sorted(peaks + [(float(e[j]), before)], key=lambda x: -x[0])[:SAMPLE_REFINE]
            prev = (st[-1], a[:, -1], b[:, -1])
        for _, (k, va, vb) in peaks:
            for step in range(int(k) + 1, min(int(k) + 2 * ref.stride, length)):
                va, vb = M @ va, ref.advance(vb, step)
                worst = max(worst, float(np.max(np.abs(va - vb))))
    if not np.isfinite(worst):
        return math.inf, math.nan
    scale = ref.sampled_scale(length)
    if early:
        rho = spectral()
        if not _stable(rho, ref):
            return math.inf, rho
    return (worst / scale if scale > 0 else worst), rho


def _fir_error(kernel: np.ndarray, ref: Reference, length: int) -> float:
    worst, scale = 0.0, 0.0
    q, K = kernel.shape
    for start, b in ref.blocks(length):
        n = b.shape[1]
        a = np.zeros_like(b)
        if start < K:
            part = kernel[:, start : start + n]
            a[:, : part.shape[1]] = part
        worst = max(worst, float(np.max(np.abs(a - b))))
        scale = max(scale, float(np.max(np.abs(b))))
    return worst / scale if scale > 0 else worst


def measure(layer: ir.LMU, name: str, memory, ref: Reference, budget: float) -> Candidate:
    """The realization ``memory`` (named ``name``) of ``layer`` measured against ``ref``: its error, cost,
    storage and spectral radius, and whether it is within ``budget`` and stable."""
    q, d = layer.order, layer.memory_d
    if isinstance(memory, ir.FIR):
        K = memory.kernel.shape[1]
        length = ref.length if ref.kernel is not None else max(ref.length, 2 * K)
        err = _fir_error(np.asarray(memory.kernel, dtype=np.float64), ref, length)
        rho, (ops, coeffs), state = 0.0, lti.fir_cost(q, K), K * d
    else:
        length = ref.length
        if isinstance(memory, ir.DenseSS):
            M, N = memory.Abar, memory.Bbar
            ops, coeffs = lti.dense_cost(q)
        elif isinstance(memory, ir.Pade):
            M, N = pade.pade_map(q, layer.theta, memory.orders, memory.substeps)
            ops, coeffs = pade.pade_cost(q, memory.orders, memory.substeps)
        else:
            M, N = lti.rk_map(q, layer.theta, memory.rk_order, memory.substeps)
            ops, coeffs = lti.rk_cost(q, memory.rk_order, memory.substeps)
        err, rho = _map_error(M, N, ref, length, budget, radius=lambda: map_radius(memory, ref.eig_a))
        state = q * d
    meas = ir.Measurement(
        error=float(err),
        horizon=int(length),
        reference=ref.what,
        ops_per_step=int(ops * d),
        coeffs_stored=int(coeffs),
        state_size=int(state),
        spectral_radius=float(rho),
    )
    return Candidate(name, memory, meas, ok=bool(err <= budget and _stable(rho, ref)))
