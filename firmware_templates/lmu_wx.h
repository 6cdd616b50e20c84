/*
 * lmu_wx.h -- the dense rows of expanded weights (LMU_WX, lmu_config.h) on DSP cores without Helium (Cortex-M4,
 * M7, M33): the int8 weights of a dense layer stored as halfwords in blocks of 4 rows x 4 columns, read four
 * pairs at a time by LDM and fed to SMLAD without SXTB16. lmu_wx_run (16-bit inputs, lmu_int16.h's layers) and
 * lmu_wx8_block (8-bit inputs, lmu_qlinear.h's), each around a naked assembly function. Part of lmu_runtime.h.
 */
#ifndef LMU_WX_H
#define LMU_WX_H

#include "lmu_config.h"

#if LMU_WX
#define LMU_UNUSED __attribute__((unused)) /* a naked function's parameters are read by its assembly only */

/* The two naked functions' shared assembly: entry (r0 x, r1 weights, r2 groups -> the end of x, r3 the sums,
 * loaded into r4-r7; SHIFT: log2 of a group's input bytes), the four rows of one group (two LDM of four weight
 * pairs, eight SMLAD against the input pairs in lr and r3), an odd group first, then pairs of groups, exit */
#define LMU_WX_ENTER(SHIFT)                                                                                            \
    "push {r3, r4, r5, r6, r7, r8, r9, r10, r11, lr}\n\t"                                                              \
    "ldm r3, {r4, r5, r6, r7}\n\t"                                                                                     \
    "lsls r12, r2, #31\n\t"                                                                                            \
    "add r2, r0, r2, lsl #" SHIFT "\n\t"                                                                               \
    "beq 2f\n\t"
#define LMU_WX_ROWS                                                                                                    \
    "ldm r1!, {r8, r10, r11, r12}\n\t"                                                                                 \
    "smlad r4, r8, lr, r4\n\t"                                                                                         \
    "smlad r4, r10, r3, r4\n\t"                                                                                        \
    "smlad r5, r11, lr, r5\n\t"                                                                                        \
    "smlad r5, r12, r3, r5\n\t"                                                                                        \
    "ldm r1!, {r8, r10, r11, r12}\n\t"                                                                                 \
    "smlad r6, r8, lr, r6\n\t"                                                                                         \
    "smlad r6, r10, r3, r6\n\t"                                                                                        \
    "smlad r7, r11, lr, r7\n\t"                                                                                        \
    "smlad r7, r12, r3, r7\n\t"
#define LMU_WX_PAIRS(GROUP)                                                                                            \
    GROUP LMU_WX_ROWS "2:\n\t"                                                                                         \
                      "cmp r0, r2\n\t"                                                                                 \
                      "beq 3f\n"                                                                                       \
                      "1:\n\t" GROUP LMU_WX_ROWS GROUP LMU_WX_ROWS "cmp r0, r2\n\t"                                    \
                      "bne 1b\n"                                                                                       \
                      "3:\n\t"                                                                                         \
                      "ldr r3, [sp]\n\t"                                                                               \
                      "stm r3, {r4, r5, r6, r7}\n\t"                                                                   \
                      "pop {r3, r4, r5, r6, r7, r8, r9, r10, r11, pc}"
/* a group's four int16 inputs as (x0, x1) and (x2, x3); four int8 ones as (x0, x2) and (x1, x3) (SXTB16) */
#define LMU_WX_X16 "ldrd lr, r3, [r0], #8\n\t"
#define LMU_WX_X8                                                                                                      \
    "ldr r3, [r0], #4\n\t"                                                                                             \
    "sxtb16 lr, r3\n\t"                                                                                                \
    "sxtb16 r3, r3, ror #8\n\t"

/* Expanded weights of a 16-bit layer (LMU_WX, lmu_config.h): part k's int8 weights as halfwords, blocks of 4 rows (j = 4b .. 4b + 3)
 * by 4 columns (i = 4g .. 4g + 3), rows past n_out and columns past n_in zero. Block b, group g starts at
 * wx + (b G + g) 16 with G = ceil(n_in / 4), row j's four weights at + 4 (j - 4b), in column order.
 *
 * lmu_wx_groups(x, w, groups, s): s[r] += sum over 4 groups columns from x of x_i w_r,i for the four rows of
 * one block, from the block's group at w (x word-aligned). Per group of 16 MACs: LDRD of four inputs, two LDM
 * of four weight pairs each, eight SMLAD; two groups per pass, then CMP and BNE (24 instructions per 32 MACs),
 * an odd group first. Each product is at most 2^22 in magnitude and a run (LMU_Q16_RUN) at most 256 inputs,
 * so every partial sum is exact in int32 and the order of the additions does not matter: the portable loop's
 * integers. A naked function (its registers chosen here, saved and restored here; r9, the platform register,
 * untouched), so no inlining can leave its assembly without registers. Arguments per AAPCS in r0-r3. */
__attribute__((naked, noinline)) static void lmu_wx_groups(const int16_t *x LMU_UNUSED, const int16_t *w LMU_UNUSED,
                                                           int32_t groups LMU_UNUSED, int32_t *s LMU_UNUSED) {
    __asm__(LMU_WX_ENTER("3") LMU_WX_PAIRS(LMU_WX_X16));
}

/* s[r] += sum_(i < len) x_i W[4b + r, i0 + i] for the four rows of block b, w = its group at i0 (i0 a multiple of
 * 4, len <= LMU_Q16_RUN): lmu_wx_groups for the whole groups where x is word-aligned (LDRD), a loop for the
 * rest and for the last len % 4 columns (their padding never read). Exact int32 sums, as lmu_qdot16_run's. */
static inline void lmu_wx_run(const int16_t *x, const int16_t *w, int32_t len, int32_t *s) {
    const int32_t groups = len / 4, fast = ((uintptr_t)x & 3u) ? 0 : groups;
    int32_t g, r, c;
    if (fast > 0) {
        lmu_wx_groups(x, w, fast, s);
    }
    x += 4 * fast;
    w += 16 * fast;
    for (g = fast; g < groups; ++g, x += 4, w += 16) {
        for (r = 0; r < 4; ++r) {
            s[r] += x[0] * w[4 * r] + x[1] * w[4 * r + 1] + x[2] * w[4 * r + 2] + x[3] * w[4 * r + 3];
        }
    }
    for (c = 0; c < len % 4; ++c) {
        for (r = 0; r < 4; ++r) {
            s[r] += x[c] * w[4 * r + c];
        }
    }
}

/* Expanded weights of an int8 layer (LMU_WX, lmu_config.h; the 16-bit layers' layout above, blocks of 4 rows by 4
 * columns, with the columns of each group stored in the order 0, 2, 1, 3 so that each row's two LDM words are
 * (w0, w2) and (w1, w3), the pairs SXTB16 makes of the inputs). lmu_wx8_groups(x, w, groups, s): s[r] += sum
 * over 4 groups int8 inputs x_i w_r,i for the four rows of one block, from the block's group at w, modulo 2^32
 * (the int8 dot product's contract, lmu_qlinear.h). Per group of 16 MACs: one LDR of four inputs, SXTB16 and SXTB16
 * ROR #8, two LDM of four weight pairs each and eight SMLAD; two groups per pass, then CMP and BNE (28
 * instructions per 32 MACs, against 46 for lmu_qdot4_arm), an odd group first. A naked function, as
 * lmu_wx_groups above. */
__attribute__((naked, noinline)) static void lmu_wx8_groups(const int8_t *x LMU_UNUSED, const int16_t *w LMU_UNUSED,
                                                            int32_t groups LMU_UNUSED, int32_t *s LMU_UNUSED) {
    __asm__(LMU_WX_ENTER("2") LMU_WX_PAIRS(LMU_WX_X8));
}

/* a[r] += sum_(i < n) x_i W[4b + r, i] (modulo 2^32) for the four rows of block b of an int8 layer's part with
 * expanded weights, w = the block's first group: lmu_wx8_groups for the whole groups, a loop for n % 4 */
static inline void lmu_wx8_block(const int8_t *x, const int16_t *w, int32_t n, int32_t *a) {
    static const uint8_t col[4] = {0, 2, 1, 3}; /* column c of a group at position col[c] */
    uint32_t s[4];
    int32_t r, i;
    if (n >= 4) {
        lmu_wx8_groups(x, w, n / 4, a);
    }
    for (r = 0; r < 4; ++r) {
        s[r] = (uint32_t)a[r];
    }
    for (i = n - n % 4; i < n; ++i) {
        const int16_t *g = w + (i / 4) * 16 + col[i % 4];
        for (r = 0; r < 4; ++r) {
            s[r] += (uint32_t)((int32_t)x[i] * (int32_t)g[4 * r]);
        }
    }
    for (r = 0; r < 4; ++r) {
        a[r] = (int32_t)s[r];
    }
}
#endif

#endif /* LMU_WX_H */
