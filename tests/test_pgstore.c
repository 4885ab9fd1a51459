/*
 * test_pgstore.c — what only the PostgreSQL store has to show (the engine's
 * own suite runs over it through TEST_BOTH): 50 agents in one database never
 * see each other's rows, deleting an agent removes every row of it, a rebuild
 * is invisible until it commits, writers of one agent in two processes take
 * turns, its BM25 equals the SQLite store's, a dropped connection is
 * reopened, the DSN is a secret (required,
 * resolved from ${VAR}, never in a message or status), and the command does
 * not link libpq. TEST_PG tests skip without the cluster of
 * scripts/pg-test-cluster.sh.
 */
#include <jansson.h>
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../src/store/store.h"
#include "test.h"

/* A test of the PostgreSQL store: skipped without the cluster; pg_dsn is
 * set while its body runs (and reset after, whatever the body returns). */
#define TEST_PG(name)                                                                              \
    static void name##_body(void);                                                                 \
    TEST(name)                                                                                     \
    {                                                                                              \
        const char *dsn = getenv("CLAWMEM_TEST_PG_DSN");                                           \
        if (!dsn || !*dsn) SKIP("postgres", "no PostgreSQL cluster (CLAWMEM_TEST_PG_DSN)");        \
        pg_dsn = dsn;                                                                              \
        name##_body();                                                                             \
        pg_dsn = NULL;                                                                             \
    }                                                                                              \
    static void name##_body(void)

/* The number at the start of s (psql's answer), or -1. */
static long atoi_ok(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    return end == s ? -1 : v;
}

/* The number psql answers to sql, or -1. */
static long psql_long(const char *sql)
{
    const char *cmd[] = {"psql", pg_dsn, "-Aqtc", sql, NULL};
    run_result k = run_cmd(NULL, cmd);
    long v = k.status == 0 && k.out ? atoi_ok(k.out) : -1;
    run_result_release(&k);
    return v;
}

static chunk_list chunks_of(const char *text)
{
    chunk_list l = {0};
    cm_chunk_text(text, strlen(text), 400, 80, &l);
    return l;
}

static cm_rc open_pg(store *s, const char *agent, unsigned flags)
{
    char err[256];
    cm_rc rc = cm_store_open_pg(s, pg_dsn, agent, "unicode61", flags, 5000, err, sizeof err);
    if (rc) fprintf(stderr, "  open %s: %s\n", agent, err);
    return rc;
}

/* Replaces the agent's index with files path[i] = text[i] (one transaction). */
static cm_rc fill(const char *agent, const char *tokenizer, size_t n, const char *const *path,
                  const char *const *text)
{
    store s;
    char err[256];
    cm_rc rc = cm_store_open_pg(&s, pg_dsn, agent, tokenizer, STORE_CREATE, 5000, err, sizeof err);
    if (rc) return rc;
    rc = cm_store_pg_rebuild_begin(&s, tokenizer, err, sizeof err);
    for (size_t i = 0; !rc && i < n; i++) {
        chunk_list l = chunks_of(text[i]);
        rc = cm_store_file_replace(&s, path[i], "memory", "h", 1, (int64_t)strlen(text[i]), NULL,
                                   &l, err, sizeof err);
        cm_chunk_list_release(&l);
    }
    if (!rc) rc = cm_store_meta_set(&s, STORE_META_KEY, "{}", err, sizeof err);
    if (!rc) rc = cm_store_commit(&s, err, sizeof err);
    if (rc) fprintf(stderr, "  fill %s: %s\n", agent, err);
    cm_store_close(&s);
    return rc;
}

static void drop(const char *agent)
{
    store s;
    char err[256];
    if (open_pg(&s, agent, STORE_CREATE) == CM_OK) {
        cm_store_drop_agent(&s, err, sizeof err);
        cm_store_close(&s);
    }
}

static json_t *search_agent(const char *ws, const char *state, const char *cfg, const char *agent,
                            const char *q)
{
    cm_options o = {agent, ws, cfg, state, NULL, NULL, 0};
    cm_engine *eng = NULL;
    char err[512], *js = NULL;
    if (cm_engine_open(&o, &eng, err, sizeof err) != CM_OK) return NULL;
    cm_search_opts so = {20, 0, 0};
    json_t *j = NULL;
    if (cm_memory_search(eng, q, &so, &js, err, sizeof err) == CM_OK) j = json_loads(js, 0, NULL);
    cm_free(js);
    cm_engine_close(eng);
    return j;
}

TEST_PG(pgstore_fifty_agents_never_see_each_other)
{
    enum { N = 50 };
    char *dir = tmp_dir();
    char state[1024], cfg[1024], ws[N][1024], agent[N][32];
    snprintf(state, sizeof state, "%s/state", dir);
    snprintf(cfg, sizeof cfg, "%s/qc.json", dir);
    write_file(dir, "qc.json", "{agents: {defaults: {memorySearch: {sync: {onSearch: false}}}}}");
    for (int i = 0; i < N; i++) {
        snprintf(agent[i], sizeof agent[i], "tenant-%02d", i);
        snprintf(ws[i], sizeof ws[i], "%s/ws%02d", dir, i);
        pg_overlay(state, agent[i]);
        char text[256];
        snprintf(text, sizeof text,
                 "# Tenant %02d\nShared topic: the lighthouse keeper logbook.\nPrivate word "
                 "zq%02dx belongs to tenant %02d only.\n",
                 i, i, i);
        write_file(ws[i], "MEMORY.md", text);
        cm_options o = {agent[i], ws[i], cfg, state, NULL, NULL, 0};
        cm_engine *eng = NULL;
        char err[512];
        EXPECT_INT(cm_engine_open(&o, &eng, err, sizeof err), CM_OK);
        EXPECT_INT(cm_engine_sync(eng, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
        cm_engine_close(eng);
    }
    for (int i = 0; i < N; i++) {
        /* the shared words: exactly the agent's own note */
        json_t *p = search_agent(ws[i], state, cfg, agent[i], "lighthouse keeper");
        json_t *res = json_object_get(p, "results");
        EXPECT_INT(json_array_size(res), 1);
        char mine[32];
        snprintf(mine, sizeof mine, "Tenant %02d", i);
        EXPECT_CONTAINS(json_string_value(json_object_get(json_array_get(res, 0), "snippet")),
                        mine);
        json_decref(p);
        /* another agent's private word: nothing */
        char other[16];
        snprintf(other, sizeof other, "zq%02dx", (i + 17) % N);
        p = search_agent(ws[i], state, cfg, agent[i], other);
        EXPECT_INT(json_array_size(json_object_get(p, "results")), 0);
        json_decref(p);
    }
    /* the store's own counts are per agent */
    store s;
    char err[256];
    int64_t files = 0, chunks = 0;
    EXPECT_INT(open_pg(&s, agent[3], 0), CM_OK);
    EXPECT_INT(cm_store_counts(&s, &files, &chunks, err, sizeof err), CM_OK);
    cm_store_close(&s);
    EXPECT_INT(files, 1);
    EXPECT_INT(chunks, 1);
    for (int i = 0; i < N; i++)
        drop(agent[i]);
}

TEST_PG(pgstore_deleting_an_agent_removes_all_its_rows)
{
    const char *paths[] = {"MEMORY.md", "memory/a.md"};
    const char *texts[] = {"one two three\n", "four five six\n"};
    drop("victim");
    drop("bystander");
    EXPECT_INT(fill("victim", "unicode61", 2, paths, texts), CM_OK);
    EXPECT_INT(fill("bystander", "unicode61", 2, paths, texts), CM_OK);
    const char *who[] = {"victim", "bystander"};
    char err[256];
    for (int w = 0; w < 2; w++) { /* a vector per chunk and a cache entry each */
        store s;
        EXPECT_INT(open_pg(&s, who[w], 0), CM_OK);
        pending_chunk *pc = NULL;
        size_t n = 0;
        EXPECT_INT(cm_store_pending_vectors(&s, 0, 10, &pc, &n, err, sizeof err), CM_OK);
        EXPECT_INT(n, 2);
        float v[3] = {1, 2, 3};
        EXPECT_INT(cm_store_begin(&s, err, sizeof err), CM_OK);
        for (size_t i = 0; i < n; i++)
            EXPECT_INT(cm_store_vector_put(&s, pc[i].id, v, 3, err, sizeof err), CM_OK);
        EXPECT_INT(cm_store_cache_put(&s, "p", "m", "k", pc[0].hash, v, 3, err, sizeof err), CM_OK);
        EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
        cm_store_pending_release(pc, n);
        cm_store_close(&s);
    }
    store s;
    EXPECT_INT(open_pg(&s, "victim", 0), CM_OK);
    int64_t n = 0;
    EXPECT_INT(cm_store_count(&s, "vectors", &n, err, sizeof err), CM_OK);
    EXPECT_INT(n, 2);
    EXPECT_INT(cm_store_count(&s, "embedding_cache", &n, err, sizeof err), CM_OK);
    EXPECT_INT(n, 1);
    EXPECT_INT(psql_long("SELECT count(*) FROM clawmem_vector_log WHERE agent_id = 'victim'"), 2);
    EXPECT_INT(cm_store_drop_agent(&s, err, sizeof err), CM_OK);
    /* every table: files, chunks (and their keyword entries), vectors, cache,
     * meta, the vector log and the agent's row */
    EXPECT_INT(psql_long("SELECT count(*) FROM clawmem_vector_log WHERE agent_id = 'victim'"), 0);
    EXPECT_INT(psql_long("SELECT count(*) FROM clawmem_vector_log WHERE agent_id = 'bystander'"),
               2);
    static const char *const tables[] = {"files", "chunks", "vectors", "embedding_cache"};
    for (size_t i = 0; i < ARRAY_LEN(tables); i++) {
        EXPECT_INT(cm_store_count(&s, tables[i], &n, err, sizeof err), CM_OK);
        EXPECT_INT(n, 0);
    }
    char *meta = NULL;
    EXPECT_INT(cm_store_meta_get(&s, STORE_META_KEY, &meta, err, sizeof err), CM_OK);
    EXPECT(meta == NULL);
    EXPECT_INT(cm_store_data_version(&s), -1);
    fts_hits h = {0};
    EXPECT_INT(cm_store_fts_search(&s, "\"four\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 0);
    cm_store_close(&s);
    store o;
    EXPECT_INT(cm_store_open_pg(&o, pg_dsn, "victim", "unicode61", 0, 5000, err, sizeof err),
               CM_ENOTFOUND);
    /* the other agent keeps everything */
    EXPECT_INT(open_pg(&s, "bystander", 0), CM_OK);
    EXPECT_INT(cm_store_count(&s, "vectors", &n, err, sizeof err), CM_OK);
    EXPECT_INT(n, 2);
    EXPECT_INT(cm_store_fts_search(&s, "\"four\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 1);
    cm_fts_hits_release(&h);
    cm_store_close(&s);
    drop("bystander");
}

/* A database made before the vector log (no clawmem_vector_log, no
 * log_seq) gets both at the next open; its agents' rows stay, and writes
 * are logged from then on. */
TEST_PG(pgstore_adds_the_vector_log_to_an_older_schema)
{
    const char *paths[] = {"MEMORY.md"};
    const char *texts[] = {"an older schema\n"};
    drop("older");
    EXPECT_INT(fill("older", "unicode61", 1, paths, texts), CM_OK);
    EXPECT_INT(psql_long("ALTER TABLE clawmem_agents DROP COLUMN log_seq; DROP TABLE "
                         "clawmem_vector_log; SELECT 1"),
               1);
    EXPECT_INT(psql_long("SELECT count(*) FROM pg_class WHERE relname = 'clawmem_vector_log'"), 0);
    store s;
    char err[256];
    EXPECT_INT(open_pg(&s, "older", 0), CM_OK);
    EXPECT_INT(psql_long("SELECT count(*) FROM pg_class WHERE relname = 'clawmem_vector_log'"), 1);
    fts_hits h = {0};
    EXPECT_INT(cm_store_fts_search(&s, "\"older\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 1);
    float v[3] = {1, 0, 0};
    if (h.n) EXPECT_INT(cm_store_vector_put(&s, h.v[0].id, v, 3, err, sizeof err), CM_OK);
    cm_fts_hits_release(&h);
    EXPECT_INT(psql_long("SELECT count(*) FROM clawmem_vector_log WHERE agent_id = 'older'"), 1);
    EXPECT_INT(psql_long("SELECT log_seq FROM clawmem_agents WHERE agent_id = 'older'"), 1);
    cm_store_close(&s);
    drop("older");
}

/* A role that may only read opens a database from before the vector log
 * (which it may not add): it searches as before; a write says why it
 * cannot. The owner's next open adds the log. */
TEST_PG(pgstore_reader_role_opens_an_older_schema)
{
    const char *paths[] = {"MEMORY.md"};
    const char *texts[] = {"an older schema\n"};
    drop("ro");
    EXPECT_INT(fill("ro", "unicode61", 1, paths, texts), CM_OK);
    EXPECT_INT(psql_long("ALTER TABLE clawmem_agents DROP COLUMN log_seq, DROP COLUMN "
                         "log_version; DROP TABLE clawmem_vector_log; DROP ROLE IF EXISTS "
                         "cm_reader; CREATE ROLE cm_reader LOGIN; GRANT SELECT ON ALL TABLES IN "
                         "SCHEMA public TO cm_reader; SELECT 1"),
               1);
    char dsn[1200];
    snprintf(dsn, sizeof dsn, "%s user=cm_reader", pg_dsn);
    store s;
    char err[512];
    EXPECT_INT(cm_store_open_pg(&s, dsn, "ro", "unicode61", 0, 5000, err, sizeof err), CM_OK);
    fts_hits h = {0};
    EXPECT_INT(cm_store_fts_search(&s, "\"older\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 1);
    vec_index x;
    int64_t seq = 0;
    EXPECT_INT(cm_store_vectors_load(&s, 3, &x, &seq, err, sizeof err), CM_OK);
    EXPECT_INT(seq, -1); /* no log: loads whole on each new version */
    cm_vec_index_release(&x);
    float v[3] = {1, 0, 0};
    if (h.n)
        EXPECT_INT(cm_store_vector_put(&s, h.v[0].id, v, 3, err, sizeof err), CM_EIO);
    EXPECT_CONTAINS(err, "predates the vector log");
    cm_fts_hits_release(&h);
    cm_store_close(&s);
    EXPECT_INT(open_pg(&s, "ro", 0), CM_OK); /* the owner: adds it */
    cm_store_close(&s);
    EXPECT_INT(psql_long("SELECT count(*) FROM pg_class WHERE relname = 'clawmem_vector_log'"), 1);
    drop("ro");
}

/* A writer that keeps no log (an older clawmem) commits after the warm
 * reader loaded: its version without a matching log_version tells the
 * reader to load again; the next writer with the log leaves a gap, so the
 * change is never skipped. */
TEST_PG(pgstore_a_writer_without_the_log_makes_readers_load)
{
    const char *paths[] = {"MEMORY.md"};
    const char *texts[] = {"mixed writers\n"};
    drop("mixed");
    EXPECT_INT(fill("mixed", "unicode61", 1, paths, texts), CM_OK);
    store s;
    char err[256];
    EXPECT_INT(open_pg(&s, "mixed", 0), CM_OK);
    fts_hits h = {0};
    EXPECT_INT(cm_store_fts_search(&s, "\"mixed\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 1);
    int64_t id = h.n ? h.v[0].id : 0;
    cm_fts_hits_release(&h);
    float v[3] = {1, 0, 0};
    EXPECT_INT(cm_store_vector_put(&s, id, v, 3, err, sizeof err), CM_OK);
    vec_index x;
    int64_t seq = -1;
    bool reload = false;
    EXPECT_INT(cm_store_vectors_load(&s, 3, &x, &seq, err, sizeof err), CM_OK);
    EXPECT(seq > 0);
    EXPECT_INT(x.n, 1);
    /* the older writer: deletes the vector, bumps the version, logs nothing */
    char sql[300];
    snprintf(sql, sizeof sql,
             "DELETE FROM clawmem_vectors WHERE agent_id = 'mixed'; UPDATE clawmem_agents SET "
             "version = version + 1 WHERE agent_id = 'mixed'; SELECT 1");
    EXPECT_INT(psql_long(sql), 1);
    EXPECT_INT(cm_store_vectors_update(&s, 3, &x, &seq, &reload, err, sizeof err), CM_OK);
    EXPECT(reload);
    /* loaded again; then a writer with the log puts the vector back */
    cm_vec_index_release(&x);
    EXPECT_INT(cm_store_vectors_load(&s, 3, &x, &seq, err, sizeof err), CM_OK);
    EXPECT_INT(x.n, 0);
    EXPECT_INT(psql_long("DELETE FROM clawmem_vectors WHERE agent_id = 'mixed'; UPDATE "
                         "clawmem_agents SET version = version + 1 WHERE agent_id = 'mixed'; "
                         "SELECT 1"),
               1);
    int64_t before = seq;
    EXPECT_INT(cm_store_vector_put(&s, id, v, 3, err, sizeof err), CM_OK);
    reload = false;
    EXPECT_INT(cm_store_vectors_update(&s, 3, &x, &seq, &reload, err, sizeof err), CM_OK);
    EXPECT(reload); /* the gap of the older writer's commit */
    EXPECT(psql_long("SELECT log_seq FROM clawmem_agents WHERE agent_id = 'mixed'") >= before + 2);
    cm_vec_index_release(&x);
    cm_store_close(&s);
    drop("mixed");
}

TEST_PG(pgstore_rebuild_is_invisible_until_it_commits)
{
    const char *paths[] = {"MEMORY.md"};
    const char *old_text[] = {"oldword lives here\n"};
    drop("rebuilt");
    EXPECT_INT(fill("rebuilt", "unicode61", 1, paths, old_text), CM_OK);
    store r, w;
    char err[256];
    EXPECT_INT(open_pg(&r, "rebuilt", 0), CM_OK);
    EXPECT_INT(open_pg(&w, "rebuilt", STORE_CREATE), CM_OK);
    int64_t v0 = cm_store_data_version(&r);
    EXPECT_INT(cm_store_pg_rebuild_begin(&w, "unicode61", err, sizeof err), CM_OK);
    chunk_list l = chunks_of("newword replaces it\n");
    EXPECT_INT(
        cm_store_file_replace(&w, "MEMORY.md", "memory", "h2", 2, 20, NULL, &l, err, sizeof err),
        CM_OK);
    cm_chunk_list_release(&l);
    EXPECT_INT(cm_store_meta_set(&w, STORE_META_KEY, "{\"v\":2}", err, sizeof err), CM_OK);
    fts_hits h = {0};
    char *meta = NULL;
    /* while it runs, a reader sees the old index whole */
    EXPECT_INT(cm_store_fts_search(&r, "\"oldword\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 1);
    cm_fts_hits_release(&h);
    EXPECT_INT(cm_store_fts_search(&r, "\"newword\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 0);
    EXPECT_INT(cm_store_meta_get(&r, STORE_META_KEY, &meta, err, sizeof err), CM_OK);
    EXPECT_STR(meta, "{}");
    free(meta);
    EXPECT_INT(cm_store_data_version(&r), v0);
    EXPECT_INT(cm_store_commit(&w, err, sizeof err), CM_OK);
    /* after the commit: the new one, and a new data version */
    EXPECT_INT(cm_store_fts_search(&r, "\"oldword\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 0);
    EXPECT_INT(cm_store_fts_search(&r, "\"newword\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 1);
    cm_fts_hits_release(&h);
    EXPECT(cm_store_data_version(&r) > v0);
    /* a rebuild rolled back leaves nothing */
    EXPECT_INT(cm_store_pg_rebuild_begin(&w, "unicode61", err, sizeof err), CM_OK);
    cm_store_rollback(&w);
    EXPECT_INT(cm_store_fts_search(&r, "\"newword\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 1);
    cm_fts_hits_release(&h);
    cm_store_close(&w);
    cm_store_close(&r);
    drop("rebuilt");
}

/* Child: rewrites MEMORY.md of agent "turns" k times, each a transaction
 * that then counts the file's chunks: per_file, unless another writer's
 * chunks got in (exit 3). */
static int writer(int id, int k, size_t per_file)
{
    store s;
    char err[256];
    if (open_pg(&s, "turns", 0) != CM_OK) return 1;
    for (int i = 0; i < k; i++) {
        char text[256];
        snprintf(text, sizeof text, "writer %d round %d\n\nsecond paragraph %d\n\nthird %d\n", id,
                 i, i, i);
        chunk_list l = chunks_of(text);
        cm_rc rc = cm_store_begin(&s, err, sizeof err);
        if (!rc)
            rc = cm_store_file_replace(&s, "MEMORY.md", "memory", "h", 1, 1, NULL, &l, err,
                                       sizeof err);
        int64_t files = 0, chunks = 0;
        if (!rc) rc = cm_store_counts(&s, &files, &chunks, err, sizeof err);
        if (!rc) rc = cm_store_commit(&s, err, sizeof err);
        if (rc) cm_store_rollback(&s);
        cm_chunk_list_release(&l);
        if (rc) return 2;
        if (chunks != (int64_t)per_file) return 3;
    }
    cm_store_close(&s);
    return 0;
}

TEST_PG(pgstore_writers_in_two_processes_take_turns)
{
    const char *paths[] = {"MEMORY.md"};
    const char *texts[] = {"start\n"};
    drop("turns");
    EXPECT_INT(fill("turns", "unicode61", 1, paths, texts), CM_OK);
    chunk_list one = chunks_of("writer 0 round 0\n\nsecond paragraph 0\n\nthird 0\n");
    size_t per_file = one.n;
    cm_chunk_list_release(&one);
    pid_t pid[2];
    for (int c = 0; c < 2; c++) {
        pid[c] = fork();
        if (pid[c] == 0) _exit(writer(c, 100, per_file));
    }
    for (int c = 0; c < 2; c++) {
        int st = 0;
        waitpid(pid[c], &st, 0);
        EXPECT(WIFEXITED(st));
        EXPECT_INT(WEXITSTATUS(st), 0);
    }
    /* one version of the file, never the chunks of both writers */
    store s;
    char err[256];
    int64_t files = 0, chunks = 0;
    EXPECT_INT(open_pg(&s, "turns", 0), CM_OK);
    EXPECT_INT(cm_store_counts(&s, &files, &chunks, err, sizeof err), CM_OK);
    EXPECT_INT(files, 1);
    EXPECT_INT(chunks, (int64_t)per_file);
    bool ok = false;
    EXPECT_INT(cm_store_check(&s, &ok, err, sizeof err), CM_OK);
    EXPECT(ok);
    cm_store_close(&s);
    drop("turns");
}

TEST_PG(pgstore_bm25_equals_the_sqlite_store)
{
    static const char *const texts[] = {
        "the quick brown dog jumps",
        "a lazy cat and a dog and another dog",
        "cat cat cat sleeps all day",
        "brown zebra runs over the hill",
        "nothing to see here at all",
        "dog walkers meet the cat owners every morning",
        "quick quick quick said the fox",
        "羽田空港から東京へ。羽田空港は混んでいた",
        "東京タワーの近く",
        "mail foo@bar.com or see e-mail.example.org/a_b about 3.14 and it's fine"};
    static const char *const paths[] = {"a.md", "b.md", "c.md", "d.md", "e.md",
                                        "f.md", "g.md", "h.md", "i.md", "j.md"};
    char *d = tmp_dir();
    store lite, pg;
    char err[256];
    EXPECT_INT(cm_store_open(&lite, path_in(d, "i.sqlite"), "unicode61", STORE_CREATE, 1000, err,
                             sizeof err),
               CM_OK);
    EXPECT_INT(cm_store_begin(&lite, err, sizeof err), CM_OK);
    for (size_t i = 0; i < ARRAY_LEN(texts); i++) {
        chunk_list l = chunks_of(texts[i]);
        EXPECT_INT(
            cm_store_file_replace(&lite, paths[i], "memory", "h", 1, 1, NULL, &l, err, sizeof err),
            CM_OK);
        cm_chunk_list_release(&l);
    }
    EXPECT_INT(cm_store_commit(&lite, err, sizeof err), CM_OK);
    drop("bm25");
    EXPECT_INT(fill("bm25", "unicode61", ARRAY_LEN(texts), paths, texts), CM_OK);
    EXPECT_INT(open_pg(&pg, "bm25", 0), CM_OK);
    static const char *const queries[] = {
        "\"dog\"",
        "\"cat\" OR \"dog\"",
        "\"cat\" AND \"dog\"",
        "\"quick\" OR \"brown\" OR \"zebra\"",
        "\"the\" OR \"hill\"",
        "\"dog\" AND (\"cat\" OR \"quick\")",
        "\"brown\" OR \"absentword\"",
        "\"羽田 田空 空港\"",  /* a CJK run: the phrase of its bigrams */
        "\"東京\" OR \"港\"*", /* a single CJK character: a prefix */
        "\"qu\"* OR \"dog\"",
        "\"bar\" AND \"com\"", /* words apart as unicode61 has them, not one token */
        "\"mail\" OR \"example\" OR \"14\" OR \"b\""};
    for (size_t q = 0; q < ARRAY_LEN(queries); q++) {
        fts_hits a = {0}, b = {0};
        EXPECT_INT(cm_store_fts_search(&lite, queries[q], NULL, 10, &a, err, sizeof err), CM_OK);
        EXPECT_INT(cm_store_fts_search(&pg, queries[q], NULL, 10, &b, err, sizeof err), CM_OK);
        EXPECT(a.n > 0);
        EXPECT_INT(b.n, a.n);
        for (size_t i = 0; i < a.n; i++) {
            EXPECT_NEAR(b.v[i].rank, a.v[i].rank, 1e-9);
            /* equal scores may come in either order */
            if (i + 1 < a.n && fabs(a.v[i].rank - a.v[i + 1].rank) < 1e-12) continue;
            if (i > 0 && fabs(a.v[i].rank - a.v[i - 1].rank) < 1e-12) continue;
            EXPECT_STR(b.v[i].path, a.v[i].path);
        }
        cm_fts_hits_release(&a);
        cm_fts_hits_release(&b);
    }
    cm_store_close(&lite);
    cm_store_close(&pg);
    drop("bm25");
}

/* A phrase of one lexeme gets its frequency from ts_rank (a sum over its
 * positions, inverted), any other from ts_rank_cd: both count the same
 * occurrences as FTS5, from 1 to a few hundred in one chunk. */
TEST_PG(pgstore_bm25_counts_many_occurrences_as_sqlite)
{
    static const int reps[] = {1, 2, 7, 40, 120, 250};
    const char *paths[ARRAY_LEN(reps)];
    char *texts[ARRAY_LEN(reps)];
    char names[ARRAY_LEN(reps)][16];
    for (size_t i = 0; i < ARRAY_LEN(reps); i++) {
        buf b = BUF_INIT;
        cm_buf_adds(&b, "lead words here");
        for (int k = 0; k < reps[i]; k++)
            cm_buf_adds(&b, k % 3 ? " falcon" : " falcon harbour");
        texts[i] = cm_buf_detach(&b);
        snprintf(names[i], sizeof names[i], "f%zu.md", i);
        paths[i] = names[i];
    }
    char *d = tmp_dir();
    store lite, pg;
    char err[256];
    EXPECT_INT(cm_store_open(&lite, path_in(d, "i.sqlite"), "porter", STORE_CREATE, 1000, err,
                             sizeof err),
               CM_OK);
    EXPECT_INT(cm_store_begin(&lite, err, sizeof err), CM_OK);
    for (size_t i = 0; i < ARRAY_LEN(reps); i++) {
        chunk_list l = {0};
        /* one chunk per file, however many words */
        EXPECT_INT(cm_chunk_text(texts[i], strlen(texts[i]), 4000, 0, &l), CM_OK);
        EXPECT_INT(l.n, 1);
        EXPECT_INT(
            cm_store_file_replace(&lite, paths[i], "memory", "h", 1, 1, NULL, &l, err, sizeof err),
            CM_OK);
        cm_chunk_list_release(&l);
    }
    EXPECT_INT(cm_store_commit(&lite, err, sizeof err), CM_OK);
    drop("manyocc");
    EXPECT_INT(open_pg(&pg, "manyocc", STORE_CREATE), CM_OK);
    EXPECT_INT(cm_store_pg_rebuild_begin(&pg, "porter", err, sizeof err), CM_OK);
    for (size_t i = 0; i < ARRAY_LEN(reps); i++) {
        chunk_list l = {0};
        EXPECT_INT(cm_chunk_text(texts[i], strlen(texts[i]), 4000, 0, &l), CM_OK);
        EXPECT_INT(
            cm_store_file_replace(&pg, paths[i], "memory", "h", 1, 1, NULL, &l, err, sizeof err),
            CM_OK);
        cm_chunk_list_release(&l);
    }
    EXPECT_INT(cm_store_commit(&pg, err, sizeof err), CM_OK);
    static const char *const queries[] = {
        "\"falcon\"",                       /* one lexeme: ts_rank */
        "\"falcon\" AND \"harbour\"",       /* two */
        "\"falcon harbour\"",               /* a phrase: ts_rank_cd */
        "\"falc\"* OR \"lead\"",            /* a prefix: ts_rank_cd */
        "\"harbour\" OR \"absentword\""};   /* one phrase absent */
    for (size_t q = 0; q < ARRAY_LEN(queries); q++) {
        fts_hits a = {0}, b = {0};
        EXPECT_INT(cm_store_fts_search(&lite, queries[q], NULL, 10, &a, err, sizeof err), CM_OK);
        EXPECT_INT(cm_store_fts_search(&pg, queries[q], NULL, 10, &b, err, sizeof err), CM_OK);
        EXPECT(a.n > 0);
        EXPECT_INT(b.n, a.n);
        for (size_t i = 0; i < a.n && i < b.n; i++) {
            EXPECT_NEAR(b.v[i].rank, a.v[i].rank, 1e-9);
            EXPECT_STR(b.v[i].path, a.v[i].path);
        }
        cm_fts_hits_release(&a);
        cm_fts_hits_release(&b);
    }
    cm_store_close(&lite);
    cm_store_close(&pg);
    drop("manyocc");
    for (size_t i = 0; i < ARRAY_LEN(reps); i++)
        free(texts[i]);
}

/* A query's score is the sum of its phrases' BM25 terms, which the SQLite
 * store adds in the phrases' order; the PostgreSQL store's statement of k
 * phrases (k <= 8, a column per phrase) adds them in the same order, so
 * both give the same scores to the last bit and the same chunks at the
 * limit. 120 chunks of eight words at varied counts and lengths, the rows
 * out of id order (as after syncs); queries of 3 to 8 phrases (the OR hits
 * ranked, the AND hits), and one of 10 (the statement of any phrase
 * count, which sums in its grouping's order: near). */
TEST_PG(pgstore_search_adds_phrases_in_order_as_sqlite)
{
    enum { NF = 120 };
    static const char *const words[] = {"alpha", "bravo", "charlie", "delta",
                                        "echo",  "foxtrot", "golf", "hotel"};
    const char *paths[NF];
    char *texts[NF];
    char names[NF][16];
    for (int i = 0; i < NF; i++) {
        buf b = BUF_INIT;
        cm_buf_adds(&b, "lead");
        for (int w = 0; w < (int)ARRAY_LEN(words); w++) {
            int n = (i * (w + 3) + w * w) % (w + 4); /* 0 .. w + 3 */
            for (int k = 0; k < n; k++)
                cm_buf_printf(&b, " %s", words[w]);
        }
        for (int k = 0; k < (i * 7) % 23; k++) /* lengths apart */
            cm_buf_printf(&b, " pad%d", k);
        texts[i] = cm_buf_detach(&b);
        snprintf(names[i], sizeof names[i], "s%03d.md", i);
        paths[i] = names[i];
    }
    char *d = tmp_dir();
    store lite, pg;
    char err[256];
    EXPECT_INT(cm_store_open(&lite, path_in(d, "i.sqlite"), "unicode61", STORE_CREATE, 1000, err,
                             sizeof err),
               CM_OK);
    EXPECT_INT(cm_store_begin(&lite, err, sizeof err), CM_OK);
    for (int i = 0; i < NF; i++) {
        chunk_list l = chunks_of(texts[i]);
        EXPECT_INT(
            cm_store_file_replace(&lite, paths[i], "memory", "h", 1, 1, NULL, &l, err, sizeof err),
            CM_OK);
        cm_chunk_list_release(&l);
    }
    EXPECT_INT(cm_store_commit(&lite, err, sizeof err), CM_OK);
    drop("order");
    EXPECT_INT(fill("order", "unicode61", NF, paths, (const char *const *)texts), CM_OK);
    EXPECT_INT(open_pg(&pg, "order", 0), CM_OK);
    /* The table's rows out of id order, as after a while of syncs: the
     * first half written again (new ids, at the table's end), the space it
     * left vacuumed, the second half written again into it. Both stores
     * get the same writes (the same ids' order). */
    for (int half = 0; half < 2; half++) {
        if (half) psql_long("VACUUM clawmem_chunks");
        store *both[] = {&lite, &pg};
        for (size_t k = 0; k < ARRAY_LEN(both); k++) {
            EXPECT_INT(cm_store_begin(both[k], err, sizeof err), CM_OK);
            for (int i = half * NF / 2; i < (half + 1) * NF / 2; i++) {
                chunk_list l = chunks_of(texts[i]);
                EXPECT_INT(cm_store_file_replace(both[k], paths[i], "memory", "h2", 1, 1, NULL, &l,
                                                 err, sizeof err),
                           CM_OK);
                cm_chunk_list_release(&l);
            }
            EXPECT_INT(cm_store_commit(both[k], err, sizeof err), CM_OK);
        }
    }
    static const char *const queries[] = {
        "\"alpha\" OR \"bravo\" OR \"charlie\"",
        "\"hotel\" OR \"delta\" OR \"alpha\" OR \"golf\"",
        "\"echo\" OR \"charlie\" OR \"foxtrot\" OR \"bravo\" OR \"hotel\"",
        "\"golf\" OR \"alpha\" OR \"echo\" OR \"delta\" OR \"bravo\" OR \"charlie\"",
        "\"alpha\" OR \"bravo\" OR \"charlie\" OR \"delta\" OR \"echo\" OR \"foxtrot\" OR "
        "\"golf\" OR \"hotel\"",
        "\"charlie\" AND \"echo\" AND \"golf\"",
        "\"alpha\" OR \"bravo\" OR \"charlie\" OR \"delta\" OR \"echo\" OR \"foxtrot\" OR "
        "\"golf\" OR \"hotel\" OR \"lead\" OR \"pad3\""};
    for (size_t q = 0; q < ARRAY_LEN(queries); q++) {
        bool exact = q + 1 < ARRAY_LEN(queries);
        fts_hits a = {0}, b = {0};
        EXPECT_INT(cm_store_fts_search(&lite, queries[q], NULL, 12, &a, err, sizeof err), CM_OK);
        EXPECT_INT(cm_store_fts_search(&pg, queries[q], NULL, 12, &b, err, sizeof err), CM_OK);
        EXPECT(a.n > 0);
        EXPECT_INT(b.n, a.n);
        int differ = 0;
        for (size_t i = 0; i < a.n && i < b.n; i++) {
            if (exact) {
                if (b.v[i].rank != a.v[i].rank || strcmp(b.v[i].path, a.v[i].path) != 0) differ++;
            } else {
                EXPECT_NEAR(b.v[i].rank, a.v[i].rank, 1e-9);
            }
        }
        if (differ) fprintf(stderr, "  query %zu: %d of %zu hits differ\n", q, differ, a.n);
        EXPECT_INT(differ, 0);
        cm_fts_hits_release(&a);
        cm_fts_hits_release(&b);
    }
    cm_store_close(&lite);
    cm_store_close(&pg);
    drop("order");
    for (int i = 0; i < NF; i++)
        free(texts[i]);
}

/* A rebuild sends its files in batches (512 files a statement): 1,300
 * files, with names that need quoting in an array literal and a problem
 * row, give the rows, the totals and the BM25 scores of the SQLite store. */
TEST_PG(pgstore_rebuild_in_batches_matches_sqlite)
{
    enum { NF = 1300 };
    static char paths[NF][48], texts[NF][96];
    const char *pp[NF], *tt[NF];
    static const char *const words[] = {"heron", "lake", "north", "tide", "stone", "amber"};
    for (int i = 0; i < NF; i++) {
        snprintf(paths[i], sizeof paths[i],
                 i == 7   ? "memory/a,b {%d}.md"
                 : i == 9 ? "memory/q\"uo\\te%d.md"
                          : "memory/f%04d.md",
                 i);
        snprintf(texts[i], sizeof texts[i], "note %d about the %s and the %s\nword%d\n", i,
                 words[i % 6], words[(i / 6) % 6], i);
        pp[i] = paths[i];
        tt[i] = texts[i];
    }
    char *d = tmp_dir();
    store lite, pg;
    char err[256];
    EXPECT_INT(cm_store_open(&lite, path_in(d, "i.sqlite"), "unicode61", STORE_CREATE, 1000, err,
                             sizeof err),
               CM_OK);
    EXPECT_INT(cm_store_begin(&lite, err, sizeof err), CM_OK);
    for (int i = 0; i < NF; i++) {
        chunk_list l = chunks_of(tt[i]);
        EXPECT_INT(cm_store_file_replace(&lite, pp[i], "memory", "h", 1, (int64_t)strlen(tt[i]),
                                         NULL, &l, err, sizeof err),
                   CM_OK);
        cm_chunk_list_release(&l);
    }
    EXPECT_INT(cm_store_commit(&lite, err, sizeof err), CM_OK);
    drop("batches");
    EXPECT_INT(fill("batches", "unicode61", NF, pp, tt), CM_OK);
    EXPECT_INT(open_pg(&pg, "batches", 0), CM_OK);
    int64_t f = 0, c = 0;
    EXPECT_INT(cm_store_counts(&pg, &f, &c, err, sizeof err), CM_OK);
    EXPECT_INT(f, NF);
    EXPECT_INT(c, NF);
    stored_files sf = {0};
    EXPECT_INT(cm_store_files_load(&pg, &sf, err, sizeof err), CM_OK);
    EXPECT_INT(sf.n, NF);
    bool seen_comma = false, seen_quote = false;
    for (size_t i = 0; i < sf.n; i++) {
        seen_comma |= !strcmp(sf.v[i].path, paths[7]);
        seen_quote |= !strcmp(sf.v[i].path, paths[9]);
    }
    EXPECT(seen_comma && seen_quote);
    cm_store_stored_files_release(&sf);
    static const char *const queries[] = {"\"heron\"", "\"heron\" AND \"amber\"",
                                          "\"word1299\" OR \"word7\" OR \"tide\""};
    for (size_t q = 0; q < ARRAY_LEN(queries); q++) {
        fts_hits a = {0}, b = {0};
        EXPECT_INT(cm_store_fts_search(&lite, queries[q], NULL, 10, &a, err, sizeof err), CM_OK);
        EXPECT_INT(cm_store_fts_search(&pg, queries[q], NULL, 10, &b, err, sizeof err), CM_OK);
        EXPECT(a.n > 0);
        EXPECT_INT(b.n, a.n);
        for (size_t i = 0; i < a.n && i < b.n; i++)
            EXPECT_NEAR(b.v[i].rank, a.v[i].rank, 1e-9);
        cm_fts_hits_release(&a);
        cm_fts_hits_release(&b);
    }
    cm_store_close(&lite);
    cm_store_close(&pg);
    drop("batches");
}

/* What a search reads stays cheap to read: each chunk's keyword text is
 * kept in its row (STORAGE MAIN, also given to a database of an earlier
 * clawmem at its next open), and a rebuild leaves the keyword index's
 * pending list merged (a search reads it whole). */
TEST_PG(pgstore_keyword_text_in_row_and_pending_list_merged)
{
    const char *paths[] = {"a.md", "b.md", "c.md"};
    const char *texts[] = {"pending lists are read whole\n", "toast is read again\n",
                           "rows keep their keyword text\n"};
    drop("inrow");
    EXPECT_INT(psql_long("ALTER TABLE clawmem_chunks ALTER COLUMN tsv SET STORAGE EXTENDED; "
                         "SELECT 1"),
               1);
    EXPECT_INT(fill("inrow", "unicode61", 3, paths, texts), CM_OK);
    EXPECT_INT(psql_long("SELECT count(*) FROM pg_attribute WHERE attrelid = "
                         "'clawmem_chunks'::regclass AND attname = 'tsv' AND attstorage = 'm'"),
               1);
    EXPECT_INT(psql_long("SELECT gin_clean_pending_list('clawmem_chunks_tsv'::regclass)"), 0);
    drop("inrow");
}

/* After an incremental write (not a rebuild), the store's checkpoint (the
 * end of a sync) merges the keyword index's pending list: a search reads
 * that list whole on every call. */
TEST_PG(pgstore_incremental_write_merges_pending_list)
{
    const char *paths[] = {"a.md"};
    const char *texts[] = {"the first file of the agent\n"};
    drop("pendinc");
    EXPECT_INT(fill("pendinc", "unicode61", 1, paths, texts), CM_OK);
    store s;
    char err[256];
    EXPECT_INT(open_pg(&s, "pendinc", 0), CM_OK);
    const char *text = "a file added later by an incremental sync\n";
    chunk_list l = chunks_of(text);
    EXPECT_INT(cm_store_file_replace(&s, "b.md", "memory", "h2", 1, (int64_t)strlen(text), NULL,
                                     &l, err, sizeof err),
               CM_OK);
    cm_chunk_list_release(&l);
    cm_store_checkpoint(&s);
    cm_store_close(&s);
    EXPECT_INT(psql_long("SELECT gin_clean_pending_list('clawmem_chunks_tsv'::regclass)"), 0);
    drop("pendinc");
}

TEST(pgstore_command_does_not_link_libpq)
{
    const char *bin = getenv("CLAWMEM_BIN") ? getenv("CLAWMEM_BIN") : "build/clawmem";
    const char *cmd[] = {"ldd", bin, NULL};
    run_result r = run_cmd(NULL, cmd);
    EXPECT_INT(r.status, 0);
    EXPECT(r.out && strstr(r.out, "libc.so") != NULL); /* ldd did list the libraries */
    EXPECT(strstr(r.out, "libpq") == NULL);            /* loaded with dlopen when needed */
    run_result_release(&r);
}

TEST(pgstore_config_dsn_is_required_and_never_shown)
{
    char *dir = tmp_dir();
    char ws[1024], state[1024], cfg[1024], err[512];
    snprintf(ws, sizeof ws, "%s/ws", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    snprintf(cfg, sizeof cfg, "%s/qc.json", dir);
    write_file(ws, "MEMORY.md", "secret keeper notes\n");
    write_file(dir, "qc.json", "{}");
    cm_options o = {NULL, ws, cfg, state, NULL, NULL, 0};
    cm_engine *eng = NULL;
    /* postgres without a DSN: a config error naming the key */
    write_file(state, "clawmem.json",
               "{agents: {defaults: {memorySearch: {store: {driver: "
               "'postgres'}}}}}");
    EXPECT_INT(cm_engine_open(&o, &eng, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "store.dsn");
    /* a server that cannot be reached: the error never shows the password */
    write_file(state, "clawmem.json",
               "{agents: {defaults: {memorySearch: {store: {driver: 'postgres', dsn: "
               "'${CM_TEST_BAD_DSN}'}}}}}");
    setenv("CM_TEST_BAD_DSN", "host=/nonexistent-dir port=1 user=x password=s3cret-pw", 1);
    EXPECT_INT(cm_engine_open(&o, &eng, err, sizeof err), CM_OK);
    EXPECT(cm_engine_sync(eng, 0, NULL, NULL, NULL, err, sizeof err) != CM_OK);
    EXPECT(strstr(err, "s3cret-pw") == NULL);
    EXPECT_CONTAINS(err, "cannot connect");
    cm_engine_close(eng);
    unsetenv("CM_TEST_BAD_DSN");
}

TEST_PG(pgstore_config_dsn_from_the_environment)
{
    char *dir = tmp_dir();
    char ws[1024], state[1024], cfg[1024], err[512];
    snprintf(ws, sizeof ws, "%s/ws", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    snprintf(cfg, sizeof cfg, "%s/qc.json", dir);
    write_file(ws, "MEMORY.md", "secret keeper notes\n");
    write_file(dir, "qc.json", "{}");
    cm_options o = {NULL, ws, cfg, state, NULL, NULL, 0};
    cm_engine *eng = NULL;
    /* the DSN from the environment through ${VAR}; status names the driver, not the DSN */
    setenv("CM_TEST_PG_DSN_REF", pg_dsn, 1);
    write_file(state, "clawmem.json",
               "{agents: {defaults: {memorySearch: {store: {driver: 'postgres', dsn: "
               "'${CM_TEST_PG_DSN_REF}'}}}}}");
    drop("main");
    EXPECT_INT(cm_engine_open(&o, &eng, err, sizeof err), CM_OK);
    EXPECT_INT(cm_engine_sync(eng, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    char *js = NULL;
    EXPECT_INT(cm_engine_status(eng, 0, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "\"storeDriver\":\"postgres\"");
    EXPECT(strstr(js, pg_dsn) == NULL);
    cm_free(js);
    cm_engine_close(eng);
    unsetenv("CM_TEST_PG_DSN_REF");
    drop("main");
}

TEST_PG(pgstore_reconnects_after_the_server_drops_it)
{
    const char *paths[] = {"MEMORY.md"};
    const char *texts[] = {"phoenix rises again\n"};
    drop("reconnect");
    EXPECT_INT(fill("reconnect", "unicode61", 1, paths, texts), CM_OK);
    store r;
    char err[256];
    fts_hits h = {0};
    EXPECT_INT(open_pg(&r, "reconnect", 0), CM_OK);
    EXPECT_INT(cm_store_fts_search(&r, "\"phoenix\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 1);
    cm_fts_hits_release(&h);
    /* the server ends every other session (as a restart or a failover would) */
    const char *cmd[] = {"psql", pg_dsn, "-Atc",
                         "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                         "backend_type = 'client backend' AND pid <> pg_backend_pid()",
                         NULL};
    run_result k = run_cmd(NULL, cmd);
    EXPECT_INT(k.status, 0);
    EXPECT(k.out && atoi_ok(k.out) >= 1);
    run_result_release(&k);
    EXPECT_INT(cm_store_fts_search(&r, "\"phoenix\"", NULL, 10, &h, err, sizeof err), CM_OK);
    EXPECT_INT(h.n, 1);
    cm_fts_hits_release(&h);
    EXPECT(cm_store_pg_connected(&r));
    cm_store_close(&r);
    drop("reconnect");
}
