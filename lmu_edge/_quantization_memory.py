"""The LMU memory's fixed-point types, for :mod:`lmu_edge.quantization`: per realization (dense state
space, Runge-Kutta, Pade, FIR) the coefficients' and the state's fractional bits, the state's fractional
bits from its proven bound (:func:`l1_gains`, :func:`fit_state`), and the impulse-response error the
rounding costs. Each ``*_memory`` function returns ``(quantized memory, state fractional bits, bound,
impulse-response error, spectral radius)`` and appends what it chose to ``notes``."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from . import ir, lti, qir
from .errors import QuantizationError

#: a gain past this is no bound (the state would need more than 100 integer bits): the sum stops there
DIVERGED = 1e30


def l1_gains(Aq: np.ndarray, Bq: np.ndarray, horizon: int, with_noise: bool = True) -> tuple:
    """``(max_i sum_k |(Aq^k Bq)_i|, max_i sum_k ||row_i Aq^k||_1)`` summed until the terms vanish.

    Summation runs over at least ``horizon`` steps and stops once a block adds less than 1e-9 of the
    total; the remainder is bounded by a geometric tail with the block's own decay ratio."""
    q = Aq.shape[0]
    g = np.zeros(q)
    n = np.zeros(q)
    v = np.asarray(Bq, np.float64).copy()
    P = np.eye(q)
    do_noise = with_noise and q**3 * horizon <= 4e9
    k, block, last_blk = 0, 256, None
    limit = max(horizon, 64) * 60
    while k < limit:
        blk_g = np.zeros(q)
        blk_n = np.zeros(q)
        for _ in range(block):
            blk_g += np.abs(v)
            v = Aq @ v
            if do_noise:
                blk_n += np.abs(P).sum(axis=1)
                P = Aq @ P
        g += blk_g
        n += blk_n
        k += block
        total = g.max() + n.max()
        if not total < DIVERGED:
            # the powers grow without bound (a spectral radius >= 1, e.g. Euler on a short window): no
            # bound exists for every input; fit_state falls back to the calibrated range
            return math.inf, math.inf
        if k >= horizon and last_blk is not None:
            now = blk_g.max() + blk_n.max()
            if now <= 1e-9 * total:
                break
            ratio = now / last_blk if last_blk > 0 else 0.0
            if ratio < 1 and now <= 1e-6 * total:
                g += blk_g * ratio / (1 - ratio)
                n += blk_n * ratio / (1 - ratio)
                break
        last_blk = blk_g.max() + blk_n.max()
    if not do_noise:
        # too large to sum exactly: bound ||row_i Aq^k||_1 by sqrt(q) times the l2 norm of the power,
        # itself bounded through the response of Bq's direction (documented approximation)
        n = np.full(q, g.max() / max(np.abs(Bq).max(), 1e-30) * math.sqrt(q))
    return float(g.max()), float(n.max())


@dataclass
class Calibrated:
    """What one LMU layer's calibration says of its state, for the case no bound can be proven:
    ``m_abs`` the calibrated max |m|; ``proven`` turns False when :func:`fit_state` had to fall back to it;
    ``measured``: size the state by ``m_abs`` even where a bound can be proven (the int8 widening search's
    16-bit state before a 32-bit one, :func:`lmu_edge.widening.search`)."""

    m_abs: float
    proven: bool = True
    measured: bool = False


def fit_state(G, N, U, bits, cal: Calibrated, noise_lsb=1.0):
    """Largest fractional bits f with ``G*U*2^f + N*noise_lsb <= max_int`` (so no saturation).

    When no f can satisfy it (a state too narrow for its rounding noise, e.g. 8 bits for a long
    window), fall back to the calibrated range with 25% headroom and record that the bound is
    not proven: the state may saturate, and the report says so. ``cal.measured`` takes the calibrated range
    wherever it gives more bits than the proven bound."""
    max_int = (1 << (bits - 1)) - 1
    room = max_int - N * noise_lsb - 2
    proven = None
    if room > 0 and G * U < DIVERGED:
        proven = bits - 1 if G * U <= 0 else int(math.floor(math.log2(room / (G * U * (1 + 1e-6)))))
    measured = int(math.floor(math.log2(max_int / (1.25 * max(cal.m_abs, 1e-12)))))
    if proven is not None and (not cal.measured or proven >= measured):
        return proven
    cal.proven = False
    return measured


def ir_error(Aq, Bq, Abar, Bbar, horizon):
    """The largest deviation of the quantized impulse response ``(Aq, Bq)`` from the float one over
    ``horizon`` steps, relative to the float one's largest entry."""
    errs, scale = 0.0, 0.0
    pairs = zip(lti.iter_impulse_response(Aq, Bq, horizon), lti.iter_impulse_response(Abar, Bbar, horizon), strict=True)
    for (_, a), (_, b) in pairs:
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            break  # a response growing past float64 (an unstable memory): the error relative so far
        errs = max(errs, float(np.max(np.abs(a - b))))
        scale = max(scale, float(np.max(np.abs(b))))
    return errs / scale if scale else errs


def coeff_frac(C, bits):
    """The most fractional bits with which every entry of ``C`` fits a signed ``bits``-bit integer."""
    m = float(np.max(np.abs(C)))
    return (bits - 2) if m == 0 else int(math.floor(math.log2(((1 << (bits - 1)) - 1) / m)))


def euler_window_form(Abar, Bbar, q, theta, coeff_bits, rho_f, horizon, notes):
    """The delta form of an Euler memory ``Abar = I + A/theta`` with its one parameter rounded: ``Cq = k L``
    with ``L`` the integer matrix ``theta A`` and ``k = floor(2^fc / theta)``, i.e. the exact Euler memory of the
    window ``theta' = 2^fc / k >= theta``. Rounding each entry moves the eigenvalues of this very non-normal
    matrix by far more than the rounding (order 879 at theta 61479: 2^-21 moved the spectral radius from 0.99992
    to 1.00025, 2^-37 still to 1.00006, and the response grew 1e14x over 5 theta); a window past the float's
    is stable wherever the float memory is (Euler is stable for every theta above its stable theta).
    ``None`` where ``Abar`` is no such memory, or where the rounded one fails the same stability rule."""
    L = lti.legendre_ab(q, 1.0)[0]  # (2i+1) * (+-1): integers
    C = Abar - np.eye(q)
    if np.max(np.abs(C - L / theta)) > 1e-12 * np.max(np.abs(L / theta)):
        return None
    top = (1 << (coeff_bits - 1)) - 1
    fc = coeff_frac(L / theta, coeff_bits)
    while (2 * q - 1) * math.floor(2.0 ** (fc + 1) / theta) <= top:
        fc += 1  # the floor may leave room for one more bit
    k = math.floor(2.0**fc / theta)
    if k < 1:
        return None
    Cq = k * L
    Aq = np.eye(q) + Cq * 2.0**-fc
    rho = lti.spectral_radius(Aq)
    err = ir_error(Aq, Bbar, Abar, Bbar, horizon)
    notes.append(
        f"euler window form: coefficients {k} x (2i+1) fixed<{coeff_bits},{fc}> (theta {2.0**fc / k:.6g}), "
        f"impulse-response error {err:.2e}, spectral radius {rho:.6f} (float {rho_f:.6f})"
    )
    if not (rho < 1 or rho <= rho_f):
        return None
    return (err, "delta", fc, Cq, Aq, rho)


def entrywise_forms(Abar, Bbar, q, coeff_bits, rho_f, horizon, notes):
    """The direct and the delta form with each coefficient rounded to ``coeff_bits``: the stable one (``rho < 1``
    or no worse than the float's) with the smaller impulse-response error, as ``(err, form, fc, Cq, Aq, rho)``,
    or ``None``. An unstable one is not measured (the response of a large memory over 5 theta costs seconds)."""
    best = None
    for form in ("delta", "direct"):
        C = Abar - np.eye(q) if form == "delta" else Abar
        fc = coeff_frac(C, coeff_bits)
        Cq = np.round(C * 2.0**fc)
        Aq = Cq * 2.0**-fc + (np.eye(q) if form == "delta" else 0)
        rho = lti.spectral_radius(Aq)
        stable = rho < 1 or rho <= rho_f
        err = ir_error(Aq, Bbar, Abar, Bbar, horizon) if stable else math.nan
        notes.append(
            f"{form} form: coefficients fixed<{coeff_bits},{fc}>, "
            + (f"impulse-response error {err:.2e}, " if stable else "unstable, not used, ")
            + f"spectral radius {rho:.6f} (float {rho_f:.6f})"
        )
        if stable and (best is None or err < best[0]):
            best = (err, form, fc, Cq, Aq, rho)
    return best


#: (the memory's matrices and the form's settings) -> what :func:`_dense_form` found; the widening search
#: quantizes the same memory once per candidate (16 times for the psMNIST-sized model of issue 54: 12 s at
#: order 468), and the form does not depend on what the candidates vary (widths, rounding, state sizing)
_FORMS: dict = {}
_FORMS_KEPT = 4


def _dense_form(Abar, Bbar, q, theta, coeff_bits, max_bits, horizon, notes):
    """``(bits, best, G, N, gains)`` for :func:`dense_memory`: the coefficients' form (see there), the
    quantized memory's L1 gains with the float ``Bbar``, and a dict for the gains with ``Bbar`` rounded
    (by its fractional bits); remembered for the last few memories, the notes replayed."""
    digest = [hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest() for a in (Abar, Bbar)]
    key = (*digest, Abar.shape, Bbar.shape, int(q), float(theta), int(coeff_bits), max_bits, int(horizon))
    hit = _FORMS.get(key)
    if hit is not None:
        notes.extend(hit[1])
        return hit[0]
    mine: list = []
    rho_f = lti.spectral_radius(Abar)
    bits = coeff_bits
    best = entrywise_forms(Abar, Bbar, q, bits, rho_f, horizon, mine)
    if best is None and max_bits is not None and max_bits > coeff_bits:
        bits = max_bits
        best = entrywise_forms(Abar, Bbar, q, bits, rho_f, horizon, mine)
    if best is None:
        best = euler_window_form(Abar, Bbar, q, theta, bits, rho_f, horizon, mine)
    notes.extend(mine)
    if best is None:
        raise QuantizationError(
            f"the quantized memory is unstable with {bits}-bit coefficients "
            f"(spectral radius >= 1); use more coefficient bits (coeff_bits=32), "
            f"a wider state (--state-bits 32) or the RK realization (--realization rk4)"
        )
    for a in best[3:5]:
        a.setflags(write=False)  # shared by every later quantization of this memory
    found = (bits, best, *l1_gains(best[4], Bbar, horizon), {})
    while len(_FORMS) >= _FORMS_KEPT:
        _FORMS.pop(next(iter(_FORMS)))
    _FORMS[key] = (found, tuple(mine))
    return found


def dense_memory(
    mem: ir.DenseSS, q, theta, st_bits, coeff_bits, u_type, horizon, notes, cal: Calibrated, max_bits=None
):
    """A dense state space (``Abar``, ``Bbar``): the direct or the delta form, whichever rounds to the
    smaller impulse-response error; the state's fractional bits from its proven bound.

    Where both roundings are unstable: with ``max_bits`` (the user set no coefficient width) both forms again
    at ``max_bits``; then an Euler memory's window form (:func:`euler_window_form`) at the widest bits."""
    Abar, Bbar = np.asarray(mem.Abar, np.float64), np.asarray(mem.Bbar, np.float64)
    bits, best, G, N, gains = _dense_form(Abar, Bbar, q, theta, coeff_bits, max_bits, horizon, notes)
    err, form, fc, Cq, Aq, rho = best
    fm = fit_state(G, N, u_type.max, st_bits, cal, noise_lsb=0.5)
    fb = fc + fm - u_type.frac
    while np.max(np.abs(Bbar)) * 2.0**fb >= 2**31 - 1:
        fb -= 1
        fm -= 1
    Bq = np.round(Bbar * 2.0**fb)
    if fb not in gains:  # the gains with the rounded Bbar: one per fb, kept with the form
        gains[fb] = l1_gains(Aq, Bq * 2.0**-fb, horizon)
    G, N = gains[fb]
    while cal.proven and G * u_type.max * 2.0**fm + 0.5 * N > (1 << (st_bits - 1)) - 1:
        fm -= 1
        fb -= 1
        Bq = np.round(Bbar * 2.0**fb)
    node = qir.QDenseMemory(form, Cq.astype(np.int32 if bits > 16 else np.int16), fc, bits, Bq.astype(np.int32), fb)
    return node, fm, G * u_type.max + 0.5 * N * 2.0**-fm, err, rho


def rk_memory(mem: ir.RungeKutta, q, theta, st_bits, u_type, horizon, notes, cal: Calibrated):
    """Runge-Kutta substeps of the LMU's structured system: the structure coefficients in fixed point,
    the state's bound counting the roundings of every stage."""
    c = lti.structure_coefficients(q, theta) / mem.substeps
    # the substeps run on the state with guard more fractional bits (a 24-bit working value for states of up
    # to 16 bits, none past 24) and round once per sample: rounded to the state's LSB at every substep, the
    # increments of many substeps drowned a 16-bit state in rounding noise
    guard = max(0, min(8, 24 - st_bits))
    hb = min(31, 62 - (st_bits + guard + int(math.ceil(math.log2(q + 1))) + 3))
    fh = coeff_frac(c, hb)
    hcq = np.round(c * 2.0**fh)
    M, N = lti.rk_map(q, theta, mem.rk_order, mem.substeps)  # (hc rounding is measured below)
    Mq, Nq = rk_map_coeffs(q, hcq * 2.0**-fh * mem.substeps, mem.rk_order, mem.substeps)
    err = ir_error(Mq, Nq, M, N, horizon)
    rho = lti.spectral_radius(Mq)
    G, Ngain = l1_gains(Mq, Nq, horizon)
    # roundings per sample: 2 r per substep of half a working LSB each, and the state's own half an LSB
    noise = mem.substeps * (2 * mem.rk_order) * 0.5 * 2.0**-guard + 0.5
    fm = fit_state(G, Ngain, u_type.max, st_bits, cal, noise_lsb=noise)
    notes.append(
        f"rk{mem.rk_order} x{mem.substeps}: coefficients fixed<{hb},{fh}>, {guard} guard bits, "
        f"impulse-response error {err:.2e}, "
        f"spectral radius {rho:.6f}"
    )
    return (
        qir.QRKMemory(mem.rk_order, mem.substeps, hcq.astype(np.int32), fh, guard),
        fm,
        G * u_type.max + Ngain * noise * 2.0**-fm,
        err,
        rho,
    )


def pade_memory(mem: ir.Pade, q, theta, st_bits, u_type, horizon, notes, cal: Calibrated):
    """The implicit Pade step in integers: constants, guard bits and every fraction from proven bounds.

    Work values (the solve's right-hand side, its running sums, the solution) carry ``guard`` more
    fractional bits than the state: 8 for states up to 16 bits (the forward substitution amplifies a
    rounding error by the l1 gain of ``L^{-1}``: without guard bits a 16-bit state drifts by thousands
    of LSBs), and a 24-bit work width beyond. Each constant gets the most fractional bits for which its
    product with its proven operand bound fits int64."""
    from . import pade

    s = mem.substeps
    consts = pade.step_constants(q, theta, mem.orders, s)
    M, N = pade.constants_map(consts, q, s)
    guard = 8 if st_bits <= 16 else 24 - st_bits
    a_max = 2 * q - 1
    P = len(consts["gc"])
    fm = None
    for _attempt in range(4):
        bounds1 = pade.int_bounds(q, consts, 1.0)  # per unit |b|: the noise estimate
        dx = [math.sqrt(2) * b["y"] / 2 for b in bounds1]  # one work LSB per element through L^{-1}
        noise = 0.5 + 2.0**-guard * (
            sum(
                abs(c) * (d + abs(iv) * math.sqrt(2) * b["sy"] / 2 * float(np.abs(w).max()) + 2)
                for c, d, iv, b, w in zip(consts["coef"], dx, consts["inv"], bounds1, consts["w"], strict=True)
            )
            + P
            + 1
        )
        noise_lsb = s * noise
        if fm is None:
            G, Ng = l1_gains(M, N, horizon)
            fm = fit_state(G, Ng, u_type.max, st_bits, cal, noise_lsb=noise_lsb)
        fw = fm + guard
        uw = u_type.max_int * 2.0 ** (fw - u_type.frac) + 1
        gmax = float(np.max(np.abs(np.stack([consts["gc"].real, consts["gc"].imag]))))
        bmax = 2.0 ** (st_bits - 1 + guard) + 2.0 ** max(guard, 0) + a_max * gmax / 2 * uw
        bd = pade.int_bounds(q, consts, bmax)
        S_b = max(b["S"] for b in bd)
        gc_frac = pade.frac_for(a_max * gmax, 2 * max(S_b, uw))
        inv_frac = pade.frac_for(
            float(np.max(np.abs(np.stack([consts["inv"].real, consts["inv"].imag])))), 2 * max(b["sy"] for b in bd)
        )
        t_b = max(b["sy"] * abs(iv) for b, iv in zip(bd, consts["inv"], strict=True)) * 2 + 2
        w_frac = pade.frac_for(float(np.max(np.abs(np.stack([consts["w"].real, consts["w"].imag])))), 2 * t_b)
        coef_frac = pade.frac_for(
            float(np.max(np.abs(np.stack([consts["coef"].real, consts["coef"].imag])))), 2 * max(b["x"] for b in bd)
        )
        k_frac = 30 if consts["k"] else 0

        def cplx(v, f):
            return np.stack([np.round(np.real(v) * 2.0**f), np.round(np.imag(v) * 2.0**f)], axis=-1).astype(np.int64)

        ints = {
            "gc": cplx(consts["gc"], gc_frac),
            "w": cplx(consts["w"], w_frac),
            "inv": cplx(consts["inv"], inv_frac),
            "coef": cplx(consts["coef"], coef_frac),
            "k": int(np.round(consts["k"] * 2.0**k_frac)),
        }

        def back(v, f):
            return (v[..., 0] + 1j * v[..., 1]) * 2.0**-f

        cq = {
            "k": ints["k"] * 2.0**-k_frac,
            "gc": back(ints["gc"], gc_frac),
            "w": back(ints["w"], w_frac),
            "inv": back(ints["inv"], inv_frac),
            "coef": back(ints["coef"], coef_frac),
        }
        Mq, Nq = pade.constants_map(cq, q, s)
        G, Ng = l1_gains(Mq, Nq, horizon)
        out_b = sum(abs(c) * b["x"] for c, b in zip(cq["coef"], bd, strict=True)) + 2.0 ** (st_bits + guard)
        fits = G * u_type.max * 2.0**fm + Ng * noise_lsb <= (1 << (st_bits - 1)) - 1
        if (fits or not cal.proven) and out_b < 2.0**61:
            break
        fm -= 1
    else:
        raise QuantizationError(
            f"the implicit 'pade' realization cannot be bounded in {st_bits}-bit integers "
            f"(order {q}, theta {theta:g}); use --realization rk4 or zoh"
        )
    err = ir_error(Mq, Nq, M, N, horizon)
    rho = lti.spectral_radius(Mq)
    notes.append(
        f"pade [{mem.num}/{mem.den}] x{s}: {guard} guard bits, fractions gc {gc_frac}, w {w_frac}, "
        f"inv {inv_frac}, coef {coef_frac}; impulse-response error {err:.2e}, spectral radius {rho:.6f}"
    )
    node = pade.QPadeMemory(
        mem.num,
        mem.den,
        s,
        guard,
        u_type.frac - fw,
        ints["gc"].astype(np.int32),
        gc_frac,
        ints["w"].astype(np.int32),
        w_frac,
        ints["inv"].astype(np.int32),
        inv_frac,
        ints["coef"].astype(np.int32),
        coef_frac,
        ints["k"],
        k_frac,
    )
    return node, fm, G * u_type.max + Ng * noise_lsb * 2.0**-fm, err, rho


def rk_map_coeffs(q, coeffs, r, s):
    """The one-sample map ``(M, N)`` of ``s`` order-``r`` Runge-Kutta substeps with the (rounded)
    structure coefficients ``coeffs``: ``m <- M m + N u``."""
    M = lti.rk_step(np.eye(q), np.zeros(q), 1.0, r, s, coeffs=coeffs).T
    N = lti.rk_step(np.zeros((1, q)), np.ones(1), 1.0, r, s, coeffs=coeffs)[0]
    return M, N


def fir_memory(mem: ir.FIR, q, st_bits, coeff_bits, u_type, notes, cal: Calibrated):
    """A truncated impulse response (FIR): the kernel in fixed point, the state bounded by its l1 norm."""
    K = np.asarray(mem.kernel, np.float64)
    L = K.shape[1]
    cb = min(coeff_bits, 62 - st_bits - int(math.ceil(math.log2(L + 1))))
    fk = coeff_frac(K, cb)
    Kq = np.round(K * 2.0**fk)
    G = float(np.max(np.abs(Kq).sum(axis=1))) * 2.0**-fk
    fm = fit_state(G, 1.0, u_type.max, st_bits, cal, noise_lsb=0.5)
    err = float(np.max(np.abs(Kq * 2.0**-fk - K)) / max(np.max(np.abs(K)), 1e-30))
    notes.append(f"fir {L}: coefficients fixed<{cb},{fk}>, kernel error {err:.2e}")
    node = qir.QFIRMemory(Kq.astype(np.int32 if cb > 16 else np.int16), fk, cb)
    return node, fm, G * u_type.max + 0.5 * 2.0**-fm, err, 0.0
