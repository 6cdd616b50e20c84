/* Streaming keyword spotter: raw 16 kHz int16 samples in, detections with timestamps out.
 *
 * Every sample goes through the integer log-mel front end (kws_frontend.h, lmu_frontend.h); every
 * completed frame (10 ms) through the int8 LMU model (model.h, lmu_runtime.h) and the detection
 * rule (posterior smoothing over KWS_DET_WINDOW frames, threshold, refractory period: kws_detect.h,
 * mirrored by kws.Detector in examples/kws/kws.py). With a kws_norm.h that defines KWS_NORM_SHIFT, each
 * frame is speaker-normalized before the model (the running mean of the speech frames subtracted:
 * fsdd.SpeakerNorm in examples/kws/fsdd.py). With a kws_verify.h that defines KWS_VERIFY, a detection is
 * the first of two stages: KWSV_DELAY frames later a second model (verify/model.h, prefix kwsv: the
 * verifier of examples/kws/verify.py) reads the last KWSV_WINDOW speaker-normalized frames (a ring
 * buffer; before the first frame, the first frame repeated), at most KWSV_STEPS_PER_FRAME of them per
 * frame, and the detection stands when its top class is the detected digit with an int8 output >=
 * KWSV_MIN_Q. Constant memory: the state structs and the
 * rings, all static; no malloc, no floating point.
 *
 * Host: stream IN.raw [OUT.bin]; Cortex-M under QEMU (semihosting): reads stream.raw, writes
 * stream_out.bin. OUT gets the model's int8 outputs of every frame (KWS_N_OUTPUTS bytes each).
 * Prints one line per detection, "1.23 s: yes (0.91)", then a "kws-stats:" line of counters. With the
 * verifier: a "kws-verify: FRAME CLASS SCORE ACCEPTED Q0 .. Q10" line for each first-stage detection (its
 * int8 outputs), and the detection line only for those that stand, when the verifier has decided
 * (detections= counts those); kws-stats adds verifications=, ver_ticks= (its steps), ver_bytes= (its
 * normalizer, ring and state) and frame_ticks_max= (the costliest frame: front end, model(s), detector).
 * (SysTick ticks on Cortex-M: 25 MHz, with QEMU's -icount shift=5 one tick is 1.25 instructions).
 */
#include <stdio.h>
#include <string.h>
#include "kws_frontend.h"
#include "model.h"
#include "kws_detect.h"
#include "kws_norm.h"
#include "kws_verify.h"
#ifdef KWS_VERIFY
#include "verify/model.h"
#endif

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
    int32_t quiet;                                   /* frames since the last detection, up to the period */
} kws_det_state_t;

static kws_fe_state_t fe;
static kws_state_t net;
static kws_det_state_t det;

/* the speaker normalizer's gate and shift: the streaming model's (kws_norm.h), the verifier's
   (kws_verify.h), or both when they agree; each has its own prior and state */
#if defined(KWS_NORM_SHIFT) && defined(KWSV_NORM_SHIFT)
#if KWS_NORM_SHIFT != KWSV_NORM_SHIFT || KWS_NORM_GATE != KWSV_NORM_GATE
#error "the streaming model's and the verifier's speaker normalizers differ in gate or shift"
#endif
#endif
#if defined(KWS_NORM_SHIFT)
#define NORM_SHIFT KWS_NORM_SHIFT
#define NORM_GATE KWS_NORM_GATE
#elif defined(KWSV_NORM_SHIFT)
#define NORM_SHIFT KWSV_NORM_SHIFT
#define NORM_GATE KWSV_NORM_GATE
#endif

#ifdef NORM_SHIFT
typedef struct {
    int32_t mu[KWS_FE_N_MELS]; /* running mean of the speech frames, Q8 feature steps */
    int32_t n;                 /* speech frames heard, capped at 2^NORM_SHIFT */
} kws_norm_state_t;

static void norm_reset(kws_norm_state_t *s, const int32_t *prior) {
    memcpy(s->mu, prior, sizeof(s->mu));
    s->n = 0;
}

/* f <- clamp(f - round(mu / 256)); then, on a speech frame (sum of f above the gate), mu moves 2^-k of the
   way to it, k = min(bitlen(n), NORM_SHIFT). >> of a negative int32 is arithmetic in gcc (floor), as
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
    if (sum > NORM_GATE) {
        if (s->n < (1 << NORM_SHIFT)) ++s->n;
        for (v = s->n; v > 0 && k < NORM_SHIFT; v >>= 1) ++k;
        for (b = 0; b < KWS_FE_N_MELS; ++b) s->mu[b] += ((int32_t)raw[b] * 256 - s->mu[b]) >> k;
    }
}
#endif

#ifdef KWS_NORM_SHIFT
static kws_norm_state_t nrm;
#define NORM_BYTES sizeof(nrm)
#else
#define NORM_BYTES 0u
#endif

/* the detection line: the time of the detecting frame's end (in samples, then milliseconds without
   forming samples * 1000, which overflowed 32 bits after about 4.5 minutes of 16 kHz audio) and the
   smoothed posterior in % */
static void print_detection(unsigned long frame, int cls, int32_t score) {
    const uint64_t end = (uint64_t)frame * KWS_FE_HOP + KWS_FE_FRAME_LEN; /* 32 bits wrap after 6 days */
    const uint64_t ms = end / KWS_FE_SAMPLE_RATE * 1000u + end % KWS_FE_SAMPLE_RATE * 1000u / KWS_FE_SAMPLE_RATE;
    const unsigned long pct = (unsigned long)score * 100ul / (256ul * KWS_DET_WINDOW);
    printf("%lu.%02lu s: %s (0.%02lu)\n", (unsigned long)(ms / 1000u), (unsigned long)(ms % 1000u / 10u),
           kws_class_names[cls], pct);
}

#ifdef KWS_VERIFY
#if KWSV_DELAY >= KWS_DET_REFRACTORY || KWSV_DELAY >= KWSV_WINDOW
#error "KWSV_DELAY must be below the refractory period (no detection while one waits) and the window"
#endif
#if KWSV_STEPS_PER_FRAME > 0 && (KWSV_WINDOW + KWSV_STEPS_PER_FRAME - 1) / KWSV_STEPS_PER_FRAME > KWS_DET_REFRACTORY
#error "KWSV_STEPS_PER_FRAME steps per frame take longer than the refractory period: a detection would come while one waits"
#endif
#if KWSV_N_INPUTS != KWS_FE_N_MELS || KWSV_N_OUTPUTS != KWS_DET_N_CLASSES - 1
#error "the verifier reads the front end's frames and names the digits and 'not a digit'"
#endif
/* The verifier's window: the KWSV_WINDOW normalized frames ending KWSV_DELAY frames after the detecting
   frame (before the recording, its first frame). KWSV_STEPS_PER_FRAME 0 runs its steps in one burst at
   the frame the window ends; k > 0 runs at most k of them per frame from the detecting frame on, each
   on a frame that has arrived (the same steps on the same frames: the same outputs), so no frame costs
   more than k steps and a device needs no audio buffer for the burst; the decision comes after the
   last step (k = 1: about KWSV_WINDOW frames after the detection). From the detecting frame on at least
   one step per frame keeps the next frame to step within the last KWSV_WINDOW - KWSV_DELAY frames, so
   the ring never overwrites it. Positions are relative (slots and counts, no frame numbers), so nothing
   overflows in a long run. */
typedef struct {
    int8_t ring[KWSV_WINDOW][KWS_FE_N_MELS]; /* the last normalized frames; head: the slot of the next */
    int8_t first[KWS_FE_N_MELS];             /* frame 0: the frames before the recording */
    int8_t q[KWSV_N_OUTPUTS];                /* the verifier's outputs after its last step */
    int32_t head;
    int32_t heard;                           /* frames heard, up to KWSV_WINDOW */
    int32_t left;                            /* steps left; 0: no detection waiting */
    int32_t lag;                             /* the next frame to step, in frames before the newest */
    int32_t wait;                            /* frames until the window's last frame arrives */
    int32_t cls, score;                      /* the first-stage detection it checks */
    unsigned long frame;
} kws_ver_state_t;

static kws_norm_state_t vnrm;
static kws_ver_state_t ver;
static kwsv_state_t vnet;
#define VER_BYTES (sizeof(vnrm) + sizeof(ver) + sizeof(vnet))

/* a frame (raw features) through the verifier's normalizer into the ring */
static void ver_push(const int8_t *raw) {
    int8_t *f = ver.ring[ver.head]; /* normalized in its slot */
    memcpy(f, raw, KWS_FE_N_MELS);
    norm_step(&vnrm, f);
    if (++ver.head == KWSV_WINDOW) ver.head = 0;
    if (ver.heard == 0) memcpy(ver.first, f, KWS_FE_N_MELS);
    if (ver.heard < KWSV_WINDOW) ++ver.heard;
    if (ver.left > 0) { /* a detection waits: its frames move one further back */
        ++ver.lag;
        if (ver.wait > 0) --ver.wait;
    }
}

/* the window of a detection at the newest frame, wait frames ahead (0: the newest frame ends it) */
static void ver_start(unsigned long frame, int32_t cls, int32_t score, int32_t wait) {
    ver.left = KWSV_WINDOW;
    ver.wait = wait;
    ver.lag = KWSV_WINDOW - 1 - wait;
    ver.frame = frame;
    ver.cls = cls;
    ver.score = score;
    kwsv_reset(&vnet);
}

/* at most max_steps (0: all) of the waiting verifier's steps on the frames that have arrived; 1 when it
   has run its last. Each step is timed alone: a whole window's steps would wrap SysTick's 24 bits. */
static int ver_steps(int32_t max_steps, uint64_t *ticks) {
    int32_t n = 0;
    while (ver.left > 0 && ver.lag >= 0 && (max_steps == 0 || n < max_steps)) {
        int32_t slot = ver.head - 1 - ver.lag;
        const uint32_t t0 = ticks_now();
        if (slot < 0) slot += KWSV_WINDOW;
        kwsv_step_int8(&vnet, ver.lag >= ver.heard ? ver.first : ver.ring[slot], ver.q);
        *ticks += ticks_since(t0);
        --ver.lag;
        --ver.left;
        ++n;
    }
    return ver.left == 0;
}

/* the verifier's decision: its top class (the first on ties, as numpy's argmax) is the detected digit
   and its output >= KWSV_MIN_Q. Prints the kws-verify line, and the detection line when it stands;
   returns 1 then. */
static int ver_decide(void) {
    int32_t k, best = 0, top, ok;
    for (k = 1; k < KWSV_N_OUTPUTS; ++k) {
        if (ver.q[k] > ver.q[best]) best = k;
    }
    top = ver.q[best]; /* an int32 variable: with tau 0, KWSV_MIN_Q -128 would make an int8 test always true */
    ok = best == ver.cls - 2 && top >= KWSV_MIN_Q;
    printf("kws-verify: %lu %ld %ld %d", ver.frame, (long)ver.cls, (long)ver.score, (int)ok);
    for (k = 0; k < KWSV_N_OUTPUTS; ++k) printf(" %d", (int)ver.q[k]);
    printf("\n");
    if (ok) print_detection(ver.frame, (int)ver.cls, ver.score);
    return (int)ok;
}
#else
#define VER_BYTES 0u
#endif

static void det_reset(kws_det_state_t *d) {
    memset(d, 0, sizeof(*d));
    d->quiet = KWS_DET_REFRACTORY;
}

/* returns the detected class (>= 2) or -1; *score gets its smoothed sum */
static int det_step(kws_det_state_t *d, const int8_t *y, int32_t *score) {
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
    if (d->quiet < KWS_DET_REFRACTORY) ++d->quiet; /* no frame numbers: nothing wraps in a long run */
    if (d->sum[best] >= KWS_DET_THRESHOLD && d->quiet >= KWS_DET_REFRACTORY) {
        d->quiet = 0;
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
    unsigned long samples = 0, frames = 0, detections = 0, verifications = 0;
    uint64_t fe_ticks = 0, net_ticks = 0, ver_ticks = 0, mark = 0, worst = 0; /* worst: the costliest frame */
    char fe_text[21], net_text[21], ver_text[21], worst_text[21];
    size_t n, i;
    if (!fi || !fo) {
        printf("stream: cannot open the input or output file\n");
        return 2;
    }
    kws_fe_reset(&fe);
    kws_reset(&net);
    det_reset(&det);
#ifdef KWS_NORM_SHIFT
    norm_reset(&nrm, kws_norm_prior);
#endif
#ifdef KWS_VERIFY
    norm_reset(&vnrm, kwsv_norm_prior);
    memset(&ver, 0, sizeof(ver));
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
#ifdef KWS_VERIFY
                t0 = ticks_now(); /* the verifier's normalizer and ring: counted with the front end */
                ver_push(feat); /* before the streaming model's normalizer changes feat */
                fe_ticks += ticks_since(t0);
#endif
#ifdef KWS_NORM_SHIFT
                t0 = ticks_now();
                norm_step(&nrm, feat);
                fe_ticks += ticks_since(t0);
#endif
                t0 = ticks_now();
                kws_step_int8(&net, feat, y);
                net_ticks += ticks_since(t0);
                fwrite(y, 1, sizeof(y), fo);
                cls = det_step(&det, y, &score);
#ifdef KWS_VERIFY
                if (cls >= 0) ver_start(frames, cls, score, KWSV_DELAY);
                if (ver.left > 0 && (KWSV_STEPS_PER_FRAME > 0 || ver.wait == 0)
                    && ver_steps(KWSV_STEPS_PER_FRAME, &ver_ticks)) {
                    detections += (unsigned long)ver_decide();
                    ++verifications;
                }
#else
                if (cls >= 0) {
                    print_detection(frames, cls, score);
                    ++detections;
                }
#endif
                ++frames;
                if (fe_ticks + net_ticks + ver_ticks - mark > worst) worst = fe_ticks + net_ticks + ver_ticks - mark;
                mark = fe_ticks + net_ticks + ver_ticks;
            }
        }
    }
#ifdef KWS_VERIFY
    if (ver.left > 0) { /* a detection waits: the window ends at the last frame if its end has not come */
        if (ver.wait > 0) ver_start(ver.frame, ver.cls, ver.score, 0); /* (its steps so far counted too) */
        ver_steps(0, &ver_ticks);
        detections += (unsigned long)ver_decide();
        ++verifications;
    }
#endif
    fclose(fi);
    fclose(fo);
    printf("kws-stats: samples=%lu frames=%lu fe_ticks=%s net_ticks=%s detections=%lu fe_bytes=%lu net_bytes=%lu "
           "det_bytes=%lu verifications=%lu ver_ticks=%s ver_bytes=%lu frame_ticks_max=%s\n", samples, frames,
           u64_text(fe_ticks, fe_text), u64_text(net_ticks, net_text), detections,
           (unsigned long)(sizeof(fe) + NORM_BYTES), (unsigned long)sizeof(net), (unsigned long)sizeof(det),
           verifications, u64_text(ver_ticks, ver_text), (unsigned long)VER_BYTES, u64_text(worst, worst_text));
    return 0;
}
