"""The O(q) shifted solve and the implicit Pade step of lmu_edge.pade, against dense linear algebra."""

import numpy as np
import pytest

from lmu_edge import lti, pade


@pytest.mark.parametrize("q,theta", [(1, 3.0), (2, 5.0), (37, 50.0), (256, 784.0)])
@pytest.mark.parametrize("c", [0.02, 0.2, 0.1 + 0.7j, 0.05 - 0.2j, -0.01 + 0.03j])
def test_shifted_solve_matches_a_dense_solve_for_real_and_complex_shifts(q, theta, c):
    # shifts of the size a Pade substep uses (h/p with |p| of 3 to 6): smaller as q/theta grows
    # (see the next test for what happens otherwise)
    c = c * min(1.0, 64.0 / q)
    A, _ = lti.legendre_ab(q, theta)
    b = np.random.default_rng(7).standard_normal((3, q))
    x = pade.shifted_solve(b, c, theta)
    dense = np.linalg.solve(np.eye(q) - c * A, b.T).T
    assert x.shape == b.shape and np.iscomplexobj(x) == np.iscomplexobj(np.asarray(c))
    assert np.max(np.abs(x - dense)) <= 1e-10 * np.max(np.abs(dense))


def test_shifted_solve_loses_accuracy_when_the_shift_is_large_against_theta_over_q():
    # forward substitution multiplies the running sums by about (1 + 2 c (2i+1)/theta) per index:
    # with one Pade [2/3] step per sample at order 512, theta 1024, the solve is far off, which is
    # why the substep count of the implicit step is measured, never assumed
    q, theta = 512, 1024.0
    A, _ = lti.legendre_ab(q, theta)
    _, _, p = pade.pade_fractions(2, 3)
    b = np.random.default_rng(3).standard_normal(q)
    c = 1.0 / p[0]
    err = np.max(np.abs(pade.shifted_solve(b, c, theta) - np.linalg.solve(np.eye(q) - c * A, b)))
    assert err > 1.0
    c = 0.25 / p[0]  # four substeps: accurate again
    dense = np.linalg.solve(np.eye(q) - c * A, b)
    assert np.max(np.abs(pade.shifted_solve(b, c, theta) - dense)) <= 1e-8 * np.max(np.abs(dense))


@pytest.mark.parametrize("m,n", [(1, 1), (2, 2), (2, 3), (3, 4)])
def test_pade_fractions_reproduce_the_rational_function(m, n):
    import math

    k, rho, p = pade.pade_fractions(m, n)
    z = np.array([0.1, -0.1 + 0.05j, -0.2j])
    r = k + np.sum(rho[None, :] / (z[:, None] - p[None, :]), axis=1)
    assert np.max(np.abs(r - np.exp(z))) < 0.3 ** (m + n + 1)  # exp to order m + n near 0
    small = 1e-2
    # truncation error about small**(m+n+1), plus the round-off of summing residues that cancel
    terms = rho / (small - p)
    roundoff = 64 * np.finfo(float).eps * (abs(k) + np.sum(np.abs(terms)))
    assert abs(k + np.sum(terms) - math.exp(small)) < small ** (m + n) + roundoff
    assert np.all(p.real > 0)  # poles in the right half plane
    assert abs(k + np.sum(rho / (-1e6 - p))) <= (1.0 if m == n else 1e-5)  # A-stable: bounded at -inf


@pytest.mark.parametrize(
    "q,theta,orders,s,bound",
    [
        (64, 200.0, (3, 4), 8, 1e-7),  # the figures: Pade [3/4], 8 substeps, about 3e-8
        (64, 200.0, (2, 2), 16, 1e-4),
        (128, 784.0, (3, 4), 8, 1e-7),
    ],
)
def test_pade_step_matches_exact_zoh(q, theta, orders, s, bound):
    M, N = pade.pade_map(q, theta, orders, s)
    Ab, Bb = lti.legendre_discrete(q, theta)
    L = int(5 * theta)
    H, ref = lti.impulse_response(M, N, L), lti.impulse_response(Ab, Bb, L)
    err = np.max(np.abs(H - ref)) / np.max(np.abs(ref))
    assert err <= bound
    assert lti.spectral_radius(M) < 1
    # and RK4 with the same substep count is much worse (or unstable) at order 128, theta 784
    if q == 128:
        Mr, Nr = lti.rk_map(q, theta, 4, s)
        Hr = lti.impulse_response(Mr, Nr, L)
        with np.errstate(over="ignore", invalid="ignore"):
            rk_err = np.max(np.abs(Hr - ref)) / np.max(np.abs(ref))
        assert not rk_err <= 100 * err


def test_pade_step_runs_the_map_it_reports():
    q, theta = 16, 40.0
    M, N = pade.pade_map(q, theta, (2, 3), 3)
    rng = np.random.default_rng(5)
    m, u = rng.standard_normal((4, q)), rng.standard_normal(4)
    np.testing.assert_allclose(pade.pade_step(m, u, theta, (2, 3), 3), m @ M.T + u[:, None] * N, atol=1e-12)


def test_a_graph_folded_with_the_implicit_step_round_trips_through_the_ir_file(tmp_path):
    import lmu_edge
    from lmu_edge import ir

    layer = ir.LMU("lmu", 1, 16, 40.0, "zoh", np.ones((1, 1)), ir.ImpulseResponse())
    g = lmu_edge.fold(ir.Graph("p", 1, (layer,)), "pade", error_budget=1e-6)
    assert isinstance(g.layers[0].memory, ir.Pade)
    lmu_edge.save(g, tmp_path / "p.lmu.npz")
    back = lmu_edge.load(tmp_path / "p.lmu.npz")
    assert ir.equal(back, g)
    x = np.random.default_rng(2).standard_normal((2, 50, 1))
    np.testing.assert_array_equal(lmu_edge.simulate(back, x), lmu_edge.simulate(g, x))


def test_ir_refuses_unsupported_pade_orders_and_substeps():
    from lmu_edge import ir
    from lmu_edge.errors import ShapeError

    with pytest.raises(ShapeError, match="not supported"):
        ir.Pade(3, 2, 4)
    with pytest.raises(ShapeError, match="substeps"):
        ir.Pade(3, 4, 0)


@pytest.mark.parametrize("target", ["tflite", "onnx", "nengo", "nir"])
def test_the_cli_refuses_the_implicit_step_for_targets_without_it_in_one_line(tmp_path, target):
    # TFLite and ONNX have no triangular solve and a Loop per element pair costs more than dense ZOH's
    # whole step (docs/tflite_onnx.md); Nengo and NIR have no kernel for it either
    import subprocess

    from conftest import lmu_edge_cli
    from graphs import chain

    import lmu_edge

    g = chain(np.random.default_rng(3), q=8, theta=30.0)
    path = lmu_edge.save(g, tmp_path / "m.lmu.npz")
    args = ["convert", str(path), "--target", target, "--realization", "pade", "-o", str(tmp_path / "out")]
    r = subprocess.run(lmu_edge_cli() + args, capture_output=True, text=True, timeout=300)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode != 0 and "Traceback" not in r.stderr and len(lines) == 1, r.stderr
    for word in ("'pade'", repr(target), "--realization rk4", "zoh"):
        assert word in lines[0], lines[0]
