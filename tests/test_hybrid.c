/*
 * test_hybrid.c — the engine with an embedding provider (the loopback fake
 * server): vectors filled during sync, hybrid ranking, the embedding cache
 * across moves and rebuilds, provider faults during sync and search, the
 * fallback provider, status, and a warm engine that follows edits through
 * the vector log instead of reloading every vector. TEST_BOTH tests run over
 * the PostgreSQL store too.
 */
#include <jansson.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fakeserver.h"
#include "test.h"

typedef struct hy {
    char *dir;
    char ws[1024], state[1024], cfg[1024];
    char base[64];
    fake_server *srv;
} hy;

static void hy_config(hy *h, const char *extra)
{
    char text[2048];
    snprintf(
        text, sizeof text,
        "{agents:{defaults:{memorySearch:{provider:'openai',remote:{baseUrl:'%s',apiKey:'k'}%s}}}}",
        h->base, extra ? extra : "");
    write_file(h->dir, "qc.json", text);
}

static void hy_init(hy *h)
{
    setenv("CLAWMEM_HTTP_BACKOFF_MS", "5", 1);
    setenv("CLAWMEM_HTTP_TIMEOUT_MS", "2000", 1);
    unsetenv("OPENAI_API_KEY");
    h->dir = tmp_dir();
    snprintf(h->ws, sizeof h->ws, "%s/ws", h->dir);
    snprintf(h->state, sizeof h->state, "%s/state", h->dir);
    snprintf(h->cfg, sizeof h->cfg, "%s/qc.json", h->dir);
    h->srv = fake_start(64, h->base);
    hy_config(h, NULL);
    if (pg_dsn) pg_overlay(h->state, "main");
    write_file(h->ws, "MEMORY.md", "# Facts\nThe dog Biscuit likes the beach.\n");
    write_file(h->ws, "memory/2026-02-10.md",
               "Configured the Omada router with VLAN 10 for IoT.\n");
    write_file(h->ws, "memory/2026-02-11.md", "Dentist appointment moved to Friday morning.\n");
}

static cm_engine *hy_open(hy *h)
{
    cm_options o = {NULL, h->ws, h->cfg, h->state, NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[512];
    if (cm_engine_open(&o, &e, err, sizeof err)) fprintf(stderr, "  open: %s\n", err);
    return e;
}

static cm_rc hy_sync(hy *h, cm_sync_stats *st)
{
    cm_engine *e = hy_open(h);
    char err[512];
    cm_rc rc = cm_engine_sync(e, 0, NULL, NULL, st, err, sizeof err);
    if (rc) fprintf(stderr, "  sync: %s\n", err);
    cm_engine_close(e);
    return rc;
}

static json_t *hy_json(hy *h, bool status, const char *q)
{
    cm_engine *e = hy_open(h);
    char err[512], *js = NULL;
    cm_search_opts o = {10, 0, 0};
    if (status)
        cm_engine_status(e, 0, &js, err, sizeof err);
    else
        cm_memory_search(e, q, &o, &js, err, sizeof err);
    json_t *j = js ? json_loads(js, 0, NULL) : NULL;
    cm_free(js);
    cm_engine_close(e);
    return j;
}

TEST_BOTH(hybrid_sync_fills_vectors_and_search_merges)
{
    hy h;
    hy_init(&h);
    cm_sync_stats st;
    EXPECT_INT(hy_sync(&h, &st), CM_OK);
    EXPECT_INT(st.chunks_embedded, 3);
    json_t *s = hy_json(&h, true, NULL);
    EXPECT_STR(json_string_value(json_object_get(s, "search")), "hybrid");
    EXPECT_STR(json_string_value(json_object_get(s, "provider")), "openai");
    EXPECT_INT(json_integer_value(json_object_get(json_object_get(s, "vector"), "vectors")), 3);
    EXPECT_INT(json_integer_value(json_object_get(json_object_get(s, "cache"), "entries")), 3);
    json_decref(s);
    /* "router beach" has no chunk with both words: the keyword side falls back
     * to OR, the vector side finds both notes, and both sides score them */
    json_t *p = hy_json(&h, false, "router beach");
    EXPECT_STR(json_string_value(json_object_get(p, "provider")), "openai");
    EXPECT_STR(json_string_value(json_object_get(p, "model")), "text-embedding-3-small");
    EXPECT(json_array_size(json_object_get(p, "results")) >= 2);
    double top = json_number_value(
        json_object_get(json_array_get(json_object_get(p, "results"), 0), "score"));
    EXPECT(top > 0 && top <= 1.0);
    json_decref(p);
    fake_stop(h.srv);
}

TEST_BOTH(hybrid_cache_survives_moves_and_rebuilds)
{
    hy h;
    hy_init(&h);
    EXPECT_INT(hy_sync(&h, NULL), CM_OK);
    int before = fake_count(h.srv);
    /* moving text to another file re-uses its vector */
    rename(path_in(h.ws, "memory/2026-02-11.md"), path_in(h.ws, "memory/2026-02-12.md"));
    cm_sync_stats st;
    EXPECT_INT(hy_sync(&h, &st), CM_OK);
    EXPECT_INT(st.cache_hits, 1);
    EXPECT_INT(st.chunks_embedded, 0);
    EXPECT_INT(fake_count(h.srv), before);
    /* a new model rebuilds and embeds everything again ... */
    hy_config(&h, ",model:'text-embedding-3-large'");
    EXPECT_INT(hy_sync(&h, &st), CM_OK);
    EXPECT(st.rebuilt);
    EXPECT_INT(st.chunks_embedded, 3);
    /* ... and going back finds the first model's vectors in the cache */
    hy_config(&h, NULL);
    before = fake_count(h.srv);
    EXPECT_INT(hy_sync(&h, &st), CM_OK);
    EXPECT(st.rebuilt);
    EXPECT_INT(st.cache_hits, 3);
    EXPECT_INT(fake_count(h.srv), before);
    fake_stop(h.srv);
}

TEST(hybrid_provider_faults_keep_the_index_whole)
{
    hy h;
    hy_init(&h);
    for (int i = 0; i < 4; i++)
        fake_push(h.srv, FAKE_STATUS, 500, -1);
    cm_sync_stats st;
    EXPECT_INT(hy_sync(&h, &st), CM_OK); /* the keyword index is complete */
    EXPECT_INT(st.chunks_embedded, 0);
    json_t *p = hy_json(&h, false, "Biscuit");
    EXPECT_INT(json_array_size(json_object_get(p, "results")), 1);
    json_decref(p);
    /* the next sync completes the vectors */
    EXPECT_INT(hy_sync(&h, &st), CM_OK);
    EXPECT_INT(st.chunks_embedded, 3);
    /* the query embedding fails: keyword results still come */
    for (int i = 0; i < 4; i++)
        fake_push(h.srv, FAKE_BAD_JSON, 200, -1);
    cm_engine *e = hy_open(&h);
    char err[512], *js = NULL;
    EXPECT_INT(cm_memory_search(e, "Biscuit", NULL, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "MEMORY.md");
    cm_free(js);
    EXPECT_INT(cm_engine_status(e, 0, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "not valid JSON"); /* lastError */
    cm_free(js);
    cm_engine_close(e);
    /* an all-zero query vector: keyword-only for that search */
    fake_push(h.srv, FAKE_ZERO, 200, -1);
    p = hy_json(&h, false, "Biscuit");
    EXPECT_INT(json_array_size(json_object_get(p, "results")), 1);
    json_decref(p);
    fake_stop(h.srv);
}

TEST(hybrid_fallback_and_no_key)
{
    hy h;
    hy_init(&h);
    /* voyage has no key: the fallback openai serves, and status says why */
    char text[1024];
    snprintf(text, sizeof text,
             "{agents:{defaults:{memorySearch:{provider:'voyage',fallback:'openai'}}},"
             "models:{providers:{openai:{apiKey:'k',baseUrl:'%s'}}}}",
             h.base);
    write_file(h.dir, "qc.json", text);
    unsetenv("VOYAGE_API_KEY");
    EXPECT_INT(hy_sync(&h, NULL), CM_OK);
    json_t *s = hy_json(&h, true, NULL);
    EXPECT_STR(json_string_value(json_object_get(s, "provider")), "openai");
    EXPECT_STR(json_string_value(json_object_get(s, "requestedProvider")), "voyage");
    EXPECT_CONTAINS(json_string_value(json_object_get(s, "providerNote")), "fallback openai");
    json_decref(s);
    json_t *p = hy_json(&h, false, "Biscuit"); /* the payload says so too */
    EXPECT_CONTAINS(json_string_value(json_object_get(p, "fallback")), "VOYAGE_API_KEY");
    json_decref(p);
    /* auto with no key anywhere: keyword search, no note */
    write_file(h.dir, "qc.json", "{}");
    s = hy_json(&h, true, NULL);
    EXPECT_STR(json_string_value(json_object_get(s, "search")), "keyword");
    EXPECT(json_is_null(json_object_get(s, "providerNote")));
    json_decref(s);
    fake_stop(h.srv);
}

TEST(hybrid_vector_only_when_hybrid_is_off)
{
    hy h;
    hy_init(&h);
    hy_config(&h, ",query:{hybrid:{enabled:false}}");
    EXPECT_INT(hy_sync(&h, NULL), CM_OK);
    json_t *p = hy_json(&h, false, "dentist friday");
    json_t *r = json_array_get(json_object_get(p, "results"), 0);
    EXPECT_STR(json_string_value(json_object_get(r, "path")), "memory/2026-02-11.md");
    json_decref(p);
    fake_stop(h.srv);
}

/* clawmem.hybridMerge through the engine: the chunk first on both sides
 * scores exactly 1 under minmax and rrf, below 1 under QuantumClaw's merge. */
TEST(hybrid_merge_options_in_the_engine)
{
    hy h;
    hy_init(&h);
    cm_sync_stats st;
    EXPECT_INT(hy_sync(&h, &st), CM_OK);
    static const char *merges[] = {"weighted", "minmax", "rrf"};
    for (int i = 0; i < 3; i++) {
        char text[2048];
        snprintf(text, sizeof text,
                 "{agents:{defaults:{memorySearch:{provider:'openai',remote:{baseUrl:'%s',apiKey:'"
                 "k'}}}},"
                 "clawmem:{hybridMerge:'%s'}}",
                 h.base, merges[i]);
        write_file(h.dir, "qc.json", text);
        json_t *p = hy_json(&h, false, "Omada router VLAN");
        json_t *first = json_array_get(json_object_get(p, "results"), 0);
        EXPECT_STR(json_string_value(json_object_get(first, "path")), "memory/2026-02-10.md");
        double top = json_number_value(json_object_get(first, "score"));
        if (i == 0)
            EXPECT(top > 0 && top < 0.999);
        else
            EXPECT_NEAR(top, 1.0, 1e-6);
        json_decref(p);
    }
    fake_stop(h.srv);
}

/* memory_search's 2026.3.22 fields with a provider: mode "hybrid", an id on
 * every result, textScore only where the keyword side found the chunk; and
 * the session key deciding "auto" citations through the public API. */
TEST(hybrid_payload_mode_id_textscore_and_session_citations)
{
    hy h;
    hy_init(&h);
    EXPECT_INT(hy_sync(&h, NULL), CM_OK);
    cm_engine *e = hy_open(&h);
    char err[512], *js = NULL;
    cm_search_opts o = {10, 0, 0};
    EXPECT_INT(cm_memory_search(e, "router", &o, &js, err, sizeof err), CM_OK);
    json_t *p = json_loads(js, 0, NULL);
    cm_free(js);
    EXPECT_STR(json_string_value(json_object_get(p, "mode")), "hybrid");
    json_t *res = json_object_get(p, "results");
    EXPECT(json_array_size(res) >= 2); /* the router note, and vector neighbours */
    size_t with_text = 0, i;
    json_t *r;
    json_array_foreach(res, i, r)
    {
        EXPECT_INT(strlen(json_string_value(json_object_get(r, "id"))), 64);
        bool router = strstr(json_string_value(json_object_get(r, "snippet")), "router") != NULL;
        EXPECT_INT(json_is_number(json_object_get(r, "textScore")), router);
        with_text += router;
    }
    EXPECT_INT(with_text, 1);
    json_decref(p);
    const char *keys[] = {"agent:main:telegram:group:-1001", "agent:main:discord:channel:42",
                          "agent:main:telegram:direct:7", NULL};
    for (int k = 0; k < 4; k++) {
        EXPECT_INT(cm_memory_search_session(e, "router", &o, keys[k], &js, err, sizeof err), CM_OK);
        p = json_loads(js, 0, NULL);
        cm_free(js);
        json_t *first = json_array_get(json_object_get(p, "results"), 0);
        EXPECT_STR(json_string_value(json_object_get(p, "citations")), "auto");
        EXPECT_INT(json_object_get(first, "citation") != NULL, k >= 2);
        EXPECT_INT(strstr(json_string_value(json_object_get(first, "snippet")), "Source: ") != NULL,
                   k >= 2);
        json_decref(p);
    }
    cm_engine_close(e);
    fake_stop(h.srv);
}

static char *search_text(cm_engine *e, const char *q)
{
    char err[512], *js = NULL;
    cm_search_opts o = {10, 0, 0};
    if (cm_memory_search(e, q, &o, &js, err, sizeof err)) fprintf(stderr, "  search: %s\n", err);
    return js;
}

/* Each of the n queries answers the same from the warm engine as from an
 * engine opened now (which loads every vector afresh). */
static void expect_as_fresh(hy *h, cm_engine *warm, const char *const *queries, size_t n)
{
    for (size_t q = 0; q < n; q++) {
        char *a = search_text(warm, queries[q]);
        cm_engine *fresh = hy_open(h);
        char *b = search_text(fresh, queries[q]);
        cm_engine_close(fresh);
        EXPECT(a && b);
        if (a && b) EXPECT_STR(a, b);
        cm_free(a);
        cm_free(b);
    }
}

/* A warm reader (as the MCP server's) and its writer, or the warm engine's
 * own syncs, after randomised edits: the warm engine's results equal those
 * of an engine that loads every vector afresh, and it loaded them once. */
TEST_BOTH(hybrid_warm_engine_follows_edits_without_reload)
{
    static const char *words[] = {"router", "beach",  "dentist", "friday", "garden", "schema",
                                  "freeze", "budget", "python",  "piano",  "coffee", "train",
                                  "winter", "rocket", "violet",  "harbor"};
    hy h;
    hy_init(&h);
    hy_config(&h, ",query:{hybrid:{enabled:false},minScore:0}");
    uint64_t r = 12345;
    char name[64], text[512];
    for (int f = 0; f < 24; f++) {
        snprintf(name, sizeof name, "memory/n%02d.md", f);
        snprintf(text, sizeof text, "note %d: %s %s %s\n", f, words[f % 16],
                 words[(f * 5 + 3) % 16], words[(f * 7 + 1) % 16]);
        write_file(h.ws, name, text);
    }
    EXPECT_INT(hy_sync(&h, NULL), CM_OK);
    cm_engine *warm = hy_open(&h), *writer = hy_open(&h);
    const char *queries[] = {"router beach", "schema freeze budget", "violet harbor coffee"};
    char *js = search_text(warm, queries[0]);
    cm_free(js);
    char err[512];
    for (int round = 0; round < 8; round++) {
        for (int op = 0; op < 3; op++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            int f = (int)((r >> 33) % 30), w = (int)((r >> 20) % 16);
            snprintf(name, sizeof name, "memory/n%02d.md", f);
            if ((r >> 40) % 4 == 0) {
                unlink(path_in(h.ws, name));
            } else {
                snprintf(text, sizeof text, "note %d round %d: %s %s\n\nmore %s\n", f, round,
                         words[w], words[(w + round) % 16], words[(w * 3 + op) % 16]);
                write_file(h.ws, name, text);
            }
        }
        /* odd rounds: another connection writes; even: the warm engine itself */
        cm_rc rc = cm_engine_sync(round % 2 ? writer : warm, 0, NULL, NULL, NULL, err, sizeof err);
        EXPECT_INT(rc, CM_OK);
        expect_as_fresh(&h, warm, queries, 3);
    }
    char *st = NULL;
    EXPECT_INT(cm_engine_status(warm, 0, &st, err, sizeof err), CM_OK);
    json_t *s = st ? json_loads(st, 0, NULL) : NULL;
    json_t *im = json_object_get(json_object_get(s, "vector"), "inMemory");
    /* both stores: one load, then the log */
    EXPECT_INT(json_integer_value(json_object_get(im, "fullLoads")), 1);
    EXPECT(json_integer_value(json_object_get(im, "logUpdates")) >= 8);
    json_decref(s);
    cm_free(st);
    cm_engine_close(warm);
    cm_engine_close(writer);
    fake_stop(h.srv);
}

/* Full loads so far of e's in-memory vectors (status vector.inMemory). */
static long long full_loads(cm_engine *e)
{
    char *st = NULL, err[512];
    long long n = -1;
    if (cm_engine_status(e, 0, &st, err, sizeof err) == CM_OK) {
        json_t *s = json_loads(st, 0, NULL);
        n = json_integer_value(json_object_get(
            json_object_get(json_object_get(s, "vector"), "inMemory"), "fullLoads"));
        json_decref(s);
    }
    cm_free(st);
    return n;
}

/* Two notes synced, then two engines on them: warm, which has searched
 * (its vectors loaded), and writer. */
static void warm_and_writer(hy *h, cm_engine **warm, cm_engine **writer)
{
    hy_init(h);
    hy_config(h, ",query:{hybrid:{enabled:false},minScore:0}");
    write_file(h->ws, "memory/a.md", "the router uses vlan twenty\n");
    write_file(h->ws, "memory/b.md", "the beach trip was on friday\n");
    EXPECT_INT(hy_sync(h, NULL), CM_OK);
    *warm = hy_open(h);
    *writer = hy_open(h);
    char *js = search_text(*warm, "router beach");
    cm_free(js);
}

/* A rebuild by another connection (on PostgreSQL: one transaction that
 * replaces every row, leaving a gap in the agent's log; on SQLite: a new
 * file), and the index dropped and built again: the warm engine loads the
 * vectors again rather than applying the log, and answers as a fresh one. */
TEST_BOTH(hybrid_warm_engine_reloads_after_a_rebuild_or_drop)
{
    hy h;
    cm_engine *warm, *writer;
    warm_and_writer(&h, &warm, &writer);
    EXPECT_INT(full_loads(warm), 1);
    char err[512];
    for (int step = 0; step < 2; step++) {
        write_file(h.ws, "memory/c.md", step ? "a dentist visit on monday\n" : "coffee with friends\n");
        if (step) {
            int dropped = 0;
            EXPECT_INT(cm_engine_drop_index(writer, &dropped, err, sizeof err), CM_OK);
            EXPECT_INT(dropped, 1);
            EXPECT_INT(cm_engine_sync(writer, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
        } else {
            EXPECT_INT(cm_engine_sync(writer, CM_SYNC_FORCE, NULL, NULL, NULL, err, sizeof err),
                       CM_OK);
        }
        const char *queries[] = {"router beach", "coffee friends", "dentist monday"};
        expect_as_fresh(&h, warm, queries, 3);
        EXPECT_INT(full_loads(warm), 2 + step);
    }
    cm_engine_close(warm);
    cm_engine_close(writer);
    fake_stop(h.srv);
}

/* The index dropped and built again right away (on PostgreSQL the agent's
 * row is made anew): the warm engine loads again and answers as a fresh
 * one, though nothing else happened in between. */
TEST_BOTH(hybrid_warm_engine_reloads_after_a_drop_alone)
{
    hy h;
    cm_engine *warm, *writer;
    warm_and_writer(&h, &warm, &writer);
    char err[512];
    int dropped = 0;
    EXPECT_INT(cm_engine_drop_index(writer, &dropped, err, sizeof err), CM_OK);
    write_file(h.ws, "memory/a.md", "a dentist visit on monday\n");
    EXPECT_INT(cm_engine_sync(writer, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    const char *queries[] = {"router beach", "dentist monday"};
    expect_as_fresh(&h, warm, queries, 2);
    EXPECT_INT(full_loads(warm), 2);
    cm_engine_close(warm);
    cm_engine_close(writer);
    fake_stop(h.srv);
}

/* Two writer processes sync edits at once while the warm engine searches
 * throughout, applying the log as it goes: afterwards it answers as a fresh
 * engine, having loaded the vectors once (the log's numbers follow commit
 * order under the writers' lock, so no change is skipped or applied out of
 * order). */
TEST_BOTH(hybrid_warm_engine_follows_concurrent_writers)
{
    static const char *words[] = {"router", "beach",  "dentist", "friday", "garden", "schema",
                                  "freeze", "budget", "python",  "piano",  "coffee", "train"};
    hy h;
    hy_init(&h);
    hy_config(&h, ",query:{hybrid:{enabled:false},minScore:0}");
    char name[64], text[256];
    for (int f = 0; f < 20; f++) {
        snprintf(name, sizeof name, "memory/n%02d.md", f);
        snprintf(text, sizeof text, "note %d: %s %s\n", f, words[f % 12], words[(f * 5) % 12]);
        write_file(h.ws, name, text);
    }
    EXPECT_INT(hy_sync(&h, NULL), CM_OK);
    cm_engine *warm = hy_open(&h);
    char *js = search_text(warm, "router beach");
    cm_free(js);
    pid_t kid[2];
    for (int k = 0; k < 2; k++) {
        kid[k] = fork();
        if (kid[k] == 0) {
            int bad = 0;
            for (int round = 0; round < 8 && !bad; round++) {
                for (int j = 0; j < 2; j++) {
                    int f = k * 10 + (round * 3 + j) % 10;
                    snprintf(name, sizeof name, "memory/n%02d.md", f);
                    snprintf(text, sizeof text, "note %d by %d round %d: %s %s\n", f, k, round,
                             words[(round + j + k) % 12], words[(round * 7 + f) % 12]);
                    write_file(h.ws, name, text);
                }
                cm_engine *w = hy_open(&h);
                char err[512];
                bad = !w || cm_engine_sync(w, 0, NULL, NULL, NULL, err, sizeof err) != CM_OK;
                cm_engine_close(w);
            }
            _exit(bad);
        }
        EXPECT(kid[k] > 0);
    }
    int running = 2, status;
    for (int spins = 0; running > 0 && spins < 4000; spins++) {
        char *a = search_text(warm, words[spins % 12]);
        EXPECT(a != NULL);
        cm_free(a);
        for (int k = 0; k < 2; k++)
            if (kid[k] > 0 && waitpid(kid[k], &status, WNOHANG) == kid[k]) {
                EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
                kid[k] = -1;
                running--;
            }
    }
    EXPECT_INT(running, 0);
    const char *queries[] = {"router beach", "schema freeze", "coffee train", "python piano"};
    expect_as_fresh(&h, warm, queries, 4);
    EXPECT_INT(full_loads(warm), 1);
    cm_engine_close(warm);
    fake_stop(h.srv);
}
