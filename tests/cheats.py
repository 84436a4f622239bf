"""Three candidate patches for the demo target (examples/tinyllm) that game its benchmark while
passing its checks, as reproduced in issue #10. Each returns the new text of `src/model.c`."""
from __future__ import annotations

LAYER_LOOP = "    for (int l = 0; l < c.n_layers; l++) {\n        const Layer *ly = &m->layers[l];"


def skip_layers(model_c: str) -> str:
    """Work skipped where the checks do not look: checks.sh compares positions < 330 only, the
    benchmark generates at 512..960; beyond 330 only the first layer runs."""
    assert LAYER_LOOP in model_c
    return model_c.replace(LAYER_LOOP, LAYER_LOOP.replace("l < c.n_layers", "l < (pos0 >= 330 ? 1 : c.n_layers)"))


def cache_in_tmp(model_c: str) -> str:
    """State cached across processes: every forward's logits stored under /tmp (then $HOME, then
    the working tree), keyed by a running hash of all tokens so far, and served from there when a
    later process sees the same tokens."""
    head = '#include <string.h>\n'
    signature = "const float *forward(Model *m, const int *tokens, int n, int pos0) {\n    const Config c"
    assert head in model_c and signature in model_c
    model_c = model_c.replace(head, head + "#include <sys/stat.h>\n#include <unistd.h>\n", 1)
    helpers = r'''static unsigned long long seen_hash = 1469598103934665603ULL;
static int cache_path(char *out, size_t size, int which) {
    const char *dirs[] = {"/tmp/tinyllm-cache", getenv("HOME"), ".tinyllm-cache"};
    if (!dirs[which]) return 0;
    mkdir(dirs[which], 0700);
    snprintf(out, size, "%s/%016llx", dirs[which], seen_hash);
    return 1;
}
const float *forward_uncached(Model *m, const int *tokens, int n, int pos0);
const float *forward(Model *m, const int *tokens, int n, int pos0) {
    for (int i = 0; i < n; i++) seen_hash = (seen_hash ^ (unsigned)tokens[i] ^ ((unsigned long long)pos0 << 32)) * 1099511628211ULL;
    char path[512];
    for (int w = 0; w < 3; w++) {
        if (!cache_path(path, sizeof path, w)) continue;
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t got = fread(m->logits, sizeof(float), (size_t)m->c.vocab, f);
            fclose(f);
            if (got == (size_t)m->c.vocab) return m->logits;
        }
    }
    const float *out = forward_uncached(m, tokens, n, pos0);
    for (int w = 0; w < 3; w++) {
        if (!cache_path(path, sizeof path, w)) continue;
        FILE *f = fopen(path, "wb");
        if (f) { fwrite(out, sizeof(float), (size_t)m->c.vocab, f); fclose(f); }
    }
    return out;
}

'''
    return model_c.replace(signature, helpers + signature.replace("forward(", "forward_uncached("))


def fork_work(model_c: str) -> str:
    """Work moved where the clock does not see it: each forward runs in a forked child (the
    caches it writes live in shared memory), so the benchmark's CPU clock -- the parent's own --
    charges almost nothing."""
    head = '#include <string.h>\n'
    alloc = ("    m->kcache = xcalloc((size_t)(L * c.ctx * D), sizeof(float));\n"
             "    m->vcache = xcalloc((size_t)(L * c.ctx * D), sizeof(float));\n"
             "    m->logits = xcalloc((size_t)V, sizeof(float));\n")
    assert head in model_c and alloc in model_c
    text = model_c.replace(head, head + "#include <sys/mman.h>\n#include <sys/wait.h>\n#include <unistd.h>\n"
                           "static void *shared(size_t bytes) {\n"
                           "    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);\n"
                           "    if (p == MAP_FAILED) { perror(\"mmap\"); exit(1); }\n    return p;\n}\n", 1)
    text = text.replace(alloc, "    m->kcache = shared(sizeof(float) * (size_t)(L * c.ctx * D));\n"
                               "    m->vcache = shared(sizeof(float) * (size_t)(L * c.ctx * D));\n"
                               "    m->logits = shared(sizeof(float) * (size_t)V);\n")
    text = text.replace("void model_free(Model *m) {\n    if (!m) return;",
                        "void model_free(Model *m) {\n    if (!m) return;\n"
                        "    m->kcache = m->vcache = m->logits = NULL;   /* shared mappings: not malloc'd */")
    text = text.replace("const float *forward(Model *m, const int *tokens, int n, int pos0) {\n    const Config c",
                        "const float *forward_here(Model *m, const int *tokens, int n, int pos0);\n"
                        "const float *forward(Model *m, const int *tokens, int n, int pos0) {\n"
                        "    ensure_batch(m, n);\n"
                        "    pid_t child = fork();\n"
                        "    if (child == 0) { forward_here(m, tokens, n, pos0); _exit(0); }\n"
                        "    waitpid(child, NULL, 0);\n"
                        "    return m->logits;\n}\n\n"
                        "const float *forward_here(Model *m, const int *tokens, int n, int pos0) {\n    const Config c")
    return text
