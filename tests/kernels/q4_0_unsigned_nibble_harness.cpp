// Harness for the q4-0-unsigned-nibble recipe (kernels/recipes/llama.cpp/q4-0-unsigned-nibble.yml),
// compiled by tests/kernels/test_q4_0_unsigned_nibble.py per x86 instruction set. The test cuts
// the Q4_0 GEMM's code out of llama.cpp's arch/x86/repack.cpp at test time, once as the tree has
// it (orig_kernel.inc) and once with the recipe applied (patched_kernel.inc); this file supplies
// the few ggml definitions they use and compares, over many shapes and value patterns:
//   patched == original, bit for bit, over the whole int8 range of the activations (Q8_0 holds
//   -127..127; -128 is tested too: the original's |a| is 0x80, which vpmaddubsw reads as 128);
//   original == an exact scalar reference with the same float steps (checks this harness's idea
//   of the repacked layouts, so that the shapes and values really reach every lane).
// It prints "OK: <cases> ..." or the first mismatches and exits 1.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>
#include <cassert>
#include <immintrin.h>

typedef uint16_t ggml_half;
typedef uint16_t ggml_fp16_t;
#define GGML_RESTRICT __restrict__
#define GGML_UNUSED(x) (void)(x)
#define QK8_0 32
#define GGML_CPU_FP16_TO_FP32(x) _cvtsh_ss(x)
#define GGML_CPU_E8M0_TO_FP32_HALF(x) e8m0_unused(x)
static inline float e8m0_unused(uint8_t) { abort(); }

// the repacked layouts (ggml-cpu/repack.h): 8 Q4_0 columns' blocks, 4 Q8_0 rows' blocks, 8-byte interleave
struct block_q4_0x8 { ggml_half d[8]; int8_t qs[128]; };
struct block_q8_0x4 { ggml_half d[4]; int8_t qs[128]; };
struct block_iq4_nlx8 { ggml_half d[8]; uint8_t qs[128]; };
struct block_mxfp4x8 { uint8_t e[8]; uint8_t qs[128]; };

// only reached without AVX2, which this harness is never built for
static void ggml_gemm_q4_0_8x8_q8_0_generic(int, float *, size_t, const void *, const void *, int, int) { abort(); }

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
namespace orig {
#include "orig_kernel.inc"
}
namespace patched {
#include "patched_kernel.inc"
}
#pragma GCC diagnostic pop

static uint32_t rng = 20261202;
static uint32_t next_u32() {
    rng ^= rng << 13; rng ^= rng >> 17; rng ^= rng << 5;
    return rng;
}

static float half_to_float(ggml_half h) { return _cvtsh_ss(h); }
static ggml_half float_to_half(float f) { return _cvtss_sh(f, 0); }

enum Values { RANDOM, EXTREMES, FULL_INT8, MIN_INT8 };

struct Case {
    int nb, nr, nc, pad;
    Values values;
};

static int8_t activation(Values v) {
    switch (v) {
        case RANDOM:    return (int8_t)((int)(next_u32() % 255) - 127);
        case EXTREMES:  return (next_u32() & 1) ? 127 : -127;
        case FULL_INT8: return (int8_t)(next_u32() & 0xff);
        case MIN_INT8:  return (next_u32() % 4) ? -128 : 127;
    }
    return 0;
}

static int nibble(Values v) {
    return (v == RANDOM || v == FULL_INT8) ? (int)(next_u32() & 15) : ((next_u32() & 1) ? 15 : 0);
}

static ggml_half scale() {
    const uint32_t r = next_u32() % 16;
    if (r == 0) return 0;                                   // +0
    if (r == 1) return float_to_half(-65504.0f);           // the largest half
    if (r == 2) return 0x0001;                              // the smallest subnormal
    const float mag = std::ldexp(1.0f + (float)(next_u32() % 1024) / 1024.0f, (int)(next_u32() % 24) - 14);
    return float_to_half((next_u32() & 1) ? mag : -mag);
}

static bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

int main() {
    std::vector<Case> cases;
    const int nbs[] = {1, 2, 3, 8, 33, 96};
    const int nrs[] = {4, 8, 12, 16, 20, 28, 32, 36, 52};
    const int ncs[] = {8, 16, 24, 40};
    for (int nb : nbs) for (int nr : nrs) for (int nc : ncs) {
        cases.push_back({nb, nr, nc, (int)(next_u32() % 3) * 3, (Values)(next_u32() % 4)});
    }
    for (Values v : {RANDOM, EXTREMES, FULL_INT8, MIN_INT8}) {        // every pattern on a bigger shape
        cases.push_back({128, 64, 32, 5, v});
    }
#if defined(GGML_Q4_0_UNSIGNED_GEMM)
    const bool unsigned_path = true;                  // the recipe's kernel is compiled for this ISA
#else
    const bool unsigned_path = false;
#endif
    long checked = 0, failures = 0;
    for (const Case & c : cases) {
        // weights: nibble q[col][k] (value q - 8), stored as the repack stores it
        const int ncols = c.nc, K = 32 * c.nb;
        std::vector<int> q((size_t) ncols * K);
        std::vector<ggml_half> wd((size_t) ncols * c.nb);
        for (auto & x : q) x = nibble(c.values);
        for (auto & x : wd) x = scale();
        std::vector<block_q4_0x8> w((size_t)(ncols / 8) * c.nb);
        for (int xg = 0; xg < ncols / 8; xg++) for (int b = 0; b < c.nb; b++) {
            block_q4_0x8 & blk = w[(size_t) xg * c.nb + b];
            for (int col = 0; col < 8; col++) blk.d[col] = wd[(size_t)(xg * 8 + col) * c.nb + b];
            for (int chunk = 0; chunk < 16; chunk++) {               // 8 bytes of column chunk % 8
                const int col = xg * 8 + chunk % 8, off = (chunk / 8) * 8;
                for (int i = 0; i < 8; i++) {
                    const int j = off + i;                           // Q4_0 byte j: values j and j + 16
                    const int lo = q[(size_t) col * K + b * 32 + j], hi = q[(size_t) col * K + b * 32 + j + 16];
                    blk.qs[chunk * 8 + i] = (int8_t)((lo | hi << 4) ^ 0x88);
                }
            }
        }
        // activations a[row][k], 4 rows per block_q8_0x4 in 8-byte chunks
        std::vector<int> a((size_t) c.nr * K);
        std::vector<ggml_half> ad((size_t) c.nr * c.nb);
        for (auto & x : a) x = activation(c.values);
        for (auto & x : ad) x = scale();
        std::vector<block_q8_0x4> act((size_t)(c.nr / 4) * c.nb);
        for (int yg = 0; yg < c.nr / 4; yg++) for (int b = 0; b < c.nb; b++) {
            block_q8_0x4 & blk = act[(size_t) yg * c.nb + b];
            for (int r = 0; r < 4; r++) blk.d[r] = ad[(size_t)(yg * 4 + r) * c.nb + b];
            for (int chunk = 0; chunk < 16; chunk++) {
                const int row = yg * 4 + chunk % 4, off = (chunk / 4) * 8;
                for (int i = 0; i < 8; i++) blk.qs[chunk * 8 + i] = (int8_t) a[(size_t) row * K + b * 32 + off + i];
            }
        }
        const size_t bs = (size_t) c.nc + c.pad;
        std::vector<float> got(bs * c.nr + 8, -3.25f), want(got.size(), -3.25f), ref(got.size(), -3.25f);
        patched::ggml_gemm_q4_0_8x8_q8_0(K, got.data(), bs, w.data(), act.data(), c.nr, c.nc);
        orig::ggml_gemm_q4_0_8x8_q8_0(K, want.data(), bs, w.data(), act.data(), c.nr, c.nc);
        for (int r = 0; r < c.nr; r++) for (int col = 0; col < c.nc; col++) {
            float acc = 0.0f;
            for (int b = 0; b < c.nb; b++) {
                int sum = 0;
                for (int j = 0; j < 32; j++) sum += (q[(size_t) col * K + b * 32 + j] - 8) * a[(size_t) r * K + b * 32 + j];
                const float d = half_to_float(wd[(size_t) col * c.nb + b]) * half_to_float(ad[(size_t) r * c.nb + b]);
                acc = std::fma((float) sum, d, acc);
            }
            ref[(size_t) r * bs + col] = acc;
        }
        for (size_t i = 0; i < got.size(); i++) {
            checked++;
            if (!same_bits(got[i], want[i]) || !same_bits(want[i], ref[i])) {
                failures++;
                if (failures <= 5) printf("MISMATCH nb=%d nr=%d nc=%d bs=%zu values=%d at row %zu col %zu: got %.9g orig %.9g ref %.9g\n",
                                          c.nb, c.nr, c.nc, bs, (int) c.values, i / bs, i % bs, got[i], want[i], ref[i]);
            }
        }
    }
    if (failures) {
        printf("FAILED: %ld of %ld outputs\n", failures, checked);
        return 1;
    }
    printf("OK: %ld outputs in %zu cases, path %s\n", checked, cases.size(), unsigned_path ? "unsigned" : "lut");
    return 0;
}
