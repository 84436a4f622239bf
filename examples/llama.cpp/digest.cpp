// llama-digest: what a build of llama.cpp computes, as DIGEST lines for autoresearch; with --bench
// it also times that computation, so the process that is timed is the process that is checked.
//
//   llama-digest MODEL SEED [n_prompt=64] [n_gen=4] [threads=1] [flash_attn=-1]
//   llama-digest --bench MODEL SEED n_prompt n_gen [threads=1] [flash_attn=-1]
//
// Digest mode (the yardstick's workload, sim.sh run): decodes one batch of n_prompt token ids drawn
// from SEED (the prompt's graphs: the repacked matrix-matrix kernels, the tiled flash attention),
// then n_gen single tokens, also drawn from SEED (the generation graphs: the matrix-vector kernels),
// and prints
//
//   DIGEST logits=<16 hex digits>     FNV-1a over the bits of every logit of every position
//
// Bench mode (bench.sh, the wall-clock sample): llama-bench's two tests, done as llama-bench does
// them (same context sizes, batch 2048, micro-batch 512, a threadpool of `threads`, one untimed
// warm-up of the whole prompt and of one generated token, the memory cleared before each timed
// run, only the prompt's last position computed to logits), with inputs drawn from SEED instead of
// rand(), and prints
//
//   METRIC pp<n_prompt>=<tokens/s>   DIGEST pp<n_prompt>=<hex>   the timed prompt's logits
//   METRIC tg<n_gen>=<tokens/s>      DIGEST tg<n_gen>=<hex>      every timed generated token's logits
//
// The clock covers each llama_decode and its llama_synchronize, not the hashing after it. llama-bench
// itself checks nothing it computes, so a candidate that recognised it (its batch shapes, its name)
// could skip work there and be both timed as faster and digested as correct by a second process;
// here the timed logits are the digested ones. The warm-up draws other tokens than the timed run,
// so no answer can be carried from one to the other.
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
// Exit status 1 (and no DIGEST) when a logit is not finite or llama.cpp fails; 2 on bad arguments.
#include "ggml-cpu.h"
#include "llama.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// the token ids the runs decode, each from the seed alone; stream 0 is digest mode's (unchanged since
// its first version), the others bench mode's, so its warm-ups never decode what it times
enum stream : uint64_t { DIGEST_RUN = 0, WARMUP_PROMPT = 1, TIMED_PROMPT = 2, WARMUP_GEN = 3, TIMED_GEN = 4 };

// position i's token of a stream: an id above the 3 special tokens
static llama_token token_at(uint64_t seed, stream s, long i, int n_vocab) {
    const uint64_t x = seed * 0x100000001b3ull + ((uint64_t) s << 40) + (uint64_t) i;
    return (llama_token) (3 + splitmix64(x) % (uint64_t) (n_vocab - 3));
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

// FNV-1a (64 bits) over the exact bits of logits; -0 counts as +0
struct logit_hash {
    uint64_t hash    = 0xcbf29ce484222325ull;
    double   largest = 0.0;   // the largest |logit|, said on stderr

    // folds position `row`'s logits in; false (and why, on stderr) on a non-finite logit
    bool fold(const float * logits, int n_vocab, long row) {
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
    }
};

struct run_params {
    const char * model_path;
    uint64_t     seed;
    long         n_prompt, n_gen, threads, fa;
};

static llama_context * new_context(llama_model * model, const run_params & rp, long n_ctx, long n_batch, long n_ubatch) {
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx           = (uint32_t) n_ctx;
    cp.n_batch         = (uint32_t) n_batch;
    cp.n_ubatch        = (uint32_t) n_ubatch;
    cp.n_threads       = (int32_t) rp.threads;
    cp.n_threads_batch = (int32_t) rp.threads;
    cp.flash_attn_type = (llama_flash_attn_type) rp.fa;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama-digest: cannot create a context of %ld positions\n", n_ctx);
    }
    return ctx;
}

// decodes tokens [from, from + n) of a stream at positions [pos, pos + n); only the last one gets logits
// unless `all_logits`
static bool decode(llama_context * ctx, llama_batch & batch, const run_params & rp, stream s, long from, long n, long pos,
                   int n_vocab, bool all_logits) {
    for (long i = 0; i < n; i++) {
        batch.token[i]     = token_at(rp.seed, s, from + i, n_vocab);
        batch.pos[i]       = (llama_pos) (pos + i);
        batch.n_seq_id[i]  = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i]    = all_logits || i == n - 1;
    }
    batch.n_tokens = (int32_t) n;
    const int32_t res = llama_decode(ctx, batch);
    if (res != 0) {
        fprintf(stderr, "llama-digest: llama_decode of %ld tokens at position %ld failed (%d)\n", n, pos, res);
        return false;
    }
    return true;
}

static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// digest mode: one context, the prompt with every position's logits, then n_gen tokens
static int digest_run(llama_model * model, const run_params & rp, int n_vocab) {
    llama_context * ctx = new_context(model, rp, rp.n_prompt + rp.n_gen + 16, rp.n_prompt, rp.n_prompt);
    if (!ctx) {
        return 1;
    }
    logit_hash h;
    llama_batch batch = llama_batch_init((int32_t) rp.n_prompt, 0, 1);
    bool ok = decode(ctx, batch, rp, DIGEST_RUN, 0, rp.n_prompt, 0, n_vocab, true);
    for (long i = 0; ok && i < rp.n_prompt; i++) {
        ok = h.fold(llama_get_logits_ith(ctx, (int32_t) i), n_vocab, i);
    }
    for (long g = 0; ok && g < rp.n_gen; g++) {
        const long pos = rp.n_prompt + g;
        ok = decode(ctx, batch, rp, DIGEST_RUN, pos, 1, pos, n_vocab, true) &&
             h.fold(llama_get_logits_ith(ctx, 0), n_vocab, pos);
    }
    if (ok) {
        printf("DIGEST logits=%016llx\n", (unsigned long long) h.hash);
        fprintf(stderr, "llama-digest: %ld positions x %d logits, largest |logit| %.4g\n", rp.n_prompt + rp.n_gen,
                n_vocab, h.largest);
    }
    llama_batch_free(batch);
    llama_free(ctx);
    return ok ? 0 : 1;
}

// bench mode, one of llama-bench's tests: prompt (n_prompt > 0, n_gen == 0) or generation (the reverse),
// in a context of its own, as llama-bench makes one per test
static int bench_test(llama_model * model, ggml_threadpool * pool, const run_params & rp, long n_prompt, long n_gen,
                      int n_vocab) {
    const long n_batch = 2048, n_ubatch = 512;   // llama-bench's defaults
    llama_context * ctx = new_context(model, rp, n_prompt + n_gen, n_batch, n_ubatch);
    if (!ctx) {
        return 1;
    }
    llama_attach_threadpool(ctx, pool, nullptr);
    llama_memory_t mem = llama_get_memory(ctx);
    llama_batch batch = llama_batch_init((int32_t) n_batch, 0, 1);
    logit_hash h;
    double seconds = 0.0;
    bool ok = true;
    if (n_prompt > 0) {
        // warm-up (untimed, other tokens), then the timed prompt in chunks of n_batch, as llama-bench
        for (long done = 0; ok && done < n_prompt; done += n_batch) {
            ok = decode(ctx, batch, rp, WARMUP_PROMPT, done, std::min(n_batch, n_prompt - done), done, n_vocab, false);
        }
        llama_synchronize(ctx);
        llama_memory_clear(mem, false);
        for (long done = 0; ok && done < n_prompt; done += n_batch) {
            const long n = std::min(n_batch, n_prompt - done);
            const auto t0 = std::chrono::steady_clock::now();
            ok = decode(ctx, batch, rp, TIMED_PROMPT, done, n, done, n_vocab, false);
            llama_synchronize(ctx);
            seconds += seconds_since(t0);
            ok = ok && h.fold(llama_get_logits_ith(ctx, (int32_t) (n - 1)), n_vocab, done + n - 1);
        }
    } else {
        ok = decode(ctx, batch, rp, WARMUP_GEN, 0, 1, 0, n_vocab, true);
        llama_synchronize(ctx);
        llama_memory_clear(mem, false);
        // each token's logits are copied aside (~0.05 ms) and hashed after the loop, not between two
        // decodes: hashing takes ~1 ms a token, long enough for the idle worker threads to stop
        // spinning and sleep, which the next decode would pay for and llama-bench never does
        std::vector<float> logits((size_t) n_gen * (size_t) n_vocab);
        for (long g = 0; ok && g < n_gen; g++) {
            const auto t0 = std::chrono::steady_clock::now();
            ok = decode(ctx, batch, rp, TIMED_GEN, g, 1, g, n_vocab, true);
            llama_synchronize(ctx);
            seconds += seconds_since(t0);
            if (ok) {
                memcpy(&logits[(size_t) g * (size_t) n_vocab], llama_get_logits_ith(ctx, 0), sizeof(float) * (size_t) n_vocab);
            }
        }
        for (long g = 0; ok && g < n_gen; g++) {
            ok = h.fold(&logits[(size_t) g * (size_t) n_vocab], n_vocab, g);
        }
    }
    if (ok) {
        const char * name = n_prompt > 0 ? "pp" : "tg";
        const long   n    = n_prompt > 0 ? n_prompt : n_gen;
        printf("METRIC %s%ld=%.3f\n", name, n, (double) n / seconds);
        printf("DIGEST %s%ld=%016llx\n", name, n, (unsigned long long) h.hash);
        fprintf(stderr, "llama-digest: %s%ld %.3f s timed, largest |logit| %.4g\n", name, n, seconds, h.largest);
    }
    llama_batch_free(batch);
    llama_free(ctx);
    return ok ? 0 : 1;
}

static int bench_run(llama_model * model, const run_params & rp, int n_vocab) {
    ggml_threadpool_params tpp = ggml_threadpool_params_default((int) rp.threads);
    ggml_threadpool * pool = ggml_threadpool_new(&tpp);
    if (!pool) {
        fprintf(stderr, "llama-digest: cannot create a threadpool of %ld threads\n", rp.threads);
        return 1;
    }
    int rc = 0;
    if (rp.n_prompt > 0) {
        rc = bench_test(model, pool, rp, rp.n_prompt, 0, n_vocab);
    }
    if (rc == 0 && rp.n_gen > 0) {
        rc = bench_test(model, pool, rp, 0, rp.n_gen, n_vocab);
    }
    ggml_threadpool_free(pool);
    return rc;
}

int main(int argc, char ** argv) {
    const bool bench = argc > 1 && strcmp(argv[1], "--bench") == 0;
    const int  first = bench ? 2 : 1;   // index of MODEL
    const int  n_args = argc - first;   // MODEL SEED [...]
    if (n_args < (bench ? 4 : 2) || n_args > 6) {
        fprintf(stderr, "usage: %s MODEL SEED [n_prompt=64] [n_gen=4] [threads=1] [flash_attn=-1|0|1]\n"
                        "       %s --bench MODEL SEED n_prompt n_gen [threads=1] [flash_attn=-1|0|1]\n", argv[0], argv[0]);
        return 2;
    }
    run_params rp = { argv[first], 0, 64, 4, 1, -1 };
    char * end = nullptr;
    rp.seed = strtoull(argv[first + 1], &end, 10);
    if (end == argv[first + 1] || *end != '\0' || argv[first + 1][0] == '-' ||
        (n_args > 2 && !parse_int(argv[first + 2], bench ? 0 : 1, 8192, &rp.n_prompt)) ||
        (n_args > 3 && !parse_int(argv[first + 3], 0, 8192, &rp.n_gen)) ||
        (n_args > 4 && !parse_int(argv[first + 4], 1, 1024, &rp.threads)) ||
        (n_args > 5 && !parse_int(argv[first + 5], -1, 1, &rp.fa)) || (bench && rp.n_prompt + rp.n_gen == 0)) {
        fprintf(stderr, "llama-digest: bad arguments (SEED a number, n_prompt %s-8192, n_gen 0-8192%s, "
                        "threads 1-1024, flash_attn -1, 0 or 1)\n", bench ? "0" : "1", bench ? ", not both 0" : "");
        return 2;
    }

    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);   // stdout/stderr: our lines only
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(rp.model_path, llama_model_default_params());
    if (!model) {
        fprintf(stderr, "llama-digest: cannot load %s\n", rp.model_path);
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    int rc = 1;
    if (n_vocab <= 3) {
        fprintf(stderr, "llama-digest: the model's vocabulary has %d tokens\n", n_vocab);
    } else {
        rc = bench ? bench_run(model, rp, n_vocab) : digest_run(model, rp, n_vocab);
    }
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
