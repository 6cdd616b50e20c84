/*
 * lmu_memory.h -- the fixed-point LMU memories for each state storage type and
 * coefficient type: the generic dense memory (every core), the structured Runge-Kutta memory and the FIR
 * ring buffer (its 16 x 16 rows in SMLAD on DSP cores). The 16 x 16 dense memory, the quantizer's default,
 * has its own kernels in lmu_dense16.h. Part of lmu_runtime.h.
 */
#ifndef LMU_MEMORY_H
#define LMU_MEMORY_H

#include "lmu_config.h"
#include "lmu_fixedpoint.h"

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

#endif /* LMU_MEMORY_H */
