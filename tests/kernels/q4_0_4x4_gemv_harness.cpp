// Harness for the q4-0-4x4-gemv-four-groups recipe (kernels/recipes/llama.cpp/q4-0-4x4-gemv-four-groups.yml),
// cross-compiled for AArch64 with the dot product and run under qemu-aarch64-static by
// tests/kernels/test_q4_0_4x4_gemv_four_groups.py. The test cuts ggml_gemv_q4_0_4x4_q8_0 out of
// llama.cpp's arch/arm/repack.cpp at test time, once as the tree has it (orig_kernel.inc) and once
// with the recipe applied (patched_kernel.inc, the recipe's helper included); this file supplies
// the few ggml definitions they use and compares, over many shapes and values:
//   patched == original, bit for bit (including the bytes past the last column: untouched);
//   both == an exact scalar reference: per column and block, the integer sum of (q - 8) * a,
//   then acc = fma(sum, d_a * d_w, acc) in block order, the float steps the kernels take.
// It prints "OK: <cases> <columns>" or the first mismatches and exits 1.
#include <arm_neon.h>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

typedef uint16_t ggml_half;
#define GGML_RESTRICT __restrict__
#define UNUSED(x) (void)(x)
#define QK8_0 32

// the repacked layout (ggml-cpu/repack.h): 4 Q4_0 columns' blocks, 4-byte interleave
struct block_q4_0x4 { ggml_half d[4]; int8_t qs[64]; };
struct block_q8_0 { ggml_half d; int8_t qs[32]; };           // one activation row's block

// only reached without the dot product, which this harness is never built without
static void ggml_gemv_q4_0_4x4_q8_0_generic(int, float *, size_t, const void *, const void *, int, int) { abort(); }

#include "orig_and_patched.h"

static float half_to_float(ggml_half h) { __fp16 f; memcpy(&f, &h, 2); return (float) f; }
static ggml_half float_to_half(float x) { __fp16 f = (__fp16) x; ggml_half h; memcpy(&h, &f, 2); return h; }

enum Values { RANDOM, EXTREMES, FULL_INT8, WIDE_SCALES };

static int8_t activation(Values v) {
    switch (v) {
        case RANDOM: case WIDE_SCALES: return (int8_t)((int)(next_u32() % 255) - 127);
        case EXTREMES:  return (next_u32() & 1) ? 127 : -127;
        case FULL_INT8: return (int8_t)(next_u32() & 0xff);
    }
    return 0;
}

static int nibble(Values v) { return v == EXTREMES ? ((next_u32() & 1) ? 15 : 0) : (int)(next_u32() & 15); }

static ggml_half scale(Values v) {
    if (v == WIDE_SCALES) {     // zero, negative, subnormal, huge (sums then overflow to +-inf alike)
        static const float pick[] = {0.0f, -0.0f, 6.0e-8f, -3.1e-5f, 1.0f, -2.5f, 60000.0f, -65504.0f};
        return float_to_half(pick[next_u32() % 8]);
    }
    return float_to_half(((int)(next_u32() % 2001) - 1000) / 16000.0f);
}

struct Case { int nb, nc; Values values; };

static int cases, columns, failures;

static void run(const Case & c) {
    // the unpacked weights (column, block, element) and the repacked blocks built from them
    std::vector<int> q((size_t) c.nc * c.nb * 32);
    std::vector<ggml_half> wd((size_t) c.nc * c.nb);
    for (auto & x : q) x = nibble(c.values);
    for (auto & x : wd) x = scale(c.values);
    std::vector<block_q4_0x4> w((size_t) c.nc / 4 * c.nb);
    for (int g = 0; g < c.nc / 4; g++) {
        for (int b = 0; b < c.nb; b++) {
            block_q4_0x4 & out = w[(size_t) g * c.nb + b];
            uint8_t col_qs[4][16];      // Q4_0: byte j holds element j (low nibble) and j + 16 (high)
            for (int k = 0; k < 4; k++) {
                const int col = 4*g + k;
                out.d[k] = wd[(size_t) col * c.nb + b];
                for (int j = 0; j < 16; j++) {
                    const int * e = &q[((size_t) col * c.nb + b) * 32];
                    col_qs[k][j] = (uint8_t)(e[j] | e[j + 16] << 4);
                }
            }
            for (int i = 0; i < 16; i++) {      // 4-byte chunks: column i % 4, its bytes 4 * (i / 4) ..
                for (int t = 0; t < 4; t++) {
                    out.qs[4*i + t] = (int8_t)(col_qs[i % 4][4 * (i / 4) + t] ^ 0x88);
                }
            }
        }
    }
    std::vector<block_q8_0> a(c.nb);
    for (auto & blk : a) {
        blk.d = scale(c.values);
        for (auto & x : blk.qs) x = activation(c.values);
    }

    std::vector<float> ref(c.nc);
    for (int col = 0; col < c.nc; col++) {
        float acc = 0.0f;
        for (int b = 0; b < c.nb; b++) {
            int32_t sum = 0;
            for (int j = 0; j < 32; j++) sum += (q[((size_t) col * c.nb + b) * 32 + j] - 8) * a[b].qs[j];
            acc = fmaf((float) sum, half_to_float(a[b].d) * half_to_float(wd[(size_t) col * c.nb + b]), acc);
        }
        ref[col] = acc;
    }

    const float canary = -1234.5f;
    std::vector<float> out_orig(c.nc + 4, canary), out_patched(c.nc + 4, canary);
    orig::ggml_gemv_q4_0_4x4_q8_0(c.nb * 32, out_orig.data(), c.nc, w.data(), a.data(), 1, c.nc);
    patched::ggml_gemv_q4_0_4x4_q8_0(c.nb * 32, out_patched.data(), c.nc, w.data(), a.data(), 1, c.nc);
    cases++;
    columns += c.nc;
    for (int col = 0; col < c.nc + 4; col++) {
        const float want = col < c.nc ? ref[col] : canary;
        const bool orig_ok = memcmp(&out_orig[col], &want, sizeof want) == 0;
        const bool patched_ok = memcmp(&out_patched[col], &out_orig[col], sizeof want) == 0;
        if ((!orig_ok || !patched_ok) && failures++ < 10) {
            printf("MISMATCH %s nb=%d nc=%d values=%d column %d: reference %.9g original %.9g patched %.9g\n",
                   orig_ok ? "patched" : "original", c.nb, c.nc, (int) c.values, col, want, out_orig[col],
                   out_patched[col]);
        }
    }
}

int main() {
    const int nbs[] = {1, 2, 3, 7, 8, 32, 97};
    const int ncs[] = {4, 8, 12, 16, 20, 28, 32, 36, 60, 64, 68, 124, 256};
    for (int values = RANDOM; values <= WIDE_SCALES; values++) {
        for (int nb : nbs) {
            for (int nc : ncs) {
                run({nb, nc, (Values) values});
            }
        }
    }
    if (failures) {
        printf("FAILED: %d mismatches in %d cases\n", failures, cases);
        return 1;
    }
    printf("OK: %d cases %d columns\n", cases, columns);
    return 0;
}
