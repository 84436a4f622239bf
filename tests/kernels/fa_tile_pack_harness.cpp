// Harness for the fa-tile-pack recipe's helpers (kernels/recipes/llama.cpp/fa-tile-pack.helper.cpp.txt),
// compiled by tests/kernels/test_fa_tile_pack.py for each instruction set reachable here. The shims
// below stand in for ggml's: the fp16 type and its scalar conversion (the hardware instruction
// where ggml uses one: F16C's vcvtph2ps, AArch64's fcvt, which quiet a signalling NaN; elsewhere
// bit manipulation), the f16 -> f32 row helper and the scale helper. The helpers' output must equal the element loop they
// replace (the recipe claims bit-identity) for every tile shape the tiled path can meet.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

typedef uint16_t ggml_fp16_t;
#define GGML_RESTRICT __restrict__

[[maybe_unused]] static float fp16_bits_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0u);   // NaNs come out quiet
    } else if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {
            int e = -1;
            do { e++; mant <<= 1; } while ((mant & 0x400) == 0);
            bits = sign | (uint32_t)(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
        }
    } else {
        bits = sign | (exp + 112) << 23 | mant << 13;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
#if defined(__F16C__)
#include <immintrin.h>
#define GGML_CPU_FP16_TO_FP32(x) _cvtsh_ss(x)
#elif defined(__aarch64__)
static float fp16_hw_to_f32(uint16_t h) {
    __fp16 f;
    memcpy(&f, &h, sizeof f);
    return (float) f;
}
#define GGML_CPU_FP16_TO_FP32(x) fp16_hw_to_f32(x)
#else
#define GGML_CPU_FP16_TO_FP32(x) fp16_bits_to_f32(x)
#endif
static void ggml_cpu_fp16_to_fp32(const ggml_fp16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = GGML_CPU_FP16_TO_FP32(x[i]);
}
static void ggml_vec_scale_f32(const int n, float * y, const float v) {
    for (int i = 0; i < n; i++) y[i] *= v;
}

#include "fa_tile_pack_helper.inc"

static void ggml_compute_forward_flash_attn_ext_f16_one_chunk(void) {}

static uint32_t rng = 12345;
static uint16_t next_half(void) {
    rng = rng * 1664525u + 1013904223u;
    return (uint16_t)(rng >> 16);
}

int main(void) {
    (void) ggml_compute_forward_flash_attn_ext_f16_one_chunk;
    const int KV = 64;
    long checked = 0, failures = 0;
    const int64_t dks[] = {1, 3, 4, 7, 8, 9, 16, 40, 64, 72, 80, 96, 112, 128, 256, 257};
    for (int64_t DK : dks) {
        for (int rows = 0; rows <= KV; rows++) {
            for (int pad = 0; pad <= 3; pad += 3) {           // row stride = DK (+ padding) halves
                const size_t stride = (size_t)(DK + pad) * sizeof(ggml_fp16_t);
                std::vector<ggml_fp16_t> src((size_t)(DK + pad) * KV + 1);
                for (auto & h : src) h = next_half();        // every bit pattern: NaN, inf, subnormals
                const char * base = (const char *)(src.data() + (rows & 1));   // odd byte offsets too
                std::vector<float> got((size_t)DK * KV, 7.0f), want((size_t)DK * KV, 7.0f);
                ggml_fa_pack_k_tile_f16(got.data(), KV, base, stride, rows, DK);
                for (int tk = 0; tk < rows; tk++) {
                    const ggml_fp16_t * r = (const ggml_fp16_t *)(base + tk * stride);
                    for (int64_t dk = 0; dk < DK; dk++) want[dk * KV + tk] = GGML_CPU_FP16_TO_FP32(r[dk]);
                }
                checked++;
                if (memcmp(got.data(), want.data(), got.size() * sizeof(float)) != 0) {
                    if (failures++ < 5) printf("FAIL pack DK=%lld rows=%d pad=%d\n", (long long) DK, rows, pad);
                }
            }
        }
    }
    const uint16_t NEG_INF = 0xfc00, ZERO = 0x0000, ONE = 0x3c00, NAN16 = 0x7e00;   // NaN is live, as before
    const float slopes[] = {1.0f, 0.5f, 0.0625f};
    for (float slope : slopes) {
        for (int n = 0; n <= KV; n++) {
            for (int live_at = -1; live_at < n; live_at++) {   // -1: the whole row masked
                std::vector<ggml_fp16_t> m(n);
                for (int i = 0; i < n; i++) m[i] = NEG_INF;
                if (live_at >= 0) m[live_at] = live_at % 3 == 2 ? NAN16 : (live_at % 2) ? ONE : ZERO;
                if (live_at >= 0 && live_at % 3 != 2 && n > 2) m[n - 1 - live_at % 2] = next_half() & 0x7bff;   // finite
                std::vector<float> got(n + 1, 3.0f), want(n + 1, 3.0f);
                const bool live = ggml_fa_mask_row_f16(got.data(), m.data(), n, slope);
                bool want_live = false;
                for (int i = 0; i < n; i++) {
                    want[i] = slope * GGML_CPU_FP16_TO_FP32(m[i]);
                    if (want[i] != -INFINITY) want_live = true;
                }
                checked++;
                if (live != want_live || memcmp(got.data(), want.data(), (n + 1) * sizeof(float)) != 0) {   // bits: NaN == NaN
                    if (failures++ < 10) printf("FAIL mask n=%d live_at=%d slope=%g\n", n, live_at, slope);
                }
            }
        }
    }
    printf("%s: %ld cases, %ld failures\n", failures ? "FAILED" : "OK", checked, failures);
    return failures != 0;
}
