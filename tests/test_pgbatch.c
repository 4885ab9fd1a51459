/*
 * test_pgbatch.c — batch embedding over the PostgreSQL store, what only it
 * has (test_batch.c's TEST_BOTH tests run the rest over it): one batch
 * lease per agent, so among replicas only its holder submits and collects;
 * a killed replica's batch collected by another without a second upload;
 * `agents delete` taking the batch rows. Skipped without the cluster of
 * scripts/pg-test-cluster.sh.
 */
#include <signal.h>
#include <unistd.h>

#include "../src/store/store.h"
#include "batch_harness.h"
/* A test over the PostgreSQL store alone: skipped without the cluster. */
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

/* The number psql answers to sql, or -1. */
static long psql_num(const char *sql)
{
    const char *cmd[] = {"psql", pg_dsn, "-Aqtc", sql, NULL};
    run_result k = run_cmd(NULL, cmd);
    char *end = NULL;
    long v = k.status == 0 && k.out ? strtol(k.out, &end, 10) : -1;
    if (end && end == k.out) v = -1;
    run_result_release(&k);
    return v;
}

static long pg_batch_rows(const char *table)
{
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s WHERE agent_id = 'main'", table);
    return psql_num(sql);
}

/* Another replica's writer in its batch round holds the agent's batch
 * lease: a sync here submits nothing and embeds nothing (its chunks may be
 * in that writer's batches). The lease ends with the holder's session (a
 * replica killed, a server restart): the holder finds it gone, and the next
 * sync here takes it and submits. */
TEST_PG(batch_pg_only_the_lease_holder_submits)
{
    bt t;
    bt_init(&t, "openai", ",wait:false");
    fake_batch_plan held = {.hold = true};
    fake_batch_script(t.fb, &held);
    store other, third;
    char err[512];
    bool mine = false;
    EXPECT_INT(
        cm_store_open_pg(&other, pg_dsn, "main", "porter", STORE_CREATE, 5000, err, sizeof err),
        CM_OK);
    EXPECT_INT(cm_store_batches_lease(&other, false, &mine, err, sizeof err), CM_OK);
    EXPECT(mine);
    EXPECT(cm_store_batches_leased(&other));
    /* one holder: another session cannot have it, asking once or waiting */
    EXPECT_INT(
        cm_store_open_pg(&third, pg_dsn, "main", "porter", STORE_CREATE, 200, err, sizeof err),
        CM_OK);
    EXPECT_INT(cm_store_batches_lease(&third, false, &mine, err, sizeof err), CM_OK);
    EXPECT(!mine);
    EXPECT_INT(cm_store_batches_lease(&third, true, &mine, err, sizeof err), CM_OK);
    EXPECT(!mine);
    setenv("CLAWMEM_BUSY_TIMEOUT_MS", "200", 1); /* the explicit sync waits that long */
    cm_sync_stats st;
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    unsetenv("CLAWMEM_BUSY_TIMEOUT_MS");
    EXPECT_INT(st.batches_submitted, 0);
    fake_batch_counts c = fake_batch_counts_get(t.fb);
    EXPECT_INT(c.uploads, 0);
    EXPECT_INT(c.creates, 0);
    EXPECT_INT(c.sync_posts, 0);
    json_t *s = bt_status(&t);
    EXPECT_INT(json_integer_value(json_object_get(s, "chunks")), 4);
    EXPECT_INT(vectors_of(s), 0);
    json_decref(s);
    /* the holder's session ends */
    EXPECT_INT(psql_num("SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l, (SELECT "
                        "hashtextextended('clawmem-batch:main', 0) AS k) h WHERE l.locktype = "
                        "'advisory' AND l.granted AND l.objsubid = 1 AND l.classid = ((h.k >> 32) "
                        "& 4294967295)::oid AND l.objid = (h.k & 4294967295)::oid"),
               1);
    EXPECT(!cm_store_batches_leased(&other));
    cm_store_close(&other);
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(st.batches_submitted, 1);
    EXPECT_INT(st.batches_pending, 1);
    c = fake_batch_counts_get(t.fb);
    EXPECT_INT(c.uploads, 1);
    EXPECT_INT(c.sync_posts, 0);
    /* the round is over: its lease was let go */
    EXPECT_INT(cm_store_batches_lease(&third, false, &mine, err, sizeof err), CM_OK);
    EXPECT(mine);
    cm_store_batches_unlease(&third);
    cm_store_close(&third);
    bt_done(&t);
}

/* Two replicas of one agent on two hosts (two state dirs: no local lock in
 * common). Replica A's `clawmem index` submits a batch and polls it; B's
 * sync meanwhile leaves it alone. A is killed: B's next sync collects A's
 * batch, the vectors land, nothing is uploaded twice. */
TEST_PG(batch_pg_a_killed_replica_hands_its_batch_on)
{
    bt t;
    /* a short timeout: a B that wrongly waited on A's batch would give up soon */
    bt_init(&t, "openai", ",pollIntervalMs:20,timeoutMinutes:1");
    fake_batch_plan held = {.hold = true};
    fake_batch_script(t.fb, &held);
    char state2[1100], overlay[2048];
    snprintf(state2, sizeof state2, "%s/state2", t.dir);
    snprintf(overlay, sizeof overlay,
             "{agents: {defaults: {memorySearch: {store: {driver: 'postgres', dsn: '%s'}}}}}",
             pg_dsn);
    write_file(state2, "clawmem.json", overlay);
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
    cm_options o = {NULL, t.ws, t.cfg, state2, NULL, NULL, 0};
    cm_engine *b = NULL;
    char err[512];
    cm_sync_stats st;
    setenv("CLAWMEM_BUSY_TIMEOUT_MS", "200", 1);
    EXPECT_INT(cm_engine_open(&o, &b, err, sizeof err), CM_OK);
    unsetenv("CLAWMEM_BUSY_TIMEOUT_MS");
    EXPECT_INT(cm_engine_sync(b, 0, NULL, NULL, &st, err, sizeof err), CM_OK);
    EXPECT_INT(st.batches_submitted, 0);
    EXPECT_INT(st.batches_completed, 0);
    EXPECT_INT(st.batches_pending, 0); /* it did not take A's batch up either */
    fake_batch_counts c = fake_batch_counts_get(t.fb);
    EXPECT_INT(c.uploads, 1);
    EXPECT_INT(c.creates, 1);
    EXPECT_INT(c.sync_posts, 0);
    cm_engine_close(b);
    proc_stop(&p, SIGKILL, 5000);
    fake_batch_release(t.fb);
    b = NULL;
    EXPECT_INT(cm_engine_open(&o, &b, err, sizeof err), CM_OK);
    EXPECT_INT(cm_engine_sync(b, 0, NULL, NULL, &st, err, sizeof err), CM_OK);
    cm_engine_close(b);
    EXPECT_INT(st.batches_submitted, 0);
    EXPECT_INT(st.batches_completed, 1);
    c = fake_batch_counts_get(t.fb);
    EXPECT_INT(c.uploads, 1);
    EXPECT_INT(c.creates, 1);
    EXPECT_INT(c.sync_posts, 0);
    json_t *s = bt_status(&t);
    EXPECT_INT(vectors_of(s), 4);
    EXPECT_INT(pending_of(s), 0);
    json_decref(s);
    EXPECT_INT(pg_batch_rows("clawmem_embed_batches"), 0);
    EXPECT_INT(pg_batch_rows("clawmem_embed_batch_items"), 0);
    bt_done(&t);
}

/* A pending batch is the agent's rows: `agents delete` removes them with
 * the rest, in its one transaction, and counts them. */
TEST_PG(batch_pg_agents_delete_removes_batch_rows)
{
    bt t;
    bt_init(&t, "openai", ",wait:false");
    fake_batch_plan held = {.hold = true};
    fake_batch_script(t.fb, &held);
    cm_sync_stats st;
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(st.batches_pending, 1);
    EXPECT_INT(pg_batch_rows("clawmem_embed_batches"), 1);
    EXPECT_INT(pg_batch_rows("clawmem_embed_batch_items"), 3); /* 3 distinct texts */
    const char *args[] = {"--workspace", t.ws,     "--config", t.cfg,   "--state-dir", t.state,
                          "agents",      "delete", "main",     "--yes", "--json",      NULL};
    run_result r = run_clawmem(NULL, args);
    EXPECT_INT(r.status, 0);
    json_t *rep = r.out ? json_loads(r.out, 0, NULL) : NULL;
    json_t *gone = json_object_get(rep, "removed");
    EXPECT_INT(json_integer_value(json_object_get(gone, "clawmem_embed_batches")), 1);
    EXPECT_INT(json_integer_value(json_object_get(gone, "clawmem_embed_batch_items")), 3);
    json_decref(rep);
    run_result_release(&r);
    EXPECT_INT(pg_batch_rows("clawmem_embed_batches"), 0);
    EXPECT_INT(pg_batch_rows("clawmem_embed_batch_items"), 0);
    EXPECT_INT(pg_batch_rows("clawmem_chunks"), 0);
    bt_done(&t);
}

/* A database made before the batch tables, synced by a role that may write
 * rows but not add tables: the index works, and batch mode embeds
 * synchronously (saying why) rather than failing the sync. The owner's next
 * open adds the tables. */
TEST_PG(batch_pg_without_the_tables_embeds_synchronously)
{
    bt t;
    bt_init(&t, "openai", ",wait:false");
    EXPECT_INT(psql_num("DO $$BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "
                        "'cm_batchless') THEN EXECUTE 'DROP OWNED BY cm_batchless'; DROP ROLE "
                        "cm_batchless; END IF; END$$; DROP TABLE clawmem_embed_batch_items, "
                        "clawmem_embed_batches; CREATE ROLE cm_batchless LOGIN; GRANT SELECT, "
                        "INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO cm_batchless; "
                        "GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO cm_batchless; SELECT 1"),
               1);
    char overlay[2048];
    snprintf(overlay, sizeof overlay,
             "{agents: {defaults: {memorySearch: {store: {driver: 'postgres', dsn: '%s "
             "user=cm_batchless'}}}}}",
             pg_dsn);
    write_file(t.state, "clawmem.json", overlay);
    cm_sync_stats st;
    EXPECT_INT(bt_sync(&t, 0, &st), CM_OK);
    EXPECT_INT(st.batches_submitted, 0);
    fake_batch_counts c = fake_batch_counts_get(t.fb);
    EXPECT_INT(c.uploads, 0);
    EXPECT(c.sync_posts >= 1);
    json_t *s = bt_status(&t);
    EXPECT_INT(vectors_of(s), 4);
    json_decref(s);
    EXPECT_INT(psql_num("SELECT count(*) FROM pg_class WHERE relname = 'clawmem_embed_batches'"),
               0);
    /* the owner's next open adds them */
    store o;
    char err[512];
    EXPECT_INT(cm_store_open_pg(&o, pg_dsn, "main", "porter", 0, 5000, err, sizeof err), CM_OK);
    cm_store_close(&o);
    EXPECT_INT(psql_num("SELECT count(*) FROM pg_class WHERE relname IN ('clawmem_embed_batches', "
                        "'clawmem_embed_batch_items')"),
               2);
    EXPECT_INT(psql_num("DROP OWNED BY cm_batchless; DROP ROLE cm_batchless; SELECT 1"), 1);
    bt_done(&t);
}
