// Harness for the fa-k-pack-once recipe's helper (kernels/recipes/llama.cpp/fa-k-pack-once.helper.cpp.txt),
// compiled by tests/kernels/test_fa_k_pack_once.py for each instruction set reachable here, on top of
// fa-tile-pack's helper (the recipe stacks on it), with fa_harness_shims.h standing in for ggml.
// It replays the tiled flash-attention path's walk: Q heads (several per KV head, as in GQA), Q
// tiles, KV tiles with some fully masked ones skipped, and checks every K tile the helper hands
// to the GEMM against the element loop of the original path (bit for bit, f16 and f32 K), the
// padding columns of a cached last tile (zero), and how often it packs: each cached tile once per
// run of its KV head, every tile past the buffer once per use.
#include "fa_harness_shims.h"

#include "fa_tile_pack_helper.inc"

static long pack_calls = 0;
static void counted_pack(float * dst, const int ld, const char * src, const size_t row_stride, const int rows, const int64_t DK) {
    pack_calls++;
    ggml_fa_pack_k_tile_f16(dst, ld, src, row_stride, rows, DK);
}
#define ggml_fa_pack_k_tile_f16 counted_pack
#include "fa_k_pack_once_helper.inc"
#undef ggml_fa_pack_k_tile_f16

static void ggml_compute_forward_flash_attn_ext_f16_one_chunk(void) {}

static uint32_t rng = 987654321;
static uint32_t next_u32(void) {
    rng = rng * 1664525u + 1013904223u;
    return rng;
}

int main(void) {
    (void) ggml_compute_forward_flash_attn_ext_f16_one_chunk;
    (void) ggml_fa_mask_row_f16;                       // fa-tile-pack's other helper, tested by its own harness
    const int KV = 64;
    long checked = 0, failures = 0;
    const int64_t dks[] = {1, 7, 8, 40, 64, 128, 257};
    const int64_t neks[] = {1, 63, 64, 65, 200, 512, (int64_t)GGML_FA_K_CACHE_TILES*64 + 70};
    const int64_t caps[] = {0, 1, 3, 1000};           // tiles the work buffer holds (before the helper's cap)
    for (int64_t DK : dks) {
        for (int64_t nek1 : neks) {
            const int64_t ntiles = (nek1 + KV - 1)/KV;
            for (int64_t cap : caps) {
                for (int f16 = 0; f16 <= 1; f16++) {
                    const int nkv2 = 2, nkv3 = 2, gqa = 3, nqtiles = 3;   // 2x2 KV heads, 3 Q heads each
                    const size_t esz = f16 ? sizeof(ggml_fp16_t) : sizeof(float);
                    const size_t row_stride = (size_t)(DK + (DK & 1))*esz + 2*esz;   // padded rows
                    const size_t nbk2 = row_stride*(size_t)nek1, nbk3 = nbk2*nkv2;
                    std::vector<uint8_t> kbuf(nbk3*nkv3 + 8);
                    for (size_t i = 0; i + 1 < kbuf.size(); i += 2) {   // every half pattern; finite floats
                        const uint32_t r = next_u32();
                        kbuf[i] = (uint8_t)(r >> 8);
                        kbuf[i + 1] = f16 ? (uint8_t)(r >> 16) : (uint8_t)((r >> 16) & 0x3f);
                    }
                    const int64_t cache_tiles = cap < ntiles ? cap : ntiles;   // as the tiled path computes it
                    std::vector<float> cache((size_t)(cache_tiles + 1)*DK*KV, -5.0f), scratch((size_t)DK*KV, -7.0f);
                    ggml_fa_k_cache c;
                    ggml_fa_k_cache_init(&c, cache.data(), cache_tiles);
                    const int64_t held = c.tiles;
                    long want_packs = 0;
                    pack_calls = 0;
                    std::vector<bool> seen;                                  // tiles packed in this KV head's run
                    for (int ik3 = 0; ik3 < nkv3; ik3++) {
                        for (int iq2 = 0; iq2 < nkv2*gqa; iq2++) {           // Q heads in order: KV head = iq2/gqa
                            const int ik2 = iq2/gqa;
                            if (iq2 % gqa == 0) seen.assign(ntiles, false);   // a new KV head starts
                            for (int qt = 0; qt < nqtiles; qt++) {
                                for (int64_t ic = 0; ic < nek1; ic += KV) {
                                    const int64_t it = ic/KV;
                                    if ((next_u32() >> 28) == 0) continue;     // a fully masked tile: never packed
                                    const int rows = (int)(nek1 - ic < KV ? nek1 - ic : KV);
                                    const char * src = (const char *)kbuf.data() + ik3*nbk3 + ik2*nbk2 + ic*row_stride;
                                    const bool cached = it < held;
                                    const float * got = ggml_fa_k_tile(&c, scratch.data(), KV, src, row_stride, f16 != 0,
                                                                       ik2, ik3, it, rows, DK);
                                    checked++;
                                    bool bad = got != (cached ? cache.data() + it*DK*KV : scratch.data());
                                    for (int64_t dk = 0; dk < DK && !bad; dk++) {
                                        for (int tk = 0; tk < KV && !bad; tk++) {
                                            float want;
                                            if (tk < rows) {
                                                const char * row = src + (size_t)tk*row_stride;
                                                if (f16) want = GGML_CPU_FP16_TO_FP32(((const ggml_fp16_t *)row)[dk]);
                                                else memcpy(&want, row + dk*sizeof(float), sizeof want);
                                            } else if (cached) {
                                                want = 0.0f;                  // a cached last tile is zero-padded
                                            } else {
                                                continue;                     // scratch padding: as the original path left it
                                            }
                                            bad = memcmp(&got[dk*KV + tk], &want, sizeof want) != 0;
                                        }
                                    }
                                    if (f16) {
                                        // a cached tile is packed once per run of its KV head (the Q heads of one
                                        // KV head are consecutive), a tile past the buffer on every use
                                        const bool fresh = !cached || !seen[it];
                                        want_packs += fresh;
                                        seen[it] = true;
                                    }
                                    if (bad && failures++ < 8) {
                                        printf("FAIL tile DK=%lld nek1=%lld cap=%lld f16=%d head=(%d,%d) q=%d it=%lld\n",
                                               (long long)DK, (long long)nek1, (long long)cap, f16, ik2, ik3, qt, (long long)it);
                                    }
                                }
                            }
                        }
                    }
                    checked++;
                    if (pack_calls != want_packs && failures++ < 8) {
                        printf("FAIL packs DK=%lld nek1=%lld cap=%lld f16=%d: %ld packs, want %ld\n",
                               (long long)DK, (long long)nek1, (long long)cap, f16, pack_calls, want_packs);
                    }
                }
            }
        }
    }
    printf("%s: %ld cases, %ld failures\n", failures ? "FAILED" : "OK", checked, failures);
    return failures != 0;
}
