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
 * lmu_band_rows_i8 on the cores LMU_BAND_ROWS names instead of one linear-kernel call per band: two bands'
 * patches, gathered as int16 and interleaved by lmu_band_patch16, against the int8 weights packed two rows
 * at a time, so each weight word loaded serves both patches and the call and its setup are paid once per
 * two bands. The sums are the same exact integers as lmu_qlinear30's (integer addition in any order,
 * modulo 2^32, and the exact value fits), requantized by the same lmu_qrow30.
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
 * lmu_qlinear30's four-row vectors per band, and ARMv6-M and the host their loops, which do better there.
 * -DLMU_BAND_PER_BAND (or -DLMU_PORTABLE) keeps one call per band everywhere (bench/band_conv.py). */
#if LMU_PATH_DSP && !LMU_PATH_MVE && defined(__GNUC__) && !defined(LMU_BAND_PER_BAND)
#define LMU_BAND_ROWS 1
#else
#define LMU_BAND_ROWS 0
#endif

#if LMU_BAND_ROWS
/* Value k of a patch in the interleaved layout lmu_band_rows_i8 reads (q: the patch's first group; the
 * other patch's groups interleave with its own): per group of four values the patch's two words, then the
 * other patch's two. */
#define LMU_BAND_AT(q, k) ((q)[2 * ((k) & ~3) + ((k)&3)])

/* Values k, k + 1, ... of the patch at q: the n values of f, int8 to int16; four at a time where k is a
 * multiple of 4 (LDR, SXTB16 twice, PKHBT and PKHTB into order, two STR). Returns the next k. */
static inline int32_t lmu_band_copy(int16_t *q, int32_t k, const int8_t *f, int32_t n) {
    const int8_t *const end = f + n;
    for (; f < end && (k & 3); ++f, ++k) {
        LMU_BAND_AT(q, k) = (int16_t)*f;
    }
    for (; f + 4 <= end; f += 4, k += 4) {
        const uint32_t v = lmu_ld32(f);
        const uint32_t e = (uint32_t)__sxtb16(v), o = lmu_sxtb16_hi(v); /* (f0, f2), (f1, f3) */
        const uint32_t lo = lmu_pkhbt16(e, o), hi = lmu_pkhtb16(o, e);  /* (f0, f1), (f2, f3) */
        memcpy(q + 2 * k, &lo, sizeof(lo));
        memcpy(q + 2 * k + 2, &hi, sizeof(hi));
    }
    for (; f < end; ++f, ++k) {
        LMU_BAND_AT(q, k) = (int16_t)*f;
    }
    return k;
}

/* Values k .. k + n - 1 of the patch at q: v. Returns the next k. */
static inline int32_t lmu_band_fill(int16_t *q, int32_t k, int32_t v, int32_t n) {
    const int32_t end = k + n;
    for (; k < end; ++k) {
        LMU_BAND_AT(q, k) = (int16_t)v;
    }
    return k;
}

/* Band b's patch as lmu_band_patch gathers it, widened to int16 (int8 inputs) into the interleaved layout at
 * q (LMU_BAND_AT), then zeros up to n4 values (the patch size rounded up to a multiple of 4: the packed
 * weights of those columns are 0). */
static inline void lmu_band_patch16(int16_t *q, const int8_t *hist, const int8_t *x, int32_t b, int32_t bands,
                                    int32_t cin, int32_t kt, int32_t kf, int32_t pad_lo, int32_t fill, int32_t n4) {
    const int32_t n = bands * cin, lo = (b - pad_lo) * cin, hi = lo + kf * cin;
    const int32_t first = lo < 0 ? 0 : lo, last = hi > n ? n : hi; /* the values inside the frame */
    int32_t j, k = 0;
    for (j = 0; j < kt; ++j) {
        const int8_t *f = j < kt - 1 ? hist + j * n : x;
        k = lmu_band_fill(q, k, fill, first - lo);
        k = lmu_band_copy(q, k, f + first, last - first);
        k = lmu_band_fill(q, k, fill, hi - last);
    }
    lmu_band_fill(q, k, 0, n4 - k);
}

/* Two bands' rows of an int8 band convolution marked acc30: y0[j] = lmu_qrow30 of bias_j + zsum_j +
 * sum_i p0[i] w_ji and y1[j] the same of p1, the patches interleaved in xx by lmu_band_patch16 (p0 at xx,
 * p1 at xx + 4 int16). wp: the
 * int8 weights packed by the code generator (c_layers.band_pack), word-aligned: for each pair of rows and
 * each group of four columns c0..c3 the four bytes w[c0] w[c2] w[c1] w[c3] of the first row, then of the
 * second (a missing last row and the columns past the patch: zeros), so SXTB16 of a word gives (w[c0],
 * w[c1]) and with ROR #8 (w[c2], w[c3]), the pairs of the patch's words. n4: the patch size rounded up to a
 * multiple of 4. Every product fits 16 x 16 bits and the exact sum int32 (acc30), so the partial sums are
 * formed modulo 2^32 as lmu_qlinear30's. Per group of four columns: 3 LDRD, 4 SXTB16, 8 SMLAD (16
 * multiply-accumulates) and the loop's compare and branch, in one assembly statement: 14 registers, which
 * gcc's own code for the same loop spilled. */
LMU_SPECIALIZE void lmu_band_rows_i8(const lmu_qlinear_t *L, const int8_t *wp, int32_t n4, const uint32_t *xx,
                                     int8_t *y0, int8_t *y1) {
    const lmu_qpart_t *p = L->parts;
    int32_t j;
    for (j = 0; j < L->n_out; j += 2) {
        const int32_t j1 = j + 1 < L->n_out ? j + 1 : j;
        const int8_t *w = wp + j * n4; /* the two rows' n4 / 4 groups of eight bytes */
        const uint32_t *x = xx, *const end = xx + n4;
        int32_t s0 = lmu_qstart(L, p, 0, j), s1 = lmu_qstart(L, p, 0, j1), t0 = s0, t1 = s1;
        uint32_t xa, xb, ya, yb, u0, u1, e;
        __asm__ volatile(
            "1:\n\t"
            "ldrd %[xa], %[xb], [%[x]], #16\n\t"
            "ldrd %[ya], %[yb], [%[x], #-8]\n\t"
            "ldrd %[u0], %[u1], [%[w]], #8\n\t"
            "sxtb16 %[e], %[u0]\n\t"
            "smlad %[s0], %[e], %[xa], %[s0]\n\t"
            "smlad %[t0], %[e], %[ya], %[t0]\n\t"
            "sxtb16 %[u0], %[u0], ror #8\n\t"
            "smlad %[s0], %[u0], %[xb], %[s0]\n\t"
            "smlad %[t0], %[u0], %[yb], %[t0]\n\t"
            "sxtb16 %[e], %[u1]\n\t"
            "smlad %[s1], %[e], %[xa], %[s1]\n\t"
            "smlad %[t1], %[e], %[ya], %[t1]\n\t"
            "sxtb16 %[u1], %[u1], ror #8\n\t"
            "smlad %[s1], %[u1], %[xb], %[s1]\n\t"
            "smlad %[t1], %[u1], %[yb], %[t1]\n\t"
            "cmp %[x], %[end]\n\t"
            "bne 1b"
            : [x] "+r"(x), [w] "+r"(w), [s0] "+r"(s0), [s1] "+r"(s1), [t0] "+r"(t0), [t1] "+r"(t1), [xa] "=&r"(xa),
              [xb] "=&r"(xb), [ya] "=&r"(ya), [yb] "=&r"(yb), [u0] "=&r"(u0), [u1] "=&r"(u1), [e] "=&r"(e)
            : [end] "r"(end)
            : "cc", "memory");
        lmu_qrow30(L, s0, j, NULL, y0);
        lmu_qrow30(L, t0, j, NULL, y1);
        if (j1 != j) {
            lmu_qrow30(L, s1, j1, NULL, y0);
            lmu_qrow30(L, t1, j1, NULL, y1);
        }
    }
}
#endif /* LMU_BAND_ROWS */

#endif /* LMU_BANDCONV_H */
