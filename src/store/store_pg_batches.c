/*
 * store_pg_batches.c — the embedding batches of a PostgreSQL index
 * (batches.c's tables for SQLite): clawmem_embed_batches, one row per batch
 * submitted to the provider and not collected yet, and
 * clawmem_embed_batch_items, the chunk hashes each covers; both keyed by
 * agent_id first, like every table of the store, so Citus colocates them.
 *
 * The batch lease: a session-level advisory lock per agent that the process
 * submitting and collecting the agent's batches holds for its whole batch
 * round (batch_fill.c). Several `clawmem serve` replicas (and a CLI) over one
 * database can each sync an agent; only the one holding the lease talks to
 * the batch API, so a batch is never submitted twice for the same chunks nor
 * collected by two processes. The lock ends with its session: a process
 * killed mid-round hands it on, and one whose connection was made again
 * finds it gone (cm_store_pg_batch_leased asks the server) and stops.
 */
#include "store_pg_int.h"

/* The lease's key: 64 bits from the agent id, apart from the write lock's
 * ('clawmem:'), the watcher lease's ('clawmem-watch:') and the schema's. */
#define LEASE_KEY "hashtextextended('clawmem-batch:' || $1, 0)"

cm_rc cm_store_pg_batches_ensure(store *s, char *err, size_t errlen)
{
    if (s->pg->has_batches) return CM_OK;
    return cm_seterr(err, errlen, CM_EIO,
                     "postgres index of agent %s: the database predates the embedding batch "
                     "tables and this role may not add them; open it once as a role that may "
                     "create tables (any `clawmem index` run by the tables' owner does)",
                     s->pg->agent);
}

cm_rc cm_store_pg_batches_list(store *s, store_batch **out, size_t *n, char *err, size_t errlen)
{
    PGresult *r = NULL;
    cm_rc rc = CM_OK;
    *out = NULL;
    *n = 0;
    if (!s->pg->has_batches) return CM_OK; /* an older database: none */
    const char *pa[] = {s->pg->agent};
    CHECK(cm_store_pg_run(s,
                          "SELECT id, provider, model, provider_key, state, items, created, "
                          "updated FROM clawmem_embed_batches WHERE agent_id = $1 ORDER BY "
                          "created, id COLLATE \"C\"",
                          1, pa, "read the batches", &r, err, errlen));
    int nt = cm_store_pg_lib.ntuples(r);
    if (nt && !(*out = calloc((size_t)nt, sizeof **out))) FAIL(CM_ENOMEM, "out of memory");
    for (int i = 0; i < nt; i++) {
        store_batch *b = &(*out)[(*n)++];
        b->id = cm_strdup(cm_store_pg_lib.getvalue(r, i, 0));
        b->provider = cm_strdup(cm_store_pg_lib.getvalue(r, i, 1));
        b->model = cm_strdup(cm_store_pg_lib.getvalue(r, i, 2));
        b->key = cm_strdup(cm_store_pg_lib.getvalue(r, i, 3));
        b->state = cm_strdup(cm_store_pg_lib.getvalue(r, i, 4));
        if (!b->id || !b->provider || !b->model || !b->key || !b->state)
            FAIL(CM_ENOMEM, "out of memory");
        b->items = strtoll(cm_store_pg_lib.getvalue(r, i, 5), NULL, 10);
        b->created = strtoll(cm_store_pg_lib.getvalue(r, i, 6), NULL, 10);
        b->updated = strtoll(cm_store_pg_lib.getvalue(r, i, 7), NULL, 10);
    }
out:
    if (r) cm_store_pg_lib.clear(r);
    if (rc) {
        cm_store_batches_release(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

/* The batch rows are bookkeeping of the writer, not the index's data: they
 * are written under the agent's write lock (a transaction of their own when
 * the caller has none) but move no data version, so no reader reloads
 * anything for them. */
cm_rc cm_store_pg_batch_add(store *s, const store_batch *b, const char *const *hashes, size_t n,
                            char *err, size_t errlen)
{
    cm_rc rc = cm_store_pg_batches_ensure(s, err, errlen);
    if (rc) return rc;
    bool own = s->pg->depth == 0;
    if (own && (rc = cm_store_pg_begin(s, err, errlen))) return rc;
    buf arr = BUF_INIT;
    char items[32], created[32];
    snprintf(items, sizeof items, "%zu", n);
    snprintf(created, sizeof created, "%lld", (long long)b->created);
    const char *pa[] = {s->pg->agent, b->id,    b->provider, b->model,
                        b->key,       b->state, items,       created};
    CHECK(cm_store_pg_run(s,
                          "INSERT INTO clawmem_embed_batches(agent_id, id, provider, model, "
                          "provider_key, state, items, created, updated) VALUES($1, $2, $3, $4, "
                          "$5, $6, $7, $8, $8) ON CONFLICT (agent_id, id) DO UPDATE SET provider "
                          "= excluded.provider, model = excluded.model, provider_key = "
                          "excluded.provider_key, state = excluded.state, items = excluded.items, "
                          "created = excluded.created, updated = excluded.updated",
                          8, pa, "record a batch", NULL, err, errlen));
    /* the hashes as one array: one statement however many (50,000 at most) */
    CHECK(cm_buf_addc(&arr, '{'));
    for (size_t i = 0; i < n; i++)
        CHECK(cm_store_pg_array_elem(&arr, hashes[i], strlen(hashes[i])));
    CHECK(cm_buf_addc(&arr, '}'));
    const char *pi[] = {s->pg->agent, b->id, arr.data};
    CHECK(cm_store_pg_run(s,
                          "INSERT INTO clawmem_embed_batch_items(agent_id, batch_id, hash) SELECT "
                          "$1, $2, h FROM unnest($3::text[]) AS h ON CONFLICT DO NOTHING",
                          3, pi, "record a batch", NULL, err, errlen));
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_buf_release(&arr);
    if (own) {
        if (rc)
            cm_store_pg_rollback(s);
        else
            rc = cm_store_pg_commit(s, err, errlen);
    }
    return rc;
}

cm_rc cm_store_pg_batch_hashes(store *s, const char *id, char ***hashes, size_t *n, char *err,
                               size_t errlen)
{
    PGresult *r = NULL;
    cm_rc rc = CM_OK;
    *hashes = NULL;
    *n = 0;
    if (!s->pg->has_batches) return CM_OK;
    const char *pa[] = {s->pg->agent, id};
    CHECK(cm_store_pg_run(s,
                          "SELECT hash FROM clawmem_embed_batch_items WHERE agent_id = $1 AND "
                          "batch_id = $2",
                          2, pa, "read a batch", &r, err, errlen));
    int nt = cm_store_pg_lib.ntuples(r);
    if (nt && !(*hashes = calloc((size_t)nt, sizeof **hashes))) FAIL(CM_ENOMEM, "out of memory");
    for (int i = 0; i < nt; i++) {
        if (!((*hashes)[*n] = cm_strdup(cm_store_pg_lib.getvalue(r, i, 0))))
            FAIL(CM_ENOMEM, "out of memory");
        (*n)++;
    }
out:
    if (r) cm_store_pg_lib.clear(r);
    if (rc) {
        for (size_t i = 0; i < *n; i++)
            free((*hashes)[i]);
        free(*hashes);
        *hashes = NULL;
        *n = 0;
    }
    return rc;
}

cm_rc cm_store_pg_batch_state(store *s, const char *id, const char *state, int64_t now, char *err,
                              size_t errlen)
{
    if (!s->pg->has_batches) return cm_store_pg_batches_ensure(s, err, errlen);
    char t[32];
    snprintf(t, sizeof t, "%lld", (long long)now);
    const char *pa[] = {s->pg->agent, id, state, t};
    /* one statement: atomic without a transaction of its own */
    return cm_store_pg_run(s,
                           "UPDATE clawmem_embed_batches SET state = $3, updated = $4 WHERE "
                           "agent_id = $1 AND id = $2",
                           4, pa, "record a batch's state", NULL, err, errlen);
}

cm_rc cm_store_pg_batch_delete(store *s, const char *id, char *err, size_t errlen)
{
    if (!s->pg->has_batches) return CM_OK; /* nothing recorded */
    const char *pa[] = {s->pg->agent, id};
    /* the batch and its items in one statement */
    return cm_store_pg_run(s,
                           "WITH i AS (DELETE FROM clawmem_embed_batch_items WHERE agent_id = $1 "
                           "AND batch_id = $2) DELETE FROM clawmem_embed_batches WHERE agent_id = "
                           "$1 AND id = $2",
                           2, pa, "forget a batch", NULL, err, errlen);
}

cm_rc cm_store_pg_chunk_text(store *s, int64_t id, char **text, char *err, size_t errlen)
{
    PGresult *r = NULL;
    char ids[32];
    *text = NULL;
    snprintf(ids, sizeof ids, "%lld", (long long)id);
    const char *pa[] = {s->pg->agent, ids};
    cm_rc rc = cm_store_pg_run(s, "SELECT text FROM clawmem_chunks WHERE agent_id = $1 AND id = $2",
                               2, pa, "read a chunk", &r, err, errlen);
    if (rc) return rc;
    if (cm_store_pg_lib.ntuples(r) && !(*text = cm_strdup(cm_store_pg_lib.getvalue(r, 0, 0))))
        rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    cm_store_pg_lib.clear(r);
    return rc;
}

/* ---- the batch lease ------------------------------------------------------ */

cm_rc cm_store_pg_batch_lease(store *s, bool wait, bool *held, char *err, size_t errlen)
{
    struct store_pg *p = s->pg;
    PGresult *r = NULL;
    *held = false;
    if (p->batch_lease && cm_store_pg_batch_leased(s)) {
        *held = true;
        return CM_OK;
    }
    p->batch_lease = false;
    const char *pa[] = {p->agent};
    /* waiting: as long as lock_timeout (the engine's busy timeout) lets it */
    cm_rc rc = cm_store_pg_run(s,
                               wait ? "SELECT pg_advisory_lock(" LEASE_KEY ") IS NOT NULL"
                                    : "SELECT pg_try_advisory_lock(" LEASE_KEY ")",
                               1, pa, "take the batch lease", &r, err, errlen);
    if (rc == CM_EBUSY) return CM_OK; /* another process holds it for longer */
    if (rc) return rc;
    *held = cm_store_pg_lib.getvalue(r, 0, 0)[0] == 't';
    cm_store_pg_lib.clear(r);
    if (*held) {
        p->batch_lease = true;
        p->batch_lease_gen = p->session_gen; /* the session the statement ran in */
    }
    return CM_OK;
}

bool cm_store_pg_batch_leased(store *s)
{
    struct store_pg *p = s->pg;
    if (!p->batch_lease || p->batch_lease_gen != p->session_gen) return false;
    /* the server's word: a session that ended (a restart, a terminated
     * backend) took the lock with it, and the statement below then runs in
     * a new session that does not hold it */
    PGresult *r = NULL;
    const char *pa[] = {p->agent};
    char ignore[8];
    cm_rc rc = cm_store_pg_run(
        s,
        "SELECT EXISTS (SELECT 1 FROM pg_locks, (SELECT " LEASE_KEY " AS k) h WHERE locktype = "
        "'advisory' AND pid = pg_backend_pid() AND granted AND objsubid = 1 AND classid = "
        "((h.k >> 32) & 4294967295)::oid AND objid = (h.k & 4294967295)::oid)",
        1, pa, "check the batch lease", &r, ignore, sizeof ignore);
    bool held =
        !rc && cm_store_pg_lib.getvalue(r, 0, 0)[0] == 't' && p->batch_lease_gen == p->session_gen;
    if (r) cm_store_pg_lib.clear(r);
    if (!held) p->batch_lease = false;
    return held;
}

void cm_store_pg_batch_unlease(store *s)
{
    struct store_pg *p = s->pg;
    if (!p->batch_lease) return;
    p->batch_lease = false;
    if (p->batch_lease_gen != p->session_gen) return; /* went with its session */
    const char *pa[] = {p->agent};
    char ignore[8];
    cm_store_pg_run(s, "SELECT pg_advisory_unlock(" LEASE_KEY ")", 1, pa, "", NULL, ignore,
                    sizeof ignore);
}
