/*
 * lmu_frontend.h -- the lmu-edge integer log-mel front end: header-only C99, static inline, no malloc,
 * no globals, no floating point (it runs on an FPU-less Cortex-M0).
 *
 * int16 samples in, one frame of n_mels int8 features every `hop` samples out. Every operation mirrors
 * lmu_edge/audio/frontend.py bit for bit (that module's docstring states the algorithm and the scales; the
 * tests compare the two on the host and on Cortex-M4 / M0 under QEMU):
 *   pre-emphasis (Q15), Hann window (Q15), block exponent of the frame (|v| <= 2^13), radix-2 FFT with
 *   Q15 twiddles halving at every stage (int32 arithmetic, int16 storage), power spectrum (uint32),
 *   triangular mel weights (Q12, uint64 sums), log2 by leading-zero count plus a table, int8 output.
 * Rounding is "half up" ((x + 2^(s-1)) >> s) everywhere; right shifts of negative values are
 * arithmetic, as gcc, clang and arm-none-eabi-gcc define them.
 * The constant tables and the state struct are generated (lmu_edge.audio.frontend.emit_c -> <prefix>_frontend.c).
 */
#ifndef LMU_FRONTEND_H
#define LMU_FRONTEND_H

#include <stdint.h>

#define LMU_FE_NORM_BITS 13

typedef struct {
    int32_t frame_len, hop, n_fft, log2_n_fft, n_mels, preemph_q15;
    const int16_t *window;       /* frame_len, Q15 */
    const int16_t *cos_q15;      /* n_fft / 2: cos(2 pi k / n_fft) in Q15 */
    const int16_t *sin_q15;      /* n_fft / 2: sin(2 pi k / n_fft) in Q15 */
    const uint16_t *bitrev;      /* n_fft */
    const uint16_t *mel_start;   /* n_mels: first FFT bin of each band */
    const uint16_t *mel_len;     /* n_mels: bins in each band */
    const uint16_t *mel_offset;  /* n_mels: where each band's weights start in mel_weights */
    const uint16_t *mel_weights; /* Q12 */
    const int16_t *log_table;    /* 2^log_table_bits entries: log2(1 + (i + 1/2) / 2^bits) in Q(log_frac_bits) */
    int32_t log_table_bits, log_frac_bits, log_bias, offset_q, out_shift;
} lmu_fe_config_t;

/* number of significant bits of v (0 for 0): a leading-zero count without compiler builtins */
static inline int32_t lmu_fe_bitlen64(uint64_t v) {
    int32_t n = 0;
    if (v >> 32) {
        v >>= 32;
        n += 32;
    }
    if (v >> 16) {
        v >>= 16;
        n += 16;
    }
    if (v >> 8) {
        v >>= 8;
        n += 8;
    }
    if (v >> 4) {
        v >>= 4;
        n += 4;
    }
    if (v >> 2) {
        v >>= 2;
        n += 2;
    }
    if (v >> 1) {
        v >>= 1;
        n += 1;
    }
    return n + (int32_t)v;
}

#define LMU_FE_ABS(v) ((v) < 0 ? -(v) : (v))

/* in-place radix-2 decimation-in-time FFT of bit-reversed data whose largest |component| is mx; a
 * stage halves when its input has a component >= 2^12 (block floating point). Returns the number of
 * halvings H: the result is DFT / 2^H. */
static inline int32_t lmu_fe_fft(const lmu_fe_config_t *c, int16_t *re, int16_t *im, int32_t mx) {
    int32_t half, step, k0, j, H = 0;
    for (half = 1, step = c->n_fft >> 1; half < c->n_fft; half <<= 1, step >>= 1) {
        const int32_t h = mx >= (1 << 12) ? 1 : 0;
        int32_t nmx = 0;
        H += h;
        for (j = 0; j < half; ++j) {
            const int32_t wc = c->cos_q15[j * step];
            const int32_t ws = c->sin_q15[j * step];
            for (k0 = j; k0 < c->n_fft; k0 += 2 * half) {
                const int32_t k1 = k0 + half;
                const int32_t ar = re[k0], ai = im[k0], br = re[k1], bi = im[k1];
                const int32_t tr = (br * wc + bi * ws + (1 << 14)) >> 15;
                const int32_t ti = (bi * wc - br * ws + (1 << 14)) >> 15;
                const int32_t r0 = (ar + tr + h) >> h, i0 = (ai + ti + h) >> h;
                const int32_t r1 = (ar - tr + h) >> h, i1 = (ai - ti + h) >> h;
                re[k0] = (int16_t)r0;
                im[k0] = (int16_t)i0;
                re[k1] = (int16_t)r1;
                im[k1] = (int16_t)i1;
                /* OR of magnitudes: >= 2^12 exactly when their max is */
                nmx |= LMU_FE_ABS(r0) | LMU_FE_ABS(i0) | LMU_FE_ABS(r1) | LMU_FE_ABS(i1);
            }
        }
        mx = nmx;
    }
    return H;
}

/* one int8 feature from a mel energy E of a frame with block exponent e */
static inline int8_t lmu_fe_log_feature(const lmu_fe_config_t *c, uint64_t E, int32_t e) {
    int32_t b, frac, L, q;
    uint64_t mant;
    if (E == 0u) {
        return -128;
    }
    b = lmu_fe_bitlen64(E) - 1;
    mant = b >= c->log_table_bits ? (E >> (b - c->log_table_bits)) : (E << (c->log_table_bits - b));
    frac = (int32_t)(mant & (((uint64_t)1 << c->log_table_bits) - 1u));
    L = (b + 2 * e + c->log_bias) * (1 << c->log_frac_bits) + c->log_table[frac];
    q = (L - c->offset_q + (1 << (c->out_shift - 1))) >> c->out_shift;
    return (int8_t)(q < -128 ? -128 : (q > 127 ? 127 : q));
}

/* the features of the frame held in ring (oldest sample at ring[pos]) */
static inline void lmu_fe_frame(const lmu_fe_config_t *c, const int16_t *ring, int32_t pos, int16_t *re, int16_t *im,
                                int8_t *out) {
    int32_t n, k, m, e, idx, vmx;
    uint32_t mx = 0u;
    for (n = 0, idx = pos; n < c->frame_len; ++n) {
        const int32_t xw = (int32_t)ring[idx] * c->window[n];
        const uint32_t a = xw < 0 ? (uint32_t)(-(int64_t)xw) : (uint32_t)xw;
        if (a > mx)
            mx = a;
        if (++idx == c->frame_len)
            idx = 0;
    }
    if (mx == 0u) {
        for (m = 0; m < c->n_mels; ++m)
            out[m] = -128;
        return;
    }
    e = lmu_fe_bitlen64(mx) - LMU_FE_NORM_BITS;
    vmx = 0;
    for (n = 0; n < c->n_fft; ++n) {
        re[n] = 0;
        im[n] = 0;
    }
    for (n = 0, idx = pos; n < c->frame_len; ++n) {
        const int32_t xw = (int32_t)ring[idx] * c->window[n];
        const int32_t v = e > 0 ? ((xw + (1 << (e - 1))) >> e) : (int32_t)((uint32_t)xw << (-e));
        re[c->bitrev[n]] = (int16_t)v;
        vmx |= LMU_FE_ABS(v);
        if (++idx == c->frame_len)
            idx = 0;
    }
    e += lmu_fe_fft(c, re, im, vmx);
    for (m = 0; m < c->n_mels; ++m) {
        const int32_t s = c->mel_start[m], len = c->mel_len[m];
        const uint16_t *w = c->mel_weights + c->mel_offset[m];
        uint64_t E = 0u;
        for (k = 0; k < len; ++k) {
            const int32_t r = re[s + k], i = im[s + k];
            const uint32_t p = (uint32_t)(r * r) + (uint32_t)(i * i);
            E += (uint64_t)p * w[k];
        }
        out[m] = lmu_fe_log_feature(c, E, e);
    }
}

/* counters: [0] write position, [1] samples held (up to frame_len), [2] samples since the last frame,
 * [3] the previous raw sample (pre-emphasis) */
static inline void lmu_fe_reset(const lmu_fe_config_t *c, int16_t *ring, int32_t *counters) {
    int32_t n;
    for (n = 0; n < c->frame_len; ++n)
        ring[n] = 0;
    counters[0] = counters[1] = counters[2] = counters[3] = 0;
}

static inline int lmu_fe_push(const lmu_fe_config_t *c, int16_t *ring, int16_t *re, int16_t *im, int32_t *counters,
                              int16_t sample, int8_t *out) {
    int32_t pe = sample;
    if (c->preemph_q15) {
        pe -= (counters[3] * c->preemph_q15 + (1 << 14)) >> 15;
        pe = pe < -32768 ? -32768 : (pe > 32767 ? 32767 : pe);
    }
    counters[3] = sample;
    ring[counters[0]] = (int16_t)pe;
    if (++counters[0] == c->frame_len)
        counters[0] = 0;
    if (counters[1] < c->frame_len) {
        if (++counters[1] < c->frame_len)
            return 0;
    } else if (++counters[2] < c->hop) {
        return 0;
    }
    counters[2] = 0;
    lmu_fe_frame(c, ring, counters[0], re, im, out);
    return 1;
}

#endif /* LMU_FRONTEND_H */
