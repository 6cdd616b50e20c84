/*
 * lmu_dense16_blocks.h -- the Cortex-M building blocks of the 16 x 16 dense memory
 * (lmu_dense16.h): rows of C times the state in DSP assembly (two, three or four rows per pass, SMLALD /
 * SMLAD) and in Helium (VMLALDAVA / VMLADAVA, up to eight rows), and the row finish they share. Empty on the
 * portable and ARMv6-M paths, whose loops are in lmu_dense16.h. Part of lmu_runtime.h.
 */
#ifndef LMU_DENSE16_BLOCKS_H
#define LMU_DENSE16_BLOCKS_H

#include "lmu_config.h"
#include "lmu_fixedpoint.h"

#if LMU_PATH_ARM /* the DSP and Helium kernels */
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
#endif

#endif /* LMU_DENSE16_BLOCKS_H */
