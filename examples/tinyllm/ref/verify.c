/* verify.c - the reference checker.
 *
 *   tinyllm_ref verify DUMP
 *
 * DUMP is the output of `tinyllm dump -p P -n G`. The reference recomputes, with its own
 * frozen copy of the plain forward pass, the logits after the prompt and after each
 * generation step (feeding the tokens the program chose, so both follow the same path),
 * and requires for every step:
 *   - every logit within TOL * max|reference logit| of the reference value, and
 *   - the chosen token to be the reference's argmax (ties within the same tolerance).
 * Exit status 0 only when every step of the dump passes. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-4
#define PROMPT_SEED 42   /* must match the program's prompt */

static int fail(const char *what, int step) {
    if (step >= 0) printf("checks: FAIL at step %d: %s\n", step, what);
    else printf("checks: FAIL: %s\n", what);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3 || strcmp(argv[1], "verify") != 0) {
        fprintf(stderr, "usage: tinyllm_ref verify DUMP\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f) { perror(argv[2]); return 2; }

    Config c = default_config();
    int dim, hidden, layers, heads, vocab, ctx, P, G;
    unsigned long long seed;
    if (fscanf(f, "TINYLLM-DUMP 1 dim=%d hidden=%d layers=%d heads=%d vocab=%d ctx=%d seed=%llu prompt=%d gen=%d",
               &dim, &hidden, &layers, &heads, &vocab, &ctx, &seed, &P, &G) != 9)
        return fail("dump header missing or malformed", -1);
    if (dim != c.dim || hidden != c.hidden || layers != c.n_layers || heads != c.n_heads ||
        vocab != c.vocab || ctx != c.ctx || seed != c.seed)
        return fail("model configuration differs from the reference model", -1);
    if (P < 1 || G < 0 || P + G > c.ctx) return fail("prompt/generation lengths out of range", -1);

    int *prompt = malloc((size_t)P * sizeof(int));
    uint64_t s = PROMPT_SEED;
    char word[16];
    if (fscanf(f, "%15s", word) != 1 || strcmp(word, "PROMPT") != 0) return fail("PROMPT line missing", -1);
    for (int i = 0; i < P; i++) {
        int tok;
        prompt[i] = (int)(rng_next(&s) % (uint64_t)c.vocab);
        if (fscanf(f, "%d", &tok) != 1 || tok != prompt[i]) return fail("prompt tokens differ", -1);
    }

    Model *m = model_new(c);
    float *got = malloc((size_t)c.vocab * sizeof(float));
    const float *ref = forward(m, prompt, P, 0);
    double worst = 0.0;
    for (int g = 0; g <= G; g++) {
        int step, tok;
        if (fscanf(f, "%15s %d %d", word, &step, &tok) != 3 || strcmp(word, "STEP") != 0 || step != g)
            return fail("STEP line missing or out of order", g);
        if (tok < 0 || tok >= c.vocab) return fail("token out of range", g);
        for (int i = 0; i < c.vocab; i++)
            if (fscanf(f, "%f", &got[i]) != 1) return fail("fewer logits than the vocabulary", g);
        double scale = 0.0;
        for (int i = 0; i < c.vocab; i++) scale = fmax(scale, fabs(ref[i]));
        if (!(scale > 0.0)) return fail("reference logits are all zero", g);
        for (int i = 0; i < c.vocab; i++) {
            double err = fabs((double)got[i] - ref[i]) / scale;
            if (!(err <= TOL)) {   /* also catches NaN */
                printf("checks: FAIL at step %d: logit %d is %.9g, reference %.9g (error %.3g of the max logit, tolerance %.0e)\n",
                       g, i, got[i], ref[i], err, TOL);
                return 1;
            }
            if (err > worst) worst = err;
        }
        const int best = argmax(ref, c.vocab);
        if (tok != best && (ref[best] - ref[tok]) / scale > TOL) {
            printf("checks: FAIL at step %d: greedy token %d, reference argmax %d\n", g, tok, best);
            return 1;
        }
        if (g < G) ref = forward(m, &tok, 1, P + g);
    }
    if (fscanf(f, "%15s", word) == 1) return fail("trailing data after the last step", G);
    printf("checks: ok: prompt %d, %d generated tokens, max logit error %.2g of the max logit (tolerance %.0e)\n",
           P, G, worst, TOL);
    model_free(m);
    free(got);
    free(prompt);
    fclose(f);
    return 0;
}
