// Whole-model logits for a fused-vs-unfused comparison (tests/kernels/llama_ab.py --only logits).
//
//   logits_dump MODEL OUT [n_prompt=64] [n_gen=8] [threads=2] [flash_attn=-1]
//
// Decodes one batch of n_prompt fixed token ids (every position's logits: the prompt-processing
// graphs), then n_gen single tokens (the generation graphs), with fixed ids rather than sampled
// ones so two builds see the same inputs even when their logits differ. Writes a header of two
// int32 (n_vocab, n_rows) and n_rows x n_vocab float32 to OUT. Which fusions run is chosen by the
// build and by GGML_CPU_DISABLE_FUSION=1 (the CPU backend's switch), not here.
#include "llama.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

static llama_token token_at(int i, int n_vocab) {
    // a fixed pseudo-random sequence of ids above the 3 special tokens
    uint32_t x = 2654435761u * (uint32_t) (i + 1);
    x ^= x >> 15;
    return (llama_token) (3 + x % (uint32_t) (n_vocab - 3));
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL OUT [n_prompt] [n_gen] [threads] [flash_attn -1|0|1]\n", argv[0]);
        return 2;
    }
    const int n_prompt = argc > 3 ? atoi(argv[3]) : 64;
    const int n_gen    = argc > 4 ? atoi(argv[4]) : 8;
    const int threads  = argc > 5 ? atoi(argv[5]) : 2;
    const int fa       = argc > 6 ? atoi(argv[6]) : -1;
    if (n_prompt < 1 || n_gen < 0 || threads < 1) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }

    llama_backend_init();
    llama_model * model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx           = (uint32_t) (n_prompt + n_gen + 16);
    cp.n_batch         = (uint32_t) n_prompt;
    cp.n_ubatch        = (uint32_t) n_prompt;
    cp.n_threads       = threads;
    cp.n_threads_batch = threads;
    cp.flash_attn_type = (llama_flash_attn_type) fa;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create a context\n");
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    FILE * out = fopen(argv[2], "wb");
    if (!out) {
        fprintf(stderr, "cannot write %s\n", argv[2]);
        return 1;
    }
    const int32_t header[2] = { n_vocab, n_prompt + n_gen };
    fwrite(header, sizeof(int32_t), 2, out);

    llama_batch batch = llama_batch_init(n_prompt, 0, 1);
    for (int i = 0; i < n_prompt; i++) {
        batch.token[i]     = token_at(i, n_vocab);
        batch.pos[i]       = i;
        batch.n_seq_id[i]  = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i]    = 1;
    }
    batch.n_tokens = n_prompt;
    if (llama_decode(ctx, batch) != 0) {
        fprintf(stderr, "prompt decode failed\n");
        return 1;
    }
    for (int i = 0; i < n_prompt; i++) {
        fwrite(llama_get_logits_ith(ctx, i), sizeof(float), (size_t) n_vocab, out);
    }
    for (int g = 0; g < n_gen; g++) {
        batch.token[0]     = token_at(n_prompt + g, n_vocab);
        batch.pos[0]       = n_prompt + g;
        batch.n_seq_id[0]  = 1;
        batch.seq_id[0][0] = 0;
        batch.logits[0]    = 1;
        batch.n_tokens     = 1;
        if (llama_decode(ctx, batch) != 0) {
            fprintf(stderr, "decode of generated token %d failed\n", g);
            return 1;
        }
        fwrite(llama_get_logits_ith(ctx, 0), sizeof(float), (size_t) n_vocab, out);
    }
    fclose(out);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
