import math

import numpy as np
import pytest
from graphs import chain, lmu

import lmu_edge

# lmu_edge.fold is the function; lmu_edge.folding is the module with the measuring machinery
from lmu_edge import folding as fold
from lmu_edge import impulse, ir, lti
from lmu_edge.errors import FoldError


def analytic(q, theta, disc="zoh"):
    return ir.LMU(
        "lmu",
        memory_d=1,
        order=q,
        theta=theta,
        discretizer=disc,
        input_encoders=np.ones((1, 1)),
        memory=ir.ImpulseResponse(),
    )


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
    fewer = impulse.measure(layer, "rk4", ir.RungeKutta(4, s - 1), impulse.Reference(layer), 1e-6)
    assert not fewer.ok
    if (q, theta) == (256, 784.0):
        assert 50 <= s <= 200  # one RK4 step per sample diverges; about a hundred are needed
        one = impulse.measure(layer, "rk4", ir.RungeKutta(4, 1), impulse.Reference(layer), 1e-6)
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
        m = lti.rk_step(m, u[k : k + 1], theta, 4, s)
        np.testing.assert_allclose(m[0], H[:, k], rtol=0, atol=1e-12)


@pytest.mark.slow
def test_auto_picks_dense_zoh_where_it_is_cheaper_and_a_structured_step_where_that_is():
    g = ir.Graph(
        "two",
        1,
        (
            analytic(256, 784.0),
            ir.LMU(
                "long",
                memory_d=1,
                order=128,
                theta=10000.0,
                discretizer="zoh",
                input_encoders=np.ones((256, 1)),
                memory=ir.ImpulseResponse(),
            ),
        ),
    )
    f = lmu_edge.fold(g)
    short, long = f.layers
    assert isinstance(short.memory, ir.DenseSS) and short.memory.method == "zoh"
    # the implicit Pade step needs a single substep here, RK4 several: Pade is cheaper
    assert isinstance(long.memory, ir.Pade) and long.memory.orders == (3, 4)
    for layer in f.layers:
        assert layer.measurement.error <= 1e-6
    assert long.measurement.ops_per_step < lti.dense_cost(128)[0]
    assert long.measurement.coeffs_stored < 128 * 8  # no q*q matrix stored
    assert short.measurement.ops_per_step == lti.dense_cost(256)[0]
    # for a target that does not run the implicit step, auto falls back to RK4; so it does for a quantized
    # target (its integer rounding noise is amplified by the solve), where asking for it still works
    for kw in ({"target": "tflite"}, {"target": "c", "quantized": True}):
        f = lmu_edge.fold(g, **kw)
        assert isinstance(f.layers[1].memory, ir.RungeKutta) and f.layers[1].memory.rk_order == 4
        assert f.layers[1].measurement.ops_per_step > long.measurement.ops_per_step
        assert f.layers[1].measurement.coeffs_stored == 128
    f = lmu_edge.fold(g, {"long": "pade"}, target="c", quantized=True)
    assert isinstance(f.layers[1].memory, ir.Pade)


def test_asking_for_the_implicit_step_on_a_target_without_it_is_refused_in_one_line():
    g = ir.Graph("one", 1, (analytic(16, 40.0),))
    with pytest.raises(FoldError) as e:
        lmu_edge.fold(g, "pade", target="onnx")
    msg = str(e.value)
    assert "\n" not in msg and "'pade'" in msg and "'onnx'" in msg and "rk4" in msg


@pytest.mark.parametrize(
    "name,orders,budget", [("pade", (3, 4), 1e-6), ("pade23", (2, 3), 1e-6), ("pade22", (2, 2), 1e-5)]
)
def test_the_implicit_realization_meets_the_budget_against_exact_zoh(name, orders, budget):
    layer = analytic(64, 200.0)
    c = by_name(fold.candidates(layer, budget, [name]))[name]
    assert c.ok and c.measurement.error <= budget and isinstance(c.memory, ir.Pade)
    assert c.memory.orders == orders and c.measurement.horizon >= 5 * 200
    # the substep count is the measured minimum: one fewer misses the budget
    s = c.memory.substeps
    if s > 1:
        assert not impulse.measure(layer, name, ir.Pade(*orders, s - 1), impulse.Reference(layer), budget).ok
    # the float oracle steps the realization it was given: its impulse response is the exact ZOH one
    import dataclasses

    g = ir.Graph("one", 1, (dataclasses.replace(layer, memory=c.memory),))
    x = np.zeros((1, 1000, 1))
    x[0, 0, 0] = 1.0
    H = lmu_edge.simulate(g, x)[0].T
    ref = lti.legendre_impulse_response(64, 200.0, 1000)
    assert np.max(np.abs(H - ref)) <= 2 * budget * np.max(np.abs(ref))


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
    assert c["zoh"].measurement.error > 1e-6 and not c["zoh"].ok  # the truncation is measured, not ignored
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

    def best(cs):
        return min(
            (c for c in cs.values() if c.ok), key=lambda c: (c.measurement.ops_per_step, c.measurement.coeffs_stored)
        ).name

    assert best(pruned) == best(full) == "zoh"


@pytest.mark.parametrize(
    "q,theta,stride,memory",
    [
        (64, 6400.0, 16, ir.RungeKutta(4, 2)),  # over the float budget
        (64, 6400.0, 16, ir.Pade(3, 4, 1)),
        (64, 640.0, 8, ir.RungeKutta(4, 20)),
        (128, 1280.0, 16, ir.Pade(3, 4, 4)),  # within it
    ],
)
@pytest.mark.parametrize("head", [1, 1024])
def test_sampled_measurement_equals_the_every_step_measurement(monkeypatch, q, theta, stride, memory, head):
    # bench/fold.py measures its longest horizons at every stride-th step (after a head measured at every
    # step, and around the largest sampled errors at every step): on these points it gives the error of
    # the every-step comparison within 1e-4 relative, even with no head at all (the Pade model's error is
    # 2.1e-11, near float64's noise in this comparison: 7.1e-5 relative apart on an AMD EPYC, 5e-5 was
    # this bound until that machine)
    monkeypatch.setattr(impulse, "SAMPLE_HEAD", head)
    layer = analytic(q, theta)
    name = "pade" if isinstance(memory, ir.Pade) else "rk4"
    full = impulse.measure(layer, name, memory, impulse.Reference(layer), 1.0)
    sampled = impulse.measure(layer, name, memory, impulse.Reference(layer, stride=stride), 1.0)
    a, b = full.measurement.error, sampled.measurement.error
    assert a > 0 and abs(a - b) <= 1e-4 * a, (a, b)
    assert f"{a:.1e}" == f"{b:.1e}"  # the fold table's printed precision
    assert sampled.measurement.spectral_radius == full.measurement.spectral_radius
    # with a budget the search's early stop agrees with the full comparison on which side it falls
    for budget in (0.5 * a, 2 * a):
        ref = impulse.Reference(layer, stride=stride)
        impulse.measure(layer, name, memory, ref, 1.0)  # fills the cached samples: the next stops early
        assert impulse.measure(layer, name, memory, ref, budget).ok == (budget >= a)


def test_sampled_measurement_of_a_stored_kernel_and_a_bad_stride():
    layer = analytic(32, 320.0)
    K = lti.legendre_impulse_response(32, 320.0, 2000)
    stored = replace_memory(layer, ir.ImpulseResponse(K, "truncated"))
    mem = ir.RungeKutta(4, 2)
    full = impulse.measure(stored, "rk4", mem, impulse.Reference(stored), 1.0).measurement.error
    sampled = impulse.measure(stored, "rk4", mem, impulse.Reference(stored, stride=7), 1.0).measurement.error
    assert full > 0 and abs(full - sampled) <= 5e-5 * full
    with pytest.raises(FoldError, match="stride must be a positive integer"):
        impulse.Reference(layer, stride=0)


def replace_memory(layer, memory):
    import dataclasses

    return dataclasses.replace(layer, memory=memory)


def test_quantized_tflite_auto_leaves_runge_kutta_out():
    # TFLite has no 16x8 CUMSUM: for a quantized TFLite artifact auto takes the dense step of the layer's
    # own discretizer instead of the structured RK step (which it picks for C: fewer operations); asked
    # for by name, RK is still built
    layer = ir.LMU(
        "e", memory_d=1, order=6, theta=9.0, discretizer="euler", input_encoders=np.ones((1, 1)),
        memory=ir.ImpulseResponse(),
    )  # fmt: skip
    g = ir.Graph("g", 1, (layer,))
    pick = {t: lmu_edge.fold(g, target=t, quantized=True).layers[0].memory for t in ("c", "tflite", ("c", "tflite"))}
    assert isinstance(pick["c"], ir.RungeKutta)
    assert isinstance(pick["tflite"], ir.DenseSS) and pick["tflite"].method == "euler"
    assert isinstance(pick[("c", "tflite")], ir.DenseSS)
    assert isinstance(lmu_edge.fold(g, target="tflite").layers[0].memory, ir.RungeKutta)  # float: CUMSUM is fine
    # asked for by name it is refused (int8 ran the state in 8 bits: the digits model at -1.7 dB), in one line
    with pytest.raises(lmu_edge.errors.QuantizationError, match="op CUMSUM.*--realization auto") as e:
        lmu_edge.fold(g, "rk1", target="tflite", quantized=True)
    assert "\n" not in str(e.value)
    assert isinstance(lmu_edge.fold(g, "rk1", target="c", quantized=True).layers[0].memory, ir.RungeKutta)
