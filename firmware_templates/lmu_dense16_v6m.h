/*
 * lmu_dense16_v6m.h -- the ARMv6-M (Cortex-M0 / M0+) row sums of the 16 x 16 dense memory (lmu_dense16.h): the
 * Thumb-1 loops of two and three rows in 32-bit sums (lmu_v6m_dot2 / dot3: the proven chunks and the wrap32
 * rows) and the two rows of a state sized by its calibration data, every chunk in one call
 * (lmu_v6m_rows2_chunks). Empty elsewhere. Part of lmu_runtime.h.
 */
#ifndef LMU_DENSE16_V6M_H
#define LMU_DENSE16_V6M_H

#include "lmu_config.h"

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

#if LMU_PATH_V6M
/* ARMv6-M, two rows in proven chunks (a state sized by its calibration data: no wrap32): lmu_v6m_rows2_chunks(a)
 * sums rows p0 and p1 against the state pm over the ebytes / 2 columns, each chunk of cbytes / 2 columns in 32
 * bits (exact: c_codegen.dense_chunk), and adds each chunk's sum s into L += s & 0xFFFF and H += s >> 16
 * (a[5..8]: L0, H0, L1, H1, no carries: both stay within int32 for fewer than 2^15 chunks), so the row's exact
 * sum is H 2^16 + L. Per column 3 LDRSH, 2 MULS, 2 ADD, ADDS, CMP, BNE (10 for 2 MACs, as lmu_v6m_dot2); per
 * chunk 22 for both rows, all in registers (the chunk sums and L, H in r8-r12 and lr, which ADD reaches): the
 * 64-bit additions of the chunk loop in C cost more than the chunk's products. A naked function (its
 * registers saved and restored here), so no surrounding code can leave it without registers. a: pm, p0, p1,
 * cbytes, ebytes, then the four sums. */
#define LMU_UNUSED6 __attribute__((unused)) /* read by the assembly only */
__attribute__((naked, noinline)) static void lmu_v6m_rows2_chunks(int32_t *a LMU_UNUSED6) {
    __asm__(".syntax unified\n\t"
            "push {r4, r5, r6, r7, lr}\n\t"
            "mov r4, r8\n\t"
            "mov r5, r9\n\t"
            "mov r6, r10\n\t"
            "mov r7, r11\n\t"
            "push {r4, r5, r6, r7}\n\t"
            "mov r7, r0\n\t"
            "ldm r0!, {r4, r5, r6}\n\t" /* pm, p0, p1 */
            "mov r0, r4\n\t"
            "mov r1, r5\n\t"
            "mov r2, r6\n\t"
            "movs r3, #0\n\t"
            "mov r8, r3\n\t"
            "mov r9, r3\n\t"
            "mov r10, r3\n\t"
            "mov r11, r3\n\t"
            "mov r12, r3\n\t"
            "mov lr, r3\n"
            "1:\n\t"
            "ldr r6, [r7, #12]\n\t" /* the chunk's end: i + cbytes, at most ebytes */
            "adds r6, r6, r3\n\t"
            "ldr r5, [r7, #16]\n\t"
            "cmp r6, r5\n\t"
            "ble 2f\n\t"
            "mov r6, r5\n"
            "2:\n\t"
            "ldrsh r4, [r0, r3]\n\t"
            "ldrsh r5, [r1, r3]\n\t"
            "muls r5, r4, r5\n\t"
            "add r8, r5\n\t"
            "ldrsh r5, [r2, r3]\n\t"
            "muls r5, r4, r5\n\t"
            "add r9, r5\n\t"
            "adds r3, r3, #2\n\t"
            "cmp r3, r6\n\t"
            "bne 2b\n\t"
            "mov r4, r8\n\t" /* row 0's chunk sum into L0 and H0 */
            "uxth r5, r4\n\t"
            "add r10, r5\n\t"
            "asrs r4, r4, #16\n\t"
            "add r11, r4\n\t"
            "mov r4, r9\n\t" /* row 1's into L1 and H1 */
            "uxth r5, r4\n\t"
            "add r12, r5\n\t"
            "asrs r4, r4, #16\n\t"
            "add lr, r4\n\t"
            "movs r4, #0\n\t"
            "mov r8, r4\n\t"
            "mov r9, r4\n\t"
            "ldr r5, [r7, #16]\n\t"
            "cmp r3, r5\n\t"
            "bne 1b\n\t"
            "mov r4, r10\n\t"
            "str r4, [r7, #20]\n\t"
            "mov r4, r11\n\t"
            "str r4, [r7, #24]\n\t"
            "mov r4, r12\n\t"
            "str r4, [r7, #28]\n\t"
            "mov r4, lr\n\t"
            "str r4, [r7, #32]\n\t"
            "pop {r4, r5, r6, r7}\n\t"
            "mov r8, r4\n\t"
            "mov r9, r5\n\t"
            "mov r10, r6\n\t"
            "mov r11, r7\n\t"
            "pop {r4, r5, r6, r7, pc}");
}
#endif

#endif /* LMU_DENSE16_V6M_H */
