"""The int8 dense-layer kernels of an acc30 layer (lmu_qlinear30) on every kernel path: the portable C loop on
the host, the DSP four-row path (Cortex-M4), the Helium four-rows-per-vector path with its vector
requantization and table gather (Cortex-M55) and the ARMv6-M path (Cortex-M0), run under QEMU on crafted
layers and compared bit for bit with the host; and the Helium requantization of a 16-bit state with a
compile-time shift (lmu_requant8_s16's VQRSHRNB form); and the 16 x 16 FIR memory's row (lmu_fir_row16: on
the DSP path SMLALDX pairs over the two runs of the ring buffer)."""

import pytest
from arm_programs import host_output as _host_output
from arm_programs import run_program as _run_program

#: (n_out, n_in, bias, zsum, table, int8 output): the Helium path's cases - n_in a multiple of 16 in
#: 16..112 takes the unrolled assembly rows (lmu_mve_qdot4c) for every full block of four rows, other
#: n_in (1, 3, 17, 113, 128) the intrinsic loop with its predicated tail; n_out % 4 gives the predicated
#: last block (its row pointers repeat the block's first row, its lanes are not stored)
_LAYERS = [
    (1, 1, 1, 1, 0, 1),
    (3, 1, 1, 0, 1, 1),
    (4, 16, 0, 1, 0, 1),
    (5, 17, 1, 1, 1, 1),
    (7, 64, 1, 1, 1, 1),
    (8, 64, 1, 1, 0, 1),
    (11, 64, 0, 0, 1, 1),
    (6, 112, 1, 1, 0, 1),
    (4, 113, 1, 1, 0, 0),
    (9, 128, 1, 0, 1, 1),
    (2, 3, 1, 1, 0, 0),
    (12, 48, 1, 1, 0, 0),
    (13, 32, 0, 1, 1, 1),
]
#: the expanded weights' extra cases (DSP path): odd numbers of groups (11, 5: the one group before the pairs),
#: a tail of two columns (22: the int8 layout's column order read by the C loop)
_WX_LAYERS = [(6, 44, 1, 1, 0, 1), (5, 22, 0, 1, 0, 0)]

#: crafted acc30 layers; parts of 8 or more inputs also carry expanded weights (LMU_WX: read by the DSP cores only)
_DENSE_C = r"""
#include <stdio.h>
#include <string.h>
#include "lmu_runtime.h"
/* Crafted acc30 layers (one part, right shifts 0..31, |bias| + |zsum| + 128 * 128 * n_in < 2^30): random
 * int8 weights and inputs, multipliers in [2^30, 2^31), per-row shifts (0 and the far ones included, so
 * outputs saturate at both ends and round everywhere between), a random table; a canary after the output. */
static uint32_t st = 2463534242u;
static int32_t rnd(int32_t lo, int32_t hi) {
    st ^= st << 13; st ^= st >> 17; st ^= st << 5;
    return lo + (int32_t)(st % (uint32_t)(hi - lo + 1));
}
static uint32_t h = 2166136261u;
static long n = 0, bad = 0;
/* the expanded weights' layout of an int8 layer (LMU_WX, lmu_qlinear.h): 4 x 4 blocks, zero-padded, each group's
 * columns in the order 0, 2, 1, 3; read on the DSP cores only */
static void expand8(int16_t *wx, const int8_t *w, int32_t no, int32_t ni) {
    static const int32_t col[4] = {0, 2, 1, 3};
    const int32_t g = (ni + 3) / 4;
    int32_t r, c;
    memset(wx, 0, sizeof(int16_t) * 16 * (size_t)((no + 3) / 4) * (size_t)g);
    for (r = 0; r < no; ++r)
        for (c = 0; c < ni; ++c) wx[((r / 4 * g + c / 4) * 4 + r % 4) * 4 + col[c % 4]] = w[r * ni + c];
}
#define CASE(NO, NI, BIAS, ZSUM, TABLE, Y8)                                                                    \
    {                                                                                                         \
        static int8_t w[NO * NI], x[NI], lut[256], y[NO + 8];                                                 \
        static int16_t wx[16 * ((NO + 3) / 4) * ((NI + 3) / 4)] LMU_ALIGN4;                                   \
        static int32_t zs[NO], bi[NO], mu[NO], sh[NO], acc[NO], out[NO + 8];                                  \
        static const lmu_qpart_t part = {.w = w, .n_in = NI, .zsum = ZSUM ? zs : NULL, .mult = mu, .shift = sh, \
                                         .wx = NI >= 8 ? wx : NULL};                                          \
        static const lmu_qlinear_t L = {.parts = &part, .n_parts = 1, .n_out = NO, .bias = BIAS ? bi : NULL,   \
                                         .out_zp = Y8 ? -3 : 11, .clamp_min = Y8 ? -128 : -32768,             \
                                         .clamp_max = Y8 ? 127 : 32767, .lut = TABLE ? lut : NULL,            \
                                         .right_shifts = 1, .acc30 = 1};                                      \
        const int8_t *in_[1];                                                                                 \
        int32_t t, i;                                                                                         \
        in_[0] = x;                                                                                           \
        for (i = 0; i < 256; ++i) lut[i] = (int8_t)rnd(-128, 127);                                            \
        for (t = 0; t < 60; ++t) {                                                                            \
            for (i = 0; i < NO * NI; ++i) w[i] = (int8_t)rnd(-128, 127);                                      \
            expand8(wx, w, NO, NI);                                                                           \
            for (i = 0; i < NI; ++i) x[i] = (int8_t)rnd(-128, 127);                                           \
            for (i = 0; i < NO; ++i) {                                                                        \
                zs[i] = rnd(-(1 << 26), 1 << 26);                                                             \
                bi[i] = rnd(-(1 << 26), 1 << 26);                                                             \
                mu[i] = rnd(1 << 30, 2147483647);                                                             \
                sh[i] = i % 5 == 0 ? 0 : (i % 5 == 1 ? -31 : -rnd(6, 24));                                    \
            }                                                                                                 \
            for (i = 0; i < 8; ++i) y[NO + i] = 0x5A, out[NO + i] = 0x5A5A5A5A;                                \
            if (Y8) lmu_qlinear_i8(&L, in_, acc, y); else lmu_qlinear(&L, in_, out);                          \
            for (i = 0; i < NO; ++i, ++n) h = (h ^ (uint32_t)(Y8 ? y[i] : out[i])) * 16777619u;               \
            for (i = 0; i < 8; ++i) bad += Y8 ? y[NO + i] != 0x5A : out[NO + i] != 0x5A5A5A5A;                \
        }                                                                                                     \
    }
int main(void) {
    CASES
    printf("n %ld bad %ld hash %lu\n", n, bad, (unsigned long)h);
    return 0;
}
"""


def _source() -> str:
    cases = " ".join(f"CASE({', '.join(str(v) for v in c)})" for c in _LAYERS + _WX_LAYERS)
    return _DENSE_C.replace("CASES", cases)


@pytest.mark.parametrize("runtime", ["cortex-m55", "cortex-m55-O1", "cortex-m4", "cortex-m0"])
def test_acc30_dense_layers_give_the_host_integers_on_every_path(tmp_path, runtime):
    """Every crafted layer's outputs hash to the host's (the portable loop) on the Helium, DSP and ARMv6-M
    paths, and nothing is written past a layer's last output: the vector requantization (VQRDMULH, the
    rounding term only where the shift is not 0, VRSHL, out_zp, clamp, table gather) and the four-row
    sums (assembly and intrinsics, full and predicated blocks) are exact. On the DSP path (Cortex-M4) layers of
    8 or more inputs carry expanded weights (LMU_WX: lmu_wx8_groups, the odd group and the n % 4 tail in C,
    the last block's rows past n_out). cortex-m55-O1: gcc 12 took the last block's predicated store for a
    store of all four lanes and dropped the canary's earlier stores past the output (at -O1 here; at -O2 the
    hash moved once a layer was added): LMU_MVE_STORE_FENCE."""
    src = _source()
    core, extra = (runtime[:-3], ("-O1",)) if runtime.endswith("-O1") else (runtime, ())
    want = _host_output(tmp_path, src, core)
    rows = sum(c[0] for c in _LAYERS + _WX_LAYERS)
    assert want.split()[1] == str(60 * rows) and want.split()[3] == "0", want
    assert _run_program(tmp_path, src, core, extra=extra) == want


_REQUANT_CONST_C = r"""
#include <stdio.h>
#include "lmu_runtime.h"
/* lmu_requant8_s16 with compile-time shifts (the Helium kernel's VQRSHRNB form takes 1..16; 0, 17 and 22
 * the general vector loop): every 16-bit input plus a predicated tail of 3, against lmu_mbqm32 */
static int16_t v[65536 + 3];
static int8_t z[65536 + 3 + 16];
static const int32_t ms[] = {INT32_MIN, -3, 1, 1073741824, 1128624491, 2147483646, INT32_MAX};
static const int32_t zps[] = {-128, -5, 0, 127};
static long n = 0, bad = 0;
#define SHIFT(E)                                                                                              \
    for (a = 0; a < 7; ++a)                                                                                   \
        for (c = 0; c < 4; ++c) {                                                                             \
            for (i = 65536 + 3; i < 65536 + 3 + 16; ++i) z[i] = 0x5A;                                         \
            lmu_requant8_s16(v, z, 65536 + 3, ms[a], -(E), zps[c]);                                           \
            for (i = 0; i < 65536 + 3; ++i, ++n)                                                              \
                bad += z[i] != lmu_clamp8(zps[c] + (int64_t)lmu_mbqm32(v[i], ms[a], -(E)));                   \
            for (; i < 65536 + 3 + 16; ++i) bad += z[i] != 0x5A;                                              \
        }
int main(void) {
    int32_t i, a, c;
    for (i = 0; i < 65536 + 3; ++i) v[i] = (int16_t)(i - 32768 + (i >= 65536 ? -3 : 0));
    SHIFT(0) SHIFT(1) SHIFT(2) SHIFT(5) SHIFT(15) SHIFT(16) SHIFT(17) SHIFT(22)
    printf("n %ld bad %ld\n", n, bad);
    return 0;
}
"""


def test_state_requantization_with_a_compile_time_shift_equals_mbqm_on_helium(tmp_path):
    """The Helium state requantization with a constant shift (as the generated step calls it): VQRSHRNB #e
    (rounding, saturating to int16) then VQMOVNB (to int8) with the zero point and -[y < 0] added first,
    for e = 1..16; e = 0, 17 and 22 keep the general loop. Every 16-bit input, edge multipliers, zero
    points at both ends, a predicated tail and a canary: lmu_mbqm32's integers, clamped."""
    _host_output(tmp_path, "int main(void) { return 0; }\n", "cortex-m55")  # skips where the tools are missing
    out = _run_program(tmp_path, _REQUANT_CONST_C, "cortex-m55")
    n, bad = (int(w) for w in out.split()[1::2])
    assert n == 8 * 7 * 4 * 65539 and bad == 0, out


_FIR_C = r"""
#include <stdio.h>
#include "lmu_runtime.h"
/* lmu_fir_row16 for every ring length 1..40 and every newest position, full-range taps and buffer values
 * (the extremes included), against the one-tap-at-a-time sum in 64 bits */
static uint32_t st = 88675123u;
static int32_t rnd(int32_t lo, int32_t hi) {
    st ^= st << 13; st ^= st >> 17; st ^= st << 5;
    return lo + (int32_t)(st % (uint32_t)(hi - lo + 1));
}
int main(void) {
    static int16_t w[41], b[41];
    long n = 0, bad = 0;
    uint32_t h = 2166136261u;
    int32_t L, p, k, t;
    for (L = 1; L <= 40; ++L)
        for (t = 0; t < 4; ++t) {
            for (k = 0; k < L; ++k) {
                w[k] = (int16_t)(t == 0 ? -32768 : rnd(-32768, 32767));
                b[k] = (int16_t)(t == 0 ? (k % 2 ? 32767 : -32768) : rnd(-32768, 32767));
            }
            for (p = 0; p < L; ++p, ++n) {
                int64_t want = 0, got = lmu_fir_row16(w, b, p, L);
                int32_t pos = p;
                for (k = 0; k < L; ++k) {
                    want += (int64_t)w[k] * b[pos];
                    pos = pos == 0 ? L - 1 : pos - 1;
                }
                bad += got != want;
                h = (h ^ (uint32_t)got ^ (uint32_t)(got >> 32)) * 16777619u;
            }
        }
    printf("n %ld bad %ld hash %lu\n", n, bad, (unsigned long)h);
    return 0;
}
"""


@pytest.mark.parametrize("runtime", ["cortex-m4", "cortex-m55"])
def test_fir_rows_sum_exactly_on_the_dsp_path(tmp_path, runtime):
    """The FIR memory's 16 x 16 row: two taps per SMLALDX against the buffer word one position back (possibly
    unaligned), over both runs the ring splits into, an odd tap at the end of a run, for every ring length
    1..40 and every newest position: the exact 64-bit sum, as on the host (the DSP cores' M4 and M55 builds)."""
    want = _host_output(tmp_path, _FIR_C, runtime)
    assert want.split()[1] == str(4 * sum(range(1, 41))) and want.split()[3] == "0", want
    assert _run_program(tmp_path, _FIR_C, runtime) == want


_Q16_C = r"""
#include <stdio.h>
#include <string.h>
#include "lmu_runtime.h"
/* Crafted int16x8 layers (int16 inputs with zero point 0, int8 weights) through lmu_qlinear_i16 / lmu_qlinear16
 * against the one-row-at-a-time formula in 64 bits with lmu_mbqm16 (the reference). Inputs and weights at
 * their extremes in the first trials (-32768 x -128 everywhere: the largest sums), random after; biases up to
 * the int32 ends (so bias + sum overflows int32), shifts from -33 to 1 (the 32-bit requantization takes -31..-2,
 * the 64-bit form the rest), multipliers at both ends; a canary after the outputs. */
static uint32_t st = 2463534242u;
static int32_t rnd(int32_t lo, int32_t hi) {
    st ^= st << 13; st ^= st >> 17; st ^= st << 5;
    return lo + (int32_t)(st % ((uint32_t)(hi - lo) + 1u));
}
static long n = 0, bad = 0;
static int32_t ref_row(const lmu_qlinear_t *L, const int16_t *const *in, int32_t j) {
    int64_t total = L->out_zp, t;
    int32_t k, i;
    for (k = 0; k < L->n_parts; ++k) {
        const lmu_qpart_t *p = &L->parts[k];
        int64_t a = (k == 0 && L->bias) ? L->bias[j] : 0;
        for (i = 0; i < p->n_in; ++i) a += (int64_t)in[k][i] * p->w[j * p->n_in + i];
        total += lmu_mbqm16(a, p->mult[j], p->shift[j]);
    }
    t = lmu_clamp64(total, L->clamp_min, L->clamp_max);
    return L->lut16 ? lmu_interp16(L->lut16, (int32_t)t + 32768) : (int32_t)t;
}
/* the expanded weights' layout (LMU_WX, lmu_int16.h): 4 x 4 blocks, zero-padded; read on the DSP cores only */
static void expand(int16_t *wx, const int8_t *w, int32_t no, int32_t ni) {
    const int32_t g = (ni + 3) / 4;
    int32_t r, c;
    memset(wx, 0, sizeof(int16_t) * 16 * (size_t)((no + 3) / 4) * (size_t)g);
    for (r = 0; r < no; ++r)
        for (c = 0; c < ni; ++c) wx[((r / 4 * g + c / 4) * 4 + r % 4) * 4 + c % 4] = w[r * ni + c];
}
#define CASE(NO, NI, PARTS, BIAS, TABLE, RELU, ZP, Y16)                                                       \
    {                                                                                                         \
        static int8_t w[2][NO * NI];                                                                          \
        static int16_t x[2][NI + 2] LMU_ALIGN4, lut[513], y[NO + 8];                                          \
        static int16_t wx[2][16 * ((NO + 3) / 4) * ((NI + 3) / 4)] LMU_ALIGN4;                                \
        static int32_t bi[NO], mu[2][NO], sh[2][NO], out[NO + 8];                                             \
        static const lmu_qpart_t parts[2] = {                                                                 \
            {.w = w[0], .n_in = NI, .mult = mu[0], .shift = sh[0], .wx = NI >= 8 ? wx[0] : NULL},             \
            {.w = w[1], .n_in = NI, .mult = mu[1], .shift = sh[1], .wx = NI >= 8 ? wx[1] : NULL}};            \
        static const lmu_qlinear_t L = {.parts = parts, .n_parts = PARTS, .n_out = NO, .bias = BIAS ? bi : NULL, \
                                         .out_zp = ZP, .clamp_min = RELU ? 0 : -32768, .clamp_max = 32767,    \
                                         .lut16 = TABLE ? lut : NULL};                                        \
        const int16_t *in_[2];                                                                                \
        int32_t t, i, k;                                                                                      \
        for (i = 0; i < 513; ++i) lut[i] = (int16_t)rnd(-32768, 32767);                                       \
        for (t = 0; t < 24; ++t) {                                                                            \
            in_[0] = x[0] + (t % 4 == 3); /* every fourth pass an input at an odd halfword (no LDRD) */       \
            in_[1] = x[1] + (t % 8 == 7);                                                                     \
            for (k = 0; k < 2; ++k) {                                                                         \
                for (i = 0; i < NO * NI; ++i) w[k][i] = (int8_t)(t < 2 ? -128 : rnd(-128, 127));              \
                for (i = 0; i < NI + 2; ++i)                                                                  \
                    x[k][i] = (int16_t)(t == 0 ? -32768 : t == 1 ? 32767 : rnd(-32768, 32767));               \
                expand(wx[k], w[k], NO, NI);                                                                  \
                for (i = 0; i < NO; ++i) {                                                                    \
                    mu[k][i] = i % 4 == 0 ? 2147483647 : (i % 4 == 1 ? 2147450000 : rnd(1 << 30, 2147483647)); \
                    sh[k][i] = t % 6 == 5 ? (i % 3 == 1 ? 1 : rnd(-33, 1)) : -rnd(2, 14);            \
                }                                                                                             \
            }                                                                                                 \
            for (i = 0; i < NO; ++i)                                                                          \
                bi[i] = t % 3 != 2 ? rnd(-(1 << 24), 1 << 24)                                         \
                                   : (i % 2 ? INT32_MAX - rnd(0, 3) : INT32_MIN + rnd(0, 3));         \
            for (i = 0; i < 8; ++i) y[NO + i] = 0x5A5A, out[NO + i] = 0x5A5A5A5A;                             \
            if (Y16) lmu_qlinear_i16(&L, in_, out, y); else lmu_qlinear16(&L, in_, out);                      \
            for (i = 0; i < NO; ++i, ++n) bad += (Y16 ? y[i] : out[i]) != ref_row(&L, in_, i);                \
            for (i = 0; i < 8; ++i) bad += Y16 ? y[NO + i] != 0x5A5A : out[NO + i] != 0x5A5A5A5A;             \
        }                                                                                                     \
    }
/* a recurrent hidden layer: lmu_qlinear_i16 writes the h its second part reads (every row must see the old h) */
static void recurrent(void) {
    static int8_t w0[5 * 7], w1[5 * 5];
    static int16_t z[7], h[5], h0[5];
    static int32_t bi[5], mu[2][5], sh[2][5], acc[5];
    static const lmu_qpart_t parts[2] = {{.w = w0, .n_in = 7, .mult = mu[0], .shift = sh[0]},
                                         {.w = w1, .n_in = 5, .mult = mu[1], .shift = sh[1]}};
    static const lmu_qlinear_t L = {.parts = parts, .n_parts = 2, .n_out = 5, .bias = bi, .clamp_min = -32768,
                                     .clamp_max = 32767};
    const int16_t *in_[2], *in0[2];
    int32_t t, i;
    in_[0] = z;
    in_[1] = h;
    in0[0] = z;
    in0[1] = h0;
    for (t = 0; t < 40; ++t) {
        for (i = 0; i < 35; ++i) w0[i] = (int8_t)rnd(-128, 127);
        for (i = 0; i < 25; ++i) w1[i] = (int8_t)rnd(-128, 127);
        for (i = 0; i < 7; ++i) z[i] = (int16_t)rnd(-32768, 32767);
        for (i = 0; i < 5; ++i) {
            h[i] = h0[i] = (int16_t)rnd(-32768, 32767);
            bi[i] = rnd(-(1 << 20), 1 << 20);
            mu[0][i] = rnd(1 << 30, 2147483647);
            mu[1][i] = rnd(1 << 30, 2147483647);
            sh[0][i] = -rnd(8, 12);
            sh[1][i] = -rnd(8, 12);
        }
        lmu_qlinear_i16(&L, in_, acc, h);
        for (i = 0; i < 5; ++i, ++n) bad += h[i] != ref_row(&L, in0, i);
    }
}
int main(void) {
    CASES
    recurrent();
    printf("n %ld bad %ld\n", n, bad);
    return 0;
}
"""

#: (n_out, n_in, parts, bias, table, relu clamp, out_zp, int16 output): blocks of 4, 2 and 1 rows (n_out 1..11),
#: DSP tails (n_in % 4) and Helium predicated tails (n_in % 8), one run of 256 inputs and runs past it (257, 300:
#: the 64-bit sum of 32-bit runs; 520 at the extremes would wrap a 512-input run), two parts, a table, a relu
#: clamp, a nonzero out_zp (the 64-bit clamp); Helium's vector finish of four-row blocks (layers of more than
#: four rows or with a table: 7, 8 and 9 rows) with int16 and int32 outputs, a relu clamp, no bias; 23 inputs: a
#: tail of three columns after the expanded weights' groups (LMU_WX)
_Q16_LAYERS = [
    (1, 1, 1, 1, 0, 0, 0, 1),
    (3, 5, 1, 1, 1, 0, 0, 1),
    (4, 8, 1, 0, 0, 1, 0, 1),
    (5, 13, 2, 1, 0, 0, 0, 0),
    (7, 64, 1, 1, 1, 0, 0, 1),
    (11, 7, 1, 1, 0, 0, 5, 0),
    (2, 256, 1, 1, 0, 0, 0, 1),
    (6, 257, 1, 1, 1, 0, 0, 1),
    (3, 300, 2, 1, 0, 1, 0, 0),
    (2, 520, 1, 1, 0, 0, 0, 1),
    (8, 16, 1, 1, 0, 1, 0, 0),
    (9, 64, 1, 0, 1, 0, 0, 1),
    (5, 23, 1, 1, 0, 0, 0, 1),
]


@pytest.mark.parametrize("runtime", ["host", "cortex-m4", "cortex-m4-O0", "cortex-m55", "cortex-m0"])
def test_int16x8_dense_rows_equal_the_64_bit_formula_on_every_path(tmp_path, runtime):
    """int16 x int8 dense layers (the default int8's widened layers, int16x8): four-row blocks sharing each input
    load (SMLAD on PKHBT / SXTB16 pairs on the DSP path, VMLADAVA.S16 on Helium), two- and one-row blocks, 32-bit
    runs of up to 256 inputs, the 32-bit requantization (QADD + SMLAWT) and its 64-bit fallback (bias + sum past
    int32, shifts outside -31..-2) give, on every path, the one-row 64-bit formula's integers at every extreme,
    and write nothing past a layer; a recurrent layer's rows all read the old h it overwrites. -O0
    (cortex-m4-O0): the DSP intrinsic loops the four-row assembly takes over in an optimized build. Parts of 8
    or more inputs carry expanded weights (LMU_WX, read on the DSP cores: lmu_wx_pairs' LDM / SMLAD pairs of
    groups, the odd group and the n_in % 4 tail in C, the last block's padding rows; inputs at an odd halfword,
    every fourth pass, take the C loop instead of LDRD)."""
    cases = " ".join(f"CASE({', '.join(str(v) for v in c)})" for c in _Q16_LAYERS)
    src = _Q16_C.replace("CASES", cases)
    want = f"n {24 * sum(c[0] for c in _Q16_LAYERS) + 40 * 5} bad 0\n"
    core, extra = (runtime[:-3], ("-O0",)) if runtime.endswith("-O0") else (runtime, ())
    out = _host_output(tmp_path, src, core) if core == "host" else _run_program(tmp_path, src, core, extra=extra)
    assert out == want


_REQUANT16_C = r"""
#include <stdio.h>
#include "lmu_runtime.h"
/* lmu_requant16 (the state into int16 activations) against clamp16(zp + lmu_mbqm32): every 16-bit input and
 * just past it, then 32-bit values (a 32-bit state: the ends, +-2^30 and random ones) */
static const int32_t ms[] = {INT32_MIN, -3, 1, 1073741824, 1272345343, 2147483646, INT32_MAX};
static const int32_t ss[] = {0, -1, -7, -15, -16, -31, 1, 2, 9, 14, 15, -32};
static const int32_t zps[] = {-32768, -5, 0, 32767, 40000};
static const int32_t big[] = {INT32_MIN, INT32_MIN + 1, -(1 << 30) - 1, -(1 << 30), -(1 << 30) + 1, -65537,
                              65536, (1 << 30) - 1, 1 << 30, INT32_MAX - 1, INT32_MAX};
static uint32_t st = 2463534242u;
int main(void) {
    long n = 0, bad = 0;
    int32_t v, a, b, c, k;
    for (a = 0; a < 7; ++a)
        for (b = 0; b < 12; ++b)
            for (c = 0; c < 5; ++c) {
                for (v = -32768 - 2; v <= 32767 + 2; v += 1 + (v & 7), ++n)
                    bad += lmu_requant16(v, ms[a], ss[b], zps[c]) !=
                           lmu_clamp16(zps[c] + (int64_t)lmu_mbqm32(v, ms[a], ss[b]));
                for (k = 0; k < 11 + 300; ++k, ++n) {
                    st ^= st << 13; st ^= st >> 17; st ^= st << 5;
                    v = k < 11 ? big[k] : (int32_t)(st >> (st % 17));
                    bad += lmu_requant16(v, ms[a], ss[b], zps[c]) !=
                           lmu_clamp16(zps[c] + (int64_t)lmu_mbqm32(v, ms[a], ss[b]));
                }
            }
    printf("n %ld bad %ld\n", n, bad);
    return 0;
}
"""


@pytest.mark.parametrize("runtime", ["host", "cortex-m4", "cortex-m55", "cortex-m0"])
def test_int16_state_requantization_equals_mbqm_on_every_path(tmp_path, runtime):
    """lmu_requant16 (SMMULR and SSAT on the DSP path, 32-bit multiplies on ARMv6-M; a 32-bit state through
    lmu_mbqm32_r / lmu_mbqm32_h16) is lmu_mbqm32's integer, clamped, over the 16-bit inputs and just past them,
    32-bit values, edge multipliers, left shifts up to 15 and right ones past 31, and zero points at and past
    the int16 ends."""
    out = (
        _host_output(tmp_path, _REQUANT16_C, runtime)
        if runtime == "host"
        else _run_program(tmp_path, _REQUANT16_C, runtime)
    )
    n, bad = (int(w) for w in out.split()[1::2])
    assert n > 7 * 12 * 5 * 8000 and bad == 0, out


_REQUANT16_S16_C = r"""
#include <stdio.h>
#include "lmu_runtime.h"
/* lmu_requant16_s16 (the generated step's call, constants folded as there; then the same shifts through a
 * volatile, not folded): every 16-bit input plus a tail of 3, against clamp16(zp + lmu_mbqm32) */
static int16_t v[65536 + 3];
static int16_t z[65536 + 3 + 16];
static const int32_t ms[] = {INT32_MIN, -3, 1, 1090954896, INT32_MAX};
static const int32_t zps[] = {-32768, -5, 0, 32767, 40000};
static volatile int32_t vs[] = {2, -7, 14, -16};
static long n = 0, bad = 0;
#define CHECK(S)                                                                                              \
    for (a = 0; a < 5; ++a)                                                                                   \
        for (c = 0; c < 5; ++c) {                                                                             \
            const int32_t s_ = (S);                                                                           \
            for (i = 65536 + 3; i < 65536 + 3 + 16; ++i) z[i] = 0x5A5A;                                       \
            lmu_requant16_s16(v, z, 65536 + 3, ms[a], s_, zps[c]);                                            \
            for (i = 0; i < 65536 + 3; ++i, ++n)                                                              \
                bad += z[i] != lmu_clamp16(zps[c] + (int64_t)lmu_mbqm32(v[i], ms[a], s_));                    \
            for (; i < 65536 + 3 + 16; ++i) bad += z[i] != 0x5A5A;                                            \
        }
int main(void) {
    int32_t i, a, c, b;
    for (i = 0; i < 65536 + 3; ++i) v[i] = (int16_t)(i - 32768 + (i >= 65536 ? -3 : 0));
    CHECK(0) CHECK(1) CHECK(2) CHECK(14) CHECK(15) CHECK(-1) CHECK(-7) CHECK(-16) CHECK(-17) CHECK(-31)
    for (b = 0; b < 4; ++b) {
        CHECK(vs[b])
    }
    printf("n %ld bad %ld\n", n, bad);
    return 0;
}
"""


@pytest.mark.parametrize("runtime", ["host", "cortex-m4", "cortex-m55", "cortex-m0"])
def test_int16_state_requantization_kernels_equal_mbqm(tmp_path, runtime):
    """lmu_requant16_s16 (a 16-bit state into int16 activations: SMLAWB / SMLAWT pairs on the DSP path,
    VQRDMULH on Helium, two MULS on ARMv6-M) is lmu_mbqm32's integer, clamped, for every 16-bit input, left
    shifts to 14 and right ones to 16 (15, 17 and 31 go to the scalar loop on some paths), edge multipliers,
    zero points at and past the int16 ends, constant and variable shifts, an odd tail and a canary past it."""
    src = _REQUANT16_S16_C
    out = _host_output(tmp_path, src, runtime) if runtime == "host" else _run_program(tmp_path, src, runtime)
    n, bad = (int(w) for w in out.split()[1::2])
    assert n == 14 * 5 * 5 * 65539 and bad == 0, out
