/* main.c - tinyllm driver.
 *
 *   tinyllm bench [-p P] [-n G]   prompt phase (P tokens, one batch), then G generated
 *                                 tokens one at a time; prints METRIC lines and a DIGEST of
 *                                 the generated tokens. The prompt is drawn from
 *                                 $AUTORESEARCH_SEED when set (the runner gives both processes
 *                                 of a pair the same seed), so no result can be cached or
 *                                 precomputed, and a candidate that computes something else
 *                                 at the benchmarked positions prints a different digest.
 *   tinyllm dump  [-p P] [-n G]   prompt, then G greedy steps; prints every step's token
 *                                 and logits for the reference to verify
 */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROMPT_SEED 42

/* CPU time of this process, not wall time: on a shared machine the time the scheduler gives
 * to other processes is not charged to the benchmark. The program is single-threaded, so
 * on an idle machine the two agree; a multi-threaded version would be charged for all of
 * its threads (never flattered). */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int *make_prompt(int n, int vocab, uint64_t seed) {
    int *t = malloc((size_t)n * sizeof(int));
    uint64_t s = seed;
    for (int i = 0; i < n; i++) t[i] = (int)(rng_next(&s) % (uint64_t)vocab);
    return t;
}

static int usage(void) {
    fprintf(stderr, "usage: tinyllm bench|dump [-p prompt_tokens] [-n gen_tokens]\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    const char *mode = argv[1];
    int P = 512, G = 448;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-p") && i + 1 < argc) P = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) G = atoi(argv[++i]);
        else return usage();
    }
    Config c = default_config();
    if (P < 1 || G < 0 || P + G > c.ctx) {
        fprintf(stderr, "tinyllm: need 1 <= P and P + G <= %d\n", c.ctx);
        return 2;
    }
    Model *m = model_new(c);
    const char *env_seed = getenv("AUTORESEARCH_SEED");
    uint64_t seed = (!strcmp(mode, "bench") && env_seed && *env_seed) ? strtoull(env_seed, NULL, 10) : PROMPT_SEED;
    int *prompt = make_prompt(P, c.vocab, seed);

    if (!strcmp(mode, "bench")) {
        /* untimed warm-up: first touch of the activation buffers and the KV cache */
        forward(m, prompt, P, 0);
        model_reset(m);
        double t0 = now_s();
        const float *logits = forward(m, prompt, P, 0);
        double t1 = now_s();
        int tok = argmax(logits, c.vocab);
        uint64_t digest = 1469598103934665603ULL;   /* FNV-1a over every greedy token */
        digest = (digest ^ (uint64_t)tok) * 1099511628211ULL;
        for (int g = 0; g < G; g++) {
            logits = forward(m, &tok, 1, P + g);
            tok = argmax(logits, c.vocab);
            digest = (digest ^ (uint64_t)tok) * 1099511628211ULL;
        }
        double t2 = now_s();
        printf("prompt: %d tokens in %.3f s; generation: %d tokens in %.3f s; last token %d\n",
               P, t1 - t0, G, t2 - t1, tok);
        printf("METRIC pp_tps=%.2f\n", P / (t1 - t0));
        if (G > 0) {
            printf("METRIC tg_tps=%.2f\n", G / (t2 - t1));
            printf("METRIC tg_ms_per_tok=%.4f\n", (t2 - t1) * 1000.0 / G);
        }
        printf("DIGEST tokens=%016llx\n", (unsigned long long)digest);
    } else if (!strcmp(mode, "dump")) {
        printf("TINYLLM-DUMP 1 dim=%d hidden=%d layers=%d heads=%d vocab=%d ctx=%d seed=%llu prompt=%d gen=%d\n",
               c.dim, c.hidden, c.n_layers, c.n_heads, c.vocab, c.ctx, (unsigned long long)c.seed, P, G);
        printf("PROMPT");
        for (int i = 0; i < P; i++) printf(" %d", prompt[i]);
        printf("\n");
        const float *logits = forward(m, prompt, P, 0);
        for (int g = 0; g <= G; g++) {
            int tok = argmax(logits, c.vocab);
            printf("STEP %d %d", g, tok);
            for (int i = 0; i < c.vocab; i++) printf(" %.9g", logits[i]);
            printf("\n");
            if (g < G) logits = forward(m, &tok, 1, P + g);
        }
    } else {
        return usage();
    }
    free(prompt);
    model_free(m);
    return 0;
}
