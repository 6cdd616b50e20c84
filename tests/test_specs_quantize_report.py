"""Specifications of lmu_edge/quantization.py that its generated mutants found unchecked (docs/testing.md,
"Generated mutants"): an unstable Euler memory is refused before any scale is chosen, and the LMU report's
headroom is the state's range over its calibrated maximum, in bits."""

import math

import numpy as np
import pytest
from graphs import chain

import lmu_edge
from lmu_edge import lti
from lmu_edge.errors import QuantizationError


@pytest.mark.parametrize("side, refused", [(0.5, True), (2.0, False)])
def test_an_euler_memory_below_its_stable_window_is_refused_in_one_line(side, refused):
    """Spec: Euler's step of the order-q memory is stable above lti.euler_stable_theta(q); a graph whose Euler
    memory sits at half that window (its response grows past MAX_GROWTH within the calibration) is refused
    with a QuantizationError naming the layer and the stable theta; at twice the window it converts."""
    q = 8
    theta = lti.euler_stable_theta(q) * side
    rng = np.random.default_rng(3)
    g = lmu_edge.fold(chain(rng, q=q, theta=theta, disc="euler"), "euler")
    x = rng.standard_normal((1, 200, 2))
    if refused:
        with pytest.raises(QuantizationError, match=r"layer 'lmu': its Euler memory .* is unstable .* above"):
            lmu_edge.quantize(g, x)
    else:
        lmu_edge.quantize(g, x)


@pytest.mark.parametrize("bits", [16, 32])
def test_the_lmu_report_gives_the_state_headroom_over_its_calibrated_maximum_in_bits(bits):
    """Spec: ``headroom_bits`` = log2(state max_int / the calibrated max |m| in LSB), the LSB being
    state_bound / state_bound_lsb (2^-f, f the state's fractional bits)."""
    rng = np.random.default_rng(4)
    g = lmu_edge.fold(chain(rng, q=6, theta=10.0), "zoh")
    info = lmu_edge.quantize(g, rng.standard_normal((2, 40, 2)), state_bits=bits).metadata["quantization"]
    lmu = next(layer for layer in info["layers"] if layer["type"] == "lmu")
    lsb = lmu["state_bound"] / lmu["state_bound_lsb"]
    m_lsb = lmu["calibrated_state_max"] / lsb
    assert m_lsb > 1  # the premise: the calibrated maximum is many LSB
    assert lmu["headroom_bits"] == pytest.approx(math.log2(lmu["state_max_int"] / m_lsb), rel=1e-9)


@pytest.mark.parametrize("act_bits, top", [(8, 30), (16, 31)])
def test_a_32_bit_state_reads_its_input_u_in_at_most_30_bits_with_8_bit_activations(act_bits, top):
    """Spec: u's fraction is the most that keeps the calibrated max |u| within 2^top - 1, top = 30 with 8-bit
    activations (their requantization shifts the int32 accumulator left before its multiply: a u past 2^30
    clips) and 31 with 16-bit ones (64-bit requantization), for a 32-bit state. With 16-bit activations the
    calibrated max |u| takes their headroom (qlinear.RANGE16_HEADROOM) first (issue 52, seed 1001)."""
    from lmu_edge import qir, reference
    from lmu_edge.qlinear import RANGE16_HEADROOM

    rng = np.random.default_rng(5)
    g = lmu_edge.fold(chain(rng, q=6, theta=10.0), "zoh")
    x = rng.standard_normal((2, 40, 2))
    qg = lmu_edge.quantize(g, x, state_bits=32, activation_bits=act_bits)
    (i,) = [k for k, layer in enumerate(qg.layers) if isinstance(layer, qir.QLMU)]
    u = reference.record_ranges(g, x)[1]["u"]
    u_abs = max(abs(u[0]), abs(u[1])) * (RANGE16_HEADROOM if act_bits == 16 else 1.0)
    f = qg.layers[i].u_type.frac
    assert u_abs * 2.0**f <= 2**top - 1 < u_abs * 2.0 ** (f + 1)


def test_the_refusal_of_an_unstable_memory_says_whether_float_converts_it():
    """Spec: the refusal says the float modes convert the model only where its memory's growth within the
    calibration stays within _quantization_checks.FLOAT_CARRIES (1e18: what a float verification carries);
    past it, only as far as float carries it (issue 52, the chunk's seed 1026: 1e29x in 18 steps, its float
    cells failed while the refusal said they convert it exactly)."""
    from lmu_edge._quantization_checks import FLOAT_CARRIES

    q = 8
    theta = lti.euler_stable_theta(q) * 0.5
    rng = np.random.default_rng(3)
    g = lmu_edge.fold(chain(rng, q=q, theta=theta, disc="euler"), "euler")
    A, B = lti.legendre_discrete(q, theta, "euler")
    sides = set()
    for steps in (20, 60, 200, 400):
        grows = lti.growth(A, B, steps)
        if grows <= lmu_edge.quantization.MAX_GROWTH:
            continue
        floats = grows <= FLOAT_CARRIES
        sides.add(floats)
        with pytest.raises(QuantizationError) as e:
            lmu_edge.quantize(g, rng.standard_normal((1, steps, 2)))
        said = "the float modes convert it exactly" in str(e.value)
        assert said == floats and ("only as far as float carries" in str(e.value)) != floats, (steps, grows)
    assert sides == {True, False}  # both sides reached
