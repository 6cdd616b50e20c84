/*
 * lmu_dense16.h -- the dense LMU memory with a 16-bit state and 16-bit
 * coefficients (the quantizer's default) on every path: whole channels and four-row blocks on DSP cores,
 * Helium rows, the ARMv6-M Thumb-1 loops (lmu_v6m_dot2 / dot3) and the portable two-row loop, side by side;
 * the DSP and Helium row blocks they call are in lmu_dense16_blocks.h. Part of lmu_runtime.h.
 */
#ifndef LMU_DENSE16_H
#define LMU_DENSE16_H

#include "lmu_config.h"
#include "lmu_fixedpoint.h"
#include "lmu_memory.h"
#include "lmu_dense16_blocks.h"
#include "lmu_dense16_v6m.h"

#if LMU_PATH_ARM /* the DSP and Helium kernels */
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

/* Dense memory with a 16-bit state and 16-bit coefficients, one whole channel on the DSP path (equation
 * and ranges of LMU_DEFINE_DENSE_MEMORY in lmu_memory.h). Applies when q is even, C and the state are
 * word-aligned, 1 <= cf <= 31 and step32 holds (see lmu_row_finish16); returns 0 otherwise and does
 * nothing. A compile-time q (a multiple of 4, at most 128) with compile-time cf >= 2, delta and bits runs
 * lmu_dsp_channel4_s16; a compile-time q % 4 == 0 up to 255 three rows at a time (lmu_dsp_rows3_s16); else
 * two rows at a time: the first q - q % 16 columns in lmu_dsp_rows2_s16, the rest with one LDR of
 * state, two LDR of coefficients and two SMLALD per two columns. acc starts at B_i u + 2^(cf-1) (one SMLAL).
 * 64-bit sums are exact (|C_ij m_j| <= 2^30, q < 2^31 terms), so the state equals the portable path's.
 * Scratch: tmp, as halfwords. */
LMU_SPECIALIZE int32_t lmu_dense_channel_s16(int16_t *mc, int32_t uc, int32_t q, const int16_t *C, const int32_t *B,
                                             int32_t cf, int32_t delta, int32_t bits, int64_t *tmp, int32_t step32,
                                             int32_t wrap32) {
#if LMU_PATH_DSP && !LMU_PATH_MVE
    const int64_t half = (int64_t)1 << (cf - 1);
    const int32_t n16 = q - q % 16;
    (void)wrap32; /* the DSP kernels sum in 64 bits: SMLALD costs what SMLAD does */
    const int16_t *row = C;
    int32_t i;
    if (!step32 || (q & 1) || cf < 1 || cf > 31 || (((uintptr_t)C | (uintptr_t)mc) & 3u)) {
        return 0;
    }
#ifdef __OPTIMIZE__
    if (__builtin_constant_p(q) && __builtin_constant_p(cf) && __builtin_constant_p(delta) &&
        __builtin_constant_p(bits) && q % 4 == 0 && q >= 4 && q <= 128 && cf >= 2 && (delta == 0 || delta == 1) &&
        bits >= 2 && bits <= 16) { /* everything, the copy included, in one assembly statement */
        lmu_dsp_channel4_s16(mc, uc, q, C, B, cf, delta, bits, tmp);
        return 1;
    }
    if (__builtin_constant_p(q) && __builtin_constant_p(cf) && __builtin_constant_p(delta) &&
        __builtin_constant_p(bits) && q % 16 == 0 && q > 128 && q <= 508 && cf >= 2 && (delta == 0 || delta == 1) &&
        bits >= 2 && bits <= 16) { /* two rows per block, one assembly statement, then the copy */
        lmu_dsp_channel2_s16(mc, uc, q, C, B, cf, delta, bits, tmp);
        return 1;
    }
    if (__builtin_constant_p(q) && q % 4 == 0 && q <= 255) { /* three rows at a time, then one at a time */
        const int32_t rows3 = q - q % 3;
        for (i = 0; i < rows3; i += 3, row += 3 * q) {
            int64_t a0 = lmu_smlal(half, B[i], uc), a1 = lmu_smlal(half, B[i + 1], uc);
            int64_t a2 = lmu_smlal(half, B[i + 2], uc);
            lmu_dsp_rows3_s16(mc, row, q, &a0, &a1, &a2);
            lmu_row_finish16(tmp, i, a0, mc[i], cf, delta, bits);
            lmu_row_finish16(tmp, i + 1, a1, mc[i + 1], cf, delta, bits);
            lmu_row_finish16(tmp, i + 2, a2, mc[i + 2], cf, delta, bits);
        }
        for (i = rows3; i < q; ++i) {
            const int16_t *r1 = C + i * q;
            int64_t a0 = lmu_smlal(half, B[i], uc);
            int32_t j;
            for (j = 0; j < q; j += 2) {
                a0 = __smlald(lmu_ld32(r1 + j), lmu_ld32(mc + j), a0);
            }
            lmu_row_finish16(tmp, i, a0, mc[i], cf, delta, bits);
        }
        lmu_copy16(mc, tmp, q);
        return 1;
    }
#endif
    for (i = 0; i < q; i += 2, row += 2 * q) {
        const int16_t *ps = mc, *p0 = row, *p1 = row + q;
        int64_t a0 = lmu_smlal(half, B[i], uc), a1 = lmu_smlal(half, B[i + 1], uc);
        int32_t j;
        if (n16) {
            lmu_dsp_rows2_s16(&ps, &p0, &p1, n16, &a0, &a1);
        }
        for (j = n16; j < q; j += 2) {
            const uint32_t sv = lmu_ld32(mc + j);
            a0 = __smlald(lmu_ld32(row + j), sv, a0);
            a1 = __smlald(lmu_ld32(row + q + j), sv, a1);
        }
        lmu_row_finish16(tmp, i, a0, mc[i], cf, delta, bits);
        lmu_row_finish16(tmp, i + 1, a1, mc[i + 1], cf, delta, bits);
    }
    lmu_copy16(mc, tmp, q);
    return 1;
#elif LMU_PATH_MVE
    /* Helium: three rows at a time in lmu_mve_rows3_s16, the last q % 8 columns predicated (VCTP), the rows
     * the blocks of three leave one at a time; the same sums and finish as above. No alignment needed. */
    const int64_t half = (int64_t)1 << (cf - 1);
    const int32_t n8 = q / 8, tail = q % 8, rows3 = q - q % 3;
    int32_t i;
    if (wrap32 && cf >= 1 && cf <= 31 && q % 8 == 0) {
        /* wrap32 (c_codegen.dense_wrap32: each row's whole sum T fits int32). First every row's sum_j C_ij m_j,
         * four rows per state vector in 32-bit VMLADAVA sums that wrap modulo 2^32 on the way, kept in the
         * scratch (4q of its 8q bytes); then, four rows per vector, T = sum + B_i u + 2^(cf-1) (still modulo
         * 2^32, now exact), the step T >> cf, the old state added (delta form), the state's range, and the
         * new state written in place: every row has read the old one by then. */
        const int32_t h32 = (int32_t)1 << (cf - 1), hi = (int32_t)((1u << (bits - 1)) - 1u);
        const int32x4_t vhi = vdupq_n_s32(hi), vlo = vdupq_n_s32(-hi - 1), vu = vdupq_n_s32(uc);
        const int16x8_t top = vdupq_n_s16(0);
        int32_t *sums = (int32_t *)(void *)tmp;    /* written only through the assembly and memcpy */
#ifdef __OPTIMIZE__
        if (__builtin_constant_p(q) && q <= 120) { /* lmu_mve_rows8_w32: offsets of +-2q bytes, 15 passes */
            lmu_mve_rows8_w32(mc, C, q, sums);
        } else
#endif
        {
            for (i = 0; i < q; i += 4) {
                const int16_t *r0 = C + i * q, *r1 = r0 + q, *r2 = r1 + q, *r3 = r2 + q;
                lmu_mve_rows4_w32(mc, r0, r1, r2, r3, q / 8, sums + i); /* the four sums, 16 bytes */
            }
        }
        for (i = 0; i < q; i += 4) {
            int32x4_t t;
            memcpy(&t, sums + i, sizeof(t));
            t = vaddq_s32(t, vmlasq_n_s32(vldrwq_s32(B + i), vu, h32)); /* + B_i u + 2^(cf-1): one VMLAS */
            t = vshlq_r_s32(t, -cf);
            if (delta) {
                t = vaddq_s32(t, vldrhq_s32(mc + i));
            }
            if (bits == 16) { /* VQMOVNB saturates to int16 into the low half of each lane: what VSTRH.32 stores */
                vstrhq_s32(mc + i, vreinterpretq_s32_s16(vqmovnbq_s32(top, t)));
            } else {
                vstrhq_s32(mc + i, vmaxq_s32(vminq_s32(t, vhi), vlo));
            }
        }
        return 1;
    }
    if (!step32 || cf < 1 || cf > 31) {
        return 0;
    }
    for (i = 0; i < rows3; i += 3) {
        const int16_t *ps = mc, *pr = C + i * q;
        int64_t a0 = lmu_smlal(half, B[i], uc), a1 = lmu_smlal(half, B[i + 1], uc);
        int64_t a2 = lmu_smlal(half, B[i + 2], uc);
        lmu_mve_rows3_s16(&ps, &pr, q, n8, &a0, &a1, &a2);
        if (tail) {
            const mve_pred16_t p = vctp16q((uint32_t)tail);
            const int16x8_t sv = vldrhq_z_s16(ps, p);
            a0 = vmlaldavaq_p_s16(a0, vldrhq_z_s16(pr, p), sv, p);
            a1 = vmlaldavaq_p_s16(a1, vldrhq_z_s16(pr + q, p), sv, p);
            a2 = vmlaldavaq_p_s16(a2, vldrhq_z_s16(pr + 2 * q, p), sv, p);
        }
        lmu_row_finish16(tmp, i, a0, mc[i], cf, delta, bits);
        lmu_row_finish16(tmp, i + 1, a1, mc[i + 1], cf, delta, bits);
        lmu_row_finish16(tmp, i + 2, a2, mc[i + 2], cf, delta, bits);
    }
    for (i = rows3; i < q; ++i) {
        const int16_t *ps = mc, *pr = C + i * q;
        int64_t acc = lmu_smlal(half, B[i], uc);
        lmu_mve_row1_s16(&ps, &pr, n8, &acc);
        if (tail) {
            const mve_pred16_t p = vctp16q((uint32_t)tail);
            acc = vmlaldavaq_p_s16(acc, vldrhq_z_s16(pr, p), vldrhq_z_s16(ps, p), p);
        }
        lmu_row_finish16(tmp, i, acc, mc[i], cf, delta, bits);
    }
    lmu_copy16(mc, tmp, q);
    return 1;
#endif /* no third case: this block is compiled only when one of the two paths is on */
}
#else
static inline int32_t lmu_dense_dsp_rows_int16_t_int16_t(int16_t *mc, int32_t uc, int32_t q, const int16_t *C,
                                                         const int32_t *B, int32_t coeff_frac, int32_t delta,
                                                         int32_t bits, int64_t *tmp, int32_t acc32) {
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
    return 0;
}
static inline int32_t lmu_dense_mve_rows(int16_t *mc, int32_t uc, int32_t q, const int16_t *C, const int32_t *B,
                                         int32_t coeff_frac, int32_t delta, int32_t bits, int64_t *tmp) {
    (void)mc;
    (void)uc;
    (void)q;
    (void)C;
    (void)B;
    (void)coeff_frac;
    (void)delta;
    (void)bits;
    (void)tmp;
    return 0;
}
#endif

/* Dense memory with a 16-bit state and 16-bit coefficients (the quantizer's default): the equation, ranges
 * and proof of LMU_DEFINE_DENSE_MEMORY above. Rows the DSP path leaves (all of them on the portable path)
 * go two at a time, so one state load serves two rows. Where a 64-bit multiply-accumulate costs several
 * instructions (ARMv6-M: LMU_SUM32_CHUNKS) and the code generator proved from the state bound that each
 * row's whole sum lies in int32 (wrap32, c_codegen.dense_wrap32), each row sums in 32 bits, wrapping
 * modulo 2^32 on the way, which gives the exact end result; otherwise each row sums `chunk` columns at a
 * time in int32 (|partial| <= 2^31 - 1, proven for any state) and adds the partial sums in int64. Either
 * way ARMv6-M runs one MULS and one ADD per MAC and no 64-bit multiply helper; elsewhere (SMLAL, a 64-bit
 * host) the products go straight into 64 bits. Scratch: tmp, q int64. */
LMU_SPECIALIZE void lmu_dense_memory_s16_c16(const lmu_dense_memory_c16_t *cfg, int16_t *m, const int32_t *u,
                                             int64_t *tmp) {
    const int32_t d = cfg->d, q = cfg->q, coeff_frac = cfg->coeff_frac, delta = cfg->delta, bits = cfg->bits;
    const int32_t chunk = cfg->chunk, step32 = cfg->step32, wrap32 = cfg->wrap32;
    const int16_t *C = cfg->C;
    const int32_t *B = cfg->B;
    int32_t c, i, j0;
    for (c = 0; c < d; ++c) {
        int16_t *mc = m + c * q;
        const int32_t uc = u[c];
#if LMU_PATH_DSP || LMU_PATH_MVE
        if (lmu_dense_channel_s16(mc, uc, q, C, B, coeff_frac, delta, bits, tmp, step32, wrap32)) {
            continue;
        }
#else
        (void)step32;
#endif
        i = LMU_PATH_MVE
                ? lmu_dense_mve_rows(mc, uc, q, C, B, coeff_frac, delta, bits, tmp)
                : lmu_dense_dsp_rows_int16_t_int16_t(mc, uc, q, C, B, coeff_frac, delta, bits, tmp, chunk >= q);
#if LMU_PATH_V6M
        if (wrap32 && coeff_frac >= 1 && coeff_frac <= 31 && q % 2 == 0 && i == 0) {
            /* ARMv6-M, wrap32: every row's 32-bit sum first (three rows per state load, lmu_v6m_dot3), kept
             * in the low word of tmp; then one pass finishes each row and overwrites the state in place
             * (every row has read the old state by then): no 64-bit arithmetic and no copy. */
            uint32_t half = (uint32_t)1 << (coeff_frac - 1);
            const int32_t hi = ((int32_t)1 << (bits - 1)) - 1;
            const int32_t rows3 = (q - q % 3) % 2 ? q - q % 3 - 3 : q - q % 3; /* an even rest: q - rows3 */
            for (; i < rows3; i += 3) {
                int32_t a0, a1, a2;
                lmu_v6m_dot3(mc, C + i * q, q, q, &a0, &a1, &a2);
                tmp[i] = (int64_t)(uint32_t)a0;
                tmp[i + 1] = (int64_t)(uint32_t)a1;
                tmp[i + 2] = (int64_t)(uint32_t)a2;
            }
            for (; i < q; i += 2) { /* whole pairs: q and rows3 are even */
                int32_t a0, a1;
                lmu_v6m_dot2(mc, C + i * q, C + (i + 1) * q, q, &a0, &a1);
                tmp[i] = (int64_t)(uint32_t)a0;
                tmp[i + 1] = (int64_t)(uint32_t)a1;
            }
            {
                const int64_t *pt = tmp;
                const int32_t *pb = B;
                int16_t *pm = mc;
                __asm__("" : "+r"(half)); /* in a register: gcc rebuilt it every pass */
                for (i = q; i > 0; --i) { /* lmu_dense_finish32, row by row (walking pointers: no index) */
                    const uint32_t t = (uint32_t)*pt++ + (uint32_t)*pb++ * (uint32_t)uc + half;
                    int32_t v = lmu_i32(t) >> coeff_frac;
                    if (delta) {
                        v += *pm;
                    }
                    if (v > hi || v < -hi - 1) { /* rare: the bound is proven, saturation is the safety net */
                        v = v > hi ? hi : -hi - 1;
                    }
                    *pm++ = (int16_t)v;
                }
            }
            continue;
        }
#endif
        for (; i < q; i += 2) {
            const int16_t *r0 = C + i * q;
            const int16_t *r1 = i + 1 < q ? r0 + q : r0; /* an odd last row runs twice, stored once */
            int64_t s0 = 0, s1 = 0;
            if (LMU_SUM32_CHUNKS && wrap32 && coeff_frac >= 1 && coeff_frac <= 31) { /* whole rows in 32 bits */
                uint32_t w0 = 0, w1 = 0;
#if LMU_PATH_V6M
                int32_t a0 = 0, a1 = 0;
                lmu_v6m_dot2(mc, r0, r1, q, &a0, &a1); /* ADD wraps modulo 2^32 */
                w0 = (uint32_t)a0;
                w1 = (uint32_t)a1;
#else
                for (j0 = 0; j0 < q; ++j0) { /* each product fits int32; unsigned sums wrap, as defined */
                    const int32_t mj = mc[j0];
                    w0 += (uint32_t)((int32_t)r0[j0] * mj);
                    w1 += (uint32_t)((int32_t)r1[j0] * mj);
                }
#endif
                lmu_dense_finish32(tmp, i, w0, B[i], uc, mc[i], coeff_frac, delta, bits);
                if (i + 1 < q) {
                    lmu_dense_finish32(tmp, i + 1, w1, B[i + 1], uc, mc[i + 1], coeff_frac, delta, bits);
                }
                continue;
            }
            if (!LMU_SUM32_CHUNKS && chunk < q) { /* a 64-bit multiply-accumulate is one instruction here */
                for (j0 = 0; j0 < q; ++j0) {
                    const int32_t mj = mc[j0];
                    s0 += (int32_t)r0[j0] * mj;
                    s1 += (int32_t)r1[j0] * mj;
                }
            } else {
#if LMU_PATH_V6M
                if (chunk >= 1 && q > 0) { /* the chunks in one call: lmu_v6m_rows2_chunks */
                    int32_t a[9];
                    const int16_t *pp[3];
                    pp[0] = mc;
                    pp[1] = r0;
                    pp[2] = r1;
                    memcpy(a, pp, sizeof(pp)); /* three 32-bit pointers (ARMv6-M) */
                    a[3] = 2 * chunk;
                    a[4] = 2 * q;
                    lmu_v6m_rows2_chunks(a);
                    s0 = (int64_t)a[6] * 65536 + a[5];
                    s1 = (int64_t)a[8] * 65536 + a[7];
                }
#endif
                for (j0 = LMU_PATH_V6M && chunk >= 1 ? q : 0; j0 < q; j0 += chunk) {
                    const int32_t n = q - j0 > chunk ? chunk : q - j0;
                    const int16_t *p0 = r0 + j0, *p1 = r1 + j0, *pm = mc + j0;
                    int32_t a0 = 0, a1 = 0;
#if LMU_PATH_V6M
                    lmu_v6m_dot2(pm, p0, p1, n, &a0, &a1);
#else
                    int32_t j;
                    for (j = 0; j < n; ++j) { /* one shared index: ARMv6-M LDRSH takes a register offset */
                        const int32_t mj = pm[j];
                        a0 += (int32_t)p0[j] * mj;
                        a1 += (int32_t)p1[j] * mj;
                    }
#endif
                    s0 += a0;
                    s1 += a1;
                }
            }
            lmu_dense_finish(tmp, i, s0, B[i], uc, mc[i], coeff_frac, delta, bits);
            if (i + 1 < q) {
                lmu_dense_finish(tmp, i + 1, s1, B[i + 1], uc, mc[i + 1], coeff_frac, delta, bits);
            }
        }
        for (i = 0; i < q; ++i) {
            mc[i] = (int16_t)tmp[i];
        }
    }
}

#endif /* LMU_DENSE16_H */
