/*
 * Microbenchmark (not a test): fused vs unfused time per kernel, in cache and out of cache,
 * with achieved bandwidth against a measured copy bandwidth of this machine (the roofline).
 *
 * Prints human lines and `METRIC name=value` lines:
 *   METRIC copy_gbs_{l1,dram}                  memcpy bandwidth, (read + write bytes) / time
 *   METRIC <kernel>_<size>_{ref,fused}_us      best-of-rounds time per call
 *   METRIC <kernel>_<size>_speedup             ref time / fused time
 *   METRIC <kernel>_<size>_fused_gbs           the fused kernel's compulsory bytes / time
 *   METRIC <kernel>_<size>_roofline_pct        fused_gbs / copy_gbs of the same cache level
 * Compulsory bytes are what the fused form must move (each input read once, the output
 * written once): the same yardstick for both forms and for the copy. The copy figure is the
 * better of glibc memcpy and a vectorized copy loop. A kernel can exceed 100%: in-place kernels
 * (fa_kq_tile) store into lines they just loaded, while a copy's store to a fresh line costs a
 * write-allocate read (or, for memcpy's non-temporal path, other overheads).
 * from_float_* compares the row split with the adaptive split on 2 threads (generation: 1 row;
 * prompt: 512 rows).
 *
 * Options: KF_ISA caps the fused variant; BENCH_QUICK=1 shortens rounds.
 */
#include "kfuse.h"
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; }

static float *alloc_f(size_t n, float lo, float hi) {
    float *p = aligned_alloc(64, ((n * sizeof(float)) + 63) / 64 * 64);
    uint32_t s = 12345u + (uint32_t) n;
    for (size_t i = 0; i < n; ++i) { s = s * 1664525u + 1013904223u; p[i] = lo + (hi - lo) * (s >> 8) / 16777216.0f; }
    return p;
}

static int rounds = 7;
static double target_round_s = 0.02;

typedef void (*body_fn)(void *ctx);

/* Best-of-rounds seconds per call; each round runs enough calls to take ~target_round_s. */
static double time_calls(body_fn fn, void *ctx) {
    fn(ctx);   /* warm-up (page faults, caches) */
    double t0 = now(); fn(ctx); double one = now() - t0;
    long iters = one > 0 ? (long) (target_round_s / one) : 1000;
    if (iters < 1) iters = 1;
    double best = 1e30;
    for (int r = 0; r < rounds; ++r) {
        t0 = now();
        for (long i = 0; i < iters; ++i) fn(ctx);
        double dt = (now() - t0) / iters;
        if (dt < best) best = dt;
    }
    return best;
}

/* ---- contexts ---- */
typedef struct { const kf_kernels *k; int n; float *a, *b, *c, *d; int rows, cols; volatile float sink; } ctx_t;

static void b_copy(void *v) { ctx_t *c = v; memcpy(c->b, c->a, (size_t) c->n * sizeof(float)); }
#if defined(__x86_64__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void copy_loop(int n, float *restrict dst, const float *restrict src) { for (int i = 0; i < n; ++i) dst[i] = src[i]; }
static void b_copy_loop(void *v) { ctx_t *c = v; copy_loop(c->n, c->b, c->a); }
static void b_softmax(void *v) { ctx_t *c = v; c->sink = c->k->softmax_prep(c->n, c->c, c->a, c->b, 0.125f, 1.0f); }
static void b_rms(void *v) { ctx_t *c = v; c->k->rms_scale(c->n, c->c, c->a, 0.37f); }
static void b_rms_mul(void *v) { ctx_t *c = v; c->k->rms_scale_mul(c->n, c->c, c->a, 0.37f, c->b); }
static void b_kq(void *v) { ctx_t *c = v; c->k->fa_kq_tile(c->rows, c->cols, c->c, c->b, 0.125f, c->d); }

static double copy_gbs(int n) {
    ctx_t c = { .n = n, .a = alloc_f(n, -1, 1), .b = alloc_f(n, -1, 1) };
    /* the better of glibc memcpy and a vectorized copy loop: whichever reaches closer to the limit */
    double t = time_calls(b_copy, &c), t2 = time_calls(b_copy_loop, &c);
    t = t2 < t ? t2 : t;
    free(c.a); free(c.b);
    return 2.0 * n * sizeof(float) / t / 1e9;
}

static void report(const char *name, double tr, double tf, double bytes, double roof) {
    const double gbs = bytes / tf / 1e9;
    printf("%-26s ref %10.2f us  fused %10.2f us  speedup %5.2fx  fused %6.1f GB/s = %5.1f%% of copy\n",
           name, tr * 1e6, tf * 1e6, tr / tf, gbs, 100.0 * gbs / roof);
    printf("METRIC %s_ref_us=%.3f\nMETRIC %s_fused_us=%.3f\nMETRIC %s_speedup=%.3f\nMETRIC %s_fused_gbs=%.2f\nMETRIC %s_roofline_pct=%.1f\n",
           name, tr * 1e6, name, tf * 1e6, name, tr / tf, name, gbs, name, 100.0 * gbs / roof);
}

static void bench_elementwise(const kf_kernels *fk, const char *size, int n, double roof) {
    ctx_t r = { .k = &kf_reference, .n = n, .a = alloc_f(n, -8, 8), .b = alloc_f(n, -4, 0), .c = alloc_f(n, 0, 1) };
    ctx_t f = r; f.k = fk;
    char name[64];
    struct { const char *kname; body_fn fn; int streams; } ks[] = {
        { "softmax_prep", b_softmax, 3 }, { "rms_scale", b_rms, 2 }, { "rms_scale_mul", b_rms_mul, 3 },
    };
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; ++i) {
        double tr = time_calls(ks[i].fn, &r), tf = time_calls(ks[i].fn, &f);
        double tr2 = time_calls(ks[i].fn, &r), tf2 = time_calls(ks[i].fn, &f);   /* interleaved twice */
        tr = tr2 < tr ? tr2 : tr; tf = tf2 < tf ? tf2 : tf;
        snprintf(name, sizeof name, "%s_%s", ks[i].kname, size);
        report(name, tr, tf, (double) ks[i].streams * n * sizeof(float), roof);
    }
    /* KQ tile: 64-wide rows as in llama.cpp's tiled flash attention (64x64 tile in cache). */
    int rows = n / 64;
    ctx_t kr = { .k = &kf_reference, .rows = rows, .cols = 64, .b = r.b, .c = alloc_f(n, -1, 1), .d = alloc_f(rows, 0, 1) };
    ctx_t kf = kr; kf.k = fk;
    double tr = time_calls(b_kq, &kr), tf = time_calls(b_kq, &kf);
    double tr2 = time_calls(b_kq, &kr), tf2 = time_calls(b_kq, &kf);
    tr = tr2 < tr ? tr2 : tr; tf = tf2 < tf ? tf2 : tf;
    snprintf(name, sizeof name, "fa_kq_tile_%s", size);
    report(name, tr, tf, 3.0 * n * sizeof(float), roof);
    free(r.a); free(r.b); free(r.c); free(kr.c); free(kr.d);
}

/* ---- from_float split on a persistent 2-thread pool with a spinning barrier ---- */
typedef struct {
    const kf_kernels *k; const float *x; kf_block_q8_0 *y; int64_t nrows, ncols; kf_split mode; int nth;
    atomic_int go, done; atomic_int stop;
} pool_t;

static void *worker(void *v) {
    pool_t *p = v;
    int seen = 0;
    for (;;) {
        int g;
        while ((g = atomic_load_explicit(&p->go, memory_order_acquire)) == seen)
            if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return NULL;
        seen = g;
        kf_from_float_part(p->mode, p->k, p->x, p->y, p->nrows, p->ncols, 1, p->nth);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
}

static void b_split(void *v) {   /* one parallel region: thread 0 works too, then waits for the rest */
    pool_t *p = v;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->go, 1, memory_order_release);
    kf_from_float_part(p->mode, p->k, p->x, p->y, p->nrows, p->ncols, 0, p->nth);
    while (atomic_load_explicit(&p->done, memory_order_acquire) != p->nth - 1) { }
}

static void bench_split(const kf_kernels *fk, const char *size, int64_t nrows, int64_t ncols, double roof) {
    float *x = alloc_f((size_t) (nrows * ncols), -3, 3);
    kf_block_q8_0 *y = aligned_alloc(64, ((size_t) (nrows * ncols / KF_QK8_0) * sizeof(kf_block_q8_0) + 63) / 64 * 64);
    double t[2];
    for (int rep = 0; rep < 2; ++rep)
        for (int mode = 0; mode < 2; ++mode) {
            pool_t p = { .k = fk, .x = x, .y = y, .nrows = nrows, .ncols = ncols, .mode = (kf_split) mode, .nth = 2 };
            pthread_t th;
            pthread_create(&th, NULL, worker, &p);
            double dt = time_calls(b_split, &p);
            atomic_store(&p.stop, 1);
            pthread_join(th, NULL);
            if (rep == 0 || dt < t[mode]) t[mode] = dt;
        }
    char name[64];
    snprintf(name, sizeof name, "from_float_%s", size);
    report(name, t[0], t[1], (double) nrows * ncols * (sizeof(float) + sizeof(kf_block_q8_0) / (double) KF_QK8_0), roof);
    free(x); free(y);
}

int main(void) {
    if (getenv("BENCH_QUICK")) { rounds = 3; target_round_s = 0.005; }
    const kf_kernels *fk = kf_best();
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("# fused variant: %s; unfused reference: multi-pass (auto-vectorized); %ld online CPUs\n", fk->name, ncpu);
    printf("METRIC fused_isa_%s=1\n", fk->name);

    const int n_l1 = 4096;                 /* 16 KiB per stream: L1/L2 resident */
    const int n_dram = 16 << 20;           /* 64 MiB per stream: beyond the LLC */
    const double bw_l1 = copy_gbs(n_l1), bw_llc = copy_gbs(1 << 20), bw_dram = copy_gbs(n_dram);
    printf("copy bandwidth: in-cache (16 KiB) %.1f GB/s, LLC (4 MiB) %.1f GB/s, out-of-cache (64 MiB) %.1f GB/s "
           "(read+write bytes)\n", bw_l1, bw_llc, bw_dram);
    printf("METRIC copy_gbs_l1=%.2f\nMETRIC copy_gbs_llc=%.2f\nMETRIC copy_gbs_dram=%.2f\n", bw_l1, bw_llc, bw_dram);

    bench_elementwise(fk, "incache", n_l1, bw_l1);
    bench_elementwise(fk, "dram", n_dram, bw_dram);
    if (ncpu >= 2) {
        bench_split(fk, "gen_1x2048", 1, 2048, bw_l1);
        bench_split(fk, "gen_1x5632", 1, 5632, bw_l1);
        bench_split(fk, "prompt_512x2048", 512, 2048, bw_llc);   /* 4 MiB of activations: LLC-resident */
    } else {
        printf("# from_float split not measured: needs 2 CPUs\n");
    }
    return 0;
}
