/*
 * lmu_float.h -- the runtime's float32 path: the same layers and memories as the
 * integer families, in float (define LMU_NO_FLOAT to leave it out). Part of lmu_runtime.h.
 */
#ifndef LMU_FLOAT_H
#define LMU_FLOAT_H

#include "lmu_config.h"

/* ------------------------------------------------------------------------------------------ */
/* float32 path                                                                               */
/* ------------------------------------------------------------------------------------------ */
#ifndef LMU_NO_FLOAT

enum { LMU_LINEAR = 0, LMU_RELU, LMU_RELU6, LMU_TANH, LMU_SIGMOID, LMU_SOFTMAX, LMU_SILU };

static inline void lmu_f_activation(int32_t act, float *y, int32_t n) {
    int32_t i;
    float mx, sum;
    switch (act) {
    case LMU_RELU:
        for (i = 0; i < n; ++i)
            y[i] = y[i] > 0.0f ? y[i] : 0.0f;
        break;
    case LMU_RELU6:
        for (i = 0; i < n; ++i)
            y[i] = y[i] < 0.0f ? 0.0f : (y[i] > 6.0f ? 6.0f : y[i]);
        break;
    case LMU_TANH:
        for (i = 0; i < n; ++i)
            y[i] = tanhf(y[i]);
        break;
    case LMU_SIGMOID:
        for (i = 0; i < n; ++i)
            y[i] = 1.0f / (1.0f + expf(-y[i]));
        break;
    case LMU_SILU:
        for (i = 0; i < n; ++i)
            y[i] = y[i] / (1.0f + expf(-y[i]));
        break;
    case LMU_SOFTMAX:
        mx = y[0];
        for (i = 1; i < n; ++i)
            mx = y[i] > mx ? y[i] : mx;
        sum = 0.0f;
        for (i = 0; i < n; ++i) {
            y[i] = expf(y[i] - mx);
            sum += y[i];
        }
        for (i = 0; i < n; ++i)
            y[i] /= sum;
        break;
    default:
        break;
    }
}

/* y = x @ W (+ y when accumulate), W given transposed: (n_out, n_in) */
static inline void lmu_f_matvec(const float *W, const float *x, float *y, int32_t n_in, int32_t n_out,
                                int32_t accumulate) {
    int32_t j, i;
    for (j = 0; j < n_out; ++j) {
        const float *w = W + j * n_in;
        float acc = accumulate ? y[j] : 0.0f;
        for (i = 0; i < n_in; ++i) {
            acc += w[i] * x[i];
        }
        y[j] = acc;
    }
}

static inline void lmu_f_add_bias(float *y, const float *b, int32_t n) {
    int32_t i;
    if (b) {
        for (i = 0; i < n; ++i)
            y[i] += b[i];
    }
}

/* m = Abar m + Bbar u per channel; tmp has q floats */
static inline void lmu_f_dense_memory(float *m, const float *u, int32_t d, int32_t q, const float *A, const float *B,
                                      float *tmp) {
    int32_t c, i, j;
    for (c = 0; c < d; ++c) {
        float *mc = m + c * q;
        for (i = 0; i < q; ++i) {
            float acc = 0.0f;
            for (j = 0; j < q; ++j)
                acc += A[i * q + j] * mc[j];
            tmp[i] = acc + B[i] * u[c];
        }
        memcpy(mc, tmp, sizeof(float) * (size_t)q);
    }
}

/* structured RK (Taylor / Horner form, see lmu_edge/lti.py); hc = c_i / substeps; w has r*q floats */
static inline void lmu_f_rk_memory(float *m, const float *u, int32_t d, int32_t q, const float *hc, int32_t r,
                                   int32_t substeps, float *w) {
    static const float inv[5] = {0.0f, 1.0f, 0.5f, 1.0f / 3.0f, 0.25f};
    int32_t c, s, i, k;
    for (c = 0; c < d; ++c) {
        float *mc = m + c * q;
        for (s = 0; s < substeps; ++s) {
            float P = 0.0f, S = 0.0f, T = 0.0f;
            for (i = 0; i < q; ++i)
                T += mc[i];
            for (i = 0; i < q; ++i) {
                const float alt = (i & 1) ? -1.0f : 1.0f;
                P += mc[i];
                S += alt * mc[i];
                w[i] = hc[i] * (P - T + alt * (u[c] - S));
            }
            for (k = 1; k < r; ++k) {
                const float *prev = w + (k - 1) * q;
                float *cur = w + k * q;
                P = 0.0f;
                S = 0.0f;
                T = 0.0f;
                for (i = 0; i < q; ++i)
                    T += prev[i];
                for (i = 0; i < q; ++i) {
                    const float alt = (i & 1) ? -1.0f : 1.0f;
                    P += prev[i];
                    S += alt * prev[i];
                    cur[i] = hc[i] * (P - T - alt * S);
                }
            }
            for (i = 0; i < q; ++i) {
                float acc = w[(r - 1) * q + i];
                for (k = r - 1; k >= 1; --k)
                    acc = w[(k - 1) * q + i] + acc * inv[k + 1];
                mc[i] += acc;
            }
        }
    }
}

static inline void lmu_f_fir_memory(float *m, const float *u, int32_t d, int32_t q, const float *K, int32_t L,
                                    float *buf, int32_t *head) {
    int32_t c, i, k;
    *head = (*head + 1) % L;
    for (c = 0; c < d; ++c) {
        float *bc = buf + c * L;
        bc[*head] = u[c];
        for (i = 0; i < q; ++i) {
            const float *row = K + i * L;
            float acc = 0.0f;
            int32_t pos = *head;
            for (k = 0; k < L; ++k) {
                acc += row[k] * bc[pos];
                pos = pos == 0 ? L - 1 : pos - 1;
            }
            m[c * q + i] = acc;
        }
    }
}

static inline void lmu_f_pool(float *sum, int32_t *count, const float *x, float *y, int32_t n) {
    int32_t i;
    *count += 1;
    for (i = 0; i < n; ++i) {
        sum[i] += x[i];
        y[i] = sum[i] / (float)(*count);
    }
}

#endif /* LMU_NO_FLOAT */

#endif /* LMU_FLOAT_H */
