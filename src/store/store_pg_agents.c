/*
 * store_pg_agents.c — the agents of a PostgreSQL index as a whole, for
 * `clawmem agents list|delete` and `index --drop`: which agents have rows in
 * which table (embedding batches waiting at the provider among them), and
 * the removal of every row of one agent in one transaction
 * under its write lock (the advisory lock every writer takes), so a writer
 * of that agent on another host either finishes first or finds nothing.
 */
#include "store_pg_int.h"

const char *const cm_store_pg_tables[STORE_PG_NTABLES] = {
    "clawmem_agents",       "clawmem_meta",          "clawmem_files",
    "clawmem_chunks",       "clawmem_vectors",       "clawmem_vector_log",
    "clawmem_cache",        "clawmem_embed_batches", "clawmem_embed_batch_items",
    "clawmem_mcp_sessions",
};

/* The vector log's and the batch tables' indexes in cm_store_pg_tables:
 * absent from a database made by an older clawmem (until an open that may
 * add them); serve's sessions table: absent until a replica over this
 * database kept a session. */
#define LOG_TABLE      5
#define BATCHES_TABLE  7
#define ITEMS_TABLE    8
#define SESSIONS_TABLE 9

/* Whether the database has serve's sessions table. */
static cm_rc has_sessions(store *s, bool *has, char *err, size_t errlen)
{
    PGresult *r = NULL;
    cm_rc rc = cm_store_pg_run(s, "SELECT to_regclass('clawmem_mcp_sessions') IS NOT NULL", 0,
                               NULL, "read the schema", &r, err, errlen);
    *has = !rc && cm_store_pg_lib.getvalue(r, 0, 0)[0] == 't';
    if (r) cm_store_pg_lib.clear(r);
    return rc;
}

/* Whether table k of cm_store_pg_tables is in this database. */
static bool table_there(const store *s, size_t k, bool sessions)
{
    return (k != LOG_TABLE || s->pg->has_log) && (k != SESSIONS_TABLE || sessions) &&
           ((k != BATCHES_TABLE && k != ITEMS_TABLE) || s->pg->has_batches);
}

cm_rc cm_store_pg_drop_counted(store *s, int64_t rows[STORE_PG_NTABLES], char *err, size_t errlen)
{
    if (!s->pg) return cm_seterr(err, errlen, CM_EINVAL, "not a postgres index");
    for (size_t i = 0; i < STORE_PG_NTABLES; i++)
        rows[i] = 0;
    cm_rc rc = cm_store_pg_begin(s, err, errlen);
    if (rc) return rc;
    bool sessions = false;
    rc = has_sessions(s, &sessions, err, errlen);
    const char *pa[] = {s->pg->agent};
    /* children first (serve's sessions among them: a session of a deleted
     * agent would let its client go on; the batches' items before the
     * batches), the agent's row (its version) last */
    for (size_t k = STORE_PG_NTABLES; !rc && k-- > 0;) {
        if (!table_there(s, k, sessions)) continue;
        char sql[160];
        snprintf(sql, sizeof sql,
                 "WITH d AS (DELETE FROM %s WHERE agent_id = $1 RETURNING 1) SELECT count(*) "
                 "FROM d",
                 cm_store_pg_tables[k]);
        PGresult *r = NULL;
        rc = cm_store_pg_run(s, sql, 1, pa, "delete the agent", &r, err, errlen);
        if (!rc) {
            rows[k] = strtoll(cm_store_pg_lib.getvalue(r, 0, 0), NULL, 10);
            cm_store_pg_lib.clear(r);
        }
    }
    s->pg->dirty = false; /* its version row is gone: nothing to bump */
    if (rc) {
        cm_store_pg_rollback(s);
        return rc;
    }
    return cm_store_pg_commit(s, err, errlen);
}

cm_rc cm_store_drop_agent(store *s, char *err, size_t errlen)
{
    int64_t rows[STORE_PG_NTABLES];
    return cm_store_pg_drop_counted(s, rows, err, errlen);
}

void cm_store_pg_agents_release(store_pg_agent *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i].id);
    free(v);
}

cm_rc cm_store_pg_agents(store *s, store_pg_agent **out, size_t *n, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf sql = BUF_INIT;
    PGresult *r = NULL;
    *out = NULL;
    *n = 0;
    if (!s->pg) return cm_seterr(err, errlen, CM_EINVAL, "not a postgres index");
    bool sessions = false;
    CHECK(has_sessions(s, &sessions, err, errlen));
    /* one row per (agent, table) with rows, pivoted here */
    for (size_t k = 0; k < STORE_PG_NTABLES; k++) {
        if (!table_there(s, k, sessions)) continue;
        CHECK(cm_buf_printf(&sql,
                            "%sSELECT agent_id, %zu AS k, count(*) AS n FROM %s GROUP BY "
                            "agent_id",
                            sql.len ? " UNION ALL " : "SELECT * FROM (", k, cm_store_pg_tables[k]));
    }
    CHECK(cm_buf_adds(&sql, ") u ORDER BY agent_id COLLATE \"C\", k"));
    CHECK(cm_store_pg_run(s, sql.data, 0, NULL, "list the agents", &r, err, errlen));
    int nt = cm_store_pg_lib.ntuples(r);
    if (nt && !(*out = calloc((size_t)nt, sizeof **out))) FAIL(CM_ENOMEM, "out of memory");
    for (int i = 0; i < nt; i++) {
        const char *id = cm_store_pg_lib.getvalue(r, i, 0);
        if (!*n || strcmp((*out)[*n - 1].id, id) != 0) {
            if (!((*out)[*n].id = cm_strdup(id))) FAIL(CM_ENOMEM, "out of memory");
            (*n)++;
        }
        long k = strtol(cm_store_pg_lib.getvalue(r, i, 1), NULL, 10);
        if (k >= 0 && k < STORE_PG_NTABLES)
            (*out)[*n - 1].rows[k] = strtoll(cm_store_pg_lib.getvalue(r, i, 2), NULL, 10);
    }
out:
    if (r) cm_store_pg_lib.clear(r);
    cm_buf_release(&sql);
    if (rc) {
        cm_store_pg_agents_release(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}
