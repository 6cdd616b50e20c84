"""More quantizer specifications the generated mutants of lmu_edge/quantization.py found unchecked
(docs/testing.md, "Generated mutants"): the int16 view of the state at states of negative fractional bits,
and a widening target met exactly; the memory quantizer's gains and coefficient fractions."""

import warnings
from fractions import Fraction

import numpy as np
import pytest
from graphs import chain
from hypothesis import example, given, settings
from hypothesis import strategies as st

import lmu_edge
from lmu_edge import ir, qir


@pytest.mark.parametrize("scale, bits", [(1.0, 16), (1e3, 8), (1e5, 16)])
def test_the_int16_view_of_the_state_covers_its_bound_up_to_eight_times_calibration(scale, bits):
    """Spec (int16x8): z, the int16 view of the LMU state, spans at least the least of the state's bound, its
    range ``(2^(bits-1) - 1) 2^-frac`` and 8 times its calibrated peak; also where inputs far past 1 give
    the state negative fractional bits (an LSB of 2^8 and more)."""
    rng = np.random.default_rng(13)
    g = lmu_edge.fold(chain(rng, q=6, theta=10.0))
    x = rng.standard_normal((2, 40, 2)) * scale
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qg = lmu_edge.quantize(g, x, activation_bits=16, state_bits=bits)
    ql = next(layer for layer in qg.layers if isinstance(layer, qir.QLMU))
    info = next(layer for layer in qg.metadata["quantization"]["layers"] if layer["type"] == "lmu")
    assert (ql.state_type.frac < 0) == (scale > 1)  # the premise
    state_range = (2 ** (bits - 1) - 1) * 2.0**-ql.state_type.frac
    cover = min(ql.state_bound, state_range, 8 * info["calibrated_state_max"])
    assert ql.z_scale * 32767 >= cover * (1 - 1e-9)


def test_a_widening_target_met_exactly_changes_nothing():
    """Spec (``widen_db``): widening is for a graph below the target; one whose SQNR on the calibration data
    equals it keeps its weights, activations and state as they are."""
    rng = np.random.default_rng(12)
    g = lmu_edge.fold(chain(rng, q=6, theta=10.0))
    x = rng.standard_normal((2, 40, 2))
    plain = lmu_edge.quantize(g, x, activation_bits=16).metadata["quantization"]
    met = lmu_edge.quantize(g, x, activation_bits=16, widen_db=plain["calibration_sqnr_db"]).metadata["quantization"]
    assert met["state_bits"] == plain["state_bits"] == 16
    assert not met.get("widened") and met["calibration_sqnr_db"] == plain["calibration_sqnr_db"]


@pytest.mark.parametrize("q, horizon, exact", [(4, 64, True), (400, 64, False)])
def test_l1_gains_sum_the_noise_exactly_up_to_q3_horizon_4e9_and_bound_it_past(q, horizon, exact):
    """Spec (``_quantization_memory.l1_gains``): the input gain is max_i sum_k |(A^k B)_i|; the noise gain
    max_i sum_k ||row_i A^k||_1 is summed exactly while q^3 horizon <= 4e9 (q = 4: 4096) and past that
    (q = 400: 4.1e9) bounded by sqrt(q) times the input gain over max|B|. With A = I/2 and B = 1 both sums
    are 2 exactly, and the bound 2 sqrt(q). (The boundary itself costs 8e9 flops to sum: not run.)"""
    from lmu_edge._quantization_memory import l1_gains

    g, n = l1_gains(np.eye(q) / 2, np.ones(q), horizon)
    assert g == pytest.approx(2.0, rel=1e-9)
    assert n == pytest.approx(2.0 if exact else 2 * np.sqrt(q), rel=1e-9)


def test_a_widened_state_is_recorded_at_the_width_it_has():
    """Spec (``widen_db`` past what 16-bit states reach): the state is widened to 32 bits, and the metadata's
    ``widened_state_bits`` and ``state_bits`` name the width the LMU's state type has."""
    rng = np.random.default_rng(15)
    g = lmu_edge.fold(chain(rng, q=8, theta=60.0))
    x = rng.standard_normal((2, 200, 2))
    qg = lmu_edge.quantize(g, x, activation_bits=16, widen_db=90.0)
    info = qg.metadata["quantization"]
    widths = {layer.state_type.width for layer in qg.layers if isinstance(layer, qir.QLMU)}
    assert info["widened_state_bits"] == info["state_bits"] == 32 and widths == {32}
    assert info["state_bits_sqnr_db"]["32"] > info["state_bits_sqnr_db"]["16"]


def test_an_int16_output_converted_to_int8_takes_the_calibrated_range():
    """Spec (an int8 graph with a 16-bit last layer): the conversion back to int8 gets the int8 scale of the
    float output's calibrated range, 0 included ((hi - lo) / 255), and the multiplier from the int16 scale to
    it, within 2^-31 relative."""
    rng = np.random.default_rng(14)
    g = lmu_edge.fold(chain(rng, q=4, theta=6.0))
    x = rng.standard_normal((2, 30, 2))
    qg = lmu_edge.quantize(g, x, wide_layers=[g.layers[-1].name])
    assert isinstance(qg.layers[-1], qir.QConvert) and qg.layers[-1].bits == 8
    before, conv = qg.layers[-2], qg.layers[-1]
    y = lmu_edge.simulate(g, x)
    lo, hi = min(float(y.min()), 0.0), max(float(y.max()), 0.0)
    assert conv.out_scale == pytest.approx((hi - lo) / 255, rel=1e-9)
    real = before.out_scale / conv.out_scale
    assert abs(conv.multiplier * 2.0 ** (conv.shift - 31) - real) <= real * 2.0**-31
    # and into the 16-bit layer the conversion is exact, (x - zp) 128: the graph tracks the float one (36.9 dB)
    from lmu_edge.metrics import sqnr_db

    assert sqnr_db(lmu_edge.simulate(qg, x), y) > 33.0


def test_a_fir_memory_error_is_its_stored_taps_relative_error():
    """Spec: a FIR memory's recorded ``memory_error`` is max |Kq 2^-frac - K| / max |K| over its stored taps
    Kq against the float kernel K: at most half an LSB over the peak."""
    rng = np.random.default_rng(16)
    g = lmu_edge.fold(chain(rng, q=6, theta=10.0), "fir")
    x = rng.standard_normal((2, 40, 2))
    qg = lmu_edge.quantize(g, x)
    K = np.asarray(next(layer for layer in g.layers if hasattr(layer, "memory")).memory.kernel, np.float64)
    mem = next(layer for layer in qg.layers if isinstance(layer, qir.QLMU)).memory
    info = next(layer for layer in qg.metadata["quantization"]["layers"] if layer["type"] == "lmu")
    want = np.max(np.abs(mem.kernel * 2.0**-mem.kernel_frac - K)) / np.max(np.abs(K))
    assert info["memory_error"] == pytest.approx(want, rel=1e-12, abs=0)
    assert 0 < want <= 2.0 ** -(mem.kernel_frac + 1) / np.max(np.abs(K))


@pytest.mark.parametrize("bits", [4, 8])
def test_gptq_keeping_peaks_puts_each_channels_largest_weight_at_qmax_steps(bits):
    """Spec (``rounding.gptq(..., keep_peaks=True)``, what TFLite's converter needs): every stored weight is an
    integer number of its channel's chosen scale within +-qmax, and each channel's largest stored weight is
    exactly qmax of them, so max |Q| / qmax gives the scale back."""
    from lmu_edge.rounding import gptq

    rng = np.random.default_rng(17)
    W = rng.standard_normal((12, 5))
    x = rng.standard_normal((200, 12)) + 0.3
    Q, scale = gptq(W, (x.T @ x, x.sum(axis=0), len(x)), bits, True, keep_peaks=True)
    qmax = 2 ** (bits - 1) - 1
    steps = Q / scale
    assert np.all(np.abs(steps - np.round(steps)) < 1e-9) and np.abs(np.round(steps)).max() <= qmax
    assert np.allclose(np.abs(Q).max(axis=0), qmax * scale, rtol=1e-12, atol=0)


def test_a_memory_no_input_reaches_has_zero_input_gain_and_a_finite_noise_gain():
    """Spec: with B = 0 the input gain is 0 and the noise gain finite: summed, it does not depend on B (q = 4:
    2 for A = I/2); bounded from the input gain (q = 400), it is that bound over max|B| taken as at least
    1e-30 (0, never 0 / 0)."""
    from lmu_edge._quantization_memory import l1_gains

    assert l1_gains(np.eye(4) / 2, np.zeros(4), 64) == (0.0, pytest.approx(2.0, rel=1e-9))
    assert l1_gains(np.eye(400) / 2, np.zeros(400), 64) == (0.0, 0.0)


@settings(max_examples=200)
@given(
    peak=st.floats(min_value=2.0**-40, max_value=2.0**20, allow_subnormal=False),
    bits=st.integers(min_value=8, max_value=32),
)
@example(peak=1.0, bits=16)
@example(peak=0.0, bits=16)
@example(peak=0.0, bits=32)
def test_coeff_frac_is_the_most_fractional_bits_that_fit(peak, bits):
    """Spec (``_quantization_memory.coeff_frac``): for a matrix of peak |c| > 0, the largest f with
    |c| 2^f <= 2^(bits-1) - 1 (so f + 1 overflows); for an all-zero matrix, which any f stores exactly,
    bits - 2 (the f of a peak in [1, 2))."""
    from lmu_edge._quantization_memory import coeff_frac

    C = np.array([[peak, -peak / 3], [0.0, peak / 7]])
    f = coeff_frac(C, bits)
    qmax = 2 ** (bits - 1) - 1
    if peak == 0:
        assert f == bits - 2
    else:
        assert Fraction(peak) * Fraction(2) ** f <= qmax < Fraction(peak) * Fraction(2) ** (f + 1)


@pytest.mark.parametrize("bits", [8, 16, 24, 32])
def test_rk_coefficients_take_the_bits_the_64_bit_sum_leaves(bits):
    """Spec (Runge-Kutta memories): the substeps run with guard = max(0, min(8, 24 - bits)) extra fractional
    bits; a sum of q + 1 products of a (bits + guard)-bit working value by a coefficient must fit 62 bits with
    3 to spare, so the coefficients are stored in hb = min(31, 62 - (bits + guard + ceil(log2(q + 1)) + 3))
    bits, at the most fractional bits that fit (one more would pass 2^(hb-1) - 1)."""
    rng = np.random.default_rng(19)
    q = 6
    g = lmu_edge.fold(chain(rng, q=q, theta=10.0), "rk4", substeps=2, error_budget=1e-2)
    x = rng.standard_normal((2, 40, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an 8-bit state is far from the float model: not checked here
        qg = lmu_edge.quantize(g, x, state_bits=bits)
    mem = next(layer for layer in qg.layers if isinstance(layer, qir.QLMU)).memory
    guard = max(0, min(8, 24 - bits))
    hb = min(31, 62 - (bits + guard + int(np.ceil(np.log2(q + 1))) + 3))
    top = int(np.max(np.abs(np.asarray(mem.hc, np.int64))))
    assert mem.guard == guard and top <= 2 ** (hb - 1) - 1 < 2 * top + 1


def test_the_widening_targets_are_the_ones_the_cli_docs_state():
    """Spec (docs/cli.md, ``--quantize int8``): where 8 bits cannot carry the model, c widens to 33 dB and
    onnx and tflite to 36 dB on the calibration data, by default."""
    from pathlib import Path

    from lmu_edge.targets import c, onnx, tflite

    docs = " ".join((Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text().split())
    assert "lift it to 33 dB on the calibration data, onnx the fewest tensors and tflite" in docs
    assert "the fewest operators that lift it to 36 dB" in docs
    assert c.OPTIONS["widen_db"] == "auto" and c.WIDEN_DB["int8"] == 33.0
    assert onnx.OPTIONS["widen_db"] == 36.0 and tflite.OPTIONS["widen_db"] == 36.0


def test_an_int16_softmax_that_takes_all_the_mass_gives_32767():
    """Spec (the int16 softmax, integer reference): each output is 32768 e_i / sum e rounded and clipped to
    [0, 32767]; a class that takes all the mass (its logit far above the others) gives 32767, never 32768,
    which int16 cannot hold."""
    from lmu_edge import intsim

    rng = np.random.default_rng(21)
    dense = ir.Dense("d", np.array([[40.0, -40.0, 0.0]]), np.zeros(3), "softmax")
    g = ir.Graph("s", input_features=1, seq_len=None, layers=(dense,))
    x = np.linspace(-1.0, 1.0, 50).reshape(1, 50, 1) + 0.01 * rng.standard_normal((1, 50, 1))
    qg = lmu_edge.quantize(g, x, activation_bits=16)
    y = intsim.run_int(qg, intsim.quantize_input(qg, x))
    assert y.min() >= 0 and y.max() == 32767


@pytest.mark.parametrize("bits, most", [(8, 0.03), (16, 0.005)])
def test_a_quantized_softmax_tracks_the_float_one(bits, most):
    """Spec: a softmax Dense layer quantized at 8 or 16 bits gives each probability within a few of its LSB
    (1/256, 1/32768) of the float softmax (measured 0.020 and 0.0021 here; bounds 0.03 and 0.005)."""
    rng = np.random.default_rng(22)
    dense = ir.Dense("d", rng.standard_normal((2, 5)) * 2, rng.standard_normal(5) * 0.1, "softmax")
    g = ir.Graph("s", input_features=2, seq_len=None, layers=(dense,))
    x = rng.standard_normal((2, 40, 2))
    got = lmu_edge.simulate(lmu_edge.quantize(g, x, activation_bits=bits), x)
    assert np.abs(got - lmu_edge.simulate(g, x)).max() <= most


@pytest.mark.parametrize("bits", [4, 8, 16])
def test_per_channel_with_a_given_scale_clips_at_qmax_and_never_wraps(bits):
    """Spec (``rounding.per_channel``): weights are rounded to their channel's scale and clipped to +-qmax,
    qmax = 2^(bits-1) - 1, stored as int8 (int16 past 8 bits) exactly: a scale too fine for the weights
    (GPTQ's candidates below 1 clip) gives +-qmax, never a value wrapped by the integer type."""
    from lmu_edge.rounding import per_channel

    qmax = 2 ** (bits - 1) - 1
    W = np.array([[1.0, -1.0], [0.25, -0.5]])
    Wq, s = per_channel(W, bits, scale=np.array([1.0, 1.0]) / (4 * qmax))  # W / s up to 4 qmax
    assert np.array_equal(Wq.astype(np.int64), np.clip(np.round(W / s), -qmax, qmax).astype(np.int64))
    assert Wq.max() == qmax and Wq.min() == -qmax


def test_l1_gains_close_a_geometric_tail_exactly():
    """Spec (``l1_gains``): once a block adds less than 1e-6 of the total, the rest is bounded by a geometric
    tail with the block's own decay ratio (the block sum over the one before); for A = 0.99 I that tail is
    exact, so both gains are 1 / (1 - 0.99) = 100 to 1e-9."""
    from lmu_edge._quantization_memory import l1_gains

    g, n = l1_gains(0.99 * np.eye(4), np.ones(4), 64)
    assert g == pytest.approx(100.0, rel=1e-9) and n == pytest.approx(100.0, rel=1e-9)
