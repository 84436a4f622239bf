// Harness for the q4-0-unsigned-nibble recipe (kernels/recipes/llama.cpp/q4-0-unsigned-nibble.yml),
// compiled by tests/kernels/test_q4_0_unsigned_nibble.py per x86 instruction set. The test cuts
// the Q4_0 GEMM's and GEMV's code out of llama.cpp's arch/x86/repack.cpp at test time, once as
// the tree has it (orig_kernel.inc) and once with the recipe applied (patched_kernel.inc); this
// file supplies the few ggml definitions they use and compares, over many shapes and values:
//   patched == original, bit for bit, for Q8_0 activations (-127..127, all ggml quantises to);
//   patched == an exact scalar reference with the same float steps over the whole int8 range;
//   original == the reference as well (checks this harness's idea of the repacked layouts), except
//   the original GEMV at -128: it multiplies |w| by a * sign(w), which wraps there (counted, shown).
//   The original GEMM takes |a| instead, 0x80 read as 128 by vpmaddubsw, and is exact throughout.
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
#define UNUSED GGML_UNUSED
#define QK8_0 32
#define GGML_CPU_FP16_TO_FP32(x) _cvtsh_ss(x)
#define GGML_CPU_E8M0_TO_FP32_HALF(x) e8m0_unused(x)
static inline float e8m0_unused(uint8_t) { abort(); }

// the repacked layouts (ggml-cpu/repack.h): 8 Q4_0 columns' blocks, 4 Q8_0 rows' blocks, 8-byte interleave
struct block_q4_0x8 { ggml_half d[8]; int8_t qs[128]; };
struct block_q8_0x4 { ggml_half d[4]; int8_t qs[128]; };
struct block_iq4_nlx8 { ggml_half d[8]; uint8_t qs[128]; };
struct block_mxfp4x8 { uint8_t e[8]; uint8_t qs[128]; };
struct block_q8_0 { ggml_half d; int8_t qs[32]; };           // one activation row's block (the GEMV's)

// only reached without AVX2, which this harness is never built for
static void ggml_gemm_q4_0_8x8_q8_0_generic(int, float *, size_t, const void *, const void *, int, int) { abort(); }
static void ggml_gemv_q4_0_8x8_q8_0_generic(int, float *, size_t, const void *, const void *, int, int) { abort(); }

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

// one problem: weights q[col][k] (value q - 8) with scales wd[col][block] and their repacked
// blocks, activations a[row][k] with scales ad[row][block]
struct Problem {
    int nb, nr, nc;
    std::vector<int> q, a;
    std::vector<ggml_half> wd, ad;
    std::vector<block_q4_0x8> w;

    Problem(const Case & c) : nb(c.nb), nr(c.nr), nc(c.nc) {
        const int K = 32 * nb;
        q.resize((size_t) nc * K);
        wd.resize((size_t) nc * nb);
        a.resize((size_t) nr * K);
        ad.resize((size_t) nr * nb);
        for (auto & x : q) x = nibble(c.values);
        for (auto & x : wd) x = scale();
        for (auto & x : a) x = activation(c.values);
        for (auto & x : ad) x = scale();
        // the repack: 8 columns' blocks, 8-byte chunks of column chunk % 8, each byte stored ^ 0x88
        w.resize((size_t)(nc / 8) * nb);
        for (int xg = 0; xg < nc / 8; xg++) for (int b = 0; b < nb; b++) {
            block_q4_0x8 & blk = w[(size_t) xg * nb + b];
            for (int col = 0; col < 8; col++) blk.d[col] = wd[(size_t)(xg * 8 + col) * nb + b];
            for (int chunk = 0; chunk < 16; chunk++) {
                const int col = xg * 8 + chunk % 8, off = (chunk / 8) * 8;
                for (int i = 0; i < 8; i++) {
                    const int j = off + i;                           // Q4_0 byte j: values j and j + 16
                    const int lo = q[(size_t) col * K + b * 32 + j], hi = q[(size_t) col * K + b * 32 + j + 16];
                    blk.qs[chunk * 8 + i] = (int8_t)((lo | hi << 4) ^ 0x88);
                }
            }
        }
    }

    // activations as the GEMM reads them: 4 rows per block_q8_0x4 in 8-byte chunks
    std::vector<block_q8_0x4> rows_x4() const {
        const int K = 32 * nb;
        std::vector<block_q8_0x4> act((size_t)(nr / 4) * nb);
        for (int yg = 0; yg < nr / 4; yg++) for (int b = 0; b < nb; b++) {
            block_q8_0x4 & blk = act[(size_t) yg * nb + b];
            for (int r = 0; r < 4; r++) blk.d[r] = ad[(size_t)(yg * 4 + r) * nb + b];
            for (int chunk = 0; chunk < 16; chunk++) {
                const int row = yg * 4 + chunk % 4, off = (chunk / 4) * 8;
                for (int i = 0; i < 8; i++) blk.qs[chunk * 8 + i] = (int8_t) a[(size_t) row * K + b * 32 + off + i];
            }
        }
        return act;
    }

    // activations as the GEMV reads them: plain block_q8_0 rows
    std::vector<block_q8_0> rows() const {
        std::vector<block_q8_0> act((size_t) nr * nb);
        for (int r = 0; r < nr; r++) for (int b = 0; b < nb; b++) {
            act[(size_t) r * nb + b].d = ad[(size_t) r * nb + b];
            for (int j = 0; j < 32; j++) act[(size_t) r * nb + b].qs[j] = (int8_t) a[(size_t) r * 32 * nb + b * 32 + j];
        }
        return act;
    }

    // the exact result, with the kernels' float steps: acc = fma(int sum, d_w * d_a, acc) per block
    float reference(int r, int col) const {
        const int K = 32 * nb;
        float acc = 0.0f;
        for (int b = 0; b < nb; b++) {
            int sum = 0;
            for (int j = 0; j < 32; j++) sum += (q[(size_t) col * K + b * 32 + j] - 8) * a[(size_t) r * K + b * 32 + j];
            const float d = half_to_float(wd[(size_t) col * nb + b]) * half_to_float(ad[(size_t) r * nb + b]);
            acc = std::fma((float) sum, d, acc);
        }
        return acc;
    }
};

static long checked = 0, failures = 0, gemv_orig_off = 0;

// got (recipe) == ref (exact) at every position, bit for bit, and == want (llama.cpp's kernel)
// where that one is exact too
static void compare(const char * kernel, const Case & c, size_t bs, const std::vector<float> & got,
                    const std::vector<float> & want, const std::vector<float> & ref, bool orig_exact) {
    for (size_t i = 0; i < got.size(); i++) {
        checked++;
        if (!orig_exact && !same_bits(want[i], ref[i])) gemv_orig_off++;
        if (!same_bits(got[i], ref[i]) || (orig_exact && !same_bits(got[i], want[i]))) {
            failures++;
            if (failures <= 5) printf("MISMATCH %s nb=%d nr=%d nc=%d bs=%zu values=%d at %zu: got %.9g orig %.9g ref %.9g\n",
                                      kernel, c.nb, c.nr, c.nc, bs, (int) c.values, i, got[i], want[i], ref[i]);
        }
    }
}

static void check_gemm(const Case & c) {
    const Problem p(c);
    const std::vector<block_q8_0x4> act = p.rows_x4();
    const size_t bs = (size_t) c.nc + c.pad;                   // output row stride
    std::vector<float> got(bs * c.nr + 8, -3.25f), want(got), ref(got);
    patched::ggml_gemm_q4_0_8x8_q8_0(32 * c.nb, got.data(), bs, p.w.data(), act.data(), c.nr, c.nc);
    orig::ggml_gemm_q4_0_8x8_q8_0(32 * c.nb, want.data(), bs, p.w.data(), act.data(), c.nr, c.nc);
    for (int r = 0; r < c.nr; r++) for (int col = 0; col < c.nc; col++) ref[(size_t) r * bs + col] = p.reference(r, col);
    compare("gemm", c, bs, got, want, ref, true);
}

static void check_gemv(const Case & c) {
    const Problem p(c);
    const std::vector<block_q8_0> act = p.rows();
    // the kernels store row y at y * nr (ggml calls them with nr = 1): the reference covers nr = 1,
    // larger nr only compares the two kernels' (overlapping) stores
    std::vector<float> got((size_t) c.nr * c.nr + c.nc + 8, -3.25f), want(got), ref(got);
    patched::ggml_gemv_q4_0_8x8_q8_0(32 * c.nb, got.data(), c.nc, p.w.data(), act.data(), c.nr, c.nc);
    orig::ggml_gemv_q4_0_8x8_q8_0(32 * c.nb, want.data(), c.nc, p.w.data(), act.data(), c.nr, c.nc);
    if (c.nr == 1) {
        for (int col = 0; col < c.nc; col++) ref[col] = p.reference(0, col);
    } else {
        ref = want;                                            // and nr > 1 only with Q8_0 values
    }
    // the LUT GEMV multiplies |w| by a * sign(w): at a = -128 and w < 0 that wraps to -128, so it is
    // exact on Q8_0's -127..127 only (all ggml quantises to); the recipe's is exact throughout
    compare("gemv", c, c.nc, got, want, ref, c.values == RANDOM || c.values == EXTREMES || c.nr != 1);
}

int main() {
#if defined(GGML_Q4_0_UNSIGNED_GEMM)
    const char * gemm_path = "unsigned";                  // the recipe's kernel is compiled for this ISA
#else
    const char * gemm_path = "lut";
#endif
#if defined(GGML_Q4_0_UNSIGNED_GEMV)
    const char * gemv_path = "unsigned";
#else
    const char * gemv_path = "lut";
#endif
    const int nbs[] = {1, 2, 3, 8, 33, 96};
    long cases = 0;
    for (int nb : nbs) {
        for (int nr : {4, 8, 12, 16, 20, 28, 32, 36, 52}) for (int nc : {8, 16, 24, 40}) {
            check_gemm({nb, nr, nc, (int)(next_u32() % 3) * 3, (Values)(next_u32() % 4)});
            cases++;
        }
        // 1 to 15 groups of 8 columns, odd and even, below and above 8
        for (int nr : {1, 1, 1, 2, 3}) for (int nc : {8, 16, 24, 40, 56, 72, 120}) {
            check_gemv({nb, nr, nc, 0, nr == 1 ? (Values)(next_u32() % 4) : (Values)(next_u32() % 2)});
            cases++;
        }
    }
    for (Values v : {RANDOM, EXTREMES, FULL_INT8, MIN_INT8}) {        // every pattern on bigger shapes
        check_gemm({128, 64, 32, 5, v});
        check_gemv({128, 1, 256, 0, v});
        cases += 2;
    }
    if (failures) {
        printf("FAILED: %ld of %ld outputs\n", failures, checked);
        return 1;
    }
    printf("OK: %ld outputs in %ld cases (LUT gemv off the exact result at -128: %ld), paths gemm %s gemv %s\n",
           checked, cases, gemv_orig_off, gemm_path, gemv_path);
    return 0;
}
