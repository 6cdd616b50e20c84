"""Saturation at both ends of every width in every integer kernel: the Python integer reference
(lmu_edge/intsim.py, lmu_edge/qir.py, lmu_edge/fixedpoint.py) against the C runtime
(firmware_templates/lmu_runtime.h, compiled on the host), on inputs over the whole domain and far past any
calibrated range.

Covered: the state -> activation requantizations into int8 and int16 (also the int16 -> int8 width
conversion, the same kernel), the 16x8 requantization (int32 ends), the int8 and int16 running-mean pools,
int8 and 16x8 linear layers at their clamps (the layers' C structs written by the code generator itself),
the int16 -> int8 and int8 -> int16 width conversions, and the dense LMU memory's state at 8, 16 and 32
bits with 16- and 32-bit coefficients (every kernel the code generator can pick). Each property also
asserts that both ends were reached, exactly at the width's range: a kernel clamping one value short
(int16 at -32767, say) fails in C or in the reference, whichever holds the slip."""

import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from quantized_memory import impulse

from lmu_edge import intsim, ir, lti, qir
from lmu_edge._quantization_memory import Calibrated, fir_memory, rk_memory
from lmu_edge.firmware_templates import path as templates
from lmu_edge.fixedpoint import INT32_MAX, INT32_MIN, FixedType
from lmu_edge.targets import c_codegen

RANGE = {8: (-128, 127), 16: (-32768, 32767), 32: (INT32_MIN, INT32_MAX)}


def _layers():
    """Linear layers whose outputs saturate on extreme inputs: int8 (full range and a ReLU clamp) and 16x8."""
    rng = np.random.default_rng(57)
    out = {}
    for name, bits, lo_hi, zp in (
        ("l8", 8, (-128, 127), 7),
        ("l8relu", 8, (-20, 127), -20),
        ("l16", 16, (-32768, 32767), 0),
    ):
        n_in, n_out = 6, 5
        w = rng.integers(-127, 128, (n_in, n_out))
        mult = rng.integers(1 << 30, 1 << 31, n_out)
        shift = rng.integers(-6, -3, n_out) if bits == 8 else rng.integers(-4, 0, n_out)
        part = qir.QPart(w, 5 if bits == 8 else 0, mult, shift)
        bias = rng.integers(-5000, 5000, n_out) * (1 if bits == 8 else 100)
        out[name] = qir.QLinear((part,), zp, *lo_hi, bias=bias, in_bits=bits)
    return out


LAYERS = _layers()


def _program() -> str:
    code = c_codegen.Code("spec")
    syms = {name: c_codegen._qlinear(code, name, q) for name, q in LAYERS.items()}
    arrays = "\n".join(
        f"static const {a['ctype']} {a['name']}[{a['count']}]{' LMU_ALIGN4' if a['align'] else ''} = "
        f"{{\n{a['body']}\n}};"
        for a in code.arrays
    )
    linear = "\n".join(
        f'        else if (!strcmp(op, "{name}")) {{ run_linear{16 if q.in_bits == 16 else 8}(&{syms[name]}, '
        f"{q.in_sizes[0]}, {q.units}); }}"
        for name, q in LAYERS.items()
    )
    return (
        r"""
#include <stdio.h>
#include <string.h>
#include <inttypes.h>
#include "lmu_runtime.h"
"""
        + arrays
        + "\n"
        + "\n".join(code.objects)
        + r"""
static int64_t rd(void) { int64_t v = 0; if (scanf("%" SCNd64, &v) != 1) { v = 0; } return v; }
static void run_linear8(const lmu_qlinear_t *L, int32_t n_in, int32_t n_out) {
    int8_t x[64]; int32_t out[64], i; const int8_t *in[1];
    for (i = 0; i < n_in; ++i) x[i] = (int8_t)rd();
    in[0] = x; lmu_qlinear(L, in, out);
    for (i = 0; i < n_out; ++i) printf("%" PRId32 "\n", out[i]);
}
static void run_linear16(const lmu_qlinear_t *L, int32_t n_in, int32_t n_out) {
    int16_t x[64]; int32_t out[64], i; const int16_t *in[1];
    for (i = 0; i < n_in; ++i) x[i] = (int16_t)rd();
    in[0] = x; lmu_qlinear16(L, in, out);
    for (i = 0; i < n_out; ++i) printf("%" PRId32 "\n", out[i]);
}
#define DENSE(KERNEL, ST, CT, PT)                                                          \
    {                                                                                      \
        static CT C[64 * 64]; static int32_t B[64]; static ST m[64]; static int64_t tmp[64]; \
        PT cfg; int32_t i, t, u[1];                                                        \
        for (i = 0; i < q * q; ++i) C[i] = (CT)rd();                                       \
        for (i = 0; i < q; ++i) { B[i] = (int32_t)rd(); m[i] = 0; }                        \
        cfg.d = 1; cfg.q = q; cfg.C = C; cfg.B = B; cfg.coeff_frac = cf; cfg.delta = delta; \
        cfg.bits = bits; cfg.chunk = chunk; cfg.step32 = 0; cfg.wrap32 = 0;                \
        for (t = 0; t < T; ++t) {                                                          \
            u[0] = (int32_t)rd();                                                          \
            KERNEL(&cfg, m, u, tmp);                                                       \
            for (i = 0; i < q; ++i) printf("%" PRId64 "\n", (int64_t)m[i]);                \
        }                                                                                  \
    }
#define RK(KERNEL, ST)                                                                     \
    {                                                                                      \
        static int32_t hc[64], x[64]; static int64_t w[4 * 64]; static ST m[64];          \
        lmu_rk_memory_t cfg; int32_t i, t, u[1];                                           \
        for (i = 0; i < q; ++i) { hc[i] = (int32_t)rd(); m[i] = 0; }                       \
        cfg.d = 1; cfg.q = q; cfg.hc = hc; cfg.hc_frac = a; cfg.r = b; cfg.substeps = c;    \
        cfg.u_shift = e; cfg.bits = bits; cfg.guard = g;                                   \
        for (t = 0; t < T; ++t) {                                                          \
            u[0] = (int32_t)rd();                                                          \
            KERNEL(&cfg, m, u, w, x);                                                      \
            for (i = 0; i < q; ++i) printf("%" PRId64 "\n", (int64_t)m[i]);               \
        }                                                                                  \
    }
#define FIR(KERNEL, ST, CT, PT)                                                            \
    {                                                                                      \
        static CT K[64 * 64]; static ST m[64], buf[64]; int32_t head = 0;                  \
        PT cfg; int32_t i, t, u[1];                                                        \
        for (i = 0; i < q * a; ++i) K[i] = (CT)rd();                                       \
        for (i = 0; i < a; ++i) buf[i] = 0;                                                \
        cfg.d = 1; cfg.q = q; cfg.K = K; cfg.L = a; cfg.shift = e; cfg.bits = bits;        \
        for (t = 0; t < T; ++t) {                                                          \
            u[0] = (int32_t)rd();                                                          \
            KERNEL(&cfg, m, u, buf, &head);                                                \
            for (i = 0; i < q; ++i) printf("%" PRId64 "\n", (int64_t)m[i]);               \
        }                                                                                  \
    }
int main(void) {
    char op[16];
    while (scanf("%15s", op) == 1) {
        if (!strcmp(op, "Q8")) { int64_t v = rd(), m = rd(), s = rd(), zp = rd();
            printf("%d\n", (int)lmu_requant8((int32_t)v, (int32_t)m, (int32_t)s, (int32_t)zp)); }
        else if (!strcmp(op, "Q16")) { int64_t v = rd(), m = rd(), s = rd(), zp = rd();
            printf("%d\n", (int)lmu_requant16((int32_t)v, (int32_t)m, (int32_t)s, (int32_t)zp)); }
        else if (!strcmp(op, "M16")) { int64_t a = rd(), m = rd(), s = rd();
            printf("%" PRId32 "\n", lmu_mbqm16(a, (int32_t)m, (int32_t)s)); }
        else if (!strcmp(op, "P8") || !strcmp(op, "P16")) {
            int64_t n = rd(), zp = rd(), m = rd(), s = rd(), oz = rd(), sum = 0; int32_t count = 0, t;
            for (t = 0; t < n; ++t) {
                if (op[1] == '8') { int8_t x = (int8_t)rd(), y;
                    lmu_qpool(&sum, &count, &x, &y, 1, (int32_t)zp, (int32_t)m, (int32_t)s, (int32_t)oz);
                    printf("%d\n", (int)y); }
                else { int16_t x = (int16_t)rd(), y;
                    lmu_qpool16(&sum, &count, &x, &y, 1, (int32_t)zp, (int32_t)m, (int32_t)s, (int32_t)oz);
                    printf("%d\n", (int)y); }
            }
        }
        else if (op[0] == 'D') { /* D<state bits><coeff bits>: q cf delta bits chunk T, C, B, u */
            const int32_t q = (int32_t)rd(), cf = (int32_t)rd(), delta = (int32_t)rd(), bits = (int32_t)rd();
            const int32_t chunk = (int32_t)rd(), T = (int32_t)rd();
            if (!strcmp(op, "D8_16")) DENSE(lmu_dense_memory_s8_c16, int8_t, int16_t, lmu_dense_memory_c16_t)
            else if (!strcmp(op, "D8_32")) DENSE(lmu_dense_memory_s8_c32, int8_t, int32_t, lmu_dense_memory_c32_t)
            else if (!strcmp(op, "D16_16")) DENSE(lmu_dense_memory_s16_c16, int16_t, int16_t, lmu_dense_memory_c16_t)
            else if (!strcmp(op, "D16_32")) DENSE(lmu_dense_memory_s16_c32, int16_t, int32_t, lmu_dense_memory_c32_t)
            else if (!strcmp(op, "D32_16")) DENSE(lmu_dense_memory_s32_c16, int32_t, int16_t, lmu_dense_memory_c16_t)
            else DENSE(lmu_dense_memory_s32_c32, int32_t, int32_t, lmu_dense_memory_c32_t)
        }
        else if (op[0] == 'R' || op[0] == 'F') {
            /* R<bits>: q hc_frac r substeps u_shift bits guard T, hc, u;
               F<bits>_<coeff bits>: q L - - shift bits - T, K, u */
            const int32_t q = (int32_t)rd(), a = (int32_t)rd(), b = (int32_t)rd(), c = (int32_t)rd();
            const int32_t e = (int32_t)rd(), bits = (int32_t)rd(), g = (int32_t)rd(), T = (int32_t)rd();
            (void)b; (void)c; (void)g;
            if (!strcmp(op, "R8")) RK(lmu_rk_memory_s8, int8_t)
            else if (!strcmp(op, "R16")) RK(lmu_rk_memory_s16, int16_t)
            else if (!strcmp(op, "R32")) RK(lmu_rk_memory_s32, int32_t)
            else if (!strcmp(op, "F8_16")) FIR(lmu_fir_memory_s8_c16, int8_t, int16_t, lmu_fir_memory_c16_t)
            else if (!strcmp(op, "F8_32")) FIR(lmu_fir_memory_s8_c32, int8_t, int32_t, lmu_fir_memory_c32_t)
            else if (!strcmp(op, "F16_16")) FIR(lmu_fir_memory_s16_c16, int16_t, int16_t, lmu_fir_memory_c16_t)
            else if (!strcmp(op, "F16_32")) FIR(lmu_fir_memory_s16_c32, int16_t, int32_t, lmu_fir_memory_c32_t)
            else if (!strcmp(op, "F32_16")) FIR(lmu_fir_memory_s32_c16, int32_t, int16_t, lmu_fir_memory_c16_t)
            else FIR(lmu_fir_memory_s32_c32, int32_t, int32_t, lmu_fir_memory_c32_t)
        }
"""
        + linear
        + r"""
    }
    return 0;
}
"""
    )


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed (Debian: gcc)")
    d = tmp_path_factory.mktemp("sat")
    (d / "t.c").write_text(_program())
    flags = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-fsanitize=undefined", "-fno-sanitize-recover"]
    subprocess.run(["gcc", *flags, f"-I{templates()}", str(d / "t.c"), "-o", str(d / "t"), "-lm"], check=True)

    def run(lines) -> np.ndarray:
        text = "\n".join(" ".join(str(int(v)) if not isinstance(v, str) else v for v in r) for r in lines) + "\n"
        r = subprocess.run([str(d / "t")], input=text, capture_output=True, text=True, check=True)
        assert not r.stderr, r.stderr  # UBSan: no signed overflow on the way to a saturated result
        return np.array([int(v) for v in r.stdout.split()], dtype=np.int64)

    return run


def _both_ends(got, bits, lo=None, hi=None):
    lo_, hi_ = RANGE[bits]
    lo, hi = lo_ if lo is None else lo, hi_ if hi is None else hi
    assert got.min() >= lo and got.max() <= hi
    assert got.min() == lo and got.max() == hi, (got.min(), got.max(), lo, hi)


i32 = st.integers(INT32_MIN, INT32_MAX)
mults = st.integers(1 << 30, (1 << 31) - 1)


@settings(max_examples=60)
@given(
    v=st.lists(i32, min_size=20, max_size=20),
    m=mults,
    s=st.integers(-31, 8),
    zp8=st.integers(-128, 127),
)
@example(v=[0] * 20, m=1 << 30, s=0, zp8=0)
def test_requantizations_saturate_at_both_ends_of_int8_and_int16(kernels, v, m, s, zp8):
    """lmu_requant8 / lmu_requant16 (state -> activations, the int16 -> int8 conversion) against
    intsim.requant8 at 8 and 16 bits on any int32 value, the int32, int16 and int8 extremes included: equal,
    and both ends of each activation width reached."""
    ext = [INT32_MIN, INT32_MAX, -32768, 32767, -128, 127]
    v = np.array(v + ext, np.int64)
    for bits, op, zp in ((8, "Q8", zp8), (16, "Q16", 0)):
        rows = [(op, x, m, s, zp) for x in v]
        got = kernels(rows)
        np.testing.assert_array_equal(got, intsim.requant8(v, m, s, zp, bits))
        assert qir.act_range(bits) == RANGE[bits]
        if s >= (-22 if bits == 8 else -15):  # INT32_MIN / MAX times m 2^s are past the range: both ends
            _both_ends(got, bits)


@settings(max_examples=60)
@given(
    acc=st.lists(st.integers(-(1 << 47) + 1, (1 << 47) - 1), min_size=10, max_size=10), m=mults, s=st.integers(-16, 14)
)
def test_16x8_requantization_saturates_at_both_ends_of_int32(kernels, acc, m, s):
    acc = np.array(acc + [(1 << 47) - 1, -(1 << 47) + 1], np.int64)
    got = kernels([("M16", a, m, s) for a in acc])
    np.testing.assert_array_equal(got, qir.mbqm16(acc, m, s))
    if s >= 0:  # 2^47 m16 / 2^(15 - s) >= 2^31: both ends saturate
        _both_ends(got, 32)


def _pool_reference(bits, xs, zp, m, s, oz):
    r = intsim._PoolRun(qir.QPool("p", zp, m, s, 1.0, oz, bits))
    r.reset(1)
    return r.seq(np.array(xs, np.int64)[None, :, None]).ravel()


@settings(max_examples=40)
@given(
    bits=st.sampled_from([8, 16]),
    head=st.lists(st.integers(-32768, 32767), min_size=0, max_size=20),
    m=mults,
    s=st.integers(-12, 0),
    zp=st.integers(-16, 16),
    oz=st.integers(-16, 16),
)
@example(bits=16, head=[], m=1 << 30, s=-2, zp=0, oz=0)
@example(bits=8, head=[], m=1 << 30, s=-4, zp=0, oz=0)
def test_running_mean_pools_saturate_at_both_ends(kernels, bits, head, m, s, zp, oz):
    """lmu_qpool / lmu_qpool16 against intsim's pool: any inputs, then long runs at the width's extremes, far
    past the calibrated range (the mean goes to the extreme, and out_zp + the requantized mean beyond the
    activation range): equal at every step, and both ends of the width reached."""
    lo, hi = RANGE[bits]
    if bits == 16:
        zp, oz = 0, 0  # int16 activations are symmetric
    xs = [min(max(x, lo), hi) for x in head] + [lo] * 40 + [hi] * 200 + [lo] * 600
    rows = [(f"P{bits}", len(xs), zp, m, s, oz, *xs)]
    got = kernels(rows)
    np.testing.assert_array_equal(got, _pool_reference(bits, xs, zp, m, s, oz))
    if s >= -4:  # the requantized mean of the extremes is past the range: both ends saturate
        _both_ends(got, bits)


@settings(max_examples=40)
@given(x=st.lists(st.integers(-32768, 32767), min_size=6, max_size=6), name=st.sampled_from(sorted(LAYERS)))
def test_linear_layers_saturate_at_their_clamps(kernels, x, name):
    """lmu_qlinear / lmu_qlinear16 (structs written by the code generator) against intsim.linear on any
    input, and on the extreme inputs that drive each output to its lower and to its upper clamp."""
    q = LAYERS[name]
    lo, hi = RANGE[q.in_bits]
    w = q.parts[0].kernel
    rows = [np.clip(x, lo, hi)]
    for j in range(q.units):  # the inputs that push output j furthest down and up
        rows += [np.where(w[:, j] > 0, lo, hi), np.where(w[:, j] > 0, hi, lo)]
    xs = np.array(rows, np.int64)
    got = kernels([(name, *r) for r in xs]).reshape(len(xs), q.units)
    np.testing.assert_array_equal(got, intsim.linear(q, [xs]))
    ends = got[1:]
    assert ends.min() == q.clamp_min and ends.max() == q.clamp_max


def test_width_conversions_reach_both_ends():
    """int8 -> int16 (``(x - zp) * 128``, exact: |x - zp| <= 255 puts it within int16) and int16 -> int8
    (lmu_requant8, compared above) in the reference: each width's ends map to the other's."""
    for zp in (-128, 0, 127):
        up = intsim._ConvertRun(qir.QConvert("c", zp, 0, 0, 1.0, 0, 16)).step(np.array([[-128, 127]], np.int64))
        assert RANGE[16][0] <= up.min() and up.max() <= RANGE[16][1]
    down = intsim._ConvertRun(qir.QConvert("c", 0, 1 << 30, -6, 1.0, 3, 8)).step(np.array([[-32768, 32767]], np.int64))
    assert down.tolist() == [[-128, 127]]


DENSE_KERNELS = [(8, 16), (8, 32), (16, 16), (16, 32), (32, 16), (32, 32)]


@settings(max_examples=40)
@given(
    kernel=st.sampled_from(DENSE_KERNELS),
    q=st.integers(1, 9),
    delta=st.booleans(),
    wild=st.booleans(),
    seed=st.integers(0, 2**16),
    cf=st.integers(1, 12),
)
@example(kernel=(32, 32), q=1, delta=False, wild=True, seed=0, cf=1)  # one column past int32 (order 1)
def test_dense_memory_states_saturate_at_both_ends_of_every_width(kernels, kernel, q, delta, wild, seed, cf):
    """Every dense memory kernel (8-, 16-, 32-bit state x 16-, 32-bit coefficients) against
    intsim.memory_response, equal after every step, on runs of the input's extremes (past any calibrated
    range). ``wild``: coefficients over their whole width (sums past int32: the kernels must take 64 bits);
    otherwise coefficients small against 2^coeff_frac, so the state follows B u into saturation at both
    ends, -2^(bits-1) and 2^(bits-1) - 1, which is asserted. |C m| + |B u| stays below 2^61 (exact in
    int64, as the quantizer proves for its memories)."""
    st_bits, c_bits = kernel
    rng = np.random.default_rng(seed)
    c_max = min((1 << (c_bits - 1)) - 1, (1 << max(1, 60 - st_bits - q.bit_length())) - 1)
    if not wild:
        c_max = min(c_max, (1 << cf) // (4 * q))
    C = rng.integers(-c_max, c_max + 1, (q, q))
    B = rng.integers(1 << 20, 1 << 30, q) * rng.choice([-1, 1], q)
    u = np.concatenate([np.full(25, 32767), np.full(25, -32768), rng.integers(-32768, 32768, 10)])
    chunk = c_codegen.dense_chunk(C, st_bits)
    layer = _lmu_with_memory(qir.QDenseMemory("delta" if delta else "direct", C, cf, c_bits, B, cf), q, st_bits)
    want = intsim.memory_response(layer, u[:, None])
    rows = [(f"D{st_bits}_{c_bits}", q, cf, int(delta), st_bits, chunk, len(u)), tuple(C.ravel()), tuple(B), tuple(u)]
    got = kernels(rows).reshape(len(u), q)
    np.testing.assert_array_equal(got, want)
    if not wild:
        _both_ends(got, st_bits)


def _driven_past_its_range(node, q, st_bits, u_type, theta, gain, rng):
    """``(layer, u)``: a QLMU with memory ``node`` whose state has ``gain`` more fractional bits than the
    worst-case input's peak needs, and that input (the encoder output at its clamp, the widest component's
    impulse-response signs read backwards), then its negation, then random steps: the state goes past both
    ends of its range by 2^gain (tests/test_state_bounds.py: this input reaches the bound)."""
    lo, hi = RANGE[u_type.width]
    H = impulse(_lmu_with_memory(node, q, st_bits, FixedType(st_bits, 0), u_type), int(4 * theta) + 8)
    i = int(np.argmax(np.abs(H).sum(axis=0)))
    peak = float(np.abs(H[:, i]).sum()) * hi * u_type.scale
    frac = int(np.ceil(np.log2(2.0 ** (st_bits - 1) / peak))) + gain
    s = H[::-1, i] >= 0
    u = np.concatenate([np.where(s, hi, lo), np.where(s, lo, hi), rng.integers(lo, hi + 1, 10)])
    return _lmu_with_memory(node, q, st_bits, FixedType(st_bits, frac), u_type), u


@settings(max_examples=30)
@given(
    st_bits=st.sampled_from([8, 16, 32]),
    r=st.sampled_from([1, 2, 4]),
    substeps=st.integers(1, 3),
    q=st.integers(2, 10),
    theta=st.floats(4.0, 30.0),
    gain=st.integers(2, 4),
    seed=st.integers(0, 2**16),
)
@example(st_bits=32, r=4, substeps=2, q=6, theta=12.0, gain=4, seed=0)
def test_rk_memory_states_saturate_at_both_ends_of_every_width(kernels, st_bits, r, substeps, q, theta, gain, seed):
    """Every RK memory kernel (8-, 16-, 32-bit state) against intsim.memory_response, equal after every step,
    on the quantizer's own coefficients (rk_memory), the worst-case input and its negation driving the state
    2^gain past both ends of its range: saturated at both ends (asserted), through the working value's
    saturation at bits + guard and the state's at bits."""
    M, _ = lti.rk_map(q, theta, r, substeps)
    assume(lti.spectral_radius(M) < 1)  # fold never picks an unstable step (its gains are infinite)
    u_type = FixedType(st_bits, st_bits - 4)
    node, _, _, err, _ = rk_memory(ir.RungeKutta(r, substeps), q, theta, st_bits, u_type, 200, [], Calibrated(1.0))
    assume(err < 0.05)  # a realization fold can choose: near the exact response (not transients 50x its gain)
    layer, u = _driven_past_its_range(node, q, st_bits, u_type, theta, gain, np.random.default_rng(seed))
    state = layer.state_type
    want = intsim.memory_response(layer, u[:, None])
    u_shift = u_type.frac - state.frac - node.guard  # as the code generator writes it
    head = (f"R{st_bits}", q, node.hc_frac, r, substeps, u_shift, st_bits, node.guard, len(u))
    got = kernels([head, tuple(node.hc), tuple(u)]).reshape(len(u), q)
    np.testing.assert_array_equal(got, want)
    _both_ends(got, st_bits)


@settings(max_examples=30)
@given(
    kernel=st.sampled_from(DENSE_KERNELS),
    q=st.integers(1, 8),
    theta=st.floats(4.0, 20.0),
    gain=st.integers(2, 4),
    seed=st.integers(0, 2**16),
)
@example(kernel=(32, 32), q=6, theta=10.0, gain=4, seed=0)
@example(kernel=(8, 16), q=1, theta=4.0, gain=2, seed=0)
def test_fir_memory_states_saturate_at_both_ends_of_every_width(kernels, kernel, q, theta, gain, seed):
    """Every FIR memory kernel (8-, 16-, 32-bit state x 16-, 32-bit coefficients) against
    intsim.memory_response, equal after every step, on the quantizer's own kernel (fir_memory, the Legendre
    impulse response), the worst-case input and its negation driving the state 2^gain past both ends of its
    range: saturated at both ends (asserted). u fits the state's type (the quantizer
    gives u the state's width), as the C ring buffer of state-typed entries needs."""
    st_bits, c_bits = kernel
    u_type = FixedType(st_bits, st_bits - 4)
    K = lti.legendre_impulse_response(q, theta, int(2 * theta))
    node, *_ = fir_memory(ir.FIR(K), q, st_bits, c_bits, u_type, [], Calibrated(1.0))
    layer, u = _driven_past_its_range(node, q, st_bits, u_type, theta, gain, np.random.default_rng(seed))
    state = layer.state_type
    want = intsim.memory_response(layer, u[:, None])
    shift = node.kernel_frac + u_type.frac - state.frac  # as the code generator writes it
    L = node.kernel.shape[1]
    head = (f"F{st_bits}_{16 if node.coeff_bits <= 16 else 32}", q, L, 0, 0, shift, st_bits, 0, len(u))
    got = kernels([head, tuple(np.asarray(node.kernel).ravel()), tuple(u)]).reshape(len(u), q)
    np.testing.assert_array_equal(got, want)
    _both_ends(got, st_bits)


def _lmu_with_memory(mem, q, st_bits, state=None, u_type=None):
    """A QLMU whose memory is ``mem`` (state: ``st_bits`` bits, frac 0 unless given); the other fields are
    never read by intsim.memory_response."""
    enc = LAYERS["l8"]
    return qir.QLMU(
        "m",
        1,
        q,
        1.0,
        "dense",
        enc,
        state or FixedType(st_bits, 0),
        u_type or FixedType(16, 0),
        mem,
        1.0,
        0,
        (1 << 30, 0),
        1.0,
        1.0,
        0,
    )
