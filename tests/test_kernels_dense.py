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
#define CASE(NO, NI, BIAS, ZSUM, TABLE, Y8)                                                                    \
    {                                                                                                         \
        static int8_t w[NO * NI], x[NI], lut[256], y[NO + 8];                                                 \
        static int32_t zs[NO], bi[NO], mu[NO], sh[NO], acc[NO], out[NO + 8];                                  \
        static const lmu_qpart_t part = {.w = w, .n_in = NI, .zsum = ZSUM ? zs : NULL, .mult = mu, .shift = sh}; \
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
    cases = " ".join(f"CASE({', '.join(str(v) for v in c)})" for c in _LAYERS)
    return _DENSE_C.replace("CASES", cases)


@pytest.mark.parametrize("runtime", ["cortex-m55", "cortex-m4", "cortex-m0"])
def test_acc30_dense_layers_give_the_host_integers_on_every_path(tmp_path, runtime):
    """Every crafted layer's outputs hash to the host's (the portable loop) on the Helium, DSP and ARMv6-M
    paths, and nothing is written past a layer's last output: the vector requantization (VQRDMULH, the
    rounding term only where the shift is not 0, VRSHL, out_zp, clamp, table gather) and the four-row
    sums (assembly and intrinsics, full and predicated blocks) are exact."""
    src = _source()
    want = _host_output(tmp_path, src, runtime)
    assert want.split()[1] == str(60 * sum(c[0] for c in _LAYERS)) and want.split()[3] == "0", want
    assert _run_program(tmp_path, src, runtime) == want


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
