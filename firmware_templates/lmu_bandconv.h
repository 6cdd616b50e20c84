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

#endif /* LMU_BANDCONV_H */
