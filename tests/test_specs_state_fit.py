"""Specifications of how the quantizer fits an LMU state into its width, over the memories' input domain
(``_quantization_memory.dense_memory`` and ``pade_memory`` called directly), which the generated mutants of
lmu_edge/_quantization_memory.py found unchecked (docs/testing.md, "Generated mutants"): the state's
fractional bits are the most for which the proven bound fits, where the bound counts the rounding noise
through the memory's noise gain."""

import warnings

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lmu_edge import ir, lti
from lmu_edge._quantization_memory import Calibrated, dense_memory, l1_gains, pade_memory
from lmu_edge.errors import QuantizationError
from lmu_edge.fixedpoint import FixedType

HORIZON = 200


def _quiet(f, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an unstable memory's gains overflow float64 on the way to "no bound"
        return f(*args)


@settings(max_examples=25)  # each example quantizes a memory: 25 keep the module near 1 s
@given(
    q=st.integers(1, 12),
    theta=st.floats(1.2, 60.0),
    disc=st.sampled_from(["zoh", "euler"]),
    bits=st.sampled_from([8, 16]),
    u=st.sampled_from([(8, 7), (8, 3), (16, 12)]),
)
@example(q=3, theta=45.0, disc="euler", bits=8, u=(8, 7))  # noise gain 47: a third of the 8-bit range
@example(q=4, theta=8.0, disc="euler", bits=8, u=(16, 12))
def test_a_dense_state_takes_the_most_fractional_bits_its_proven_bound_fits(q, theta, disc, bits, u):
    """Spec (dense state space, 8- and 16-bit states): with G the input gain and N the noise gain of the
    quantized memory (rounded coefficients and B), U the input's largest value and half an LSB of rounding
    per step, the proven bound G U 2^f + N / 2 (in LSB, what the quantizer returns) is at most the state's
    max_int, and f + 1 would not fit even with the 2-LSB margin the fit keeps: 2 G U 2^f + N / 2 + 2 > max_int
    (up to the fit's 1e-6 relative guard)."""
    A, B = lti.legendre_discrete(q, theta, disc)
    ut = FixedType(*u)
    cal = Calibrated(1.0)
    try:
        node, f, bound, _, _ = _quiet(dense_memory, ir.DenseSS(disc, A, B), q, theta, bits, 16, ut, HORIZON, [], cal)
    except QuantizationError:
        assert disc == "euler"  # Euler on a short window is unstable, and refused
        return
    if not cal.proven:
        return  # no bound exists (a memory too noisy for its state): the calibrated range, specified elsewhere
    Aq = node.coeffs * 2.0**-node.coeff_frac + (np.eye(q) if node.form == "delta" else 0)
    G, N = _quiet(l1_gains, Aq, node.B * 2.0**-node.b_frac, HORIZON)
    max_int = 2 ** (bits - 1) - 1
    assert np.isclose(bound * 2.0**f, G * ut.max * 2.0**f + N / 2, rtol=1e-12)
    assert G * ut.max * 2.0**f + N / 2 <= max_int
    assert 2 * G * ut.max * 2.0**f * (1 + 2e-6) + N / 2 + 2 > max_int


@settings(max_examples=25)
@given(
    q=st.integers(2, 10),
    theta=st.floats(3.0, 40.0),
    orders=st.sampled_from(ir.Pade.ORDERS),
    substeps=st.integers(1, 4),
    bits=st.sampled_from([8, 16, 32]),
)
@example(q=6, theta=30.0, orders=(3, 4), substeps=3, bits=8)  # fm 2: most of the bound is rounding noise
@example(q=3, theta=30.0, orders=(3, 4), substeps=3, bits=8)
def test_a_pade_state_bound_counts_its_rounding_noise_and_fits(q, theta, orders, substeps, bits):
    """Spec (the implicit Pade step): the returned bound, in LSB, is the input's share G U 2^f plus the
    rounding noise the step's noise gain carries (at least the state's own half an LSB per substep through
    N >= 1 of the identity), it fits the state, and the state's scale is the finest that holds it: one more
    fractional bit would not fit (max_int / 2 < bound <= max_int)."""
    ut = FixedType(8, 7)
    cal = Calibrated(1.0)
    node, f, bound, _, _ = _quiet(pade_memory, ir.Pade(*orders, substeps), q, theta, bits, ut, HORIZON, [], cal)
    if not cal.proven:
        return
    max_int = 2 ** (bits - 1) - 1
    lsb = bound * 2.0**f
    assert max_int / 2 < lsb <= max_int
    G_share = lsb - _input_share(node, q, theta, orders, substeps, ut, f)
    assert G_share >= substeps / 2  # the noise term: at least half an LSB per substep through a gain >= 1


def _input_share(node, q, theta, orders, substeps, ut, f) -> float:
    """G U 2^f: the quantized step's input gain (its constants as stored) times the input's largest value."""
    from lmu_edge import pade

    back = {
        n: (getattr(node, n)[..., 0] + 1j * getattr(node, n)[..., 1]) * 2.0 ** -getattr(node, f"{n}_frac")
        for n in ("gc", "w", "inv", "coef")
    }
    back["k"] = node.k * 2.0**-node.k_frac
    M, N = pade.constants_map(back, q, substeps)
    G, _ = _quiet(l1_gains, M, N, HORIZON)
    return G * ut.max * 2.0**f


def test_a_state_no_input_reaches_takes_the_fraction_of_a_unit_range():
    """Spec (``fit_state``): with no input gain (G U = 0) the state stays at zero and any scale holds it; it
    takes bits - 1 fractional bits (an integer: the range [-1, 1)), proven."""
    from lmu_edge._quantization_memory import fit_state

    for bits in (8, 16, 32):
        cal = Calibrated(0.0)
        f = fit_state(0.0, 1.0, 1.0, bits, cal, noise_lsb=0.5)
        assert type(f) is int and f == bits - 1 and cal.proven
