/*
 * conn.c — the engine's connection to its index: opened on demand, reopened
 * when another process swapped a rebuilt file in (a PostgreSQL index: one
 * connection kept), closed with the vectors it loaded, or dropped (index
 * --drop); and the checks that the workspace exists and is the one the index
 * holds, which search, get and status make before they answer.
 */
#include <jansson.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/fs.h"
#include "engine_int.h"

void cm_engine_close_store(cm_engine *e)
{
    if (e->snap_held) cm_store_files_stat_close(e->snap_held); /* else close_v2 would linger */
    e->snap_held = NULL;
    if (e->st_open) cm_store_close(&e->st);
    e->st_open = false;
    cm_engine_drop_vectors(e);
}

/* Opens the index for reading and writing; reopens it when another process
 * swapped a rebuilt file in. CM_ENOTFOUND when there is no index yet. */
cm_rc cm_engine_ensure_store(cm_engine *e, char *err, size_t errlen)
{
    struct stat st;
    if (engine_pg(e)) { /* one connection while it lasts: MVCC shows each commit */
        if (e->st_open && cm_store_pg_connected(&e->st)) return CM_OK;
        cm_engine_close_store(e);
        cm_rc rc = cm_store_open_pg(&e->st, e->cfg.store_dsn, e->cfg.agent_id, e->cfg.fts_tokenizer,
                                    0, e->busy_ms, err, errlen);
        if (rc == CM_ENOTFOUND)
            return cm_seterr(err, errlen, rc,
                             "the postgres index of agent %s does not exist yet (run `clawmem "
                             "index`)",
                             e->cfg.agent_id);
        e->st_open = rc == CM_OK;
        return rc;
    }
    if (stat(e->cfg.store_path, &st) < 0) {
        cm_engine_close_store(e);
        char clip[FS_CLIP_MAX + 1];
        return cm_seterr(err, errlen, CM_ENOTFOUND,
                         "index %s does not exist yet (run `clawmem index`)",
                         cm_fs_clip(e->cfg.store_path, clip));
    }
    if (e->st_open && st.st_dev == e->st_dev && st.st_ino == e->st_ino) return CM_OK;
    cm_engine_close_store(e);
    cm_rc rc =
        cm_store_open(&e->st, e->cfg.store_path, e->cfg.fts_tokenizer, 0, e->busy_ms, err, errlen);
    if (rc) return rc;
    e->st_open = true;
    e->st_dev = st.st_dev;
    e->st_ino = st.st_ino;
    return CM_OK;
}

static cm_rc drop_index(cm_engine *e, int *dropped, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    int lock = -1;
    if (dropped) *dropped = 0;
    if (cm_engine_watched_fresh(e)) /* it would say the index is fresh without one */
        return cm_seterr(err, errlen, CM_EBUSY,
                         "a `clawmem watch` or `clawmem mcp` keeps this index; stop it first");
    CHECK(cm_engine_lock_acquire(e, true, &lock, err, errlen));
    rc = cm_engine_ensure_store(e, err, errlen);
    if (rc == CM_ENOTFOUND) { /* no builtin index: only the backend's own, if any */
        rc = CM_OK;
        goto own;
    }
    CHECK(rc);
    if (engine_pg(e)) {
        CHECK(cm_store_drop_agent(&e->st, err, errlen));
    } else {
        static const char *const tails[] = {"", "-wal", "-shm"};
        cm_engine_close_store(e);
        for (size_t i = 0; i < ARRAY_LEN(tails); i++) {
            char p[4096];
            if (snprintf(p, sizeof p, "%s%s", e->cfg.store_path, tails[i]) >= (int)sizeof p)
                FAIL(CM_EINVAL, "index path too long");
            if (unlink(p) < 0 && errno != ENOENT) {
                char clip[FS_CLIP_MAX + 1];
                FAIL(CM_EIO, "cannot remove %s: %s", cm_fs_clip(p, clip), strerror(errno));
            }
        }
    }
    cm_engine_close_store(e);
    if (dropped) *dropped = 1;
own:; /* then a QMD backend's own index (the builtin one answered for it) */
    int had_own = 0;
    if (e->be->drop_own) CHECK(e->be->drop_own(e, &had_own, err, errlen));
    if (dropped && had_own) *dropped = 1;
out:
    cm_engine_lock_release(lock);
    return rc;
}

/* CM_ENOTFOUND when the configured workspace is not a directory: search, get
 * and status then fail rather than answer from an index of another workspace.
 * The hint follows where the path came from: a workspace given with
 * --workspace is not answered with "give --workspace". */
cm_rc cm_engine_workspace_exists(const cm_engine *e, char *err, size_t errlen)
{
    struct stat st;
    char clip[FS_CLIP_MAX + 1];
    const char *from = e->cfg.workspace_from, *ws = cm_fs_clip(e->cfg.workspace, clip);
    if (stat(e->cfg.workspace, &st) == 0 && S_ISDIR(st.st_mode)) return CM_OK;
    if (!strcmp(from, "--workspace"))
        return cm_seterr(err, errlen, CM_ENOTFOUND,
                         "workspace %s does not exist (given with --workspace: create it or "
                         "correct the path)",
                         ws);
    if (*from)
        return cm_seterr(err, errlen, CM_ENOTFOUND,
                         "workspace %s does not exist (set by %s in the config: create it, "
                         "correct that path or give --workspace)",
                         ws, from);
    return cm_seterr(err, errlen, CM_ENOTFOUND,
                     "workspace %s does not exist (the default: create it, set "
                     "agents.defaults.workspace or give --workspace)",
                     ws);
}

/* CM_ENOTFOUND when the open index records another workspace in its meta
 * row (an index from before that field is trusted: the next sync rebuilds it
 * anyway, its fingerprint having changed). recent: the row as of the last
 * data version the store saw (cm_store_meta_get_recent), for a search. */
cm_rc cm_engine_index_workspace_matches(cm_engine *e, bool recent, char *err, size_t errlen)
{
    char *stored = NULL;
    cm_rc rc = recent ? cm_store_meta_get_recent(&e->st, STORE_META_KEY, &stored, err, errlen)
                      : cm_store_meta_get(&e->st, STORE_META_KEY, &stored, err, errlen);
    json_t *meta = rc || !stored ? NULL : json_loads(stored, 0, NULL);
    const char *ws = json_string_value(json_object_get(meta, "workspace"));
    if (!rc && ws && strcmp(ws, e->cfg.workspace) != 0)
        rc = cm_seterr(err, errlen, CM_ENOTFOUND,
                       "the index %s holds workspace %s, not %s (run `clawmem index`)",
                       e->cfg.store_path, ws, e->cfg.workspace);
    json_decref(meta);
    free(stored);
    return rc;
}

void cm_engine_warn_foreign(cm_engine *e)
{
    if (e->foreign_checked || engine_pg(e)) return;
    e->foreign_checked = true;
    bool qc = false;
    char msg[1024];
    if (cm_store_owner(e->cfg.store_path, &qc) != STORE_OWNER_OTHER) return;
    cm_store_foreign(e->cfg.store_path, qc, msg, sizeof msg);
    cm_logf(&e->lg, CM_LOG_WARN, "%s", msg);
}

cm_rc cm_engine_drop_index(cm_engine *e, int *dropped, char *err, size_t errlen)
{
    cm_engine *v;
    cm_rc rc = cm_engine_lease(e, &v, err, errlen);
    if (rc) return rc;
    rc = drop_index(v, dropped, err, errlen);
    cm_engine_unlease(e, v);
    return rc;
}
