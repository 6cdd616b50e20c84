/*
 * lmu_runtime.h -- the lmu-edge runtime: header-only C99, static inline, no malloc, no globals.
 *
 * Integer path (no floating point at all, so it runs on an FPU-less Cortex-M0):
 *   - int8 activations with zero points, TFLite-style requantization (lmu_mbqm),
 *   - lmu_qlinear: sum over parts of MBQM((x_p - zp_p) . W_p [+ bias]), clamp, optional 256-entry LUT,
 *   - LMU memories in fixed point: dense (delta / direct form), structured Runge-Kutta, FIR ring buffer,
 *   - running-mean pooling and softmax in integers,
 *   - the int16x8 mode (--quantize int16x8, as TFLite's 16x8 and CMSIS-NN's s16 kernels): int16 activations
 *     with zero point 0, int8 weights, int64 row accumulators, TFLite's 64-bit requantization (lmu_mbqm16),
 *     tanh / sigmoid / silu and softmax as 513-entry tables read with linear interpolation (lmu_interp16).
 *     Their dense rows run in lmu_kernels_arm.h on DSP and Helium cores (four rows sharing each input
 *     load) and in two-row portable C elsewhere; the tables, softmax and pooling are portable C on every
 *     core; the LMU memory kernels are shared with int8, chosen by the state width.
 * Every operation mirrors lmu_edge/intsim.py and lmu_edge/fixedpoint.py bit for bit; the tests compare
 * the two. Rounding of state updates is "half_up" ((x + 2^(s-1)) >> s); right shifts of negative
 * values are arithmetic (as gcc and clang define them).
 *
 * Float path (define LMU_NO_FLOAT to leave it out): the same layers in float32.
 *
 * The Cortex-M kernels (DSP: Cortex-M4, M7, M33; Helium: Cortex-M55) are in lmu_kernels_arm.h, included
 * below only when the compiler targets such a core; define LMU_PORTABLE to use the portable loops there too.
 */
/* The runtime's version, 10000 * major + 100 * minor + patch of the lmu-edge that wrote it: every generated
 * <prefix>.c checks it, and a second copy of another version in one translation unit stops the build here
 * (the include guard below would otherwise keep the first copy silently). */
#if defined(LMU_RUNTIME_VERSION) && LMU_RUNTIME_VERSION != 100
#error                                                                                                                 \
    "lmu_runtime.h: two lmu-edge runtime versions in one build (this copy is 0.1.0, LMU_RUNTIME_VERSION 100): convert every model with one lmu-edge version, or build each model's kit on its own"
#endif
#ifndef LMU_RUNTIME_H
#define LMU_RUNTIME_H
#define LMU_RUNTIME_VERSION 100
#define LMU_RUNTIME_VERSION_STRING "0.1.0"

#include <stdint.h>
#include <string.h>
#ifndef LMU_NO_FLOAT
#include <math.h>
#endif

/* Kernel path, chosen at compile time from the ACLE feature macros. LMU_PATH_DSP is 1 on ARMv7E-M and
 * ARMv8-M Mainline with the DSP extension (Cortex-M4, M7, M33, M55); define LMU_PORTABLE to force the
 * portable C99 path everywhere. The paths read the same arrays in the same layout and compute the same
 * exact integers: only the instructions differ. */
#if !defined(LMU_PORTABLE) && defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
#define LMU_PATH_DSP 1
#else
#define LMU_PATH_DSP 0
#endif
/* The portable 16 x 16 dense memory adds 32-bit partial sums of the proven chunk of columns into 64 bits
 * where a 64-bit multiply-accumulate costs several instructions (ARMv6-M), or sums whole rows in 32 bits
 * where the code generator proved they fit (wrap32); elsewhere it accumulates the 32-bit products in 64
 * bits directly (SMLAL on ARMv7-M, one instruction on a 64-bit host). The same exact sums either way. */
#if defined(__ARM_ARCH_6M__) || defined(__ARM_ARCH_8M_BASE__)
#define LMU_SUM32_CHUNKS 1
#else
#define LMU_SUM32_CHUNKS 0
#endif
/* ARMv6-M (Cortex-M0 / M0+) in an optimized gcc or clang build: the 16 x 16 dense memory's 32-bit partial
 * sums run in a Thumb-1 assembly loop (lmu_v6m_dot2) instead of the compiler's, which spilled an
 * accumulator to the stack when the step grew. -DLMU_PORTABLE turns it off. */
#if !defined(LMU_PORTABLE) && LMU_SUM32_CHUNKS && defined(__OPTIMIZE__) && (defined(__GNUC__) || defined(__clang__))
#define LMU_PATH_V6M 1
#else
#define LMU_PATH_V6M 0
#endif
/* Helium (M-profile Vector Extension, integer part) on ARMv8.1-M cores such as the Cortex-M55: the int8
 * dense layers and the 16 x 16 dense memory use it first, the DSP path takes what it leaves. */
#if !defined(LMU_PORTABLE) && defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
#define LMU_PATH_MVE 1
#else
#define LMU_PATH_MVE 0
#endif

/* ------------------------------------------------------------------------------------------ */
/* integer helpers                                                                            */
/* Word alignment for the generated int16 arrays: the DSP kernels read them with LDRD, which needs it (they
 * check the address and take the portable loops when a compiler without the attribute left it unaligned). */
#if defined(__GNUC__) || defined(__clang__)
#define LMU_ALIGN4 __attribute__((aligned(4)))
#else
#define LMU_ALIGN4
#endif
/* Layer kernels the generated step calls with constant parameter structs: on the DSP and Helium paths they
 * are inlined at every call, so the compiler folds the sizes, zero points and branches of that layer and the
 * unrolled assembly gets its constants (optimized builds only). The portable ARMv6-M loops come out shorter
 * when gcc chooses (forced inlining measured 12% more instructions per step on the Cortex-M0), except for
 * the one-loop wrapper lmu_requant8_s16, which is always inlined: the step then compiles exactly as with
 * the loop written out (with gcc choosing, its ARMv6-M dense memory took 27% more instructions). */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__OPTIMIZE__)
#define LMU_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define LMU_ALWAYS_INLINE static inline
#endif
#if LMU_PATH_DSP || LMU_PATH_MVE || LMU_PATH_V6M
#define LMU_SPECIALIZE LMU_ALWAYS_INLINE
#else
#define LMU_SPECIALIZE static inline
#endif

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

/* The Cortex-M kernels (DSP and Helium) live in lmu_kernels_arm.h; each returns how much of its work it
 * did and leaves the rest to the portable loops here. Without either extension they do nothing, but for
 * ARMv6-M's int8 dot product. */
#if LMU_PATH_DSP || LMU_PATH_MVE
#include "lmu_kernels_arm.h"
#else
#if LMU_PATH_V6M
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
 * wraps cancel: the final value is the exact one on every path. lmu_qdot2_arm (lmu_kernels_arm.h) does
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
            if (y) {
                vstrbq_p_s32(y + j, a, pr);
            } else {
                vstrwq_p_s32(out + j, a, pr);
            }
        }
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
    if (zp == 0) { /* lmu_kernels_arm.h: SMLALD / VMLALDAVA for the first inputs */
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
    if (zp == 0) { /* lmu_kernels_arm.h: SMLALD / VMLALDAVA for the first inputs */
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

/* Part k's contribution to `rows` (1, 2 or 4, a constant) consecutive rows from j of an int16 layer with int8
 * weights and zero point 0: t_r += MBQM16([bias_(j+r) if k == 0] + sum_i x_i W[j + r, i]). Rows written out
 * (no arrays indexed by a variable), so the sums stay in registers. */
LMU_ALWAYS_INLINE void lmu_q16_part(const lmu_qlinear_t *L, const int16_t *x, int32_t k, int32_t j, int32_t rows,
                                    int64_t *t0, int64_t *t1, int64_t *t2, int64_t *t3) {
    const lmu_qpart_t *p = &L->parts[k];
    const int32_t n = p->n_in;
    const int8_t *w = p->w + j * n;
    const int32_t *b = (k == 0 && L->bias) ? L->bias + j : NULL;
    int32_t s[4] = {0, 0, 0, 0};
    if (n <= LMU_Q16_RUN) { /* one run: int32 sums, the bias added after the loop (no 64-bit sums in it) */
        lmu_qdot16_run(x, w, n, n, rows, s);
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
            lmu_qdot16_run(x + i0, w + i0, n, n - i0 < LMU_Q16_RUN ? n - i0 : LMU_Q16_RUN, rows, s);
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

/* `rows` (1, 2 or 4, a constant) rows from j of an int16 layer with int8 weights and zero point 0 (below) */
LMU_ALWAYS_INLINE void lmu_q16_block(const lmu_qlinear_t *L, const int16_t *const *in, int32_t j, int32_t rows,
                                     int32_t *out, int16_t *y) {
    int64_t t0 = L->out_zp, t1 = L->out_zp, t2 = L->out_zp, t3 = L->out_zp;
    int32_t k;
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

/* ------------------------------------------------------------------------------------------ */
/* fixed-point LMU memories, for each state storage type ST and coefficient type CT           */
/* ------------------------------------------------------------------------------------------ */

/* Products of a coefficient and a state value. When both have at most 16 bits the product fits int32,
 * so it is formed in 32 bits and only the sum is 64-bit: one MULS instead of a 64-bit multiply call on
 * ARMv6-M. Wider operands multiply in 64 bits. Both give the same exact product. */
#define LMU_PROD_NARROW(c, s) ((int64_t)((int32_t)(c) * (int32_t)(s)))
#define LMU_PROD_WIDE(c, s) ((int64_t)(c) * (int64_t)(s))

/* The constants of one dense LMU memory, written by the code generator as a const struct per layer with
 * designated initializers (the kernels below read it; inlined, gcc folds every field to a constant). */
#define LMU_DENSE_MEMORY_FIELDS(CT)                                                                                    \
    int32_t d;          /* channels (memory_d), each its own q-vector of the state */                                  \
    int32_t q;          /* order: C is q x q (row-major), B has q entries */                                           \
    const CT *C;        /* Abar (direct form) or Abar - I (delta form), coeff_frac fractional bits */                  \
    const int32_t *B;   /* Bbar, scaled so that B_i u_c has coeff_frac fractional bits of the state */                 \
    int32_t coeff_frac; /* the step is acc / 2^coeff_frac, rounded half up */                                          \
    int32_t delta;      /* 1: delta form, m_i += step; 0: direct form, m_i = step */                                   \
    int32_t bits;       /* the state saturates to a signed `bits`-bit range */                                         \
    int32_t chunk;      /* proven: any `chunk` consecutive columns of C m (aligned) sum within int32 */                \
    int32_t step32;     /* proven: every row's rounded step fits int32 (read by the Cortex-M kernels) */               \
    int32_t wrap32;     /* proven: every row's whole sum, rounding half included, fits int32 (see below) */
typedef struct {
    LMU_DENSE_MEMORY_FIELDS(int16_t)
} lmu_dense_memory_c16_t;
typedef struct {
    LMU_DENSE_MEMORY_FIELDS(int32_t)
} lmu_dense_memory_c32_t;

/* Dense memory, per channel c:  acc_i = B_i u_c + sum_j C_ij m_j  (exact),
 *   delta form:  m_i <- sat_bits(m_i + round_half_up(acc_i / 2^coeff_frac)),
 *   direct form: m_i <- sat_bits(round_half_up(acc_i / 2^coeff_frac)).
 * B_i u_c is formed in 64 bits. chunk: the code generator's proof (c_codegen.dense_chunk) that the sum of
 * any `chunk` consecutive columns (aligned at multiples of chunk) fits int32: for every row and chunk,
 * sum_j |C_ij| * 2^(bits-1) <= 2^31 - 1 (|m_j| <= 2^(bits-1)), a bound on every partial sum. chunk >= q:
 * the whole row sums in 32 bits; otherwise the generic kernels sum in 64 bits and the 16 x 16 kernel adds
 * 32-bit partial sums of chunk columns into 64 bits. Either way the sum is exact. Scratch: tmp holds q int64
 * (the new state is written after every row has read the old one). This generic kernel serves 8- and
 * 32-bit states and 32-bit coefficients on every core: the Cortex-M kernels cover only int16 x int16. */
#define LMU_DEFINE_DENSE_MEMORY(NAME, ST, CT, PT, PROD)                                                                \
    static inline void NAME(const PT *cfg, ST *m, const int32_t *u, int64_t *tmp) {                                    \
        const int32_t d = cfg->d, q = cfg->q, coeff_frac = cfg->coeff_frac, delta = cfg->delta, bits = cfg->bits;      \
        const CT *C = cfg->C;                                                                                          \
        const int32_t *B = cfg->B;                                                                                     \
        const int32_t acc32 = cfg->chunk >= q;                                                                         \
        int32_t c, i, j;                                                                                               \
        for (c = 0; c < d; ++c) {                                                                                      \
            ST *mc = m + c * q;                                                                                        \
            const int32_t uc = u[c];                                                                                   \
            for (i = 0; i < q; ++i) {                                                                                  \
                const CT *row = C + i * q;                                                                             \
                int64_t acc = (int64_t)B[i] * (int64_t)uc;                                                             \
                int64_t step;                                                                                          \
                if (acc32) {                                                                                           \
                    int32_t a32 = 0;                                                                                   \
                    for (j = 0; j < q; ++j) {                                                                          \
                        a32 += (int32_t)row[j] * (int32_t)mc[j];                                                       \
                    }                                                                                                  \
                    acc += a32;                                                                                        \
                } else {                                                                                               \
                    for (j = 0; j < q; ++j) {                                                                          \
                        acc += PROD(row[j], mc[j]);                                                                    \
                    }                                                                                                  \
                }                                                                                                      \
                step = lmu_shift_round(acc, coeff_frac);                                                               \
                tmp[i] = lmu_sat(delta ? (int64_t)mc[i] + step : step, bits);                                          \
            }                                                                                                          \
            for (i = 0; i < q; ++i) {                                                                                  \
                mc[i] = (ST)tmp[i];                                                                                    \
            }                                                                                                          \
        }                                                                                                              \
    }

#if LMU_PATH_V6M
/* ARMv6-M: *a0 = sum_j p0[j] pm[j], *a1 = sum_j p1[j] pm[j] over n >= 1 columns, each 32-bit sum proven to
 * fit by the caller's chunk. Per column 3 LDRSH (register offset, one shared index), 2 MULS, 2 ADD, then
 * ADDS / CMP / BNE: 10 instructions for 2 MACs, no stack traffic. The sums take ADD (no flags), which
 * reaches any register, so gcc may keep them high and the loop needs only six of the eight low registers:
 * it builds inside any step, at every optimization level that defines __OPTIMIZE__. */
static inline void lmu_v6m_dot2(const int16_t *pm, const int16_t *p0, const int16_t *p1, int32_t n, int32_t *a0,
                                int32_t *a1) {
    int32_t s0 = 0, s1 = 0, i = 0, x, c;
    const int32_t end = 2 * n;
    __asm__(".syntax unified\n" /* gcc hands Thumb-1 inline assembly over in divided syntax */
            "1:\n\t"
            "ldrsh %[x], [%[pm], %[i]]\n\t"
            "ldrsh %[c], [%[p0], %[i]]\n\t"
            "muls %[c], %[x], %[c]\n\t"
            "add %[s0], %[c]\n\t"
            "ldrsh %[c], [%[p1], %[i]]\n\t"
            "muls %[c], %[x], %[c]\n\t"
            "add %[s1], %[c]\n\t"
            "adds %[i], %[i], #2\n\t"
            "cmp %[i], %[end]\n\t"
            "bne 1b"
            : [s0] "+r"(s0), [s1] "+r"(s1), [i] "+l"(i), [x] "=&l"(x), [c] "=&l"(c)
            : [pm] "l"(pm), [p0] "l"(p0), [p1] "l"(p1), [end] "r"(end)
            : "cc", "memory");
    *a0 = s0;
    *a1 = s1;
}

/* ARMv6-M, three rows: *a0..*a2 = sum_j pk[j] pm[j] over n >= 2 columns, n even, each row's sum modulo
 * 2^32 (the wrap32 rows, whose end results the code generator proved to fit int32). Per column 4 LDRSH,
 * 3 MULS, 3 ADD and one ADDS (11 instructions for 3 MACs; lmu_v6m_dot2 takes 10 for 2), four columns per
 * pass, then CMP / BNE; a last pair of columns when n % 4 = 2. Seven low registers (the loads take
 * register offsets only) and four high ones, which ADD and CMP reach. */
#define LMU_V6M_COL3                                                                                                   \
    "ldrsh %[x], [%[pm], %[i]]\n\t"                                                                                    \
    "ldrsh %[c], [%[p0], %[i]]\n\t"                                                                                    \
    "muls %[c], %[x], %[c]\n\t"                                                                                        \
    "add %[s0], %[c]\n\t"                                                                                              \
    "ldrsh %[c], [%[p1], %[i]]\n\t"                                                                                    \
    "muls %[c], %[x], %[c]\n\t"                                                                                        \
    "add %[s1], %[c]\n\t"                                                                                              \
    "ldrsh %[c], [%[p2], %[i]]\n\t"                                                                                    \
    "muls %[c], %[x], %[c]\n\t"                                                                                        \
    "add %[s2], %[c]\n\t"                                                                                              \
    "adds %[i], %[i], #2\n\t"

static inline void lmu_v6m_dot3(const int16_t *pm, const int16_t *p0, int32_t q, int32_t n, int32_t *a0, int32_t *a1,
                                int32_t *a2) {
    /* the sums and the end in fixed high registers (local register variables: gcc places asm operands
     * there), which leaves gcc every low register for the rest at every optimization level */
    register int32_t s0 __asm__("r8") = 0;
    register int32_t s1 __asm__("r9") = 0;
    register int32_t s2 __asm__("r10") = 0;
    register int32_t end __asm__("r11") = 2 * (n - n % 4);
    int32_t i = 0, x, c;
    const int16_t *p1 = p0 + q, *p2 = p1 + q;
    if (end > 0) {
        __asm__(".syntax unified\n"
                "1:\n\t" LMU_V6M_COL3 LMU_V6M_COL3 LMU_V6M_COL3 LMU_V6M_COL3 "cmp %[i], %[end]\n\t"
                "bne 1b"
                : [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [i] "+l"(i), [x] "=&l"(x), [c] "=&l"(c)
                : [pm] "l"(pm), [p0] "l"(p0), [p1] "l"(p1), [p2] "l"(p2), [end] "r"(end)
                : "cc", "memory");
    }
    if (n % 4) {
        __asm__(".syntax unified\n\t" LMU_V6M_COL3 LMU_V6M_COL3
                : [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [i] "+l"(i), [x] "=&l"(x), [c] "=&l"(c)
                : [pm] "l"(pm), [p0] "l"(p0), [p1] "l"(p1), [p2] "l"(p2)
                : "cc", "memory");
    }
    *a0 = s0;
    *a1 = s1;
    *a2 = s2;
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
                for (j0 = 0; j0 < q; j0 += chunk) {
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

/* The constants of one Runge-Kutta-stepped memory (a const struct per layer, as for the dense memory). */
typedef struct {
    int32_t d;         /* channels (memory_d) */
    int32_t q;         /* order */
    const int32_t *hc; /* h (2i+1) / theta per row, hc_frac fractional bits */
    int32_t hc_frac;
    int32_t r;        /* Runge-Kutta order, 1..4 (the stages' Taylor weights 1/k! by Horner) */
    int32_t substeps; /* RK steps per input sample */
    int32_t u_shift;  /* u's fractional bits over the working value's: u is brought to its scale first */
    int32_t bits;     /* the state saturates to a signed `bits`-bit range */
    int32_t guard;    /* the substeps run on the state with this many more fractional bits */
} lmu_rk_memory_t;

/* Structured Runge-Kutta memory in integers (lmu_edge/qir.py QRKMemory): per channel and substep,
 *   w_1 = h A m + h B u, w_k = h A w_(k-1) (k = 2..r), m <- sat_bits(m + w_1 + w_2/2 + ... + w_r/r!),
 * with the LMU's A and B in O(q) from prefix sums (P: sum_(j<=i) m_j, T: sum_j m_j, S: sum_(j<=i) (-1)^j m_j):
 *   h (A m + B u)_i = hc_i (P - T + (-1)^i (u - S)),
 * so a step costs O(r q), not O(q^2). The substeps run on x = m << guard (saturated to bits + guard bits), and
 * m = sat_bits(round(x >> guard)) after the last: one rounding to the state's LSB per sample, not one per
 * substep (bits + guard is at most 32: x is int32). Every product and sum is int64 (hc below 2^31); each h A
 * product is rounded half up once. Scratch: w, r * q int64 (the stages), and x, q int32. */
#define LMU_DEFINE_RK_MEMORY(NAME, ST)                                                                                 \
    static inline void NAME(const lmu_rk_memory_t *cfg, ST *m, const int32_t *u, int64_t *w, int32_t *x) {             \
        static const int64_t inv16[5] = {0, 0, 32768, 21845, 16384};                                                   \
        const int32_t d = cfg->d, q = cfg->q, hc_frac = cfg->hc_frac, r = cfg->r, substeps = cfg->substeps;            \
        const int32_t u_shift = cfg->u_shift, bits = cfg->bits, guard = cfg->guard;                                    \
        const int32_t *hc = cfg->hc;                                                                                   \
        int32_t c, s, i, k;                                                                                            \
        for (c = 0; c < d; ++c) {                                                                                      \
            ST *mc = m + c * q;                                                                                        \
            const int64_t um = lmu_shift_round((int64_t)u[c], u_shift);                                                \
            for (i = 0; i < q; ++i) {                                                                                  \
                x[i] = (int32_t)lmu_shift_round((int64_t)mc[i], -guard);                                               \
            }                                                                                                          \
            for (s = 0; s < substeps; ++s) {                                                                           \
                int64_t P = 0, S = 0, T = 0;                                                                           \
                for (i = 0; i < q; ++i) {                                                                              \
                    T += x[i];                                                                                         \
                }                                                                                                      \
                for (i = 0; i < q; ++i) {                                                                              \
                    const int64_t alt = (i & 1) ? -1 : 1;                                                              \
                    P += x[i];                                                                                         \
                    S += alt * x[i];                                                                                   \
                    w[i] = lmu_shift_round((int64_t)hc[i] * (P - T + alt * (um - S)), hc_frac);                        \
                }                                                                                                      \
                for (k = 1; k < r; ++k) {                                                                              \
                    const int64_t *prev = w + (k - 1) * q;                                                             \
                    int64_t *cur = w + k * q;                                                                          \
                    P = 0;                                                                                             \
                    S = 0;                                                                                             \
                    T = 0;                                                                                             \
                    for (i = 0; i < q; ++i) {                                                                          \
                        T += prev[i];                                                                                  \
                    }                                                                                                  \
                    for (i = 0; i < q; ++i) {                                                                          \
                        const int64_t alt = (i & 1) ? -1 : 1;                                                          \
                        P += prev[i];                                                                                  \
                        S += alt * prev[i];                                                                            \
                        cur[i] = lmu_shift_round((int64_t)hc[i] * (P - T - alt * S), hc_frac);                         \
                    }                                                                                                  \
                }                                                                                                      \
                for (i = 0; i < q; ++i) {                                                                              \
                    int64_t acc = w[(r - 1) * q + i];                                                                  \
                    for (k = r - 1; k >= 1; --k) {                                                                     \
                        acc = w[(k - 1) * q + i] + lmu_shift_round(acc * inv16[k + 1], 16);                            \
                    }                                                                                                  \
                    x[i] = (int32_t)lmu_sat((int64_t)x[i] + acc, bits + guard);                                        \
                }                                                                                                      \
            }                                                                                                          \
            for (i = 0; i < q; ++i) {                                                                                  \
                mc[i] = (ST)lmu_sat(lmu_shift_round(x[i], guard), bits);                                               \
            }                                                                                                          \
        }                                                                                                              \
    }

/* The constants of one FIR memory (a const struct per layer). */
#define LMU_FIR_MEMORY_FIELDS(CT)                                                                                      \
    int32_t d;     /* channels (memory_d) */                                                                           \
    int32_t q;     /* order: K has q rows */                                                                           \
    const CT *K;   /* the truncated impulse response, q x L (row-major), newest tap first */                           \
    int32_t L;     /* taps, the ring buffer's length per channel */                                                    \
    int32_t shift; /* fractional bits of K and u over the state's: m_i = round(acc / 2^shift) */                       \
    int32_t bits;  /* the state saturates to a signed `bits`-bit range */
typedef struct {
    LMU_FIR_MEMORY_FIELDS(int16_t)
} lmu_fir_memory_c16_t;
typedef struct {
    LMU_FIR_MEMORY_FIELDS(int32_t)
} lmu_fir_memory_c32_t;

/* One row of the 16 x 16 FIR memory: sum_k w_k b_((p - k) mod L), k = 0..L-1 (taps newest first, the ring
 * buffer read backwards from its newest entry p), exact in 64 bits (each product is below 2^30 in magnitude).
 * DSP path: the ring splits into two runs of positions, p down to 0 and then L - 1 down to p + 1; in each, a
 * word of two taps (w_k, w_(k+1)) meets the buffer word one position back, (b_(j-1), b_j), and SMLALDX
 * exchanges the halves: w_k b_j + w_(k+1) b_(j-1), two MACs per instruction (the buffer word may be unaligned:
 * ARMv7-M and ARMv8-M Mainline load it with LDR). An odd run ends with one product. The portable loop walks
 * the ring one tap at a time. The same exact sum either way. */
static inline int64_t lmu_fir_row16(const int16_t *w, const int16_t *b, int32_t p, int32_t L) {
    int64_t acc = 0;
#if LMU_PATH_DSP
    int32_t run;
    for (run = 0; run < 2; ++run) {
        const int32_t n = run == 0 ? p + 1 : L - 1 - p; /* taps in this run */
        const int16_t *pb = b + (run == 0 ? p : L - 1); /* the run's first (highest) position */
        int32_t t;
        for (t = 0; t + 2 <= n; t += 2, w += 2, pb -= 2) {
            acc = __smlaldx((int16x2_t)lmu_ld32(w), (int16x2_t)lmu_ld32(pb - 1), acc);
        }
        if (t < n) {
            acc += (int32_t)*w++ * *pb;
        }
    }
#else
    int32_t k, pos = p;
    for (k = 0; k < L; ++k) {
        acc += (int32_t)w[k] * b[pos];
        pos = pos == 0 ? L - 1 : pos - 1;
    }
#endif
    return acc;
}

/* FIR memory (the impulse response itself, no recurrence): per channel c, u_c enters a ring buffer of the
 * last L inputs (buf, L per channel; *head the newest), and m_i = sat_bits(round_half_up(
 * sum_k K_ik u_(t-k) / 2^shift)), summed exactly in int64. No scratch beyond buf and head (the state). */
#define LMU_DEFINE_FIR_MEMORY(NAME, ST, CT, PT, PROD)                                                                  \
    static inline void NAME(const PT *cfg, ST *m, const int32_t *u, ST *buf, int32_t *head) {                          \
        const int32_t d = cfg->d, q = cfg->q, L = cfg->L, shift = cfg->shift, bits = cfg->bits;                        \
        const CT *K = cfg->K;                                                                                          \
        int32_t c, i, k;                                                                                               \
        *head = (*head + 1) % L;                                                                                       \
        for (c = 0; c < d; ++c) {                                                                                      \
            ST *bc = buf + c * L;                                                                                      \
            bc[*head] = (ST)u[c];                                                                                      \
            for (i = 0; i < q; ++i) {                                                                                  \
                const CT *row = K + i * L;                                                                             \
                int64_t acc = 0;                                                                                       \
                int32_t pos = *head;                                                                                   \
                if (sizeof(ST) == 2 && sizeof(CT) == 2) { /* 16 x 16: lmu_fir_row16 (the DSP kernel there) */          \
                    acc =                                                                                              \
                        lmu_fir_row16((const int16_t *)(const void *)row, (const int16_t *)(const void *)bc, pos, L);  \
                } else {                                                                                               \
                    for (k = 0; k < L; ++k) {                                                                          \
                        acc += PROD(row[k], bc[pos]);                                                                  \
                        pos = pos == 0 ? L - 1 : pos - 1;                                                              \
                    }                                                                                                  \
                }                                                                                                      \
                m[c * q + i] = (ST)lmu_sat(lmu_shift_round(acc, shift), bits);                                         \
            }                                                                                                          \
        }                                                                                                              \
    }

LMU_DEFINE_DENSE_MEMORY(lmu_dense_memory_s8_c16, int8_t, int16_t, lmu_dense_memory_c16_t, LMU_PROD_NARROW)
LMU_DEFINE_DENSE_MEMORY(lmu_dense_memory_s8_c32, int8_t, int32_t, lmu_dense_memory_c32_t, LMU_PROD_WIDE)
LMU_DEFINE_DENSE_MEMORY(lmu_dense_memory_s16_c32, int16_t, int32_t, lmu_dense_memory_c32_t, LMU_PROD_WIDE)
LMU_DEFINE_DENSE_MEMORY(lmu_dense_memory_s32_c16, int32_t, int16_t, lmu_dense_memory_c16_t, LMU_PROD_WIDE)
LMU_DEFINE_DENSE_MEMORY(lmu_dense_memory_s32_c32, int32_t, int32_t, lmu_dense_memory_c32_t, LMU_PROD_WIDE)
LMU_DEFINE_RK_MEMORY(lmu_rk_memory_s8, int8_t)
LMU_DEFINE_RK_MEMORY(lmu_rk_memory_s16, int16_t)
LMU_DEFINE_RK_MEMORY(lmu_rk_memory_s32, int32_t)
LMU_DEFINE_FIR_MEMORY(lmu_fir_memory_s8_c16, int8_t, int16_t, lmu_fir_memory_c16_t, LMU_PROD_NARROW)
LMU_DEFINE_FIR_MEMORY(lmu_fir_memory_s8_c32, int8_t, int32_t, lmu_fir_memory_c32_t, LMU_PROD_WIDE)
LMU_DEFINE_FIR_MEMORY(lmu_fir_memory_s16_c16, int16_t, int16_t, lmu_fir_memory_c16_t, LMU_PROD_NARROW)
LMU_DEFINE_FIR_MEMORY(lmu_fir_memory_s16_c32, int16_t, int32_t, lmu_fir_memory_c32_t, LMU_PROD_WIDE)
LMU_DEFINE_FIR_MEMORY(lmu_fir_memory_s32_c16, int32_t, int16_t, lmu_fir_memory_c16_t, LMU_PROD_WIDE)
LMU_DEFINE_FIR_MEMORY(lmu_fir_memory_s32_c32, int32_t, int32_t, lmu_fir_memory_c32_t, LMU_PROD_WIDE)

/* ------------------------------------------------------------------------------------------ */
/* float32 path                                                                               */
/* ------------------------------------------------------------------------------------------ */
#ifndef LMU_NO_FLOAT

enum { LMU_LINEAR = 0, LMU_RELU, LMU_RELU6, LMU_TANH, LMU_SIGMOID, LMU_SOFTMAX, LMU_SILU };

static inline void lmu_f_activation(int32_t act, float *y, int32_t n) {
    int32_t i;
    float mx, sum;
    switch (act) {
    case LMU_RELU:
        for (i = 0; i < n; ++i)
            y[i] = y[i] > 0.0f ? y[i] : 0.0f;
        break;
    case LMU_RELU6:
        for (i = 0; i < n; ++i)
            y[i] = y[i] < 0.0f ? 0.0f : (y[i] > 6.0f ? 6.0f : y[i]);
        break;
    case LMU_TANH:
        for (i = 0; i < n; ++i)
            y[i] = tanhf(y[i]);
        break;
    case LMU_SIGMOID:
        for (i = 0; i < n; ++i)
            y[i] = 1.0f / (1.0f + expf(-y[i]));
        break;
    case LMU_SILU:
        for (i = 0; i < n; ++i)
            y[i] = y[i] / (1.0f + expf(-y[i]));
        break;
    case LMU_SOFTMAX:
        mx = y[0];
        for (i = 1; i < n; ++i)
            mx = y[i] > mx ? y[i] : mx;
        sum = 0.0f;
        for (i = 0; i < n; ++i) {
            y[i] = expf(y[i] - mx);
            sum += y[i];
        }
        for (i = 0; i < n; ++i)
            y[i] /= sum;
        break;
    default:
        break;
    }
}

/* y = x @ W (+ y when accumulate), W given transposed: (n_out, n_in) */
static inline void lmu_f_matvec(const float *W, const float *x, float *y, int32_t n_in, int32_t n_out,
                                int32_t accumulate) {
    int32_t j, i;
    for (j = 0; j < n_out; ++j) {
        const float *w = W + j * n_in;
        float acc = accumulate ? y[j] : 0.0f;
        for (i = 0; i < n_in; ++i) {
            acc += w[i] * x[i];
        }
        y[j] = acc;
    }
}

static inline void lmu_f_add_bias(float *y, const float *b, int32_t n) {
    int32_t i;
    if (b) {
        for (i = 0; i < n; ++i)
            y[i] += b[i];
    }
}

/* m = Abar m + Bbar u per channel; tmp has q floats */
static inline void lmu_f_dense_memory(float *m, const float *u, int32_t d, int32_t q, const float *A, const float *B,
                                      float *tmp) {
    int32_t c, i, j;
    for (c = 0; c < d; ++c) {
        float *mc = m + c * q;
        for (i = 0; i < q; ++i) {
            float acc = 0.0f;
            for (j = 0; j < q; ++j)
                acc += A[i * q + j] * mc[j];
            tmp[i] = acc + B[i] * u[c];
        }
        memcpy(mc, tmp, sizeof(float) * (size_t)q);
    }
}

/* structured RK (Taylor / Horner form, see lmu_edge/lti.py); hc = c_i / substeps; w has r*q floats */
static inline void lmu_f_rk_memory(float *m, const float *u, int32_t d, int32_t q, const float *hc, int32_t r,
                                   int32_t substeps, float *w) {
    static const float inv[5] = {0.0f, 1.0f, 0.5f, 1.0f / 3.0f, 0.25f};
    int32_t c, s, i, k;
    for (c = 0; c < d; ++c) {
        float *mc = m + c * q;
        for (s = 0; s < substeps; ++s) {
            float P = 0.0f, S = 0.0f, T = 0.0f;
            for (i = 0; i < q; ++i)
                T += mc[i];
            for (i = 0; i < q; ++i) {
                const float alt = (i & 1) ? -1.0f : 1.0f;
                P += mc[i];
                S += alt * mc[i];
                w[i] = hc[i] * (P - T + alt * (u[c] - S));
            }
            for (k = 1; k < r; ++k) {
                const float *prev = w + (k - 1) * q;
                float *cur = w + k * q;
                P = 0.0f;
                S = 0.0f;
                T = 0.0f;
                for (i = 0; i < q; ++i)
                    T += prev[i];
                for (i = 0; i < q; ++i) {
                    const float alt = (i & 1) ? -1.0f : 1.0f;
                    P += prev[i];
                    S += alt * prev[i];
                    cur[i] = hc[i] * (P - T - alt * S);
                }
            }
            for (i = 0; i < q; ++i) {
                float acc = w[(r - 1) * q + i];
                for (k = r - 1; k >= 1; --k)
                    acc = w[(k - 1) * q + i] + acc * inv[k + 1];
                mc[i] += acc;
            }
        }
    }
}

static inline void lmu_f_fir_memory(float *m, const float *u, int32_t d, int32_t q, const float *K, int32_t L,
                                    float *buf, int32_t *head) {
    int32_t c, i, k;
    *head = (*head + 1) % L;
    for (c = 0; c < d; ++c) {
        float *bc = buf + c * L;
        bc[*head] = u[c];
        for (i = 0; i < q; ++i) {
            const float *row = K + i * L;
            float acc = 0.0f;
            int32_t pos = *head;
            for (k = 0; k < L; ++k) {
                acc += row[k] * bc[pos];
                pos = pos == 0 ? L - 1 : pos - 1;
            }
            m[c * q + i] = acc;
        }
    }
}

static inline void lmu_f_pool(float *sum, int32_t *count, const float *x, float *y, int32_t n) {
    int32_t i;
    *count += 1;
    for (i = 0; i < n; ++i) {
        sum[i] += x[i];
        y[i] = sum[i] / (float)(*count);
    }
}

#endif /* LMU_NO_FLOAT */
#endif /* LMU_RUNTIME_H */
