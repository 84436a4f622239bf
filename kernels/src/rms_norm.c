/*
 * 2. RMS norm output pass.
 *
 * Unfused (llama.cpp rms_norm_f32): memcpy(y, x) and then scale y in place: two passes, the
 * second re-reading what the first just wrote. Fused: y[i] = x[i]*scale in one pass.
 * The product is the only rounding in either form, so every path is bit-identical.
 */
#include "kf_internal.h"

KF_REF void kf_rms_scale_ref(int n, float *y, const float *x, float scale) {
    if (y != x) memcpy(y, x, (size_t) n * sizeof(float));   /* pass 1: copy */
    for (int i = 0; i < n; ++i) y[i] *= scale;               /* pass 2: scale */
}

void kf_rms_scale_scalar(int n, float *y, const float *x, float scale) {
    for (int i = 0; i < n; ++i) y[i] = x[i] * scale;
}

#ifdef KF_HAVE_X86
KF_AVX2 void kf_rms_scale_avx2(int n, float *y, const float *x, float scale) {
    const __m256 vs = _mm256_set1_ps(scale);
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        __m256 c = _mm256_loadu_ps(x + i + 16), d = _mm256_loadu_ps(x + i + 24);
        _mm256_storeu_ps(y + i,      _mm256_mul_ps(a, vs));
        _mm256_storeu_ps(y + i + 8,  _mm256_mul_ps(b, vs));
        _mm256_storeu_ps(y + i + 16, _mm256_mul_ps(c, vs));
        _mm256_storeu_ps(y + i + 24, _mm256_mul_ps(d, vs));
    }
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    for (; i < n; ++i) y[i] = x[i] * scale;
}

KF_AVX512 void kf_rms_scale_avx512(int n, float *y, const float *x, float scale) {
    const __m512 vs = _mm512_set1_ps(scale);
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        _mm512_storeu_ps(y + i,      _mm512_mul_ps(a, vs));
        _mm512_storeu_ps(y + i + 16, _mm512_mul_ps(b, vs));
    }
    for (; i < n; i += 16) {
        const __mmask16 k = (n - i >= 16) ? (__mmask16) 0xFFFF : (__mmask16) ((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vs));
    }
}
#endif

#ifdef KF_HAVE_NEON
void kf_rms_scale_neon(int n, float *y, const float *x, float scale) {
    const float32x4_t vs = vdupq_n_f32(scale);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4), c = vld1q_f32(x + i + 8), d = vld1q_f32(x + i + 12);
        vst1q_f32(y + i,      vmulq_f32(a, vs));
        vst1q_f32(y + i + 4,  vmulq_f32(b, vs));
        vst1q_f32(y + i + 8,  vmulq_f32(c, vs));
        vst1q_f32(y + i + 12, vmulq_f32(d, vs));
    }
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vld1q_f32(x + i), vs));
    for (; i < n; ++i) y[i] = x[i] * scale;
}
#endif
