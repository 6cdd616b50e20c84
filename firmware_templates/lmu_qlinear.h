/*
 * lmu_qlinear.h -- the int8 linear layers: lmu_qlinear (sum over parts of
 * MBQM((x_p - zp_p) . W_p [+ bias]), clamp, optional 256-entry LUT), the 30-bit accumulator form, tables,
 * softmax and the running-mean pool in integers. Their dot products run two rows at a time in portable C,
 * four on DSP cores (SMLAD on SXTB16 pairs), as vectors on Helium (VMLADAVA) and in a Thumb-1 loop on ARMv6-M:
 * the paths side by side below. Part of lmu_runtime.h.
 */
#ifndef LMU_QLINEAR_H
#define LMU_QLINEAR_H

#include "lmu_config.h"
#include "lmu_fixedpoint.h"
#include "lmu_wx.h"

#if LMU_PATH_ARM /* the DSP and Helium kernels */
/* int8 dot products of lmu_qdot2 (see its comment below for the ranges and the proof): adds
 * the first i products to *a0 and *a1 (modulo 2^32) and returns i. Helium: per 16 inputs and 2 rows,
 * 3 VLDRB and 2 VMLADAVA. DSP: per 4 inputs and 2 rows, 1 LDR + 2 SXTB16 for x, then 1 LDR + 2 SXTB16 +
 * 2 SMLAD per row (the zero point is folded into the accumulator's start, so x needs no SSUB16). */
static inline int32_t lmu_qdot2_arm(const int8_t *x, const int8_t *w0, const int8_t *w1, int32_t n, int32_t *a0,
                                    int32_t *a1) {
    int32_t i = 0, s0 = *a0, s1 = *a1;
#if LMU_PATH_MVE
    {
        const int8_t *px = x, *p0 = w0, *p1 = w1; /* pointers, not indices: gcc then post-increments */
        for (; i + 16 <= n; i += 16, px += 16, p0 += 16, p1 += 16) {
            const int8x16_t xv = vldrbq_s8(px);
            s0 = vmladavaq_s8(s0, xv, vldrbq_s8(p0));
            s1 = vmladavaq_s8(s1, xv, vldrbq_s8(p1));
        }
    }
#endif
#if LMU_PATH_DSP
    for (; i + 4 <= n; i += 4) {
        const uint32_t xw = lmu_ld32(x + i);
        const uint32_t xe = __sxtb16(xw), xo = lmu_sxtb16_hi(xw); /* (x0, x2), (x1, x3) */
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

#if LMU_PATH_MVE
/* Four rows of int8 dot products as one vector of sums, lane r = sum_i x_i w_r[i] modulo 2^32 (lmu_qdot2's
 * wrapping sums; rows may repeat): per 16 inputs one VLDRB of x, four VLDRB of weights and four VMLADAVA; the
 * last n % 16 inputs with zeroing predicated loads (VCTP), so nothing past a row is read and the lanes past n
 * add zero products. The sums then go to four lanes (VDUP and three VMOV). */
static inline int32x4_t lmu_mve_qdot4(const int8_t *x, const int8_t *w0, const int8_t *w1, const int8_t *w2,
                                      const int8_t *w3, int32_t n) {
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, i = 0;
    int32x4_t v;
    for (; i + 16 <= n; i += 16, x += 16, w0 += 16, w1 += 16, w2 += 16, w3 += 16) {
        const int8x16_t xv = vldrbq_s8(x);
        s0 = vmladavaq_s8(s0, xv, vldrbq_s8(w0));
        s1 = vmladavaq_s8(s1, xv, vldrbq_s8(w1));
        s2 = vmladavaq_s8(s2, xv, vldrbq_s8(w2));
        s3 = vmladavaq_s8(s3, xv, vldrbq_s8(w3));
    }
    if (i < n) {
        const mve_pred16_t p = vctp8q((uint32_t)(n - i));
        const int8x16_t xv = vldrbq_z_s8(x, p);
        s0 = vmladavaq_s8(s0, xv, vldrbq_z_s8(w0, p));
        s1 = vmladavaq_s8(s1, xv, vldrbq_z_s8(w1, p));
        s2 = vmladavaq_s8(s2, xv, vldrbq_z_s8(w2, p));
        s3 = vmladavaq_s8(s3, xv, vldrbq_z_s8(w3, p));
    }
    v = vdupq_n_s32(s0);
    v = vsetq_lane_s32(s1, v, 1);
    v = vsetq_lane_s32(s2, v, 2);
    return vsetq_lane_s32(s3, v, 3);
}
#endif

#if LMU_PATH_MVE && defined(__OPTIMIZE__)
/* lmu_mve_qdot4 of four consecutive rows (w, w + n, w + 2n, w + 3n) for a compile-time n, a multiple of 16
 * up to 112: per 16 inputs one VLDRB of x, four of weights and four VMLADAV(A), 9 instructions for 64 MACs,
 * no loop (passes written out, each under .if; the first pass VMLADAV: no sums to clear). Rows 0-2 at -n, +n and 0 bytes of a pointer to
 * row 1 (VLDRB's immediate reaches +-127 bytes), row 3 from its own pointer; the sums in even registers (as
 * VMLADAV needs) go to the vector with four one-lane VMOVs. (Not the two-lane VMOV Qd[2], Qd[0], Rt, Rt2:
 * QEMU 7.2 writes Rt to lane 0 where LLVM's instruction definition puts it in lane 2, so a test under QEMU
 * could not tell which order a real core uses.) */
#define LMU_MVE_QROWS4_16COLS(OP)                                                                                      \
    "vldrb.s8 q0, [%[x]], #16\n\t"                                                                                     \
    "vldrb.s8 q1, [%[pa], #-%c[n]]\n\t" OP " r0, q0, q1\n\t"                                                           \
    "vldrb.s8 q2, [%[pa], #%c[n]]\n\t" OP " r4, q0, q2\n\t"                                                            \
    "vldrb.s8 q1, [%[pa]], #16\n\t" OP " r2, q0, q1\n\t"                                                               \
    "vldrb.s8 q2, [%[pb]], #16\n\t" OP " r6, q0, q2\n\t"

/* pass k (k >= 1) of the 16-input passes when n > 16 k (written out: see LMU_MVE_ROWS8_IF) */
#define LMU_MVE_QROWS4_IF(k) ".if %c[k] > " #k "\n\t" LMU_MVE_QROWS4_16COLS("vmladava.s8") ".endif\n\t"

LMU_ALWAYS_INLINE int32x4_t lmu_mve_qdot4c(const int8_t *x, const int8_t *w, int32_t n) {
    const int8_t *pa = w + n, *pb = w + 3 * n;
    int32x4_t v;
    __asm__(LMU_MVE_QROWS4_16COLS("vmladav.s8") LMU_MVE_QROWS4_IF(1) LMU_MVE_QROWS4_IF(2) LMU_MVE_QROWS4_IF(3)
                LMU_MVE_QROWS4_IF(4) LMU_MVE_QROWS4_IF(5) LMU_MVE_QROWS4_IF(6) "vmov.32 %q[v][0], r0\n\t"
                                                                               "vmov.32 %q[v][1], r2\n\t"
                                                                               "vmov.32 %q[v][2], r4\n\t"
                                                                               "vmov.32 %q[v][3], r6"
            : [v] "=w"(v), [x] "+r"(x), [pa] "+r"(pa), [pb] "+r"(pb)
            : [n] "i"(n), [k] "i"(n / 16)
            : "r0", "r2", "r4", "r6", "q0", "q1", "q2", "memory");
    return v;
}
#endif

#if LMU_PATH_DSP && !LMU_PATH_MVE
/* Four rows of the int8 dot product (ranges and proof of lmu_qdot2 below): adds the first i
 * products of rows w, w + n, w + 2n, w + 3n to a[0..3] (modulo 2^32) and returns i. Per 4 inputs: 1 LDR +
 * 2 SXTB16 for x, shared by the four rows, then per row 1 LDR + 2 SXTB16 + 2 SMLAD: 23 instructions for 16
 * MACs (the two-row loop takes 13 for 8). n is a constant in the generated step, so the row offsets fold. */
LMU_SPECIALIZE int32_t lmu_qdot4_arm(const int8_t *x, const int8_t *w, int32_t n, int32_t *a) {
    int32_t i, s0 = a[0], s1 = a[1], s2 = a[2], s3 = a[3];
    for (i = 0; i + 4 <= n; i += 4) {
        const uint32_t xw = lmu_ld32(x + i);
        const uint32_t xe = __sxtb16(xw), xo = lmu_sxtb16_hi(xw); /* (x0, x2), (x1, x3) */
        const uint32_t u0 = lmu_ld32(w + i), u1 = lmu_ld32(w + n + i);
        const uint32_t u2 = lmu_ld32(w + 2 * n + i), u3 = lmu_ld32(w + 3 * n + i);
        s0 = __smlad(__sxtb16(u0), xe, s0);
        s0 = __smlad(lmu_sxtb16_hi(u0), xo, s0);
        s1 = __smlad(__sxtb16(u1), xe, s1);
        s1 = __smlad(lmu_sxtb16_hi(u1), xo, s1);
        s2 = __smlad(__sxtb16(u2), xe, s2);
        s2 = __smlad(lmu_sxtb16_hi(u2), xo, s2);
        s3 = __smlad(__sxtb16(u3), xe, s3);
        s3 = __smlad(lmu_sxtb16_hi(u3), xo, s3);
    }
    a[0] = s0;
    a[1] = s1;
    a[2] = s2;
    a[3] = s3;
    return i;
}
#endif
#elif LMU_PATH_V6M
/* ARMv6-M: lmu_qdot2's first n - n % 2 inputs in a Thumb-1 loop, two inputs per pass: per input 3 LDRSB,
 * 2 MULS, 2 ADD and one ADDS, then CMP / BNE per pass (18 instructions for 4 MACs). The sums wrap modulo
 * 2^32 as lmu_qdot2's (ADD sets no flags and reaches any register). Returns how many inputs it did. */
#define LMU_V6M_QCOL2                                                                                                  \
    "ldrsb %[v], [%[x], %[i]]\n\t"                                                                                     \
    "ldrsb %[c], [%[w0], %[i]]\n\t"                                                                                    \
    "muls %[c], %[v], %[c]\n\t"                                                                                        \
    "add %[s0], %[c]\n\t"                                                                                              \
    "ldrsb %[c], [%[w1], %[i]]\n\t"                                                                                    \
    "muls %[c], %[v], %[c]\n\t"                                                                                        \
    "add %[s1], %[c]\n\t"                                                                                              \
    "adds %[i], %[i], #1\n\t"
static inline int32_t lmu_qdot2_arm(const int8_t *x, const int8_t *w0, const int8_t *w1, int32_t n, int32_t *a0,
                                    int32_t *a1) {
    register int32_t s0 __asm__("r8") = *a0; /* fixed high registers, as in lmu_v6m_dot3 */
    register int32_t s1 __asm__("r9") = *a1;
    register int32_t end __asm__("r10") = n - n % 2;
    int32_t i = 0, v, c;
    if (end == 0) {
        return 0;
    }
    __asm__(".syntax unified\n"
            "1:\n\t" LMU_V6M_QCOL2 LMU_V6M_QCOL2 "cmp %[i], %[end]\n\t"
            "bne 1b"
            : [s0] "+r"(s0), [s1] "+r"(s1), [i] "+l"(i), [v] "=&l"(v), [c] "=&l"(c)
            : [x] "l"(x), [w0] "l"(w0), [w1] "l"(w1), [end] "r"(end)
            : "cc", "memory");
    *a0 = s0;
    *a1 = s1;
    return end;
}
#else
static inline int32_t lmu_qdot2_arm(const int8_t *x, const int8_t *w0, const int8_t *w1, int32_t n, int32_t *a0,
                                    int32_t *a1) {
    (void)x;
    (void)w0;
    (void)w1;
    (void)n;
    (void)a0;
    (void)a1;
    return 0;
}
#endif

/* ------------------------------------------------------------------------------------------ */
/* int8 linear layers                                                                         */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    const int8_t *w; /* (n_out, n_in), row-major: one row per output */
    int32_t n_in;
    const int16_t *w16;   /* int16 weights, (n_out, n_in), in place of w (int16 mode), or NULL */
    int32_t in_zp;        /* the input's zero point (int8 kernels read it through zsum) */
    const int32_t *zsum;  /* (n_out): -in_zp * sum_i w[j, i] (+ bias_j in an int8 layer's first part), or NULL */
    const int32_t *mult;  /* (n_out) */
    const int32_t *shift; /* (n_out) */
    const int16_t *wx;    /* LMU_WX builds: w's int8 values as halfwords in 4 x 4 blocks (lmu_int16.h), w NULL */
} lmu_qpart_t;

typedef struct {
    const lmu_qpart_t *parts;
    int32_t n_parts;
    int32_t n_out;
    const int32_t *bias; /* (n_out) or NULL, in the first part's accumulator */
    int32_t out_zp;
    int32_t clamp_min;
    int32_t clamp_max;
    const int8_t *lut;    /* 256 entries indexed by y + 128, or NULL (int8 layers) */
    const int16_t *lut16; /* 513 entries read by lmu_interp16, or NULL (int16x8 layers) */
    int32_t right_shifts; /* 1: every part's shifts are in [-31, 0] and multipliers above INT32_MIN */
    int32_t acc30;        /* 1: one part, right_shifts, |out_zp| < 2^30 and every row's exact accumulator
                           * below 2^30 in magnitude, proven by the code generator (lmu_qlinear30) */
} lmu_qlinear_t;

/* Two rows of an int8 dot product, the input zero point folded out:
 *   a0 += sum_i x_i w0_i,  a1 += sum_i x_i w1_i   (w1 may equal w0: one row).
 * The layer's accumulator is bias_j + zsum_j + sum_i x_i w_ji with zsum_j = -zp sum_i w_ji (computed at
 * conversion), which is the exact integer bias_j + sum_i (x_i - zp) w_ji. Ranges: x, w in [-128, 127], so
 * every product fits 16 bits and a pair of them a halfword lane's SMLAD. The quantizer keeps
 * n * 255 * 128 + |bias| below 2^31 (n < 65000 inputs per part), so that exact value fits int32; the
 * partial sums may not, so they are formed modulo 2^32 (unsigned in C, as SMLAD and VMLADAVA wrap) and the
 * wraps cancel: the final value is the exact one on every path. lmu_qdot2_arm (above) does
 * the first inputs on a DSP or Helium core. No scratch. */
static inline void lmu_qdot2(const int8_t *x, const int8_t *w0, const int8_t *w1, int32_t n, int32_t *a0, int32_t *a1) {
    const int32_t i0 = lmu_qdot2_arm(x, w0, w1, n, a0, a1);
    uint32_t s0 = (uint32_t)*a0, s1 = (uint32_t)*a1;
    int32_t i;
    for (i = i0; i < n; ++i) {
        s0 += (uint32_t)((int32_t)x[i] * (int32_t)w0[i]);
        s1 += (uint32_t)((int32_t)x[i] * (int32_t)w1[i]);
    }
    *a0 = (int32_t)s0;
    *a1 = (int32_t)s1;
}

/* lmu_mbqm32(a, m, s) of a layer's output row: one rounding after one SMULL (lmu_mbqm32_r) on the DSP and
 * Helium paths when the code generator marked every shift of the layer as a right shift; one SMMULR
 * (lmu_mbqm32_s) on the DSP path when it also proved |a| < 2^30 (acc30) */
LMU_SPECIALIZE int32_t lmu_qrequant(const lmu_qlinear_t *L, int32_t a, int32_t m, int32_t s) {
#if LMU_PATH_DSP
    if (L->acc30) { /* |a| < 2^30 (the code generator's proof): one SMMULR, an add and a shift */
        return lmu_mbqm32_s(a, m, -s);
    }
#endif
#if LMU_PATH_DSP || LMU_PATH_MVE
    if (L->right_shifts) {
        return lmu_mbqm32_r(a, m, -s);
    }
#elif LMU_PATH_V6M
    if (L->acc30) { /* |a| < 2^30, every shift a right shift: no 64-bit multiply helper */
        return lmu_mbqm32_h16(a, m, -s);
    }
#else
    (void)L;
#endif
    return lmu_mbqm32(a, m, s);
}

/* an output row's value from its requantized total: clamp, then the layer's table when it has one */
static inline int32_t lmu_qout(const lmu_qlinear_t *L, int64_t total) {
    const int64_t t = lmu_clamp64(total, L->clamp_min, L->clamp_max);
    return L->lut ? (int32_t)L->lut[t + 128] : (int32_t)t;
}

/* the accumulator's start for row j of part k: bias_j (first part) + zsum_j (the folded zero point) */
static inline int32_t lmu_qstart(const lmu_qlinear_t *L, const lmu_qpart_t *p, int32_t k, int32_t j) {
    const uint32_t b = (k == 0 && L->bias) ? (uint32_t)L->bias[j] : 0u;
    return (int32_t)(b + (p->zsum ? (uint32_t)p->zsum[j] : 0u));
}

/* v clamped to [lo, hi]: one SSAT on the DSP path for the int8 and int16 ranges (lo and hi are constants
 * where the layer kernels are inlined, so the tests fold) */
static inline int32_t lmu_clamp32(int32_t v, int32_t lo, int32_t hi) {
#if LMU_PATH_DSP
    if (lo == -128 && hi == 127) {
        return __ssat(v, 8);
    }
    if (lo == -32768 && hi == 32767) {
        return __ssat(v, 16);
    }
#endif
    return v < lo ? lo : (v > hi ? hi : v);
}

/* Row j of an acc30 layer from its accumulator a (the exact bias_j + sum_i (x_i - zp) w_ji): stored as int32
 * in out or as int8 in y (the other NULL). With |a| < 2^30 and a right shift, |MBQM(a, m, s)| <= 2^30, and
 * |out_zp| < 2^30, so out_zp + MBQM fits int32: the same value lmu_qlinear forms in 64 bits, clamped the
 * same way, with no 64-bit add or compare. */
LMU_SPECIALIZE void lmu_qrow30(const lmu_qlinear_t *L, int32_t a, int32_t j, int32_t *out, int8_t *y) {
    const int32_t v = L->out_zp + lmu_qrequant(L, a, L->parts->mult[j], L->parts->shift[j]);
    const int32_t c = lmu_clamp32(v, L->clamp_min, L->clamp_max);
    const int32_t o = L->lut ? (int32_t)L->lut[c + 128] : c;
    if (y) {
        y[j] = (int8_t)o;
    } else {
        out[j] = o;
    }
}

/* lmu_qlinear for a layer the code generator marked acc30: no parts loop, no 64-bit totals, int8 outputs
 * written straight to y (or int32 ones to out). What it assumes, all checked at conversion
 * (c_codegen._acc30, the comment above the layer's struct in model.c gives the bound): one part; every
 * shift in [-31, 0]; |out_zp| < 2^30; and |bias_j + sum_i (x_i - zp) w_ji| <= max_j |bias_j| +
 * max(127 - zp, zp + 128) sum_i |w_ji| < 2^30 for every int8 input, so lmu_mbqm32_s may take the exact
 * accumulator (2a fits int32) and lmu_qrow30's sum fits int32. The dot products are lmu_qlinear's. */
LMU_SPECIALIZE void lmu_qlinear30(const lmu_qlinear_t *L, const int8_t *x, int32_t *out, int8_t *y) {
    const lmu_qpart_t *p = L->parts;
    const int32_t n = p->n_in;
    int32_t j = 0;
#if LMU_PATH_MVE
    /* Helium: four rows per vector, the last n_out % 4 predicated (VCTP; their row pointers repeat the first
     * row, their lanes are not stored). Requantized four at a time: VQRDMULH is SMMULR of 2a (|a| < 2^30), then
     * lmu_rdbpot_s as (y - [y < 0 and e > 0] + 2^(e-1)) >> e with VRSHL by the row's shift (a rounding right
     * shift, exact: |y| <= 2^30), out_zp, the clamp and the table (a VLDRB gather). */
    {
        const int32x4_t lo = vdupq_n_s32(L->clamp_min), hi = vdupq_n_s32(L->clamp_max);
        for (; j < L->n_out; j += 4) {
            const int32_t left = L->n_out - j;
            const mve_pred16_t pr = vctp32q((uint32_t)left);
            const int8_t *w0 = p->w + j * n;
            int32x4_t a, sh, y0;
#ifdef __OPTIMIZE__
            if (__builtin_constant_p(n) && n % 16 == 0 && n >= 16 && n <= 112 && left >= 4) {
                a = lmu_mve_qdot4c(x, w0, n);
            } else
#endif
            {
                a = lmu_mve_qdot4(x, w0, left > 1 ? w0 + n : w0, left > 2 ? w0 + 2 * n : w0, left > 3 ? w0 + 3 * n : w0,
                                  n);
            }
            if (L->bias) {
                a = vaddq_s32(a, vldrwq_z_s32(L->bias + j, pr));
            }
            if (p->zsum) {
                a = vaddq_s32(a, vldrwq_z_s32(p->zsum + j, pr));
            }
            sh = vldrwq_z_s32(p->shift + j, pr);
            y0 = vqrdmulhq_s32(a, vldrwq_z_s32(p->mult + j, pr));
            a = vrshlq_s32(vaddq_s32(y0, vandq_s32(vshrq_n_s32(y0, 31), vshrq_n_s32(sh, 31))), sh);
            a = vmaxq_s32(vminq_s32(vaddq_n_s32(a, L->out_zp), hi), lo);
            if (L->lut) {
                a = vldrbq_gather_offset_s32(L->lut, vreinterpretq_u32_s32(vaddq_n_s32(a, 128)));
            }
            if (left < 4) {
                LMU_MVE_STORE_FENCE();
            }
            if (y) {
                vstrbq_p_s32(y + j, a, pr);
            } else {
                vstrwq_p_s32(out + j, a, pr);
            }
        }
    }
#endif
#if LMU_WX
    if (p->wx) { /* expanded weights: every block of four rows, the last one's rows past n_out not stored */
        for (; j < L->n_out; j += 4) {
            const int32_t rows = L->n_out - j < 4 ? L->n_out - j : 4;
            int32_t a[4] = {0, 0, 0, 0}, r;
            lmu_wx8_block(x, p->wx + (j / 4) * ((n + 3) / 4) * 16, n, a);
            for (r = 0; r < rows; ++r) {
                lmu_qrow30(L, (int32_t)((uint32_t)a[r] + (uint32_t)lmu_qstart(L, p, 0, j + r)), j + r, out, y);
            }
        }
        return;
    }
#endif
#if LMU_PATH_DSP && !LMU_PATH_MVE
    if (n == 1) { /* one input (a layer on a scalar signal): one multiply-accumulate per row */
        for (; j < L->n_out; ++j) {
            lmu_qrow30(L, (int32_t)((uint32_t)lmu_qstart(L, p, 0, j) + (uint32_t)((int32_t)x[0] * p->w[j])), j, out, y);
        }
        return;
    }
    for (; j + 4 <= L->n_out; j += 4) { /* four rows share each unpacked input word (lmu_qdot4_arm) */
        const int8_t *w = p->w + j * n;
        int32_t a[4], i; /* constant indices only: gcc keeps the four sums in registers */
        a[0] = lmu_qstart(L, p, 0, j);
        a[1] = lmu_qstart(L, p, 0, j + 1);
        a[2] = lmu_qstart(L, p, 0, j + 2);
        a[3] = lmu_qstart(L, p, 0, j + 3);
        for (i = lmu_qdot4_arm(x, w, n, a); i < n; ++i) {
            a[0] = (int32_t)((uint32_t)a[0] + (uint32_t)((int32_t)x[i] * (int32_t)w[i]));
            a[1] = (int32_t)((uint32_t)a[1] + (uint32_t)((int32_t)x[i] * (int32_t)w[n + i]));
            a[2] = (int32_t)((uint32_t)a[2] + (uint32_t)((int32_t)x[i] * (int32_t)w[2 * n + i]));
            a[3] = (int32_t)((uint32_t)a[3] + (uint32_t)((int32_t)x[i] * (int32_t)w[3 * n + i]));
        }
        lmu_qrow30(L, a[0], j, out, y);
        lmu_qrow30(L, a[1], j + 1, out, y);
        lmu_qrow30(L, a[2], j + 2, out, y);
        lmu_qrow30(L, a[3], j + 3, out, y);
    }
#endif
    for (; j < L->n_out; j += 2) {
        const int32_t j1 = j + 1 < L->n_out ? j + 1 : j;
        int32_t a0 = lmu_qstart(L, p, 0, j), a1 = lmu_qstart(L, p, 0, j1);
        lmu_qdot2(x, p->w + j * n, p->w + j1 * n, n, &a0, &a1);
        lmu_qrow30(L, a0, j, out, y);
        if (j1 != j) {
            lmu_qrow30(L, a1, j1, out, y);
        }
    }
}

/* out[j] = lut?(clamp(out_zp + sum_p MBQM(acc_p[j], mult_p[j], shift_p[j]))),
 * acc_p[j] = [bias_j if p == 0] + sum_i (x_p[i] - zp_p) W_p[j, i] (formed as lmu_qstart + sum_i x_p[i] W_p[j, i]);
 * two output rows at a time (four on the DSP path). */
LMU_SPECIALIZE void lmu_qlinear(const lmu_qlinear_t *L, const int8_t *const *in, int32_t *out) {
    int32_t j = 0, k, r;
    if (L->acc30) {
        lmu_qlinear30(L, in[0], out, NULL);
        return;
    }
#if LMU_WX
    if (L->parts[0].wx) { /* expanded weights (every part has them): blocks of four, the last one's rows past
                           * n_out not stored */
        for (; j < L->n_out; j += 4) {
            const int32_t rows = L->n_out - j < 4 ? L->n_out - j : 4;
            int64_t total[4];
            for (r = 0; r < 4; ++r) {
                total[r] = L->out_zp;
            }
            for (k = 0; k < L->n_parts; ++k) {
                const lmu_qpart_t *p = &L->parts[k];
                int32_t a[4] = {0, 0, 0, 0};
                lmu_wx8_block(in[k], p->wx + (j / 4) * ((p->n_in + 3) / 4) * 16, p->n_in, a);
                for (r = 0; r < rows; ++r) {
                    a[r] = (int32_t)((uint32_t)a[r] + (uint32_t)lmu_qstart(L, p, k, j + r));
                    total[r] += lmu_qrequant(L, a[r], p->mult[j + r], p->shift[j + r]);
                }
            }
            for (r = 0; r < rows; ++r) {
                out[j + r] = lmu_qout(L, total[r]);
            }
        }
        return;
    }
#endif
#if LMU_PATH_DSP && !LMU_PATH_MVE
    for (; j + 4 <= L->n_out; j += 4) { /* DSP: four rows share each unpacked input word (lmu_qdot4_arm) */
        int64_t total[4];
        for (r = 0; r < 4; ++r) {
            total[r] = L->out_zp;
        }
        for (k = 0; k < L->n_parts; ++k) {
            const lmu_qpart_t *p = &L->parts[k];
            const int8_t *x = in[k], *w = p->w + (int32_t)j * p->n_in;
            int32_t a[4], i;
            for (r = 0; r < 4; ++r) {
                a[r] = lmu_qstart(L, p, k, j + r);
            }
            for (i = lmu_qdot4_arm(x, w, p->n_in, a); i < p->n_in; ++i) {
                for (r = 0; r < 4; ++r) {
                    a[r] = (int32_t)((uint32_t)a[r] + (uint32_t)((int32_t)x[i] * (int32_t)w[r * p->n_in + i]));
                }
            }
            for (r = 0; r < 4; ++r) {
                total[r] += lmu_qrequant(L, a[r], p->mult[j + r], p->shift[j + r]);
            }
        }
        for (r = 0; r < 4; ++r) {
            out[j + r] = lmu_qout(L, total[r]);
        }
    }
#endif
    for (; j < L->n_out; j += 2) {
        const int32_t j1 = j + 1 < L->n_out ? j + 1 : j;
        int64_t total[2];
        total[0] = L->out_zp;
        total[1] = L->out_zp;
        for (k = 0; k < L->n_parts; ++k) {
            const lmu_qpart_t *p = &L->parts[k];
            int32_t a0 = lmu_qstart(L, p, k, j), a1 = lmu_qstart(L, p, k, j1);
            lmu_qdot2(in[k], p->w + (int32_t)j * p->n_in, p->w + (int32_t)j1 * p->n_in, p->n_in, &a0, &a1);
            total[0] += lmu_qrequant(L, a0, p->mult[j], p->shift[j]);
            total[1] += lmu_qrequant(L, a1, p->mult[j1], p->shift[j1]);
        }
        for (r = 0; r < 2 && j + r < L->n_out; ++r) {
            out[j + r] = lmu_qout(L, total[r]);
        }
    }
}

LMU_SPECIALIZE void lmu_qlinear_i8(const lmu_qlinear_t *L, const int8_t *const *in, int32_t *acc, int8_t *y) {
    int32_t j;
    if (L->acc30) { /* straight into y: no int32 pass through acc */
        lmu_qlinear30(L, in[0], NULL, y);
        return;
    }
    lmu_qlinear(L, in, acc);
    for (j = 0; j < L->n_out; ++j) {
        y[j] = (int8_t)acc[j];
    }
}

static inline void lmu_qlut(const int8_t *lut, const int8_t *x, int8_t *y, int32_t n) {
    int32_t i;
    for (i = 0; i < n; ++i) {
        y[i] = lut[(int32_t)x[i] + 128];
    }
}

/* y_i = clamp(round(256 e_i / sum e) - 128), e_i = exp_lut[max - x_i]; scale 1/256, zero point -128 */
static inline void lmu_qsoftmax(const int32_t *exp_lut, const int8_t *x, int8_t *y, int32_t n) {
    int32_t i, mx = -128;
    int64_t sum = 0;
    for (i = 0; i < n; ++i) {
        mx = x[i] > mx ? x[i] : mx;
    }
    for (i = 0; i < n; ++i) {
        sum += exp_lut[mx - x[i]];
    }
    for (i = 0; i < n; ++i) {
        y[i] = lmu_clamp8(lmu_div_round((int64_t)exp_lut[mx - x[i]] * 256, sum) - 128);
    }
}

/* running mean: sum += x - in_zp; y = clamp(out_zp + MBQM(div_round(256 sum, n), m, s)) */
static inline void lmu_qpool(int64_t *sum, int32_t *count, const int8_t *x, int8_t *y, int32_t n, int32_t in_zp,
                             int32_t m, int32_t s, int32_t out_zp) {
    int32_t i;
    if (*count < INT32_MAX) {
        *count += 1;
    }
    for (i = 0; i < n; ++i) {
        sum[i] += (int64_t)x[i] - in_zp;
        y[i] = lmu_clamp8(out_zp + (int64_t)lmu_mbqm(lmu_div_round(sum[i] * 256, *count), m, s));
    }
}

#endif /* LMU_QLINEAR_H */
