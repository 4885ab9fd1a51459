/*
 * test_local.c — the local (llama.cpp) provider on the tiny BERT model that
 * `make test` generates ($CLAWMEM_TEST_GGUF; tests/tools/make_bert_gguf.c):
 * determinism, dimensions, unit length, batched equals one by one, texts
 * longer than the context, damaged model files. A build without llama.cpp
 * must say how to get it.
 */
#include <math.h>
#include <unistd.h>

#include "../src/embed/local.h"
#include "test.h"

/* The model, or NULL after recording why there is none. */
static const char *model_path(void)
{
    const char *p = getenv("CLAWMEM_TEST_GGUF");
    if (!p || !*p || access(p, R_OK) != 0) {
        test_fail(__FILE__, __LINE__, "no test model: set CLAWMEM_TEST_GGUF (make test does)");
        return NULL;
    }
    return p;
}

static double dot(const float *a, const float *b, int d)
{
    double s = 0;
    for (int i = 0; i < d; i++) s += (double)a[i] * b[i];
    return s;
}

static char *long_text(int words)
{
    static const char *vocab[] = {"memory", "router", "garden", "seoul", "meeting", "vector",
                                  "index",  "coffee", "travel", "notes"};
    buf b = BUF_INIT;
    for (int i = 0; i < words; i++) buf_printf(&b, "%s ", vocab[(i * 7 + i / 3) % 10]);
    return buf_detach(&b);
}

TEST(local_unsupported_build_says_how)
{
    char why[512];
    if (local_supported(why, sizeof why)) return; /* covered by the tests below */
    EXPECT_CONTAINS(why, "install-llama.sh");
    local_model *m = (local_model *)1;
    char err[512];
    EXPECT(local_open("/nonexistent.gguf", 0, &m, err, sizeof err) != CM_OK);
    EXPECT(m == NULL);
    EXPECT_CONTAINS(err, "install-llama.sh");
}

TEST(local_model_embeds)
{
    char why[512];
    if (!local_supported(why, sizeof why)) return;
    const char *path = model_path();
    if (!path) return;
    local_model *m;
    char err[512];
    EXPECT_INT(local_open(path, 2, &m, err, sizeof err), CM_OK);
    int d = local_dims(m);
    EXPECT_INT(d, 32);
    EXPECT_CONTAINS(local_desc(m), "bert");

    const char *texts[] = {"The router in the garden office",
                           "Seoul meeting notes about coffee",
                           "",
                           "vector index of memory files",
                           "The router in the garden office"};
    size_t n = ARRAY_LEN(texts);
    float *batch = calloc(n * (size_t)d, sizeof *batch);
    float *one = calloc((size_t)d, sizeof *one);
    float *again = calloc(n * (size_t)d, sizeof *again);
    EXPECT(batch && one && again);
    EXPECT_INT(local_embed(m, texts, n, false, batch, err, sizeof err), CM_OK);
    for (size_t i = 0; i < n; i++) {
        const float *v = batch + i * (size_t)d;
        /* BERT adds [CLS] and [SEP]: even the empty text has tokens */
        EXPECT_NEAR(dot(v, v, d), 1.0, 1e-4);
        for (int k = 0; k < d; k++) EXPECT(isfinite(v[k]));
    }
    /* the same text in one call twice: the same vector; different texts differ */
    EXPECT(dot(batch, batch + 4 * (size_t)d, d) > 0.99999);
    EXPECT(dot(batch, batch + 1 * (size_t)d, d) < 0.999);
    /* one text per call equals the batched vector within llama.cpp's batching noise */
    for (size_t i = 0; i < n; i++) {
        EXPECT_INT(local_embed(m, &texts[i], 1, false, one, err, sizeof err), CM_OK);
        const float *v = batch + i * (size_t)d;
        EXPECT(dot(one, v, d) > 0.9999);
        for (int k = 0; k < d; k++) EXPECT_NEAR(one[k], v[k], 2e-3);
    }
    /* deterministic: a second batched run gives the same vectors */
    EXPECT_INT(local_embed(m, texts, n, false, again, err, sizeof err), CM_OK);
    for (size_t i = 0; i < n * (size_t)d; i++) EXPECT_NEAR(again[i], batch[i], 1e-5);
    EXPECT(local_tokens(m) > 0);
    EXPECT_INT(local_truncated(m), 0);
    free(batch);
    free(one);
    free(again);
    local_close(m);
}

TEST(local_model_cuts_texts_longer_than_its_context)
{
    char why[512];
    if (!local_supported(why, sizeof why)) return;
    const char *path = model_path();
    if (!path) return;
    local_model *m;
    char err[512];
    EXPECT_INT(local_open(path, 1, &m, err, sizeof err), CM_OK);
    int d = local_dims(m);
    /* the tiny model's context is 128 tokens; these are 600 and 20,000 words,
     * in one call with short texts around them */
    char *a = long_text(600), *b = long_text(20000);
    const char *texts[] = {"short one", a, b, "another short one", a};
    size_t n = ARRAY_LEN(texts);
    float *v = calloc(n * (size_t)d, sizeof *v);
    EXPECT(a && b && v);
    EXPECT_INT(local_embed(m, texts, n, false, v, err, sizeof err), CM_OK);
    EXPECT_INT(local_truncated(m), 3);
    for (size_t i = 0; i < n; i++) EXPECT_NEAR(dot(v + i * (size_t)d, v + i * (size_t)d, d), 1, 1e-4);
    /* the cut keeps the start: both long texts begin alike, so their vectors agree */
    EXPECT(dot(v + 1 * (size_t)d, v + 4 * (size_t)d, d) > 0.99999);
    /* many texts: more than one call's sequences and tokens */
    const char **many = calloc(200, sizeof *many);
    float *mv = calloc(200 * (size_t)d, sizeof *mv);
    EXPECT(many && mv);
    for (int i = 0; i < 200; i++) many[i] = i % 3 ? texts[0] : a;
    EXPECT_INT(local_embed(m, many, 200, false, mv, err, sizeof err), CM_OK);
    EXPECT(dot(mv + 3 * (size_t)d, v + 1 * (size_t)d, d) > 0.9999);
    EXPECT(dot(mv + 199 * (size_t)d, mv + 1 * (size_t)d, d) > 0.9999);
    free(many);
    free(mv);
    free(a);
    free(b);
    free(v);
    local_close(m);
}

TEST(local_model_refuses_bad_files)
{
    char why[512];
    if (!local_supported(why, sizeof why)) return;
    const char *path = model_path();
    if (!path) return;
    char *dir = tmp_dir();
    local_model *m = (local_model *)1;
    char err[512];
    EXPECT_INT(local_open(path_in(dir, "missing.gguf"), 0, &m, err, sizeof err), CM_ENOTFOUND);
    EXPECT(m == NULL);
    EXPECT_CONTAINS(err, "missing.gguf");
    write_file(dir, "text.gguf", "this is not a model\n");
    EXPECT_INT(local_open(path_in(dir, "text.gguf"), 0, &m, err, sizeof err), CM_ECORRUPT);
    EXPECT_CONTAINS(err, "cannot be loaded");
    /* the real model cut in half */
    FILE *f = fopen(path, "rb");
    EXPECT(f != NULL);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    char *data = malloc((size_t)size);
    EXPECT(data && fread(data, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    write_bytes(dir, "half.gguf", data, (size_t)size / 2);
    free(data);
    EXPECT_INT(local_open(path_in(dir, "half.gguf"), 0, &m, err, sizeof err), CM_ECORRUPT);
    /* and the good one still loads after all that */
    EXPECT_INT(local_open(path, 0, &m, err, sizeof err), CM_OK);
    local_close(m);
}
