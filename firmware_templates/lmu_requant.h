/*
 * lmu_requant.h -- requantization of an LMU state into int8 activations (lmu_requant8,
 * lmu_requant8_s16: the memory into its layer's int8 hidden input), portable, ARMv6-M, DSP (SMLAWB / SMLAWT)
 * and Helium (VQRDMULH) paths side by side; lmu_requant16 and lmu_requant16_s16 (a state into
 * int16 activations, the int16 layers' width conversions). Part of lmu_runtime.h.
 */
#ifndef LMU_REQUANT_H
#define LMU_REQUANT_H

#include "lmu_config.h"
#include "lmu_fixedpoint.h"
#include "lmu_qlinear.h" /* lmu_clamp32 */

#if LMU_PATH_ARM /* the DSP and Helium kernels */
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
        LMU_MVE_STORE_FENCE();
        vstrbq_p_s32(z + i, vmaxq_s32(vminq_s32(y, hi), lo), p);
    }
    return 1;
}

/* lmu_requant16 of a 16-bit state, four values per vector: VLDRH.S32, the left shift s >= 0 (|x 2^s| <= 2^29
 * for s <= 14: lmu_mbqm's clamp never acts), VQRDMULH (lmu_srdhm: it saturates only for two INT32_MIN
 * operands), for s < 0 lmu_requant8_s16_mve's rounding shift, then the zero point (|y| <= 2^29 and |zp| <=
 * 2^15: no overflow) and VQMOVNB.S32 (the int16 clamp, in each lane's low halfword, what VSTRH.32 stores); the
 * last n % 4 values predicated (VCTP). Returns 0 and does nothing for s > 14 or s < -31 (lmu_requant16's loop
 * does them). */
LMU_SPECIALIZE int32_t lmu_requant16_s16_mve(const int16_t *v, int16_t *z, int32_t n, int32_t m, int32_t s,
                                             int32_t zp) {
    const int32_t e = s < 0 ? -s : 0, left = s > 0 ? s : 0;
    const int32_t k = e == 0 ? 0 : (int32_t)(1u << (e - 1));
    int16x8_t h = vdupq_n_s16(0);
    int32_t i;
    if (s > 14 || s < -31 || zp < -32768 || zp > 32767) {
        return 0;
    }
    i = 0;
#ifdef __OPTIMIZE__
    if (__builtin_constant_p(s) && s >= 0 && s <= 14) {
        /* a compile-time left shift: eight values per pass, VSHLLB / VSHLLT (VMOVLB / VMOVLT for 0) widening
         * the even and odd halfwords of one VLDRH with the shift, VQMOVNB / VQMOVNT narrowing them back into
         * their places for one VSTRH: 9 instructions per 8 values with the loop */
        for (; i + 8 <= n; i += 8) {
            const int16x8_t x = vldrhq_s16(v + i);
            const int32x4_t ev = s > 0 ? vshllbq_n_s16(x, s > 0 ? s : 1) : vmovlbq_s16(x);
            const int32x4_t od = s > 0 ? vshlltq_n_s16(x, s > 0 ? s : 1) : vmovltq_s16(x);
            const int32x4_t ye = vqrdmulhq_n_s32(ev, m), yo = vqrdmulhq_n_s32(od, m);
            h = vqmovnbq_s32(h, zp != 0 ? vaddq_n_s32(ye, zp) : ye);
            h = vqmovntq_s32(h, zp != 0 ? vaddq_n_s32(yo, zp) : yo);
            vstrhq_s16(z + i, h);
        }
    }
#endif
    for (; i + 4 <= n; i += 4) { /* m, s and zp are constants in the generated step: the tests fold */
        int32x4_t y = vldrhq_s32(v + i);
        y = vqrdmulhq_n_s32(left > 0 ? vshlq_r_s32(y, left) : y, m);
        if (e > 0) {
            y = vshlq_r_s32(vaddq_s32(vaddq_n_s32(y, k), vshrq_n_s32(y, 31)), -e);
        }
        h = vqmovnbq_s32(h, zp != 0 ? vaddq_n_s32(y, zp) : y);
        vstrhq_s32(z + i, vreinterpretq_s32_s16(h));
    }
    if (i < n) {
        const mve_pred16_t p = vctp32q((uint32_t)(n - i));
        int32x4_t y = vqrdmulhq_n_s32(vshlq_r_s32(vldrhq_z_s32(v + i, p), left), m);
        if (e > 0) {
            y = vshlq_r_s32(vaddq_s32(vaddq_n_s32(y, k), vshrq_n_s32(y, 31)), -e);
        }
        h = vqmovnbq_s32(h, vaddq_n_s32(y, zp));
        LMU_MVE_STORE_FENCE();
        vstrhq_p_s32(z + i, vreinterpretq_s32_s16(h), p);
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

/* lmu_requant16 (below: clamp16(zp + lmu_mbqm32(x, m, s))) of a 16-bit state x, as
 * lmu_requant8_s16_dsp with SSAT to 16 bits: floor((x m + 2^16 A_x) / 2^(16+k)) with
 *   s >= 0 (a left shift, s <= 14): lmu_mbqm32 is lmu_srdhm(x 2^s, m) = floor((x m + 2^(30-s)) / 2^(31-s))
 *     (|x 2^s| <= 2^29: lmu_mbqm's int32 clamp never acts), so A_x = A = 2^(14-s) + zp 2^(15-s), k = 15 - s;
 *   s < 0 (a right shift e = -s <= 16, m > 0): lmu_requant8_s16_dsp's A_x and k = 15 + e.
 * SMLAWB / SMLAWT give floor(x m / 2^16) + A_x exactly while |A| + 2^15 <= 2^30 (|floor(x m / 2^16)| <= 2^30,
 * so the sum stays inside int32), the shift by k in [1, 31] finishes the floor, SSAT is the int16 clamp.
 * [x < 0] 2^15 is bit 15 of the value's halfword. Four values per pass (two LDR), about 4.25 instructions per
 * value with the loop (one SMMULR per value took 7).
 * Returns 0 and does nothing outside those ranges (lmu_requant16's loop does them). */
static inline int16_t lmu_requant16_lo(uint32_t w, int32_t m, int32_t a, int32_t k, int32_t neg) {
    return (int16_t)__ssat(__smlawb(m, (int32_t)w, a - (neg ? (int32_t)(w & 0x8000u) : 0)) >> k, 16);
}

static inline int16_t lmu_requant16_hi(uint32_t w, int32_t m, int32_t a, int32_t k, int32_t neg) {
    return (int16_t)__ssat(__smlawt(m, (int32_t)w, a - (neg ? (int32_t)((w >> 31) << 15) : 0)) >> k, 16);
}

LMU_ALWAYS_INLINE int32_t lmu_requant16_s16_dsp(const int16_t *v, int16_t *z, int32_t n, int32_t m, int32_t s,
                                                int32_t zp) {
    const int32_t neg = s < 0, k = 15 - s;
    int64_t a;
    int32_t i;
    if (s > 14 || s < -16 || (neg && m <= 0) || zp < -32768 || zp > 32767) {
        return 0;
    }
    a = neg ? ((int64_t)1 << (14 - s)) + ((int64_t)1 << 14) + (int64_t)zp * ((int64_t)1 << (15 - s))
            : ((int64_t)1 << (14 - s)) + (int64_t)zp * ((int64_t)1 << (15 - s));
    if ((a < 0 ? -a : a) + ((int64_t)1 << 15) > ((int64_t)1 << 30)) {
        return 0;
    }
    for (i = 0; i + 4 <= n; i += 4) { /* two words per pass: half the loop overhead */
        const uint32_t w = lmu_ld32(v + i), u = lmu_ld32(v + i + 2);
        z[i] = lmu_requant16_lo(w, m, (int32_t)a, k, neg);
        z[i + 1] = lmu_requant16_hi(w, m, (int32_t)a, k, neg);
        z[i + 2] = lmu_requant16_lo(u, m, (int32_t)a, k, neg);
        z[i + 3] = lmu_requant16_hi(u, m, (int32_t)a, k, neg);
    }
    if (i + 2 <= n) {
        const uint32_t w = lmu_ld32(v + i);
        z[i] = lmu_requant16_lo(w, m, (int32_t)a, k, neg);
        z[i + 1] = lmu_requant16_hi(w, m, (int32_t)a, k, neg);
        i += 2;
    }
    if (i < n) {
        z[i] = (int16_t)__ssat(__smlawb(m, v[i], (int32_t)a - (neg && v[i] < 0 ? 0x8000 : 0)) >> k, 16);
    }
    return 1;
}
#endif
#endif

#if LMU_PATH_V6M
/* lmu_requant16 of a 16-bit state for a left shift 0 <= s <= 14 in 32-bit multiplies (ARMv6-M): as in
 * lmu_requant16_s16_dsp, zp + lmu_mbqm32(x, m, s) = floor((floor(x m / 2^16) + A) / 2^(15-s)), A = 2^(14-s) +
 * zp 2^(15-s), and with m = hi 2^16 + lo (0 <= lo < 2^16) floor(x m / 2^16) = x hi + floor(x lo / 2^16):
 * |x hi| <= 2^30, 0 <= |x lo| < 2^31 and |A| + 2^30 < 2^31 keep every term in int32. Two MULS per value
 * (lmu_mbqm32_h16 took four). Returns 0 and does nothing outside that range. */
LMU_ALWAYS_INLINE int32_t lmu_requant16_s16_v6m(const int16_t *v, int16_t *z, int32_t n, int32_t m, int32_t s,
                                                int32_t zp) {
    int32_t i, lo = (int32_t)((uint32_t)m & 0xFFFFu), hi = (m - lo) / 65536, a;
    if (s < 0 || s > 14 || zp < -32768 || zp > 32767) {
        return 0;
    }
    a = (1 << (14 - s)) + zp * (1 << (15 - s)); /* |zp 2^(15-s)| <= 2^30 */
    if (a <= -(1 << 30) || a >= (1 << 30)) {
        return 0;
    }
#ifdef __OPTIMIZE__
    if (__builtin_constant_p(s) && n > 0) {
        /* a compile-time shift (the generated step's): the loop in assembly, 14 instructions per value (gcc's
         * took about 22: it rebuilt constants and moved values through high registers). Seven low registers
         * and one high one (a), so it allocates even with r7 kept as a frame pointer. In range when SXTH
         * leaves y unchanged; otherwise (y >> 31) ^ 32767 is the int16 end on y's side. */
        int32_t j = -2 * n, x, t;
        const int16_t *ve = v + n;
        int16_t *ze = z + n;
        __asm__ volatile(".syntax unified\n" /* gcc hands Thumb-1 inline assembly over in divided syntax */
                         "1:\n\t"
                         "ldrsh %[x], [%[ve], %[j]]\n\t"
                         "movs %[t], %[x]\n\t"
                         "muls %[t], %[lo], %[t]\n\t"
                         "asrs %[t], %[t], #16\n\t"
                         "muls %[x], %[hi], %[x]\n\t"
                         "adds %[x], %[x], %[t]\n\t"
                         "add %[x], %[a]\n\t"
                         "asrs %[x], %[x], #%c[k]\n\t"
                         "sxth %[t], %[x]\n\t"
                         "cmp %[t], %[x]\n\t"
                         "beq 2f\n\t"
                         "asrs %[x], %[x], #31\n\t"
                         "movs %[t], #127\n\t"
                         "lsls %[t], %[t], #8\n\t"
                         "adds %[t], #255\n\t"
                         "eors %[x], %[t]\n\t"
                         "2:\n\t"
                         "strh %[x], [%[ze], %[j]]\n\t"
                         "adds %[j], #2\n\t"
                         "bne 1b"
                         : [j] "+l"(j), [x] "=&l"(x), [t] "=&l"(t)
                         : [ve] "l"(ve), [ze] "l"(ze), [lo] "l"(lo), [hi] "l"(hi), [a] "h"(a), [k] "i"(15 - s)
                         : "cc", "memory");
        return 1;
    }
#endif
    for (i = 0; i < n; ++i) {
        const int32_t x = v[i], y = (x * hi + ((x * lo) >> 16) + a) >> (15 - s);
        z[i] = (int16_t)(y > 32767 ? 32767 : (y < -32768 ? -32768 : y));
    }
    return 1;
}
#endif

/* z_i = clamp8(zp + MBQM(v_i, m, s)) for a state of any storage type (given as int32 values). The DSP path
 * takes lmu_mbqm32_s for a 16-bit state and lmu_mbqm32_r otherwise where they apply (m, s are constants in
 * the generated step and v comes from the state's type, so the tests fold away). */
static inline int8_t lmu_requant8(int32_t v, int32_t m, int32_t s, int32_t zp) {
#if LMU_PATH_DSP
    if (s <= 0 && s >= -31 && v >= -32768 && v <= 32767) {
        return (int8_t)__ssat(zp + lmu_mbqm32_s(v, m, -s), 8);
    }
    if (s <= 0 && s >= -31 && m != INT32_MIN) {
        return (int8_t)__ssat(__qadd(zp, lmu_mbqm32_r(v, m, -s)), 8);
    }
#endif
#if !LMU_PATH_DSP
    if (s <= 0 && s >= -31 && v >= -32768 && v <= 32767) {
        return lmu_clamp8(zp + (int64_t)lmu_mbqm32_16(v, m, -s));
    }
#endif
    return lmu_clamp8(zp + (int64_t)lmu_mbqm32(v, m, s));
}

/* z_i = lmu_requant8(v_i, m, s, zp) for the n values of a 16-bit state (the LMU's memory into its int8
 * hidden input). Helium does four values per vector (lmu_requant8_s16_mve), the DSP path one SMLAWB or
 * SMLAWT and one SSAT each (lmu_requant8_s16_dsp; one SMMULR each where that does not apply). */
LMU_ALWAYS_INLINE void lmu_requant8_s16(const int16_t *v, int8_t *z, int32_t n, int32_t m, int32_t s, int32_t zp) {
    int32_t i;
#if LMU_PATH_MVE
    if (lmu_requant8_s16_mve(v, z, n, m, s, zp)) {
        return;
    }
#endif
#if LMU_PATH_DSP
    if (lmu_requant8_s16_dsp(v, z, n, m, s, zp)) {
        return;
    }
#endif
#if LMU_PATH_V6M
    if (s <= 0 && s >= -31) { /* lmu_requant8's lmu_mbqm32_16 with the multiplier split once, out of the loop */
        const int32_t e = -s;
        int32_t lo = (int32_t)((uint32_t)m & 0xFFFFu), hi = (m - lo) / 65536, c14 = 1 << 14;
        __asm__("" : "+r"(lo), "+r"(hi), "+r"(c14)); /* values in registers: gcc rebuilt 2^14 every pass */
        for (i = 0; i < n; ++i) {
            const int32_t x = v[i];
            int32_t y = (x * hi + c14 + ((x * lo) >> 16)) >> 15;
            y = lmu_rdbpot_s(y, e);
            y += zp;
            z[i] = (int8_t)(y > 127 ? 127 : (y < -128 ? -128 : y));
        }
        return;
    }
#endif
    for (i = 0; i < n; ++i) {
        z[i] = lmu_requant8(v[i], m, s, zp);
    }
}

/* z = clamp16(zp + MBQM(v, m, s)): the state into int16 activations (in a loop over the state) and the
 * width conversions, exact as lmu_mbqm32 then the clamp, with |zp| < 2^15 in the fast forms:
 *   - a 16-bit v and s <= 14: x = v 2^max(s, 0) is below 2^30 in magnitude (lmu_mbqm32 clamps nothing), so
 *     one SMMULR (lmu_mbqm32_s) and one SSAT on the DSP path; elsewhere 32-bit multiplies only (lmu_mbqm32_16
 *     for a right shift, lmu_mbqm32_h16 for a left one with m >= 0); |zp + MBQM| < 2^30 + 2^15 fits int32;
 *   - a 32-bit state and a right shift: lmu_mbqm32_r and a saturating add on the DSP path (as lmu_requant8;
 *     QADD's saturation keeps the sign, so SSAT gives the clamp of the exact sum), lmu_mbqm32_h16 elsewhere
 *     for |v| < 2^30 and m >= 0.
 * The tests on v fold where it comes from an int16 state; m, s and zp are constants in the generated step. */
static inline int16_t lmu_requant16(int32_t v, int32_t m, int32_t s, int32_t zp) {
    const int32_t zp16 = zp >= -32768 && zp <= 32767;
    if (zp16 && v >= -32768 && v <= 32767 && s <= 14 && s >= -31) {
        const int32_t x = s > 0 ? v * (1 << s) : v, e = s > 0 ? 0 : -s;
#if LMU_PATH_DSP
        return (int16_t)__ssat(zp + lmu_mbqm32_s(x, m, e), 16);
#else
        if (s <= 0) {
            return (int16_t)lmu_clamp32(zp + lmu_mbqm32_16(v, m, e), -32768, 32767);
        }
        if (m >= 0) {
            return (int16_t)lmu_clamp32(zp + lmu_mbqm32_h16(x, m, 0), -32768, 32767);
        }
#endif
    }
#if LMU_PATH_DSP
    if (s <= 0 && s >= -31 && m != INT32_MIN) {
        return (int16_t)__ssat(__qadd(zp, lmu_mbqm32_r(v, m, -s)), 16);
    }
#else
    if (zp16 && s <= 0 && s >= -31 && m >= 0 && v > -(1 << 30) && v < (1 << 30)) {
        return (int16_t)lmu_clamp32(zp + lmu_mbqm32_h16(v, m, -s), -32768, 32767);
    }
#endif
    return lmu_clamp16(zp + (int64_t)lmu_mbqm32(v, m, s));
}

/* z_i = lmu_requant16(v_i, m, s, zp) for the n values of a 16-bit state: Helium four per vector, the DSP path
 * one SMLAWB / SMLAWT and one SSAT each, ARMv6-M two MULS (lmu_requant16_s16_mve / _dsp / _v6m above),
 * a loop elsewhere */
LMU_ALWAYS_INLINE void lmu_requant16_s16(const int16_t *v, int16_t *z, int32_t n, int32_t m, int32_t s, int32_t zp) {
    int32_t i;
#if LMU_PATH_MVE
    if (lmu_requant16_s16_mve(v, z, n, m, s, zp)) {
        return;
    }
#endif
#if LMU_PATH_DSP
    if (lmu_requant16_s16_dsp(v, z, n, m, s, zp)) {
        return;
    }
#endif
#if LMU_PATH_V6M
    if (lmu_requant16_s16_v6m(v, z, n, m, s, zp)) {
        return;
    }
#endif
    for (i = 0; i < n; ++i) {
        z[i] = lmu_requant16(v[i], m, s, zp);
    }
}

#endif /* LMU_REQUANT_H */
