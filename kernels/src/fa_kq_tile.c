/*
 * 4. Flash-attention KQ tile: scale + mask + running max.
 *
 * Unfused (llama.cpp flash_attn_ext tiled path, used for prompt processing): after the Q*K^T
 * GEMM of a tile, scale the whole tile, add the (slope-multiplied, f32) mask tile, then take each
 * row's maximum in a scalar loop: three passes over the tile. Fused: one pass per row, an FMA
 * kq*scale + mask, store, running max in registers.
 * Rounding: the reference rounds kq*scale then the sum; the scalar fused path does the same
 * (bit-identical), the SIMD paths round once (FMA) -- see kfuse.h.
 */
#include "kf_internal.h"

KF_REF void kf_fa_kq_tile_ref(int rows, int cols, float *kq, const float *mask, float scale, float *row_max) {
    const int n = rows * cols;
    for (int i = 0; i < n; ++i) kq[i] *= scale;                       /* pass 1: scale tile */
    if (mask) for (int i = 0; i < n; ++i) kq[i] = kq[i] + mask[i];    /* pass 2: add mask tile */
    for (int r = 0; r < rows; ++r) {                                  /* pass 3: row maxima */
        float max = -INFINITY;
        for (int c = 0; c < cols; ++c) max = KF_MAX(max, kq[r * cols + c]);
        row_max[r] = max;
    }
}

void kf_fa_kq_tile_scalar(int rows, int cols, float *kq, const float *mask, float scale, float *row_max) {
    for (int r = 0; r < rows; ++r) {
        float *row = kq + (size_t) r * cols;
        const float *m = mask ? mask + (size_t) r * cols : NULL;
        float max = -INFINITY;
        for (int c = 0; c < cols; ++c) {
            const float t = row[c] * scale;
            const float v = m ? t + m[c] : t;
            row[c] = v;
            max = KF_MAX(max, v);
        }
        row_max[r] = max;
    }
}

#ifdef KF_HAVE_X86
KF_AVX2 static float kq_row_avx2(int n, float *row, const float *m, float scale) {
    const __m256 vs = _mm256_set1_ps(scale);
    __m256 vmax0 = _mm256_set1_ps(-INFINITY), vmax1 = vmax0;
    int i = 0;
    if (m) {
        for (; i + 16 <= n; i += 16) {
            __m256 v0 = _mm256_fmadd_ps(_mm256_loadu_ps(row + i),     vs, _mm256_loadu_ps(m + i));
            __m256 v1 = _mm256_fmadd_ps(_mm256_loadu_ps(row + i + 8), vs, _mm256_loadu_ps(m + i + 8));
            _mm256_storeu_ps(row + i, v0);
            _mm256_storeu_ps(row + i + 8, v1);
            vmax0 = _mm256_max_ps(vmax0, v0);
            vmax1 = _mm256_max_ps(vmax1, v1);
        }
        for (; i + 8 <= n; i += 8) {
            __m256 v0 = _mm256_fmadd_ps(_mm256_loadu_ps(row + i), vs, _mm256_loadu_ps(m + i));
            _mm256_storeu_ps(row + i, v0);
            vmax0 = _mm256_max_ps(vmax0, v0);
        }
    } else {
        for (; i + 8 <= n; i += 8) {
            __m256 v0 = _mm256_mul_ps(_mm256_loadu_ps(row + i), vs);
            _mm256_storeu_ps(row + i, v0);
            vmax0 = _mm256_max_ps(vmax0, v0);
        }
    }
    float max = kf_hmax256(_mm256_max_ps(vmax0, vmax1));
    for (; i < n; ++i) {
        const float v = m ? fmaf(row[i], scale, m[i]) : row[i] * scale;
        row[i] = v;
        max = KF_MAX(max, v);
    }
    return max;
}

KF_AVX2 void kf_fa_kq_tile_avx2(int rows, int cols, float *kq, const float *mask, float scale, float *row_max) {
    for (int r = 0; r < rows; ++r)
        row_max[r] = kq_row_avx2(cols, kq + (size_t) r * cols, mask ? mask + (size_t) r * cols : NULL, scale);
}

KF_AVX512 static float kq_row_avx512(int n, float *row, const float *m, float scale) {
    const __m512 vs = _mm512_set1_ps(scale);
    __m512 vmax0 = _mm512_set1_ps(-INFINITY), vmax1 = vmax0;
    int i = 0;
    if (m) {
        for (; i + 32 <= n; i += 32) {
            __m512 v0 = _mm512_fmadd_ps(_mm512_loadu_ps(row + i),      vs, _mm512_loadu_ps(m + i));
            __m512 v1 = _mm512_fmadd_ps(_mm512_loadu_ps(row + i + 16), vs, _mm512_loadu_ps(m + i + 16));
            _mm512_storeu_ps(row + i, v0);
            _mm512_storeu_ps(row + i + 16, v1);
            vmax0 = _mm512_max_ps(vmax0, v0);
            vmax1 = _mm512_max_ps(vmax1, v1);
        }
        for (; i < n; i += 16) {
            const __mmask16 k = (n - i >= 16) ? (__mmask16) 0xFFFF : (__mmask16) ((1u << (n - i)) - 1);
            __m512 v0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, row + i), vs, _mm512_maskz_loadu_ps(k, m + i));
            _mm512_mask_storeu_ps(row + i, k, v0);
            vmax0 = _mm512_mask_max_ps(vmax0, k, vmax0, v0);
        }
    } else {
        for (; i < n; i += 16) {
            const __mmask16 k = (n - i >= 16) ? (__mmask16) 0xFFFF : (__mmask16) ((1u << (n - i)) - 1);
            __m512 v0 = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, row + i), vs);
            _mm512_mask_storeu_ps(row + i, k, v0);
            vmax0 = _mm512_mask_max_ps(vmax0, k, vmax0, v0);
        }
    }
    return kf_hmax512(_mm512_max_ps(vmax0, vmax1));
}

KF_AVX512 void kf_fa_kq_tile_avx512(int rows, int cols, float *kq, const float *mask, float scale, float *row_max) {
    for (int r = 0; r < rows; ++r)
        row_max[r] = kq_row_avx512(cols, kq + (size_t) r * cols, mask ? mask + (size_t) r * cols : NULL, scale);
}
#endif

#ifdef KF_HAVE_NEON
static float kq_row_neon(int n, float *row, const float *m, float scale) {
    const float32x4_t vs = vdupq_n_f32(scale);
    float32x4_t vmax0 = vdupq_n_f32(-INFINITY), vmax1 = vmax0;
    int i = 0;
    if (m) {
        for (; i + 8 <= n; i += 8) {
            float32x4_t v0 = vfmaq_f32(vld1q_f32(m + i),     vld1q_f32(row + i),     vs);
            float32x4_t v1 = vfmaq_f32(vld1q_f32(m + i + 4), vld1q_f32(row + i + 4), vs);
            vst1q_f32(row + i, v0);
            vst1q_f32(row + i + 4, v1);
            vmax0 = vmaxq_f32(vmax0, v0);
            vmax1 = vmaxq_f32(vmax1, v1);
        }
    } else {
        for (; i + 4 <= n; i += 4) {
            float32x4_t v0 = vmulq_f32(vld1q_f32(row + i), vs);
            vst1q_f32(row + i, v0);
            vmax0 = vmaxq_f32(vmax0, v0);
        }
    }
    float max = vmaxvq_f32(vmaxq_f32(vmax0, vmax1));
    for (; i < n; ++i) {
        const float v = m ? fmaf(row[i], scale, m[i]) : row[i] * scale;
        row[i] = v;
        max = KF_MAX(max, v);
    }
    return max;
}

void kf_fa_kq_tile_neon(int rows, int cols, float *kq, const float *mask, float scale, float *row_max) {
    for (int r = 0; r < rows; ++r)
        row_max[r] = kq_row_neon(cols, kq + (size_t) r * cols, mask ? mask + (size_t) r * cols : NULL, scale);
}
#endif
