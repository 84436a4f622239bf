// Stand-ins for the ggml definitions the flash-attention recipes' helpers use, shared by
// fa_tile_pack_harness.cpp and fa_k_pack_once_harness.cpp: the fp16 type and its scalar
// conversion (the hardware instruction where ggml uses one: F16C's vcvtph2ps, AArch64's fcvt,
// which quiet a signalling NaN; elsewhere bit manipulation), the f16 -> f32 row helper and the
// scale helper.
#pragma once
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
