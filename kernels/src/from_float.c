/*
 * 5. Activation quantization (from_float) and how its work is split across threads.
 *
 * Before a quantized matmul, llama.cpp quantizes the f32 activations to q8_0. In the repacked
 * Q4_0 path, groups of 4 rows are dealt round-robin to the threads and the leftover rows
 * (nrows % 4) go one per thread starting at thread 0. At generation there is one row, so one
 * thread quantizes the whole row while the others wait at the barrier (KF_SPLIT_ROWS).
 * Adaptive split: keep the row split when there are many rows (prompt); when fewer leftover rows
 * remain than threads, split each leftover row into contiguous block ranges over all threads
 * (KF_SPLIT_ADAPTIVE). q8_0 blocks are independent, so the bytes written are identical.
 *
 * The quantizer itself (per 32-float block: d = amax/127, q = round-half-even(x/d)) has scalar,
 * AVX2, AVX-512 and NEON versions that are bit-identical to each other. NaN input is unsupported
 * (as in llama.cpp).
 */
#include "kf_internal.h"

static void quantize_block_scalar(const float *x, kf_block_q8_0 *y) {
    float amax = 0.0f;
    for (int j = 0; j < KF_QK8_0; ++j) amax = KF_MAX(amax, fabsf(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = d;
    for (int j = 0; j < KF_QK8_0; ++j) y->qs[j] = (int8_t) lrintf(x[j] * id);
}

void kf_quantize_q8_0_scalar(int64_t n, const float *x, kf_block_q8_0 *y) {
    for (int64_t b = 0; b < n / KF_QK8_0; ++b) quantize_block_scalar(x + b * KF_QK8_0, y + b);
}

void kf_quantize_q8_0_ref(int64_t n, const float *x, kf_block_q8_0 *y) {
    kf_quantize_q8_0_scalar(n, x, y);
}

#ifdef KF_HAVE_X86
KF_AVX2 void kf_quantize_q8_0_avx2(int64_t n, const float *x, kf_block_q8_0 *y) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < n / KF_QK8_0; ++b) {
        const float *xb = x + b * KF_QK8_0;
        __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
        __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
        __m256 am = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                  _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        const float amax = KF_MAX(0.0f, kf_hmax256(am));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = d;
        const __m256 vid = _mm256_set1_ps(id);
        /* cvtps rounds with MXCSR (round half to even by default), like lrintf */
        __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, vid)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, vid));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, vid)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, vid));
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        _mm256_storeu_si256((__m256i *) y[b].qs, _mm256_permutevar8x32_epi32(p, perm));
    }
}

KF_AVX512 void kf_quantize_q8_0_avx512(int64_t n, const float *x, kf_block_q8_0 *y) {
    for (int64_t b = 0; b < n / KF_QK8_0; ++b) {
        const float *xb = x + b * KF_QK8_0;
        __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
        __m512 am = _mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1));
        const float amax = KF_MAX(0.0f, kf_hmax512(am));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = d;
        const __m512 vid = _mm512_set1_ps(id);
        __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid)), i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
        _mm_storeu_si128((__m128i *) y[b].qs,        _mm512_cvtsepi32_epi8(i0));
        _mm_storeu_si128((__m128i *) (y[b].qs + 16), _mm512_cvtsepi32_epi8(i1));
    }
}
#endif

#ifdef KF_HAVE_NEON
void kf_quantize_q8_0_neon(int64_t n, const float *x, kf_block_q8_0 *y) {
    for (int64_t b = 0; b < n / KF_QK8_0; ++b) {
        const float *xb = x + b * KF_QK8_0;
        float32x4_t v[8];
        float32x4_t am = vdupq_n_f32(0.0f);
        for (int j = 0; j < 8; ++j) { v[j] = vld1q_f32(xb + 4 * j); am = vmaxq_f32(am, vabsq_f32(v[j])); }
        const float amax = vmaxvq_f32(am);
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = d;
        for (int j = 0; j < 8; j += 2) {
            int32x4_t a = vcvtnq_s32_f32(vmulq_n_f32(v[j], id));      /* round half to even */
            int32x4_t c = vcvtnq_s32_f32(vmulq_n_f32(v[j + 1], id));
            int16x8_t h = vcombine_s16(vqmovn_s32(a), vqmovn_s32(c));
            vst1_s8(y[b].qs + 4 * j, vqmovn_s16(h));
        }
    }
}
#endif

/* ---- the split ---- */

typedef void (*kf_range_fn)(void *ctx, int64_t row, int64_t b0, int64_t b1);

/* Calls fn for every (row, block range) thread ith owns; shared by the worker and the counter. */
static void for_each_share(kf_split mode, int64_t nrows, int64_t ncols, int ith, int nth, kf_range_fn fn, void *ctx) {
    const int64_t nb = ncols / KF_QK8_0;
    const int64_t full = nrows - nrows % 4;
    for (int64_t r = (int64_t) ith * 4; r < full; r += (int64_t) nth * 4)
        for (int64_t k = 0; k < 4; ++k) fn(ctx, r + k, 0, nb);
    const int64_t left = nrows - full;
    if (mode == KF_SPLIT_ADAPTIVE && left > 0 && left < nth) {
        const int64_t b0 = nb * ith / nth, b1 = nb * (ith + 1) / nth;
        if (b1 > b0)
            for (int64_t r = full; r < nrows; ++r) fn(ctx, r, b0, b1);
    } else {
        for (int64_t r = full + ith; r < nrows; r += nth) fn(ctx, r, 0, nb);
    }
}

struct part_ctx { const kf_kernels *k; const float *x; kf_block_q8_0 *y; int64_t ncols; };

static void part_range(void *vctx, int64_t row, int64_t b0, int64_t b1) {
    struct part_ctx *c = vctx;
    const int64_t nb = c->ncols / KF_QK8_0;
    c->k->quantize_q8_0((b1 - b0) * KF_QK8_0, c->x + row * c->ncols + b0 * KF_QK8_0, c->y + row * nb + b0);
}

static void count_range(void *vctx, int64_t row, int64_t b0, int64_t b1) {
    (void) row;
    *(int64_t *) vctx += b1 - b0;
}

void kf_from_float_part(kf_split mode, const kf_kernels *k, const float *x, kf_block_q8_0 *y,
                        int64_t nrows, int64_t ncols, int ith, int nth) {
    struct part_ctx c = { k ? k : kf_best(), x, y, ncols };
    for_each_share(mode, nrows, ncols, ith, nth, part_range, &c);
}

int64_t kf_from_float_blocks(kf_split mode, int64_t nrows, int64_t ncols, int ith, int nth) {
    int64_t count = 0;
    for_each_share(mode, nrows, ncols, ith, nth, count_range, &count);
    return count;
}
