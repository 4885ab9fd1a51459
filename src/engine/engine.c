/*
 * engine.c — the per-agent engine behind include/clawmem.h: the handle
 * (config, logger, the backend), sync and status; and what tools/ calls
 * (engine.h): search, memory_get's read and memory_write, which go to the
 * backend's table (builtin.c, qmd_backend.c) or the memory files' rules
 * (index/memfile.h). The engine's jobs live beside it, one a file, and share
 * engine_int.h.
 */
#include <sys/stat.h>

#include "engine_int.h"

#define DEFAULT_BUSY_MS 10000

static int busy_ms_from_env(void)
{
    const char *v = getenv("CLAWMEM_BUSY_TIMEOUT_MS");
    if (!v || !*v) return DEFAULT_BUSY_MS;
    char *end;
    long ms = strtol(v, &end, 10);
    return (*end || ms < 0 || ms > 3600000) ? DEFAULT_BUSY_MS : (int)ms;
}

/* store.path unset: an index of clawmem's at the earlier default path
 * (<stateDir>/memory/<agentId>.sqlite, QuantumClaw's own index's path) moves
 * to clawmem's (<agentId>.clawmem.sqlite) once; one that cannot move (a
 * read-only state dir) is used where it is. One stat when the index is in
 * place. */
static void move_legacy_index(cm_engine *e)
{
    struct stat st;
    const cm_config *c = &e->cfg;
    if (!c->store_path_legacy || engine_pg(e) || stat(c->store_path, &st) == 0) return;
    char msg[512] = "";
    store_move how = STORE_MOVE_NONE;
    cm_store_migrate(c->store_path_legacy, c->store_path, &how, msg, sizeof msg);
    if (how == STORE_MOVE_DONE) {
        cm_logf(&e->lg, CM_LOG_INFO,
                "moved clawmem's index %s to %s (QuantumClaw keeps its own index at the old path)",
                c->store_path_legacy, c->store_path);
    } else if (how == STORE_MOVE_STAY) {
        cm_logf(&e->lg, CM_LOG_WARN, "%s; using it where it is", msg);
        char *p = e->cfg.store_path;
        e->cfg.store_path = e->cfg.store_path_legacy;
        e->cfg.store_path_legacy = p;
    }
}

static size_t engines_opened;

size_t cm_engine_opened_count(void)
{
    return __atomic_load_n(&engines_opened, __ATOMIC_RELAXED);
}

cm_rc cm_engine_open(const cm_options *opt, cm_engine **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    __atomic_add_fetch(&engines_opened, 1, __ATOMIC_RELAXED);
    *out = NULL;
    cm_engine *e = calloc(1, sizeof *e);
    if (!e) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    cm_options none = {0};
    if (!opt) opt = &none;
    e->lg.fn = opt->log;
    e->lg.ctx = opt->log_ctx;
    e->busy_ms = busy_ms_from_env();
    e->allow_write = opt->allow_write != 0;
    cm_config_args args = {opt->agent_id, opt->workspace, opt->config_path, opt->state_dir};
    CHECK(cm_config_init(&args, &e->lg, &e->cfg, err, errlen));
    move_legacy_index(e);
    e->be = strcmp(e->cfg.backend, "qmd") == 0 ? &cm_engine_qmd_backend : &cm_engine_builtin;
    CHECK(e->be->open(e, err, errlen));
out:
    if (rc) {
        cm_engine_close(e);
        return rc;
    }
    *out = e;
    return CM_OK;
}

cm_rc cm_engine_open_shared(const cm_options *opt, cm_engine **out, char *err, size_t errlen)
{
    cm_rc rc = cm_engine_open(opt, out, err, errlen);
    if (!rc && cm_engine_pool_init(*out)) {
        cm_engine_close(*out);
        *out = NULL;
        rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    }
    return rc;
}

void cm_engine_close(cm_engine *e)
{
    if (!e) return;
    cm_engine_pool_free(e); /* the views first: they borrow e->cfg */
    if (e->be) e->be->close(e);
    cm_static_model_close(&e->qm);
    cm_derive_close(&e->dt);
    cm_config_release(&e->cfg);
    free(e);
}

/* Each entry point below runs on the engine cm_engine_lease gives: e itself,
 * or a shared engine's view. */
cm_rc cm_engine_sync(cm_engine *e, unsigned flags, cm_progress_fn progress, void *progress_ctx,
                     cm_sync_stats *stats, char *err, size_t errlen)
{
    cm_engine *v;
    cm_rc rc = cm_engine_lease(e, &v, err, errlen);
    if (rc) return rc;
    rc = v->be->sync(v, flags, progress, progress_ctx, stats, err, errlen);
    cm_engine_unlease(e, v);
    return rc;
}

cm_rc cm_engine_status(cm_engine *e, int deep, char **json, char *err, size_t errlen)
{
    cm_engine *v;
    cm_rc rc = cm_engine_lease(e, &v, err, errlen);
    if (rc) return rc;
    rc = v->be->status(v, deep, json, err, errlen);
    cm_engine_unlease(e, v);
    return rc;
}

int cm_engine_writable(const cm_engine *e)
{
    return engine_writable(e);
}

/* The engine's own share: its struct, config, provider state and the
 * connection's buffers, measured at about this for a small workspace. */
#define ENGINE_BASE_BYTES (256u << 10)

/* A connection's share: the engine's base, the SQLite page cache and statements. */
static size_t conn_bytes(const cm_engine *e)
{
    size_t n = ENGINE_BASE_BYTES;
    if (e->st_open && e->st.db) {
        static const int ops[] = {SQLITE_DBSTATUS_CACHE_USED, SQLITE_DBSTATUS_SCHEMA_USED,
                                  SQLITE_DBSTATUS_STMT_USED};
        for (size_t i = 0; i < ARRAY_LEN(ops); i++) {
            int cur = 0, hi = 0;
            if (sqlite3_db_status(e->st.db, ops[i], &cur, &hi, 0) == SQLITE_OK && cur > 0)
                n += (size_t)cur;
        }
    }
    return n;
}

size_t cm_engine_memory(const cm_engine *e)
{
    if (!e) return 0;
    size_t n = conn_bytes(e);
    if (e->vx_loaded && !e->snap) n += cm_vec_index_bytes(&e->vx);
    return n + cm_engine_pool_memory((cm_engine *)e, conn_bytes);
}

const cm_config *cm_engine_config(const cm_engine *e)
{
    return &e->cfg;
}

void cm_engine_result_release(engine_result *r)
{
    for (size_t i = 0; r->v && i < r->n; i++)
        cm_search_hit_release(&r->v[i]);
    free(r->v);
    free(r->fallback);
    free(r->error);
    free(r->qmd_why);
    memset(r, 0, sizeof *r);
}

cm_rc cm_engine_search(cm_engine *e, const char *query, const cm_search_opts *opts,
                       const char *session_key, engine_result *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t n = query ? strlen(query) : 0;
    if (n == strspn(query ? query : "", " \t\r\n\f\v")) { /* QuantumClaw trims it first */
        json_t *q = json_string(n <= 40 ? (query ? query : "") : "...");
        char *shown = q ? json_dumps(q, JSON_ENCODE_ANY) : NULL; /* quoted, \t escaped */
        cm_rc rc = cm_seterr(err, errlen, CM_EINVAL,
                             "query is empty: give the words to look for (got %s)",
                             shown ? shown : "\"\"");
        free(shown);
        json_decref(q);
        return rc;
    }
    cm_engine *v;
    cm_rc rc = cm_engine_lease(e, &v, err, errlen);
    if (rc) return rc;
    rc = v->be->search(v, query, opts, session_key, out, err, errlen);
    cm_engine_unlease(e, v);
    return rc;
}

cm_rc cm_engine_get(cm_engine *e, const char *path, long from, long offset, long lines,
                    memfile_text *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    cm_engine *v;
    cm_rc rc = cm_engine_lease(e, &v, err, errlen);
    if (rc) return rc;
    cm_engine_warn_foreign(v);
    rc = cm_engine_workspace_exists(v, err, errlen);
    if (!rc && v->be->get)
        rc = v->be->get(v, path, from, offset, lines, out, err, errlen);
    else if (!rc)
        rc = cm_index_memfile_read(&v->cfg, path, strlen(path), from, offset, lines, out, err,
                                   errlen);
    cm_engine_unlease(e, v);
    return rc;
}

cm_rc cm_engine_write(cm_engine *e, const char *path, const char *text, int64_t now,
                      memfile_note *out, char *err, size_t errlen)
{
    cm_engine *v;
    cm_rc rc = cm_engine_lease(e, &v, err, errlen);
    if (rc) return rc;
    rc = cm_index_memfile_write(&v->cfg, path, text, now, out, err, errlen);
    if (!rc) cm_engine_index_written(v, out->path);
    cm_engine_unlease(e, v);
    return rc;
}
