/* Internal: ISA macros and the per-variant symbols each kernel source defines. */
#ifndef KF_INTERNAL_H
#define KF_INTERNAL_H

#include "kfuse.h"
#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#  define KF_HAVE_X86 1
#  include <immintrin.h>
/* Per-function targets: the library itself is compiled for the baseline ISA, so it loads and
 * runs on any x86-64; these functions are only called after run-time detection. */
#  define KF_AVX2   __attribute__((target("avx2,fma")))
#  define KF_AVX512 __attribute__((target("avx512f,avx2,fma")))
/* The references are auto-vectorized like llama.cpp's ggml_vec_* helpers are on a -march=native
 * build, so the benchmark compares fused against a fair unfused form, not against SSE2. */
#  define KF_REF __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#ifndef KF_REF
#  define KF_REF
#endif

#if defined(__aarch64__) && defined(__ARM_NEON)
#  define KF_HAVE_NEON 1
#  include <arm_neon.h>
#endif

/* llama.cpp's MAX: the order of the comparison matters for NaN, see kfuse.h. */
#define KF_MAX(a, b) ((a) > (b) ? (a) : (b))

#define KF_DECLARE_VARIANTS(ret, name, args) \
    ret name##_ref args; ret name##_scalar args; ret name##_avx2 args; ret name##_avx512 args; ret name##_neon args;

KF_DECLARE_VARIANTS(float, kf_softmax_prep, (int n, float *wp, const float *sp, const float *mask, float scale, float slope))
KF_DECLARE_VARIANTS(void, kf_rms_scale, (int n, float *y, const float *x, float scale))
KF_DECLARE_VARIANTS(void, kf_rms_scale_mul, (int n, float *y, const float *x, float scale, const float *w))
KF_DECLARE_VARIANTS(void, kf_fa_kq_tile, (int rows, int cols, float *kq, const float *mask, float scale, float *row_max))
KF_DECLARE_VARIANTS(void, kf_quantize_q8_0, (int64_t n, const float *x, kf_block_q8_0 *y))

#ifdef KF_HAVE_X86
KF_AVX2 static inline float kf_hmax256(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}
KF_AVX512 static inline float kf_hmax512(__m512 v) {
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    __m256 m8 = _mm256_max_ps(lo, hi);
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}
#endif

#endif
