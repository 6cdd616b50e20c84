"""The int16-input dot products of the C runtime, on every path: ``lmu_qdot16`` (int16 x int8, a part whose
zero point is 0 through the DSP / Helium kernel ``lmu_qdot16_arm``) and ``lmu_qdot16w`` (int16 x int16).

Issue 54's int16x8 layers run their rows in blocks (``lmu_q16_block``); these one-row kernels run where a
layer mixes parts, one with 16-bit weights (``--quantize int16x8``'s widening) and one with int8 weights.
The hand mutant that fed the DSP kernel's odd pairs the even weights survived every test until this one:
none ran a mixed layer on a DSP core. Specification: each returns ``sum_i (x_i - zp) w_i`` exactly, for every
length 0..40 (each vector, four-input and scalar tail), zero points 0, 7 and -32768, inputs at the int16
extremes and pointers two bytes off a word.
"""

import pytest
from arm_programs import host_output, run_program

_QDOT16_C = r"""
#include <stdio.h>
#include "lmu_runtime.h"
static uint32_t st = 2463534242u;
static int32_t rnd(int32_t lo, int32_t hi) {
    st ^= st << 13; st ^= st >> 17; st ^= st << 5;
    return lo + (int32_t)(st % (uint32_t)(hi - lo + 1));
}
static int16_t xs[48], ws16[48];
static int8_t ws[48];
int main(void) {
    static const int32_t zps[] = {0, 0, 7, -32768};
    long n = 0, bad = 0;
    int32_t r, len, i;
    for (r = 0; r < ROUNDS; ++r) {
        for (len = 0; len <= 40; ++len) {
            const int32_t zp = zps[r % 4], off = (r / 4) % 2; /* off: the vectors 2 bytes past a word */
            int16_t *x = xs + off, *w16 = ws16 + off;
            int8_t *w = ws + off;
            int64_t want = 0, want16 = 0;
            for (i = 0; i < len; ++i) {
                x[i] = (int16_t)(r % 5 == 0 ? (rnd(0, 1) ? 32767 : -32768) : rnd(-32768, 32767));
                w[i] = (int8_t)rnd(-128, 127);
                w16[i] = (int16_t)rnd(-32767, 32767);
                want += (int64_t)((int32_t)x[i] - zp) * w[i];
                want16 += (int64_t)x[i] * w16[i];
            }
            bad += lmu_qdot16(x, zp, w, len) != want;
            bad += lmu_qdot16w(x, 0, w16, len) != want16; /* int16 weights: zero point 0 (int16 mode) */
            n += 2;
        }
    }
    printf("n %ld bad %ld\n", n, bad);
    return 0;
}
"""


@pytest.mark.parametrize("runtime", ["host", "cortex-m4", "cortex-m55", "cortex-m0"])
def test_the_int16_input_dot_products_are_exact_on_every_path(tmp_path, runtime):
    rounds = 200 if runtime == "host" else 40
    source = _QDOT16_C.replace("ROUNDS", str(rounds))
    out = host_output(tmp_path, source, runtime) if runtime == "host" else run_program(tmp_path, source, runtime)
    n, bad = (int(v) for v in out.split()[1::2])
    assert n == 2 * 41 * rounds and bad == 0, out
