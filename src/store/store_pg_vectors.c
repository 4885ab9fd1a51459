/*
 * store_pg_vectors.c — vectors and the embedding cache in PostgreSQL:
 * little-endian float32 blobs, one per chunk; loaded whole into the
 * in-process index (no pgvector), then kept current from the agent's vector
 * log (each written or deleted vector's chunk id, numbered per agent under
 * its write lock, so in commit order).
 */
#include <endian.h>
#include <time.h>

#include "store_pg_int.h"

/* ---- vectors and the embedding cache ------------------------------------------ */

static void le_floats(float *v, size_t n)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        u = __builtin_bswap32(u);
        memcpy(&v[i], &u, 4);
    }
#else
    (void)v;
    (void)n;
#endif
}

cm_rc cm_store_pg_pending_vectors(store *s, int64_t after_id, size_t limit, pending_chunk **out,
                                  size_t *n, char *err, size_t errlen)
{
    PGresult *r = NULL;
    char after[32], lim[32];
    snprintf(after, sizeof after, "%lld", (long long)after_id);
    snprintf(lim, sizeof lim, "%zu", limit);
    const char *pa[] = {s->pg->agent, after, lim};
    *n = 0;
    *out = calloc(limit ? limit : 1, sizeof **out);
    if (!*out) return CM_ENOMEM;
    cm_rc rc = cm_store_pg_run(
        s,
        "SELECT c.id, c.hash, c.text, c.path FROM clawmem_chunks c WHERE c.agent_id = $1 AND "
        "c.id > $2 AND NOT EXISTS (SELECT 1 FROM clawmem_vectors v WHERE v.agent_id = "
        "$1 AND v.chunk_id = c.id) ORDER BY c.id LIMIT $3",
        3, pa, "read chunks to embed", &r, err, errlen);
    for (int i = 0; !rc && i < cm_store_pg_lib.ntuples(r) && (size_t)i < limit; i++) {
        const char *hash = cm_store_pg_lib.getvalue(r, i, 1);
        if (strlen(hash) != SHA256_HEX_LEN) {
            rc = cm_store_corrupt(s, "the chunks table", err, errlen);
            break;
        }
        pending_chunk *p = &(*out)[(*n)++];
        p->id = strtoll(cm_store_pg_lib.getvalue(r, i, 0), NULL, 10);
        snprintf(p->hash, sizeof p->hash, "%s", hash);
        if (!(p->text = cm_strdup(cm_store_pg_lib.getvalue(r, i, 2))) ||
            !(p->path = cm_strdup(cm_store_pg_lib.getvalue(r, i, 3))))
            rc = CM_ENOMEM;
    }
    if (r) cm_store_pg_lib.clear(r);
    if (rc) {
        cm_store_pending_release(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

cm_rc cm_store_pg_cache_get(store *s, const char *provider, const char *model, const char *key,
                            const char *hash, float **out, int *dims, char *err, size_t errlen)
{
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent, provider, model, key, hash};
    *out = NULL;
    *dims = 0;
    cm_rc rc =
        cm_store_pg_run_bin(s,
                            "SELECT dims, embedding FROM clawmem_cache WHERE agent_id = $1 AND "
                            "provider = $2 AND model = $3 AND provider_key = $4 AND hash = $5",
                            5, pa, NULL, 1, "read the embedding cache", &r, err, errlen);
    if (rc) return rc;
    if (cm_store_pg_lib.ntuples(r) && cm_store_pg_lib.getlength(r, 0, 0) == 4) {
        uint32_t d;
        memcpy(&d, cm_store_pg_lib.getvalue(r, 0, 0), 4);
        d = be32toh(d);
        if (d > 0 && d < (1u << 20) && cm_store_pg_lib.getlength(r, 0, 1) == (int)d * 4) {
            if (!(*out = malloc((size_t)d * 4))) {
                rc = CM_ENOMEM;
            } else {
                memcpy(*out, cm_store_pg_lib.getvalue(r, 0, 1), (size_t)d * 4);
                le_floats(*out, d);
                *dims = (int)d;
            }
        }
    }
    cm_store_pg_lib.clear(r);
    return rc;
}

/* v as little-endian float32 bytes (malloc'd). */
static char *le_blob(const float *v, int dims)
{
    float *le = malloc(dims ? (size_t)dims * 4 : 1);
    if (le && dims) {
        memcpy(le, v, (size_t)dims * 4);
        le_floats(le, (size_t)dims);
    }
    return (char *)le;
}

cm_rc cm_store_pg_cache_put(store *s, const char *provider, const char *model, const char *key,
                            const char *hash, const float *v, int dims, char *err, size_t errlen)
{
    char *blob = le_blob(v, dims);
    if (!blob) return CM_ENOMEM;
    char d[16], now[32];
    snprintf(d, sizeof d, "%d", dims);
    snprintf(now, sizeof now, "%lld", (long long)time(NULL));
    const char *pa[] = {s->pg->agent, provider, model, key, hash, d, blob, now};
    int lens[] = {0, 0, 0, 0, 0, 0, dims * 4, 0};
    bool own;
    cm_rc rc = cm_store_pg_w_begin(s, &own, err, errlen);
    if (!rc) {
        if (dims == 0) pa[6] = "", lens[6] = 0; /* an empty bytea, as text */
        rc = cm_store_pg_run_bin(
            s,
            "INSERT INTO clawmem_cache(agent_id, provider, model, provider_key, hash, "
            "dims, embedding, updated_at) VALUES($1, $2, $3, $4, $5, $6, $7, $8) ON "
            "CONFLICT (agent_id, provider, model, provider_key, hash) DO UPDATE SET dims "
            "= excluded.dims, embedding = excluded.embedding, updated_at = "
            "excluded.updated_at",
            8, pa, lens, 0, "write a vector", NULL, err, errlen);
        rc = cm_store_pg_w_end(s, own, rc, err, errlen);
    }
    free(blob);
    return rc;
}

cm_rc cm_store_pg_cache_trim(store *s, int max_entries, char *err, size_t errlen)
{
    char mx[16];
    snprintf(mx, sizeof mx, "%d", max_entries < 0 ? 0 : max_entries);
    const char *pa[] = {s->pg->agent, mx};
    bool own;
    cm_rc rc = cm_store_pg_w_begin(s, &own, err, errlen);
    if (rc) return rc;
    rc = cm_store_pg_run(
        s,
        "DELETE FROM clawmem_cache d USING (SELECT provider, model, provider_key, hash FROM "
        "clawmem_cache WHERE agent_id = $1 ORDER BY updated_at DESC, hash OFFSET $2) o WHERE "
        "d.agent_id = $1 AND d.provider = o.provider AND d.model = o.model AND "
        "d.provider_key = o.provider_key AND d.hash = o.hash",
        2, pa, "trim the embedding cache", NULL, err, errlen);
    return cm_store_pg_w_end(s, own, rc, err, errlen);
}

cm_rc cm_store_pg_vector_put(store *s, int64_t chunk_id, const float *v, int dims, char *err,
                             size_t errlen)
{
    char *blob = le_blob(v, dims);
    if (!blob) return CM_ENOMEM;
    char id[32], d[16], sq[32];
    snprintf(id, sizeof id, "%lld", (long long)chunk_id);
    snprintf(d, sizeof d, "%d", dims);
    const char *pa[] = {s->pg->agent, id, d, dims ? blob : "", sq};
    int lens[] = {0, 0, 0, dims * 4, 0};
    bool own;
    int64_t seq = 0;
    cm_rc rc = cm_store_pg_w_begin(s, &own, err, errlen);
    if (rc) {
        free(blob);
        return rc;
    }
    /* a rebuild's vectors are not logged: its gap sends readers to load */
    bool logged = !s->pg->fresh;
    if (logged) rc = cm_store_pg_log_next(s, &seq, err, errlen);
    snprintf(sq, sizeof sq, "%lld", (long long)seq);
    if (!rc)
        rc = cm_store_pg_run_bin(
            s,
            logged ? "WITH v AS (INSERT INTO clawmem_vectors(agent_id, chunk_id, dims, embedding) "
                     "VALUES($1, $2, $3, $4) ON CONFLICT (agent_id, chunk_id) DO UPDATE SET dims "
                     "= excluded.dims, embedding = excluded.embedding RETURNING chunk_id) INSERT "
                     "INTO clawmem_vector_log(agent_id, seq, chunk_id) SELECT $1, $5, chunk_id "
                     "FROM v"
                   : "INSERT INTO clawmem_vectors(agent_id, chunk_id, dims, embedding) VALUES($1, "
                     "$2, $3, $4) ON CONFLICT (agent_id, chunk_id) DO UPDATE SET dims = "
                     "excluded.dims, embedding = excluded.embedding",
            logged ? 5 : 4, pa, lens, 0, "write a vector", NULL, err, errlen);
    rc = cm_store_pg_w_end(s, own, rc, err, errlen);
    free(blob);
    return rc;
}

/* A read-only snapshot for a load or an update (the head and the rows it
 * reads agree), unless a transaction of this store is open. */
static bool snap_begin(store *s)
{
    char ignore[8];
    return s->pg->depth == 0 &&
           cm_store_pg_run(s, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, "",
                           NULL, ignore, sizeof ignore) == CM_OK;
}

static void snap_end(store *s, bool begun)
{
    char ignore[8];
    if (begun) cm_store_pg_run(s, "COMMIT", 0, NULL, "", NULL, ignore, sizeof ignore);
}

/* The agent's vector log head in the snapshot: -1 when the log cannot
 * say (no log, no row, or a writer without the log committed last). */
static cm_rc log_head(store *s, int64_t *head, char *err, size_t errlen)
{
    PGresult *r = NULL;
    const char *pa[] = {s->pg->agent};
    *head = -1;
    if (!s->pg->has_log) return CM_OK;
    cm_rc rc = cm_store_pg_run(
        s, "SELECT log_seq FROM clawmem_agents WHERE agent_id = $1 AND log_version = version", 1,
        pa, "read the vector log", &r, err, errlen);
    if (rc) return rc;
    if (cm_store_pg_lib.ntuples(r)) *head = strtoll(cm_store_pg_lib.getvalue(r, 0, 0), NULL, 10);
    cm_store_pg_lib.clear(r);
    return CM_OK;
}

/* The agent's ($1) vectors with their chunk's source, as vector_row reads
 * them; the caller's condition follows. */
#define VECTOR_ROWS_SQL                                                                            \
    "SELECT v.chunk_id, v.embedding, c.source = 'sessions' FROM clawmem_vectors v JOIN "           \
    "clawmem_chunks c ON c.agent_id = v.agent_id AND c.id = v.chunk_id WHERE v.agent_id = $1 AND "

/* Row i of a VECTOR_ROWS_SQL binary result: its id, vector (into v) and
 * source; false for a row of another length. */
static bool vector_row(PGresult *r, int i, int dims, int64_t *id, float *v, uint8_t *src)
{
    if (cm_store_pg_lib.getlength(r, i, 0) != 8 || cm_store_pg_lib.getlength(r, i, 1) != dims * 4)
        return false;
    uint64_t u;
    memcpy(&u, cm_store_pg_lib.getvalue(r, i, 0), 8);
    *id = (int64_t)be64toh(u);
    memcpy(v, cm_store_pg_lib.getvalue(r, i, 1), (size_t)dims * 4);
    le_floats(v, (size_t)dims);
    *src = cm_store_pg_lib.getlength(r, i, 2) == 1 && cm_store_pg_lib.getvalue(r, i, 2)[0] ? 1 : 0;
    return true;
}

cm_rc cm_store_pg_vectors_update(store *s, int dims, vec_index *x, int64_t *seq, bool *reload,
                                 char *err, size_t errlen)
{
    PGresult *r = NULL;
    cm_rc rc = CM_OK;
    int64_t head = -1, *ids = NULL;
    float *v = NULL;
    *reload = *seq < 0;
    if (*reload) return CM_OK;
    bool begun = snap_begin(s);
    CHECK(log_head(s, &head, err, errlen));
    if (head == *seq) goto out;
    if (head < *seq) { /* the log cannot say, or the agent was dropped and made again */
        *reload = true;
        goto out;
    }
    char after[32], d[16];
    snprintf(after, sizeof after, "%lld", (long long)*seq);
    snprintf(d, sizeof d, "%d", dims);
    const char *pa[] = {s->pg->agent, after, d};
    CHECK(cm_store_pg_run(s,
                          "SELECT seq, chunk_id FROM clawmem_vector_log WHERE agent_id = $1 AND "
                          "seq > $2 ORDER BY seq",
                          2, pa, "read the vector log", &r, err, errlen));
    size_t n = (size_t)cm_store_pg_lib.ntuples(r);
    /* every number from *seq + 1 to the head has its entry, else entries
     * were trimmed or a rebuild left its gap; or so many changes that
     * loading everything is cheaper */
    if ((int64_t)n != head - *seq || n > x->n / 2 + 1024 ||
        strtoll(cm_store_pg_lib.getvalue(r, 0, 0), NULL, 10) != *seq + 1) {
        *reload = true;
        goto out;
    }
    if (!(ids = malloc(n * sizeof *ids)) || !(v = malloc((size_t)dims * 4))) CHECK(CM_ENOMEM);
    buf arr = BUF_INIT; /* the ids as an array literal */
    rc = cm_buf_addc(&arr, '{');
    for (size_t i = 0; i < n && !rc; i++) {
        ids[i] = strtoll(cm_store_pg_lib.getvalue(r, (int)i, 1), NULL, 10);
        rc = cm_buf_printf(&arr, "%s%lld", i ? "," : "", (long long)ids[i]);
    }
    if (!rc) rc = cm_buf_addc(&arr, '}');
    cm_store_pg_lib.clear(r);
    r = NULL;
    const char *pv[] = {s->pg->agent, arr.data, d};
    if (!rc)
        rc = cm_store_pg_run_bin(
            s,
            VECTOR_ROWS_SQL "v.chunk_id = ANY($2::bigint[]) AND v.dims = $3",
            3, pv, NULL, 1, "read vectors", &r, err, errlen);
    cm_buf_release(&arr);
    CHECK(rc);
    /* the ids with a vector now are put, the others removed */
    for (size_t i = 0; i < n; i++) {
        bool removed;
        CHECK(cm_vec_index_remove(x, ids[i], &removed));
    }
    for (int i = 0; i < cm_store_pg_lib.ntuples(r); i++) {
        int64_t id;
        uint8_t src;
        if (!vector_row(r, i, dims, &id, v, &src)) continue;
        rc = cm_vec_index_put(x, id, v, src);
        if (rc == CM_EINVAL) rc = CM_OK; /* a zero vector is not searchable: as absent */
        CHECK(rc);
    }
    *seq = head;
out:
    if (r) cm_store_pg_lib.clear(r);
    snap_end(s, begun);
    free(ids);
    free(v);
    return rc;
}

cm_rc cm_store_pg_vectors_load(store *s, int dims, vec_index *x, int64_t *seq, char *err,
                               size_t errlen)
{
    PGresult *r = NULL;
    char d[16];
    snprintf(d, sizeof d, "%d", dims);
    const char *pa[] = {s->pg->agent, d};
    cm_rc rc = cm_vec_index_init(x, (size_t)dims);
    if (rc) return cm_seterr(err, errlen, rc, "bad vector dimensions %d", dims);
    float *v = malloc((size_t)dims * 4);
    if (!v) rc = CM_ENOMEM;
    bool begun = snap_begin(s);
    if (!rc) rc = log_head(s, seq, err, errlen);
    if (!rc)
        rc = cm_store_pg_run_bin(
            s,
            VECTOR_ROWS_SQL "v.dims = $2",
            2, pa, NULL, 1, "load vectors", &r, err, errlen);
    for (int i = 0; !rc && i < cm_store_pg_lib.ntuples(r); i++) {
        int64_t id;
        uint8_t src;
        if (!vector_row(r, i, dims, &id, v, &src)) continue;
        cm_rc ar = cm_vec_index_add(x, id, v, src);
        if (ar == CM_ENOMEM) rc = ar;
    }
    if (r) cm_store_pg_lib.clear(r);
    snap_end(s, begun);
    free(v);
    if (rc) cm_vec_index_release(x);
    return rc;
}
