import math

import numpy as np
import pytest

import lmu_edge
from lmu_edge import ir, lti

# lmu_edge.fold is the function; lmu_edge.folding is the module with the measuring machinery
from lmu_edge import folding as fold
from lmu_edge.errors import FoldError

from graphs import chain, lmu


def analytic(q, theta, disc="zoh"):
    return ir.LMU("lmu", memory_d=1, order=q, theta=theta, discretizer=disc,
                  input_encoders=np.ones((1, 1)), memory=ir.ImpulseResponse())


def by_name(cands):
    return {c.name: c for c in cands}


@pytest.mark.slow
@pytest.mark.parametrize("q,theta", [(256, 784.0), (128, 10000.0)])
def test_substep_search_meets_the_budget_with_the_fewest_substeps(q, theta):
    layer = analytic(q, theta)
    rk = by_name(fold.candidates(layer, 1e-6, ["rk4"]))["rk4"]
    s = rk.memory.substeps
    assert rk.ok and rk.measurement.error <= 1e-6
    assert rk.measurement.horizon >= 5 * theta
    # one substep fewer does not meet the budget: the count is the measured minimum
    fewer = fold._measure(layer, "rk4", ir.RungeKutta(4, s - 1), fold._Reference(layer), 1e-6)
    assert not fewer.ok
    if (q, theta) == (256, 784.0):
        assert 50 <= s <= 200    # one RK4 step per sample diverges; about a hundred are needed
        one = fold._measure(layer, "rk4", ir.RungeKutta(4, 1), fold._Reference(layer), 1e-6)
        assert not one.ok and one.measurement.error > 1e3
        # an over-budget candidate's spectral radius is not computed (the search skips the
        # eigenvalue problem); the map of one step per sample is indeed unstable
        assert math.isnan(one.measurement.spectral_radius)
        assert lti.spectral_radius(lti.rk_map(q, theta, 4, 1)[0]) > 1


def test_the_measured_map_is_the_map_of_the_deployed_structured_step():
    q, theta, s = 32, 50.0, 6
    M, N = lti.rk_map(q, theta, 4, s)
    m = np.zeros((1, q))
    u = np.zeros(300)
    u[0] = 1.0
    H = lti.impulse_response(M, N, 300)
    for k in range(300):
        m = lti.rk_step(m, u[k:k + 1], theta, 4, s)
        np.testing.assert_allclose(m[0], H[:, k], rtol=0, atol=1e-12)


@pytest.mark.slow
def test_auto_picks_dense_zoh_where_it_is_cheaper_and_rk4_where_that_is():
    g = ir.Graph("two", 1, (
        analytic(256, 784.0),
        ir.LMU("long", memory_d=1, order=128, theta=10000.0, discretizer="zoh",
               input_encoders=np.ones((256, 1)), memory=ir.ImpulseResponse()),
    ))
    f = lmu_edge.fold(g)
    short, long = f.layers
    assert isinstance(short.memory, ir.DenseSS) and short.memory.method == "zoh"
    assert isinstance(long.memory, ir.RungeKutta) and long.memory.rk_order == 4
    for layer in f.layers:
        assert layer.measurement.error <= 1e-6
    assert long.measurement.ops_per_step < lti.dense_cost(128)[0]
    assert long.measurement.coeffs_stored == 128       # no q*q matrix stored
    assert short.measurement.ops_per_step == lti.dense_cost(256)[0]


def test_euler_layers_get_the_exact_structured_euler_step():
    f = lmu_edge.fold(ir.Graph("e", 1, (analytic(16, 200.0, "euler"),)))
    mem = f.layers[0].memory
    assert isinstance(mem, ir.RungeKutta) and (mem.rk_order, mem.substeps) == (1, 1)
    assert f.layers[0].measurement.error < 1e-12


def test_unstable_euler_source_is_reproduced_not_rejected():
    # Euler with theta small against the order is unstable; the dense Euler form is still that model.
    layer = analytic(16, 40.0, "euler")
    c = by_name(fold.candidates(layer))
    assert c["euler"].measurement.spectral_radius > 1 and c["euler"].ok


def test_truncated_kernel_gets_the_fir_realization(rng):
    q, K = 8, 25
    kernel = lti.legendre_impulse_response(q, 12.0, K)
    layer = lmu(rng, n_in=1, q=q, theta=12.0, memory=ir.ImpulseResponse(kernel, "truncated"))
    c = by_name(fold.candidates(layer))
    assert c["fir"].measurement.error == 0.0 and c["fir"].ok
    assert c["zoh"].measurement.error > 1e-6 and not c["zoh"].ok       # the truncation is measured, not ignored
    folded = fold.fold_layer(layer)
    assert isinstance(folded.memory, ir.FIR)


def test_recurrent_graphs_pass_through_and_inputs_are_not_mutated(rng):
    g = chain(rng, q=6, theta=9.0)
    before = g.layers[1]
    f = lmu_edge.fold(g)
    assert g.layers[1] is before and g.layers[1].is_parallel
    assert not f.layers[1].is_parallel and f.layers[1].measurement is not None
    assert lmu_edge.fold(f) is f
    rnn = chain(rng, q=6, theta=9.0, rnn_path=True)
    assert lmu_edge.fold(rnn) is rnn


def test_explicit_realization_over_budget_is_a_clear_error(rng):
    g = chain(rng, q=8, theta=12.0)
    with pytest.raises(FoldError, match=r"layer 'lmu'.*error budget.*--error-budget"):
        lmu_edge.fold(g, "euler")
    with pytest.raises(FoldError, match="unknown realization"):
        lmu_edge.fold(g, "magic")


def test_per_layer_realizations(rng):
    g = chain(rng, q=8, theta=12.0)
    f = lmu_edge.fold(g, {"lmu": "rk4"}, substeps=None)
    assert isinstance(f.layers[1].memory, ir.RungeKutta)
    with pytest.raises(FoldError, match="unknown LMU layer"):
        lmu_edge.fold(g, {"nope": "zoh"})


def test_fixed_substeps_are_measured_too(rng):
    g = chain(rng, q=8, theta=12.0)
    f = lmu_edge.fold(g, "rk4", error_budget=1e-3, substeps=16)
    assert f.layers[1].memory.substeps == 16 and f.layers[1].measurement.error <= 1e-3


def test_pruned_search_stops_at_the_incumbent_cost_and_picks_the_same_realization():
    # order 128, theta 200: dense ZOH costs 33024 ops/step, so RK4 (3584 per substep) can win
    # with at most 9 substeps; it needs more, so the search stops there instead of finding them
    layer = analytic(128, 200.0)
    pruned = by_name(fold.candidates(layer, 1e-6))
    full = by_name(fold.candidates(layer, 1e-6, prune=False))
    assert pruned["rk4"].memory.substeps <= 9 < full["rk4"].memory.substeps
    assert not pruned["rk4"].ok and full["rk4"].ok and "cannot beat zoh" in pruned["rk4"].note
    assert full["rk4"].measurement.ops_per_step > full["zoh"].measurement.ops_per_step
    best = lambda cs: min((c for c in cs.values() if c.ok),
                          key=lambda c: (c.measurement.ops_per_step, c.measurement.coeffs_stored)).name
    assert best(pruned) == best(full) == "zoh"
