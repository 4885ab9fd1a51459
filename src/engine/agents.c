/*
 * agents.c — clawmem/agents.h: the agents an index holds, and the removal
 * of one agent's rows. Each agent's store is the one its own config names
 * (agents.list[].memorySearch may move it): a PostgreSQL database is asked
 * which agents have rows in which table (one statement); a SQLite index is
 * one file per agent, counted table by table before it is removed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/fs.h"
#include "engine_int.h"

/* The tables of a SQLite index that hold the agent's rows. */
static const char *const lite_tables[] = {
    "meta",       "files",           "chunks",        "vectors",
    "vector_log", "embedding_cache", "embed_batches", "embed_batch_items",
};

/* {table: rows} of the SQLite index at path (tables it lacks left out), or
 * NULL when it cannot be opened. */
static json_t *lite_rows(const char *path, const char *tokenizer)
{
    store st;
    char ignore[CM_ERR_SIZE];
    if (cm_store_open(&st, path, tokenizer, 0, 5000, ignore, sizeof ignore) != CM_OK) return NULL;
    json_t *o = json_object();
    for (size_t i = 0; o && i < ARRAY_LEN(lite_tables); i++) {
        int64_t n = 0;
        if (cm_store_count(&st, lite_tables[i], &n, ignore, sizeof ignore) == CM_OK)
            json_object_set_new(o, lite_tables[i], json_integer(n));
    }
    cm_store_close(&st);
    return o;
}

static json_t *pg_rows(const int64_t rows[STORE_PG_NTABLES])
{
    json_t *o = json_object();
    for (size_t k = 0; o && k < STORE_PG_NTABLES; k++)
        json_object_set_new(o, cm_store_pg_tables[k], json_integer(rows[k]));
    return o;
}

static bool is_pg(const cm_config *c)
{
    return c->store_driver && strcmp(c->store_driver, "postgres") == 0;
}

/* ---- list ------------------------------------------------------------------- */

typedef struct lister {
    const cm_options *opt;
    json_t *byid; /* id -> entry */
    json_t *dsns; /* DSNs already listed (kept in memory only) */
    bool scanned; /* the default SQLite directory */
} lister;

static json_t *entry(lister *l, const char *id)
{
    json_t *e = json_object_get(l->byid, id);
    if (!e) {
        e = json_pack("{s:s,s:b,s:n,s:n,s:{}}", "id", id, "configured", 0, "store", "index",
                      "rows");
        json_object_set_new(l->byid, id, e);
    }
    return e;
}

/* Every agent of the database dsn. */
static cm_rc list_pg(lister *l, const cm_config *c, char *err, size_t errlen)
{
    for (size_t i = 0; i < json_array_size(l->dsns); i++)
        if (!strcmp(json_string_value(json_array_get(l->dsns, i)), c->store_dsn)) return CM_OK;
    json_array_append_new(l->dsns, json_string(c->store_dsn));
    store st;
    store_pg_agent *v = NULL;
    size_t n = 0;
    cm_rc rc = cm_store_open_pg(&st, c->store_dsn, c->agent_id, c->fts_tokenizer, STORE_ANY_AGENT,
                                5000, err, errlen);
    if (rc == CM_ENOTFOUND) return CM_OK; /* no tables: no agents */
    if (rc) return rc;
    rc = cm_store_pg_agents(&st, &v, &n, err, errlen);
    for (size_t i = 0; !rc && i < n; i++) {
        json_t *e = entry(l, v[i].id);
        json_object_set_new(e, "store", json_string("postgres"));
        json_object_set_new(e, "index", v[i].rows[0] ? json_string("postgres") : json_null());
        json_object_set_new(e, "rows", pg_rows(v[i].rows));
    }
    cm_store_pg_agents_release(v, n);
    cm_store_close(&st);
    return rc;
}

/* The agent's SQLite index, and at the default place (<stateDir>/memory/
 * <id>.clawmem.sqlite) every other agent's beside it. */
static void list_lite(lister *l, const cm_config *c)
{
    struct stat st;
    json_t *e = entry(l, c->agent_id);
    json_object_set_new(e, "store", json_string("sqlite"));
    if (stat(c->store_path, &st) == 0) {
        json_object_set_new(e, "index", json_string(c->store_path));
        json_t *rows = lite_rows(c->store_path, c->fts_tokenizer);
        if (rows) json_object_set_new(e, "rows", rows);
    }
    if (!c->store_path_legacy || l->scanned) return; /* a store.path of the config's own */
    l->scanned = true;
    char *dir = cm_fs_dirname(c->store_path);
    DIR *d = dir ? opendir(dir) : NULL;
    struct dirent *de;
    static const char tail[] = ".clawmem.sqlite";
    while (d && (de = readdir(d)) != NULL) {
        size_t nl = strlen(de->d_name), tl = sizeof tail - 1;
        if (nl <= tl || strcmp(de->d_name + nl - tl, tail) != 0) continue;
        char *id = cm_strndup(de->d_name, nl - tl);
        buf p = BUF_INIT;
        if (id && !json_object_get(l->byid, id) && cm_fs_join(&p, dir, de->d_name) == CM_OK) {
            json_t *o = entry(l, id);
            json_object_set_new(o, "store", json_string("sqlite"));
            json_object_set_new(o, "index", json_string(p.data));
            json_t *rows = lite_rows(p.data, c->fts_tokenizer);
            if (rows) json_object_set_new(o, "rows", rows);
        }
        cm_buf_release(&p);
        free(id);
    }
    if (d) closedir(d);
    free(dir);
}

static int by_id(const void *a, const void *b)
{
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "id")),
                  json_string_value(json_object_get(*(json_t *const *)b, "id")));
}

cm_rc cm_agents_list(const cm_options *opt, char **json, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    cm_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cm_logger lg = {NULL, NULL};
    lister l = {opt, json_object(), json_array(), false};
    json_t *ids = json_array(), *arr = json_array();
    *json = NULL;
    if (!l.byid || !l.dsns || !ids || !arr) FAIL(CM_ENOMEM, "out of memory");
    cm_config_args a = {opt->agent_id, opt->workspace, opt->config_path, opt->state_dir};
    CHECK(cm_config_init(&a, &lg, &cfg, err, errlen));
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(json_object_get(cfg.root, "agents"), "list"), i, it)
    {
        const char *id = json_string_value(json_object_get(it, "id"));
        if (id && *id) json_array_append_new(ids, json_string(id));
    }
    if (!json_array_size(ids)) json_array_append_new(ids, json_string(cfg.agent_id));
    cm_config_release(&cfg);
    memset(&cfg, 0, sizeof cfg);
    json_array_foreach(ids, i, it)
    {
        const char *id = json_string_value(it);
        cm_config_args ai = {id, NULL, opt->config_path, opt->state_dir};
        CHECK(cm_config_init(&ai, &lg, &cfg, err, errlen));
        json_object_set_new(entry(&l, id), "configured", json_true());
        if (is_pg(&cfg))
            CHECK(list_pg(&l, &cfg, err, errlen));
        else
            list_lite(&l, &cfg);
        cm_config_release(&cfg);
        memset(&cfg, 0, sizeof cfg);
    }
    const char *k;
    json_t *v;
    json_object_foreach(l.byid, k, v)
    {
        json_array_append(arr, v);
    }
    size_t n = json_array_size(arr);
    json_t **sorted = calloc(n ? n : 1, sizeof *sorted);
    if (!sorted) FAIL(CM_ENOMEM, "out of memory");
    for (i = 0; i < n; i++)
        sorted[i] = json_array_get(arr, i);
    qsort(sorted, n, sizeof *sorted, by_id);
    json_t *out = json_array();
    for (i = 0; out && i < n; i++)
        json_array_append(out, sorted[i]);
    free(sorted);
    json_t *doc = json_pack("{s:o}", "agents", out);
    *json = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!*json) FAIL(CM_ENOMEM, "out of memory");
out:
    cm_config_release(&cfg);
    json_decref(l.byid);
    json_decref(l.dsns);
    json_decref(ids);
    json_decref(arr);
    return rc;
}

/* ---- delete ----------------------------------------------------------------- */

/* Whether a live watcher (clawmem watch, mcp or serve) holds "<index>.watch". */
static bool watcher_alive(const char *store_path)
{
    buf p = BUF_INIT;
    bool held = false;
    if (cm_buf_printf(&p, "%s.watch", store_path) == CM_OK) {
        int fd = open(p.data, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (flock(fd, LOCK_SH | LOCK_NB) == 0)
                flock(fd, LOCK_UN);
            else
                held = errno == EWOULDBLOCK;
            close(fd);
        }
    }
    cm_buf_release(&p);
    return held;
}

/* Removes path+tail when it exists, adding it to paths. */
static cm_rc remove_one(const char *path, const char *tail, json_t *paths, char *err, size_t errlen)
{
    buf p = BUF_INIT;
    cm_rc rc = cm_buf_printf(&p, "%s%s", path, tail);
    if (rc) return rc;
    if (unlink(p.data) == 0) {
        json_array_append_new(paths, json_string(p.data));
    } else if (errno != ENOENT) {
        char clip[FS_CLIP_MAX + 1];
        rc = cm_seterr(err, errlen, CM_EIO, "cannot remove %s: %s", cm_fs_clip(p.data, clip),
                       strerror(errno));
    }
    cm_buf_release(&p);
    return rc;
}

cm_rc cm_agents_delete(const cm_options *opt, char **json, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    cm_engine *e = NULL;
    int lock = -1;
    store st;
    bool st_open = false;
    json_t *removed = NULL, *paths = json_array();
    bool found = false;
    *json = NULL;
    if (!opt || !opt->agent_id || !*opt->agent_id)
        return cm_seterr(err, errlen, CM_EINVAL, "which agent? (an agent id is required)");
    if (!paths) return CM_ENOMEM;
    cm_options o = *opt;
    o.workspace = NULL; /* the agent's own: nothing of it is read */
    CHECK(cm_engine_open(&o, &e, err, errlen));
    const cm_config *c = &e->cfg;
    if (watcher_alive(c->store_path))
        FAIL(CM_EBUSY,
             "a `clawmem watch`, `mcp` or `serve` keeps agent %s's index; stop it (or drop "
             "the agent from its config) first",
             c->agent_id);
    if (is_pg(c)) {
        int64_t rows[STORE_PG_NTABLES];
        rc = cm_store_open_pg(&st, c->store_dsn, c->agent_id, c->fts_tokenizer, STORE_ANY_AGENT,
                              e->busy_ms, err, errlen);
        if (rc == CM_ENOTFOUND) { /* no tables at all */
            rc = CM_OK;
            memset(rows, 0, sizeof rows);
        } else {
            CHECK(rc);
            st_open = true;
            CHECK(cm_store_pg_drop_counted(&st, rows, err, errlen));
        }
        for (size_t k = 0; k < STORE_PG_NTABLES; k++)
            found |= rows[k] > 0;
        removed = pg_rows(rows);
    } else {
        struct stat sb;
        CHECK(cm_engine_lock_acquire(e, true, &lock, err, errlen));
        cm_engine_close_store(e);
        found = stat(c->store_path, &sb) == 0;
        removed = found ? lite_rows(c->store_path, c->fts_tokenizer) : json_object();
        if (!removed) removed = json_object(); /* not an index we can read: removed all the same */
        static const char *const tails[] = {"", "-wal", "-shm", "-journal", ".watch"};
        for (size_t i = 0; i < ARRAY_LEN(tails); i++)
            CHECK(remove_one(c->store_path, tails[i], paths, err, errlen));
        cm_store_remove_leftovers(c->store_path, true);
        CHECK(remove_one(c->store_path, ".lock", paths, err, errlen)); /* held: ours */
    }
    json_t *doc = json_pack("{s:s,s:s,s:b,s:O,s:O}", "agent", c->agent_id, "store",
                            is_pg(c) ? "postgres" : "sqlite", "found", found, "removed",
                            removed ? removed : json_null(), "paths", paths);
    *json = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!*json) FAIL(CM_ENOMEM, "out of memory");
out:
    if (st_open) cm_store_close(&st);
    cm_engine_lock_release(lock);
    cm_engine_close(e);
    json_decref(removed);
    json_decref(paths);
    return rc;
}
