/*
 * test_pgcopy.c — the PostgreSQL store's speed work, third round (issue 31):
 * a rebuild lexed in this process streams its chunks to the server in one
 * COPY (binary), and what it stores is what the statements of any other
 * write store (the same tsvectors, token counts, texts and totals). Skipped
 * without the cluster of scripts/pg-test-cluster.sh.
 */
#include "../src/store/store.h"
#include "../src/store/store_pg_int.h"
#include "test.h"

static const char *copy_dsn(void)
{
    const char *d = getenv("CLAWMEM_TEST_PG_DSN");
    return d && *d ? d : NULL;
}

/* psql's answer to sql (trimmed) into out; whether it ran. */
static bool copy_psql(const char *sql, char *out, size_t cap)
{
    const char *cmd[] = {"psql", copy_dsn(), "-Aqtc", sql, NULL};
    run_result k = run_cmd(NULL, cmd);
    bool ok = k.status == 0 && k.out;
    snprintf(out, cap, "%s", ok ? k.out : "");
    out[strcspn(out, "\n")] = 0;
    run_result_release(&k);
    return ok;
}

static void copy_drop(const char *agent)
{
    store s;
    char err[256];
    if (cm_store_open_pg(&s, copy_dsn(), agent, "porter", STORE_CREATE, 5000, err, sizeof err) ==
        CM_OK) {
        cm_store_drop_agent(&s, err, sizeof err);
        cm_store_close(&s);
    }
}

enum { COPY_NF = 1100 };

/* File i's text: words that vary, quotes and backslashes, non-ASCII, a NUL
 * byte (file 5), a word repeated past 256 positions (file 3) and a text
 * past position 16383 (file 4). *len its length. */
static char *copy_text(int i, size_t *len)
{
    buf b = BUF_INIT;
    static const char *const words[] = {"heron", "lake's", "north\\tide",
                                        "stone", "Ämber",  "naïve"};
    cm_rc rc = cm_buf_printf(&b, "note %d about the %s and \"the\" %s\nword%d café\n", i,
                             words[i % 6], words[(i / 6) % 6], i);
    for (int k = 0; !rc && i == 3 && k < 300; k++)
        rc = cm_buf_adds(&b, "again ");
    for (int k = 0; !rc && i == 4 && k < 17000; k++)
        rc = cm_buf_printf(&b, "w%d ", k % 50);
    if (!rc && i == 5) rc = cm_buf_add(&b, "nul\0here\n", 9);
    *len = b.len;
    return rc ? (cm_buf_release(&b), NULL) : cm_buf_detach(&b);
}

static cm_rc copy_file(store *s, int i, char *err, size_t errlen)
{
    char path[32];
    size_t len = 0;
    snprintf(path, sizeof path, "memory/f%04d.md", i);
    char *t = copy_text(i, &len);
    if (!t) return CM_ENOMEM;
    chunk_list l = {0};
    /* files 3 and 4 one chunk each: its positions past 256 and 16383 */
    cm_rc rc = cm_chunk_text(t, len, i == 3 || i == 4 ? 40000 : 400, 80, &l);
    if (!rc)
        rc = cm_store_file_replace(s, path, "memory", "h", 1, (int64_t)len, NULL, &l, err, errlen);
    cm_chunk_list_release(&l);
    free(t);
    return rc;
}

/* One agent rebuilt (its chunks by COPY), another rebuilt empty and then
 * written file by file (the statements of an incremental sync): the same
 * rows and totals. The rebuild's files go in one COPY: one statement while
 * they are written (the batch inserts made one per 512 files). */
TEST(pgcopy_rebuild_stores_what_the_statements_store)
{
    if (!copy_dsn()) SKIP("postgres", "no PostgreSQL cluster (CLAWMEM_TEST_PG_DSN)");
    store s;
    char err[256];
    copy_drop("copy-a");
    copy_drop("copy-b");
    EXPECT_INT(
        cm_store_open_pg(&s, copy_dsn(), "copy-a", "porter", STORE_CREATE, 5000, err, sizeof err),
        CM_OK);
    EXPECT_INT(cm_store_pg_rebuild_begin(&s, "porter", err, sizeof err), CM_OK);
    uint64_t before = cm_store_pg_round_trips(&s);
    for (int i = 0; i < COPY_NF; i++)
        EXPECT_INT(copy_file(&s, i, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_pg_round_trips(&s) - before, 1);
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    cm_store_close(&s);

    EXPECT_INT(
        cm_store_open_pg(&s, copy_dsn(), "copy-b", "porter", STORE_CREATE, 5000, err, sizeof err),
        CM_OK);
    EXPECT_INT(cm_store_pg_rebuild_begin(&s, "porter", err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_begin(&s, err, sizeof err), CM_OK);
    for (int i = 0; i < COPY_NF; i++)
        EXPECT_INT(copy_file(&s, i, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    cm_store_close(&s);

    /* each aggregate the same for both agents: one distinct value of two */
    static const char *const sums[] = {
        "SELECT count(DISTINCT v) || ':' || count(*) FROM (SELECT count(*) || ':' || "
        "md5(string_agg(path || start_line || ':' || end_line || ':' || tsv::text || ':' || ntok "
        "|| ':' || text, '|' ORDER BY id)) AS v FROM clawmem_chunks WHERE agent_id IN ('copy-a', "
        "'copy-b') GROUP BY agent_id) x",
        "SELECT count(DISTINCT v) || ':' || count(*) FROM (SELECT nchunks || ':' || ntok || ':' "
        "|| lexer AS v FROM clawmem_agents WHERE agent_id IN ('copy-a', 'copy-b')) x",
        "SELECT count(DISTINCT v) || ':' || count(*) FROM (SELECT count(*) || ':' || "
        "md5(string_agg(path || hash || mtime || size, '|' ORDER BY path)) AS v FROM "
        "clawmem_files WHERE agent_id IN ('copy-a', 'copy-b') GROUP BY agent_id) x",
    };
    for (size_t q = 0; q < ARRAY_LEN(sums); q++) {
        char v[256];
        EXPECT(copy_psql(sums[q], v, sizeof v));
        EXPECT_STR(v, "1:2");
    }
    char v[256];
    EXPECT(copy_psql("SELECT nchunks >= 1100 AND lexer = 1 FROM clawmem_agents WHERE agent_id = "
                     "'copy-a'",
                     v, sizeof v));
    EXPECT_STR(v, "t");
    /* the rows are there: ids in file order, the long texts' positions */
    EXPECT(copy_psql("SELECT count(*) FROM clawmem_chunks WHERE agent_id = 'copy-a' AND tsv @@ "
                     "'again'::tsquery",
                     v, sizeof v));
    EXPECT_STR(v, "1");
    EXPECT(copy_psql("SELECT max(ntok) > 16383 FROM clawmem_chunks WHERE agent_id = 'copy-a'", v,
                     sizeof v));
    EXPECT_STR(v, "t");
    EXPECT(copy_psql("SELECT (SELECT path FROM clawmem_chunks WHERE agent_id = 'copy-a' ORDER BY "
                     "id LIMIT 1) || (SELECT path FROM clawmem_chunks WHERE agent_id = 'copy-a' "
                     "ORDER BY id DESC LIMIT 1)",
                     v, sizeof v));
    EXPECT_STR(v, "memory/f0000.mdmemory/f1099.md");
    copy_drop("copy-a");
    copy_drop("copy-b");
}

/* A rebuild that fails while its COPY is open leaves the agent as it was,
 * and the connection serves the next statement. */
TEST(pgcopy_rolled_back_rebuild_leaves_the_agent)
{
    if (!copy_dsn()) SKIP("postgres", "no PostgreSQL cluster (CLAWMEM_TEST_PG_DSN)");
    store s;
    char err[256];
    copy_drop("copy-r");
    EXPECT_INT(
        cm_store_open_pg(&s, copy_dsn(), "copy-r", "porter", STORE_CREATE, 5000, err, sizeof err),
        CM_OK);
    EXPECT_INT(cm_store_pg_rebuild_begin(&s, "porter", err, sizeof err), CM_OK);
    for (int i = 0; i < 3; i++)
        EXPECT_INT(copy_file(&s, i, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_pg_rebuild_begin(&s, "porter", err, sizeof err), CM_OK);
    for (int i = 0; i < 10; i++)
        EXPECT_INT(copy_file(&s, i, err, sizeof err), CM_OK);
    EXPECT(s.pg->copying);
    cm_store_rollback(&s);
    EXPECT(!s.pg->copying);
    int64_t f = 0, c = 0;
    EXPECT_INT(cm_store_counts(&s, &f, &c, err, sizeof err), CM_OK);
    EXPECT_INT(f, 3);
    EXPECT_INT(c, 3);
    cm_store_close(&s);
    copy_drop("copy-r");
}

/* A rebuild of many chunks analyzes the chunks' size and agent_id, not the
 * keyword text (whose statistics no search plan uses, and which took most
 * of a second of a tldr rebuild). Autovacuum is held off the table while
 * the statistics are looked at. */
TEST(pgcopy_rebuild_analyzes_without_the_keyword_text)
{
    if (!copy_dsn()) SKIP("postgres", "no PostgreSQL cluster (CLAWMEM_TEST_PG_DSN)");
    store s;
    char err[256], v[256];
    copy_drop("copy-s");
    EXPECT(copy_psql("ALTER TABLE clawmem_chunks SET (autovacuum_enabled = false); DELETE FROM "
                     "pg_statistic WHERE starelid = 'clawmem_chunks'::regclass; SELECT 1",
                     v, sizeof v));
    EXPECT_INT(
        cm_store_open_pg(&s, copy_dsn(), "copy-s", "porter", STORE_CREATE, 5000, err, sizeof err),
        CM_OK);
    EXPECT_INT(cm_store_pg_rebuild_begin(&s, "porter", err, sizeof err), CM_OK);
    for (int i = 0; i < COPY_NF; i++)
        EXPECT_INT(copy_file(&s, i, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    cm_store_close(&s);
    EXPECT(copy_psql("SELECT count(*) FILTER (WHERE attname = 'agent_id') || ':' || count(*) "
                     "FILTER (WHERE attname = 'tsv') || ':' || (SELECT reltuples >= 1100 FROM "
                     "pg_class WHERE oid = 'clawmem_chunks'::regclass) FROM pg_stats WHERE "
                     "tablename = 'clawmem_chunks'",
                     v, sizeof v));
    EXPECT_STR(v, "1:0:true");
    EXPECT(
        copy_psql("ALTER TABLE clawmem_chunks RESET (autovacuum_enabled); SELECT 1", v, sizeof v));
    copy_drop("copy-s");
}

/* A rebuild large enough to send its COPY in several pieces merges the
 * keyword index's pending list on a second connection while it copies
 * (started at least once), and what the merger has not merged the commit
 * does: afterwards the list is empty and every file's own word is found. */
TEST(pgcopy_rebuild_merges_pending_list_beside_the_copy)
{
    if (!copy_dsn()) SKIP("postgres", "no PostgreSQL cluster (CLAWMEM_TEST_PG_DSN)");
    enum { NF = 6000 };
    store s;
    char err[256], v[64];
    copy_drop("copy-m");
    EXPECT_INT(
        cm_store_open_pg(&s, copy_dsn(), "copy-m", "porter", STORE_CREATE, 5000, err, sizeof err),
        CM_OK);
    EXPECT_INT(cm_store_pg_rebuild_begin(&s, "porter", err, sizeof err), CM_OK);
    for (int i = 0; i < NF; i++) {
        buf b = BUF_INIT;
        EXPECT_INT(cm_buf_printf(&b, "entry %d holds uniq%d", i, i), CM_OK);
        for (int k = 0; k < 40; k++) /* about 450 bytes: the COPY goes in 1 MB pieces */
            EXPECT_INT(cm_buf_printf(&b, " common%d", (i + k) % 97), CM_OK);
        char path[32];
        snprintf(path, sizeof path, "memory/m%04d.md", i);
        chunk_list l = {0};
        EXPECT_INT(cm_chunk_text(b.data, b.len, 4000, 0, &l), CM_OK);
        EXPECT_INT(
            cm_store_file_replace(&s, path, "memory", "h", 1, (int64_t)b.len, NULL, &l, err,
                                  sizeof err),
            CM_OK);
        cm_chunk_list_release(&l);
        cm_buf_release(&b);
    }
    EXPECT_INT(cm_store_commit(&s, err, sizeof err), CM_OK);
    EXPECT(cm_store_pg_merges_aside(&s) >= 1);
    EXPECT(copy_psql("SELECT gin_clean_pending_list('clawmem_chunks_tsv'::regclass)", v,
                     sizeof v));
    EXPECT_STR(v, "0");
    static const char *const q[] = {"\"uniq0\"", "\"uniq2999\"", "\"uniq5999\""};
    for (size_t i = 0; i < ARRAY_LEN(q); i++) {
        fts_hits h = {0};
        EXPECT_INT(cm_store_fts_search(&s, q[i], NULL, 5, &h, err, sizeof err), CM_OK);
        EXPECT_INT(h.n, 1);
        cm_fts_hits_release(&h);
    }
    cm_store_close(&s);
    copy_drop("copy-m");
}
