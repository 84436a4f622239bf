// llama-digest: what a build of llama.cpp computes, as one DIGEST line for autoresearch.
//
//   llama-digest MODEL SEED [n_prompt=64] [n_gen=4] [threads=1] [flash_attn=-1]
//
// Decodes one batch of n_prompt token ids drawn from SEED (the prompt's graphs: the repacked
// matrix-matrix kernels, the tiled flash attention), then n_gen single tokens, also drawn from SEED
// (the generation graphs: the matrix-vector kernels), and prints
//
//   DIGEST logits=<16 hex digits>     FNV-1a over the bits of every logit of every position
//
// autoresearch hands both builds of a pair the same seed (AUTORESEARCH_SEED) and requires equal
// digests, so a candidate that skips or changes work in a kernel test-backend-ops does not reach
// (its weights sit in plain buffers, so the repacked Q4_0/Q8_0 paths never run there) is caught.
// Exact bits, not a rounded or arg-max form, because nothing coarser works on the synthetic models
// this example benchmarks: their logits hardly depend on the input (the same token is the most
// likely at every position; the input moves a logit by ~0.1% of its size), so an arg-max digest
// would pass almost any damage, and any rounding grid has values next to its edges. The cost: a
// change that rounds differently (one FMA where two roundings were) is "something else" too, and
// is not kept (README, "What the digest decides"). Every recipe of this example is bit-identical
// on the whole model. -0 counts as +0. Inputs come from the seed, not from sampling, so both
// builds decode the same tokens even when their logits differ; a new seed per pair means no answer
// can be cached across processes.
// Exit status 1 (and no DIGEST) when a logit is not finite or llama.cpp fails.
#include "llama.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

static uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// position i's token: an id above the 3 special tokens, from the seed alone
static llama_token token_at(uint64_t seed, int i, int n_vocab) {
    return (llama_token) (3 + splitmix64(seed * 0x100000001b3ull + (uint64_t) i) % (uint64_t) (n_vocab - 3));
}

static bool parse_int(const char * text, long lo, long hi, long * out) {
    char * end = nullptr;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || v < lo || v > hi) {
        return false;
    }
    *out = v;
    return true;
}

int main(int argc, char ** argv) {
    if (argc < 3 || argc > 7) {
        fprintf(stderr, "usage: %s MODEL SEED [n_prompt=64] [n_gen=4] [threads=1] [flash_attn=-1|0|1]\n", argv[0]);
        return 2;
    }
    char * end = nullptr;
    const uint64_t seed = strtoull(argv[2], &end, 10);
    long n_prompt = 64, n_gen = 4, threads = 1, fa = -1;
    if (end == argv[2] || *end != '\0' || (argc > 3 && !parse_int(argv[3], 1, 8192, &n_prompt)) ||
        (argc > 4 && !parse_int(argv[4], 0, 8192, &n_gen)) || (argc > 5 && !parse_int(argv[5], 1, 1024, &threads)) ||
        (argc > 6 && !parse_int(argv[6], -1, 1, &fa))) {
        fprintf(stderr, "llama-digest: bad arguments (SEED a number, n_prompt 1-8192, n_gen 0-8192, "
                        "threads 1-1024, flash_attn -1, 0 or 1)\n");
        return 2;
    }

    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);   // stdout/stderr: our lines only
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) {
        fprintf(stderr, "llama-digest: cannot load %s\n", argv[1]);
        return 1;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx           = (uint32_t) (n_prompt + n_gen + 16);
    cp.n_batch         = (uint32_t) n_prompt;
    cp.n_ubatch        = (uint32_t) n_prompt;
    cp.n_threads       = (int32_t) threads;
    cp.n_threads_batch = (int32_t) threads;
    cp.flash_attn_type = (llama_flash_attn_type) fa;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama-digest: cannot create a context\n");
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    if (n_vocab <= 3) {
        fprintf(stderr, "llama-digest: the model's vocabulary has %d tokens\n", n_vocab);
        return 1;
    }

    uint64_t hash = 0xcbf29ce484222325ull;   // FNV-1a, 64 bits
    double largest = 0.0;                      // the largest |logit|, said on stderr
    // folds position `row`'s logits into the hash; false on a non-finite logit
    auto fold = [&](const float * logits, long row) {
        for (int t = 0; t < n_vocab; t++) {
            if (!std::isfinite(logits[t])) {
                fprintf(stderr, "llama-digest: logit %d of position %ld is not finite (%g)\n", t, row, logits[t]);
                return false;
            }
            largest = fmax(largest, fabs(logits[t]));
            const float v = logits[t] == 0.0f ? 0.0f : logits[t];
            uint32_t bits;
            memcpy(&bits, &v, sizeof bits);
            for (int b = 0; b < 4; b++) {
                hash = (hash ^ (uint8_t) (bits >> (8 * b))) * 0x100000001b3ull;
            }
        }
        return true;
    };

    llama_batch batch = llama_batch_init((int32_t) n_prompt, 0, 1);
    for (long i = 0; i < n_prompt; i++) {
        batch.token[i]     = token_at(seed, (int) i, n_vocab);
        batch.pos[i]       = (llama_pos) i;
        batch.n_seq_id[i]  = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i]    = 1;
    }
    batch.n_tokens = (int32_t) n_prompt;
    if (llama_decode(ctx, batch) != 0) {
        fprintf(stderr, "llama-digest: the prompt's decode failed\n");
        return 1;
    }
    for (long i = 0; i < n_prompt; i++) {
        if (!fold(llama_get_logits_ith(ctx, (int32_t) i), i)) {
            return 1;
        }
    }
    for (long g = 0; g < n_gen; g++) {
        batch.token[0]     = token_at(seed, (int) (n_prompt + g), n_vocab);
        batch.pos[0]       = (llama_pos) (n_prompt + g);
        batch.n_seq_id[0]  = 1;
        batch.seq_id[0][0] = 0;
        batch.logits[0]    = 1;
        batch.n_tokens     = 1;
        if (llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "llama-digest: the decode of generated token %ld failed\n", g);
            return 1;
        }
        if (!fold(llama_get_logits_ith(ctx, 0), n_prompt + g)) {
            return 1;
        }
    }
    printf("DIGEST logits=%016llx\n", (unsigned long long) hash);
    fprintf(stderr, "llama-digest: %ld positions x %d logits, largest |logit| %.4g\n", n_prompt + n_gen, n_vocab, largest);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
