/* FROZEN REFERENCE: a copy of the original plain src/ code. checks.sh compares the program
 * against it, so it must never be edited or optimized. */
/* ops.c - tensor operations, written the plain way: one simple loop per step.
 *
 * The dot product and the multiply-add use 8-wide GCC vector types (as a SIMD backend
 * would); the normalisation, softmax and gating steps are separate passes over memory,
 * each doing one thing, as the original CPU backend did them. */
#include "ops.h"

#include <math.h>
#include <string.h>

void vec_add(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += x[i];
}

void matmul(float *Y, const float *X, const float *w, int n_tok, int n_in, int n_out) {
    for (int r = 0; r < n_out; r++) {
        const float *row = w + (long)r * n_in;
        for (int t = 0; t < n_tok; t++) {
            Y[(long)t * n_out + r] = vec_dot(row, X + (long)t * n_in, n_in);
        }
    }
}

void rmsnorm(float *out, const float *x, const float *w, int n_rows, int dim) {
    for (int r = 0; r < n_rows; r++) {
        const float *xr = x + (long)r * dim;
        float *yr = out + (long)r * dim;
        /* pass 1: sum of squares */
        double ss = 0.0;
        for (int i = 0; i < dim; i++) ss += (double)(xr[i] * xr[i]);
        const float scale = 1.0f / sqrtf((float)(ss / dim) + 1e-5f);
        /* pass 2: copy x -> out */
        memcpy(yr, xr, (size_t)dim * sizeof(float));
        /* pass 3: scale */
        for (int i = 0; i < dim; i++) yr[i] *= scale;
        /* pass 4: multiply by the weight */
        for (int i = 0; i < dim; i++) yr[i] *= w[i];
    }
}

float softmax_exp(float *out, const float *scores, const float *mask, int n, float scale) {
    /* pass 1: copy scores -> out */
    memcpy(out, scores, (size_t)n * sizeof(float));
    /* pass 2: scale */
    for (int i = 0; i < n; i++) out[i] *= scale;
    /* pass 3: add the causal mask (0 or -INFINITY) */
    for (int i = 0; i < n; i++) out[i] += mask[i];
    /* pass 4: max */
    float max = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (out[i] > max) max = out[i];
    }
    /* pass 5: exp and sum */
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        float e = expf(out[i] - max);
        out[i] = e;
        sum += e;
    }
    return (float)(1.0 / sum);
}

void softmax(float *out, const float *scores, const float *mask, int n, float scale) {
    const float inv = softmax_exp(out, scores, mask, n, scale);
    /* pass 6: normalize */
    for (int i = 0; i < n; i++) out[i] *= inv;
}

void swiglu(float *h1, const float *h3, int n) {
    /* pass 1: silu */
    for (int i = 0; i < n; i++) h1[i] = h1[i] / (1.0f + expf(-h1[i]));
    /* pass 2: multiply by the up projection */
    for (int i = 0; i < n; i++) h1[i] *= h3[i];
}

void rope(float *x, int n_heads, int head_dim, const float *cos_t, const float *sin_t) {
    for (int h = 0; h < n_heads; h++) {
        float *v = x + h * head_dim;
        for (int i = 0; i < head_dim / 2; i++) {
            float a = v[2 * i], b = v[2 * i + 1];
            v[2 * i] = a * cos_t[i] - b * sin_t[i];
            v[2 * i + 1] = a * sin_t[i] + b * cos_t[i];
        }
    }
}
