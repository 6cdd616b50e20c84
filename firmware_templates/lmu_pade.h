/*
 * lmu_pade.h -- the implicit Pade realization of the LMU memory in integers: header-only C99,
 * static inline, no malloc, no globals, no floating point.
 *
 * One sample is `substeps` substeps of r(hA) on the input-augmented system, r the [num/den] Pade
 * approximant of exp in partial fractions: per kept pole (one of each conjugate pair) one O(q) complex
 * solve of (I - cA) x = b by forward substitution with running sums over the even and the odd indices,
 * plus a Sherman-Morrison correction with a precomputed vector w. Mirrors lmu_edge/intsim.py
 * (pade_memory_int) bit for bit; every product's operands are bounded by the quantizer so that it fits
 * in int64. Rounding is "half_up" ((x + 2^(s-1)) >> s); right shifts of negative values are arithmetic
 * (as gcc and clang define them).
 */
#ifndef LMU_PADE_H
#define LMU_PADE_H

#include <stdint.h>

typedef struct {
    int32_t poles; /* kept poles P */
    int32_t substeps;
    int32_t guard;     /* work fraction - state fraction (negative: fewer bits) */
    int32_t u_shift;   /* u fraction - work fraction */
    const int32_t *gc; /* (P, 2): 2c/theta, gc_frac fractional bits */
    int32_t gc_frac;
    const int32_t *w; /* (P, q, 2): Sherman-Morrison vectors, w_frac fractional bits */
    int32_t w_frac;
    const int32_t *inv; /* (P, 2): 1 / (1 + sum w), inv_frac fractional bits */
    int32_t inv_frac;
    const int32_t *coef; /* (P, 2): output weights (doubled for a conjugate pair), coef_frac bits */
    int32_t coef_frac;
    int32_t k; /* polynomial part, k_frac fractional bits (0 below the diagonal) */
    int32_t k_frac;
} lmu_pade_t;

/* x / 2^s rounded half up; s <= 0 is an exact left shift */
static inline int64_t lmu_pade_rnd(int64_t x, int32_t s) {
    if (s <= 0) {
        return (int64_t)((uint64_t)x << (-s));
    }
    return (x + ((int64_t)1 << (s - 1))) >> s;
}

static inline int64_t lmu_pade_sat(int64_t v, int32_t bits) {
    const int64_t hi = ((int64_t)1 << (bits - 1)) - 1;
    return v < -hi - 1 ? -hi - 1 : (v > hi ? hi : v);
}

/* One sample for d channels of order q; `work` holds 4*q int64 (caller-owned scratch). */
#define LMU_DEFINE_PADE_MEMORY(NAME, ST)                                                                               \
    static inline void NAME(ST *m, const int32_t *u, int32_t d, int32_t q, const lmu_pade_t *p, int32_t bits,          \
                            int64_t *work) {                                                                           \
        int64_t *mw = work, *out = work + q, *yr = work + 2 * q, *yi = work + 3 * q;                                   \
        const int32_t gf = p->gc_frac;                                                                                 \
        int32_t c, s, j, i;                                                                                            \
        for (c = 0; c < d; ++c) {                                                                                      \
            ST *mc = m + (int64_t)c * q;                                                                               \
            const int64_t uw = lmu_pade_rnd((int64_t)u[c], p->u_shift);                                                \
            for (s = 0; s < p->substeps; ++s) {                                                                        \
                for (i = 0; i < q; ++i) {                                                                              \
                    mw[i] = lmu_pade_rnd((int64_t)mc[i], -p->guard);                                                   \
                    out[i] = p->k ? lmu_pade_rnd((int64_t)p->k * mw[i], p->k_frac) : 0;                                \
                }                                                                                                      \
                for (j = 0; j < p->poles; ++j) {                                                                       \
                    const int64_t gr = p->gc[2 * j], gi = p->gc[2 * j + 1];                                            \
                    const int64_t ir = p->inv[2 * j], ii = p->inv[2 * j + 1];                                          \
                    const int64_t fr = p->coef[2 * j], fi = p->coef[2 * j + 1];                                        \
                    const int32_t *wj = p->w + (int64_t)2 * j * q;                                                     \
                    int64_t sr[2] = {0, 0}, si[2] = {0, 0}, syr, syi, tr, ti;                                          \
                    for (i = 0; i < q; ++i) {                                                                          \
                        const int64_t a = 2 * (int64_t)i + 1, cr = a * gr, ci = a * gi;                                \
                        const int32_t par = i & 1, oth = 1 - par;                                                      \
                        const int64_t sg = par ? -1 : 1;                                                               \
                        const int64_t br = mw[i] + sg * lmu_pade_rnd(cr * uw, gf + 1);                                 \
                        const int64_t bi = sg * lmu_pade_rnd(ci * uw, gf + 1);                                         \
                        const int64_t vr = br + lmu_pade_rnd(cr * sr[oth] - ci * si[oth], gf);                         \
                        const int64_t vi = bi + lmu_pade_rnd(cr * si[oth] + ci * sr[oth], gf);                         \
                        sr[par] += vr;                                                                                 \
                        si[par] += vi;                                                                                 \
                        yr[i] = vr;                                                                                    \
                        yi[i] = vi;                                                                                    \
                    }                                                                                                  \
                    syr = sr[0] + sr[1];                                                                               \
                    syi = si[0] + si[1];                                                                               \
                    tr = lmu_pade_rnd(syr * ir - syi * ii, p->inv_frac);                                               \
                    ti = lmu_pade_rnd(syr * ii + syi * ir, p->inv_frac);                                               \
                    for (i = 0; i < q; ++i) {                                                                          \
                        const int64_t wr = wj[2 * i], wi = wj[2 * i + 1];                                              \
                        const int64_t xr = yr[i] - lmu_pade_rnd(wr * tr - wi * ti, p->w_frac);                         \
                        const int64_t xi = yi[i] - lmu_pade_rnd(wr * ti + wi * tr, p->w_frac);                         \
                        out[i] += lmu_pade_rnd(fr * xr - fi * xi, p->coef_frac);                                       \
                    }                                                                                                  \
                }                                                                                                      \
                for (i = 0; i < q; ++i) {                                                                              \
                    mc[i] = (ST)lmu_pade_sat(lmu_pade_rnd(out[i], p->guard), bits);                                    \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }

LMU_DEFINE_PADE_MEMORY(lmu_pade_memory_s8, int8_t)
LMU_DEFINE_PADE_MEMORY(lmu_pade_memory_s16, int16_t)
LMU_DEFINE_PADE_MEMORY(lmu_pade_memory_s32, int32_t)

#ifndef LMU_NO_FLOAT
/* The float32 path: the same substep with float constants (lmu_edge.pade.constants_substep). */
typedef struct {
    int32_t poles, substeps;
    const float *gc;   /* (P, 2) */
    const float *w;    /* (P, q, 2) */
    const float *inv;  /* (P, 2) */
    const float *coef; /* (P, 2) */
    float k;
} lmu_f_pade_t;

/* One sample for d channels of order q; `work` holds 3*q floats. */
static inline void lmu_f_pade_memory(float *m, const float *u, int32_t d, int32_t q, const lmu_f_pade_t *p,
                                     float *work) {
    float *out = work, *yr = work + q, *yi = work + 2 * q;
    int32_t c, s, j, i;
    for (c = 0; c < d; ++c) {
        float *mc = m + (int64_t)c * q;
        const float uc = u[c];
        for (s = 0; s < p->substeps; ++s) {
            for (i = 0; i < q; ++i)
                out[i] = p->k * mc[i];
            for (j = 0; j < p->poles; ++j) {
                const float gr = p->gc[2 * j], gi = p->gc[2 * j + 1];
                const float ir = p->inv[2 * j], ii = p->inv[2 * j + 1];
                const float fr = p->coef[2 * j], fi = p->coef[2 * j + 1];
                const float *wj = p->w + (int64_t)2 * j * q;
                float sr[2] = {0.0f, 0.0f}, si[2] = {0.0f, 0.0f}, tr, ti;
                for (i = 0; i < q; ++i) {
                    const float a = (float)(2 * i + 1), cr = a * gr, ci = a * gi;
                    const int32_t par = i & 1, oth = 1 - par;
                    const float sg = par ? -0.5f : 0.5f;
                    const float vr = mc[i] + sg * cr * uc + (cr * sr[oth] - ci * si[oth]);
                    const float vi = sg * ci * uc + (cr * si[oth] + ci * sr[oth]);
                    sr[par] += vr;
                    si[par] += vi;
                    yr[i] = vr;
                    yi[i] = vi;
                }
                tr = (sr[0] + sr[1]) * ir - (si[0] + si[1]) * ii;
                ti = (sr[0] + sr[1]) * ii + (si[0] + si[1]) * ir;
                for (i = 0; i < q; ++i) {
                    const float wr = wj[2 * i], wi = wj[2 * i + 1];
                    out[i] += fr * (yr[i] - (wr * tr - wi * ti)) - fi * (yi[i] - (wr * ti + wi * tr));
                }
            }
            for (i = 0; i < q; ++i)
                mc[i] = out[i];
        }
    }
}
#endif /* LMU_NO_FLOAT */

#endif /* LMU_PADE_H */
