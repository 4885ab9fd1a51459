/*
 * test_local.c — the local (llama.cpp) provider on the tiny BERT model that
 * `make test` generates ($CLAWMEM_TEST_GGUF; tests/tools/make_bert_gguf.c):
 * determinism, dimensions, unit length, batched equals one by one, texts
 * longer than the context, damaged model files. A build without llama.cpp
 * must say how to get it.
 */
#include <jansson.h>
#include <math.h>
#include <unistd.h>
#include <time.h>

#include "../src/embed/local.h"
#include "fakeserver.h"
#include "test.h"

/* The model, or NULL: the test is skipped in a build without llama.cpp (a
 * failure where CI requires "llama"), and fails when the model is missing. */
static const char *model_path(void)
{
    char why[512];
    if (!cm_local_supported(why, sizeof why)) {
        test_skip(__FILE__, __LINE__, "llama", "%s", why);
        return NULL;
    }
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
    for (int i = 0; i < words; i++)
        cm_buf_printf(&b, "%s ", vocab[(i * 7 + i / 3) % 10]);
    return cm_buf_detach(&b);
}

TEST(local_unsupported_build_says_how)
{
    char why[512];
    bool supported = cm_local_supported(why, sizeof why);
    if (!supported) EXPECT_CONTAINS(why, "install-llama.sh");
    local_model *m = (local_model *)1;
    char err[512];
    EXPECT(cm_local_open("/nonexistent.gguf", 0, &m, err, sizeof err) != CM_OK);
    EXPECT(m == NULL);
    /* Without llama.cpp the error says how to get it; with it, what is missing. */
    EXPECT_CONTAINS(err, supported ? "/nonexistent.gguf" : "install-llama.sh");
}

TEST(local_model_embeds)
{
    const char *path = model_path();
    if (!path) return;
    local_model *m;
    char err[512];
    EXPECT_INT(cm_local_open(path, 1, &m, err, sizeof err), CM_OK);
    int d = cm_local_dims(m);
    EXPECT_INT(d, 32);
    EXPECT_CONTAINS(cm_local_desc(m), "bert");

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
    EXPECT_INT(cm_local_embed(m, texts, n, false, batch, err, sizeof err), CM_OK);
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
        EXPECT_INT(cm_local_embed(m, &texts[i], 1, false, one, err, sizeof err), CM_OK);
        const float *v = batch + i * (size_t)d;
        EXPECT(dot(one, v, d) > 0.9999);
        for (int k = 0; k < d; k++) EXPECT_NEAR(one[k], v[k], 2e-3);
    }
    /* deterministic: a second batched run gives the same vectors */
    EXPECT_INT(cm_local_embed(m, texts, n, false, again, err, sizeof err), CM_OK);
    for (size_t i = 0; i < n * (size_t)d; i++)
        EXPECT_NEAR(again[i], batch[i], 1e-5);
    EXPECT(cm_local_tokens(m) > 0);
    EXPECT_INT(cm_local_truncated(m), 0);
    free(batch);
    free(one);
    free(again);
    cm_local_close(m);
}

TEST(local_model_cuts_texts_longer_than_its_context)
{
    const char *path = model_path();
    if (!path) return;
    local_model *m;
    char err[512];
    EXPECT_INT(cm_local_open(path, 1, &m, err, sizeof err), CM_OK);
    int d = cm_local_dims(m);
    /* the tiny model's context is 300 tokens; these are 600 and 20,000 words,
     * in one call with short texts around them */
    char *a = long_text(600), *b = long_text(20000);
    const char *texts[] = {"short one", a, b, "another short one", a};
    size_t n = ARRAY_LEN(texts);
    float *v = calloc(n * (size_t)d, sizeof *v);
    EXPECT(a && b && v);
    EXPECT_INT(cm_local_embed(m, texts, n, false, v, err, sizeof err), CM_OK);
    EXPECT_INT(cm_local_truncated(m), 3);
    for (size_t i = 0; i < n; i++)
        EXPECT_NEAR(dot(v + i * (size_t)d, v + i * (size_t)d, d), 1, 1e-4);
    /* the cut keeps the start: both long texts begin alike, so their vectors agree */
    EXPECT(dot(v + 1 * (size_t)d, v + 4 * (size_t)d, d) > 0.99999);
    /* many texts: more than one call's sequences and tokens */
    const char **many = calloc(200, sizeof *many);
    float *mv = calloc(200 * (size_t)d, sizeof *mv);
    EXPECT(many && mv);
    for (int i = 0; i < 200; i++)
        many[i] = i % 3 ? texts[0] : a;
    EXPECT_INT(cm_local_embed(m, many, 200, false, mv, err, sizeof err), CM_OK);
    EXPECT(dot(mv + 3 * (size_t)d, v + 1 * (size_t)d, d) > 0.9999);
    EXPECT(dot(mv + 199 * (size_t)d, mv + 1 * (size_t)d, d) > 0.9999);
    free(many);
    free(mv);
    free(a);
    free(b);
    free(v);
    cm_local_close(m);
}

TEST(local_model_refuses_bad_files)
{
    const char *path = model_path();
    if (!path) return;
    char *dir = tmp_dir();
    local_model *m = (local_model *)1;
    char err[512];
    EXPECT_INT(cm_local_open(path_in(dir, "missing.gguf"), 0, &m, err, sizeof err), CM_ENOTFOUND);
    EXPECT(m == NULL);
    EXPECT_CONTAINS(err, "missing.gguf");
    write_file(dir, "text.gguf", "this is not a model\n");
    EXPECT_INT(cm_local_open(path_in(dir, "text.gguf"), 0, &m, err, sizeof err), CM_ECORRUPT);
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
    EXPECT_INT(cm_local_open(path_in(dir, "half.gguf"), 0, &m, err, sizeof err), CM_ECORRUPT);
    /* and the good one still loads after all that */
    EXPECT_INT(cm_local_open(path, 0, &m, err, sizeof err), CM_OK);
    cm_local_close(m);
}

/* ---- the provider inside the engine ---------------------------------- */

static json_t *search_json(cm_engine *e, const char *q)
{
    char err[512], *js = NULL;
    cm_search_opts so = {5, 0, 0};
    if (cm_memory_search(e, q, &so, &js, err, sizeof err) != CM_OK) return NULL;
    json_t *p = json_loads(js, 0, NULL);
    cm_free(js);
    return p;
}

static void two_notes(const char *d)
{
    write_file(d, "ws/memory/2026-03-01.md", "Reset the router and moved the IoT devices to VLAN 10.\n");
    write_file(d, "ws/memory/2026-03-02.md", "Coffee with Mina in Seoul; talked about the garden.\n");
}

static int saw_download;
static int on_progress(void *ctx, const cm_progress *p)
{
    (void)ctx;
    if (p->download && p->download_total && p->download_done <= p->download_total) saw_download++;
    return 0;
}

TEST(local_provider_in_the_engine)
{
    const char *path = model_path();
    if (!path) return;
    char *d = tmp_dir();
    two_notes(d);
    char cfg[1200];
    snprintf(cfg, sizeof cfg,
             "{agents:{defaults:{memorySearch:{provider:'local',local:{modelPath:'%s'}}}},"
             "clawmem:{localThreads:1}}",
             path);
    write_file(d, "qc.json", cfg);
    cm_options o = {NULL, path_in(d, "ws"), path_in(d, "qc.json"), path_in(d, "state"), NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512], *js = NULL;
    EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
    cm_sync_stats st;
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, &st, err, sizeof err), CM_OK);
    EXPECT_INT(st.chunks_embedded, 2);
    EXPECT_INT(cm_engine_status(e, 0, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "\"provider\":\"local\"");
    EXPECT_CONTAINS(js, "\"search\":\"hybrid\"");
    cm_free(js);
    json_t *p = search_json(e, "router VLAN");
    EXPECT(p != NULL);
    EXPECT_STR(json_string_value(json_object_get(p, "provider")), "local");
    EXPECT_STR(json_string_value(json_object_get(p, "model")), path);
    EXPECT(json_object_get(p, "fallback") == NULL);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(json_object_get(p, "results"), 0), "path")),
               "memory/2026-03-01.md");
    json_decref(p);
    cm_engine_close(e);

    /* auto-selection: local.modelPath set and there, no key anywhere */
    snprintf(cfg, sizeof cfg, "{agents:{defaults:{memorySearch:{local:{modelPath:'%s'}}}}}", path);
    write_file(d, "qc.json", cfg);
    char *saved = getenv("OPENAI_API_KEY") ? strdup(getenv("OPENAI_API_KEY")) : NULL;
    unsetenv("OPENAI_API_KEY");
    EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
    EXPECT_INT(cm_engine_status(e, 0, &js, err, sizeof err), CM_OK);
    if (saved) setenv("OPENAI_API_KEY", saved, 1);
    free(saved);
    EXPECT_CONTAINS(js, "\"provider\":\"local\"");
    cm_free(js);
    cm_engine_close(e);
}

TEST(local_model_downloaded_from_hf)
{
    const char *path = model_path();
    if (!path) return;
    FILE *f = fopen(path, "rb");
    EXPECT(f != NULL);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    char *data = malloc((size_t)size);
    EXPECT(data && fread(data, 1, (size_t)size, f) == (size_t)size);
    fclose(f);
    char base[64];
    fake_server *s = fake_start(8, base);
    fake_file(s, "/clawmem/tiny-bert/resolve/main/tiny.gguf", data, (size_t)size);
    fake_push(s, FAKE_CUT, (int)(size / 3), 0); /* the first attempt breaks off a third in */
    setenv("CLAWMEM_HF_ENDPOINT", base, 1);
    setenv("CLAWMEM_HTTP_BACKOFF_MS", "10", 1);
    char *d = tmp_dir();
    two_notes(d);
    write_file(d, "qc.json",
               "{agents:{defaults:{memorySearch:{provider:'local',"
               "local:{modelPath:'hf:clawmem/tiny-bert/tiny.gguf'}}}},clawmem:{localThreads:1}}");
    cm_options o = {NULL, path_in(d, "ws"), path_in(d, "qc.json"), path_in(d, "state"), NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512];
    EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
    /* a search does not download (a sync does): it searches keywords until
     * the model is there, with no fallback for it */
    json_t *kw = search_json(e, "router");
    EXPECT(kw != NULL);
    EXPECT_INT(fake_count(s), 0);
    EXPECT_STR(json_string_value(json_object_get(kw, "provider")), "local");
    EXPECT(json_object_get(kw, "fallback") == NULL);
    json_decref(kw);
    cm_sync_stats st;
    saw_download = 0;
    EXPECT_INT(cm_engine_sync(e, 0, on_progress, NULL, &st, err, sizeof err), CM_OK);
    unsetenv("CLAWMEM_HF_ENDPOINT");
    unsetenv("CLAWMEM_HTTP_BACKOFF_MS");
    EXPECT_INT(st.chunks_embedded, 2);
    EXPECT(saw_download > 0);
    EXPECT_INT(fake_count(s), 2); /* the cut request, then one resuming it */
    EXPECT_CONTAINS(fake_get(s, 1)->headers, "Range: bytes=");
    json_t *p = search_json(e, "router");
    EXPECT(p != NULL);
    EXPECT_STR(json_string_value(json_object_get(p, "provider")), "local");
    json_decref(p);
    cm_engine_close(e);
    /* the cached copy is used from now on: no more requests */
    EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
    write_file(d, "ws/memory/2026-03-03.md", "A third note.\n");
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, &st, err, sizeof err), CM_OK);
    EXPECT_INT(st.chunks_embedded, 1);
    EXPECT_INT(fake_count(s), 2);
    cm_engine_close(e);
    fake_stop(s);
    free(data);
}

TEST(local_failure_falls_back)
{
    char base[64];
    fake_server *s = fake_start(16, base);
    char *d = tmp_dir();
    two_notes(d);
    char cfg[1200];
    snprintf(cfg, sizeof cfg,
             "{agents:{defaults:{memorySearch:{provider:'local',fallback:'openai',"
             "local:{modelPath:'%s/missing.gguf'}}}},"
             "models:{providers:{openai:{apiKey:'sk-test',baseUrl:'%s/v1'}}}}",
             d, base);
    write_file(d, "qc.json", cfg);
    cm_options o = {NULL, path_in(d, "ws"), path_in(d, "qc.json"), path_in(d, "state"), NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512], *js = NULL;
    EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
    cm_sync_stats st;
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, &st, err, sizeof err), CM_OK);
    EXPECT_INT(st.chunks_embedded, 2);
    json_t *p = search_json(e, "router");
    EXPECT(p != NULL);
    EXPECT_STR(json_string_value(json_object_get(p, "provider")), "openai");
    const char *fb = json_string_value(json_object_get(p, "fallback"));
    EXPECT_CONTAINS(fb, "missing.gguf");
    EXPECT_CONTAINS(fb, "using the fallback openai");
    json_decref(p);
    cm_engine_close(e);
    /* no fallback: keyword search, and status says why */
    snprintf(cfg, sizeof cfg,
             "{agents:{defaults:{memorySearch:{provider:'local',fallback:'none',"
             "local:{modelPath:'%s/missing.gguf'}}}}}",
             d);
    write_file(d, "qc.json", cfg);
    EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, &st, err, sizeof err), CM_OK);
    EXPECT_INT(cm_engine_status(e, 0, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "\"search\":\"keyword\"");
    EXPECT_CONTAINS(js, "missing.gguf");
    cm_free(js);
    p = search_json(e, "router");
    EXPECT(p != NULL);
    EXPECT_INT(json_array_size(json_object_get(p, "results")), 1);
    json_decref(p);
    cm_engine_close(e);
    fake_stop(s);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Offline: the first search's sync fails to download the model (the
 * connection refused) and answers keywords, saying why in the payload's
 * fallback; the failure is remembered in the model cache, so the next
 * search makes no request and does not wait, and status says why. */
TEST(local_offline_download_failure_is_remembered)
{
    char why[256];
    if (!cm_local_supported(why, sizeof why)) return;
    char base[64], dead[64];
    fake_server *s = fake_start(8, dead);
    fake_stop(s); /* nothing listens there now: connections are refused */
    s = fake_start(8, base);
    char *d = tmp_dir();
    two_notes(d);
    write_file(d, "qc.json",
               "{agents:{defaults:{memorySearch:{provider:'local',"
               "local:{modelPath:'hf:clawmem/tiny-bert/gone.gguf'}}}}}");
    const char *ws = path_in(d, "ws"), *cfg = path_in(d, "qc.json"), *st = path_in(d, "state");
    char ep1[100], ep2[100];
    snprintf(ep1, sizeof ep1, "CLAWMEM_HF_ENDPOINT=%s", dead);
    snprintf(ep2, sizeof ep2, "CLAWMEM_HF_ENDPOINT=%s", base);
    const char *env1[] = {ep1, "CLAWMEM_HTTP_BACKOFF_MS=1", NULL};
    const char *env2[] = {ep2, NULL};
    const char *search[] = {"--workspace", ws, "--config", cfg, "--state-dir", st,
                            "search", "router", "--json", NULL};
    run_result r = run_clawmem(env1, search);
    EXPECT_INT(r.status, 0);
    json_t *p = json_loads(r.out, 0, NULL);
    EXPECT(p != NULL);
    EXPECT_INT(json_array_size(json_object_get(p, "results")), 1);
    EXPECT_STR(json_string_value(json_object_get(p, "provider")), "none");
    const char *fb = json_string_value(json_object_get(p, "fallback"));
    EXPECT_CONTAINS(fb, "local embeddings unavailable");
    EXPECT_CONTAINS(fb, "gone.gguf");
    EXPECT_CONTAINS(fb, "keyword search only");
    json_decref(p);
    run_result_release(&r);
    EXPECT(access(path_in(st, "models/hf-clawmem%2Ftiny-bert%2Fgone.gguf.failed"), F_OK) == 0);
    /* again, with a server that would answer: no request, no wait (without
     * the record this would retry for ~7.5 s at the default backoff) */
    double t = now_s();
    r = run_clawmem(env2, search);
    double took = now_s() - t;
    EXPECT_INT(r.status, 0);
    EXPECT_INT(fake_count(s), 0);
    EXPECT(took < 3.0);
    EXPECT_CONTAINS(r.out, "next attempt in");
    EXPECT_CONTAINS(r.out, "\"results\":[{");
    run_result_release(&r);
    const char *status[] = {"--workspace", ws, "--config", cfg, "--state-dir", st, "status", NULL};
    r = run_clawmem(env2, status);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "Search: keyword");
    EXPECT_CONTAINS(r.out, "local embeddings unavailable: download of");
    EXPECT_INT(fake_count(s), 0);
    run_result_release(&r);
    fake_stop(s);
}
