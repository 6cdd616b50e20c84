/* Streaming keyword spotter: raw 16 kHz int16 samples in, detections with timestamps out.
 *
 * Every sample goes through the integer log-mel front end (kws_frontend.h, lmu_frontend.h); every
 * completed frame (10 ms) through the int8 LMU model (model.h, lmu_runtime.h) and the detection
 * rule (posterior smoothing over KWS_DET_WINDOW frames, threshold, refractory period: kws_detect.h,
 * mirrored by kws.Detector in examples/kws/kws.py). With a kws_norm.h that defines KWS_NORM_SHIFT, each
 * frame is speaker-normalized before the model (the running mean of the speech frames subtracted:
 * fsdd.SpeakerNorm in examples/kws/fsdd.py). Constant memory: the state structs and the smoothing ring,
 * all static; no malloc, no floating point.
 *
 * Host: stream IN.raw [OUT.bin]; Cortex-M under QEMU (semihosting): reads stream.raw, writes
 * stream_out.bin. OUT gets the model's int8 outputs of every frame (KWS_N_OUTPUTS bytes each).
 * Prints one line per detection, "1.23 s: yes (0.91)", then a "kws-stats:" line of counters
 * (SysTick ticks on Cortex-M: 25 MHz, with QEMU's -icount shift=5 one tick is 1.25 instructions).
 */
#include <stdio.h>
#include <string.h>
#include "kws_frontend.h"
#include "model.h"
#include "kws_detect.h"
#include "kws_norm.h"

#if defined(__arm__)
#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
static void ticks_start(void) { SYST_RVR = 0xFFFFFFu; SYST_CVR = 0u; SYST_CSR = 5u; }
static uint32_t ticks_now(void) { return SYST_CVR; }
static uint32_t ticks_since(uint32_t t0) { return (t0 - SYST_CVR) & 0xFFFFFFu; }
#else
static void ticks_start(void) {}
static uint32_t ticks_now(void) { return 0u; }
static uint32_t ticks_since(uint32_t t0) { return t0 * 0u; }
#endif

#if KWS_FE_N_MELS != KWS_N_INPUTS || KWS_DET_N_CLASSES != KWS_N_OUTPUTS
#error "the front end, the model and the detection rule disagree on sizes"
#endif

typedef struct {
    uint8_t ring[KWS_DET_WINDOW][KWS_DET_N_CLASSES]; /* p = y + 128 of the last frames */
    int32_t sum[KWS_DET_N_CLASSES];                  /* their sums */
    int32_t pos;
    int32_t last;                                    /* frame of the last detection */
} kws_det_state_t;

static kws_fe_state_t fe;
static kws_state_t net;
static kws_det_state_t det;

#ifdef KWS_NORM_SHIFT
typedef struct {
    int32_t mu[KWS_FE_N_MELS]; /* running mean of the speech frames, Q8 feature steps */
    int32_t n;                 /* speech frames heard, capped at 2^KWS_NORM_SHIFT */
} kws_norm_state_t;

static kws_norm_state_t nrm;

static void norm_reset(kws_norm_state_t *s) {
    memcpy(s->mu, kws_norm_prior, sizeof(s->mu));
    s->n = 0;
}

/* f <- clamp(f - round(mu / 256)); then, on a speech frame (sum of f above the gate), mu moves 2^-k of the
   way to it, k = min(bitlen(n), KWS_NORM_SHIFT). >> of a negative int32 is arithmetic in gcc (floor), as
   numpy's on int64 in fsdd.SpeakerNorm. */
static void norm_step(kws_norm_state_t *s, int8_t *f) {
    int32_t b, sum = 0, k = 0, v;
    int8_t raw[KWS_FE_N_MELS];
    for (b = 0; b < KWS_FE_N_MELS; ++b) {
        raw[b] = f[b];
        sum += f[b];
        v = (int32_t)f[b] - ((s->mu[b] + 128) >> 8);
        f[b] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
    }
    if (sum > KWS_NORM_GATE) {
        if (s->n < (1 << KWS_NORM_SHIFT)) ++s->n;
        for (v = s->n; v > 0 && k < KWS_NORM_SHIFT; v >>= 1) ++k;
        for (b = 0; b < KWS_FE_N_MELS; ++b) s->mu[b] += ((int32_t)raw[b] * 256 - s->mu[b]) >> k;
    }
}
#endif

#ifdef KWS_NORM_SHIFT
#define NORM_BYTES sizeof(nrm)
#else
#define NORM_BYTES 0u
#endif

static void det_reset(kws_det_state_t *d) {
    memset(d, 0, sizeof(*d));
    d->last = -KWS_DET_REFRACTORY;
}

/* returns the detected class (>= 2) or -1; *score gets its smoothed sum */
static int det_step(kws_det_state_t *d, const int8_t *y, int32_t frame, int32_t *score) {
    int32_t c, best = 2;
    for (c = 0; c < KWS_DET_N_CLASSES; ++c) {
        const int32_t p = (int32_t)y[c] + 128;
        d->sum[c] += p - d->ring[d->pos][c];
        d->ring[d->pos][c] = (uint8_t)p;
    }
    if (++d->pos == KWS_DET_WINDOW) d->pos = 0;
    for (c = 3; c < KWS_DET_N_CLASSES; ++c) {
        if (d->sum[c] > d->sum[best]) best = c;
    }
    *score = d->sum[best];
    if (d->sum[best] >= KWS_DET_THRESHOLD && frame - d->last >= KWS_DET_REFRACTORY) {
        d->last = frame;
        return (int)best;
    }
    return -1;
}

/* v in decimal into buf (at least 21 bytes): the tick sums are 64-bit (32 bits overflow after about 7
   minutes of audio on a Cortex-M4) and printf's %llu is not in every C library */
static const char *u64_text(uint64_t v, char *buf) {
    char *p = buf + 20;
    *p = '\0';
    do {
        *--p = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v);
    return p;
}

int main(int argc, char **argv) {
    FILE *fi = fopen(argc > 1 ? argv[1] : "stream.raw", "rb");
    FILE *fo = fopen(argc > 2 ? argv[2] : "stream_out.bin", "wb");
    int16_t buf[256];
    int8_t feat[KWS_FE_N_MELS], y[KWS_N_OUTPUTS];
    unsigned long samples = 0, frames = 0, detections = 0;
    uint64_t fe_ticks = 0, net_ticks = 0;
    char fe_text[21], net_text[21];
    size_t n, i;
    if (!fi || !fo) {
        printf("stream: cannot open the input or output file\n");
        return 2;
    }
    kws_fe_reset(&fe);
    kws_reset(&net);
    det_reset(&det);
#ifdef KWS_NORM_SHIFT
    norm_reset(&nrm);
#endif
    ticks_start();
    while ((n = fread(buf, sizeof(int16_t), 256, fi)) > 0) {
        for (i = 0; i < n; ++i) {
            uint32_t t0 = ticks_now();
            int got = kws_fe_push(&fe, buf[i], feat);
            fe_ticks += ticks_since(t0);
            ++samples;
            if (got) {
                int32_t score;
                int cls;
#ifdef KWS_NORM_SHIFT
                t0 = ticks_now();
                norm_step(&nrm, feat);
                fe_ticks += ticks_since(t0);
#endif
                t0 = ticks_now();
                kws_step_int8(&net, feat, y);
                net_ticks += ticks_since(t0);
                fwrite(y, 1, sizeof(y), fo);
                cls = det_step(&det, y, (int32_t)frames, &score);
                if (cls >= 0) {
                    /* the end of the frame in samples, then milliseconds without forming samples * 1000
                       (which overflowed 32 bits after about 4.5 minutes of 16 kHz audio) */
                    const unsigned long end = frames * KWS_FE_HOP + KWS_FE_FRAME_LEN;
                    const unsigned long ms = end / KWS_FE_SAMPLE_RATE * 1000ul
                                             + end % KWS_FE_SAMPLE_RATE * 1000ul / KWS_FE_SAMPLE_RATE;
                    const unsigned long pct = (unsigned long)score * 100ul / (256ul * KWS_DET_WINDOW);
                    printf("%lu.%02lu s: %s (0.%02lu)\n", ms / 1000ul, (ms % 1000ul) / 10ul, kws_class_names[cls], pct);
                    ++detections;
                }
                ++frames;
            }
        }
    }
    fclose(fi);
    fclose(fo);
    printf("kws-stats: samples=%lu frames=%lu fe_ticks=%s net_ticks=%s detections=%lu fe_bytes=%lu net_bytes=%lu "
           "det_bytes=%lu\n", samples, frames, u64_text(fe_ticks, fe_text), u64_text(net_ticks, net_text),
           detections, (unsigned long)(sizeof(fe) + NORM_BYTES), (unsigned long)sizeof(net),
           (unsigned long)sizeof(det));
    return 0;
}
