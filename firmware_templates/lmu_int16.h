/*
 * lmu_int16.h -- the 16-bit layers (--quantize int16x8 and int16, and the layers
 * the default int8 widens to them): int16 activations with zero point 0, int8 or int16 weights, int64 row
 * accumulators, TFLite's 64-bit requantization (lmu_mbqm16), tanh / sigmoid / silu and softmax as 513-entry
 * tables read with linear interpolation (lmu_interp16). Their dense rows with int8 weights run four at a
 * time on DSP cores (SMLAD on PKHBT / SXTB16 pairs, one assembly loop for a compile-time n) and on Helium
 * (VMLADAVA.S16), rows with int16 weights one at a time (SMLALD, VMLALDAVA), in two-row portable C elsewhere;
 * the tables, softmax and pooling are portable C on every core. Their LMU memory is the int8 mode's
 * (lmu_memory.h, lmu_dense16.h): it depends on the state width only; the state into int16 activations
 * (lmu_requant16, lmu_requant16_s16) is in lmu_requant.h. Part of lmu_runtime.h.
 */
#ifndef LMU_INT16_H
#define LMU_INT16_H

#include "lmu_config.h"
#include "lmu_fixedpoint.h"
#include "lmu_qlinear.h"

#if LMU_PATH_ARM /* the DSP and Helium kernels */
/* int16 x int16 dot product of lmu_qdot16w (below) for a zero point of 0 (the int16 mode's
 * activations are symmetric): adds the first i products to *s and returns i. Each product is at most 2^30
 * in magnitude and the int64 sum is exact in any order, so the result is the portable loop's. Helium: per
 * 8 inputs 2 VLDRH and 1 VMLALDAVA.S16; DSP: per 2 inputs 2 LDR and 1 SMLALD. */
static inline int32_t lmu_qdot16w_arm(const int16_t *x, const int16_t *w, int32_t n, int64_t *s) {
    int32_t i = 0;
    int64_t acc = *s;
#if LMU_PATH_MVE
    for (; i + 8 <= n; i += 8) {
        acc = vmlaldavaq_s16(acc, vld1q_s16(x + i), vld1q_s16(w + i));
    }
#endif
#if LMU_PATH_DSP
    for (; i + 2 <= n; i += 2) {
        acc = __smlald((int16x2_t)lmu_ld32(x + i), (int16x2_t)lmu_ld32(w + i), acc);
    }
#endif
    *s = acc;
    return i;
}

/* int16 x int8 dot product of lmu_qdot16 (int16x8 rows, below) for a zero point of 0: adds the
 * first i products to *s and returns i; exact in int64 in any order (each product is below 2^23), so the
 * result is the portable loop's. Helium: per 8 inputs 1 VLDRH, 1 VLDRB (sign-extending) and 1
 * VMLALDAVA.S16; DSP: per 4 inputs 2 LDR + PKHBT + PKHTB for x ((x0, x2), (x1, x3)), 1 LDR + 2 SXTB16 for
 * w ((w0, w2), (w1, w3)) and 2 SMLALD. */
static inline int32_t lmu_qdot16_arm(const int16_t *x, const int8_t *w, int32_t n, int64_t *s) {
    int32_t i = 0;
    int64_t acc = *s;
#if LMU_PATH_MVE
    for (; i + 8 <= n; i += 8) {
        acc = vmlaldavaq_s16(acc, vld1q_s16(x + i), vldrbq_s16(w + i));
    }
#endif
#if LMU_PATH_DSP
    for (; i + 4 <= n; i += 4) {
        const uint32_t x01 = lmu_ld32(x + i), x23 = lmu_ld32(x + i + 2), u = lmu_ld32(w + i);
        acc = __smlald((int16x2_t)lmu_pkhbt16(x01, x23), (int16x2_t)__sxtb16(u), acc);
        acc = __smlald((int16x2_t)lmu_pkhtb16(x23, x01), (int16x2_t)lmu_sxtb16_hi(u), acc);
    }
#endif
    *s = acc;
    return i;
}

/* The int16 x int8 rows of lmu_qdot16_run (below; ranges and proof there): adds the first i of len
 * inputs (a run of at most 256) of rows w + r n, r < rows (1, 2 or 4), to s[r] in int32 and returns i. The
 * sums are exact: no product exceeds 2^22 in magnitude. Helium: per 8 inputs one VLDRH of x, then per row one
 * VLDRB.S16 (the weights sign-extended to halfwords) and one VMLADAVA.S16; the last len % 8 inputs predicated
 * (VCTP), so the kernel does them all. DSP: per 4 inputs two LDR and PKHBT / PKHTB put x in (x0, x2), (x1, x3),
 * shared by the rows, then per row one LDR and two SXTB16 of weights ((w0, w2), (w1, w3)) and two SMLAD:
 * 24 instructions for 16 MACs at four rows (with LMU_WX the expanded weights take lmu_wx_run instead). */
LMU_SPECIALIZE int32_t lmu_qdot16_rows_arm(const int16_t *x, const int8_t *w, int32_t n, int32_t len, int32_t rows,
                                           int32_t *s) {
    int32_t i = 0;
#if LMU_PATH_MVE
    {
        /* one pointer per row, each post-incremented by its VLDRB (no address arithmetic in the loop) */
        int32_t s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3];
        const int8_t *w0 = w, *w1 = w + (rows > 1 ? n : 0), *w2 = w + (rows > 2 ? 2 * n : 0);
        const int8_t *w3 = w + (rows > 3 ? 3 * n : 0);
        const int16_t *px = x;
        if (rows > 2) { /* unrelated to w0 for gcc, which derived them from w0 each pass */
            __asm__("" : "+r"(w1), "+r"(w2), "+r"(w3));
        }
        for (; i + 8 <= len; i += 8) {
            const int16x8_t xv = vldrhq_s16(px);
            px += 8;
            s0 = vmladavaq_s16(s0, xv, vldrbq_s16(w0));
            w0 += 8;
            if (rows > 1) {
                s1 = vmladavaq_s16(s1, xv, vldrbq_s16(w1));
                w1 += 8;
            }
            if (rows > 2) {
                s2 = vmladavaq_s16(s2, xv, vldrbq_s16(w2));
                s3 = vmladavaq_s16(s3, xv, vldrbq_s16(w3));
                w2 += 8;
                w3 += 8;
            }
        }
        if (i < len && len >= 8) { /* under 8 inputs, lmu_qdot16_run's scalar loop is cheaper than one VCTP pass */
            const mve_pred16_t p = vctp16q((uint32_t)(len - i));
            const int16x8_t xv = vldrhq_z_s16(px, p);
            s0 = vmladavaq_s16(s0, xv, vldrbq_z_s16(w0, p));
            if (rows > 1) {
                s1 = vmladavaq_s16(s1, xv, vldrbq_z_s16(w1, p));
            }
            if (rows > 2) {
                s2 = vmladavaq_s16(s2, xv, vldrbq_z_s16(w2, p));
                s3 = vmladavaq_s16(s3, xv, vldrbq_z_s16(w3, p));
            }
            i = len;
        }
        s[0] = s0;
        s[1] = s1;
        s[2] = s2;
        s[3] = s3;
    }
#else
    int32_t s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3];
#ifdef __OPTIMIZE__
    if (rows == 4 && __builtin_constant_p(n) && n <= 1365 && len >= 4) {
        /* four rows, a compile-time n (rows 1-3 at n, 2n, 3n bytes of row 0's pointer: LDR's immediate reaches
         * 4095): one statement, 26 instructions per pass of 16 MACs (with the intrinsics below gcc shuffled the
         * four sums through other registers every pass, 31) */
        const int16_t *px = x, *end = x + (len - len % 4);
        const int8_t *pw = w;
        uint32_t ta, tb, tc, tu;
        __asm__("1:\n\t"
                "ldr %[ta], [%[px]], #4\n\t"
                "ldr %[tb], [%[px]], #4\n\t"
                "pkhbt %[tc], %[ta], %[tb], lsl #16\n\t" /* (x0, x2) */
                "pkhtb %[tb], %[tb], %[ta], asr #16\n\t" /* (x1, x3) */
                "ldr %[tu], [%[pw], #%c[n1]]\n\t"
                "sxtb16 %[ta], %[tu]\n\t"
                "smlad %[s1], %[ta], %[tc], %[s1]\n\t"
                "sxtb16 %[ta], %[tu], ror #8\n\t"
                "smlad %[s1], %[ta], %[tb], %[s1]\n\t"
                "ldr %[tu], [%[pw], #%c[n2]]\n\t"
                "sxtb16 %[ta], %[tu]\n\t"
                "smlad %[s2], %[ta], %[tc], %[s2]\n\t"
                "sxtb16 %[ta], %[tu], ror #8\n\t"
                "smlad %[s2], %[ta], %[tb], %[s2]\n\t"
                "ldr %[tu], [%[pw], #%c[n3]]\n\t"
                "sxtb16 %[ta], %[tu]\n\t"
                "smlad %[s3], %[ta], %[tc], %[s3]\n\t"
                "sxtb16 %[ta], %[tu], ror #8\n\t"
                "smlad %[s3], %[ta], %[tb], %[s3]\n\t"
                "ldr %[tu], [%[pw]], #4\n\t"
                "sxtb16 %[ta], %[tu]\n\t"
                "smlad %[s0], %[ta], %[tc], %[s0]\n\t"
                "sxtb16 %[ta], %[tu], ror #8\n\t"
                "smlad %[s0], %[ta], %[tb], %[s0]\n\t"
                "cmp %[px], %[end]\n\t"
                "bne 1b"
                : [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3), [px] "+r"(px), [pw] "+r"(pw),
                  [ta] "=&r"(ta), [tb] "=&r"(tb), [tc] "=&r"(tc), [tu] "=&r"(tu)
                : [end] "r"(end), [n1] "i"(n), [n2] "i"(2 * n), [n3] "i"(3 * n)
                : "cc", "memory");
        i = len - len % 4;
    }
#endif
    for (; i + 4 <= len; i += 4) {
        const uint32_t x01 = lmu_ld32(x + i), x23 = lmu_ld32(x + i + 2);
        const uint32_t xe = lmu_pkhbt16(x01, x23), xo = lmu_pkhtb16(x23, x01); /* (x0, x2), (x1, x3) */
        s0 = lmu_smlad_b4(s0, lmu_ld32(w + i), xe, xo);
        if (rows > 1) {
            s1 = lmu_smlad_b4(s1, lmu_ld32(w + n + i), xe, xo);
        }
        if (rows > 2) {
            s2 = lmu_smlad_b4(s2, lmu_ld32(w + 2 * n + i), xe, xo);
            s3 = lmu_smlad_b4(s3, lmu_ld32(w + 3 * n + i), xe, xo);
        }
    }
    s[0] = s0;
    s[1] = s1;
    s[2] = s2;
    s[3] = s3;
#endif
    return i;
}
#else
static inline int32_t lmu_qdot16_rows_arm(const int16_t *x, const int8_t *w, int32_t n, int32_t len, int32_t rows,
                                          int32_t *s) {
    (void)x;
    (void)w;
    (void)n;
    (void)len;
    (void)rows;
    (void)s;
    return 0;
}
#endif

/* ------------------------------------------------------------------------------------------ */
/* int16x8 layers: int16 activations (zero point 0), int8 weights; portable C on every core     */
/* ------------------------------------------------------------------------------------------ */

/* TFLite's 64-bit MultiplyByQuantizedMultiplier (the 16x8 kernels): the multiplier rounded to 16 bits,
 * then (acc m16 + 2^(t-1)) >> t with t = 15 - s (s <= 14, so t >= 1), clamped to int32. Exact in int64 for
 * |acc| < 2^47: |m16| <= 2^15, so |acc m16| < 2^62. lmu_edge/qir.py mbqm16 is the same. */
static inline int32_t lmu_mbqm16(int64_t acc, int32_t m, int32_t s) {
    const int64_t m16 = m < 0x7FFF0000 ? ((int64_t)m + (1 << 15)) >> 16 : 0x7FFF;
    const int t = 15 - s;
    return (int32_t)lmu_clamp64((acc * m16 + ((int64_t)1 << (t - 1))) >> t, INT32_MIN, INT32_MAX);
}

/* A 513-entry table at v in [0, 65535] (one entry per 128 values, both ends included), linear
 * interpolation rounded half up: T[i] + ((T[i+1] - T[i]) f + 64) >> 7, i = v >> 7, f = v & 127. The
 * difference times f fits int32 for |T| <= 2^16 (int16 activation tables, the Q16 exp table). The result
 * lies between T[i] and T[i+1]. */
static inline int32_t lmu_interp16(const int16_t *t, int32_t v) {
    const int32_t i = v >> 7, f = v & 127;
    return (int32_t)t[i] + ((((int32_t)t[i + 1] - (int32_t)t[i]) * f + 64) >> 7);
}

static inline int32_t lmu_interp32(const int32_t *t, int32_t v) {
    const int32_t i = v >> 7, f = v & 127;
    return t[i] + (((t[i + 1] - t[i]) * f + 64) >> 7);
}

/* sum_i (x_i - zp) w_i in int64: each product is at most 2^16 * 2^7 in magnitude, so n < 2^24 inputs (the
 * quantizer's limit) keep the sum, plus an int32 bias, below 2^47 (lmu_mbqm16's range). */
static inline int64_t lmu_qdot16(const int16_t *x, int32_t zp, const int8_t *w, int32_t n) {
    int64_t s = 0;
    int32_t i = 0;
#if LMU_PATH_DSP || LMU_PATH_MVE
    if (zp == 0) { /* the Arm kernel above: SMLALD / VMLALDAVA for the first inputs */
        i = lmu_qdot16_arm(x, w, n, &s);
    }
#endif
    x += i; /* the rest counted from 0: a tail loop from the kernel's i made gcc -O3 (Cortex-M4) warn */
    w += i; /* of an iteration 2^31 - 1 once inlined with a constant n (-Waggressive-loop-optimizations) */
    n -= i;
    for (i = 0; i < n; ++i) {
        s += (int64_t)(((int32_t)x[i] - zp) * (int32_t)w[i]);
    }
    return s;
}

/* sum_i (x_i - zp) w_i with int16 weights (the int16 mode): each product is below 2^31 in magnitude
 * (|x - zp| <= 2^16 for zp = 0 is |x| <= 2^15, |w| <= 2^15 - 1), and the quantizer keeps n * 2^15 * max|w|
 * plus the int32 bias below 2^47, so the int64 sum is exact and within lmu_mbqm16's range. */
static inline int64_t lmu_qdot16w(const int16_t *x, int32_t zp, const int16_t *w, int32_t n) {
    int64_t s = 0;
    int32_t i = 0;
#if LMU_PATH_DSP || LMU_PATH_MVE
    if (zp == 0) { /* the Arm kernel above: SMLALD / VMLALDAVA for the first inputs */
        i = lmu_qdot16w_arm(x, w, n, &s);
    }
#endif
    x += i; /* the rest counted from 0: a tail loop from the kernel's i made gcc -O3 (Cortex-M4) warn */
    w += i; /* of an iteration 2^31 - 1 once inlined with a constant n (-Waggressive-loop-optimizations) */
    n -= i;
    for (i = 0; i < n; ++i) {
        s += (int64_t)((int32_t)x[i] - zp) * (int32_t)w[i];
    }
    return s;
}

/* lmu_mbqm16(a, m, s) for an int32 a and -31 <= s <= -2 (t = 15 - s in [17, 46]) in 32-bit steps. With
 * m16 the rounded multiplier (in [-2^15, 2^15 - 1] for every int32 m), N = a m16 (|N| <= 2^46), P =
 * floor(N / 2^16) and k = t - 16 >= 1 (nested floors fold):
 *   floor((N + 2^(t-1)) / 2^t) = floor((P + 2^(k-1)) / 2^k) = floor((floor(P / 2^(k-1)) + 1) / 2).
 * DSP path: m16 is the top halfword of QADD(m, 2^15) (saturating: 0x7FFF from m = 0x7FFF0000 up, as
 * lmu_mbqm16's cap), P one SMLAWT (adding 0); elsewhere, with a = ah 2^16 + al (0 <= al < 2^16), P = ah m16 +
 * ((al m16) >> 16), every term within int32. |P| <= 2^30, so the result fits int32 and lmu_mbqm16's int32
 * clamp never acts. tests/test_kernels_dense.py checks it against lmu_mbqm16 at the edges of a, m and s. */
static inline int32_t lmu_mbqm16_32(int32_t a, int32_t m, int32_t s) {
#if LMU_PATH_DSP
    const int32_t p = __smlawt(a, __qadd(m, 32768), 0) >> (-s - 2);
#else
    const int32_t m16 = m < 0x7FFF0000 ? (m + 32768) >> 16 : 0x7FFF; /* m + 2^15 cannot overflow here */
    const int32_t al = (int32_t)((uint32_t)a & 0xFFFFu), ah = (a - al) / 65536;
    const int32_t p = (ah * m16 + ((al * m16) >> 16)) >> (-s - 2);
#endif
    return (p + 1) >> 1;
}

/* the likely branch of a test, laid out as the fall-through (gcc and clang) */
#if defined(__GNUC__) || defined(__clang__)
#define LMU_LIKELY(c) __builtin_expect(!!(c), 1)
#else
#define LMU_LIKELY(c) (c)
#endif

/* lmu_mbqm16 of a row's accumulator: lmu_mbqm16_32 where a fits int32 and -31 <= s <= -2, else the 64-bit
 * form (the same integers either way) */
static inline int32_t lmu_qreq16(int64_t a, int32_t m, int32_t s) {
    if (LMU_LIKELY(s <= -2 && s >= -31 && a >= INT32_MIN && a <= INT32_MAX)) {
        return lmu_mbqm16_32((int32_t)a, m, s);
    }
    return lmu_mbqm16(a, m, s);
}

/* lmu_qreq16 of b + d for int32 b (a bias) and d (a run's sum): the sum formed modulo 2^32, which is the exact
 * b + d unless the addition overflowed (b and d of one sign, the sum of the other), then the 64-bit form */
static inline int32_t lmu_qreq16_2(int32_t b, int32_t d, int32_t m, int32_t s) {
    const int32_t a = lmu_i32((uint32_t)b + (uint32_t)d);
    if (LMU_LIKELY(s <= -2 && s >= -31 && ((b ^ a) & (d ^ a)) >= 0)) {
        return lmu_mbqm16_32(a, m, s);
    }
    return lmu_mbqm16((int64_t)b + d, m, s);
}

/* Rows of int16 x int8 dot products for a zero point of 0 (the int16x8 layers' activations), one run of
 * len <= LMU_Q16_RUN inputs:  s_r += sum_(i < len) x_i w_r[i],  w_r = w + r n,  r < rows (1, 2 or 4).
 * |x_i w_r[i]| <= 2^15 2^7 = 2^22, so a run of 256 inputs sums exactly in int32 (<= 2^30): SMLAD pairs on the
 * DSP path and VMLADAVA.S16 on Helium (lmu_qdot16_rows_arm), a plain loop for what they leave. Exact, so the
 * same integers as lmu_qdot16 on every path. */
#define LMU_Q16_RUN 256
LMU_ALWAYS_INLINE void lmu_qdot16_run(const int16_t *x, const int8_t *w, int32_t n, int32_t len, int32_t rows,
                                      int32_t *s) {
    const int32_t done = lmu_qdot16_rows_arm(x, w, n, len, rows, s);
    /* the rest counted from 0 (as in lmu_qdot16: a tail loop from the kernel's count made gcc -O3 warn) */
    const int16_t *xs = x + done;
    const int8_t *ws = w + done;
    const int32_t m = len - done;
    int32_t i, s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3];
    for (i = 0; i < m; ++i) {
        const int32_t v = xs[i];
        s0 += v * ws[i];
        if (rows > 1) {
            s1 += v * ws[n + i];
        }
        if (rows > 2) {
            s2 += v * ws[2 * n + i];
            s3 += v * ws[3 * n + i];
        }
    }
    s[0] = s0;
    s[1] = s1;
    s[2] = s2;
    s[3] = s3;
}

/* Row j of an int16 layer from its per-part totals: clamp, the table, stored as int32 in out or as int16 in y
 * (the other NULL). A one-part layer with out_zp 0 (every int16x8 layer) clamps in 32 bits (one SSAT on the
 * DSP path for the int16 range): its total is one lmu_mbqm16, an int32. */
LMU_SPECIALIZE void lmu_qout16(const lmu_qlinear_t *L, int64_t total, int32_t j, int32_t *out, int16_t *y) {
    const int32_t t = (L->n_parts == 1 && L->out_zp == 0) ? lmu_clamp32((int32_t)total, L->clamp_min, L->clamp_max)
                                                          : (int32_t)lmu_clamp64(total, L->clamp_min, L->clamp_max);
    const int32_t o = L->lut16 ? lmu_interp16(L->lut16, t + 32768) : t;
    if (y) {
        y[j] = (int16_t)o;
    } else {
        out[j] = o;
    }
}

/* lmu_qdot16_run for part p's rows j .. j + rows - 1, inputs i0 .. i0 + len - 1; from expanded weights where the
 * part has them (the four sums of j's block; a last single row may start at 4b + 2) */
LMU_ALWAYS_INLINE void lmu_q16_dot(const lmu_qpart_t *p, const int16_t *x, int32_t j, int32_t i0, int32_t len,
                                   int32_t rows, int32_t *s) {
    const int32_t n = p->n_in;
#if LMU_WX
    if (p->wx) {
        const int16_t *wb = p->wx + ((j / 4) * ((n + 3) / 4) + i0 / 4) * 16;
        int32_t b[4] = {0, 0, 0, 0}, o = j % 4;
        lmu_wx_run(x + i0, wb, len, rows == 4 ? s : b);
        s[0] += rows == 4 ? 0 : b[o];
        s[1] += rows == 2 ? b[o + 1] : 0;
        return;
    }
#endif
    lmu_qdot16_run(x + i0, p->w + j * n + i0, n, len, rows, s);
}

/* Part k's contribution to `rows` (1, 2 or 4, a constant) consecutive rows from j of an int16 layer with int8
 * weights and zero point 0: t_r += MBQM16([bias_(j+r) if k == 0] + sum_i x_i W[j + r, i]). Rows written out
 * (no arrays indexed by a variable), so the sums stay in registers. */
LMU_ALWAYS_INLINE void lmu_q16_part(const lmu_qlinear_t *L, const int16_t *x, int32_t k, int32_t j, int32_t rows,
                                    int64_t *t0, int64_t *t1, int64_t *t2, int64_t *t3) {
    const lmu_qpart_t *p = &L->parts[k];
    const int32_t n = p->n_in;
    const int32_t *b = (k == 0 && L->bias) ? L->bias + j : NULL;
    int32_t s[4] = {0, 0, 0, 0};
    if (n <= LMU_Q16_RUN) { /* one run: int32 sums, the bias added after the loop (no 64-bit sums in it) */
        lmu_q16_dot(p, x, j, 0, n, rows, s);
        *t0 += lmu_qreq16_2(b ? b[0] : 0, s[0], p->mult[j], p->shift[j]);
        if (rows > 1) {
            *t1 += lmu_qreq16_2(b ? b[1] : 0, s[1], p->mult[j + 1], p->shift[j + 1]);
        }
        if (rows > 2) {
            *t2 += lmu_qreq16_2(b ? b[2] : 0, s[2], p->mult[j + 2], p->shift[j + 2]);
            *t3 += lmu_qreq16_2(b ? b[3] : 0, s[3], p->mult[j + 3], p->shift[j + 3]);
        }
    } else { /* runs of LMU_Q16_RUN inputs, each exact in int32, summed in int64 */
        int64_t a0 = b ? b[0] : 0, a1 = 0, a2 = 0, a3 = 0;
        int32_t i0;
        if (b && rows > 1) {
            a1 = b[1];
        }
        if (b && rows > 2) {
            a2 = b[2];
            a3 = b[3];
        }
        for (i0 = 0; i0 < n; i0 += LMU_Q16_RUN) {
            s[0] = s[1] = s[2] = s[3] = 0;
            lmu_q16_dot(p, x, j, i0, n - i0 < LMU_Q16_RUN ? n - i0 : LMU_Q16_RUN, rows, s);
            a0 += s[0];
            a1 += s[1];
            a2 += s[2];
            a3 += s[3];
        }
        *t0 += lmu_qreq16(a0, p->mult[j], p->shift[j]);
        if (rows > 1) {
            *t1 += lmu_qreq16(a1, p->mult[j + 1], p->shift[j + 1]);
        }
        if (rows > 2) {
            *t2 += lmu_qreq16(a2, p->mult[j + 2], p->shift[j + 2]);
            *t3 += lmu_qreq16(a3, p->mult[j + 3], p->shift[j + 3]);
        }
    }
}

#if LMU_PATH_MVE
/* Four rows from j of a one-part int16 layer with out_zp 0 and n <= LMU_Q16_RUN on Helium: the int32 sums
 * (lmu_qdot16_run), then lmu_qreq16_2, the clamp and the table as vectors. With mq = m16 2^16 (QADD(m, 2^15)
 * with its low half cleared: m16 as lmu_mbqm16 rounds and caps it, mq >= INT32_MIN), VMULH(a, mq) =
 * floor(a m16 / 2^16) = P of lmu_mbqm16_32, and VRSHL by s + 1 = -k (k = -1 - s in [1, 30]) is floor((P +
 * 2^(k-1)) / 2^k), its result. Where a lane's bias + sum overflows int32 (VADD differs from VQADD) or its
 * shift is outside [-31, -2], returns 0 having written nothing (the scalar rows do the block). The table:
 * index and fraction of t + 32768, two VLDRH.S32 gathers (T[i], T[i+1]), lmu_interp16's arithmetic. */
LMU_ALWAYS_INLINE int32_t lmu_q16_block4_mve(const lmu_qlinear_t *L, const int16_t *x, int32_t j, int32_t *out,
                                             int16_t *y) {
    const lmu_qpart_t *p = &L->parts[0];
    int32_t s[4] = {0, 0, 0, 0};
    int32x4_t b = vdupq_n_s32(0), d, a, sh, r;
    lmu_qdot16_run(x, p->w + j * p->n_in, p->n_in, p->n_in, 4, s);
    if (L->bias) {
        b = vldrwq_s32(L->bias + j);
    }
    d = vsetq_lane_s32(s[3], vsetq_lane_s32(s[2], vsetq_lane_s32(s[1], vdupq_n_s32(s[0]), 1), 2), 3);
    a = vaddq_s32(b, d);
    sh = vldrwq_s32(p->shift + j);
    if (vcmpneq_s32(a, vqaddq_s32(b, d)) | vcmphiq_n_u32(vreinterpretq_u32_s32(vaddq_n_s32(sh, 31)), 29)) {
        return 0;
    }
    r = vandq_s32(vqaddq_n_s32(vldrwq_s32(p->mult + j), 32768), vdupq_n_s32((int32_t)0xFFFF0000u));
    r = vrshlq_s32(vmulhq_s32(a, r), vaddq_n_s32(sh, 1));
    r = vmaxq_s32(vminq_s32(r, vdupq_n_s32(L->clamp_max)), vdupq_n_s32(L->clamp_min));
    if (L->lut16) {
        const int32x4_t v = vaddq_n_s32(r, 32768);
        const uint32x4_t i = vreinterpretq_u32_s32(vshrq_n_s32(v, 7));
        const int32x4_t t0 = vldrhq_gather_shifted_offset_s32(L->lut16, i);
        const int32x4_t t1 = vldrhq_gather_shifted_offset_s32(L->lut16 + 1, i);
        r = vmulq_s32(vsubq_s32(t1, t0), vandq_s32(v, vdupq_n_s32(127)));
        r = vaddq_s32(t0, vshrq_n_s32(vaddq_n_s32(r, 64), 7));
    }
    if (y) {
        vstrhq_s32(y + j, r);
    } else {
        vstrwq_s32(out + j, r);
    }
    return 1;
}
#endif

/* `rows` (1, 2 or 4, a constant) rows from j of an int16 layer with int8 weights and zero point 0 (below) */
LMU_ALWAYS_INLINE void lmu_q16_block(const lmu_qlinear_t *L, const int16_t *const *in, int32_t j, int32_t rows,
                                     int32_t *out, int16_t *y) {
    int64_t t0 = L->out_zp, t1 = L->out_zp, t2 = L->out_zp, t3 = L->out_zp;
    int32_t k;
#if LMU_PATH_MVE
    /* a layer of one block without a table keeps the scalar rows: there gcc folds each row's constants */
    if (rows == 4 && L->n_parts == 1 && L->out_zp == 0 && L->parts[0].n_in <= LMU_Q16_RUN &&
        (L->n_out > 4 || L->lut16) && lmu_q16_block4_mve(L, in[0], j, out, y)) {
        return;
    }
#endif
    if (L->n_parts == 1) { /* a constant part index: its sizes fold where the layer's struct is known (gcc
                            * otherwise warned of the dead multi-run branch reading past the weights) */
        lmu_q16_part(L, in[0], 0, j, rows, &t0, &t1, &t2, &t3);
    } else {
        for (k = 0; k < L->n_parts; ++k) {
            lmu_q16_part(L, in[k], k, j, rows, &t0, &t1, &t2, &t3);
        }
    }
    lmu_qout16(L, t0, j, out, y);
    if (rows > 1) {
        lmu_qout16(L, t1, j + 1, out, y);
    }
    if (rows > 2) {
        lmu_qout16(L, t2, j + 2, out, y);
        lmu_qout16(L, t3, j + 3, out, y);
    }
}

/* out[j] (or y[j]) = lut16?(clamp(out_zp + sum_p MBQM16(acc_p[j], mult_p[j], shift_p[j]))) for int16 inputs,
 * acc_p[j] = [bias_j if p == 0] + sum_i (x_p[i] - zp_p) W_p[j, i]. When every part has int8 weights and zero
 * point 0 (every int16x8 layer): rows in blocks of four on the DSP and Helium paths (two elsewhere) sharing
 * each input load (lmu_qdot16_rows), then blocks of two and one; otherwise one row at a time (lmu_qdot16 /
 * lmu_qdot16w). Exact sums and lmu_qreq16 (lmu_mbqm16's integers) either way. */
LMU_SPECIALIZE void lmu_qlinear16_rows(const lmu_qlinear_t *L, const int16_t *const *in, int32_t *out, int16_t *y) {
    int32_t j = 0, k, fast = 1;
    for (k = 0; k < L->n_parts; ++k) {
        fast = fast && !L->parts[k].w16 && L->parts[k].in_zp == 0;
    }
    if (fast) {
#if LMU_PATH_DSP || LMU_PATH_MVE
        for (; j + 4 <= L->n_out; j += 4) {
            lmu_q16_block(L, in, j, 4, out, y);
        }
#endif
        for (; j + 2 <= L->n_out; j += 2) {
            lmu_q16_block(L, in, j, 2, out, y);
        }
        if (j < L->n_out) {
            lmu_q16_block(L, in, j, 1, out, y);
        }
        return;
    }
    for (; j < L->n_out; ++j) {
        int64_t total = L->out_zp;
        for (k = 0; k < L->n_parts; ++k) {
            const lmu_qpart_t *p = &L->parts[k];
            int64_t a = (k == 0 && L->bias) ? (int64_t)L->bias[j] : 0;
            a += p->w16 ? lmu_qdot16w(in[k], p->in_zp, p->w16 + (int32_t)j * p->n_in, p->n_in)
                        : lmu_qdot16(in[k], p->in_zp, p->w + (int32_t)j * p->n_in, p->n_in);
            total += lmu_qreq16(a, p->mult[j], p->shift[j]);
        }
        lmu_qout16(L, total, j, out, y);
    }
}

LMU_SPECIALIZE void lmu_qlinear16(const lmu_qlinear_t *L, const int16_t *const *in, int32_t *out) {
    lmu_qlinear16_rows(L, in, out, NULL);
}

/* lmu_qlinear16 into int16 outputs: straight into y, or through acc where y overlaps an input (a recurrent
 * hidden layer reads the h it writes: every row must see the old h) */
LMU_SPECIALIZE void lmu_qlinear_i16(const lmu_qlinear_t *L, const int16_t *const *in, int32_t *acc, int16_t *y) {
    int32_t j, k;
    for (k = 0; k < L->n_parts; ++k) {
        const uintptr_t a = (uintptr_t)in[k], b = (uintptr_t)y;
        if (b < a + 2u * (uintptr_t)L->parts[k].n_in && a < b + 2u * (uintptr_t)L->n_out) {
            lmu_qlinear16_rows(L, in, acc, NULL);
            for (j = 0; j < L->n_out; ++j) {
                y[j] = (int16_t)acc[j];
            }
            return;
        }
    }
    lmu_qlinear16_rows(L, in, NULL, y);
}

static inline void lmu_qlut16(const int16_t *lut, const int16_t *x, int16_t *y, int32_t n) {
    int32_t i;
    for (i = 0; i < n; ++i) {
        y[i] = (int16_t)lmu_interp16(lut, (int32_t)x[i] + 32768);
    }
}

/* e_i = exp table at max - x_i (0..65535, interpolated, Q16); y_i = clamp(round(32768 e_i / sum e), 0, 32767):
 * scale 1/32768, zero point 0 */
static inline void lmu_qsoftmax16(const int32_t *exp_lut, const int16_t *x, int16_t *y, int32_t n) {
    int32_t i, mx = -32768;
    int64_t sum = 0;
    for (i = 0; i < n; ++i) {
        mx = x[i] > mx ? x[i] : mx;
    }
    for (i = 0; i < n; ++i) {
        sum += lmu_interp32(exp_lut, mx - x[i]);
    }
    for (i = 0; i < n; ++i) {
        y[i] = (int16_t)lmu_clamp64(lmu_div_round((int64_t)lmu_interp32(exp_lut, mx - x[i]) * 32768, sum), 0, 32767);
    }
}

/* running mean of int16 values, as lmu_qpool */
static inline void lmu_qpool16(int64_t *sum, int32_t *count, const int16_t *x, int16_t *y, int32_t n, int32_t in_zp,
                               int32_t m, int32_t s, int32_t out_zp) {
    int32_t i;
    if (*count < INT32_MAX) {
        *count += 1;
    }
    for (i = 0; i < n; ++i) {
        sum[i] += (int64_t)x[i] - in_zp;
        y[i] = lmu_clamp16(out_zp + (int64_t)lmu_mbqm(lmu_div_round(sum[i] * 256, *count), m, s));
    }
}

#endif /* LMU_INT16_H */
