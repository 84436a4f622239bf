/* Run-time CPU feature detection and the dispatch tables. */
#include "kf_internal.h"
#include <stdlib.h>

#ifdef KF_HAVE_X86
#include <cpuid.h>

static unsigned long long kf_xgetbv0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long) hi << 32) | lo;
}

/* CPUID says what the core can do; XCR0 says which register state the OS saves. A hypervisor
 * may show AVX-512 in CPUID and still not enable the ZMM state, so both are checked. */
static int x86_has(kf_isa isa, const char **why) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) { *why = "CPUID leaf 1 unavailable"; return 0; }
    const int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, avx = (c >> 28) & 1;
    if (!osxsave || !avx) { *why = "CPU or OS lacks AVX (no OSXSAVE/AVX)"; return 0; }
    const unsigned long long xcr0 = kf_xgetbv0();
    if ((xcr0 & 0x6) != 0x6) { *why = "OS does not enable YMM state (XCR0)"; return 0; }
    if (__get_cpuid_max(0, NULL) < 7) { *why = "CPUID leaf 7 unavailable"; return 0; }
    __cpuid_count(7, 0, a, b, c, d);
    const int avx2 = (b >> 5) & 1, avx512f = (b >> 16) & 1;
    if (isa == KF_ISA_AVX2) {
        if (!avx2 || !fma) { *why = "CPU lacks AVX2 or FMA"; return 0; }
        return 1;
    }
    if (isa == KF_ISA_AVX512) {
        if (!avx512f) { *why = "CPU lacks AVX-512F"; return 0; }
        if ((xcr0 & 0xE6) != 0xE6) { *why = "OS/hypervisor does not enable ZMM/opmask state (XCR0)"; return 0; }
        if (!avx2 || !fma) { *why = "CPU lacks AVX2/FMA alongside AVX-512F"; return 0; }
        return 1;
    }
    *why = "not an x86 instruction set";
    return 0;
}
#endif

static const char *const isa_names[KF_ISA_COUNT] = { "scalar", "avx2", "avx512", "neon" };

const char *kf_isa_name(kf_isa isa) { return (unsigned) isa < KF_ISA_COUNT ? isa_names[isa] : "?"; }

const char *kf_isa_why_not(kf_isa isa) {
    const char *why = "";
    switch (isa) {
    case KF_ISA_SCALAR: return "";
    case KF_ISA_AVX2:
    case KF_ISA_AVX512:
#ifdef KF_HAVE_X86
        return x86_has(isa, &why) ? "" : why;
#else
        return "not compiled in (not an x86 build)";
#endif
    case KF_ISA_NEON:
#ifdef KF_HAVE_NEON
        return "";   /* Advanced SIMD is mandatory on AArch64 */
#else
        return "not compiled in (not an AArch64 build)";
#endif
    default: return "unknown instruction set";
    }
    (void) why;
}

int kf_isa_supported(kf_isa isa) { return kf_isa_why_not(isa)[0] == '\0'; }

const kf_kernels kf_reference = {
    "ref", kf_softmax_prep_ref, kf_rms_scale_ref, kf_rms_scale_mul_ref, kf_fa_kq_tile_ref, kf_quantize_q8_0_ref,
};

static const kf_kernels table_scalar = {
    "scalar", kf_softmax_prep_scalar, kf_rms_scale_scalar, kf_rms_scale_mul_scalar, kf_fa_kq_tile_scalar, kf_quantize_q8_0_scalar,
};
#ifdef KF_HAVE_X86
static const kf_kernels table_avx2 = {
    "avx2", kf_softmax_prep_avx2, kf_rms_scale_avx2, kf_rms_scale_mul_avx2, kf_fa_kq_tile_avx2, kf_quantize_q8_0_avx2,
};
static const kf_kernels table_avx512 = {
    "avx512", kf_softmax_prep_avx512, kf_rms_scale_avx512, kf_rms_scale_mul_avx512, kf_fa_kq_tile_avx512, kf_quantize_q8_0_avx512,
};
#endif
#ifdef KF_HAVE_NEON
static const kf_kernels table_neon = {
    "neon", kf_softmax_prep_neon, kf_rms_scale_neon, kf_rms_scale_mul_neon, kf_fa_kq_tile_neon, kf_quantize_q8_0_neon,
};
#endif

const kf_kernels *kf_get(kf_isa isa) {
    if (!kf_isa_supported(isa)) return NULL;
    switch (isa) {
    case KF_ISA_SCALAR: return &table_scalar;
#ifdef KF_HAVE_X86
    case KF_ISA_AVX2:   return &table_avx2;
    case KF_ISA_AVX512: return &table_avx512;
#endif
#ifdef KF_HAVE_NEON
    case KF_ISA_NEON:   return &table_neon;
#endif
    default: return NULL;
    }
}

/* KF_ISA caps the choice: "scalar" < "avx2" = "neon" < "avx512". */
static int isa_rank(kf_isa isa) { return isa == KF_ISA_SCALAR ? 0 : isa == KF_ISA_AVX512 ? 2 : 1; }

static const kf_kernels *choose(void) {
    const char *cap = getenv("KF_ISA");
    int limit = 2;
    if (cap && *cap)
        for (int i = 0; i < KF_ISA_COUNT; ++i) if (strcmp(cap, isa_names[i]) == 0) limit = isa_rank((kf_isa) i);
    static const kf_isa order[] = { KF_ISA_AVX512, KF_ISA_AVX2, KF_ISA_NEON };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; ++i) {
        if (isa_rank(order[i]) > limit) continue;
        const kf_kernels *k = kf_get(order[i]);
        if (k) return k;
    }
    return &table_scalar;
}

const kf_kernels *kf_best(void) {
    static const kf_kernels *volatile best;   /* idempotent: a racing first call computes the same */
    const kf_kernels *k = best;
    if (!k) best = k = choose();
    return k;
}

float kf_softmax_prep(int n, float *wp, const float *sp, const float *mask, float scale, float slope) {
    return kf_best()->softmax_prep(n, wp, sp, mask, scale, slope);
}
void kf_rms_scale(int n, float *y, const float *x, float scale) { kf_best()->rms_scale(n, y, x, scale); }
void kf_rms_scale_mul(int n, float *y, const float *x, float scale, const float *w) {
    kf_best()->rms_scale_mul(n, y, x, scale, w);
}
void kf_fa_kq_tile(int rows, int cols, float *kq, const float *mask, float scale, float *row_max) {
    kf_best()->fa_kq_tile(rows, cols, kq, mask, scale, row_max);
}
void kf_quantize_q8_0(int64_t n, const float *x, kf_block_q8_0 *y) { kf_best()->quantize_q8_0(n, x, y); }
