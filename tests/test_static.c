/*
 * test_static.c — the static word-vector model: writing and mapping a model
 * file, embedding (weighted average, unknown words, empty text), damaged
 * files, and the engine searching with provider "static".
 */
#include <jansson.h>
#include <math.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/embed/static_model.h"
#include "test.h"

/* Five words in 4 dimensions: dog/puppy close, router/modem close. */
static const char *words[] = {"the", "dog", "puppy", "router", "modem"};
static const float vecs[] = {0.1f, 0.1f, 0.1f, 0.1f, 1, 0.2f, 0, 0,   0.9f, 0.3f, 0, 0,
                             0,    0,    1,    0.2f, 0, 0,    0.9f, 0.3f};

static const char *model_file(void)
{
    static char path[1024];
    char *d = tmp_dir();
    snprintf(path, sizeof path, "%s/m.bin", d);
    char err[256];
    if (cm_static_model_write(path, words, vecs, 5, 4, err, sizeof err)) return NULL;
    return path;
}

TEST(static_model_embeds_known_words)
{
    const char *path = model_file();
    EXPECT(path != NULL);
    static_model m;
    char err[256];
    EXPECT_INT(cm_static_model_open(&m, path, err, sizeof err), CM_OK);
    EXPECT_INT(m.dims, 4);
    EXPECT_INT(m.words, 5);
    float a[4], b[4], c[4];
    EXPECT_INT(cm_static_model_embed(&m, "The DOG, barking!", a),
               2); /* the + dog; barking unknown */
    EXPECT_INT(cm_static_model_embed(&m, "a puppy", b), 1);
    EXPECT_INT(cm_static_model_embed(&m, "my modem", c), 1);
    double ab = 0, ac = 0, na = 0;
    for (int i = 0; i < 4; i++) {
        ab += a[i] * b[i];
        ac += a[i] * c[i];
        na += a[i] * a[i];
    }
    EXPECT_NEAR(na, 1.0, 1e-5);
    EXPECT(ab > 0.9); /* dog ~ puppy */
    EXPECT(ac < 0.3); /* dog !~ modem */
    EXPECT_INT(cm_static_model_embed(&m, "", a), 0);
    EXPECT(a[0] == 0 && a[3] == 0);
    EXPECT_INT(cm_static_model_embed(&m, "zzz qqq", a), 0);
    cm_static_model_close(&m);
}

TEST(static_model_refuses_damaged_files)
{
    const char *path = model_file();
    static_model m;
    char err[256];
    EXPECT_INT(cm_static_model_open(&m, "/nonexistent/m.bin", err, sizeof err), CM_ENOTFOUND);
    buf b = BUF_INIT;
    EXPECT_INT(cm_fs_read_file(path, 1 << 20, &b, err, sizeof err), CM_OK);
    char *d = tmp_dir();
    write_bytes(d, "trunc.bin", b.data, b.len - 7);
    EXPECT_INT(cm_static_model_open(&m, path_in(d, "trunc.bin"), err, sizeof err), CM_ECORRUPT);
    EXPECT_CONTAINS(err, "damaged");
    b.data[b.len - 3] ^= 0x55; /* one flipped byte in the word pool */
    write_bytes(d, "flip.bin", b.data, b.len);
    EXPECT_INT(cm_static_model_open(&m, path_in(d, "flip.bin"), err, sizeof err), CM_ECORRUPT);
    EXPECT_CONTAINS(err, "checksum");
    write_file(d, "text.bin",
               "not a model at all, just some text that is long enough to have a header");
    EXPECT_INT(cm_static_model_open(&m, path_in(d, "text.bin"), err, sizeof err), CM_ECORRUPT);
    cm_buf_release(&b);
}

TEST(static_provider_in_the_engine)
{
    const char *path = model_file();
    char *d = tmp_dir();
    char cfg[1200];
    snprintf(cfg, sizeof cfg, "{agents:{defaults:{memorySearch:{provider:'static'}}},clawmem:{staticModel:'%s'}}", path);
    write_file(d, "qc.json", cfg);
    write_file(d, "ws/memory/a.md", "Took the dog to the park.\n");
    write_file(d, "ws/memory/b.md", "Reset the router again.\n");
    cm_options o = {NULL, path_in(d, "ws"), path_in(d, "qc.json"), path_in(d, "state"), NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512], *js = NULL;
    EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
    cm_sync_stats st;
    EXPECT_INT(cm_engine_sync(e, 0, NULL, NULL, &st, err, sizeof err), CM_OK);
    EXPECT_INT(st.chunks_embedded, 2);
    /* no shared keyword: only the vectors connect "puppy" to the dog note */
    cm_search_opts so = {5, 0, 0};
    EXPECT_INT(cm_memory_search(e, "puppy", &so, &js, err, sizeof err), CM_OK);
    json_t *p = json_loads(js, 0, NULL);
    EXPECT_STR(json_string_value(json_object_get(p, "provider")), "static");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(json_object_get(p, "results"), 0), "path")),
               "memory/a.md");
    json_decref(p);
    cm_free(js);
    cm_engine_close(e);
    /* a missing model: keyword search, and status says how to install it */
    snprintf(cfg, sizeof cfg, "{agents:{defaults:{memorySearch:{provider:'static'}}},clawmem:{staticModel:'%s/none.bin'}}", d);
    write_file(d, "qc.json", cfg);
    EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
    EXPECT_INT(cm_engine_status(e, 0, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "install-static-model.sh");
    EXPECT_CONTAINS(js, "\"search\":\"keyword\"");
    cm_free(js);
    cm_engine_close(e);
}
