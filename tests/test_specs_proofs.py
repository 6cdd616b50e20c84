"""Exact specifications of the code generator's proof flags, checked where they decide: at their bound and
one step past it, through the code generator itself (targets/c_codegen.py generate_int), not only through the
proof functions.

- ``step32`` (the 16 x 16 dense memory's rounded step fits 31 bits): with ``S = sum_j |C_0j| 2^15 + |B_0|
  u_bound`` it holds iff ``S + 2^coeff_frac <= 2^(30 + coeff_frac)``, where ``u_bound`` is the largest
  |u| the encoder can output: max(|clamp_min|, |clamp_max|), or its table's largest |entry|. An encoder
  clamped to [-128, 127] reaches -128: a bound read from clamp_max alone (127) proves a step that
  overflows.
- ``wrap32`` (whole row sums in int32): with ``b = floor(state bound in LSBs)`` and ``K = 2 b`` (delta
  form) or ``b`` (direct), it holds iff the bound is proven and ``(K + 1) 2^coeff_frac <= 2^31``."""

import dataclasses

import numpy as np
import pytest
from graphs import chain
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import lmu_edge
from lmu_edge import qir
from lmu_edge.targets import c_codegen


@pytest.fixture(scope="module")
def base():
    """A quantized model with a 16-bit state and 16-bit coefficients (the 16 x 16 kernel reads both flags)."""
    rng = np.random.default_rng(5)
    g = lmu_edge.fold(chain(rng, n_in=1, q=4, theta=20.0, units=3), "zoh")
    qg = lmu_edge.quantize(g, rng.standard_normal((2, 100, 1)), state_bits=16)
    i = next(k for k, layer in enumerate(qg.layers) if isinstance(layer, qir.QLMU))
    L = qg.layers[i]
    assert L.state_type.width == 16 and L.memory.coeff_bits == 16
    return qg, i


def _flags(base, *, clamp=None, lut=None, B0=0, cf=1, form="delta", bound_lsb=0.0, proven=True, row0=None) -> dict:
    qg, i = base
    L = qg.layers[i]
    q = L.order
    enc = L.encoder
    if clamp is not None:
        enc = dataclasses.replace(enc, clamp_min=clamp[0], clamp_max=clamp[1], lut=lut)
    B = np.zeros(q, np.int64)
    B[0] = B0
    C = np.zeros((q, q), np.int16)
    if row0 is not None:
        C[0] = row0
    mem = qir.QDenseMemory(form, C, cf, 16, B, cf)
    L = dataclasses.replace(
        L, encoder=enc, memory=mem, state_bound=bound_lsb * 2.0**-L.state_type.frac, bound_proven=proven
    )
    graph = dataclasses.replace(qg, layers=qg.layers[:i] + (L,) + qg.layers[i + 1 :])
    code = c_codegen.generate_int(graph, "p")
    (acc,) = code.accumulators
    text = "\n".join(code.objects)
    assert (
        f".step32 = {int(acc['step_fits_int32'])}," in text and f".wrap32 = {int(acc['row_sum_fits_int32'])}," in text
    )
    return {"step32": acc["step_fits_int32"], "wrap32": acc["row_sum_fits_int32"]}


@settings(max_examples=60)
@given(lo=st.integers(-32768, -1), hi=st.integers(1, 32767), cf=st.integers(1, 10))
@example(lo=-128, hi=127, cf=1)  # an int8-clamped encoder: u_bound 128, not 127
@example(lo=-32768, hi=32767, cf=1)
@example(lo=-5, hi=30000, cf=3)
def test_step32_holds_at_its_bound_and_not_one_past_it(base, lo, hi, cf):
    """Spec: step32 iff |B_0| u_bound + 2^cf <= 2^(30 + cf), u_bound = max(|clamp_min|, |clamp_max|); the
    largest |B_0| for which it holds is floor((2^(30 + cf) - 2^cf) / u_bound), and one more fails."""
    ub = max(-lo, hi)
    at = ((1 << (30 + cf)) - (1 << cf)) // ub
    assume(at + 1 <= (1 << 31) - 1)  # B is int32
    assert _flags(base, clamp=(lo, hi), B0=at, cf=cf)["step32"]
    assert not _flags(base, clamp=(lo, hi), B0=at + 1, cf=cf)["step32"]
    assert not _flags(base, clamp=(lo, hi), B0=-(at + 1), cf=cf)["step32"]  # |B|: the sign does not matter


@settings(max_examples=40)
@given(seed=st.integers(0, 2**16), b0=st.integers(0, 3))
@example(seed=0, b0=0)
def test_step32_counts_the_coefficients_times_the_state_peak(base, seed, b0):
    """Spec: the coefficient term of step32's S is sum_j |C_0j| 2^(bits-1) (a 16-bit state: 2^15). At cf = 1
    and an int8-clamped encoder (u_bound 128), the largest sum_j |C_0j| that holds with |B_0| = b0 is
    floor((2^31 - 2 - 128 b0) / 2^15); one more unit in any column, of either sign, fails."""
    rng = np.random.default_rng(seed)
    at = ((1 << 31) - 2 - 128 * b0) >> 15
    row = rng.multinomial(at, np.ones(4) / 4)
    row = np.minimum(row, 32767)
    row[0] += at - row.sum()  # the rest in column 0 (at <= 65535: two full columns hold it)
    assume(row.max() <= 32767)
    signs = rng.choice([-1, 1], 4)
    assert _flags(base, clamp=(-128, 127), B0=b0, row0=row * signs)["step32"]
    j = int(np.argmin(row))
    past = row.copy()
    past[j] += 1
    assert not _flags(base, clamp=(-128, 127), B0=b0, row0=past * signs)["step32"]


@settings(max_examples=20)
@given(peak=st.integers(1, 128), seed=st.integers(0, 2**16))
@example(peak=128, seed=0)
def test_step32_reads_an_encoder_tables_largest_entry(base, peak, seed):
    """Spec: with a table (tanh, sigmoid) on the encoder, u_bound is its largest |entry|, not the clamp."""
    rng = np.random.default_rng(seed)
    lut = rng.integers(-peak + 1, peak, 256)
    lut[rng.integers(256)] = -peak if peak == 128 or rng.random() < 0.5 else peak
    ub = int(np.abs(lut).max())
    at = ((1 << 31) - 2) // ub
    assert _flags(base, clamp=(-128, 127), lut=lut, B0=at)["step32"]
    assert not _flags(base, clamp=(-128, 127), lut=lut, B0=at + 1)["step32"]


@settings(max_examples=60)
@given(cf=st.integers(1, 30), delta=st.booleans())
@example(cf=15, delta=True)
@example(cf=16, delta=False)
def test_wrap32_holds_at_its_bound_and_not_one_past_it(base, cf, delta):
    """Spec: wrap32 iff the bound is proven, b = floor(bound) fits the state and (K + 1) 2^cf <= 2^31 with
    K = 2 b (delta form) or b (direct); b one larger fails, and an unproven bound proves nothing."""
    k_max = (1 << (31 - cf)) - 1
    b = min(k_max // 2 if delta else k_max, 32767)
    form = "delta" if delta else "direct"
    assert _flags(base, cf=cf, form=form, bound_lsb=float(b))["wrap32"]
    assert not _flags(base, cf=cf, form=form, bound_lsb=b + 1.0)["wrap32"]
    assert not _flags(base, cf=cf, form=form, bound_lsb=float(b), proven=False)["wrap32"]


@settings(max_examples=60)
@given(bits=st.integers(2, 32), q=st.integers(1, 12), seed=st.integers(0, 2**16))
@example(bits=32, q=1, seed=0)  # an order-1 memory with a 32-bit state: its one column overflows int32
def test_dense_chunk_holds_at_its_bound_and_not_one_past_it(bits, q, seed):
    """Spec (dense_chunk): k columns are summed in int32 iff every aligned chunk's sum_j |C_ij| 2^(bits-1)
    <= 2^31 - 1. A row whose whole sum sits at that bound gets k = q (the generic kernels' 32-bit rows),
    one more unit in it less than q; a single column past it gives 0, never read as a proven row."""
    rng = np.random.default_rng(seed)
    limit = ((1 << 31) - 1) >> (bits - 1)
    assume(limit >= q)
    C = np.zeros((3, q), np.int64)
    C[0] = rng.multinomial(limit, np.ones(q) / q) * rng.choice([-1, 1], q)  # |row 0| sums to the bound
    C[1:] = rng.integers(-(limit // q), limit // q + 1, (2, q))
    assert c_codegen.dense_chunk(C, bits) == q
    past, i = C.copy(), rng.integers(q)
    past[0, i] += -1 if past[0, i] < 0 else 1  # |row 0| one past the bound
    assert c_codegen.dense_chunk(past, bits) < q
    single = np.zeros((1, q), np.int64)
    single[0, rng.integers(q)] = limit + 1
    assert c_codegen.dense_chunk(single, bits) == 0
    single[0, single.argmax()] = limit
    assert c_codegen.dense_chunk(single, bits) >= 1
