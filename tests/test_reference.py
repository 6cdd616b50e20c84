import dataclasses

import numpy as np
import pytest
from graphs import chain, lmu

import lmu_edge
from lmu_edge import ir, lti, reference
from lmu_edge.errors import ShapeError
from lmu_edge.metrics import relative_error

CONFIGS = {
    "zoh_hidden_dense": dict(q=8, theta=12.0),
    "memory_d3_input_to_hidden": dict(d=3, q=6, theta=9.0, input_to_hidden=True),
    "no_hidden_last_step": dict(q=10, theta=20.0, hidden=None, return_sequences=False),
    "euler": dict(q=4, theta=30.0, disc="euler"),
    "simple_rnn_hidden": dict(q=6, theta=10.0, hidden="simple_rnn"),
    "no_bias": dict(q=5, theta=7.5, bias=False),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_recurrent_form_equals_parallel_fft_form_over_ten_theta(name, rng):
    kw = CONFIGS[name]
    g = chain(rng, **kw)
    T = int(10 * kw["theta"]) + 7
    x = rng.standard_normal((3, T, 2))
    y_par = lmu_edge.simulate(g, x)  # FFT convolution with the impulse response
    y_rec = lmu_edge.simulate(lmu_edge.fold(g, "zoh" if kw.get("disc", "zoh") == "zoh" else "euler"), x)
    assert y_par.shape == y_rec.shape
    assert relative_error(y_rec, y_par) <= 1e-9


def test_every_realization_tracks_the_parallel_form(rng):
    g = chain(rng, q=8, theta=12.0)
    x = rng.standard_normal((2, 150, 2))
    y = lmu_edge.simulate(g, x)
    for real in ("zoh", "rk4", "auto"):
        assert relative_error(lmu_edge.simulate(lmu_edge.fold(g, real), x), y) <= 1e-5, real


def test_parallel_memory_is_the_causal_convolution(rng):
    layer = lmu(rng, q=5, theta=6.0, hidden=None, bias=False, n_in=1)
    layer = dataclasses.replace(layer, input_encoders=np.ones((1, 1)))
    u = rng.standard_normal((1, 40, 1))
    m = reference.parallel_memory(layer, u)[0, :, 0]  # (T, q)
    H = lti.legendre_impulse_response(5, 6.0, 40)
    for t in (0, 1, 17, 39):
        expect = sum(H[:, k] * u[0, t - k, 0] for k in range(t + 1))
        np.testing.assert_allclose(m[t], expect, atol=1e-12)


def test_stream_equals_batch_and_reset_resets(rng):
    g = lmu_edge.fold(chain(rng, q=6, theta=8.0, hidden="simple_rnn", rnn_path=True))
    x = rng.standard_normal((2, 60, 2))
    y = lmu_edge.simulate(g, x)
    s = lmu_edge.Stream(g)
    s.reset(batch=2)
    ys = np.stack([s.step(x[:, t]) for t in range(60)], axis=1)
    np.testing.assert_allclose(ys, y, rtol=0, atol=1e-12)
    s.reset(batch=2)
    again = np.stack([s.step(x[:, t]) for t in range(60)], axis=1)
    np.testing.assert_array_equal(again, ys)


def test_last_step_models_return_only_the_last_step(rng):
    g = chain(rng, q=6, theta=8.0, return_sequences=False)
    x = rng.standard_normal((2, 30, 2))
    y = lmu_edge.simulate(g, x)
    assert y.shape == (2, 4)
    seq = dataclasses.replace(g.layers[1], return_sequences=True)
    full = lmu_edge.simulate(g.replace(layers=(g.layers[0], seq, g.layers[2])), x)
    np.testing.assert_allclose(y, full[:, -1], atol=1e-12)
    assert lmu_edge.simulate(g, x[0]).shape == (4,)


def test_pooling_is_a_running_mean(rng):
    g = ir.Graph("p", 3, (ir.TimePooling("pool"),))
    x = rng.standard_normal((2, 9, 3))
    np.testing.assert_allclose(lmu_edge.simulate(g, x), x.mean(axis=1), atol=1e-12)
    s = lmu_edge.Stream(g)
    s.reset(2)
    outs = [s.step(x[:, t]) for t in range(9)]
    np.testing.assert_allclose(outs[3], x[:, :4].mean(axis=1), atol=1e-12)


def test_truncated_kernel_is_used_as_stored(rng):
    q, K = 6, 11
    kernel = lti.legendre_impulse_response(q, 8.0, K)
    g = chain(rng, q=q, theta=8.0, memory=ir.ImpulseResponse(kernel, "truncated"))
    x = rng.standard_normal((2, 80, 2))
    y = lmu_edge.simulate(g, x)
    y_fir = lmu_edge.simulate(lmu_edge.fold(g, "fir"), x)
    assert relative_error(y_fir, y) <= 1e-12


def test_float32_mode_is_close_to_float64(rng):
    g = lmu_edge.fold(chain(rng, q=8, theta=12.0))
    x = rng.standard_normal((2, 100, 2))
    y32 = lmu_edge.simulate(g, x, dtype=np.float32)
    assert y32.dtype == np.float32
    assert relative_error(y32, lmu_edge.simulate(g, x)) <= 1e-5


@pytest.mark.parametrize(
    "x,match",
    [
        (np.zeros((2, 5, 3)), "takes 2 features"),
        (np.zeros(5), "expected shape"),
        (np.full((1, 4, 2), np.nan), "NaN"),
        (np.zeros((1, 0, 2)), "empty"),
    ],
)
def test_bad_inputs_are_clear_errors(x, match, rng):
    with pytest.raises(ShapeError, match=match):
        lmu_edge.simulate(chain(rng), x)


def test_calibration_moments_sum_every_step_of_every_sequence(rng):
    """``record_ranges``' second moment of an LMU's hidden-cell input (``z_gram``, what GPTQ rounds the
    hidden kernel against) is the sum of ``z z^T`` over every step of every sequence, with its sum and
    count: recomputed here from the states the runner reports step by step (``last["state"]``) and the
    layer's input (``input_to_hidden``). Catches steps or sequences left out of the sum."""
    g = lmu_edge.fold(chain(rng, q=5, theta=6.0, input_to_hidden=True), "zoh")
    x = rng.standard_normal((3, 11, 2))
    recs = reference.record_ranges(g, x)
    pre, mid = reference._runners(g, np.float64)[:2]
    u = pre.seq(x)
    mid.reset(3)
    zs = []
    for t in range(u.shape[1]):
        mid.step(u[:, t])
        zs.append(np.concatenate([mid.last["state"], u[:, t]], axis=-1))
    Z = np.concatenate(zs)
    G, s, n = recs[1]["z_gram"]
    assert n == 3 * 11 and Z.shape == (33, 5 * mid.L.memory_d + 3)
    np.testing.assert_allclose(G, Z.T @ Z, rtol=1e-12)
    np.testing.assert_allclose(s, Z.sum(axis=0), rtol=1e-12)
