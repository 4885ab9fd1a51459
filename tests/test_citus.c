/*
 * test_citus.c — the Citus statements of docs/postgresql.md ("### Citus",
 * its first ```sql block) against the private cluster: every clawmem table
 * is distributed by agent_id and colocated with clawmem_agents, and the
 * statements parse and name real tables and columns (against a stand-in
 * create_distributed_table with Citus's parameter names, in a transaction
 * rolled back). With the citus extension loaded they run for real (rolled
 * back); without it that test skips and says so.
 */
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/store/store.h"
#include "../src/store/store_pg_shared.h"
#include "test.h"

#define TEST_PGC(name)                                                                             \
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

/* The first ```sql block after "### Citus" in docs/postgresql.md (malloc'd). */
static char *citus_sql(void)
{
    buf doc = BUF_INIT;
    char err[256], *out = NULL;
    if (cm_fs_read_file_follow("docs/postgresql.md", 1u << 20, &doc, err, sizeof err) != CM_OK)
        return NULL;
    const char *h = strstr(doc.data, "\n### Citus\n");
    const char *a = h ? strstr(h, "```sql\n") : NULL;
    const char *b = a ? strstr(a + 7, "```") : NULL;
    if (b) out = cm_strndup(a + 7, (size_t)(b - (a + 7)));
    cm_buf_release(&doc);
    return out;
}

/* The tables exist (an index, and the sessions table of replicas). */
static bool make_tables(void)
{
    store s;
    char err[256];
    if (cm_store_open_pg(&s, pg_dsn, "citus_probe", "porter", STORE_CREATE, 5000, err,
                         sizeof err) != CM_OK)
        return false;
    cm_store_close(&s);
    cm_pg_shared *sh = NULL;
    if (cm_pg_shared_open(pg_dsn, &sh, err, sizeof err) != CM_OK) return false;
    cm_pg_shared_free(sh);
    return true;
}

/* psql runs script (ON_ERROR_STOP); its exit status, stderr in *why. */
static int psql_script(const char *dir, const char *script, char **why)
{
    write_file(dir, "script.sql", script);
    const char *cmd[] = {
        "psql", pg_dsn, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", path_in(dir, "script.sql"),
        NULL};
    run_result k = run_cmd(NULL, cmd);
    int st = k.status;
    *why = k.err ? cm_strdup(k.err) : NULL;
    run_result_release(&k);
    return st;
}

TEST_PGC(pg_citus_statements_cover_every_table_and_parse)
{
    char *sql = citus_sql();
    EXPECT(sql != NULL);
    if (!sql) return;
    EXPECT(make_tables());
    /* every table clawmem makes (serve's sessions among them), distributed
     * by agent_id, colocated */
    for (size_t i = 0; i < STORE_PG_NTABLES; i++) {
        const char *t = cm_store_pg_tables[i];
        char want[128];
        snprintf(want, sizeof want, "create_distributed_table('%s',", t);
        if (!strstr(sql, want)) fprintf(stderr, "  %s is not distributed in the docs\n", t);
        EXPECT(strstr(sql, want) != NULL);
        if (strcmp(t, "clawmem_agents") != 0) {
            snprintf(want, sizeof want, "'%s',", t);
            const char *at = strstr(sql, want);
            const char *eol = at ? strchr(at, '\n') : NULL;
            char line[256] = "";
            if (at && eol) snprintf(line, sizeof line, "%.*s", (int)(eol - at), at);
            EXPECT_CONTAINS(line, "'agent_id', colocate_with => 'clawmem_agents')");
        }
    }
    /* the statements against a stand-in with Citus's signature: each names a
     * table, a column of it and a table to colocate with */
    char *dir = tmp_dir();
    buf script = BUF_INIT;
    char schema[64];
    snprintf(schema, sizeof schema, "citus_syntax_%d", (int)getpid());
    cm_buf_printf(
        &script,
        "BEGIN;\nCREATE SCHEMA %s;\nSET LOCAL search_path = %s, public;\n"
        "CREATE FUNCTION %s.create_distributed_table(table_name regclass, distribution_column "
        "text, distribution_type text DEFAULT 'hash', colocate_with text DEFAULT 'default', "
        "shard_count int DEFAULT NULL) RETURNS void LANGUAGE plpgsql AS $f$\nBEGIN\n"
        "  PERFORM 1 FROM pg_attribute WHERE attrelid = table_name AND attname = "
        "distribution_column AND NOT attisdropped;\n"
        "  IF NOT FOUND THEN RAISE EXCEPTION 'no column %% in %%', distribution_column, "
        "table_name; END IF;\n"
        "  IF colocate_with <> 'default' THEN PERFORM colocate_with::regclass; END IF;\n"
        "  PERFORM 1 FROM pg_index WHERE indrelid = table_name AND indisprimary AND "
        "(SELECT attnum FROM pg_attribute WHERE attrelid = table_name AND attname = "
        "distribution_column) = ANY (indkey);\n"
        "  IF NOT FOUND THEN RAISE EXCEPTION '%% has no primary key with %%', table_name, "
        "distribution_column; END IF;\nEND $f$;\n%s\nROLLBACK;\n",
        schema, schema, schema, sql);
    char *why = NULL;
    int st = psql_script(dir, script.data, &why);
    if (st != 0) fprintf(stderr, "  psql: %s\n", why ? why : "");
    EXPECT_INT(st, 0);
    /* the stand-in refuses what Citus would: the check has teeth */
    cm_buf_reset(&script);
    cm_buf_printf(&script,
                  "BEGIN;\nCREATE SCHEMA %s;\nSET LOCAL search_path = %s, public;\n"
                  "CREATE FUNCTION %s.create_distributed_table(table_name regclass, "
                  "distribution_column text, distribution_type text DEFAULT 'hash', "
                  "colocate_with text DEFAULT 'default', shard_count int DEFAULT NULL) RETURNS "
                  "void LANGUAGE plpgsql AS $f$ BEGIN PERFORM 1 FROM pg_attribute WHERE attrelid "
                  "= table_name AND attname = distribution_column; IF NOT FOUND THEN RAISE "
                  "EXCEPTION 'no column'; END IF; END $f$;\n"
                  "SELECT create_distributed_table('clawmem_chunks', 'agentid', colocate_with => "
                  "'clawmem_agents');\nROLLBACK;\n",
                  schema, schema, schema);
    free(why);
    why = NULL;
    EXPECT(psql_script(dir, script.data, &why) != 0);
    free(why);
    cm_buf_release(&script);
    free(sql);
}

TEST_PGC(pg_citus_statements_run_with_the_extension)
{
    const char *probe[] = {"psql", pg_dsn, "-XAqtc",
                           "SELECT count(*) FROM pg_extension WHERE extname = 'citus'", NULL};
    run_result k = run_cmd(NULL, probe);
    bool have = k.status == 0 && k.out && k.out[0] == '1';
    run_result_release(&k);
    if (!have)
        SKIP("citus", "the citus extension is not loaded in the test cluster: the statements "
                      "were checked against a stand-in only (pg_citus_statements_cover_every_"
                      "table_and_parse)");
    char *sql = citus_sql();
    EXPECT(sql != NULL);
    EXPECT(make_tables());
    char *dir = tmp_dir();
    buf script = BUF_INIT;
    cm_buf_printf(&script, "BEGIN;\n%s\nROLLBACK;\n", sql ? sql : "");
    char *why = NULL;
    int st = psql_script(dir, script.data, &why);
    if (st != 0) fprintf(stderr, "  psql: %s\n", why ? why : "");
    EXPECT_INT(st, 0);
    free(why);
    cm_buf_release(&script);
    free(sql);
}
