"""Issue 52, seed 23: an Euler memory past its stable theta whose rounded coefficients are unstable. Its matrix
``I + A/theta`` is so non-normal that rounding each entry moves its eigenvalues by far more than the rounding:
seed 23's order-879 memory (theta 61479, float spectral radius 0.99995) came out at 1.00025 with 16-bit
coefficients and still at 1.00006 with 32, and every C integer mode refused the model. Coefficients the user
left open now widen (enough here, at order 32), and an Euler memory whose widest rounding is still unstable
(seed 23) rounds its window instead: the exact Euler memory of a window ``theta' >= theta``."""

import numpy as np
import pytest
from graphs import chain

import lmu_edge
from lmu_edge import intsim, lti, qir
from lmu_edge._quantization_memory import coeff_frac, euler_window_form
from lmu_edge.metrics import sqnr_db

Q, THETA = 32, 198.8  # 1.01x past the stable theta of order 32 (196.85)


def _model():
    g = chain(np.random.default_rng(52), seq_len=40, q=Q, theta=THETA, disc="euler", hidden=None)
    x_cal = np.random.default_rng(1).uniform(-1, 1, (32, 40, 2))
    x_test = np.random.default_rng(2).uniform(-1, 1, (32, 40, 2))
    return g, lmu_edge.fold(g, "euler"), x_cal, x_test


def test_the_entrywise_roundings_of_this_memory_are_unstable():
    # the fault itself (what the old code refused on): neither form passes 'rho < 1 or rho <= rho_f'
    A, _ = lti.legendre_discrete(Q, THETA, "euler")
    assert THETA > lti.euler_stable_theta(Q)
    rho_f = lti.spectral_radius(A)
    assert rho_f < 1
    for C, delta in ((A - np.eye(Q), True), (A, False)):
        fc = coeff_frac(C, 16)
        Aq = np.round(C * 2.0**fc) * 2.0**-fc + (np.eye(Q) if delta else 0)
        assert lti.spectral_radius(Aq) > 1


@pytest.mark.parametrize(
    ("kw", "floor"),
    [({}, 30.0), ({"activation_bits": 16}, 45.0), ({"activation_bits": 16, "weight_bits": 16}, 45.0)],
)
def test_an_unstable_rounding_widens_the_coefficients_the_user_left_open(kw, floor):
    # before: QuantizationError "the quantized memory is unstable with 16-bit coefficients" in every mode;
    # 32-bit coefficients keep the float's spectral radius (measured 32.0, 50.1 dB int8, int16x8)
    g, f, x_cal, x_test = _model()
    qg = lmu_edge.quantize(f, x_cal, **kw)
    (ql,) = [lay for lay in qg.layers if isinstance(lay, qir.QLMU)]
    assert ql.memory.coeff_bits == 32 and ql.memory.coeffs.dtype == np.int32
    (info,) = [i for i in qg.metadata["quantization"]["layers"] if i["name"] == "lmu"]
    assert info["coeff_bits"] == 32 and info["spectral_radius"] < 1
    assert sqnr_db(lmu_edge.simulate(qg, x_test), lmu_edge.simulate(g, x_test)) >= floor


def test_pinned_coefficient_bits_round_the_euler_window_instead():
    # coeff_bits=16 given: no widening; the memory is the exact Euler memory of a window theta' >= theta
    _, f, x_cal, _ = _model()
    qg = lmu_edge.quantize(f, x_cal, coeff_bits=16)
    (ql,) = [lay for lay in qg.layers if isinstance(lay, qir.QLMU)]
    mem = ql.memory
    assert mem.form == "delta" and mem.coeff_bits == 16
    L = lti.legendre_ab(Q, 1.0)[0].astype(np.int64)  # (2i+1) * (+-1)
    k = -int(mem.coeffs[0, 0])
    assert k >= 1 and np.array_equal(np.asarray(mem.coeffs, np.int64), k * L)
    assert THETA <= 2.0**mem.coeff_frac / k < THETA * 1.01
    assert lti.spectral_radius(np.eye(Q) + k * L * 2.0**-mem.coeff_frac) < 1


def test_the_widened_memory_runs_bit_exact_in_c(tmp_path):
    g, f, x_cal, x_test = _model()
    art = lmu_edge.convert(
        f, "c", tmp_path / "c", quantize="int8", calibration=x_cal, measure=False, flash=False, accuracy_report=False
    )
    qg = lmu_edge.load(art.path / "quantized.lmu.npz")
    (ql,) = [lay for lay in qg.layers if isinstance(lay, qir.QLMU)]
    assert ql.memory.coeff_bits == 32
    xq = intsim.quantize_input(qg, x_test)
    y_c, _ = art.module.run_native(art, xq.astype(np.int8), "host")
    assert np.array_equal(y_c.astype(np.int64), intsim.run_int(qg, xq))
    assert sqnr_db(art.run(x_test), lmu_edge.simulate(g, x_test)) >= 30.0


def test_only_an_euler_memory_has_a_window_form():
    for method, some in (("euler", True), ("zoh", False)):
        A, B = lti.legendre_discrete(Q, THETA, method)
        notes: list = []
        got = euler_window_form(A, B, Q, THETA, 16, lti.spectral_radius(A), 64, notes)
        assert (got is not None) == some and len(notes) == int(some)
