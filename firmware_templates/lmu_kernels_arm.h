/*
 * lmu_kernels_arm.h -- the Cortex-M kernels of the lmu-edge runtime, included by lmu_runtime.h when the
 * compiler targets a core with the DSP extension (__ARM_FEATURE_DSP: Cortex-M4, M7, M33, M55) or Helium
 * (__ARM_FEATURE_MVE: Cortex-M55) and LMU_PORTABLE is not defined. Not meant to be included on its own.
 *
 * Each kernel does the part of a loop its instructions do well and returns where it stopped; the
 * portable loop in lmu_runtime.h finishes. They read the same arrays in the same layout as the portable
 * loops and compute the same exact integers (the proofs are beside each kernel), so one model.c gives the
 * same outputs and state on every core.
 *
 * int16x8 models (int16 activations) take the portable path for every activation kernel, stated per
 * kernel: lmu_qdot16 / lmu_qlinear16 (int16 x int8 dot products into int64), lmu_interp16 / lmu_qlut16
 * (interpolated tables), lmu_qsoftmax16, lmu_qpool16 and lmu_requant16 have no DSP or Helium variant here.
 * Their LMU memory still uses the kernels below: those depend on the state width only.
 */
#ifndef LMU_KERNELS_ARM_H
#define LMU_KERNELS_ARM_H

#ifndef LMU_RUNTIME_H
#error "lmu_kernels_arm.h is part of lmu_runtime.h: include lmu_runtime.h instead"
#endif
#if LMU_PATH_DSP
#include <arm_acle.h>
#endif
#if LMU_PATH_MVE
#include <arm_mve.h>
#endif

#if LMU_PATH_DSP
/* a 32-bit word from any address (unaligned LDR is allowed on every core with the DSP extension) */
static inline uint32_t lmu_ld32(const void *p) {
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* bytes 1 and 3 of w, sign-extended to two halfwords (SXTB16 with ROR #8; gcc 12 has no __ror) */
static inline uint32_t lmu_sxtb16_hi(uint32_t w) {
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(w));
    return r;
}
#endif

/* int8 dot products of lmu_qdot2 (see its comment in lmu_runtime.h for the ranges and the proof): adds
 * the first i products to *a0 and *a1 and returns i. DSP path: per 4 inputs and 2 rows, 1 LDR + 2 SXTB16
 * + 2 SSUB16 for x, then 1 LDR + 2 SXTB16 + 2 SMLAD per row. */
static inline int32_t lmu_qdot2_arm(const int8_t *x, int32_t zp, const int8_t *w0, const int8_t *w1, int32_t n,
                                    int32_t *a0, int32_t *a1) {
    int32_t i = 0, s0 = *a0, s1 = *a1;
#if LMU_PATH_MVE
    /* Helium: per 16 inputs and 2 rows, 3 VLDRB, 2 VMLADAVA (x . w) and 2 VADDVA (sum w); the zero point
     * enters once per row as zp * sum w. Every partial value is within the bound above. */
    {
        int32_t sw0 = 0, sw1 = 0;
        for (; i + 16 <= n; i += 16) {
            const int8x16_t xv = vldrbq_s8(x + i);
            const int8x16_t u0 = vldrbq_s8(w0 + i), u1 = vldrbq_s8(w1 + i);
            s0 = vmladavaq_s8(s0, xv, u0);
            s1 = vmladavaq_s8(s1, xv, u1);
            sw0 = vaddvaq_s8(sw0, u0);
            sw1 = vaddvaq_s8(sw1, u1);
        }
        s0 -= zp * sw0;
        s1 -= zp * sw1;
    }
#endif
#if LMU_PATH_DSP
    const uint32_t zp2 = ((uint32_t)zp & 0xFFFFu) * 0x00010001u;
    for (; i + 4 <= n; i += 4) {
        const uint32_t xw = lmu_ld32(x + i);
        const uint32_t xe = __ssub16(__sxtb16(xw), zp2);      /* x0 - zp, x2 - zp */
        const uint32_t xo = __ssub16(lmu_sxtb16_hi(xw), zp2); /* x1 - zp, x3 - zp */
        const uint32_t u0 = lmu_ld32(w0 + i), u1 = lmu_ld32(w1 + i);
        s0 = __smlad(__sxtb16(u0), xe, s0);
        s0 = __smlad(lmu_sxtb16_hi(u0), xo, s0);
        s1 = __smlad(__sxtb16(u1), xe, s1);
        s1 = __smlad(lmu_sxtb16_hi(u1), xo, s1);
    }
#endif
    *a0 = s0;
    *a1 = s1;
    return i;
}

#if LMU_PATH_DSP
/* Four rows of C times the state at a time, with accumulators of type ACC and the ACLE dual-MAC
 * intrinsic MAC; the caller picks the 32- or 64-bit pair. Uses i, j, q, C, mc, B, uc, coeff_frac,
 * delta, bits and tmp from the enclosing function. */
#define LMU_DSP_ROWS4(ACC, MAC)                                                                                        \
    for (; i + 4 <= q; i += 4) {                                                                                       \
        const int16_t *r0 = C + i * q;                                                                                 \
        ACC a0 = 0, a1 = 0, a2 = 0, a3 = 0;                                                                            \
        for (j = 0; j + 4 <= q; j += 4) { /* two column pairs per pass: half the loop overhead */                      \
            const uint32_t sv = lmu_ld32(mc + j), sw = lmu_ld32(mc + j + 2);                                           \
            a0 = MAC(lmu_ld32(r0 + j), sv, a0);                                                                        \
            a1 = MAC(lmu_ld32(r0 + q + j), sv, a1);                                                                    \
            a2 = MAC(lmu_ld32(r0 + 2 * q + j), sv, a2);                                                                \
            a3 = MAC(lmu_ld32(r0 + 3 * q + j), sv, a3);                                                                \
            a0 = MAC(lmu_ld32(r0 + j + 2), sw, a0);                                                                    \
            a1 = MAC(lmu_ld32(r0 + q + j + 2), sw, a1);                                                                \
            a2 = MAC(lmu_ld32(r0 + 2 * q + j + 2), sw, a2);                                                            \
            a3 = MAC(lmu_ld32(r0 + 3 * q + j + 2), sw, a3);                                                            \
        }                                                                                                              \
        for (; j + 2 <= q; j += 2) {                                                                                   \
            const uint32_t sv = lmu_ld32(mc + j);                                                                      \
            a0 = MAC(lmu_ld32(r0 + j), sv, a0);                                                                        \
            a1 = MAC(lmu_ld32(r0 + q + j), sv, a1);                                                                    \
            a2 = MAC(lmu_ld32(r0 + 2 * q + j), sv, a2);                                                                \
            a3 = MAC(lmu_ld32(r0 + 3 * q + j), sv, a3);                                                                \
        }                                                                                                              \
        if (j < q) {                                                                                                   \
            a0 += (int32_t)r0[j] * mc[j];                                                                              \
            a1 += (int32_t)r0[q + j] * mc[j];                                                                          \
            a2 += (int32_t)r0[2 * q + j] * mc[j];                                                                      \
            a3 += (int32_t)r0[3 * q + j] * mc[j];                                                                      \
        }                                                                                                              \
        lmu_dense_finish(tmp, i, a0, B[i], uc, mc[i], coeff_frac, delta, bits);                                        \
        lmu_dense_finish(tmp, i + 1, a1, B[i + 1], uc, mc[i + 1], coeff_frac, delta, bits);                            \
        lmu_dense_finish(tmp, i + 2, a2, B[i + 2], uc, mc[i + 2], coeff_frac, delta, bits);                            \
        lmu_dense_finish(tmp, i + 3, a3, B[i + 3], uc, mc[i + 3], coeff_frac, delta, bits);                            \
    }
#endif

/* DSP rows of the dense memory with 16-bit coefficients and a 16-bit state: returns the first row it left
 * to the portable loop. Four rows at a time: one state word (two halfwords) feeds four dual MACs, so per
 * 8 MACs 1 + 4 LDR and 4 SMLAD (acc32) or SMLALD (64-bit sums). Odd q is
 * finished by a scalar tail. Same exact sums as the portable loop, so the same state. */
static inline int32_t lmu_dense_dsp_rows_int16_t_int16_t(int16_t *mc, int32_t uc, int32_t q, const int16_t *C,
                                                         const int32_t *B, int32_t coeff_frac, int32_t delta,
                                                         int32_t bits, int64_t *tmp, int32_t acc32) {
    int32_t i = 0;
#if LMU_PATH_DSP
    int32_t j;
    if (acc32) {
        LMU_DSP_ROWS4(int32_t, __smlad); /* sums proven to fit 32 bits: 1 SMLAD per 2 MACs */
    } else {
        LMU_DSP_ROWS4(int64_t, __smlald); /* 64-bit sums: 1 SMLALD per 2 MACs */
    }
#else
    (void)mc;
    (void)uc;
    (void)q;
    (void)C;
    (void)B;
    (void)coeff_frac;
    (void)delta;
    (void)bits;
    (void)tmp;
    (void)acc32;
#endif
    return i;
}

/* Helium rows of the 16 x 16 dense memory: four rows at a time, eight columns per vector; one state vector
 * (VLDRH) feeds four VMLALDAVA (8 MACs each into a 64-bit sum), so per 32 MACs 5 VLDRH and 4 VMLALDAVA.
 * The last q % 8 columns run predicated (VCTP). Exact 64-bit sums: the same state as every other path.
 * Returns the first row it left. */
static inline int32_t lmu_dense_mve_rows(int16_t *mc, int32_t uc, int32_t q, const int16_t *C, const int32_t *B,
                                         int32_t coeff_frac, int32_t delta, int32_t bits, int64_t *tmp) {
    int32_t i = 0;
#if LMU_PATH_MVE
    int32_t j;
    for (; i + 4 <= q; i += 4) {
        const int16_t *r0 = C + i * q;
        int64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (j = 0; j + 8 <= q; j += 8) {
            const int16x8_t sv = vldrhq_s16(mc + j);
            a0 = vmlaldavaq_s16(a0, vldrhq_s16(r0 + j), sv);
            a1 = vmlaldavaq_s16(a1, vldrhq_s16(r0 + q + j), sv);
            a2 = vmlaldavaq_s16(a2, vldrhq_s16(r0 + 2 * q + j), sv);
            a3 = vmlaldavaq_s16(a3, vldrhq_s16(r0 + 3 * q + j), sv);
        }
        if (j < q) {
            const mve_pred16_t p = vctp16q((uint32_t)(q - j));
            const int16x8_t sv = vldrhq_z_s16(mc + j, p);
            a0 = vmlaldavaq_p_s16(a0, vldrhq_z_s16(r0 + j, p), sv, p);
            a1 = vmlaldavaq_p_s16(a1, vldrhq_z_s16(r0 + q + j, p), sv, p);
            a2 = vmlaldavaq_p_s16(a2, vldrhq_z_s16(r0 + 2 * q + j, p), sv, p);
            a3 = vmlaldavaq_p_s16(a3, vldrhq_z_s16(r0 + 3 * q + j, p), sv, p);
        }
        lmu_dense_finish(tmp, i, a0, B[i], uc, mc[i], coeff_frac, delta, bits);
        lmu_dense_finish(tmp, i + 1, a1, B[i + 1], uc, mc[i + 1], coeff_frac, delta, bits);
        lmu_dense_finish(tmp, i + 2, a2, B[i + 2], uc, mc[i + 2], coeff_frac, delta, bits);
        lmu_dense_finish(tmp, i + 3, a3, B[i + 3], uc, mc[i + 3], coeff_frac, delta, bits);
    }
#else
    (void)mc;
    (void)uc;
    (void)q;
    (void)C;
    (void)B;
    (void)coeff_frac;
    (void)delta;
    (void)bits;
    (void)tmp;
#endif
    return i;
}

#endif /* LMU_KERNELS_ARM_H */
