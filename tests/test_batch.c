/*
 * test_batch.c — memorySearch.remote.batch against loopback fakes of the
 * OpenAI, Voyage and Gemini batch APIs (fake_batch.h): each lifecycle with
 * its exact request bodies, the split at the limits, partial failures,
 * expiry, the synchronous fallback after repeated failures, a sync killed
 * while polling that resumes the same batch without a new upload, and
 * wait:false. The polling clock is injected: nothing here sleeps. The
 * TEST_BOTH ones run over the PostgreSQL store too (batches in its tables;
 * test_pgbatch.c has what only it has).
 */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "../src/base/sha256.h"
#include "../src/embed/batch.h"
#include "batch_harness.h"
#include "test.h"

/* the injected clock: a sleep only moves time on */
static int64_t fake_now;
static int sleeps;
static int64_t clock_now(void *ctx)
{
    (void)ctx;
    return fake_now;
}
static void clock_sleep(void *ctx, long ms)
{
    (void)ctx;
    sleeps++;
    fake_now += ms;
}

static void bt_config(bt *t, const char *batch_extra)
{
    char text[2048], url[128];
    snprintf(url, sizeof url, "%s/%s", t->base, strcmp(t->provider, "gemini") ? "v1" : "v1beta");
    snprintf(text, sizeof text,
             "{agents:{defaults:{memorySearch:{provider:'%s',remote:{baseUrl:'%s',apiKey:'k',"
             "batch:{enabled:true%s%s}}}}}}",
             t->provider, url,
             batch_extra && strstr(batch_extra, "pollIntervalMs") ? "" : ",pollIntervalMs:1000",
             batch_extra ? batch_extra : "");
    write_file(t->dir, "qc.json", text);
}

void bt_init(bt *t, const char *provider, const char *batch_extra)
{
    setenv("CLAWMEM_HTTP_BACKOFF_MS", "5", 1);
    setenv("CLAWMEM_HTTP_TIMEOUT_MS", "5000", 1);
    unsetenv("OPENAI_API_KEY");
    unsetenv("GEMINI_API_KEY");
    unsetenv("VOYAGE_API_KEY");
    memset(t, 0, sizeof *t);
    t->provider = provider;
    t->dir = tmp_dir();
    snprintf(t->ws, sizeof t->ws, "%s/ws", t->dir);
    snprintf(t->state, sizeof t->state, "%s/state", t->dir);
    snprintf(t->cfg, sizeof t->cfg, "%s/qc.json", t->dir);
    t->srv = fake_start(16, t->base);
    t->fb = fake_batch_start(t->srv, 16);
    bt_config(t, batch_extra);
    write_file(t->ws, "MEMORY.md", "The dog Biscuit likes the beach.\n");
    write_file(t->ws, "memory/2026-02-10.md", "Configured the Omada router with VLAN 10.\n");
    write_file(t->ws, "memory/2026-02-11.md", "Dentist appointment moved to Friday.\n");
    /* the same text twice: one request for both chunks */
    write_file(t->ws, "memory/2026-02-12.md", "The dog Biscuit likes the beach.\n");
    if (pg_dsn) pg_overlay(t->state, "main"); /* TEST_BOTH's PostgreSQL run */
    embed_batch_clock c = {clock_now, clock_sleep, NULL};
    cm_embed_batch_set_clock(&c);
    cm_embed_batch_set_limits(0, 0);
    fake_now = 1000000;
    sleeps = 0;
}

void bt_done(bt *t)
{
    cm_embed_batch_set_clock(NULL);
    cm_embed_batch_set_limits(0, 0);
    fake_batch_stop(t->fb);
    fake_stop(t->srv);
}

cm_engine *bt_open(bt *t)
{
    cm_options o = {NULL, t->ws, t->cfg, t->state, NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512];
    if (cm_engine_open(&o, &e, err, sizeof err)) fprintf(stderr, "  open: %s\n", err);
    return e;
}

cm_rc bt_sync(bt *t, unsigned flags, cm_sync_stats *st)
{
    cm_engine *e = bt_open(t);
    if (!e) return CM_ECONFIG;
    char err[512];
    cm_rc rc = cm_engine_sync(e, flags, NULL, NULL, st, err, sizeof err);
    if (rc) fprintf(stderr, "  sync: %s\n", err);
    cm_engine_close(e);
    return rc;
}

json_t *bt_status(bt *t)
{
    cm_engine *e = bt_open(t);
    char err[512], *js = NULL;
    if (e) cm_engine_status(e, 0, &js, err, sizeof err);
    json_t *j = js ? json_loads(js, 0, NULL) : NULL;
    cm_free(js);
    cm_engine_close(e);
    return j;
}

long long vectors_of(json_t *s)
{
    return json_integer_value(json_object_get(json_object_get(s, "vector"), "vectors"));
}

size_t pending_of(json_t *s)
{
    return json_array_size(json_object_get(json_object_get(s, "batch"), "pending"));
}

/* The request received at path (method), the n-th such; NULL when none. */
static const fake_request *req_at(bt *t, const char *method, const char *prefix, int nth)
{
    for (int i = 0; i < fake_count(t->srv); i++) {
        const fake_request *r = fake_get(t->srv, i);
        if (!strcmp(r->method, method) && !strncmp(r->path, prefix, strlen(prefix)) && nth-- == 0)
            return r;
    }
    return NULL;
}

/* Checks every line of an uploaded JSONL: its id is the sha256 of its text
 * and the line is exactly the provider's request format; returns the texts
 * (one string, lines sorted by the caller's expectations: joined by '|'). */
static void check_upload(bt *t, int i, buf *texts, int *count)
{
    char *jsonl = fake_batch_upload(t->fb, i);
    int n = 0;
    *count = 0;
    EXPECT(jsonl != NULL);
    *count = -1;
    for (char *line = jsonl, *nl; line && *line; line = nl + 1) {
        nl = strchr(line, '\n');
        EXPECT(nl != NULL); /* every line ends with a newline */
        if (!nl) break;
        *nl = 0;
        json_t *j = json_loads(line, 0, NULL);
        bool gem = !strcmp(t->provider, "gemini"), voy = !strcmp(t->provider, "voyage");
        const char *id = json_string_value(json_object_get(j, gem ? "key" : "custom_id"));
        const char *text =
            gem   ? json_string_value(json_object_get(
                        json_array_get(
                            json_object_get(json_object_get(json_object_get(j, "request"), "content"),
                                            "parts"),
                            0),
                        "text"))
            : voy ? json_string_value(
                        json_array_get(json_object_get(json_object_get(j, "body"), "input"), 0))
                  : json_string_value(json_object_get(json_object_get(j, "body"), "input"));
        EXPECT(id && text);
        if (!id || !text) break;
        char h[SHA256_HEX_LEN + 1];
        cm_sha256_hex(text, strlen(text), h);
        EXPECT_STR(id, h);
        json_t *js = json_string(text);
        char *q = json_dumps(js, JSON_ENCODE_ANY | JSON_COMPACT);
        char want[4096];
        if (gem)
            snprintf(
                want, sizeof want,
                "{\"key\":\"%s\",\"request\":{\"model\":\"models/gemini-embedding-001\","
                "\"content\":{\"parts\":[{\"text\":%s}]},\"taskType\":\"RETRIEVAL_DOCUMENT\"}}",
                h, q);
        else if (voy)
            snprintf(want, sizeof want, "{\"custom_id\":\"%s\",\"body\":{\"input\":[%s]}}", h, q);
        else
            snprintf(
                want, sizeof want,
                "{\"custom_id\":\"%s\",\"method\":\"POST\",\"url\":\"/v1/embeddings\",\"body\":"
                "{\"model\":\"text-embedding-3-small\",\"input\":%s,\"encoding_format\":\"float\"}"
                "}",
                h, q);
        EXPECT_STR(line, want);
        if (texts) {
            if (texts->len) cm_buf_addc(texts, '|');
            cm_buf_adds(texts, text);
        }
        free(q);
        json_decref(js);
        json_decref(j);
        n++;
    }
    free(jsonl);
    *count = n;
}

static void lifecycle(const char *provider)
{
    bt t;
    bt_init(&t, provider, NULL);
    fake_batch_plan plan = {.polls = 3};
    fake_batch_script(t.fb, &plan);
    cm_sync_stats st;
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    fake_batch_counts c = fake_batch_counts_get(t.fb);
    EXPECT_INT(c.uploads, 1);
    EXPECT_INT(c.creates, 1);
    EXPECT_INT(c.polls, 4);      /* three "in progress", then done */
    EXPECT_INT(sleeps, 3);       /* the poll interval, on the injected clock */
    EXPECT_INT(c.sync_posts, 0); /* no synchronous embedding, no dimension probe */
    EXPECT_INT(st.batches_submitted, 1);
    EXPECT_INT(st.batches_completed, 1);
    EXPECT_INT(st.batches_pending, 0);
    EXPECT_INT(st.chunks_embedded, 4);
    /* one line per distinct text, in the provider's format */
    buf texts = BUF_INIT;
    int nl = 0;
    check_upload(&t, 0, &texts, &nl);
    EXPECT_INT(nl, 3);
    EXPECT_CONTAINS(texts.data, "Biscuit");
    EXPECT_CONTAINS(texts.data, "Dentist");
    cm_buf_release(&texts);
    bool gem = !strcmp(provider, "gemini");
    const fake_request *up = req_at(&t, "POST", gem ? "/upload/v1beta/files" : "/v1/files", 0);
    EXPECT(up != NULL);
    if (up && gem) {
        EXPECT_STR(up->path, "/upload/v1beta/files?uploadType=multipart");
        EXPECT_CONTAINS(up->headers, "Content-Type: multipart/related; boundary=");
        EXPECT_CONTAINS(up->headers, "X-Goog-Upload-Protocol: multipart");
        EXPECT_CONTAINS(up->headers, "x-goog-api-key: k");
        EXPECT_CONTAINS(up->body, "{\"file\":{\"displayName\":\"clawmem-memory-embeddings\","
                                  "\"mimeType\":\"application/jsonl\"}}");
    } else if (up) {
        EXPECT_CONTAINS(up->headers, "Content-Type: multipart/form-data; boundary=");
        EXPECT_CONTAINS(up->headers, "Authorization: Bearer k");
        EXPECT_CONTAINS(up->body,
                        "Content-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n");
        EXPECT_CONTAINS(up->body, "Content-Disposition: form-data; name=\"file\"; "
                                  "filename=\"memory-embeddings.jsonl\"\r\nContent-Type: "
                                  "application/jsonl\r\n\r\n");
    }
    const fake_request *mk = req_at(
        &t, "POST",
        gem ? "/v1beta/models/gemini-embedding-001:asyncBatchEmbedContent" : "/v1/batches", 0);
    EXPECT(mk != NULL);
    if (mk && gem)
        EXPECT_STR(mk->body, "{\"batch\":{\"displayName\":\"clawmem-memory-embeddings\","
                             "\"inputConfig\":{\"fileName\":\"files/in-1\"}}}");
    else if (mk && !strcmp(provider, "voyage"))
        EXPECT_STR(mk->body, "{\"input_file_id\":\"file-in-1\",\"endpoint\":\"/v1/embeddings\","
                             "\"completion_window\":\"12h\",\"request_params\":{\"model\":"
                             "\"voyage-4-large\",\"input_type\":\"document\"},\"metadata\":"
                             "{\"source\":\"clawmem-memory\"}}");
    else if (mk)
        EXPECT_STR(mk->body,
                   "{\"input_file_id\":\"file-in-1\",\"endpoint\":\"/v1/embeddings\","
                   "\"completion_window\":\"24h\",\"metadata\":{\"source\":\"clawmem-memory\"}}");
    char id[64];
    fake_batch_id(t.fb, 0, id);
    const fake_request *poll = req_at(&t, "GET", gem ? "/v1beta/batches/" : "/v1/batches/", 3);
    EXPECT(poll != NULL);
    if (poll) EXPECT_STR(poll->path + (gem ? 8 : 12), id);
    const fake_request *dl = req_at(&t, "GET", gem ? "/download/v1beta/files/" : "/v1/files/", 0);
    EXPECT(dl != NULL);
    if (dl)
        EXPECT_STR(dl->path, gem ? "/download/v1beta/files/out-2:download?alt=media"
                                 : "/v1/files/file-out-2/content");
    json_t *s = bt_status(&t);
    EXPECT_INT(vectors_of(s), 4);
    EXPECT_INT(json_integer_value(json_object_get(json_object_get(s, "vector"), "dims")), 16);
    EXPECT_INT(pending_of(s), 0);
    EXPECT(json_is_true(json_object_get(json_object_get(s, "batch"), "active")));
    json_decref(s);
    /* a second sync has nothing to embed: no request at all */
    int before = fake_count(t.srv);
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(fake_count(t.srv), before);
    bt_done(&t);
}

TEST(batch_openai_lifecycle)
{
    lifecycle("openai");
}

TEST(batch_gemini_lifecycle)
{
    lifecycle("gemini");
}

TEST(batch_voyage_lifecycle)
{
    lifecycle("voyage");
}

TEST(batch_split_at_count_and_bytes)
{
    bt t;
    bt_init(&t, "openai", ",concurrency:1");
    write_file(t.ws, "memory/2026-02-13.md", "A fourth note about the garden shed.\n");
    write_file(t.ws, "memory/2026-02-14.md", "A fifth note about the bicycle tyres.\n");
    cm_embed_batch_set_limits(2, 0); /* 5 distinct texts, 2 a batch: 3 batches */
    cm_sync_stats st;
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    fake_batch_counts c = fake_batch_counts_get(t.fb);
    EXPECT_INT(c.uploads, 3);
    EXPECT_INT(c.lines_uploaded, 5);
    EXPECT_INT(st.batches_submitted, 3);
    EXPECT_INT(st.batches_completed, 3);
    {
        int nl = 0;
        check_upload(&t, 0, NULL, &nl);
        EXPECT_INT(nl, 2);
    }
    {
        int nl = 0;
        check_upload(&t, 1, NULL, &nl);
        EXPECT_INT(nl, 2);
    }
    {
        int nl = 0;
        check_upload(&t, 2, NULL, &nl);
        EXPECT_INT(nl, 1);
    }
    json_t *s = bt_status(&t);
    EXPECT_INT(vectors_of(s), 6);
    json_decref(s);
    bt_done(&t);
    /* bytes: a limit below two lines puts every text in its own batch */
    bt_init(&t, "gemini", ",concurrency:2");
    cm_embed_batch_set_limits(0, 300);
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    c = fake_batch_counts_get(t.fb);
    EXPECT_INT(c.uploads, 3);
    EXPECT_INT(c.lines_uploaded, 3);
    EXPECT_INT(st.batches_completed, 3);
    bt_done(&t);
}

TEST(batch_partial_failure_retried_synchronously)
{
    const char *const provs[] = {"openai", "gemini"};
    for (size_t k = 0; k < 2; k++) {
        bt t;
        bt_init(&t, provs[k], NULL);
        fake_batch_plan plan = {.polls = 0, .fail_text = "Dentist", .drop_text = "Omada"};
        fake_batch_script(t.fb, &plan);
        cm_sync_stats st;
        EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
        fake_batch_counts c = fake_batch_counts_get(t.fb);
        EXPECT_INT(c.uploads, 1);
        EXPECT_INT(c.sync_posts, 1); /* the failed and the missing item, in one request */
        const fake_request *r = req_at(
            &t, "POST",
            k ? "/v1beta/models/gemini-embedding-001:batchEmbedContents" : "/v1/embeddings", 0);
        EXPECT(r != NULL);
        if (r) {
            EXPECT_CONTAINS(r->body, "Dentist");
            EXPECT_CONTAINS(r->body, "Omada");
            EXPECT(!strstr(r->body, "Biscuit"));
        }
        EXPECT_INT(st.chunks_embedded, 4);
        json_t *s = bt_status(&t);
        EXPECT_INT(vectors_of(s), 4);
        json_decref(s);
        bt_done(&t);
    }
}

TEST(batch_expired_and_failed_states)
{
    const char *const finals[] = {"expired", "failed", "cancelled"};
    for (size_t k = 0; k < 3; k++) {
        bt t;
        bt_init(&t, k == 1 ? "gemini" : "openai", NULL);
        fake_batch_plan plan = {.polls = 1, .final = finals[k]};
        fake_batch_script(t.fb, &plan);
        cm_sync_stats st;
        EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
        EXPECT_INT(st.batches_failed, 1);
        EXPECT_INT(fake_batch_counts_get(t.fb).sync_posts, 1); /* its items, synchronously */
        json_t *s = bt_status(&t);
        EXPECT_INT(vectors_of(s), 4);
        EXPECT_INT(pending_of(s), 0);
        const char *why =
            json_string_value(json_object_get(json_object_get(s, "batch"), "lastError"));
        EXPECT(why != NULL);
        if (why) EXPECT_CONTAINS(why, finals[k]);
        json_decref(s);
        bt_done(&t);
    }
}

TEST(batch_falls_back_after_repeated_failures)
{
    bt t;
    bt_init(&t, "voyage", ",concurrency:1");
    write_file(t.ws, "memory/2026-02-13.md", "A fourth note about the garden shed.\n");
    cm_embed_batch_set_limits(1, 0); /* 4 distinct texts, one a batch */
    fake_batch_plan bad = {.polls = 0, .final = "failed"};
    fake_batch_script(t.fb, &bad);
    fake_batch_script(t.fb, &bad);
    cm_sync_stats st;
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    fake_batch_counts c = fake_batch_counts_get(t.fb);
    EXPECT_INT(c.uploads, 2); /* EMBED_BATCH_FAILURE_LIMIT, then no more batches */
    EXPECT_INT(st.batches_failed, 2);
    EXPECT(c.sync_posts >= 2);
    json_t *s = bt_status(&t);
    EXPECT_INT(vectors_of(s), 5);
    json_decref(s);
    /* the next sync starts in batch mode again */
    write_file(t.ws, "memory/2026-02-14.md", "A fifth note about the bicycle tyres.\n");
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(fake_batch_counts_get(t.fb).uploads, 3);
    EXPECT_INT(st.batches_completed, 1);
    bt_done(&t);
    /* a failed upload counts as a failed batch too */
    bt_init(&t, "openai", NULL);
    fake_push(t.srv, FAKE_STATUS, 400, -1);
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(st.batches_failed, 1);
    s = bt_status(&t);
    EXPECT_INT(vectors_of(s), 4);
    json_decref(s);
    bt_done(&t);
}

TEST_BOTH(batch_wait_false_keywords_first_vectors_later)
{
    bt t;
    bt_init(&t, "gemini", ",wait:false,pollIntervalMs:600000");
    fake_batch_plan held = {.hold = true};
    fake_batch_script(t.fb, &held);
    cm_sync_stats st;
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(st.batches_submitted, 1);
    EXPECT_INT(st.batches_pending, 1);
    EXPECT_INT(sleeps, 0); /* did not wait */
    json_t *s = bt_status(&t);
    EXPECT_INT(vectors_of(s), 0);
    EXPECT_INT(json_integer_value(json_object_get(s, "chunks")), 4);
    EXPECT_INT(pending_of(s), 1);
    char id[64];
    fake_batch_id(t.fb, 0, id);
    EXPECT_STR(
        json_string_value(json_object_get(
            json_array_get(json_object_get(json_object_get(s, "batch"), "pending"), 0), "id")),
        id);
    json_decref(s);
    /* keyword results at once */
    int polls = fake_batch_counts_get(t.fb).polls;
    cm_engine *e = bt_open(&t);
    char err[512], *js = NULL;
    cm_search_opts o = {10, 0, 0};
    EXPECT_INT(cm_memory_search(e, "Biscuit", &o, &js, err, sizeof err), CM_OK);
    json_t *p = js ? json_loads(js, 0, NULL) : NULL;
    EXPECT(json_array_size(json_object_get(p, "results")) >= 1);
    json_decref(p);
    cm_free(js);
    cm_engine_close(e);
    /* a search's sync (NOWAIT) does not ask again within the poll interval */
    EXPECT_INT(bt_sync(&t, CM_SYNC_NOWAIT, &st), CM_OK);
    EXPECT_INT(st.batches_pending, 1);
    EXPECT_INT(st.batches_submitted, 0);
    EXPECT_INT(fake_batch_counts_get(t.fb).polls, polls);
    /* still running: a sync polls and leaves it */
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(st.batches_pending, 1);
    fake_batch_release(t.fb);
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(st.batches_completed, 1);
    EXPECT_INT(st.batches_submitted, 0);
    EXPECT_INT(fake_batch_counts_get(t.fb).uploads, 1); /* never uploaded again */
    s = bt_status(&t);
    EXPECT_INT(vectors_of(s), 4);
    EXPECT_INT(pending_of(s), 0);
    json_decref(s);
    bt_done(&t);
}

TEST_BOTH(batch_kill_while_polling_resumes_same_batch)
{
    bt t;
    bt_init(&t, "openai", ",pollIntervalMs:20");
    fake_batch_plan held = {.hold = true};
    fake_batch_script(t.fb, &held);
    /* the indexer in its own process, really polling every 20 ms */
    proc p;
    const char *args[] = {"--workspace", t.ws,    "--config", t.cfg,
                          "--state-dir", t.state, "index",    NULL};
    proc_start(&p, NULL, args);
    int waited = 0;
    while (fake_batch_counts_get(t.fb).polls < 3 && waited < 20000) { /* watchdog: 20 s */
        usleep(10000);
        waited += 10;
    }
    EXPECT(fake_batch_counts_get(t.fb).polls >= 3);
    proc_stop(&p, SIGKILL, 5000);
    fake_batch_counts c = fake_batch_counts_get(t.fb);
    EXPECT_INT(c.uploads, 1);
    EXPECT_INT(c.creates, 1);
    char id[64];
    fake_batch_id(t.fb, 0, id);
    json_t *s = bt_status(&t);
    EXPECT_INT(pending_of(s), 1);
    EXPECT_STR(
        json_string_value(json_object_get(
            json_array_get(json_object_get(json_object_get(s, "batch"), "pending"), 0), "id")),
        id);
    EXPECT_INT(vectors_of(s), 0);
    json_decref(s);
    /* the CLI's status lists it */
    const char *sargs[] = {"--workspace", t.ws,    "--config", t.cfg,
                           "--state-dir", t.state, "status",   NULL};
    run_result rr = run_clawmem(NULL, sargs);
    EXPECT_INT(rr.status, 0);
    EXPECT_CONTAINS(rr.out, "Batch: on, 1 pending");
    EXPECT_CONTAINS(rr.out, id);
    run_result_release(&rr);
    fake_batch_release(t.fb);
    int polls = c.polls;
    /* the next `clawmem index` collects it */
    const char *iargs[] = {"--workspace", t.ws,    "--config", t.cfg,
                           "--state-dir", t.state, "index",    NULL};
    rr = run_clawmem(NULL, iargs);
    EXPECT_INT(rr.status, 0);
    EXPECT_CONTAINS(rr.out, "Embedding batches: 0 submitted, 1 collected, 0 failed, 0 pending");
    run_result_release(&rr);
    c = fake_batch_counts_get(t.fb);
    EXPECT_INT(c.uploads, 1); /* nothing uploaded twice */
    EXPECT_INT(c.creates, 1);
    EXPECT(c.polls > polls);
    const fake_request *last = req_at(&t, "GET", "/v1/batches/", c.polls - 1);
    EXPECT(last && !strcmp(last->path + 12, id)); /* the same batch */
    s = bt_status(&t);
    EXPECT_INT(vectors_of(s), 4);
    EXPECT_INT(pending_of(s), 0);
    json_decref(s);
    bt_done(&t);
}

TEST_BOTH(batch_force_rebuild_keeps_pending_batches)
{
    bt t;
    bt_init(&t, "openai", ",wait:false");
    fake_batch_plan held = {.hold = true};
    fake_batch_script(t.fb, &held);
    cm_sync_stats st;
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(st.batches_pending, 1);
    EXPECT_INT(bt_sync(&t, CM_SYNC_FORCE, &st), CM_OK); /* a rebuild into a new file */
    EXPECT_INT(st.batches_submitted, 0);
    EXPECT_INT(fake_batch_counts_get(t.fb).uploads, 1);
    fake_batch_release(t.fb);
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(st.batches_completed, 1);
    json_t *s = bt_status(&t);
    EXPECT_INT(vectors_of(s), 4);
    json_decref(s);
    bt_done(&t);
}

typedef struct seen {
    int n, bad;
    char last_why[128];
} seen;

static cm_rc on_seen(void *ctx, const char *id, const float *v, int dims, const char *why)
{
    seen *s = ctx;
    (void)id;
    s->n++;
    if (!v) {
        s->bad++;
        snprintf(s->last_why, sizeof s->last_why, "%s", why ? why : "");
    } else if (dims != 3) {
        s->bad += 100;
    }
    return CM_OK;
}

TEST(batch_parse_output_lines)
{
    embed_provider p;
    memset(&p, 0, sizeof p);
    p.kind = CM_PROV_OPENAI;
    seen s = {0};
    const char *ok = "{\"custom_id\":\"a\",\"response\":{\"status_code\":200,\"body\":{\"data\":"
                     "[{\"embedding\":[0.1,0.2,0.3]}]}},\"error\":null}";
    EXPECT_INT(cm_embed_batch_parse_line(&p, ok, strlen(ok), on_seen, &s), CM_OK);
    EXPECT_INT(s.n, 1);
    EXPECT_INT(s.bad, 0);
    EXPECT_INT(p.dims, 3);
    const char *err = "{\"custom_id\":\"b\",\"response\":{\"status_code\":429,\"body\":{\"error\":"
                      "{\"message\":\"slow down\"}}}}";
    cm_embed_batch_parse_line(&p, err, strlen(err), on_seen, &s);
    EXPECT_INT(s.bad, 1);
    EXPECT_STR(s.last_why, "slow down");
    const char *dims = "{\"custom_id\":\"c\",\"response\":{\"status_code\":200,\"body\":{\"data\":"
                       "[{\"embedding\":[0.1,0.2]}]}}}";
    cm_embed_batch_parse_line(&p, dims, strlen(dims), on_seen, &s);
    EXPECT_INT(s.bad, 2);
    const char *noid = "{\"response\":{}}", *junk = "not json";
    cm_embed_batch_parse_line(&p, noid, strlen(noid), on_seen, &s);
    cm_embed_batch_parse_line(&p, junk, strlen(junk), on_seen, &s);
    EXPECT_INT(s.n, 3); /* unattributable lines are skipped */
    p.kind = CM_PROV_GEMINI;
    const char *g = "{\"key\":\"d\",\"response\":{\"embedding\":{\"values\":[1,2,\"x\"]}}}";
    cm_embed_batch_parse_line(&p, g, strlen(g), on_seen, &s);
    EXPECT_INT(s.bad, 3);
    const char *ge = "{\"key\":\"e\",\"error\":{\"code\":400,\"message\":\"bad part\"}}";
    cm_embed_batch_parse_line(&p, ge, strlen(ge), on_seen, &s);
    EXPECT_STR(s.last_why, "bad part");
}

TEST(batch_timeout_leaves_batches_for_a_later_sync)
{
    bt t;
    bt_init(&t, "openai", ",timeoutMinutes:1,pollIntervalMs:5000");
    fake_batch_plan held = {.hold = true};
    fake_batch_script(t.fb, &held);
    cm_sync_stats st;
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(st.batches_pending, 1);
    EXPECT_INT(st.batches_failed, 0);
    EXPECT_INT(sleeps, 13); /* 60 s of 5 s polls on the injected clock, then it stops waiting */
    EXPECT_INT(fake_batch_counts_get(t.fb).sync_posts, 0); /* not paid twice */
    fake_batch_release(t.fb);
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(st.batches_completed, 1);
    EXPECT_INT(fake_batch_counts_get(t.fb).uploads, 1);
    json_t *s = bt_status(&t);
    EXPECT_INT(vectors_of(s), 4);
    json_decref(s);
    bt_done(&t);
}

TEST(batch_gemini_404_turns_batch_mode_off_at_once)
{
    bt t;
    bt_init(&t, "gemini", NULL);
    fake_push(t.srv, FAKE_OK, 200, -1);     /* the upload */
    fake_push(t.srv, FAKE_STATUS, 404, -1); /* asyncBatchEmbedContent */
    cm_sync_stats st;
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(st.batches_failed, 1);
    EXPECT_INT(fake_batch_counts_get(t.fb).uploads, 1);
    EXPECT(fake_batch_counts_get(t.fb).sync_posts >= 1);
    json_t *s = bt_status(&t);
    EXPECT_INT(vectors_of(s), 4);
    EXPECT_CONTAINS(json_string_value(json_object_get(json_object_get(s, "batch"), "lastError")),
                    "asyncBatchEmbedContent not available");
    json_decref(s);
    bt_done(&t);
}

typedef struct watch_ctx {
    bt *t;
    volatile int stop;
    int syncs, completed;
} watch_ctx;

static void on_watch_sync(void *ctx, cm_rc rc, const cm_sync_stats *st, const char *err)
{
    watch_ctx *w = ctx;
    (void)err;
    __atomic_add_fetch(&w->syncs, 1, __ATOMIC_SEQ_CST);
    if (!rc && st->batches_completed) __atomic_add_fetch(&w->completed, 1, __ATOMIC_SEQ_CST);
}

static void *watch_thread(void *arg)
{
    watch_ctx *w = arg;
    cm_engine *e = bt_open(w->t);
    cm_watch_opts o = {&w->stop, -1, 50, on_watch_sync, w, 0};
    char err[512];
    if (e) cm_engine_watch(e, &o, err, sizeof err);
    cm_engine_close(e);
    return NULL;
}

TEST_BOTH(batch_watcher_collects_pending_batches)
{
    bt t;
    bt_init(&t, "openai", ",pollIntervalMs:50");
    fake_batch_plan held = {.hold = true};
    fake_batch_script(t.fb, &held);
    watch_ctx w = {&t, 0, 0, 0};
    pthread_t tid;
    pthread_create(&tid, NULL, watch_thread, &w);
    /* its syncs do not wait: the batch is submitted, then asked about again */
    int waited = 0;
    while (fake_batch_counts_get(t.fb).polls < 3 && waited < 20000) { /* watchdog: 20 s */
        usleep(10000);
        waited += 10;
    }
    EXPECT(fake_batch_counts_get(t.fb).polls >= 3);
    fake_batch_release(t.fb);
    while (!__atomic_load_n(&w.completed, __ATOMIC_SEQ_CST) && waited < 20000) {
        usleep(10000);
        waited += 10;
    }
    __atomic_store_n(&w.stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(tid, NULL);
    EXPECT_INT(w.completed, 1);
    EXPECT_INT(fake_batch_counts_get(t.fb).uploads, 1);
    json_t *s = bt_status(&t);
    EXPECT_INT(vectors_of(s), 4);
    json_decref(s);
    bt_done(&t);
}

TEST(batch_config_keys)
{
    cm_config cfg;
    char err[512];
    cm_config_args a = {NULL, NULL, NULL, "/tmp/qc-state"};
    const char *def = "{}";
    EXPECT_INT(cm_config_parse(def, strlen(def), "qc.json", &a, NULL, &cfg, err, sizeof err),
               CM_OK);
    EXPECT(!cfg.batch_enabled);
    EXPECT(cfg.batch_wait);
    EXPECT_INT(cfg.batch_poll_ms, 2000);
    EXPECT_INT(cfg.batch_timeout_min, 60);
    EXPECT_INT(cfg.batch_concurrency, 2);
    cm_config_release(&cfg);
    const char *set = "{agents:{defaults:{memorySearch:{remote:{batch:{enabled:true,wait:false,"
                      "pollIntervalMs:500,timeoutMinutes:5,concurrency:3}}}}}}";
    EXPECT_INT(cm_config_parse(set, strlen(set), "qc.json", &a, NULL, &cfg, err, sizeof err),
               CM_OK);
    EXPECT(cfg.batch_enabled);
    EXPECT(!cfg.batch_wait);
    EXPECT_INT(cfg.batch_poll_ms, 500);
    EXPECT_INT(cfg.batch_timeout_min, 5);
    EXPECT_INT(cfg.batch_concurrency, 3);
    cm_config_release(&cfg);
    const char *bad = "{agents:{defaults:{memorySearch:{remote:{batch:{timeoutMinutes:0}}}}}}";
    EXPECT_INT(cm_config_parse(bad, strlen(bad), "qc.json", &a, NULL, &cfg, err, sizeof err),
               CM_ECONFIG);
    EXPECT_CONTAINS(err, "remote.batch.timeoutMinutes");
}

typedef struct prog {
    int batch_reports, stop_after;
    char states[256];
    size_t max_pending, max_chunks;
} prog;

static int on_prog(void *ctx, const cm_progress *p)
{
    prog *g = ctx;
    if (!p->batch_state) return 0;
    g->batch_reports++;
    size_t n = strlen(g->states);
    snprintf(g->states + n, sizeof g->states - n, "%s%s", n ? "," : "", p->batch_state);
    g->max_pending = CM_MAX(g->max_pending, p->batches_pending);
    g->max_chunks = CM_MAX(g->max_chunks, p->batch_chunks);
    return g->stop_after && g->batch_reports >= g->stop_after;
}

TEST(batch_progress_reports_state_and_stops)
{
    bt t;
    bt_init(&t, "voyage", NULL);
    fake_batch_plan plan = {.polls = 2};
    fake_batch_script(t.fb, &plan);
    cm_engine *e = bt_open(&t);
    prog g = {0};
    char err[512];
    cm_sync_stats st;
    EXPECT_INT(cm_engine_sync(e, 0, on_prog, &g, &st, err, sizeof err), CM_OK);
    EXPECT_STR(g.states, "in_progress,in_progress,done");
    EXPECT_INT(g.max_pending, 1);
    EXPECT_INT(g.max_chunks, 4);
    cm_engine_close(e);
    bt_done(&t);
    /* a caller that says stop: the sync ends, the batch stays recorded */
    bt_init(&t, "openai", NULL);
    fake_batch_plan held = {.hold = true};
    fake_batch_script(t.fb, &held);
    e = bt_open(&t);
    prog g2 = {.stop_after = 2};
    EXPECT_INT(cm_engine_sync(e, 0, on_prog, &g2, &st, err, sizeof err), CM_ECANCELED);
    cm_engine_close(e);
    json_t *s = bt_status(&t);
    EXPECT_INT(pending_of(s), 1);
    json_decref(s);
    fake_batch_release(t.fb);
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(st.batches_completed, 1);
    EXPECT_INT(fake_batch_counts_get(t.fb).uploads, 1);
    bt_done(&t);
}

TEST(batch_unknown_at_the_provider_is_failed)
{
    bt t;
    bt_init(&t, "openai", ",wait:false");
    fake_batch_plan held = {.hold = true};
    fake_batch_script(t.fb, &held);
    cm_sync_stats st;
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(st.batches_pending, 1);
    fake_push(t.srv, FAKE_STATUS, 404, -1); /* the next status request: no such batch */
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(st.batches_failed, 1);
    EXPECT_INT(st.batches_pending, 0);
    EXPECT_INT(fake_batch_counts_get(t.fb).sync_posts, 1);
    json_t *s = bt_status(&t);
    EXPECT_INT(vectors_of(s), 4);
    EXPECT_INT(pending_of(s), 0);
    json_decref(s);
    bt_done(&t);
}
