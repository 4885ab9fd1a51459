/*
 * store_pg_shared.c — the state `clawmem serve` replicas share in
 * PostgreSQL beside the index (store_pg_shared.h): the MCP sessions table
 * and the per-agent watcher lease. Uses store_pg.c's libpq (dlopen'd).
 *
 * Every statement names agent_id first, so clawmem_mcp_sessions can be
 * distributed by agent_id and colocated with the index's tables on Citus.
 * A connection taken from the pool is used outside the pool's mutex.
 */
#include <pthread.h>

#include "store_pg_int.h"
#include "store_pg_shared.h"

struct cm_pg_shared {
    char *dsn;
    pthread_mutex_t mu; /* idle, nidle, nopen */
    pthread_cond_t freed;
    PGconn *idle[PG_SHARED_POOL];
    size_t nidle, nopen;
};

struct cm_pg_lease {
    char *dsn, *agent;
    PGconn *conn;
    bool held;
};

/* the same key store_pg.c's schema creation takes: one creator at a time */
static const char create_sql[] =
    "SELECT pg_advisory_xact_lock(7236417707411525);"
    "CREATE TABLE IF NOT EXISTS clawmem_mcp_sessions(agent_id text NOT NULL, id text NOT NULL, "
    "owner text NOT NULL, created_ms bigint NOT NULL, last_ms bigint NOT NULL, expires_ms "
    "bigint NOT NULL, PRIMARY KEY(agent_id, id));";

static void quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message; /* library code never prints */
}

static bool res_ok(const PGresult *r)
{
    ExecStatusType st = r ? cm_store_pg_lib.result_status(r) : PGRES_FATAL_ERROR;
    return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

/* The first line of the server's (or libpq's) message: never the DSN. */
static cm_rc fail(PGconn *c, const PGresult *r, const char *what, char *err, size_t errlen)
{
    const char *m = r ? cm_store_pg_lib.result_error_field(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    if (!m && c) m = cm_store_pg_lib.error_message(c);
    if (!m) m = "no answer from the server";
    return cm_seterr(err, errlen, CM_EIO, "postgres: %s: %.*s", what, (int)strcspn(m, "\n"), m);
}

static cm_rc connect_to(const char *dsn, PGconn **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cm_store_pg_lib_load())
        return cm_seterr(err, errlen, CM_EIO, "postgres: libpq (libpq.so.5) is missing");
    PGconn *c = cm_store_pg_lib.connectdb(dsn);
    if (!c) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    if (cm_store_pg_lib.status(c) != CONNECTION_OK) {
        char m[320];
        cm_store_pg_conn_text(dsn, cm_store_pg_lib.error_message(c), m, sizeof m);
        cm_store_pg_lib.finish(c);
        return cm_seterr(err, errlen, CM_EIO, "postgres: cannot connect: %s", m);
    }
    cm_store_pg_lib.set_notice_processor(c, quiet, NULL);
    *out = c;
    return CM_OK;
}

/* ---- the pool -------------------------------------------------------------- */

static cm_rc take(cm_pg_shared *sh, PGconn **out, char *err, size_t errlen)
{
    PGconn *c = NULL;
    pthread_mutex_lock(&sh->mu);
    while (sh->nidle == 0 && sh->nopen >= PG_SHARED_POOL)
        pthread_cond_wait(&sh->freed, &sh->mu);
    if (sh->nidle)
        c = sh->idle[--sh->nidle];
    else
        sh->nopen++; /* a new one, made outside the lock */
    pthread_mutex_unlock(&sh->mu);
    if (c) {
        *out = c;
        return CM_OK;
    }
    cm_rc rc = connect_to(sh->dsn, out, err, errlen);
    if (rc) {
        pthread_mutex_lock(&sh->mu);
        sh->nopen--;
        pthread_cond_signal(&sh->freed);
        pthread_mutex_unlock(&sh->mu);
    }
    return rc;
}

/* Returns c to the pool, or closes it when it broke. */
static void give(cm_pg_shared *sh, PGconn *c)
{
    bool keep = cm_store_pg_lib.status(c) == CONNECTION_OK;
    pthread_mutex_lock(&sh->mu);
    if (keep)
        sh->idle[sh->nidle++] = c;
    else
        sh->nopen--;
    pthread_cond_signal(&sh->freed);
    pthread_mutex_unlock(&sh->mu);
    if (!keep) cm_store_pg_lib.finish(c);
}

/* Runs sql with n text parameters on a pooled connection (a connection the
 * server dropped is reset and the statement tried once more); *res: the
 * rows, when wanted (the caller clears them). */
static cm_rc run(cm_pg_shared *sh, const char *sql, int n, const char *const *v, const char *what,
                 PGresult **res, char *err, size_t errlen)
{
    PGconn *c = NULL;
    cm_rc rc = take(sh, &c, err, errlen);
    if (rc) return rc;
    PGresult *r = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (r) cm_store_pg_lib.clear(r);
        r = n < 0 ? cm_store_pg_lib.exec(c, sql)
                  : cm_store_pg_lib.exec_params(c, sql, n, NULL, v, NULL, NULL, 0);
        if (res_ok(r) || cm_store_pg_lib.status(c) != CONNECTION_BAD) break;
        cm_store_pg_lib.reset(c);
        if (cm_store_pg_lib.status(c) != CONNECTION_OK) break;
        cm_store_pg_lib.set_notice_processor(c, quiet, NULL);
    }
    if (!res_ok(r)) {
        rc = fail(c, r, what, err, errlen);
        if (r) cm_store_pg_lib.clear(r);
    } else if (res) {
        *res = r;
    } else {
        cm_store_pg_lib.clear(r);
    }
    give(sh, c);
    return rc;
}

cm_rc cm_pg_shared_open(const char *dsn, cm_pg_shared **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    PGresult *r = NULL;
    cm_pg_shared *sh = calloc(1, sizeof *sh);
    *out = NULL;
    if (!sh || !(sh->dsn = cm_strdup(dsn))) {
        free(sh);
        return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&sh->mu, NULL);
    pthread_cond_init(&sh->freed, NULL);
    CHECK(run(sh, "SELECT to_regclass('clawmem_mcp_sessions') IS NOT NULL", 0, NULL,
              "read the schema", &r, err, errlen));
    bool have = cm_store_pg_lib.getvalue(r, 0, 0)[0] == 't';
    cm_store_pg_lib.clear(r);
    r = NULL;
    if (!have) {
        /* one connection for the transaction: BEGIN and COMMIT around the DDL */
        PGconn *c = NULL;
        CHECK(take(sh, &c, err, errlen));
        PGresult *b = cm_store_pg_lib.exec(c, "BEGIN");
        bool ok = res_ok(b);
        if (b) cm_store_pg_lib.clear(b);
        PGresult *d = ok ? cm_store_pg_lib.exec(c, create_sql) : NULL;
        ok = ok && res_ok(d);
        if (!ok) rc = fail(c, d, "create the sessions table", err, errlen);
        if (d) cm_store_pg_lib.clear(d);
        PGresult *e = cm_store_pg_lib.exec(c, ok ? "COMMIT" : "ROLLBACK");
        if (ok && !res_ok(e)) rc = fail(c, e, "create the sessions table", err, errlen);
        if (e) cm_store_pg_lib.clear(e);
        give(sh, c);
        if (rc) goto out;
    }
    *out = sh;
    sh = NULL;
out:
    cm_pg_shared_free(sh);
    return rc;
}

void cm_pg_shared_free(cm_pg_shared *sh)
{
    if (!sh) return;
    for (size_t i = 0; i < sh->nidle; i++)
        cm_store_pg_lib.finish(sh->idle[i]);
    if (sh->dsn) memset(sh->dsn, 0, strlen(sh->dsn)); /* a secret: wiped */
    free(sh->dsn);
    pthread_mutex_destroy(&sh->mu);
    pthread_cond_destroy(&sh->freed);
    free(sh);
}

/* ---- sessions ---------------------------------------------------------------- */

cm_rc cm_pg_session_put(cm_pg_shared *sh, const pg_session_key *k, int64_t now_ms, int64_t idle_ms,
                        int per_owner, int per_agent, char *err, size_t errlen)
{
    char now[32], idle[32], po[16], pa[16];
    snprintf(now, sizeof now, "%lld", (long long)now_ms);
    snprintf(idle, sizeof idle, "%lld", (long long)idle_ms);
    snprintf(po, sizeof po, "%d", per_owner);
    snprintf(pa, sizeof pa, "%d", per_agent);
    const char *v[] = {k->agent, k->id_hash, k->owner, now, idle};
    cm_rc rc = run(sh,
                   "INSERT INTO clawmem_mcp_sessions(agent_id, id, owner, created_ms, last_ms, "
                   "expires_ms) VALUES($1, $2, $3, $4::bigint, $4::bigint, $4::bigint + "
                   "$5::bigint)",
                   5, v, "record the session", NULL, err, errlen);
    const char *ve[] = {k->agent, now};
    if (!rc)
        rc = run(sh,
                 "DELETE FROM clawmem_mcp_sessions WHERE agent_id = $1 AND expires_ms <= "
                 "$2::bigint",
                 2, ve, "drop expired sessions", NULL, err, errlen);
    const char *vo[] = {k->agent, k->owner, po};
    if (!rc)
        rc = run(sh,
                 "DELETE FROM clawmem_mcp_sessions WHERE agent_id = $1 AND id IN (SELECT id FROM "
                 "clawmem_mcp_sessions WHERE agent_id = $1 AND owner = $2 ORDER BY last_ms DESC, "
                 "created_ms DESC OFFSET $3::int)",
                 3, vo, "drop old sessions", NULL, err, errlen);
    const char *vg[] = {k->agent, pa};
    if (!rc)
        rc = run(sh,
                 "DELETE FROM clawmem_mcp_sessions WHERE agent_id = $1 AND id IN (SELECT id FROM "
                 "clawmem_mcp_sessions WHERE agent_id = $1 AND owner = (SELECT owner FROM "
                 "clawmem_mcp_sessions WHERE agent_id = $1 GROUP BY owner ORDER BY count(*) DESC, "
                 "owner LIMIT 1) ORDER BY last_ms, created_ms LIMIT greatest(0, (SELECT count(*) "
                 "FROM clawmem_mcp_sessions WHERE agent_id = $1) - $2::int))",
                 2, vg, "drop old sessions", NULL, err, errlen);
    return rc;
}

cm_rc cm_pg_session_touch(cm_pg_shared *sh, const pg_session_key *k, int64_t now_ms,
                          int64_t idle_ms, bool drop, bool *found, char *err, size_t errlen)
{
    char now[32], idle[32];
    snprintf(now, sizeof now, "%lld", (long long)now_ms);
    snprintf(idle, sizeof idle, "%lld", (long long)idle_ms);
    const char *v[] = {k->agent, k->id_hash, k->owner, now, idle};
    PGresult *r = NULL;
    *found = false;
    /* greatest(): a replica whose clock is behind never shortens a session */
    cm_rc rc = run(sh,
                   drop ? "DELETE FROM clawmem_mcp_sessions WHERE agent_id = $1 AND id = $2 AND "
                          "owner = $3 AND expires_ms > $4::bigint RETURNING 1"
                        : "UPDATE clawmem_mcp_sessions SET last_ms = greatest(last_ms, "
                          "$4::bigint), expires_ms = greatest(expires_ms, $4::bigint + "
                          "$5::bigint) WHERE agent_id = $1 AND id = $2 AND owner = $3 AND "
                          "expires_ms > $4::bigint RETURNING 1",
                   drop ? 4 : 5, v, "use the session", &r, err, errlen);
    if (rc) return rc;
    *found = cm_store_pg_lib.ntuples(r) > 0;
    cm_store_pg_lib.clear(r);
    return CM_OK;
}

/* ---- the watcher lease ------------------------------------------------------- */

cm_rc cm_pg_lease_new(const char *dsn, const char *agent, cm_pg_lease **out, char *err,
                      size_t errlen)
{
    cm_pg_lease *l = calloc(1, sizeof *l);
    *out = NULL;
    if (!l || !(l->dsn = cm_strdup(dsn)) || !(l->agent = cm_strdup(agent))) {
        cm_pg_lease_free(l);
        return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    }
    *out = l;
    return CM_OK;
}

void cm_pg_lease_free(cm_pg_lease *l)
{
    if (!l) return;
    if (l->conn) cm_store_pg_lib.finish(l->conn); /* the lock ends with it */
    if (l->dsn) memset(l->dsn, 0, strlen(l->dsn));
    free(l->dsn);
    free(l->agent);
    free(l);
}

cm_rc cm_pg_lease_try(cm_pg_lease *l, bool *held, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    PGresult *r = NULL;
    if (l->conn && cm_store_pg_lib.status(l->conn) != CONNECTION_OK) {
        cm_store_pg_lib.finish(l->conn);
        l->conn = NULL;
        l->held = false;
    }
    if (!l->conn) CHECK(connect_to(l->dsn, &l->conn, err, errlen));
    if (l->held) { /* still ours while the connection lives */
        r = cm_store_pg_lib.exec(l->conn, "SELECT 1");
        if (!res_ok(r)) {
            cm_store_pg_lib.finish(l->conn);
            l->conn = NULL;
            l->held = false;
        }
        goto out;
    }
    const char *v[] = {l->agent};
    r = cm_store_pg_lib.exec_params(
        l->conn, "SELECT pg_try_advisory_lock(hashtextextended('clawmem-watch:' || $1, 0))", 1,
        NULL, v, NULL, NULL, 0);
    if (!res_ok(r)) {
        rc = fail(l->conn, r, "take the watcher lease", err, errlen);
        goto out;
    }
    l->held = cm_store_pg_lib.getvalue(r, 0, 0)[0] == 't';
out:
    if (r) cm_store_pg_lib.clear(r);
    *held = l->held;
    return rc;
}
