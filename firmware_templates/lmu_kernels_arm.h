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
 * int16x8 and int16 models (int16 activations, and the layers the default int8 widens to them): their dense
 * rows with int8 weights run here four at a time (lmu_qdot16_rows_arm: SMLAD on PKHBT / SXTB16 pairs, one
 * assembly loop for a compile-time n; VMLADAVA.S16), rows with int16 weights one at a time (lmu_qdot16w_arm:
 * SMLALD, VMLALDAVA); lmu_requant16 and the rows' requantization are scalar DSP code in lmu_runtime.h;
 * lmu_interp16 / lmu_qlut16 (interpolated tables), lmu_qsoftmax16 and lmu_qpool16 have no DSP or Helium
 * variant. Their LMU memory still uses the kernels below: those depend on the state width only.
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

/* acc + a b in one SMLAL (gcc 12 sometimes forms the 64-bit product with three multiplies) */
static inline int64_t lmu_smlal(int64_t acc, int32_t a, int32_t b) {
    __asm__("smlal %Q0, %R0, %1, %2" : "+r"(acc) : "r"(a), "r"(b));
    return acc;
}

/* bytes 1 and 3 of w, sign-extended to two halfwords (SXTB16 with ROR #8; gcc 12 has no __ror) */
static inline uint32_t lmu_sxtb16_hi(uint32_t w) {
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(w));
    return r;
}
#endif

/* int8 dot products of lmu_qdot2 (see its comment in lmu_runtime.h for the ranges and the proof): adds
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

/* int16 x int16 dot product of lmu_qdot16w (lmu_runtime.h) for a zero point of 0 (the int16 mode's
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

#if LMU_PATH_DSP
/* (lo(a), lo(b)) and (hi(a), hi(b)) as halfword pairs: PKHBT / PKHTB */
static inline uint32_t lmu_pkhbt16(uint32_t a, uint32_t b) {
    uint32_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
static inline uint32_t lmu_pkhtb16(uint32_t a, uint32_t b) {
    uint32_t r;
    __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
#endif

/* int16 x int8 dot product of lmu_qdot16 (int16x8 rows, lmu_runtime.h) for a zero point of 0: adds the
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

#if LMU_PATH_DSP
/* s + (w0, w2) . xe + (w1, w3) . xo for the four int8 weights of u (SXTB16, SXTB16 ROR #8, two SMLAD) in one
 * statement with one scratch register: written as intrinsics, gcc expanded every row's weights before the
 * first SMLAD and spilled them at four rows */
static inline int32_t lmu_smlad_b4(int32_t s, uint32_t u, uint32_t xe, uint32_t xo) {
    uint32_t t;
    __asm__("sxtb16 %[t], %[u]\n\t"
            "smlad %[s], %[t], %[xe], %[s]\n\t"
            "sxtb16 %[t], %[u], ror #8\n\t"
            "smlad %[s], %[t], %[xo], %[s]"
            : [s] "+r"(s), [t] "=&r"(t)
            : [u] "r"(u), [xe] "r"(xe), [xo] "r"(xo));
    return s;
}
#endif

/* The int16 x int8 rows of lmu_qdot16_run (lmu_runtime.h; ranges and proof there): adds the first i of len
 * inputs (a run of at most 256) of rows w + r n, r < rows (1, 2 or 4), to s[r] in int32 and returns i. The
 * sums are exact: no product exceeds 2^22 in magnitude. Helium: per 8 inputs one VLDRH of x, then per row one
 * VLDRB.S16 (the weights sign-extended to halfwords) and one VMLADAVA.S16; the last len % 8 inputs predicated
 * (VCTP), so the kernel does them all. DSP: per 4 inputs two LDR and PKHBT / PKHTB put x in (x0, x2), (x1, x3),
 * shared by the rows, then per row one LDR and two SXTB16 of weights ((w0, w2), (w1, w3)) and two SMLAD:
 * 24 instructions for 16 MACs at four rows. The int8 weights are expanded here rather than stored as
 * halfwords: pre-expanded weights would save the SXTB16s and the PKHs (about 1.1 instructions per MAC
 * against 1.5) but double the flash of every widened layer and change the array every core reads. */
LMU_SPECIALIZE int32_t lmu_qdot16_rows_arm(const int16_t *x, const int8_t *w, int32_t n, int32_t len, int32_t rows,
                                           int32_t *s) {
    int32_t i = 0;
#if LMU_PATH_MVE
    {
        int32_t s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3];
        const int8_t *w1 = w + (rows > 1 ? n : 0), *w2 = w + (rows > 2 ? 2 * n : 0), *w3 = w + (rows > 3 ? 3 * n : 0);
        for (; i + 8 <= len; i += 8) {
            const int16x8_t xv = vldrhq_s16(x + i);
            s0 = vmladavaq_s16(s0, xv, vldrbq_s16(w + i));
            if (rows > 1) {
                s1 = vmladavaq_s16(s1, xv, vldrbq_s16(w1 + i));
            }
            if (rows > 2) {
                s2 = vmladavaq_s16(s2, xv, vldrbq_s16(w2 + i));
                s3 = vmladavaq_s16(s3, xv, vldrbq_s16(w3 + i));
            }
        }
        if (i < len) {
            const mve_pred16_t p = vctp16q((uint32_t)(len - i));
            const int16x8_t xv = vldrhq_z_s16(x + i, p);
            s0 = vmladavaq_s16(s0, xv, vldrbq_z_s16(w + i, p));
            if (rows > 1) {
                s1 = vmladavaq_s16(s1, xv, vldrbq_z_s16(w1 + i, p));
            }
            if (rows > 2) {
                s2 = vmladavaq_s16(s2, xv, vldrbq_z_s16(w2 + i, p));
                s3 = vmladavaq_s16(s3, xv, vldrbq_z_s16(w3 + i, p));
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

#if LMU_PATH_DSP && !LMU_PATH_MVE
/* Four rows of the int8 dot product (ranges and proof of lmu_qdot2 in lmu_runtime.h): adds the first i
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

/* The cheap row finish of the whole-channel kernels below. acc = B_i u + 2^(cf-1) + sum_j C_ij m_j (exact,
 * 64 bits); the code generator's proof step32 says |acc / 2^cf| < 2^30 on every row, so the step
 * floor(acc / 2^cf) = round_half_up((B_i u + sum) / 2^cf) is the low word of acc >> cf and m_i + step
 * cannot overflow int32: two shifts and an ORR, an add, then SSAT (16-bit states) or a 32-bit clamp.
 * Writes the new m_i as a halfword at position i of the scratch (read back by lmu_copy16). */
static inline void lmu_row_finish16(int64_t *tmp, int32_t i, int64_t acc, int32_t mi, int32_t cf, int32_t delta,
                                    int32_t bits) {
    const int32_t v = (delta ? mi : 0) + (int32_t)(acc >> cf);
    int16_t r;
    if (bits == 16) {
        r = (int16_t)__ssat(v, 16);
    } else {
        const int32_t hi = (int32_t)((1u << (bits - 1)) - 1u);
        r = (int16_t)(v > hi ? hi : (v < -hi - 1 ? -hi - 1 : v));
    }
    memcpy((char *)tmp + 2 * i, &r, sizeof(r));
}

/* the new state, q halfwords from the scratch, once every row has read the old one */
static inline void lmu_copy16(int16_t *mc, const int64_t *tmp, int32_t q) {
    memcpy(mc, tmp, (size_t)q * sizeof(int16_t));
}

#if LMU_PATH_DSP && !LMU_PATH_MVE
/* Two rows of C times the state, 16 columns per pass, in 64-bit sums: per pass 4 LDRD of state, 8 LDRD of
 * coefficients and 16 SMLALD (32 MACs), then CMP and BNE: 30 instructions for 32 MACs. LDRD needs
 * word-aligned addresses (the caller checks); n16 is a positive multiple of 16. Adds the exact products
 * to *a0 and *a1 and advances *s, *r0 and *r1 past the columns it read. Written in assembly because gcc 12
 * neither pairs these loads into LDRD nor keeps the twelve live values in registers. Builds without
 * optimization (-O0) run the same sums in C. */
/* Four columns of two rows: the body of lmu_dsp_rows2_s16, written out four times (not .rept: gcc sizes an asm
 * statement by its lines when it places literal pools, and a .rept it counts once) */
#define LMU_DSP_ROWS2_4COLS                                                                                            \
    "ldrd %[x0], %[x1], [%[ps]], #8\n\t"                                                                               \
    "ldrd %[c0], %[c1], [%[p0]], #8\n\t"                                                                               \
    "smlald %Q[b0], %R[b0], %[c0], %[x0]\n\t"                                                                          \
    "smlald %Q[b0], %R[b0], %[c1], %[x1]\n\t"                                                                          \
    "ldrd %[c0], %[c1], [%[p1]], #8\n\t"                                                                               \
    "smlald %Q[b1], %R[b1], %[c0], %[x0]\n\t"                                                                          \
    "smlald %Q[b1], %R[b1], %[c1], %[x1]\n\t"

static inline void lmu_dsp_rows2_s16(const int16_t **s, const int16_t **r0, const int16_t **r1, int32_t n16,
                                     int64_t *a0, int64_t *a1) {
#ifdef __OPTIMIZE__
    int64_t b0 = *a0, b1 = *a1;
    const int16_t *ps = *s, *p0 = *r0, *p1 = *r1;
    const int16_t *const end = ps + n16;
    uint32_t x0, x1, c0, c1;
    __asm__("1:\n\t" LMU_DSP_ROWS2_4COLS LMU_DSP_ROWS2_4COLS LMU_DSP_ROWS2_4COLS LMU_DSP_ROWS2_4COLS
            "cmp %[ps], %[end]\n\t"
            "bne 1b"
            : [b0] "+r"(b0), [b1] "+r"(b1), [ps] "+r"(ps), [p0] "+r"(p0), [p1] "+r"(p1), [x0] "=&r"(x0), [x1] "=&r"(x1),
              [c0] "=&r"(c0), [c1] "=&r"(c1)
            : [end] "r"(end)
            : "cc", "memory");
    *a0 = b0;
    *a1 = b1;
    *s = ps;
    *r0 = p0;
    *r1 = p1;
#else /* without optimization gcc keeps a frame pointer and has no twelve registers left: the same sums */
    const int16_t *ps = *s, *p0 = *r0, *p1 = *r1;
    int32_t j;
    for (j = 0; j < n16; j += 2) {
        const uint32_t sv = lmu_ld32(ps + j);
        *a0 = __smlald(lmu_ld32(p0 + j), sv, *a0);
        *a1 = __smlald(lmu_ld32(p1 + j), sv, *a1);
    }
    *s = ps + n16;
    *r0 = p0 + n16;
    *r1 = p1 + n16;
#endif
}
#endif

#if LMU_PATH_MVE
/* One row of C times the state over 8 n8 columns (the rows the blocks of three leave): per 8 columns 2 VLDRH,
 * one VMLALDAVA and one LE. Advances the pointers past what it read. */
static inline void lmu_mve_row1_s16(const int16_t **ps, const int16_t **pr, int32_t n8, int64_t *r0) {
    int64_t a0 = *r0;
    const int16_t *s = *ps, *p0 = *pr;
    __asm__("wls lr, %[n], 2f\n"
            "1:\n\t"
            "vldrh.s16 q0, [%[s]], #16\n\t"
            "vldrh.s16 q1, [%[p0]], #16\n\t"
            "vmlaldava.s16 %Q[a0], %R[a0], q1, q0\n\t"
            "le lr, 1b\n"
            "2:"
            : [a0] "+r"(a0), [s] "+r"(s), [p0] "+r"(p0)
            : [n] "r"(n8)
            : "lr", "q0", "q1", "cc", "memory");
    *r0 = a0;
    *ps = s;
    *pr = p0;
}

/* Three rows of C times the state over 8 n8 columns (n8 >= 0), adding the exact products to *r0..*r2
 * (64-bit, VMLALDAVA: 8 MACs each): per 32 columns 16 VLDRH (post-increment), 12 VMLALDAVA and one LE,
 * 29 instructions for 96 MACs, then passes of 8 columns for the n8 % 4 left. In assembly because gcc 12 recomputes the row addresses in the loop. Three
 * rows, not four: VMLALDAVA's sums need even-odd register pairs, and four pairs, five pointers and LR
 * leave gcc no register for anything else. Advances the pointers past what it read. */
/* Four rows of C times the state over 8 n8 columns in 32-bit sums (VMLADAVA.S16: 8 MACs each, wrapping modulo
 * 2^32, as the wrap32 rows allow), from zero: per 32 columns 20 VLDRH (post-increment), 16 VMLADAVA and one
 * LE, 37 instructions for 128 MACs, then passes of 8 columns (intrinsics) for the n8 % 4 left; the four sums
 * go to dst (16 bytes). In the loop they sit in fixed even registers r4, r6, r8, r10 (VMLADAVA takes an
 * even one; local register variables put them there). */
#define LMU_MVE_ROWS4_8COLS                                                                                            \
    "vldrh.s16 q0, [%[s]], #16\n\t"                                                                                    \
    "vldrh.s16 q1, [%[p0]], #16\n\t"                                                                                   \
    "vmladava.s16 %[a0], q1, q0\n\t"                                                                                   \
    "vldrh.s16 q2, [%[p1]], #16\n\t"                                                                                   \
    "vmladava.s16 %[a1], q2, q0\n\t"                                                                                   \
    "vldrh.s16 q1, [%[p2]], #16\n\t"                                                                                   \
    "vmladava.s16 %[a2], q1, q0\n\t"                                                                                   \
    "vldrh.s16 q2, [%[p3]], #16\n\t"                                                                                   \
    "vmladava.s16 %[a3], q2, q0\n\t"

static inline void lmu_mve_rows4_w32(const int16_t *s, const int16_t *p0, const int16_t *p1, const int16_t *p2,
                                     const int16_t *p3, int32_t n8, void *dst) {
    int32_t k, a0, a1, a2, a3;
#ifdef __OPTIMIZE__
    register int32_t r4 __asm__("r4") = 0;
    register int32_t r6 __asm__("r6") = 0;
    register int32_t r8 __asm__("r8") = 0;
    register int32_t r10 __asm__("r10") = 0;
    __asm__("wls lr, %[n32], 2f\n"
            "1:\n\t" LMU_MVE_ROWS4_8COLS LMU_MVE_ROWS4_8COLS LMU_MVE_ROWS4_8COLS LMU_MVE_ROWS4_8COLS "le lr, 1b\n"
            "2:"
            : [a0] "+r"(r4), [a1] "+r"(r6), [a2] "+r"(r8), [a3] "+r"(r10), [s] "+r"(s), [p0] "+r"(p0), [p1] "+r"(p1),
              [p2] "+r"(p2), [p3] "+r"(p3)
            : [n32] "r"(n8 / 4)
            : "lr", "q0", "q1", "q2", "cc", "memory");
    a0 = r4;
    a1 = r6;
    a2 = r8;
    a3 = r10;
    k = n8 - n8 % 4;
#else /* without optimization: the same sums in intrinsics, all passes below */
    a0 = a1 = a2 = a3 = 0;
    k = 0;
#endif
    for (; k < n8; ++k, s += 8, p0 += 8, p1 += 8, p2 += 8, p3 += 8) { /* the n8 % 4 passes left */
        const int16x8_t sv = vldrhq_s16(s);
        a0 = vmladavaq_s16(a0, vldrhq_s16(p0), sv);
        a1 = vmladavaq_s16(a1, vldrhq_s16(p1), sv);
        a2 = vmladavaq_s16(a2, vldrhq_s16(p2), sv);
        a3 = vmladavaq_s16(a3, vldrhq_s16(p3), sv);
    }
    memcpy((char *)dst, &a0, 4);
    memcpy((char *)dst + 4, &a1, 4);
    memcpy((char *)dst + 8, &a2, 4);
    memcpy((char *)dst + 12, &a3, 4);
}

/* eight columns of three rows: the body of lmu_mve_rows3_s16 (written out, not .rept: see LMU_DSP_ROWS2_4COLS) */
#define LMU_MVE_ROWS3_8COLS                                                                                            \
    "vldrh.s16 q0, [%[s]], #16\n\t"                                                                                    \
    "vldrh.s16 q1, [%[p0]], #16\n\t"                                                                                   \
    "vmlaldava.s16 %Q[a0], %R[a0], q1, q0\n\t"                                                                         \
    "vldrh.s16 q2, [%[p1]], #16\n\t"                                                                                   \
    "vmlaldava.s16 %Q[a1], %R[a1], q2, q0\n\t"                                                                         \
    "vldrh.s16 q1, [%[p2]], #16\n\t"                                                                                   \
    "vmlaldava.s16 %Q[a2], %R[a2], q1, q0\n\t"

static inline void lmu_mve_rows3_s16(const int16_t **ps, const int16_t **pr, int32_t q, int32_t n8, int64_t *r0,
                                     int64_t *r1, int64_t *r2) {
    int64_t a0 = *r0, a1 = *r1, a2 = *r2;
    const int16_t *s = *ps, *p0 = *pr, *p1 = p0 + q, *p2 = p1 + q;
#ifdef __OPTIMIZE__
    int32_t n = n8; /* one register for both counts (the 32- and the 8-column passes): gcc has few to spare */
    __asm__("lsr lr, %[n], #2\n\t"
            "wls lr, lr, 2f\n"
            "1:\n\t" LMU_MVE_ROWS3_8COLS LMU_MVE_ROWS3_8COLS LMU_MVE_ROWS3_8COLS LMU_MVE_ROWS3_8COLS "le lr, 1b\n"
            "2:\n\t"
            "and %[n], %[n], #3\n\t"
            "wls lr, %[n], 4f\n"
            "3:\n\t" LMU_MVE_ROWS3_8COLS "le lr, 3b\n"
            "4:"
            : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [s] "+r"(s), [p0] "+r"(p0), [p1] "+r"(p1), [p2] "+r"(p2),
              [n] "+r"(n)
            :
            : "lr", "q0", "q1", "q2", "cc", "memory");
#else /* without optimization the frame pointer leaves too few registers: the same sums in intrinsics */
    int32_t k;
    for (k = 0; k < n8; ++k, s += 8, p0 += 8, p1 += 8, p2 += 8) {
        const int16x8_t sv = vldrhq_s16(s);
        a0 = vmlaldavaq_s16(a0, vldrhq_s16(p0), sv);
        a1 = vmlaldavaq_s16(a1, vldrhq_s16(p1), sv);
        a2 = vmlaldavaq_s16(a2, vldrhq_s16(p2), sv);
    }
#endif
    *r0 = a0;
    *r1 = a1;
    *r2 = a2;
    *ps = s;
    *pr = p0;
}
#endif

#if LMU_PATH_DSP && !LMU_PATH_MVE && defined(__OPTIMIZE__)
/* Three rows of C times the state over all q columns: per four columns one LDRD of state and, per row, one
 * LDRD of coefficients and two SMLALD (10 instructions for 12 MACs); 16 columns per loop pass (42
 * instructions for 48 MACs), then passes of four. Rows i + 1 and i + 2 are read at the constant offsets 2q
 * and 4q bytes from row i (LDRD reaches 1020 bytes: q <= 255), so q must be a compile-time constant and a
 * multiple of 4: the generated step passes it as one and the caller checks. Adds the exact products to *a0,
 * *a1, *a2. */
#define LMU_DSP_ROWS3_4COLS                                                                                            \
    "ldrd %[x0], %[x1], [%[s]], #8\n\t"                                                                                \
    "ldrd %[c0], %[c1], [%[r], %[o1]]\n\t"                                                                             \
    "smlald %Q[b1], %R[b1], %[c0], %[x0]\n\t"                                                                          \
    "smlald %Q[b1], %R[b1], %[c1], %[x1]\n\t"                                                                          \
    "ldrd %[c0], %[c1], [%[r], %[o2]]\n\t"                                                                             \
    "smlald %Q[b2], %R[b2], %[c0], %[x0]\n\t"                                                                          \
    "smlald %Q[b2], %R[b2], %[c1], %[x1]\n\t"                                                                          \
    "ldrd %[c0], %[c1], [%[r]], #8\n\t"                                                                                \
    "smlald %Q[b0], %R[b0], %[c0], %[x0]\n\t"                                                                          \
    "smlald %Q[b0], %R[b0], %[c1], %[x1]\n\t"

LMU_SPECIALIZE void lmu_dsp_rows3_s16(const int16_t *s, const int16_t *r, int32_t q, int64_t *a0, int64_t *a1,
                                      int64_t *a2) {
    int64_t b0 = *a0, b1 = *a1, b2 = *a2;
    uint32_t x0, x1, c0, c1;
    const int16_t *end = s + (q - q % 16);
    __asm__("cmp %[s], %[e]\n\t"
            "beq 2f\n"
            "1:\n\t" LMU_DSP_ROWS3_4COLS LMU_DSP_ROWS3_4COLS LMU_DSP_ROWS3_4COLS LMU_DSP_ROWS3_4COLS
            "cmp %[s], %[e]\n\t"
            "bne 1b\n"
            "2:\n\t"
            "add %[e], %[e], %[rest]\n\t"
            "cmp %[s], %[e]\n\t"
            "beq 4f\n"
            "3:\n\t" LMU_DSP_ROWS3_4COLS "cmp %[s], %[e]\n\t"
            "bne 3b\n"
            "4:"
            : [b0] "+r"(b0), [b1] "+r"(b1), [b2] "+r"(b2), [s] "+r"(s), [r] "+r"(r), [e] "+r"(end), [x0] "=&r"(x0),
              [x1] "=&r"(x1), [c0] "=&r"(c0), [c1] "=&r"(c1)
            : [o1] "i"(2 * q), [o2] "i"(4 * q), [rest] "i"(2 * (q % 16))
            : "cc", "memory");
    *a0 = b0;
    *a1 = b1;
    *a2 = b2;
}
#endif

#if LMU_PATH_DSP && !LMU_PATH_MVE && defined(__OPTIMIZE__)
/* One whole channel of the dense memory, four rows per block, every loop in one assembly statement, for a
 * compile-time q with q % 4 == 0 and 4 <= q <= 128 and compile-time cf (2..31), delta, bits (the generated
 * step passes constants; lmu_dense_channel_s16 checks). The columns are written out (no column loop): per
 * four columns one LDRD of state and, per row, one LDRD of coefficients and two SMLALD, 13 instructions for
 * 16 MACs, every address an immediate offset from the state pointer or row i (row i + k at 2kq bytes; LDRD
 * reaches 1020 bytes and the last offset is 8q - 8, hence q <= 128). The 4 accumulator pairs, 2 pointers
 * and 4 temporaries take all 14 registers gcc may hand out, so the block keeps the B and m_i / scratch
 * pointers, u and the end of C in 24 bytes it reserves below sp and releases at its end (no operand is
 * sp-relative; an exception stacks below sp). Then a second statement copies the new state from the
 * scratch (LDM / STM, 32 bytes each). 64-bit sums as in every path: the same state.
 *
 * Row start and finish. Each row starts at A = B_i u (SMULL, no rounding term) and adds sum_j C_ij m_j:
 * exact, |A| <= S_i of the code generator's step32 proof (c_codegen.dense_step32), S_i + 2^cf <= 2^(30+cf).
 * So |A / 2^(cf-1)| <= 2^31 - 2 and w = floor(A / 2^(cf-1)) is the low word of A >> (cf - 1) (LSR, ORR;
 * cf >= 2 keeps both shifts in 1..31). The rounded step is floor((A + 2^(cf-1)) / 2^cf) = floor((w + 1) / 2)
 * (nested floors with integer offsets) = ceil(w / 2) = w - floor(w / 2): SUB with ASR #1 of w. In the delta
 * form m_i + step = (w + m_i) - floor(w / 2): SXTAH adds m_i (its halfword of an LDRD of four states), SUB
 * takes floor(w / 2) from w itself; ADD and SUB wrap modulo 2^32 and the result m_i + step lies inside int32
 * (|step| < 2^30, |m_i| <= 2^15), so it is exact even where w + m_i wraps. SSAT #bits is exactly
 * lmu_row_finish16's clamp. Per row 1 instruction to start and 5 to finish, then per four rows two PKHBT and
 * one STRD (+ one LDRD of the old states in the delta form), against 3 and 6 with the rounding term added at
 * the start, an LDRSH and an STRH per row. */
#define LMU_DSP_CH4_COLS(k)                                                                                            \
    ".if " #k " < %c[n4]\n\t"                                                                                          \
    "ldrd %[x0], %[x1], [%[s], #" #k "*8]\n\t"                                                                         \
    "ldrd %[c0], %[c1], [%[r], #" #k "*8]\n\t"                                                                         \
    "smlald %[a0l], %[a0h], %[c0], %[x0]\n\t"                                                                          \
    "smlald %[a0l], %[a0h], %[c1], %[x1]\n\t"                                                                          \
    "ldrd %[c0], %[c1], [%[r], #" #k "*8+%c[o1]]\n\t"                                                                  \
    "smlald %[a1l], %[a1h], %[c0], %[x0]\n\t"                                                                          \
    "smlald %[a1l], %[a1h], %[c1], %[x1]\n\t"                                                                          \
    "ldrd %[c0], %[c1], [%[r], #" #k "*8+%c[o2]]\n\t"                                                                  \
    "smlald %[a2l], %[a2h], %[c0], %[x0]\n\t"                                                                          \
    "smlald %[a2l], %[a2h], %[c1], %[x1]\n\t"                                                                          \
    "ldrd %[c0], %[c1], [%[r], #" #k "*8+%c[o3]]\n\t"                                                                  \
    "smlald %[a3l], %[a3h], %[c0], %[x0]\n\t"                                                                          \
    "smlald %[a3l], %[a3h], %[c1], %[x1]\n\t"                                                                          \
    ".endif\n\t"
/* columns 4k .. 4k + 3 for every k < q / 4 (q <= 128: 32 groups, written out so that gcc counts the lines of
 * the statement when it places literal pools; see LMU_DSP_ROWS2_4COLS) */
#define LMU_DSP_CH4_ALLCOLS                                                                                            \
    LMU_DSP_CH4_COLS(0)                                                                                                \
    LMU_DSP_CH4_COLS(1)                                                                                                \
    LMU_DSP_CH4_COLS(2)                                                                                                \
    LMU_DSP_CH4_COLS(3)                                                                                                \
    LMU_DSP_CH4_COLS(4)                                                                                                \
    LMU_DSP_CH4_COLS(5)                                                                                                \
    LMU_DSP_CH4_COLS(6)                                                                                                \
    LMU_DSP_CH4_COLS(7)                                                                                                \
    LMU_DSP_CH4_COLS(8)                                                                                                \
    LMU_DSP_CH4_COLS(9)                                                                                                \
    LMU_DSP_CH4_COLS(10)                                                                                               \
    LMU_DSP_CH4_COLS(11)                                                                                               \
    LMU_DSP_CH4_COLS(12)                                                                                               \
    LMU_DSP_CH4_COLS(13)                                                                                               \
    LMU_DSP_CH4_COLS(14)                                                                                               \
    LMU_DSP_CH4_COLS(15)                                                                                               \
    LMU_DSP_CH4_COLS(16)                                                                                               \
    LMU_DSP_CH4_COLS(17)                                                                                               \
    LMU_DSP_CH4_COLS(18)                                                                                               \
    LMU_DSP_CH4_COLS(19)                                                                                               \
    LMU_DSP_CH4_COLS(20)                                                                                               \
    LMU_DSP_CH4_COLS(21)                                                                                               \
    LMU_DSP_CH4_COLS(22)                                                                                               \
    LMU_DSP_CH4_COLS(23)                                                                                               \
    LMU_DSP_CH4_COLS(24)                                                                                               \
    LMU_DSP_CH4_COLS(25)                                                                                               \
    LMU_DSP_CH4_COLS(26)                                                                                               \
    LMU_DSP_CH4_COLS(27)                                                                                               \
    LMU_DSP_CH4_COLS(28)                                                                                               \
    LMU_DSP_CH4_COLS(29)                                                                                               \
    LMU_DSP_CH4_COLS(30)                                                                                               \
    LMU_DSP_CH4_COLS(31)
/* the new state from the scratch to the state: 32 bytes per LDM / STM pair of eight fixed registers (declared
 * clobbered, so gcc keeps the two pointers elsewhere), then 16 and 8 */
#define LMU_DSP_CH4_COPY32(k)                                                                                          \
    ".if " #k " < %c[n32]\n\t"                                                                                         \
    "ldm %[src]!, {r0-r6, r12}\n\t"                                                                                    \
    "stm %[dst]!, {r0-r6, r12}\n\t"                                                                                    \
    ".endif\n\t"

/* row finish, the new m_i in lo (m: the temporary holding the old m_i in its low halfword, rotated by rot); see
 * above. The block then packs the four new values into two words (PKHBT) and stores them with one STRD. */
#define LMU_DSP_CH4_FINISH(lo, hi, m, rot)                                                                             \
    "lsr %[" #lo "], %[" #lo "], #%c[cf] - 1\n\t"                                                                      \
    "orr %[" #lo "], %[" #lo "], %[" #hi "], lsl #33 - %c[cf]\n\t"                                                     \
    ".if %c[delta]\n\t"                                                                                                \
    "sxtah %[" #hi "], %[" #lo "], %[" #m "]" rot "\n\t"                                                               \
    "sub %[" #lo "], %[" #hi "], %[" #lo "], asr #1\n\t"                                                               \
    ".else\n\t"                                                                                                        \
    "sub %[" #lo "], %[" #lo "], %[" #lo "], asr #1\n\t"                                                               \
    ".endif\n\t"                                                                                                       \
    "ssat %[" #lo "], #%c[bits], %[" #lo "]\n\t"

/* the whole-channel kernels' entry (24 bytes below sp for the B, m_i and scratch pointers, u and the end of
 * C, which x0 holds as the size of C in bytes when LMU_DSP_CH_BLOCK starts) and the start of each block of
 * rows: B_i and B_(i+1) loaded, rows i and i + 1 started at B u (SMULL) */
#define LMU_DSP_CH_ENTER                                                                                               \
    "sub sp, sp, #24\n\t"                                                                                              \
    "strd %[x0], %[x1], [sp]\n\t"     /* B, u */                                                                       \
    "strd %[c0], %[c1], [sp, #8]\n\t" /* m_i, scratch */
#define LMU_DSP_CH_BLOCK                                                                                               \
    "add %[x0], %[x0], %[r]\n\t"                                                                                       \
    "str %[x0], [sp, #16]\n" /* the end of C */                                                                        \
    "1:\n\t"                                                                                                           \
    "ldrd %[x0], %[x1], [sp]\n\t"                                                                                      \
    "ldrd %[c0], %[c1], [%[x0]], #8\n\t"                                                                               \
    "smull %[a0l], %[a0h], %[c0], %[x1]\n\t"                                                                           \
    "smull %[a1l], %[a1h], %[c1], %[x1]\n\t"

LMU_SPECIALIZE void lmu_dsp_channel4_s16(int16_t *mc, int32_t uc, int32_t q, const int16_t *C, const int32_t *B,
                                         int32_t cf, int32_t delta, int32_t bits, int64_t *tmp) {
    uint32_t a0l, a0h, a1l, a1h, a2l, a2h, a3l, a3h;
    int16_t *s = mc;
    const int16_t *r = C;
    uint32_t x0 = (uint32_t)(uintptr_t)B, x1 = (uint32_t)uc, c0 = (uint32_t)(uintptr_t)mc;
    uint32_t c1 = (uint32_t)(uintptr_t)tmp;
    const int64_t *src = tmp;
    int16_t *dst = mc;
    __asm__ volatile(
        LMU_DSP_CH_ENTER
        "movw %[x0], #%c[size]\n\t" LMU_DSP_CH_BLOCK "ldrd %[c0], %[c1], [%[x0]], #8\n\t"
        "smull %[a2l], %[a2h], %[c0], %[x1]\n\t"
        "smull %[a3l], %[a3h], %[c1], %[x1]\n\t"
        "str %[x0], [sp]\n\t" LMU_DSP_CH4_ALLCOLS "addw %[r], %[r], #%c[o4]\n\t"
        "ldrd %[x0], %[x1], [sp, #8]\n\t"
        ".if %c[delta]\n\t"
        "ldrd %[c0], %[c1], [%[x0]], #8\n\t" /* m_i .. m_(i+3) */
        ".endif\n\t" LMU_DSP_CH4_FINISH(a0l, a0h, c0, "") LMU_DSP_CH4_FINISH(a1l, a1h, c0, ", ror #16")
            LMU_DSP_CH4_FINISH(a2l, a2h, c1, "") LMU_DSP_CH4_FINISH(
                a3l, a3h, c1, ", ror #16") "pkhbt %[a0l], %[a0l], %[a1l], lsl #16\n\t"
                                           "pkhbt %[a2l], %[a2l], %[a3l], lsl #16\n\t"
                                           "strd %[a0l], %[a2l], [%[x1]], #8\n\t" /* m_i .. m_(i+3) to the scratch */
                                           "strd %[x0], %[x1], [sp, #8]\n\t"
                                           "ldr %[x0], [sp, #16]\n\t"
                                           "cmp %[r], %[x0]\n\t"
                                           "bne 1b\n\t"
                                           "add sp, sp, #24"
        : [a0l] "=&r"(a0l), [a0h] "=&r"(a0h), [a1l] "=&r"(a1l), [a1h] "=&r"(a1h), [a2l] "=&r"(a2l), [a2h] "=&r"(a2h),
          [a3l] "=&r"(a3l), [a3h] "=&r"(a3h), [s] "+r"(s), [r] "+r"(r), [x0] "+r"(x0), [x1] "+r"(x1), [c0] "+r"(c0),
          [c1] "+r"(c1)
        : [n4] "i"(q / 4), [o1] "i"(2 * q), [o2] "i"(4 * q), [o3] "i"(6 * q), [o4] "i"(8 * q), [size] "i"(2 * q * q),
          [cf] "i"(cf), [delta] "i"(delta), [bits] "i"(bits)
        : "cc", "memory");
    __asm__ volatile(LMU_DSP_CH4_COPY32(0) LMU_DSP_CH4_COPY32(1) LMU_DSP_CH4_COPY32(2) LMU_DSP_CH4_COPY32(3)
                         LMU_DSP_CH4_COPY32(4) LMU_DSP_CH4_COPY32(5) LMU_DSP_CH4_COPY32(6)
                             LMU_DSP_CH4_COPY32(7) ".if %c[rest] & 16\n\t"
                                                   "ldm %[src]!, {r0-r3}\n\t"
                                                   "stm %[dst]!, {r0-r3}\n\t"
                                                   ".endif\n\t"
                                                   ".if %c[rest] & 8\n\t"
                                                   "ldrd r0, r1, [%[src]]\n\t"
                                                   "strd r0, r1, [%[dst]]\n\t"
                                                   ".endif"
                     : [src] "+r"(src), [dst] "+r"(dst)
                     : [n32] "i"(2 * q / 32), [rest] "i"(2 * q % 32)
                     : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r12", "memory");
}
#endif

#if LMU_PATH_DSP && !LMU_PATH_MVE && defined(__OPTIMIZE__)
/* One whole channel of the dense memory, two rows per block, every loop in assembly, for the orders past
 * lmu_dsp_channel4_s16's reach: a compile-time q with q % 16 == 0 and 128 < q <= 508, compile-time cf (2..31),
 * delta and bits. Per four columns one LDRD of state and one of each row, four SMLALD: 7 instructions for 8
 * MACs, the passes written out (no column loop; .if keeps q / 4 of them), the state and row pointers
 * post-incremented, row i + 1 read at 2q bytes from row i's pointer (LDRD reaches 1020 bytes, hence q <= 508).
 * Each row starts at B_i u (one SMULL) and finishes in five instructions exactly as in lmu_dsp_channel4_s16
 * (the same proof); two rows go to one word of the scratch (PKHBT, STR), and the B, m_i and scratch
 * pointers, u and the end of C wait in 24 bytes below sp as there. Then a loop of LDM / STM (32 bytes per
 * pass) copies the new state back. The C glue of the row loop it replaces compiled to a different number of
 * instructions for each core (gcc schedules each -mcpu its own way); here every core runs the same ones. */
#define LMU_DSP_CH2_COLS(a, b)                                                                                         \
    ".if " #a " * 8 + " #b " < %c[n4]\n\t"                                                                             \
    "ldrd %[x0], %[x1], [%[s]], #8\n\t"                                                                                \
    "ldrd %[c0], %[c1], [%[r], #%c[o1]]\n\t"                                                                           \
    "smlald %[a1l], %[a1h], %[c0], %[x0]\n\t"                                                                          \
    "smlald %[a1l], %[a1h], %[c1], %[x1]\n\t"                                                                          \
    "ldrd %[c0], %[c1], [%[r]], #8\n\t"                                                                                \
    "smlald %[a0l], %[a0h], %[c0], %[x0]\n\t"                                                                          \
    "smlald %[a0l], %[a0h], %[c1], %[x1]\n\t"                                                                          \
    ".endif\n\t"
#define LMU_DSP_CH2_COLS8(a)                                                                                           \
    LMU_DSP_CH2_COLS(a, 0)                                                                                             \
    LMU_DSP_CH2_COLS(a, 1)                                                                                             \
    LMU_DSP_CH2_COLS(a, 2)                                                                                             \
    LMU_DSP_CH2_COLS(a, 3)                                                                                             \
    LMU_DSP_CH2_COLS(a, 4)                                                                                             \
    LMU_DSP_CH2_COLS(a, 5)                                                                                             \
    LMU_DSP_CH2_COLS(a, 6)                                                                                             \
    LMU_DSP_CH2_COLS(a, 7)
/* columns 4k .. 4k + 3 for every k < q / 4 (q <= 508: 127 groups; written out, see LMU_DSP_ROWS2_4COLS) */
#define LMU_DSP_CH2_ALLCOLS                                                                                            \
    LMU_DSP_CH2_COLS8(0)                                                                                               \
    LMU_DSP_CH2_COLS8(1)                                                                                               \
    LMU_DSP_CH2_COLS8(2)                                                                                               \
    LMU_DSP_CH2_COLS8(3)                                                                                               \
    LMU_DSP_CH2_COLS8(4)                                                                                               \
    LMU_DSP_CH2_COLS8(5)                                                                                               \
    LMU_DSP_CH2_COLS8(6)                                                                                               \
    LMU_DSP_CH2_COLS8(7)                                                                                               \
    LMU_DSP_CH2_COLS8(8)                                                                                               \
    LMU_DSP_CH2_COLS8(9)                                                                                               \
    LMU_DSP_CH2_COLS8(10)                                                                                              \
    LMU_DSP_CH2_COLS8(11)                                                                                              \
    LMU_DSP_CH2_COLS8(12)                                                                                              \
    LMU_DSP_CH2_COLS8(13)                                                                                              \
    LMU_DSP_CH2_COLS8(14)                                                                                              \
    LMU_DSP_CH2_COLS8(15)

LMU_SPECIALIZE void lmu_dsp_channel2_s16(int16_t *mc, int32_t uc, int32_t q, const int16_t *C, const int32_t *B,
                                         int32_t cf, int32_t delta, int32_t bits, int64_t *tmp) {
    uint32_t a0l, a0h, a1l, a1h;
    int16_t *s = mc;
    const int16_t *r = C;
    uint32_t x0 = (uint32_t)(uintptr_t)B, x1 = (uint32_t)uc, c0 = (uint32_t)(uintptr_t)mc;
    uint32_t c1 = (uint32_t)(uintptr_t)tmp;
    const int64_t *src = tmp;
    const char *end = (const char *)tmp + 2 * q;
    int16_t *dst = mc;
    __asm__ volatile(
        LMU_DSP_CH_ENTER "movw %[x0], #(%c[size] & 65535)\n\t"
                         "movt %[x0], #(%c[size] >> 16)\n\t" LMU_DSP_CH_BLOCK "str %[x0], [sp]\n\t" LMU_DSP_CH2_ALLCOLS
                         "subw %[s], %[s], #%c[o1]\n\t"
                         "addw %[r], %[r], #%c[o1]\n\t" /* row i advanced one row in the passes: now row i + 2 */
                         "ldrd %[x0], %[x1], [sp, #8]\n\t"
                         ".if %c[delta]\n\t"
                         "ldr %[c0], [%[x0]], #4\n\t" /* m_i, m_(i+1) */
                         ".endif\n\t" LMU_DSP_CH4_FINISH(a0l, a0h, c0, "") LMU_DSP_CH4_FINISH(
                             a1l, a1h, c0, ", ror #16") "pkhbt %[a0l], %[a0l], %[a1l], lsl #16\n\t"
                                                        "str %[a0l], [%[x1]], #4\n\t" /* m_i, m_(i+1) to the scratch */
                                                        "strd %[x0], %[x1], [sp, #8]\n\t"
                                                        "ldr %[x0], [sp, #16]\n\t"
                                                        "cmp %[r], %[x0]\n\t"
                                                        "bne 1b\n\t"
                                                        "add sp, sp, #24"
        : [a0l] "=&r"(a0l), [a0h] "=&r"(a0h), [a1l] "=&r"(a1l), [a1h] "=&r"(a1h), [s] "+r"(s), [r] "+r"(r),
          [x0] "+r"(x0), [x1] "+r"(x1), [c0] "+r"(c0), [c1] "+r"(c1)
        : [n4] "i"(q / 4), [o1] "i"(2 * q), [size] "i"(2 * q * q), [cf] "i"(cf), [delta] "i"(delta), [bits] "i"(bits)
        : "cc", "memory");
    __asm__ volatile("1:\n\t"
                     "ldm %[src]!, {r0-r6, r12}\n\t"
                     "stm %[dst]!, {r0-r6, r12}\n\t"
                     "cmp %[src], %[end]\n\t"
                     "bne 1b"
                     : [src] "+r"(src), [dst] "+r"(dst)
                     : [end] "r"(end)
                     : "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r12", "cc", "memory");
}
#endif

#if LMU_PATH_MVE && defined(__OPTIMIZE__)
/* Eight rows of C times the state in 32-bit sums (VMLADAV(A).S16: 8 MACs each, wrapping modulo 2^32 as the
 * wrap32 rows allow), for a compile-time q, a multiple of 8 up to 120: per 8 columns one VLDRH of state, 8
 * VLDRH of coefficients and 8 VMLADAVA, 17 instructions for 64 MACs, no loop (passes written out, each under .if), the first pass VMLADAV
 * (no sums to clear). Three row pointers reach the eight rows: rows 0-2 at -2q, +2q and 0 bytes of the pointer
 * to row 1 (VLDRH's immediate reaches +-254 bytes, so q <= 127), rows 3-5 likewise around row 4, rows 6 and 7
 * from row 6; the last load of each pointer post-increments it. VMLADAV needs an even register: the sums live
 * in r0, r2, ..., r12 and lr (no register is left for a loop counter) and one STM writes them to
 * sums[g .. g + 7] in row order. sums: q words. */
#define LMU_MVE_ROWS8_8COLS(OP)                                                                                        \
    "vldrh.s16 q0, [%[s]], #16\n\t"                                                                                    \
    "vldrh.s16 q1, [%[pa], #-%c[b]]\n\t" OP " r0, q1, q0\n\t"                                                          \
    "vldrh.s16 q2, [%[pa], #%c[b]]\n\t" OP " r4, q2, q0\n\t"                                                           \
    "vldrh.s16 q1, [%[pa]], #16\n\t" OP " r2, q1, q0\n\t"                                                              \
    "vldrh.s16 q2, [%[pb], #-%c[b]]\n\t" OP " r6, q2, q0\n\t"                                                          \
    "vldrh.s16 q1, [%[pb], #%c[b]]\n\t" OP " r10, q1, q0\n\t"                                                          \
    "vldrh.s16 q2, [%[pb]], #16\n\t" OP " r8, q2, q0\n\t"                                                              \
    "vldrh.s16 q1, [%[pc], #%c[b]]\n\t" OP " lr, q1, q0\n\t"                                                           \
    "vldrh.s16 q2, [%[pc]], #16\n\t" OP " r12, q2, q0\n\t"

/* pass k (k >= 1) of the 8-column passes when q > 8 k: written out, not .rept, because gcc sizes an asm
 * statement by its lines when it places literal pools */
#define LMU_MVE_ROWS8_IF(k) ".if %c[n8] > " #k "\n\t" LMU_MVE_ROWS8_8COLS("vmladava.s16") ".endif\n\t"

LMU_SPECIALIZE void lmu_mve_rows8_w32(const int16_t *mc, const int16_t *C, int32_t q, int32_t *sums) {
    int32_t g;
    for (g = 0; g < q; g += 8) {
        const int16_t *s = mc, *pa = C + (g + 1) * q, *pb = pa + 3 * q, *pc = pa + 5 * q;
        int32_t *d = sums + g;
        /* d from memory into s (dead after the last pass) for the STM: four address registers, not five. With
         * eight registers clobbered, five no longer fitted once the step around grew (the int16 dense rows
         * inlined beside it): gcc stopped with "impossible constraints". */
        __asm__ volatile(LMU_MVE_ROWS8_8COLS("vmladav.s16") LMU_MVE_ROWS8_IF(1) LMU_MVE_ROWS8_IF(2) LMU_MVE_ROWS8_IF(3)
                             LMU_MVE_ROWS8_IF(4) LMU_MVE_ROWS8_IF(5) LMU_MVE_ROWS8_IF(6) LMU_MVE_ROWS8_IF(7)
                                 LMU_MVE_ROWS8_IF(8) LMU_MVE_ROWS8_IF(9) LMU_MVE_ROWS8_IF(10) LMU_MVE_ROWS8_IF(11)
                                     LMU_MVE_ROWS8_IF(12) LMU_MVE_ROWS8_IF(13)
                                         LMU_MVE_ROWS8_IF(14) "ldr %[s], %[d]\n\t"
                                                              "stmia %[s], {r0, r2, r4, r6, r8, r10, r12, lr}"
                         : [s] "+r"(s), [pa] "+r"(pa), [pb] "+r"(pb), [pc] "+r"(pc)
                         : [d] "m"(d), [b] "i"(2 * q), [n8] "i"(q / 8)
                         : "r0", "r2", "r4", "r6", "r8", "r10", "r12", "lr", "q0", "q1", "q2", "memory");
    }
}
#endif

#if LMU_PATH_MVE
/* lmu_requant8 of a 16-bit state, four values per vector: VLDRH.S32, VQRDMULH (exactly lmu_srdhm: it
 * saturates only for two INT32_MIN operands), then (y + 2^(e-1) - [y < 0]) >> e as in lmu_mbqm32_s
 * (VSHR #31 gives -[y < 0], VSHL by -e shifts right arithmetically), clamp, VSTRB.32: 10 instructions per
 * 4 values with the loop (9 for a compile-time shift, below); the last n % 4 values predicated (VCTP). Returns 0 and does nothing when s > 0 or
 * s < -22 (the scalar loop does them). */
LMU_SPECIALIZE int32_t lmu_requant8_s16_mve(const int16_t *v, int8_t *z, int32_t n, int32_t m, int32_t s, int32_t zp) {
    int32_t i;
    const int32_t e = -s;
    /* the zero point rides on the rounding term: (y + 2^(e-1) + zp 2^e - [y < 0]) >> e is the rounded value
     * plus zp exactly; |y| <= 2^15 and e <= 22 keep the sum below 2^30 */
    const int32_t k = e == 0 ? zp : (int32_t)(1u << (e - 1)) + zp * (int32_t)(1u << e);
    const int32x4_t right = vdupq_n_s32(s), lo = vdupq_n_s32(-128), hi = vdupq_n_s32(127);
    if (s > 0 || s < -22) {
        return 0;
    }
#ifdef __OPTIMIZE__
    if (__builtin_constant_p(s) && e >= 1 && e <= 16) {
        /* a compile-time right shift of 1..16: VQRSHRNB #e adds 2^(e-1), shifts and saturates to int16 in the
         * low half of each lane, VQMOVNB.S16 saturates that to int8 in the lane's low byte (what VSTRB.32
         * stores), so the zero point (zp 2^e) and -[y < 0] go in first: 9 instructions per 4 values */
        const int32_t kz = zp * (int32_t)(1u << e);
        int16x8_t h = vdupq_n_s16(0);
        int8x16_t b = vdupq_n_s8(0);
        for (i = 0; i + 4 <= n; i += 4) {
            const int32x4_t y = vqrdmulhq_n_s32(vldrhq_s32(v + i), m);
            h = vqrshrnbq_n_s32(h, vaddq_n_s32(vaddq_s32(y, vshrq_n_s32(y, 31)), kz), e);
            b = vqmovnbq_s16(b, h);
            vstrbq_s32(z + i, vreinterpretq_s32_s8(b));
        }
    } else
#endif
    {
        i = 0;
    }
    for (; i + 4 <= n; i += 4) {
        int32x4_t y = vqrdmulhq_n_s32(vldrhq_s32(v + i), m);
        y = e > 0 ? vshlq_s32(vaddq_s32(vaddq_n_s32(y, k), vshrq_n_s32(y, 31)), right) : vaddq_n_s32(y, k);
        vstrbq_s32(z + i, vmaxq_s32(vminq_s32(y, hi), lo));
    }
    if (i < n) {
        const mve_pred16_t p = vctp32q((uint32_t)(n - i));
        int32x4_t y = vqrdmulhq_n_s32(vldrhq_z_s32(v + i, p), m);
        y = e > 0 ? vshlq_s32(vaddq_s32(vaddq_n_s32(y, k), vshrq_n_s32(y, 31)), right) : vaddq_n_s32(y, k);
        vstrbq_p_s32(z + i, vmaxq_s32(vminq_s32(y, hi), lo), p);
    }
    return 1;
}
#endif

#if LMU_PATH_DSP
/* the low / high halfword x of w requantized: SSAT(floor((x m + 2^16 A_x) / 2^k), 8), a = A_x for x >= 0
 * (see lmu_requant8_s16_dsp) */
static inline int8_t lmu_requant8_lo(uint32_t w, int32_t m, int32_t a, int32_t k) {
    return (int8_t)__ssat(__smlawb(m, (int32_t)w, a - (int32_t)(w & 0x8000u)) >> k, 8);
}

static inline int8_t lmu_requant8_hi(uint32_t w, int32_t m, int32_t a, int32_t k) {
    return (int8_t)__ssat(__smlawt(m, (int32_t)w, a - (int32_t)((w >> 31) << 15)) >> k, 8);
}

/* lmu_requant8 of a 16-bit state on the DSP path, four values per pass: two LDR, then per value an AND (low
 * halfword) or LSR (high), a SUB, one SMLAWB / SMLAWT, one SSAT with its shift and one STRB (26 instructions
 * per 4 values with the loop; the scalar form took 11 per value). Returns 0 and does nothing unless m > 0,
 * 1 <= e = -s <= 16 and |A| + 2^15 <= 2^30 for A below (lmu_requant8's loop does the rest; m, s and zp
 * are constants in the generated step, so the test folds).
 *
 * Proof. For |x| <= 2^15, lmu_srdhm(x, m) = y = floor((x m + 2^30) / 2^31), and lmu_rdbpot(y, e) =
 * floor((y + 2^(e-1) - [y < 0]) / 2^e) (see lmu_mbqm32_r). With m > 0 and e >= 1, [y < 0] may be replaced
 * by [x < 0]: y < 0 needs x m < -2^30, so x < 0; and for x < 0 with -2^30 <= x m < 0, y = 0 and both
 * forms give 0. Folding the floors (floor((floor(N / a) + c) / b) = floor((N + c a) / (a b)) for integer c)
 * and the zero point:
 *   zp + lmu_mbqm32(x, m, s) = floor((x m + 2^16 A_x) / 2^(31+e)),
 *   A_x = A - [x < 0] 2^15,  A = 2^(14+e) + 2^14 + zp 2^(15+e).
 * SMLAWB / SMLAWT give floor((x m + 2^16 A_x) / 2^16) = floor(x m / 2^16) + A_x exactly; |x m| < 2^46, so
 * |floor(x m / 2^16)| < 2^30, and |A_x| <= |A| + 2^15 <= 2^30 keeps the result inside int32 (no Q flag);
 * an arithmetic shift by 15 + e <= 31 finishes the floor, and SSAT clamps to int8 as lmu_requant8 does.
 * [x < 0] 2^15 is bit 15 of x's halfword: w & 0x8000 for the low value of the word w, (w >> 31) << 15
 * for the high one. */
LMU_ALWAYS_INLINE int32_t lmu_requant8_s16_dsp(const int16_t *v, int8_t *z, int32_t n, int32_t m, int32_t s,
                                               int32_t zp) {
    const int32_t e = -s;
    int64_t a;
    int32_t i;
    if (m <= 0 || e < 1 || e > 16) {
        return 0;
    }
    a = ((int64_t)1 << (14 + e)) + ((int64_t)1 << 14) + (int64_t)zp * ((int64_t)1 << (15 + e));
    if ((a < 0 ? -a : a) + ((int64_t)1 << 15) > ((int64_t)1 << 30)) {
        return 0;
    }
    for (i = 0; i + 4 <= n; i += 4) { /* two words per pass: half the loop overhead */
        const uint32_t w = lmu_ld32(v + i), u = lmu_ld32(v + i + 2);
        z[i] = lmu_requant8_lo(w, m, (int32_t)a, 15 + e);
        z[i + 1] = lmu_requant8_hi(w, m, (int32_t)a, 15 + e);
        z[i + 2] = lmu_requant8_lo(u, m, (int32_t)a, 15 + e);
        z[i + 3] = lmu_requant8_hi(u, m, (int32_t)a, 15 + e);
    }
    if (i + 2 <= n) {
        const uint32_t w = lmu_ld32(v + i);
        z[i] = lmu_requant8_lo(w, m, (int32_t)a, 15 + e);
        z[i + 1] = lmu_requant8_hi(w, m, (int32_t)a, 15 + e);
        i += 2;
    }
    if (i < n) {
        const int32_t a0 = (int32_t)a - (v[i] < 0 ? 0x8000 : 0);
        z[i] = (int8_t)__ssat(__smlawb(m, v[i], a0) >> (15 + e), 8);
    }
    return 1;
}
#endif

/* Dense memory with a 16-bit state and 16-bit coefficients, one whole channel on the DSP path (equation
 * and ranges of LMU_DEFINE_DENSE_MEMORY in lmu_runtime.h). Applies when q is even, C and the state are
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
#endif /* no third case: this header is included only when one of the two paths is on */
}

#endif /* LMU_KERNELS_ARM_H */
