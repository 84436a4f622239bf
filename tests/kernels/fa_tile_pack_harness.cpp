// Harness for the fa-tile-pack recipe's helpers (kernels/recipes/llama.cpp/fa-tile-pack.helper.cpp.txt),
// compiled by tests/kernels/test_fa_tile_pack.py for each instruction set reachable here, with
// fa_harness_shims.h standing in for ggml's definitions. The helpers' output must equal the element loop they
// replace (the recipe claims bit-identity) for every tile shape the tiled path can meet.
#include "fa_harness_shims.h"

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
