import numpy as np
import pytest
import scipy.signal
from hypothesis import given, settings
from hypothesis import strategies as st

from lmu_edge import lti


@settings(max_examples=40, deadline=None)
@given(q=st.integers(1, 64), theta=st.floats(0.5, 1e4), seed=st.integers(0, 2**31 - 1))
def test_structured_a_matvec_equals_dense_product(q, theta, seed):
    A, _ = lti.legendre_ab(q, theta)
    m = np.random.default_rng(seed).standard_normal((3, q))
    np.testing.assert_allclose(lti.a_matvec(m, theta), m @ A.T, rtol=1e-12, atol=1e-12 * np.abs(m @ A.T).max())


def test_legendre_ab_matches_the_paper_formula():
    q, theta = 5, 3.0
    A, B = lti.legendre_ab(q, theta)
    for i in range(q):
        assert B[i] == pytest.approx((2 * i + 1) * (-1) ** i / theta)
        for j in range(q):
            expect = (2 * i + 1) / theta * (-1 if i < j else (-1) ** (i - j + 1))
            assert A[i, j] == pytest.approx(expect)


@pytest.mark.parametrize("q,theta", [(1, 1.0), (6, 10.0), (32, 100.0), (64, 784.0)])
def test_zoh_equals_scipy_cont2discrete(q, theta):
    A, B = lti.legendre_ab(q, theta)
    Ad, Bd = lti.discretize(A, B, "zoh")
    Ad2, Bd2, *_ = scipy.signal.cont2discrete((A, B[:, None], np.eye(q), np.zeros((q, 1))), 1.0, method="zoh")
    np.testing.assert_allclose(Ad, Ad2, rtol=0, atol=1e-12)
    np.testing.assert_allclose(Bd, Bd2[:, 0], rtol=0, atol=1e-12)


def test_euler_is_identity_plus_a():
    A, B = lti.legendre_ab(7, 20.0)
    Ad, Bd = lti.discretize(A, B, "euler")
    np.testing.assert_array_equal(Ad, np.eye(7) + A)
    np.testing.assert_array_equal(Bd, B)


def test_impulse_response_blocks_equal_naive_powers():
    Ad, Bd = lti.legendre_discrete(6, 9.0)
    H = lti.impulse_response(Ad, Bd, 1300)  # crosses several 512-step blocks
    v, naive = Bd.copy(), []
    for _ in range(1300):
        naive.append(v)
        v = Ad @ v
    np.testing.assert_allclose(H, np.array(naive).T, rtol=1e-10, atol=1e-13)
    assert np.array_equal(H[:, 0], Bd)  # H[:, 0] = Bbar: the current input reaches the state


@pytest.mark.parametrize("r", [1, 2, 4])
def test_rk_step_is_the_taylor_polynomial_of_the_step(r):
    """Explicit RK of order r on m' = A m + B u (u held) is the degree-r Taylor map of hA."""
    q, theta, s = 6, 15.0, 3
    A, B = lti.legendre_ab(q, theta)
    h = 1.0 / s
    import math

    P = sum(np.linalg.matrix_power(h * A, k) / math.factorial(k) for k in range(r + 1))
    S = sum(np.linalg.matrix_power(h * A, k) / math.factorial(k + 1) for k in range(r))
    M1, N1 = P, h * S @ B
    M, N = np.eye(q), np.zeros(q)
    for _ in range(s):
        M, N = M1 @ M, M1 @ N + N1
    Mr, Nr = lti.rk_map(q, theta, r, s)
    np.testing.assert_allclose(Mr, M, atol=1e-13)
    np.testing.assert_allclose(Nr, N, atol=1e-13)


def test_classic_rk4_tableau_gives_the_same_step():
    q, theta = 8, 30.0
    A, B = lti.legendre_ab(q, theta)
    rng = np.random.default_rng(3)
    m, u = rng.standard_normal(q), 0.7

    def f(x):
        return A @ x + B * u

    h = 0.5
    for _ in range(2):
        k1 = f(m)
        k2 = f(m + h / 2 * k1)
        k3 = f(m + h / 2 * k2)
        k4 = f(m + h * k3)
        m = m + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    got = lti.rk_step(np.random.default_rng(3).standard_normal(q)[None], np.array([0.7]), theta, 4, 2)[0]
    np.testing.assert_allclose(got, m, rtol=1e-12, atol=1e-13)


def test_rk1_single_substep_is_euler_exactly():
    M, N = lti.rk_map(10, 25.0, 1, 1)
    A, B = lti.legendre_ab(10, 25.0)
    np.testing.assert_allclose(M, np.eye(10) + A, atol=1e-15)
    np.testing.assert_allclose(N, B, atol=1e-15)


def test_rk4_converges_to_zoh_with_substeps():
    Ad, Bd = lti.legendre_discrete(16, 40.0)
    errs = [np.abs(lti.rk_map(16, 40.0, 4, s)[0] - Ad).max() for s in (2, 4, 8)]
    assert errs[0] > errs[1] > errs[2]
    assert errs[1] / errs[2] > 10  # fourth order: about 16x per halving of h


def test_rk_step_float32_stays_float32():
    m = np.zeros((2, 4), np.float32)
    out = lti.rk_step(m, np.ones(2, np.float32), 5.0, 4, 2)
    assert out.dtype == np.float32


def test_costs():
    assert lti.dense_cost(4) == (2 * 16 + 8, 20)
    assert lti.rk_cost(10, 4, 3) == (28 * 10 * 3, 10)
    assert lti.fir_cost(10, 50) == (1000, 500)


@pytest.mark.parametrize("bad", [dict(order=0, theta=1.0), dict(order=3, theta=0.0), dict(order=3, theta=float("nan"))])
def test_bad_parameters_are_clear_errors(bad):
    with pytest.raises(ValueError, match="order|theta"):
        lti.legendre_ab(**bad)
