/* FROZEN REFERENCE: a copy of the original plain src/ code. checks.sh compares the program
 * against it, so it must never be edited or optimized. */
/* ops.h - the tensor operations of the tinyllm forward pass. */
#ifndef TINYLLM_OPS_H
#define TINYLLM_OPS_H

/* y[i] = dot(w[i, :], x) for n_out rows; x and each row of w have n_in floats.
 * Batched: X is n_tok x n_in, Y is n_tok x n_out (row-major). */
void matmul(float *Y, const float *X, const float *w, int n_tok, int n_in, int n_out);

#include <string.h>

/* 8-wide GCC vector type: compiles to SIMD on x86 and ARM, scalar code elsewhere. */
typedef float v8 __attribute__((vector_size(32)));

static inline v8 load8(const float *p) { v8 v; memcpy(&v, p, sizeof v); return v; }
static inline void store8(float *p, v8 v) { memcpy(p, &v, sizeof v); }

static inline float vec_dot(const float *a, const float *b, int n) {
    v8 acc0 = {0}, acc1 = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 += load8(a + i) * load8(b + i);
        acc1 += load8(a + i + 8) * load8(b + i + 8);
    }
    for (; i + 8 <= n; i += 8) acc0 += load8(a + i) * load8(b + i);
    acc0 += acc1;
    float sum = 0.0f;
    for (int k = 0; k < 8; k++) sum += acc0[k];
    for (; i < n; i++) sum += a[i] * b[i];
    return sum;
}

/* y += a * x */
static inline void vec_mad(float *y, const float *x, float a, int n) {
    v8 va = {a, a, a, a, a, a, a, a};
    int i = 0;
    for (; i + 8 <= n; i += 8) store8(y + i, load8(y + i) + va * load8(x + i));
    for (; i < n; i++) y[i] += a * x[i];
}

/* RMSNorm of n_rows rows of dim floats: out = x / rms(x) * w. */
void rmsnorm(float *out, const float *x, const float *w, int n_rows, int dim);

/* Attention softmax of one score row of n floats: out = softmax(scores * scale + mask). */
void softmax(float *out, const float *scores, const float *mask, int n, float scale);
/* The same without the final normalization: out = exp(scores * scale + mask - max);
 * returns 1 / sum(out). softmax() is this followed by out *= the returned value. */
float softmax_exp(float *out, const float *scores, const float *mask, int n, float scale);

/* SwiGLU gate in place: h1 = silu(h1) * h3, n floats. */
void swiglu(float *h1, const float *h3, int n);

/* Rotary position embedding of one row (n_heads heads of head_dim) at position pos. */
void rope(float *x, int n_heads, int head_dim, const float *cos_t, const float *sin_t);

void vec_add(float *y, const float *x, int n);   /* y += x */

#endif
