"""Specifications of the quantizer's choices that the generated mutants of lmu_edge/quantization.py (since
split into qlinear.py and widening.py), lmu_edge/_quantization_memory.py and lmu_edge/rounding.py found
unchecked (docs/testing.md, "Generated mutants"): cosmic-ray changed an operator or a constant and the
covering tests still passed. Each test states the rule it checks and computes it from the rule, not from
the quantizer's own helpers."""

import math
import warnings

import numpy as np
import pytest
from graphs import chain
from hypothesis import given, settings
from hypothesis import strategies as st

import lmu_edge
from lmu_edge import ir, qir
from lmu_edge.errors import QuantizationError

ACTIVATIONS = ("linear", "relu", "tanh", "sigmoid", "softmax")


@pytest.mark.parametrize("bits", [8, 16])
def test_a_softmax_follows_a_dense_layer_exactly_when_its_activation_is_softmax(bits):
    """Spec: a float Dense layer becomes one QDense, followed by a QSoftmax if and only if its activation is
    ``softmax`` (the names compare by equality: ``tanh`` sorts after ``softmax`` and must not get one)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 10, 2))
    for act in ACTIVATIONS:
        dense = ir.Dense("d", rng.standard_normal((2, 3)), rng.standard_normal(3) * 0.1, act)
        g = ir.Graph("g", input_features=2, seq_len=None, layers=(dense,))
        kinds = [type(layer) for layer in lmu_edge.quantize(g, x, activation_bits=bits).layers]
        assert kinds == [qir.QInput, qir.QDense] + ([qir.QSoftmax] if act == "softmax" else []), act


def test_wide_layers_takes_layer_names_and_input_and_refuses_anything_else():
    """Spec (``wide_layers``, the 16-bit layers without a search): with 8-bit activations every layer name and
    ``"input"`` is accepted; a name that is no layer is refused naming it, and 16-bit activations are refused."""
    rng = np.random.default_rng(6)
    g = lmu_edge.fold(chain(rng, q=4, theta=6.0))
    x = rng.standard_normal((2, 20, 2))
    for names in (["input"], [g.layers[0].name], [layer.name for layer in g.layers] + ["input"], []):
        lmu_edge.quantize(g, x, wide_layers=names)
    with pytest.raises(QuantizationError, match="'nope' is no layer"):
        lmu_edge.quantize(g, x, wide_layers=["input", "nope"])
    with pytest.raises(QuantizationError, match="needs 8-bit activations"):
        lmu_edge.quantize(g, x, activation_bits=16, wide_layers=["input"])


def test_an_unproven_state_bound_is_capped_at_the_state_range():
    """Spec: where no bound holds for every input (an 8-bit state over a long window), the recorded state
    bound is the state's range, ``(2^(bits-1) - 1) 2^-frac``, never the unbounded sum beyond it."""
    rng = np.random.default_rng(7)
    g = lmu_edge.fold(chain(rng, q=16, theta=500.0))
    x = rng.standard_normal((2, 800, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qg = lmu_edge.quantize(g, x, state_bits=8)
    info = next(layer for layer in qg.metadata["quantization"]["layers"] if layer["type"] == "lmu")
    assert info["bound_proven"] is False and info["state_max_int"] == 127
    assert info["state_bound_lsb"] <= 127
    ql = next(layer for layer in qg.layers if isinstance(layer, qir.QLMU))
    assert ql.state_bound <= 127 * 2.0**-ql.state_type.frac


@pytest.mark.parametrize("bits", [16, 17, 24, 32])
def test_default_coefficient_bits_keep_the_64_bit_product_and_fit_int32(bits):
    """Spec: without ``coeff_bits`` a dense memory's coefficients get 16 bits for states of up to 16 bits, else
    the most that keep a sum of q + 1 products of a ``bits``-bit state in 62 bits, at most 32 (int32)."""
    rng = np.random.default_rng(8)
    q = 6
    g = lmu_edge.fold(chain(rng, q=q, theta=8.0))
    x = rng.standard_normal((2, 30, 2))
    info = lmu_edge.quantize(g, x, state_bits=bits).metadata["quantization"]
    lmu = next(layer for layer in info["layers"] if layer["type"] == "lmu")
    want = 16 if bits <= 16 else min(32, 62 - bits - math.ceil(math.log2(q + 1)))
    assert lmu["coeff_bits"] == want <= 32


@pytest.mark.parametrize("bias", [2.0**31 - 1, -(2.0**31 - 1), 2.0**31, -(2.0**31), 2.0**40])
def test_a_16x8_bias_is_stored_up_to_the_int32_range_and_its_grid_coarsens_past_it(bias):
    """Spec: a 16x8 layer's bias, rounded at its accumulator scale (here 1: a weight of 127 at 8 bits and an
    input scale of 1), is stored exactly while its magnitude is at most 2^31 - 1; past it, the weight's grid
    coarsens until it fits (never clipped into int32)."""
    from lmu_edge.qlinear import linear

    part = [(np.array([[127.0]]), 1.0, 0, 8)]
    out = (-1.1 * abs(bias), 1.1 * abs(bias))  # the layer's output holds its bias
    lin, _, _ = linear(part, np.array([bias]), "linear", out, out, "t", 16)
    if abs(bias) <= 2**31 - 1:
        assert int(lin.bias[0]) == int(bias) and int(lin.parts[0].kernel[0, 0]) == 127
    else:  # kept, with its sign, at the int32 limit of the coarser grid (its precision: the property below)
        assert 2**31 - 8 <= abs(int(lin.bias[0])) <= 2**31 - 1 and np.sign(int(lin.bias[0])) == np.sign(bias)


@settings(max_examples=200)
@given(
    w=st.lists(st.sampled_from([0.0, 1e-9, 1e-4, 0.3, -2.0, 50.0]), min_size=1, max_size=4),
    bias=st.floats(-1e9, 1e9),
    in_scale=st.sampled_from([1e-7, 3e-5, 0.004, 1.0]),
    bits=st.sampled_from([8, 16]),
)
def test_a_bias_fits_int32_by_a_coarser_weight_grid_where_its_own_does_not(w, bias, in_scale, bits):
    """Spec of ``qlinear.bias_scale``: every channel's scale is at least its grid's; the bias at ``in_scale``
    times it fits int32 (a zero or tiny weight column next to a bias gave 2e10 and more: issue 52, seed 58,
    a ``Dense(16, softmax)`` on one feature that every C integer mode refused); where the grid's own scale
    fits, it is returned unchanged; the weights on the returned grid are within half a step of the real
    ones, the bias within half of its step."""
    from lmu_edge.qlinear import bias_scale
    from lmu_edge.rounding import grid_scale, per_channel

    W = np.array([w], np.float64)  # one input, len(w) channels
    b = np.full(W.shape[1], bias)
    grid = grid_scale(W, bits)
    s = bias_scale(W, bits, in_scale, b)
    if s is None:
        assert np.all(np.abs(np.round(b / (in_scale * grid))) <= 2**31 - 1)
        return
    over = np.round(np.abs(b) / (in_scale * grid)) > 2**31 - 1  # the channels whose own grid does not fit
    assert np.all(s >= grid) and np.any(s > grid) and np.all((s == grid) | over)
    qb = np.round(b / (in_scale * s))
    assert np.all(np.abs(qb) <= 2**31 - 1)
    assert np.all(np.abs(qb * in_scale * s - b) <= in_scale * s / 2 * (1 + 1e-9))
    Wq, sw = per_channel(W, bits, s)
    assert np.all(np.abs(Wq * sw - W) <= sw / 2 * (1 + 1e-9))


@pytest.mark.parametrize("realization", ["zoh", "rk4", "fir", "pade"])
def test_a_proven_state_bound_fits_the_state_and_sets_its_scale(realization):
    """Spec: a proven state bound (in LSB) is within the state's range, and the state's power-of-two scale is
    the finest that holds it: one more fractional bit would not fit (max_int / 2 < bound <= max_int); for
    every memory kind (dense, Runge-Kutta, FIR, Pade) and state width."""
    rng = np.random.default_rng(9)
    fixed = dict(substeps=3, error_budget=1e-2) if realization in ("rk4", "pade") else {}  # no substep search
    g = lmu_edge.fold(chain(rng, q=6, theta=10.0), realization, **fixed)
    x = rng.standard_normal((2, 40, 2))
    for bits in (8, 16, 32):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an 8-bit state is far from the float model: said, not checked here
            info = lmu_edge.quantize(g, x, state_bits=bits).metadata["quantization"]
        lmu = next(layer for layer in info["layers"] if layer["type"] == "lmu")
        assert lmu["bound_proven"] is True and lmu["state_max_int"] == 2 ** (bits - 1) - 1
        assert lmu["state_max_int"] / 2 < lmu["state_bound_lsb"] <= lmu["state_max_int"], (bits, lmu)


@pytest.mark.parametrize("bits", [8, 16])
def test_a_running_mean_pool_keeps_negative_means(bits):
    """Spec: a running-mean pool's output range is the calibrated one at both ends: after a tanh, whose mean
    goes negative, the quantized pool stays within 1% of full scale of the float mean (an output range
    from the upper end alone keeps only the positive half)."""
    rng = np.random.default_rng(10)
    dense = ir.Dense("d", rng.standard_normal((2, 3)), np.array([-0.6, 0.0, 0.6]), "tanh")
    g = ir.Graph("p", input_features=2, seq_len=None, layers=(dense, ir.TimePooling("pool")))
    x = rng.standard_normal((2, 60, 2))
    qg = lmu_edge.quantize(g, x, activation_bits=bits)
    want = lmu_edge.simulate(g, x)
    assert want.min() < -0.1  # the premise: negative means
    assert np.abs(lmu_edge.simulate(qg, x) - want).max() <= 0.01 * np.abs(want).max()


def test_a_16_bit_layer_takes_fewer_inputs_than_its_accumulator_bound():
    """Spec: with 16-bit activations and 16-bit weights, |acc| <= n 2^15 (2^15 - 1) must stay below 2^47, so a
    layer takes at most 2^16 - 1 inputs: n = 2^16 inputs is refused, 2^16 - 1 accepted, and the output
    count does not enter (2^16 outputs of one input are accepted)."""
    from lmu_edge.qlinear import part

    rng = np.random.default_rng(11)
    n = 1 << 16
    part(rng.standard_normal((n - 1, 1)), 16, 0.01, 0, 0.01, act_bits=16)
    part(rng.standard_normal((1, n)), 16, 0.01, 0, 0.01, act_bits=16)
    with pytest.raises(QuantizationError, match=f"fewer than {n} inputs"):
        part(rng.standard_normal((n, 1)), 16, 0.01, 0, 0.01, act_bits=16)


@pytest.mark.parametrize("bits, floor_8, floor_16", [(16, 30.0, 45.0), (32, 30.0, 45.0)])
def test_a_quantized_pade_memory_reads_its_input_at_the_work_fraction(bits, floor_8, floor_16):
    """Spec (the implicit Pade step): its input is shifted from u's fraction to the work fraction, the state's
    plus the guard bits (u_shift = frac(u) - frac(state) - guard, of either sign), and the quantized graph
    then tracks the float one (measured 33 dB with 8-bit activations, 51 dB with 16; floors 30 and 45)."""
    from lmu_edge.metrics import sqnr_db

    rng = np.random.default_rng(10)
    g = lmu_edge.fold(chain(rng, q=6, theta=10.0), "pade", substeps=3, error_budget=1e-2)
    x = rng.standard_normal((2, 60, 2))
    want = lmu_edge.simulate(g, x)
    for act_bits, floor in ((8, floor_8), (16, floor_16)):
        qg = lmu_edge.quantize(g, x, state_bits=bits, activation_bits=act_bits)
        ql = next(layer for layer in qg.layers if isinstance(layer, qir.QLMU))
        mem = ql.memory
        assert mem.u_shift == ql.u_type.frac - ql.state_type.frac - mem.guard
        assert sqnr_db(lmu_edge.simulate(qg, x), want) > floor


@pytest.mark.parametrize(("db32", "db16"), [(50.0, 60.0), (40.0, 44.0), (40.0, 39.0), (40.0, 40.0)])
def test_the_int16_mode_keeps_the_better_state_width_where_32_bits_miss_the_target(db32, db16):
    """Spec of ``widening.narrower_state`` (the int16 mode's state width): a 32-bit state's build at the 16-bit
    activations' target (48 dB) is kept without another build; below it, the 16-bit state is built and kept
    only where it scores higher, its metadata naming both figures (issue 52, seed 72: 35.5 -> 44.3 dB)."""
    from lmu_edge import widening

    rng = np.random.default_rng(4)
    g = lmu_edge.fold(chain(rng, q=6, theta=8.0))
    x = rng.standard_normal((2, 20, 2))
    q32 = lmu_edge.quantize(g, x, activation_bits=16, weight_bits=16, state_bits=32)
    q16 = lmu_edge.quantize(g, x, activation_bits=16, weight_bits=16, state_bits=16)
    asked = []

    def build(use_gptq, sb):
        asked.append((use_gptq, sb))
        return db16, q16, ["w16"]

    sqnr, qg, caught, used, kept = widening.narrower_state((db32, q32, ["w32"]), build, False, (32, 32))
    assert asked == ([] if db32 >= 48.0 else [(False, 16)])
    if db32 < 48.0 and db16 > db32:
        assert (sqnr, caught, used, kept) == (db16, ["w16"], 32, 16) and qg.layers is q16.layers
        q = qg.metadata["quantization"]
        assert q["narrowed_state_bits"] == 16 and q["state_bits_sqnr_db"] == {"32": db32, "16": db16}
    else:
        assert (sqnr, qg, caught, used, kept) == (db32, q32, ["w32"], 32, 32)


@pytest.mark.parametrize(
    ("db8", "db2", "db1"),
    [(40.0, 45.0, 47.0), (40.0, 49.0, 52.0), (40.0, 40.4, 40.8), (40.0, 38.0, 41.0), (40.0, 42.0, 42.2)],
)
def test_feedback_loops_take_the_narrower_span_only_where_it_does_better(db8, db2, db1):
    """Spec of ``widening.narrower_loops``: the search again with the loops at the activations' 2x headroom,
    and where that misses the target (48 here) at their calibrated range (LOOP16_TIGHT_SPAN), each kept only
    where it gains WIDEN_MIN_GAIN_DB on the best before it (LOOP16_SPAN's 8x first), its metadata naming the
    span and every figure tried; else the first result, untouched."""
    from lmu_edge import widening
    from lmu_edge.qlinear import LOOP16_TIGHT_SPAN

    rng = np.random.default_rng(4)
    g = lmu_edge.fold(chain(rng, q=6, theta=8.0))
    x = rng.standard_normal((2, 20, 2))
    q8 = lmu_edge.quantize(g, x, activation_bits=16)
    q2 = lmu_edge.quantize(g, x, activation_bits=16, state_bits=32)
    q1 = lmu_edge.quantize(g, x, activation_bits=16, state_bits=24)
    first = ([1], db8, q8, ["w8"], 16, 16)
    runs = {2.0: ([2], db2, q2, ["w2"], 32, 32), LOOP16_TIGHT_SPAN: ([3], db1, q1, ["w1"], 24, 24)}
    asked = []

    def again(span):
        asked.append(span)
        return runs[span]

    got = widening.narrower_loops(first, again, 48.0)
    gain = widening.WIDEN_MIN_GAIN_DB
    best, span = (db8, None), None
    for s, db in ((2.0, db2), (LOOP16_TIGHT_SPAN, db1)):
        if s == LOOP16_TIGHT_SPAN and best[0] >= 48.0:
            break
        if db >= best[0] + gain:
            best, span = (db, s), s
    assert asked == ([2.0] if db2 >= db8 + gain and db2 >= 48.0 else [2.0, LOOP16_TIGHT_SPAN])
    if span is None:
        assert got is first
    else:
        assert got[1] == best[0] and got[2].layers is runs[span][2].layers and got[3:] == runs[span][3:]
        q = got[2].metadata["quantization"]
        assert q["loop_span"] == span
        assert q["loop_span_sqnr_db"] == {"8": db8, "2": db2, **({"1": db1} if len(asked) == 2 else {})}
