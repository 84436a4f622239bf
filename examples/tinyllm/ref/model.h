/* FROZEN REFERENCE: a copy of the original plain src/ code. checks.sh compares the program
 * against it, so it must never be edited or optimized. */
/* model.h - a tiny llama-style transformer with random weights. */
#ifndef TINYLLM_MODEL_H
#define TINYLLM_MODEL_H

#include <stdint.h>

typedef struct {
    int dim, hidden, n_layers, n_heads, vocab, ctx;   /* ctx: KV cache length */
    uint64_t seed;
} Config;

/* The fixed model every binary uses; checks compare against a reference built from it. */
Config default_config(void);

typedef struct Model Model;

Model *model_new(Config c);             /* weights drawn from c.seed, deterministic */
void model_free(Model *m);
void model_reset(Model *m);             /* empty the KV cache */

/* Process n tokens at positions pos0..pos0+n-1 in one batch, filling the KV cache.
 * Returns the logits (vocab floats) of the last token; valid until the next call. */
const float *forward(Model *m, const int *tokens, int n, int pos0);

int argmax(const float *v, int n);
uint64_t rng_next(uint64_t *state);     /* xorshift64* */

#endif
