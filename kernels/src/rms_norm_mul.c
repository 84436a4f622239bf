/*
 * 3. RMS_NORM followed by MUL (graph-level fusion).
 *
 * Unfused: the norm writes y = x*scale (copy + scale), then the MUL node reads y and the weights
 * and writes y*w: three passes and a full intermediate tensor. Fused: y = (x*scale)*w in one
 * pass. In a graph this is only valid when the norm's output has no other consumer.
 * Both forms round x*scale first and then the product with w: every path is bit-identical.
 */
#include "kf_internal.h"

KF_REF void kf_rms_scale_mul_ref(int n, float *y, const float *x, float scale, const float *w) {
    if (y != x) memcpy(y, x, (size_t) n * sizeof(float));   /* norm, pass 1: copy */
    for (int i = 0; i < n; ++i) y[i] *= scale;               /* norm, pass 2: scale */
    for (int i = 0; i < n; ++i) y[i] = y[i] * w[i];          /* MUL node: another pass */
}

void kf_rms_scale_mul_scalar(int n, float *y, const float *x, float scale, const float *w) {
    for (int i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

#ifdef KF_HAVE_X86
KF_AVX2 void kf_rms_scale_mul_avx2(int n, float *y, const float *x, float scale, const float *w) {
    const __m256 vs = _mm256_set1_ps(scale);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
        __m256 b = _mm256_mul_ps(_mm256_loadu_ps(x + i + 8), vs);
        _mm256_storeu_ps(y + i,     _mm256_mul_ps(a, _mm256_loadu_ps(w + i)));
        _mm256_storeu_ps(y + i + 8, _mm256_mul_ps(b, _mm256_loadu_ps(w + i + 8)));
    }
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
    for (; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

KF_AVX512 void kf_rms_scale_mul_avx512(int n, float *y, const float *x, float scale, const float *w) {
    const __m512 vs = _mm512_set1_ps(scale);
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_mul_ps(_mm512_loadu_ps(x + i), vs);
        __m512 b = _mm512_mul_ps(_mm512_loadu_ps(x + i + 16), vs);
        _mm512_storeu_ps(y + i,      _mm512_mul_ps(a, _mm512_loadu_ps(w + i)));
        _mm512_storeu_ps(y + i + 16, _mm512_mul_ps(b, _mm512_loadu_ps(w + i + 16)));
    }
    for (; i < n; i += 16) {
        const __mmask16 k = (n - i >= 16) ? (__mmask16) 0xFFFF : (__mmask16) ((1u << (n - i)) - 1);
        __m512 a = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vs);
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(a, _mm512_maskz_loadu_ps(k, w + i)));
    }
}
#endif

#ifdef KF_HAVE_NEON
void kf_rms_scale_mul_neon(int n, float *y, const float *x, float scale, const float *w) {
    const float32x4_t vs = vdupq_n_f32(scale);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        float32x4_t a = vmulq_f32(vld1q_f32(x + i), vs);
        float32x4_t b = vmulq_f32(vld1q_f32(x + i + 4), vs);
        vst1q_f32(y + i,     vmulq_f32(a, vld1q_f32(w + i)));
        vst1q_f32(y + i + 4, vmulq_f32(b, vld1q_f32(w + i + 4)));
    }
    for (; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}
#endif
