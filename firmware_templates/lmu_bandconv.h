/*
 * lmu_bandconv.h -- a convolution over (time, frequency bands), causal in time, one frame per step:
 * header-only C99, static inline, no malloc, no globals. The generated step calls these around the
 * runtime's linear kernels (lmu_runtime.h, included first), which do the arithmetic; mirrors
 * lmu_edge/intsim.py (_BandConvRun) and lmu_edge/reference.py (_BandConvRun).
 *
 * A layer keeps the last kt - 1 input frames (hist, oldest first). Per output band b the patch holds
 * kt frames (hist, then the current one) by kf bands from b - pad_lo by cin channels, in that order;
 * a band outside the frame reads `fill` (the input's zero point; 0 for int16 and float). The patch goes
 * through the layer's linear kernel into one row of cout values, and the rows of each `pool`
 * consecutive bands are reduced by their maximum into the output.
 *
 * int8 layers whose accumulators provably fit 30 bits (acc30, the code generator's proof) take
 * lmu_band_rows_i8 instead of one linear-kernel call per band: two bands' patches (widened to int16 by
 * lmu_band_patch16) on the cores LMU_BAND_ROWS names, against the weights packed as int16 for four rows at a time, so each weight word loaded
 * serves both patches (two SMLAD) and the call and its setup are paid once per two bands. The sums are the same exact integers as lmu_qlinear30's (integer addition in
 * any order, modulo 2^32, and the exact value fits), requantized by the same lmu_qrow30.
 */
#ifndef LMU_BANDCONV_H
#define LMU_BANDCONV_H

#include <stdint.h>
#include <string.h>

/* The patch of output band b; es bytes per value. */
static inline void lmu_band_patch(void *patch, const void *hist, const void *x, int32_t b, int32_t bands, int32_t cin,
                                  int32_t kt, int32_t kf, int32_t pad_lo, int32_t es, int32_t fill) {
    uint8_t *p = (uint8_t *)patch;
    int32_t row = cin * es, frame = bands * row, lo = b - pad_lo, hi = lo + kf, j;
    int32_t first = lo < 0 ? 0 : lo, last = hi > bands ? bands : hi; /* the bands inside the frame */
    int32_t before = (first - lo) * row, inside = (last - first) * row, after = (hi - last) * row;
    for (j = 0; j < kt; ++j) {
        const uint8_t *f = j < kt - 1 ? (const uint8_t *)hist + j * frame : (const uint8_t *)x;
        if (before > 0) {
            memset(p, fill, (size_t)before);
        }
        if (inside > 0) {
            memcpy(p + before, f + first * row, (size_t)inside);
        }
        if (after > 0) {
            memset(p + before + inside, fill, (size_t)after);
        }
        p += before + inside + after;
    }
}

/* After the step: the history drops its oldest frame and keeps x (frame_bytes bytes). */
static inline void lmu_band_push(void *hist, const void *x, int32_t frame_bytes, int32_t kt) {
    if (kt > 1) {
        memmove(hist, (uint8_t *)hist + frame_bytes, (size_t)(kt - 2) * (size_t)frame_bytes);
        memcpy((uint8_t *)hist + (kt - 2) * frame_bytes, x, (size_t)frame_bytes);
    }
}

/* y = row (first band of a pool) or y = max(y, row), element by element */
static inline void lmu_band_max_i8(int8_t *y, const int8_t *row, int32_t n, int32_t first) {
    int32_t i;
    for (i = 0; i < n; ++i) {
        y[i] = (first || row[i] > y[i]) ? row[i] : y[i];
    }
}

static inline void lmu_band_max_i16(int16_t *y, const int16_t *row, int32_t n, int32_t first) {
    int32_t i;
    for (i = 0; i < n; ++i) {
        y[i] = (first || row[i] > y[i]) ? row[i] : y[i];
    }
}

static inline void lmu_band_max_f(float *y, const float *row, int32_t n, int32_t first) {
    int32_t i;
    for (i = 0; i < n; ++i) {
        y[i] = (first || row[i] > y[i]) ? row[i] : y[i];
    }
}

/* The two-band path: on the cores with the DSP extension and no Helium (Cortex-M4, M7, M33). Helium keeps
 * lmu_qlinear30's four-row vectors per band, and ARMv6-M and the host their loops, which do better there. */
#if LMU_PATH_DSP && !LMU_PATH_MVE
#define LMU_BAND_ROWS 1
#else
#define LMU_BAND_ROWS 0
#endif

#if LMU_BAND_ROWS
/* q[i] = f[i] for n values, int8 to int16. DSP: four per word (LDR, SXTB16 twice, PKHBT and PKHTB back into
 * order, two STR); then one at a time. */
static inline int16_t *lmu_band_widen(int16_t *q, const int8_t *f, int32_t n) {
    int32_t i = 0;
    for (; i + 4 <= n; i += 4, q += 4) {
        const uint32_t v = lmu_ld32(f + i);
        const uint32_t e = (uint32_t)__sxtb16(v), o = lmu_sxtb16_hi(v); /* (f0, f2), (f1, f3) */
        const uint32_t lo = lmu_pkhbt16(e, o), hi = lmu_pkhtb16(o, e);  /* (f0, f1), (f2, f3) */
        memcpy(q, &lo, sizeof(lo));
        memcpy(q + 2, &hi, sizeof(hi));
    }
    for (; i < n; ++i) {
        *q++ = (int16_t)f[i];
    }
    return q;
}

/* Band b's patch as lmu_band_patch gathers it, widened to int16 (int8 inputs), then zeros up to n2 values
 * (the patch size rounded up to even: the packed weights of those columns are 0). */
static inline void lmu_band_patch16(int16_t *p, const int8_t *hist, const int8_t *x, int32_t b, int32_t bands,
                                    int32_t cin, int32_t kt, int32_t kf, int32_t pad_lo, int32_t fill, int32_t n2) {
    const int32_t n = bands * cin, lo = (b - pad_lo) * cin, hi = lo + kf * cin;
    const int32_t first = lo < 0 ? 0 : lo, last = hi > n ? n : hi; /* the values inside the frame */
    int16_t *q = p;
    int32_t j, i;
    for (j = 0; j < kt; ++j) {
        const int8_t *f = j < kt - 1 ? hist + j * n : x;
        for (i = lo; i < first; ++i) {
            *q++ = (int16_t)fill;
        }
        q = lmu_band_widen(q, f + first, last - first);
        for (i = last; i < hi; ++i) {
            *q++ = (int16_t)fill;
        }
    }
    while (q < p + n2) {
        *q++ = 0;
    }
}

/* Two bands' rows of an int8 band convolution marked acc30: y0[j] = lmu_qrow30 of bias_j + zsum_j +
 * sum_i p0[i] w_ji, y1[j] the same of p1 (p1 may equal p0). wp: the weights packed by the code generator
 * (c_codegen.band_pack), for each group of four rows (4g .. 4g + 3) and each pair of columns (i, i + 1)
 * the eight int16 values w[4g][i], w[4g][i + 1], w[4g + 1][i], ..., w[4g + 3][i + 1] (missing rows and
 * columns: zeros); n2 the patch size rounded up to even. Every product fits 16 x 16 bits (|x| <= 128,
 * |w| <= 128) and the exact sum int32 (acc30), so the partial sums are formed modulo 2^32 as
 * lmu_qlinear30's. DSP: per pair of columns 2 loads for the patches and 4 for the weights feed 8 SMLAD
 * (16 multiply-accumulates). */
LMU_SPECIALIZE void lmu_band_rows_i8(const lmu_qlinear_t *L, const int16_t *wp, int32_t n2, const int16_t *p0,
                                     const int16_t *p1, int8_t *y0, int8_t *y1) {
    const lmu_qpart_t *p = L->parts;
    int32_t j, r;
    for (j = 0; j < L->n_out; j += 4) {
        const int16_t *w = wp + j * n2; /* the four rows' n2 / 2 groups of eight */
        uint32_t a[8];                  /* a[r]: row j + r of p0, a[4 + r]: of p1 */
        for (r = 0; r < 4; ++r) {
            a[r] = a[4 + r] = (uint32_t)lmu_qstart(L, p, 0, j + r < L->n_out ? j + r : j);
        }
        {
            const int16_t *x = p0, *const end = p0 + n2;
            const int32_t d = (int32_t)(p1 - p0);
            int32_t s0 = (int32_t)a[0], s1 = (int32_t)a[1], s2 = (int32_t)a[2], s3 = (int32_t)a[3];
            int32_t t0 = (int32_t)a[4], t1 = (int32_t)a[5], t2 = (int32_t)a[6], t3 = (int32_t)a[7];
            while (x < end) {
                const int16x2_t x0 = (int16x2_t)lmu_ld32(x), x1 = (int16x2_t)lmu_ld32(x + d);
                int16x2_t u = (int16x2_t)lmu_ld32(w);
                s0 = __smlad(u, x0, s0);
                t0 = __smlad(u, x1, t0);
                u = (int16x2_t)lmu_ld32(w + 2);
                s1 = __smlad(u, x0, s1);
                t1 = __smlad(u, x1, t1);
                u = (int16x2_t)lmu_ld32(w + 4);
                s2 = __smlad(u, x0, s2);
                t2 = __smlad(u, x1, t2);
                u = (int16x2_t)lmu_ld32(w + 6);
                s3 = __smlad(u, x0, s3);
                t3 = __smlad(u, x1, t3);
                x += 2;
                w += 8;
            }
            a[0] = (uint32_t)s0, a[1] = (uint32_t)s1, a[2] = (uint32_t)s2, a[3] = (uint32_t)s3;
            a[4] = (uint32_t)t0, a[5] = (uint32_t)t1, a[6] = (uint32_t)t2, a[7] = (uint32_t)t3;
        }
        for (r = 0; r < 4 && j + r < L->n_out; ++r) {
            lmu_qrow30(L, (int32_t)a[r], j + r, NULL, y0);
            lmu_qrow30(L, (int32_t)a[4 + r], j + r, NULL, y1);
        }
    }
}
#endif /* LMU_BAND_ROWS */

#endif /* LMU_BANDCONV_H */
