/*
 * Correctness of every fused variant against the unfused reference.
 * Prints one line per (variant, kernel): "PASS <isa> <kernel> <cases>", "FAIL <isa> <kernel> <why>",
 * or "SKIP <isa>: <reason>"; exits non-zero on any failure. Run under qemu for AArch64.
 */
#include "kfuse.h"
#include <math.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t) (rng >> 32); }
static float urand(float lo, float hi) { return lo + (hi - lo) * (rnd() / 4294967296.0f); }

enum { DIST_NORMAL, DIST_TINY, DIST_HUGE, DIST_NAN, DIST_COUNT };
static const char *dist_name[] = { "normal", "tiny", "huge", "nan" };

static float sample(int dist) {
    switch (dist) {
    case DIST_TINY: return urand(-1, 1) * (rnd() % 2 ? 1e-40f : 1e-30f);      /* subnormals too */
    case DIST_HUGE: return urand(-1, 1) * 1e37f;
    case DIST_NAN:  return rnd() % 17 == 0 ? NAN : urand(-10, 10);
    default:        return urand(-10, 10);
    }
}

static int failures = 0, fail_lines = 0;
static void fail(const char *isa, const char *kernel, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#include <stdarg.h>
static void fail(const char *isa, const char *kernel, const char *fmt, ...) {
    failures++;
    if (fail_lines++ > 40) return;
    va_list ap; va_start(ap, fmt);
    printf("FAIL %s %s ", isa, kernel); vprintf(fmt, ap); printf("\n");
    va_end(ap);
}

/* Same value: bit-identical for exact kernels; within tol for FMA ones; NaN matches NaN, inf matches itself. */
static int same(float ref, float got, float tol) {
    if (isnan(ref)) return isnan(got);
    if (isinf(ref)) return got == ref;
    if (tol == 0.0f) return memcmp(&ref, &got, sizeof ref) == 0 || (ref == 0 && got == 0 && tol < 0);
    return fabsf(ref - got) <= tol;
}

static const int sizes[] = { 0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100, 127, 128, 129,
                             255, 256, 257, 1000, 2048, 4099 };
#define NSIZES ((int) (sizeof sizes / sizeof sizes[0]))
#define PAD 64

/* A buffer with n usable floats starting at a pointer offset by `off` floats from a 64-byte boundary. */
static float *buf(float **base, int n, int off) {
    *base = aligned_alloc(64, (size_t) (n + PAD) * sizeof(float) + 64);
    for (int i = 0; i < n + PAD; ++i) (*base)[i] = 12345.0f;
    return *base + off;
}

static void fill(float *x, int n, int dist) { for (int i = 0; i < n; ++i) x[i] = sample(dist); }

/* mask kinds: 0 none, 1 random, 2 random with -inf holes, 3 all -inf */
static void fill_mask(float *m, int n, int kind) {
    for (int i = 0; i < n; ++i) {
        if (kind == 3) m[i] = -INFINITY;
        else if (kind == 2 && rnd() % 3 == 0) m[i] = -INFINITY;
        else m[i] = urand(-4, 4);
    }
}

static float row_max_of(const float *x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
    return m;
}
static int has_nan(const float *x, int n) { for (int i = 0; i < n; ++i) if (isnan(x[i])) return 1; return 0; }

static const float scales[] = { 1.0f, 0.125f, 0.0883883476f, 3.0f };

static void test_softmax(const kf_kernels *k, int fma_paths) {
    int cases = 0, before = failures;
    for (int si = 0; si < NSIZES; ++si) for (int dist = 0; dist < DIST_COUNT; ++dist) for (int mk = 0; mk < 4; ++mk)
    for (int inplace = 0; inplace < 2; ++inplace) {
        const int n = sizes[si];
        const float scale = scales[rnd() % 4], slope = rnd() % 2 ? 1.0f : 0.5f;
        float *bs, *bm, *br, *bg;
        float *sp = buf(&bs, n, rnd() % 4), *m = buf(&bm, n, rnd() % 4);
        float *wr = buf(&br, n, rnd() % 4), *wg = buf(&bg, n, rnd() % 4);
        fill(sp, n, dist); fill_mask(m, n, mk);
        const float *mask = mk ? m : NULL;
        float mr, mg;
        if (inplace) {
            memcpy(wr, sp, n * sizeof(float)); memcpy(wg, sp, n * sizeof(float));
            mr = kf_reference.softmax_prep(n, wr, wr, mask, scale, slope);
            mg = k->softmax_prep(n, wg, wg, mask, scale, slope);
        } else {
            mr = kf_reference.softmax_prep(n, wr, sp, mask, scale, slope);
            mg = k->softmax_prep(n, wg, sp, mask, scale, slope);
        }
        for (int i = 0; i < n; ++i) {
            const float tol = (fma_paths && mask) ? 0x1p-23f * (fabsf(sp[i] * scale) + fabsf(slope * m[i])) + 0x1p-148f : 0.0f;
            if (!same(wr[i], wg[i], tol)) {
                fail(k->name, "softmax_prep", "n=%d dist=%s mask=%d inplace=%d i=%d ref=%a got=%a", n, dist_name[dist], mk, inplace, i, wr[i], wg[i]);
                break;
            }
        }
        if (wg[n] != 12345.0f) fail(k->name, "softmax_prep", "n=%d wrote past the end", n);
        if (!has_nan(wr, n)) {
            if (!(mg == row_max_of(wg, n)) || (!fma_paths || !mask ? !(mg == mr) : 0))
                fail(k->name, "softmax_prep", "n=%d dist=%s mask=%d max ref=%a got=%a", n, dist_name[dist], mk, mr, mg);
            if (mk == 3 && mg != -INFINITY) fail(k->name, "softmax_prep", "all-masked row max %a", mg);
        }
        free(bs); free(bm); free(br); free(bg);
        cases++;
    }
    if (failures == before) printf("PASS %s softmax_prep %d\n", k->name, cases);
}

static void test_rms(const kf_kernels *k) {
    int cases = 0, before = failures;
    static const float rscales[] = { 0.37f, 1e-20f, 1e20f, 1.0f };
    for (int si = 0; si < NSIZES; ++si) for (int dist = 0; dist < DIST_COUNT; ++dist) for (int sc = 0; sc < 4; ++sc)
    for (int inplace = 0; inplace < 2; ++inplace) for (int withw = 0; withw < 2; ++withw) {
        const int n = sizes[si];
        const float scale = rscales[sc];
        float *bx, *bw, *br, *bg;
        float *x = buf(&bx, n, rnd() % 4), *w = buf(&bw, n, rnd() % 4);
        float *yr = buf(&br, n, rnd() % 4), *yg = buf(&bg, n, rnd() % 4);
        fill(x, n, dist); fill(w, n, DIST_NORMAL);
        const float *xr = x, *xg = x;
        if (inplace) { memcpy(yr, x, n * sizeof(float)); memcpy(yg, x, n * sizeof(float)); xr = yr; xg = yg; }
        if (withw) { kf_reference.rms_scale_mul(n, yr, xr, scale, w); k->rms_scale_mul(n, yg, xg, scale, w); }
        else       { kf_reference.rms_scale(n, yr, xr, scale);        k->rms_scale(n, yg, xg, scale); }
        const char *name = withw ? "rms_scale_mul" : "rms_scale";
        for (int i = 0; i < n; ++i)
            if (!same(yr[i], yg[i], 0.0f)) {
                fail(k->name, name, "n=%d dist=%s scale=%g inplace=%d i=%d ref=%a got=%a", n, dist_name[dist], scale, inplace, i, yr[i], yg[i]);
                break;
            }
        if (yg[n] != 12345.0f) fail(k->name, name, "n=%d wrote past the end", n);
        free(bx); free(bw); free(br); free(bg);
        cases++;
    }
    if (failures == before) printf("PASS %s rms_scale+rms_scale_mul %d\n", k->name, cases);
}

static void test_kq_tile(const kf_kernels *k, int fma_paths) {
    static const int rows_list[] = { 1, 2, 3, 5, 16, 64 };
    int cases = 0, before = failures;
    for (int ri = 0; ri < 6; ++ri) for (int si = 0; si < NSIZES; ++si) for (int dist = 0; dist < DIST_COUNT; ++dist)
    for (int mk = 0; mk < 4; ++mk) {
        const int rows = rows_list[ri], cols = sizes[si];
        if (cols > 300 && rows > 5) continue;
        const int n = rows * cols;
        const float scale = scales[rnd() % 4];
        float *bq, *bm, *br, *bg, *bmr, *bmg;
        float *q = buf(&bq, n, rnd() % 4), *m = buf(&bm, n, rnd() % 4);
        float *kr = buf(&br, n, rnd() % 4), *kg = buf(&bg, n, rnd() % 4);
        float *maxr = buf(&bmr, rows, 0), *maxg = buf(&bmg, rows, 1);
        fill(q, n, dist); fill_mask(m, n, mk);
        if (mk == 2 && rows > 1) for (int c = 0; c < cols; ++c) m[cols + c] = -INFINITY;   /* one fully masked row */
        memcpy(kr, q, n * sizeof(float)); memcpy(kg, q, n * sizeof(float));
        const float *mask = mk ? m : NULL;
        kf_reference.fa_kq_tile(rows, cols, kr, mask, scale, maxr);
        k->fa_kq_tile(rows, cols, kg, mask, scale, maxg);
        for (int i = 0; i < n; ++i) {
            const float tol = (fma_paths && mask) ? 0x1p-23f * (fabsf(q[i] * scale) + fabsf(m[i])) + 0x1p-148f : 0.0f;
            if (!same(kr[i], kg[i], tol)) {
                fail(k->name, "fa_kq_tile", "rows=%d cols=%d dist=%s mask=%d i=%d ref=%a got=%a", rows, cols, dist_name[dist], mk, i, kr[i], kg[i]);
                break;
            }
        }
        if (kg[n] != 12345.0f || maxg[rows] != 12345.0f) fail(k->name, "fa_kq_tile", "rows=%d cols=%d wrote past the end", rows, cols);
        for (int r = 0; r < rows; ++r) {
            if (has_nan(kr + r * cols, cols)) continue;
            const float own = row_max_of(kg + r * cols, cols);
            if (!(maxg[r] == own) || ((!fma_paths || !mask) && !(maxg[r] == maxr[r])))
                fail(k->name, "fa_kq_tile", "rows=%d cols=%d row=%d max ref=%a got=%a", rows, cols, r, maxr[r], maxg[r]);
            if (mask && cols > 0 && maxr[r] == -INFINITY && maxg[r] != -INFINITY)
                fail(k->name, "fa_kq_tile", "all-masked row %d max %a", r, maxg[r]);
        }
        free(bq); free(bm); free(br); free(bg); free(bmr); free(bmg);
        cases++;
    }
    if (failures == before) printf("PASS %s fa_kq_tile %d\n", k->name, cases);
}

static void test_quantize(const kf_kernels *k) {
    int cases = 0, before = failures;
    static const int nblocks[] = { 0, 1, 2, 3, 7, 64, 176 };
    for (int bi = 0; bi < 7; ++bi) for (int dist = 0; dist < DIST_NAN; ++dist) for (int zero = 0; zero < 2; ++zero) {
        const int n = nblocks[bi] * KF_QK8_0;
        float *bx; float *x = buf(&bx, n, rnd() % 4);
        fill(x, n, dist);
        if (zero && n) memset(x, 0, KF_QK8_0 * sizeof(float));                 /* an all-zero block */
        if (n > 64 && dist == DIST_NORMAL) {   /* exact halves after scaling: amax 127 gives d = 1 */
            for (int j = 32; j < 64; ++j) x[j] = (float) ((int) (rnd() % 200) - 100) + 0.5f;
            x[40] = 127.0f;
        }
        kf_block_q8_0 *yr = calloc(nblocks[bi] + 1, sizeof *yr), *yg = calloc(nblocks[bi] + 1, sizeof *yg);
        kf_reference.quantize_q8_0(n, x, yr);
        k->quantize_q8_0(n, x, yg);
        if (memcmp(yr, yg, (size_t) (nblocks[bi] + 1) * sizeof *yr) != 0)
            fail(k->name, "quantize_q8_0", "nblocks=%d dist=%s zero=%d differs", nblocks[bi], dist_name[dist], zero);
        free(bx); free(yr); free(yg);
        cases++;
    }
    /* the split: every block exactly once, same bytes as one thread, balance */
    static const int nrows_list[] = { 1, 2, 3, 4, 5, 7, 8, 13, 64 };
    static const int ncols_list[] = { 32, 64, 96, 2048, 5632 };
    static const int nth_list[] = { 1, 2, 3, 4, 8 };
    for (int a = 0; a < 9; ++a) for (int b = 0; b < 5; ++b) for (int c = 0; c < 5; ++c) for (int mode = 0; mode < 2; ++mode) {
        const int nrows = nrows_list[a], ncols = ncols_list[b], nth = nth_list[c], nb = ncols / KF_QK8_0;
        float *bx; float *x = buf(&bx, nrows * ncols, 1);
        fill(x, nrows * ncols, DIST_NORMAL);
        kf_block_q8_0 *y1 = calloc((size_t) nrows * nb, sizeof *y1), *yt = malloc((size_t) nrows * nb * sizeof *yt);
        memset(yt, 0xAB, (size_t) nrows * nb * sizeof *yt);
        kf_reference.quantize_q8_0((int64_t) nrows * ncols, x, y1);
        int64_t total = 0, lo = INT64_MAX, hi = 0;
        for (int ith = 0; ith < nth; ++ith) {
            kf_from_float_part((kf_split) mode, k, x, yt, nrows, ncols, ith, nth);
            const int64_t cnt = kf_from_float_blocks((kf_split) mode, nrows, ncols, ith, nth);
            total += cnt; lo = cnt < lo ? cnt : lo; hi = cnt > hi ? cnt : hi;
        }
        if (memcmp(y1, yt, (size_t) nrows * nb * sizeof *yt) != 0)
            fail(k->name, "from_float_split", "mode=%d nrows=%d ncols=%d nth=%d output differs", mode, nrows, ncols, nth);
        if (total != (int64_t) nrows * nb)
            fail(k->name, "from_float_split", "mode=%d nrows=%d ncols=%d nth=%d covered %lld of %d blocks", mode, nrows, ncols, nth, (long long) total, nrows * nb);
        if (mode == KF_SPLIT_ADAPTIVE && nrows < 4 && nrows < nth && nb >= nth && hi - lo > nrows)
            fail(k->name, "from_float_split", "adaptive split unbalanced: nrows=%d nb=%d nth=%d lo=%lld hi=%lld", nrows, nb, nth, (long long) lo, (long long) hi);
        if (mode == KF_SPLIT_ROWS && nrows == 1 && nth > 1 && lo != 0)
            fail(k->name, "from_float_split", "reference split should leave threads idle at 1 row");
        free(bx); free(y1); free(yt);
        cases++;
    }
    if (failures == before) printf("PASS %s quantize_q8_0+from_float_split %d\n", k->name, cases);
}

int main(void) {
    printf("BEST %s\n", kf_best()->name);
    int ran = 0;
    for (int isa = 0; isa < KF_ISA_COUNT; ++isa) {
        const kf_kernels *k = kf_get((kf_isa) isa);
        if (!k) { printf("SKIP %s: %s\n", kf_isa_name((kf_isa) isa), kf_isa_why_not((kf_isa) isa)); continue; }
        const int fma_paths = isa != KF_ISA_SCALAR;
        test_softmax(k, fma_paths);
        test_rms(k);
        test_kq_tile(k, fma_paths);
        test_quantize(k);
        ran++;
    }
    printf("%s: %d variants, %d failures\n", failures ? "FAILED" : "OK", ran, failures);
    return failures ? 1 : 0;
}
