/*
 * test_pglex.c — the PostgreSQL store's speed work (issue 31): a rebuild
 * lexes keyword text with SQLite's FTS5 tokenizer (the words the SQLite
 * store indexes: stop words kept, porter stems) and records it
 * (clawmem_agents.lexer 1); an agent lexed by the server (an earlier
 * clawmem) is still searched with the server's lexer until it is rebuilt; a
 * search is one round trip (its AND and OR passes one statement, the
 * workspace check answered from a copy). Skipped without the cluster of
 * scripts/pg-test-cluster.sh.
 */
#include "../src/store/store.h"
#include "../src/store/store_pg_int.h"
#include "test.h"

static const char *dsn(void)
{
    const char *d = getenv("CLAWMEM_TEST_PG_DSN");
    return d && *d ? d : NULL;
}

/* The number psql answers to sql, or -1. */
static long lex_psql(const char *sql)
{
    const char *cmd[] = {"psql", dsn(), "-Aqtc", sql, NULL};
    run_result k = run_cmd(NULL, cmd);
    char *end = NULL;
    long v = k.status == 0 && k.out ? strtol(k.out, &end, 10) : -1;
    if (end == k.out) v = -1;
    run_result_release(&k);
    return v;
}

/* Replaces agent's index with one file holding text (porter), as a rebuild. */
static cm_rc lex_fill(const char *agent, const char *text)
{
    store s;
    char err[256];
    cm_rc rc = cm_store_open_pg(&s, dsn(), agent, "porter", STORE_CREATE, 5000, err, sizeof err);
    if (rc) return rc;
    rc = cm_store_pg_rebuild_begin(&s, "porter", err, sizeof err);
    chunk_list l = {0};
    if (!rc) rc = cm_chunk_text(text, strlen(text), 400, 80, &l);
    if (!rc)
        rc = cm_store_file_replace(&s, "memory/birds.md", "memory", "h", 1, (int64_t)strlen(text),
                                   NULL, &l, err, sizeof err);
    cm_chunk_list_release(&l);
    if (!rc) rc = cm_store_meta_set(&s, STORE_META_KEY, "{\"workspace\":\"/w\"}", err, sizeof err);
    if (!rc) rc = cm_store_commit(&s, err, sizeof err);
    if (rc) fprintf(stderr, "  fill %s: %s\n", agent, err);
    cm_store_close(&s);
    return rc;
}

/* The hits of match (an FTS5 expression) in agent's index; -1 on error. */
static long lex_hits(const char *agent, const char *match)
{
    store s;
    char err[256];
    fts_hits h = {0};
    if (cm_store_open_pg(&s, dsn(), agent, "porter", 0, 5000, err, sizeof err)) return -1;
    long n = cm_store_fts_search(&s, match, NULL, 10, &h, err, sizeof err) ? -1 : (long)h.n;
    if (n < 0) fprintf(stderr, "  search %s: %s\n", match, err);
    cm_fts_hits_release(&h);
    cm_store_close(&s);
    return n;
}

static const char birds[] = "# Birds\n\nThe falcons were flying over the harbour at dawn.\n";

TEST(pglex_rebuild_lexes_with_the_sqlite_tokenizer)
{
    if (!dsn()) SKIP("postgres", "no PostgreSQL cluster (CLAWMEM_TEST_PG_DSN)");
    EXPECT_INT(lex_fill("lex-a", birds), CM_OK);
    EXPECT_INT(lex_psql("SELECT lexer FROM clawmem_agents WHERE agent_id = 'lex-a'"), 1);
    /* porter's stems, and the stop words FTS5 keeps (english drops "the", "over") */
    EXPECT_INT(lex_psql("SELECT count(*) FROM clawmem_chunks WHERE agent_id = 'lex-a' AND tsv @@ "
                        "'falcon & harbour & the & over'::tsquery"),
               1);
    /* the token count is FTS5's: every word of the heading and the line */
    EXPECT_INT(lex_psql("SELECT ntok FROM clawmem_chunks WHERE agent_id = 'lex-a'"), 10);
    EXPECT_INT(lex_hits("lex-a", "\"falcon\" AND \"flew\""), 0);
    EXPECT_INT(lex_hits("lex-a", "\"falcons\" AND \"the\""), 1);
    EXPECT_INT(lex_hits("lex-a", "\"harbour at\""), 1); /* a phrase */
    EXPECT_INT(lex_hits("lex-a", "\"at harbour\""), 0);
    EXPECT_INT(lex_hits("lex-a", "\"harb\"*"), 1); /* a prefix */
    EXPECT_INT(lex_hits("lex-a", "\"falcons\" NOT \"dawn\""), 0);
}

/* An agent whose rows an earlier clawmem wrote (the server's to_tsvector,
 * lexer 0) is searched through the server's lexer until a rebuild. */
TEST(pglex_server_lexed_agent_searched_as_before_until_rebuilt)
{
    if (!dsn()) SKIP("postgres", "no PostgreSQL cluster (CLAWMEM_TEST_PG_DSN)");
    EXPECT_INT(lex_fill("lex-b", birds), CM_OK);
    EXPECT_INT(lex_psql("WITH a AS (UPDATE clawmem_agents SET lexer = 0 WHERE agent_id = 'lex-b' "
                        "RETURNING 1), c AS (UPDATE clawmem_chunks SET tsv = "
                        "to_tsvector('english', text) WHERE agent_id = 'lex-b' RETURNING 1) "
                        "SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM c)"),
               2);
    EXPECT_INT(lex_hits("lex-b", "\"falcons\" AND \"flying\""), 1); /* Snowball's stems */
    EXPECT_INT(lex_hits("lex-b", "\"the\""), 0);                    /* english drops it */
    EXPECT_INT(lex_fill("lex-b", birds), CM_OK);
    EXPECT_INT(lex_psql("SELECT lexer FROM clawmem_agents WHERE agent_id = 'lex-b'"), 1);
    EXPECT_INT(lex_hits("lex-b", "\"the\""), 1);
}

/* A warm search is one statement: the AND query and its OR fallback
 * together, the workspace check from the copy read at the same version;
 * the version the search read serves the vector side's check. */
TEST(pglex_search_is_one_round_trip)
{
    if (!dsn()) SKIP("postgres", "no PostgreSQL cluster (CLAWMEM_TEST_PG_DSN)");
    EXPECT_INT(lex_fill("lex-c", birds), CM_OK);
    store s;
    char err[256];
    EXPECT_INT(cm_store_open_pg(&s, dsn(), "lex-c", "porter", 0, 5000, err, sizeof err), CM_OK);
    char *meta = NULL;
    EXPECT_INT(cm_store_meta_get_recent(&s, STORE_META_KEY, &meta, err, sizeof err), CM_OK);
    EXPECT_STR(meta, "{\"workspace\":\"/w\"}");
    free(meta);
    fts_hits h = {0};
    bool used_or = false;
    /* no chunk has both words: the OR pass answers, in the same statement
     * (the first search also prepares it) */
    EXPECT_INT(cm_store_fts_search_and_or(&s, "\"falcons\" AND \"eagles\"", NULL,
                                          "\"falcons\" OR \"eagles\"", NULL, 6, &h, &used_or, err,
                                          sizeof err),
               CM_OK);
    EXPECT_INT(h.n, 1);
    EXPECT(used_or);
    cm_fts_hits_release(&h);
    uint64_t before = cm_store_pg_round_trips(&s);
    /* enough AND hits: the AND pass answers */
    EXPECT_INT(cm_store_fts_search_and_or(&s, "\"falcons\" AND \"dawn\"", NULL,
                                          "\"falcons\" OR \"dawn\"", NULL, 1, &h, &used_or, err,
                                          sizeof err),
               CM_OK);
    EXPECT_INT(h.n, 1);
    EXPECT(!used_or);
    cm_fts_hits_release(&h);
    int64_t v = cm_store_data_version(&s); /* the search's: no statement */
    EXPECT(v > 0);
    EXPECT_INT(cm_store_meta_get_recent(&s, STORE_META_KEY, &meta, err, sizeof err), CM_OK);
    EXPECT_STR(meta, "{\"workspace\":\"/w\"}");
    free(meta);
    EXPECT_INT(cm_store_pg_round_trips(&s) - before, 1);
    /* another writer: the next search sees the new version, the copy goes */
    EXPECT_INT(lex_psql("WITH u AS (UPDATE clawmem_meta SET value = '{\"workspace\":\"/x\"}' WHERE "
                        "agent_id = 'lex-c' AND key = 'memory_index_meta_v1' RETURNING 1), a AS "
                        "(UPDATE clawmem_agents SET version = version + 1 WHERE agent_id = "
                        "'lex-c' RETURNING 1) SELECT (SELECT count(*) FROM u) + (SELECT count(*) "
                        "FROM a)"),
               2);
    EXPECT_INT(cm_store_fts_search_and_or(&s, "\"dawn\"", NULL, NULL, NULL, 6, &h, &used_or, err,
                                          sizeof err),
               CM_OK);
    cm_fts_hits_release(&h);
    EXPECT_INT(cm_store_meta_get_recent(&s, STORE_META_KEY, &meta, err, sizeof err), CM_OK);
    EXPECT_STR(meta, "{\"workspace\":\"/x\"}");
    free(meta);
    cm_store_close(&s);
}

/* A chunk's tsvector literal names each lexeme once, sorted, with its
 * distinct positions (the first 256), so the server parses each lexeme
 * once: the tsvector is the one the server makes of one entry per token. */
TEST(pglex_literal_names_each_lexeme_once)
{
    if (!dsn()) SKIP("postgres", "no PostgreSQL cluster (CLAWMEM_TEST_PG_DSN)");
    EXPECT_INT(lex_fill("lex-d", birds), CM_OK);
    store s;
    char err[256];
    EXPECT_INT(cm_store_open_pg(&s, dsn(), "lex-d", "porter", 0, 5000, err, sizeof err), CM_OK);
    EXPECT_INT(cm_store_pg_lex_open(&s, "porter", err, sizeof err), CM_OK);
    buf out = BUF_INIT, many = BUF_INIT, sql = BUF_INIT;
    int64_t ntok = 0;
    static const char dogs[] = "dog cats dog a dog";
    EXPECT_INT(cm_store_pg_lex_doc(&s, dogs, strlen(dogs), &out, &ntok), CM_OK);
    EXPECT_STR(out.data, "'a':4 'cat':2 'dog':1,3,5");
    EXPECT_INT(ntok, 5);
    /* 300 of one word: the first 256 positions, as the server keeps them */
    for (int i = 0; i < 300; i++)
        EXPECT_INT(cm_buf_adds(&many, i % 2 ? "owl " : "owl hoot "), CM_OK);
    EXPECT_INT(cm_store_pg_lex_doc(&s, many.data, many.len, &out, &ntok), CM_OK);
    EXPECT_INT(ntok, 450);
    EXPECT_INT(cm_buf_printf(&sql, "SELECT (SELECT count(*) FROM unnest($q$%s$q$::tsvector) u WHERE "
                                   "cardinality(u.positions) = 256) + CASE WHEN $q$%s$q$::tsvector = "
                                   "(SELECT string_agg('''' || w || ''':' || n, ' ') FROM "
                                   "regexp_split_to_table(rtrim($q$%s$q$), ' ') WITH ORDINALITY AS "
                                   "t(w, n))::tsvector THEN 10 ELSE 0 END",
                             out.data, out.data, many.data),
               CM_OK);
    /* owl: 256 positions of its 300; hoot: 150; the same as one entry a token */
    EXPECT_INT(lex_psql(sql.data), 11);
    cm_buf_release(&out);
    cm_buf_release(&many);
    cm_buf_release(&sql);
    cm_store_close(&s);
}
