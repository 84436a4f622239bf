/*
 * kfuse: the five CPU optimizations of the llama.cpp study as a small C library.
 *
 * Every kernel has an unfused reference (the multi-pass form found in llama.cpp, written here
 * from scratch) and fused versions for scalar C, AVX2+FMA, AVX-512F and NEON. The variant is
 * chosen at run time from the CPU's features (scalar is always available); the environment
 * variable KF_ISA=scalar|avx2|avx512|neon caps the choice (useful for tests and benchmarks).
 *
 * Float ordering (where fused and reference may differ in the last bits):
 *   - softmax_prep / fa_kq_tile: the reference rounds twice (t = x*scale, then t + m); the scalar
 *     fused path does exactly the same and is bit-identical; the SIMD fused paths use one FMA
 *     (x*scale + m rounded once), so a result may differ from the reference by at most one
 *     rounding of the product and of the sum: |fused - ref| <= 2^-23 * (|x*scale| + |m|) (plus the subnormal
 *     step). With no mask (or where m is +-0) every path is bit-identical. One overflow edge: if
 *     x*scale overflows and m is -inf, the reference gives NaN (inf + -inf), the FMA gives -inf.
 *   - softmax_prep's mask term is slope*mask[i], rounded once, in all paths (as llama.cpp does).
 *   - rms_scale and rms_scale_mul are bit-identical to the reference on every path:
 *     y = x*scale, and y = (x*scale)*w, in that order (no FMA, no reassociation).
 *   - quantize_q8_0 is bit-identical on every path (round half to even everywhere).
 *   - The returned maxima equal the reference whenever the row holds no NaN (a zero maximum may
 *     come back as -0 or +0, which compare equal). With a NaN in the row the reference's own
 *     answer depends on where the NaN sits (MAX(a,b) = a > b ? a : b), so the maximum is then
 *     unspecified; the written values carry NaN exactly where the reference's do.
 */
#ifndef KFUSE_H
#define KFUSE_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KF_ISA_SCALAR = 0, KF_ISA_AVX2 = 1, KF_ISA_AVX512 = 2, KF_ISA_NEON = 3, KF_ISA_COUNT } kf_isa;

#define KF_QK8_0 32
typedef struct { float d; int8_t qs[KF_QK8_0]; } kf_block_q8_0;

typedef struct kf_kernels {
    const char *name;
    /* 1. softmax input pass: wp[i] = sp[i]*scale + slope*mask[i] (mask may be NULL); returns max(wp). */
    float (*softmax_prep)(int n, float *wp, const float *sp, const float *mask, float scale, float slope);
    /* 2. rms_norm output pass: y[i] = x[i]*scale (y may equal x). */
    void (*rms_scale)(int n, float *y, const float *x, float scale);
    /* 3. rms_norm followed by mul: y[i] = x[i]*scale*w[i] (y may equal x). */
    void (*rms_scale_mul)(int n, float *y, const float *x, float scale, const float *w);
    /* 4. flash-attention KQ tile, rows x cols contiguous, in place:
     *    kq = kq*scale + mask (mask rows x cols, may be NULL), row_max[r] = max of row r. */
    void (*fa_kq_tile)(int rows, int cols, float *kq, const float *mask, float scale, float *row_max);
    /* 5. activation quantization (from_float) of n floats (n % 32 == 0) to q8_0 blocks. */
    void (*quantize_q8_0)(int64_t n, const float *x, kf_block_q8_0 *y);
} kf_kernels;

/* The unfused references (multi-pass), for tests and benchmarks. */
extern const kf_kernels kf_reference;

const char *kf_isa_name(kf_isa isa);
/* 1 if the variant is compiled into this library and the CPU (and OS) supports it. */
int kf_isa_supported(kf_isa isa);
/* Why a variant is unavailable ("" if it is available). */
const char *kf_isa_why_not(kf_isa isa);
/* The fused kernels of one instruction set, or NULL if unsupported here. */
const kf_kernels *kf_get(kf_isa isa);
/* The best supported fused kernels, capped by KF_ISA if set. */
const kf_kernels *kf_best(void);

/* Dispatched entry points (kf_best()). */
float kf_softmax_prep(int n, float *wp, const float *sp, const float *mask, float scale, float slope);
void  kf_rms_scale(int n, float *y, const float *x, float scale);
void  kf_rms_scale_mul(int n, float *y, const float *x, float scale, const float *w);
void  kf_fa_kq_tile(int rows, int cols, float *kq, const float *mask, float scale, float *row_max);
void  kf_quantize_q8_0(int64_t n, const float *x, kf_block_q8_0 *y);

/* 5. Work split of activation quantization of an nrows x ncols f32 matrix (row-major, ncols % 32 == 0)
 * across nth threads; thread ith calls kf_from_float_part for its share.
 *   KF_SPLIT_ROWS: the reference. Groups of 4 rows go round-robin to the threads; the leftover
 *     rows (nrows % 4) go one per thread starting at thread 0, so with 1 row (generation) a
 *     single thread quantizes while the others wait.
 *   KF_SPLIT_ADAPTIVE: the same for full groups; when fewer leftover rows remain than threads,
 *     every leftover row is split into contiguous block ranges across all threads instead. */
typedef enum { KF_SPLIT_ROWS = 0, KF_SPLIT_ADAPTIVE = 1 } kf_split;
void    kf_from_float_part(kf_split mode, const kf_kernels *k, const float *x, kf_block_q8_0 *y,
                           int64_t nrows, int64_t ncols, int ith, int nth);
/* Number of q8_0 blocks thread ith quantizes under a split (for balance checks). */
int64_t kf_from_float_blocks(kf_split mode, int64_t nrows, int64_t ncols, int ith, int nth);

#ifdef __cplusplus
}
#endif
#endif
