/*
 * lmu_fixedpoint.h -- the runtime's fixed-point helpers: saturation, rounding shifts, TFLite's
 * requantization (lmu_mbqm and its 32-bit and one-rounding forms, mirrored by lmu_edge/fixedpoint.py) and the
 * dense memory's row finish. Part of lmu_runtime.h.
 */
#ifndef LMU_FIXEDPOINT_H
#define LMU_FIXEDPOINT_H

#include "lmu_config.h"

/* ------------------------------------------------------------------------------------------ */

static inline int64_t lmu_clamp64(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}

/* saturate to a signed type of `bits` bits */
static inline int64_t lmu_sat(int64_t v, int bits) {
    const int64_t hi = ((int64_t)1 << (bits - 1)) - 1;
    return lmu_clamp64(v, -hi - 1, hi);
}

/* x / 2^s rounded half up; s <= 0 is an exact left shift */
static inline int64_t lmu_shift_round(int64_t x, int s) {
    if (s <= 0) {
        return (int64_t)((uint64_t)x << (-s));
    }
    return (x + ((int64_t)1 << (s - 1))) >> s;
}

/* gemmlowp SaturatingRoundingDoublingHighMul: (ab + nudge) / 2^31 truncated toward zero, nudge = 2^30 for
 * ab >= 0 and 1 - 2^30 otherwise. Both cases equal floor((ab + 2^30) / 2^31): for ab < 0 the truncation is
 * a ceiling, and ceil((ab + 1 - 2^30) / 2^31) = floor((ab + 2^30) / 2^31). One SMULL, an add and a shift. */
static inline int32_t lmu_srdhm(int32_t a, int32_t b) {
    if (a == INT32_MIN && b == INT32_MIN) {
        return INT32_MAX;
    }
    return (int32_t)(((int64_t)a * (int64_t)b + ((int64_t)1 << 30)) >> 31);
}

/* gemmlowp RoundingDivideByPOT: ties away from zero */
static inline int32_t lmu_rdbpot(int32_t x, int e) {
    const int32_t mask = (int32_t)(((int64_t)1 << e) - 1);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> e) + (remainder > threshold ? 1 : 0);
}

/* TFLite MultiplyByQuantizedMultiplier: x * m * 2^(s - 31), rounded */
static inline int32_t lmu_mbqm(int64_t x, int32_t m, int32_t s) {
    const int left = s > 0 ? s : 0;
    const int right = s > 0 ? 0 : -s;
    const int64_t xl = lmu_clamp64(x * ((int64_t)1 << left), INT32_MIN, INT32_MAX);
    return lmu_rdbpot(lmu_srdhm((int32_t)xl, m), right);
}

/* lmu_mbqm for an int32 x: no clamp is needed when s <= 0 (x * 2^0 is x) */
static inline int32_t lmu_mbqm32(int32_t x, int32_t m, int32_t s) {
    return s > 0 ? lmu_mbqm(x, m, s) : lmu_rdbpot(lmu_srdhm(x, m), -s);
}

/* lmu_mbqm32 for 0 <= e = -s <= 31 and m != INT32_MIN, in 32-bit steps after one SMULL. lmu_srdhm is
 * y = floor((p + 2^30) / 2^31) for p = x m (its INT32_MIN case needs m = INT32_MIN; |p| < 2^62 so y fits
 * int32): the high word of t = p + 2^30 shifted left once with the top bit of the low word. lmu_rdbpot
 * rounds y / 2^e half away from zero: with y = k 2^e + r (0 <= r < 2^e), k + 1 when r > 2^(e-1) - 1 for
 * y >= 0 and r > 2^(e-1) for y < 0, which is k + ((r + 2^(e-1) - [y < 0]) >> e); that sum is below 2^32,
 * so it is formed unsigned. The same integers as lmu_mbqm32 (tests/test_kernels_arm.py checks edge and
 * random values of every e against it on the host; the int matrix checks the step on the Cortex-M4). */
static inline int32_t lmu_mbqm32_r(int32_t x, int32_t m, int32_t e) {
    const int64_t t = (int64_t)x * (int64_t)m + ((int64_t)1 << 30);
    const uint32_t lo = (uint32_t)t;
    const uint32_t hi = (uint32_t)((uint64_t)t >> 32);
    const int32_t y = (int32_t)((hi << 1) | (lo >> 31));
    uint32_t r;
    if (e == 0) {
        return y;
    }
    r = ((uint32_t)y & (((uint32_t)1 << e) - 1u)) + ((uint32_t)1 << (e - 1)) - (uint32_t)(y < 0 ? 1 : 0);
    return (y >> e) + (int32_t)(r >> e);
}

/* lmu_rdbpot(y, e) for |y| < 2^30 and 0 <= e <= 31: y / 2^e rounded half away from zero, as
 * (y + 2^(e-1) - [y < 0]) >> e (see lmu_mbqm32_r); the sum cannot overflow. */
static inline int32_t lmu_rdbpot_s(int32_t y, int32_t e) {
    if (e == 0) {
        return y;
    }
    return (y + (int32_t)(1u << (e - 1)) - (int32_t)((uint32_t)y >> 31)) >> e;
}

#if LMU_PATH_DSP
/* lmu_mbqm32 for |x| < 2^30, 0 <= e <= 31 (a 16-bit state, say): lmu_srdhm(x, m) = floor((x m + 2^30) / 2^31)
 * = floor((2x m + 2^31) / 2^32), which is SMMULR of 2x and m (2x fits int32); then lmu_rdbpot as
 * (y + 2^(e-1) - [y < 0]) >> e (see lmu_mbqm32_r; |y| < 2^30, so the sum cannot overflow). 5 instructions. */
static inline int32_t lmu_mbqm32_s(int32_t x, int32_t m, int32_t e) {
    int32_t y;
    __asm__("smmulr %0, %1, %2" : "=r"(y) : "r"(x * 2), "r"(m));
    return lmu_rdbpot_s(y, e);
}
#endif

/* lmu_mbqm32 for |x| <= 2^15 (a 16-bit state) and 0 <= e <= 31 in 32-bit multiplies only (no 64-bit
 * multiply helper on ARMv6-M): with m = m_hi 2^16 + m_lo (m_hi = m >> 16, 0 <= m_lo < 2^16),
 * lmu_srdhm(x, m) = floor((x m + 2^30) / 2^31) = floor((x m_hi + 2^14 + floor(x m_lo / 2^16)) / 2^15),
 * since floor((N 2^16 + P) / 2^31) = floor((N + floor(P / 2^16)) / 2^15); |x m_hi| <= 2^30 and
 * |x m_lo| < 2^31, so every term fits int32. Then lmu_rdbpot as in lmu_mbqm32_r. */
static inline int32_t lmu_mbqm32_16(int32_t x, int32_t m, int32_t e) {
    const int32_t lo = (int32_t)((uint32_t)m & 0xFFFFu), hi = (m - lo) / 65536;
    const int32_t y = (x * hi + (1 << 14) + ((x * lo) >> 16)) >> 15;
    return lmu_rdbpot_s(y, e);
}

/* lmu_mbqm32 for |x| < 2^30 (an acc30 layer's accumulator), 0 <= m < 2^31 and 0 <= e <= 31 in 32-bit
 * multiplies only (ARMv6-M has no 32 x 32 -> 64 multiply; the helper call cost about 40 instructions a
 * row): with x = xh 2^16 + xl and m = mh 2^16 + ml (xl, ml in [0, 2^16)), x m + 2^30 = A 2^32 + E 2^16 + r
 * with A = xh mh, E = xh ml + xl mh + floor(xl ml / 2^16) + 2^14 and 0 <= r < 2^16, so lmu_srdhm(x, m) =
 * floor((x m + 2^30) / 2^31) = 2 A + floor(E / 2^15). E + 2^30 lies in (0, 2^32) (|xh ml| < 2^30,
 * 0 <= xl mh < 2^31), so it is formed unsigned: floor(E / 2^15) = ((E + 2^30) >> 15) - 2^15. Then
 * lmu_rdbpot as in lmu_mbqm32_s. The same integers as lmu_mbqm32 (tests/test_kernels_arm.py). */
static inline int32_t lmu_mbqm32_h16(int32_t x, int32_t m, int32_t e) {
    const int32_t xh = x >> 16;
    const uint32_t xl = (uint32_t)x & 0xFFFFu, ml = (uint32_t)m & 0xFFFFu, mh = (uint32_t)m >> 16;
    const uint32_t e1 = (uint32_t)(xh * (int32_t)ml) + xl * mh + ((xl * ml) >> 16) + 0x40004000u;
    const int32_t y = 2 * (xh * (int32_t)mh) + (int32_t)(e1 >> 15) - 32768;
    return lmu_rdbpot_s(y, e);
}

/* a / n rounded half away from zero, n > 0 */
static inline int64_t lmu_div_round(int64_t a, int64_t n) {
    return (2 * a + (a >= 0 ? n : -n)) / (2 * n);
}

static inline int8_t lmu_clamp8(int64_t v) {
    return (int8_t)lmu_clamp64(v, -128, 127);
}

static inline int16_t lmu_clamp16(int64_t v) {
    return (int16_t)lmu_clamp64(v, -32768, 32767);
}

/* finish row i of the dense memory from its exact sum over j */
static inline void lmu_dense_finish(int64_t *tmp, int32_t i, int64_t sum, int32_t b, int32_t uc, int32_t mi,
                                    int32_t coeff_frac, int32_t delta, int32_t bits) {
    const int64_t step = lmu_shift_round((int64_t)b * (int64_t)uc + sum, coeff_frac);
    tmp[i] = lmu_sat(delta ? (int64_t)mi + step : step, bits);
}

/* int32 from the bits of a uint32 (two's complement; gcc and clang compile it to nothing) */
static inline int32_t lmu_i32(uint32_t v) {
    return v < 0x80000000u ? (int32_t)v : -(int32_t)(~v) - 1;
}

/* lmu_dense_finish for a row whose whole sum is proven to fit int32 (wrap32, c_codegen.dense_wrap32):
 * sum = sum_j C_ij m_j modulo 2^32. T = B_i u + sum + 2^(coeff_frac-1) also modulo 2^32: addition and
 * multiplication modulo 2^32 give the low 32 bits of the exact T, and the proof puts T in int32, so those
 * bits are T. Then step = floor(T / 2^coeff_frac), the same integer as lmu_dense_finish's. */
static inline void lmu_dense_finish32(int64_t *tmp, int32_t i, uint32_t sum, int32_t b, int32_t uc, int32_t mi,
                                      int32_t coeff_frac, int32_t delta, int32_t bits) {
    const uint32_t t = sum + (uint32_t)b * (uint32_t)uc + ((uint32_t)1 << (coeff_frac - 1));
    const int32_t step = lmu_i32(t) >> coeff_frac; /* |step| <= 2^30 and |mi| <= 2^15: the sum fits int32 */
    const int32_t v = delta ? mi + step : step, hi = ((int32_t)1 << (bits - 1)) - 1;
    tmp[i] = v > hi ? hi : (v < -hi - 1 ? -hi - 1 : v);
}

#endif /* LMU_FIXEDPOINT_H */
