/* FROZEN REFERENCE: a copy of the original plain src/ code. checks.sh compares the program
 * against it, so it must never be edited or optimized. */
/* model.c - forward pass of a llama-style decoder: RMSNorm, attention with RoPE and a KV
 * cache, SwiGLU feed-forward. The batch forward computes every op over the whole batch
 * before the next op starts, and attention scores cover the whole padded KV window with a
 * causal mask, as graph-based CPU backends do. */
#include "model.h"
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KV_PAD 256   /* attention window is the used cache rounded up to this */

Config default_config(void) {
    Config c = {.dim = 128, .hidden = 352, .n_layers = 4, .n_heads = 16, .vocab = 512,
                .ctx = 2048, .seed = 0x5eed1234abcdULL};
    return c;
}

typedef struct {
    float *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3;
} Layer;

struct Model {
    Config c;
    float *weights;                 /* one allocation for everything below */
    float *embed, *rms_final, *wcls;
    Layer *layers;
    float *rope_cos, *rope_sin;     /* ctx x head_dim/2 */
    float *kcache, *vcache;         /* n_layers x ctx x dim */
    int batch_cap;                  /* activation buffers sized for this many tokens */
    float *x, *xb, *q, *k, *v, *att_out, *h1, *h3, *mask, *scores, *att, *logits;
};

uint64_t rng_next(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static float rng_uniform(uint64_t *s) {   /* in [-1, 1) */
    return (float)((rng_next(s) >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void fill(float *w, long n, float amp, uint64_t *s) {
    for (long i = 0; i < n; i++) w[i] = amp * rng_uniform(s);
}

static void fill_norm(float *w, int n, uint64_t *s) {
    for (int i = 0; i < n; i++) w[i] = 1.0f + 0.1f * rng_uniform(s);
}

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n, size);
    if (!p) { fprintf(stderr, "tinyllm: out of memory\n"); exit(1); }
    return p;
}

Model *model_new(Config c) {
    Model *m = xcalloc(1, sizeof *m);
    m->c = c;
    const long D = c.dim, H = c.hidden, V = c.vocab, L = c.n_layers;
    const long per_layer = 2 * D + 4 * D * D + 3 * D * H;
    m->weights = xcalloc((size_t)(2 * V * D + D + L * per_layer), sizeof(float));
    uint64_t s = c.seed ? c.seed : 1;
    float *p = m->weights;
    const float a_d = sqrtf(3.0f / D), a_h = sqrtf(3.0f / H);
    m->embed = p; fill(p, V * D, 1.0f, &s); p += V * D;
    m->layers = xcalloc((size_t)L, sizeof(Layer));
    for (int l = 0; l < L; l++) {
        Layer *ly = &m->layers[l];
        ly->rms_att = p; fill_norm(p, D, &s); p += D;
        ly->wq = p; fill(p, D * D, a_d, &s); p += D * D;
        ly->wk = p; fill(p, D * D, a_d, &s); p += D * D;
        ly->wv = p; fill(p, D * D, a_d, &s); p += D * D;
        ly->wo = p; fill(p, D * D, a_d, &s); p += D * D;
        ly->rms_ffn = p; fill_norm(p, D, &s); p += D;
        ly->w1 = p; fill(p, H * D, a_d, &s); p += H * D;
        ly->w3 = p; fill(p, H * D, a_d, &s); p += H * D;
        ly->w2 = p; fill(p, D * H, a_h, &s); p += D * H;
    }
    m->rms_final = p; fill_norm(p, D, &s); p += D;
    m->wcls = p; fill(p, V * D, a_d, &s); p += V * D;

    const int hd = c.dim / c.n_heads;
    m->rope_cos = xcalloc((size_t)c.ctx * hd / 2, sizeof(float));
    m->rope_sin = xcalloc((size_t)c.ctx * hd / 2, sizeof(float));
    for (int pos = 0; pos < c.ctx; pos++) {
        for (int i = 0; i < hd / 2; i++) {
            double theta = pos * pow(10000.0, -2.0 * i / hd);
            m->rope_cos[pos * hd / 2 + i] = (float)cos(theta);
            m->rope_sin[pos * hd / 2 + i] = (float)sin(theta);
        }
    }
    m->kcache = xcalloc((size_t)(L * c.ctx * D), sizeof(float));
    m->vcache = xcalloc((size_t)(L * c.ctx * D), sizeof(float));
    m->logits = xcalloc((size_t)V, sizeof(float));
    return m;
}

static void ensure_batch(Model *m, int n) {
    if (n <= m->batch_cap) return;
    const Config c = m->c;
    float **bufs[] = {&m->x, &m->xb, &m->q, &m->k, &m->v, &m->att_out, &m->h1, &m->h3,
                      &m->mask, &m->scores, &m->att};
    const long sizes[] = {c.dim, c.dim, c.dim, c.dim, c.dim, c.dim, c.hidden, c.hidden,
                          c.ctx, c.ctx, c.ctx};
    for (int i = 0; i < 11; i++) {
        free(*bufs[i]);
        *bufs[i] = xcalloc((size_t)(n * sizes[i]), sizeof(float));
    }
    m->batch_cap = n;
}

void model_reset(Model *m) {
    const Config c = m->c;
    memset(m->kcache, 0, (size_t)c.n_layers * c.ctx * c.dim * sizeof(float));
    memset(m->vcache, 0, (size_t)c.n_layers * c.ctx * c.dim * sizeof(float));
}

void model_free(Model *m) {
    if (!m) return;
    float *bufs[] = {m->x, m->xb, m->q, m->k, m->v, m->att_out, m->h1, m->h3, m->mask,
                     m->scores, m->att, m->logits, m->kcache, m->vcache, m->rope_cos,
                     m->rope_sin, m->weights};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(m->layers);
    free(m);
}

int argmax(const float *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (v[i] > v[best]) best = i;
    return best;
}

const float *forward(Model *m, const int *tokens, int n, int pos0) {
    const Config c = m->c;
    const int D = c.dim, H = c.hidden, hd = c.dim / c.n_heads;
    if (n < 1 || pos0 < 0 || pos0 + n > c.ctx) {
        fprintf(stderr, "tinyllm: positions %d..%d outside the context of %d\n", pos0, pos0 + n - 1, c.ctx);
        exit(1);
    }
    if (hd % 8 != 0) {
        fprintf(stderr, "tinyllm: head_dim %d is not a multiple of 8\n", hd);
        exit(1);
    }
    ensure_batch(m, n);
    int n_kv = (pos0 + n + KV_PAD - 1) / KV_PAD * KV_PAD;
    if (n_kv > c.ctx) n_kv = c.ctx;
    const float kq_scale = 1.0f / sqrtf((float)hd);

    /* causal mask, n x n_kv: token t (position pos0+t) sees cache cells 0..pos0+t */
    for (int t = 0; t < n; t++) {
        float *row = m->mask + (long)t * n_kv;
        for (int j = 0; j < n_kv; j++) row[j] = j <= pos0 + t ? 0.0f : -INFINITY;
    }
    for (int t = 0; t < n; t++) memcpy(m->x + (long)t * D, m->embed + (long)tokens[t] * D, D * sizeof(float));

    for (int l = 0; l < c.n_layers; l++) {
        const Layer *ly = &m->layers[l];
        float *kc = m->kcache + (long)l * c.ctx * D;
        float *vc = m->vcache + (long)l * c.ctx * D;

        /* attention block */
        rmsnorm(m->xb, m->x, ly->rms_att, n, D);
        matmul(m->q, m->xb, ly->wq, n, D, D);
        matmul(m->k, m->xb, ly->wk, n, D, D);
        matmul(m->v, m->xb, ly->wv, n, D, D);
        for (int t = 0; t < n; t++) {
            const int pos = pos0 + t;
            rope(m->q + (long)t * D, c.n_heads, hd, m->rope_cos + pos * hd / 2, m->rope_sin + pos * hd / 2);
            rope(m->k + (long)t * D, c.n_heads, hd, m->rope_cos + pos * hd / 2, m->rope_sin + pos * hd / 2);
            memcpy(kc + (long)pos * D, m->k + (long)t * D, D * sizeof(float));
            memcpy(vc + (long)pos * D, m->v + (long)t * D, D * sizeof(float));
        }
        for (int h = 0; h < c.n_heads; h++) {
            for (int t = 0; t < n; t++) {
                const float *q = m->q + (long)t * D + h * hd;
                float *scores = m->scores + (long)t * n_kv;
                float *att = m->att + (long)t * n_kv;
                for (int j = 0; j < n_kv; j++) scores[j] = vec_dot(q, kc + (long)j * D + h * hd, hd);
                softmax(att, scores, m->mask + (long)t * n_kv, n_kv, kq_scale);
                /* out = att . V, eight output dims at a time (head_dim % 8 == 0) */
                float *out = m->att_out + (long)t * D + h * hd;
                for (int i = 0; i < hd; i += 8) {
                    v8 acc = {0};
                    for (int j = 0; j < n_kv; j++) acc += att[j] * load8(vc + (long)j * D + h * hd + i);
                    store8(out + i, acc);
                }
            }
        }
        matmul(m->xb, m->att_out, ly->wo, n, D, D);
        vec_add(m->x, m->xb, n * D);

        /* feed-forward block */
        rmsnorm(m->xb, m->x, ly->rms_ffn, n, D);
        matmul(m->h1, m->xb, ly->w1, n, D, H);
        matmul(m->h3, m->xb, ly->w3, n, D, H);
        swiglu(m->h1, m->h3, n * H);
        matmul(m->xb, m->h1, ly->w2, n, H, D);
        vec_add(m->x, m->xb, n * D);
    }
    const float *last = m->x + (long)(n - 1) * D;
    rmsnorm(m->xb, last, m->rms_final, 1, D);
    matmul(m->logits, m->xb, m->wcls, 1, D, c.vocab);
    return m->logits;
}
