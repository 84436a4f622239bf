/*
 * 1. Softmax input pass.
 *
 * Unfused (llama.cpp soft_max_f32): copy the row to a scratch buffer, scale it in place, add
 * slope*mask in place, then take the maximum in a scalar loop: four passes over the row.
 * Fused: one pass that reads the row and the mask once, writes the scratch row once and keeps a
 * running maximum in registers.
 */
#include "kf_internal.h"

KF_REF float kf_softmax_prep_ref(int n, float *wp, const float *sp, const float *mask, float scale, float slope) {
    if (wp != sp) memcpy(wp, sp, (size_t) n * sizeof(float));                 /* pass 1: copy */
    for (int i = 0; i < n; ++i) wp[i] *= scale;                                /* pass 2: scale */
    if (mask) for (int i = 0; i < n; ++i) wp[i] += slope * mask[i];            /* pass 3: mask */
    float max = -INFINITY;
    for (int i = 0; i < n; ++i) max = KF_MAX(max, wp[i]);                      /* pass 4: max */
    return max;
}

/* Same roundings as the reference, one pass: bit-identical. */
float kf_softmax_prep_scalar(int n, float *wp, const float *sp, const float *mask, float scale, float slope) {
    float max = -INFINITY;
    if (mask) {
        for (int i = 0; i < n; ++i) {
            const float t = sp[i] * scale;
            const float v = t + slope * mask[i];
            wp[i] = v;
            max = KF_MAX(max, v);
        }
    } else {
        for (int i = 0; i < n; ++i) {
            const float v = sp[i] * scale;
            wp[i] = v;
            max = KF_MAX(max, v);
        }
    }
    return max;
}

#ifdef KF_HAVE_X86
KF_AVX2 float kf_softmax_prep_avx2(int n, float *wp, const float *sp, const float *mask, float scale, float slope) {
    const __m256 vs = _mm256_set1_ps(scale);
    __m256 vmax0 = _mm256_set1_ps(-INFINITY), vmax1 = vmax0;
    int i = 0;
    if (mask) {
        const __m256 vsl = _mm256_set1_ps(slope);
        for (; i + 16 <= n; i += 16) {
            __m256 v0 = _mm256_fmadd_ps(_mm256_loadu_ps(sp + i),     vs, _mm256_mul_ps(vsl, _mm256_loadu_ps(mask + i)));
            __m256 v1 = _mm256_fmadd_ps(_mm256_loadu_ps(sp + i + 8), vs, _mm256_mul_ps(vsl, _mm256_loadu_ps(mask + i + 8)));
            _mm256_storeu_ps(wp + i, v0);
            _mm256_storeu_ps(wp + i + 8, v1);
            vmax0 = _mm256_max_ps(vmax0, v0);
            vmax1 = _mm256_max_ps(vmax1, v1);
        }
        for (; i + 8 <= n; i += 8) {
            __m256 v0 = _mm256_fmadd_ps(_mm256_loadu_ps(sp + i), vs, _mm256_mul_ps(vsl, _mm256_loadu_ps(mask + i)));
            _mm256_storeu_ps(wp + i, v0);
            vmax0 = _mm256_max_ps(vmax0, v0);
        }
    } else {
        for (; i + 16 <= n; i += 16) {
            __m256 v0 = _mm256_mul_ps(_mm256_loadu_ps(sp + i), vs);
            __m256 v1 = _mm256_mul_ps(_mm256_loadu_ps(sp + i + 8), vs);
            _mm256_storeu_ps(wp + i, v0);
            _mm256_storeu_ps(wp + i + 8, v1);
            vmax0 = _mm256_max_ps(vmax0, v0);
            vmax1 = _mm256_max_ps(vmax1, v1);
        }
        for (; i + 8 <= n; i += 8) {
            __m256 v0 = _mm256_mul_ps(_mm256_loadu_ps(sp + i), vs);
            _mm256_storeu_ps(wp + i, v0);
            vmax0 = _mm256_max_ps(vmax0, v0);
        }
    }
    float max = kf_hmax256(_mm256_max_ps(vmax0, vmax1));
    for (; i < n; ++i) {
        const float v = mask ? fmaf(sp[i], scale, slope * mask[i]) : sp[i] * scale;
        wp[i] = v;
        max = KF_MAX(max, v);
    }
    return max;
}

KF_AVX512 float kf_softmax_prep_avx512(int n, float *wp, const float *sp, const float *mask, float scale, float slope) {
    const __m512 vs = _mm512_set1_ps(scale);
    const __m512 vsl = _mm512_set1_ps(slope);
    __m512 vmax0 = _mm512_set1_ps(-INFINITY), vmax1 = vmax0;
    int i = 0;
    if (mask) {
        for (; i + 32 <= n; i += 32) {
            __m512 v0 = _mm512_fmadd_ps(_mm512_loadu_ps(sp + i),      vs, _mm512_mul_ps(vsl, _mm512_loadu_ps(mask + i)));
            __m512 v1 = _mm512_fmadd_ps(_mm512_loadu_ps(sp + i + 16), vs, _mm512_mul_ps(vsl, _mm512_loadu_ps(mask + i + 16)));
            _mm512_storeu_ps(wp + i, v0);
            _mm512_storeu_ps(wp + i + 16, v1);
            vmax0 = _mm512_max_ps(vmax0, v0);
            vmax1 = _mm512_max_ps(vmax1, v1);
        }
        for (; i < n; i += 16) {   /* masked tail: loads of lanes past n do not fault */
            const __mmask16 k = (n - i >= 16) ? (__mmask16) 0xFFFF : (__mmask16) ((1u << (n - i)) - 1);
            __m512 v0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, sp + i), vs,
                                        _mm512_mul_ps(vsl, _mm512_maskz_loadu_ps(k, mask + i)));
            _mm512_mask_storeu_ps(wp + i, k, v0);
            vmax0 = _mm512_mask_max_ps(vmax0, k, vmax0, v0);
        }
    } else {
        for (; i + 32 <= n; i += 32) {
            __m512 v0 = _mm512_mul_ps(_mm512_loadu_ps(sp + i), vs);
            __m512 v1 = _mm512_mul_ps(_mm512_loadu_ps(sp + i + 16), vs);
            _mm512_storeu_ps(wp + i, v0);
            _mm512_storeu_ps(wp + i + 16, v1);
            vmax0 = _mm512_max_ps(vmax0, v0);
            vmax1 = _mm512_max_ps(vmax1, v1);
        }
        for (; i < n; i += 16) {
            const __mmask16 k = (n - i >= 16) ? (__mmask16) 0xFFFF : (__mmask16) ((1u << (n - i)) - 1);
            __m512 v0 = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, sp + i), vs);
            _mm512_mask_storeu_ps(wp + i, k, v0);
            vmax0 = _mm512_mask_max_ps(vmax0, k, vmax0, v0);
        }
    }
    return kf_hmax512(_mm512_max_ps(vmax0, vmax1));
}
#endif

#ifdef KF_HAVE_NEON
float kf_softmax_prep_neon(int n, float *wp, const float *sp, const float *mask, float scale, float slope) {
    const float32x4_t vs = vdupq_n_f32(scale);
    float32x4_t vmax0 = vdupq_n_f32(-INFINITY), vmax1 = vmax0;
    int i = 0;
    if (mask) {
        const float32x4_t vsl = vdupq_n_f32(slope);
        for (; i + 8 <= n; i += 8) {
            /* vfmaq_f32(a, b, c) = a + b*c, rounded once */
            float32x4_t v0 = vfmaq_f32(vmulq_f32(vsl, vld1q_f32(mask + i)),     vld1q_f32(sp + i),     vs);
            float32x4_t v1 = vfmaq_f32(vmulq_f32(vsl, vld1q_f32(mask + i + 4)), vld1q_f32(sp + i + 4), vs);
            vst1q_f32(wp + i, v0);
            vst1q_f32(wp + i + 4, v1);
            vmax0 = vmaxq_f32(vmax0, v0);
            vmax1 = vmaxq_f32(vmax1, v1);
        }
    } else {
        for (; i + 8 <= n; i += 8) {
            float32x4_t v0 = vmulq_f32(vld1q_f32(sp + i), vs);
            float32x4_t v1 = vmulq_f32(vld1q_f32(sp + i + 4), vs);
            vst1q_f32(wp + i, v0);
            vst1q_f32(wp + i + 4, v1);
            vmax0 = vmaxq_f32(vmax0, v0);
            vmax1 = vmaxq_f32(vmax1, v1);
        }
    }
    float max = vmaxvq_f32(vmaxq_f32(vmax0, vmax1));
    for (; i < n; ++i) {
        const float v = mask ? fmaf(sp[i], scale, slope * mask[i]) : sp[i] * scale;
        wp[i] = v;
        max = KF_MAX(max, v);
    }
    return max;
}
#endif
