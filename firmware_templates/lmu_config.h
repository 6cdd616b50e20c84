/*
 * lmu_config.h -- the lmu-edge runtime's configuration: the kernel path chosen from the ACLE
 * feature macros (portable, DSP, Helium, ARMv6-M), the compiler macros every family uses (alignment, inlining),
 * and the Cortex-M primitives the DSP kernels share (an unaligned word load, SMLAL, SXTB16 ROR #8). Part of
 * lmu_runtime.h, which includes every family header; each family header includes this one first.
 */
#ifndef LMU_CONFIG_H
#define LMU_CONFIG_H

#include <stdint.h>
#include <string.h>
#ifndef LMU_NO_FLOAT
#include <math.h>
#endif

/* Kernel path, chosen at compile time from the ACLE feature macros. LMU_PATH_DSP is 1 on ARMv7E-M and
 * ARMv8-M Mainline with the DSP extension (Cortex-M4, M7, M33, M55); define LMU_PORTABLE to force the
 * portable C99 path everywhere. The paths read the same arrays in the same layout (but LMU_WX, below: the
 * same integers in a second layout) and compute the same exact integers: only the instructions differ. */
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

/* Expanded weights (LMU_WX) on DSP cores without Helium (Cortex-M4, M7, M33): the int8 weights of a layer with
 * 16-bit activations are stored as halfwords in blocks of 4 rows x 4 columns, so its dense rows load four
 * weights of two rows with one LDM and feed SMLAD directly (0.8 instructions per MAC against 1.6 with SXTB16 on
 * the int8 array). That doubles those layers' weight flash: define LMU_COMPACT_WEIGHTS to keep the int8 arrays
 * (--device leaves them out where they would take the model past half its flash). Helium reads
 * int8 weights at full speed (VLDRB.S16) and ARMv6-M gains nothing from halfwords, so they keep the int8 arrays.
 * The values are the same int8 integers in either layout: the results are identical (docs/firmware.md). Its
 * kernels are naked functions (GNU C: gcc and clang); other compilers keep the int8 arrays. */
#if LMU_PATH_DSP && !LMU_PATH_MVE && !defined(LMU_COMPACT_WEIGHTS) && (defined(__GNUC__) || defined(__clang__))
#define LMU_WX 1
#else
#define LMU_WX 0
#endif

/* The DSP and Helium kernels of every family: each does the part of a loop its instructions do well and
 * returns where it stopped; the portable loop beside it finishes. They read the same arrays as the portable
 * loops (LMU_WX: the same weights as halfwords) and compute the same exact integers (the proofs are beside
 * each kernel), so one model.c gives the same outputs and state on every core. */
#define LMU_PATH_ARM (LMU_PATH_DSP || LMU_PATH_MVE)

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

#if LMU_PATH_ARM /* the DSP and Helium kernels */
#if LMU_PATH_DSP
#include <arm_acle.h>
#endif
#if LMU_PATH_MVE
#include <arm_mve.h>
/* Before a predicated Helium store (VSTRxT under VPST): gcc 12 treats vstrbq_p / vstrhq_p / vstrwq_p as if they
 * stored every lane, so its dead-store elimination dropped earlier stores to the lanes the predicate leaves
 * off (a layer's last partial block: the int32 past its last output, found by a canary under QEMU). A compiler
 * barrier keeps them: no instruction. */
#define LMU_MVE_STORE_FENCE() __asm__ volatile("" ::: "memory")
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
#endif

#endif /* LMU_CONFIG_H */
