"""The integer reference's matrix product (``intsim.imatmul``): exact, whichever way it computes.

It multiplies through float64 BLAS where no partial sum can reach 2^53 and in int64 otherwise; the
specification is the exact integer product (Python integers), over magnitudes on both sides of that bound,
shapes with empty and broadcast (stacked) operands, and signs at the int32 ends.
"""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from lmu_edge.intsim import imatmul


def _exact(x, w):
    return (x.astype(object) @ w.astype(object)).astype(np.int64)


@given(
    seed=st.integers(0, 2**32 - 1),
    x_bits=st.integers(1, 32),
    w_bits=st.integers(1, 32),
    n=st.integers(0, 5),
    k=st.integers(0, 40),
    m=st.integers(0, 6),
    stacked=st.booleans(),
    fixed=st.booleans(),
)
def test_imatmul_is_the_exact_integer_product(seed, x_bits, w_bits, n, k, m, stacked, fixed):
    # int32-range operands (every integer path's), with K small enough that the exact sum fits in int64;
    # x_bits + w_bits + log2(k) spans both sides of the float path's 2^53 bound
    rng = np.random.default_rng(seed)
    x = rng.integers(-(1 << (x_bits - 1)), 1 << (x_bits - 1), (3, n, k) if stacked else (n, k), dtype=np.int64)
    w = rng.integers(-(1 << (w_bits - 1)), 1 << (w_bits - 1), (k, m), dtype=np.int64)
    if x.size:  # the extreme values, where a rounding float sum would first show
        x.flat[0] = -(1 << (x_bits - 1))
    if w.size:
        w.flat[-1] = -(1 << (w_bits - 1))
    if fixed:  # a read-only w (a layer's weights): its float64 form and bound term are kept from a first
        w.setflags(write=False)  # product with small x, and must still send a large x to int64
        np.testing.assert_array_equal(imatmul(np.ones((1, k), np.int64), w), _exact(np.ones((1, k), np.int64), w))
    got = imatmul(x, w)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.stack([_exact(xi, w) for xi in x]) if stacked else _exact(x, w))


def test_imatmul_at_the_float_bound_is_still_exact():
    # a single column whose exact sum is 2^53 + 1 (float64 cannot hold it): the bound must send it to int64
    x = np.array([[1 << 26, 1 << 26, 1]], np.int64)
    w = np.array([[1 << 26], [1 << 26], [1]], np.int64)
    assert int(imatmul(x, w)[0, 0]) == (1 << 53) + 1
    # just below: through float64, exact
    w2 = np.array([[1 << 26], [(1 << 26) - 2], [1]], np.int64)
    assert int(imatmul(x, w2)[0, 0]) == (1 << 53) - (1 << 27) + 1


def test_imatmul_keeps_nothing_of_weights_that_can_change():
    # a read-only view of a writeable array changes with it: the product follows the new values
    base = np.arange(6, dtype=np.int64).reshape(3, 2)
    w = base.view()
    w.setflags(write=False)
    x = np.array([[1, 2, 3]], np.int64)
    assert imatmul(x, w).tolist() == [[16, 22]]
    base[0, 0] = 100
    assert imatmul(x, w).tolist() == [[116, 22]]
    # a read-only array of its own is kept, and a second one with other values is not taken for it
    a = np.array([[1], [1], [1]], np.int64)
    a.setflags(write=False)
    b = np.array([[2], [2], [2]], np.int64)
    b.setflags(write=False)
    assert imatmul(x, a).tolist() == [[6]] and imatmul(x, b).tolist() == [[12]] and imatmul(x, a).tolist() == [[6]]
