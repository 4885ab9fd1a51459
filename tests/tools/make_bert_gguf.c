/*
 * make_bert_gguf.c — writes a BERT embedding model in GGUF with random
 * weights, for the local-provider tests and benchmark: the real BERT
 * vocabulary and tokenizer settings are copied from a vocabulary-only GGUF
 * (llama.cpp's models/ggml-vocab-bert-bge.gguf), the shape comes from the
 * command line, and the weights from a fixed-seed generator, so the same
 * arguments always give the same file. Written with ggml's own gguf API.
 *
 * Usage: make_bert_gguf VOCAB.gguf OUT.gguf [tiny|bge-small]
 *   tiny       32 dims, 2 layers, 2 heads, context 300: fast, for the tests
 *   bge-small  384 dims, 12 layers, 12 heads, context 512: bge-small-en's shape
 * Matrices are F16; norms, biases, token types and positions stay F32.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "gguf.h"

typedef struct shape {
    const char *name;
    int embd, layers, heads, ff, ctx;
} shape;

static const shape shapes[] = {
    {"tiny", 32, 2, 2, 64, 300}, /* a context that does not divide the 512-token calls */
    {"bge-small", 384, 12, 12, 1536, 512},
};

static unsigned long long rng = 0x9e3779b97f4a7c15ull;

static float uniform(void) /* in [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static struct ggml_context *mem;
static struct gguf_context *out;

/* Adds tensor `name` of ne0 × ne1 (ne1 = 1 for a vector): values
 * base + scale × uniform, F16 for matrices unless keep_f32. */
static void add(const char *name, int64_t ne0, int64_t ne1, float base, float scale, int keep_f32)
{
    enum ggml_type type = (ne1 > 1 && !keep_f32) ? GGML_TYPE_F16 : GGML_TYPE_F32;
    struct ggml_tensor *t = ne1 > 1 ? ggml_new_tensor_2d(mem, type, ne0, ne1)
                                    : ggml_new_tensor_1d(mem, type, ne0);
    if (!t) {
        fprintf(stderr, "make_bert_gguf: out of tensor memory at %s\n", name);
        exit(1);
    }
    ggml_set_name(t, name);
    int64_t n = ne0 * ne1;
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) exit(1);
    for (int64_t i = 0; i < n; i++) v[i] = base + scale * uniform();
    if (type == GGML_TYPE_F16)
        ggml_fp32_to_fp16_row(v, t->data, n);
    else
        memcpy(t->data, v, (size_t)n * sizeof *v);
    free(v);
    gguf_add_tensor(out, t);
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: make_bert_gguf VOCAB.gguf OUT.gguf [tiny|bge-small]\n");
        return 2;
    }
    const shape *s = &shapes[0];
    if (argc == 4) {
        s = NULL;
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            if (!strcmp(argv[3], shapes[i].name)) s = &shapes[i];
        if (!s) {
            fprintf(stderr, "make_bert_gguf: unknown shape %s\n", argv[3]);
            return 2;
        }
    }
    struct gguf_init_params vp = {.no_alloc = true, .ctx = NULL};
    struct gguf_context *vocab = gguf_init_from_file(argv[1], vp);
    if (!vocab) {
        fprintf(stderr, "make_bert_gguf: cannot read %s\n", argv[1]);
        return 1;
    }
    int64_t tok = gguf_find_key(vocab, "tokenizer.ggml.tokens");
    int64_t types = gguf_find_key(vocab, "tokenizer.ggml.token_type_count");
    if (tok < 0 || types < 0) {
        fprintf(stderr, "make_bert_gguf: %s has no BERT vocabulary\n", argv[1]);
        return 1;
    }
    int64_t n_vocab = (int64_t)gguf_get_arr_n(vocab, tok);
    int64_t n_types = gguf_get_val_u32(vocab, types);

    out = gguf_init_empty();
    gguf_set_kv(out, vocab); /* tokenizer.*, general.architecture = bert */
    char name[96];
    snprintf(name, sizeof name, "clawmem-test-bert-%s", s->name);
    gguf_set_val_str(out, "general.name", name);
    gguf_set_val_u32(out, "general.file_type", 1); /* mostly F16 */
    gguf_set_val_u32(out, "bert.block_count", (uint32_t)s->layers);
    gguf_set_val_u32(out, "bert.context_length", (uint32_t)s->ctx);
    gguf_set_val_u32(out, "bert.embedding_length", (uint32_t)s->embd);
    gguf_set_val_u32(out, "bert.feed_forward_length", (uint32_t)s->ff);
    gguf_set_val_u32(out, "bert.attention.head_count", (uint32_t)s->heads);
    gguf_set_val_f32(out, "bert.attention.layer_norm_epsilon", 1e-12f);
    gguf_set_val_bool(out, "bert.attention.causal", false);
    gguf_set_val_u32(out, "bert.pooling_type", 1); /* mean */

    int64_t e = s->embd, ff = s->ff;
    size_t bytes = (size_t)(n_vocab * e + s->ctx * e + n_types * e) * 4 +
                   (size_t)s->layers * (size_t)(4 * e * e + 2 * e * ff + 16 * e + 2 * ff) * 4 +
                   (size_t)(64 + 16 * s->layers) * ggml_tensor_overhead() + (1u << 20);
    struct ggml_init_params mp = {.mem_size = bytes, .mem_buffer = NULL, .no_alloc = false};
    mem = ggml_init(mp);
    if (!mem) return 1;

    float w = 1.0f / sqrtf((float)e); /* keeps activations in range through the layers */
    add("token_embd.weight", e, n_vocab, 0, 0.5f, 0);
    add("token_types.weight", e, n_types, 0, 0.05f, 1);
    add("position_embd.weight", e, s->ctx, 0, 0.05f, 1);
    add("token_embd_norm.weight", e, 1, 1, 0.05f, 1);
    add("token_embd_norm.bias", e, 1, 0, 0.02f, 1);
    for (int i = 0; i < s->layers; i++) {
        static const char *mats[] = {"attn_q", "attn_k", "attn_v", "attn_output"};
        for (int m = 0; m < 4; m++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", i, mats[m]);
            add(name, e, e, 0, w, 0);
            snprintf(name, sizeof name, "blk.%d.%s.bias", i, mats[m]);
            add(name, e, 1, 0, 0.02f, 1);
        }
        snprintf(name, sizeof name, "blk.%d.attn_output_norm.weight", i);
        add(name, e, 1, 1, 0.05f, 1);
        snprintf(name, sizeof name, "blk.%d.attn_output_norm.bias", i);
        add(name, e, 1, 0, 0.02f, 1);
        snprintf(name, sizeof name, "blk.%d.ffn_up.weight", i);
        add(name, e, ff, 0, w, 0);
        snprintf(name, sizeof name, "blk.%d.ffn_up.bias", i);
        add(name, ff, 1, 0, 0.02f, 1);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", i);
        add(name, ff, e, 0, 1.0f / sqrtf((float)ff), 0);
        snprintf(name, sizeof name, "blk.%d.ffn_down.bias", i);
        add(name, e, 1, 0, 0.02f, 1);
        snprintf(name, sizeof name, "blk.%d.layer_output_norm.weight", i);
        add(name, e, 1, 1, 0.05f, 1);
        snprintf(name, sizeof name, "blk.%d.layer_output_norm.bias", i);
        add(name, e, 1, 0, 0.02f, 1);
    }

    /* Write beside the target and rename, so a reader never sees half a file. */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
    if (!gguf_write_to_file(out, tmp, false) || rename(tmp, argv[2]) != 0) {
        fprintf(stderr, "make_bert_gguf: cannot write %s\n", argv[2]);
        remove(tmp);
        return 1;
    }
    gguf_free(out);
    gguf_free(vocab);
    ggml_free(mem);
    return 0;
}
