/*
 * qmd_backend.c — memory.backend = "qmd": memory_search answered by the QMD
 * sidecar (src/backend/qmd.h), its hits mapped to the builtin engine's (paths,
 * lines, scores, texts) so that tools/ shapes the same payload (snippets,
 * citations); memory_get reads qmd/<collection>/<path> from that
 * collection's root. The builtin backend stays open beside it: when QMD
 * is missing, fails, hangs past limits.timeoutMs or prints what does not
 * parse, the builtin index answers, with the reason in the payload's
 * "fallback" and in status, and the next search tries QMD again — except
 * after a timeout: a hanging QMD would cost every search limits.timeoutMs,
 * so the builtin index answers at once for a while (1 minute, doubling up
 * to 15 after each further timeout), then QMD is asked again.
 */
#include <jansson.h>
#include <sqlite3.h>
#include <string.h>

#include "../backend/qmd.h"
#include "../base/fs.h"
#include "../base/utf8.h"
#include "engine_int.h"

struct engine_qmd {
    qmd_sidecar sc;
    bool sc_init, started;
    pthread_mutex_t start_mu; /* one start at a time (MCP: searches and syncs on two threads) */
    pthread_mutex_t mu;
    char reason[512]; /* why the builtin index answered last, "" when QMD serves */
    /* after a timeout: QMD is not asked before skip_until (ms, the sidecar's
     * clock); backoff_ms the pause that timeout set */
    int64_t skip_until, backoff_ms;
    char skip_why[512];
};

#define QMD_BACKOFF_MIN_MS (60 * 1000)
#define QMD_BACKOFF_MAX_MS (15 * 60 * 1000)

static int64_t (*test_clock)(void *);
static void *test_clock_ctx;

void cm_engine_qmd_test_clock(int64_t (*clock)(void *ctx), void *ctx)
{
    test_clock = clock;
    test_clock_ctx = ctx;
}

int cm_engine_qmd_updates(cm_engine *e)
{
    if (!e->qmd || !e->qmd->sc_init) return -1;
    pthread_mutex_lock(&e->qmd->sc.mu);
    int n = (int)e->qmd->sc.updates;
    pthread_mutex_unlock(&e->qmd->sc.mu);
    return n;
}

void cm_engine_qmd_poke(cm_engine *e)
{
    if (e->qmd && e->qmd->sc_init) cm_backend_qmd_sidecar_poke(&e->qmd->sc);
}

static void set_reason(struct engine_qmd *q, const char *why)
{
    pthread_mutex_lock(&q->mu);
    snprintf(q->reason, sizeof q->reason, "%s", why ? why : "");
    pthread_mutex_unlock(&q->mu);
}

static int64_t qmd_now(const struct engine_qmd *q)
{
    return q->sc.clock ? q->sc.clock(q->sc.clock_ctx) : cm_wall_ms();
}

/* Why QMD is not asked now (a recent timeout), or false. */
static bool backing_off(struct engine_qmd *q, char *why, size_t n)
{
    int64_t now = qmd_now(q);
    pthread_mutex_lock(&q->mu);
    bool skip = now < q->skip_until;
    if (skip)
        snprintf(why, n, "%s (QMD is asked again in %lld s)", q->skip_why,
                 (long long)((q->skip_until - now + 999) / 1000));
    pthread_mutex_unlock(&q->mu);
    return skip;
}

/* After a search: a timeout starts or doubles the pause, anything else ends
 * it. The pause (ms). */
static int64_t note_outcome(struct engine_qmd *q, bool timed_out, const char *why)
{
    int64_t now = qmd_now(q);
    pthread_mutex_lock(&q->mu);
    if (timed_out) {
        q->backoff_ms = q->backoff_ms ? CM_MIN(q->backoff_ms * 2, (int64_t)QMD_BACKOFF_MAX_MS)
                                      : QMD_BACKOFF_MIN_MS;
        q->skip_until = now + q->backoff_ms;
        snprintf(q->skip_why, sizeof q->skip_why, "%s", why);
    } else {
        q->backoff_ms = q->skip_until = 0;
    }
    int64_t pause = q->backoff_ms;
    pthread_mutex_unlock(&q->mu);
    return pause;
}

/* Starts the sidecar when it has not started yet (at open, and again on
 * each search until it does). */
static cm_rc ensure_started(cm_engine *e, char *err, size_t errlen)
{
    struct engine_qmd *q = e->qmd;
    cm_rc rc = CM_OK;
    pthread_mutex_lock(&q->start_mu);
    pthread_mutex_lock(&q->mu);
    bool started = q->started;
    pthread_mutex_unlock(&q->mu);
    if (!started) rc = cm_backend_qmd_sidecar_start(&q->sc, err, errlen);
    if (!started && !rc) {
        pthread_mutex_lock(&q->mu);
        q->started = true;
        pthread_mutex_unlock(&q->mu);
    }
    pthread_mutex_unlock(&q->start_mu);
    return rc;
}

static cm_rc qmd_open(cm_engine *e, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    char why[512];
    CHECK(cm_engine_builtin.open(e, err, errlen)); /* the fallback */
    if (!(e->qmd = calloc(1, sizeof *e->qmd))) FAIL(CM_ENOMEM, "out of memory");
    pthread_mutex_init(&e->qmd->mu, NULL);
    pthread_mutex_init(&e->qmd->start_mu, NULL);
    CHECK(cm_backend_qmd_sidecar_init(&e->qmd->sc, &e->cfg, &e->lg, test_clock, test_clock_ctx, err,
                                      errlen));
    e->qmd->sc_init = true;
    if (ensure_started(e, why, sizeof why)) {
        cm_logf(&e->lg, CM_LOG_WARN, "qmd memory unavailable; the builtin index answers: %s", why);
        set_reason(e->qmd, why);
    }
out:
    return rc;
}

static void qmd_close(cm_engine *e)
{
    if (e->qmd) {
        if (e->qmd->sc_init) cm_backend_qmd_sidecar_release(&e->qmd->sc);
        pthread_mutex_destroy(&e->qmd->mu);
        pthread_mutex_destroy(&e->qmd->start_mu);
        free(e->qmd);
        e->qmd = NULL;
    }
    cm_engine_builtin.close(e);
}

/* ---- memory_search ----------------------------------------------------------- */

/* Code points of s, cut to at most max (the byte length of the prefix). */
static size_t prefix_chars(const char *s, size_t max)
{
    size_t i = 0, k = 0;
    while (s[i] && k < max) {
        i++;
        while (s[i] && ((unsigned char)s[i] & 0xC0) == 0x80)
            i++;
        k++;
    }
    return i;
}

/* A hit's name in payloads: workspace-relative when its file lies inside the
 * workspace, else "qmd/<collection>/<path>". */
static cm_rc hit_path(const cm_engine *e, const qmd_collection *c, const char *file, buf *out)
{
    buf abs = BUF_INIT;
    cm_rc rc = cm_fs_join(&abs, c->root, file);
    if (rc) return rc;
    cm_fs_normalise(abs.data);
    size_t wl = strlen(e->cfg.workspace);
    if (!strncmp(abs.data, e->cfg.workspace, wl) && abs.data[wl] == '/')
        rc = cm_buf_adds(out, abs.data + wl + 1);
    else
        rc = cm_buf_printf(out, "qmd/%s/%s", c->name, file);
    cm_buf_release(&abs);
    return rc;
}

static void free_hits(search_hit *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].path);
        free(v[i].source);
        free(v[i].text);
    }
    free(v);
}

/* A hit that names only its docid (a prefix of the document's hash): its
 * collection and path from QMD's index, read-only (the hinted collection
 * first, as 2026.3.22 picks). False when not found. */
static bool resolve_docid(cm_engine *e, const char *docid, const char *hint, char **col,
                          char **file)
{
    char path[4200];
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    bool found = false;
    *col = *file = NULL;
    if (!docid || !*docid || strchr(docid, '%') || strchr(docid, '_')) return false;
    snprintf(path, sizeof path, "%s/qmd/index.sqlite", e->qmd->sc.xdg_cache);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_busy_timeout(db, 1000) == SQLITE_OK &&
        sqlite3_prepare_v2(db,
                           "SELECT collection, path FROM documents WHERE hash LIKE ?1 || '%' "
                           "AND active = 1 ORDER BY collection = ?2 DESC, id LIMIT 1",
                           -1, &st, NULL) == SQLITE_OK &&
        sqlite3_bind_text(st, 1, docid, -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_bind_text(st, 2, hint ? hint : "", -1, SQLITE_STATIC) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        const char *c = (const char *)sqlite3_column_text(st, 0);
        const char *f = (const char *)sqlite3_column_text(st, 1);
        if (c && f) {
            *col = cm_strdup(c);
            *file = cm_strdup(f);
            found = *col && *file;
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    if (!found) {
        free(*col);
        free(*file);
        *col = *file = NULL;
    }
    return found;
}

/* Maps QMD's hits into v (owned strings): paths named, snippets cut to
 * maxSnippetChars, below min_score dropped; then, when both memory and
 * sessions hits are there, alternated by source (best source first), cut
 * to limit, and cut to maxInjectedChars of snippets in all. */
static cm_rc map_hits(cm_engine *e, qmd_hits *h, double min_score, int limit, search_hit **out,
                      size_t *nout)
{
    cm_rc rc = CM_OK;
    const cm_qmd_config *qc = &e->cfg.qmd;
    search_hit *v = calloc(h->n + 1, sizeof *v), *w = NULL;
    size_t n = 0;
    buf p = BUF_INIT;
    if (!v) return CM_ENOMEM;
    for (size_t i = 0; i < h->n; i++) {
        qmd_hit *x = &h->v[i];
        if ((!x->collection || !x->file || !*x->file) && x->docid) {
            char *col, *file;
            if (resolve_docid(e, x->docid, x->collection, &col, &file)) {
                free(x->collection);
                free(x->file);
                x->collection = col;
                x->file = file;
            }
        }
        const qmd_collection *c =
            x->collection ? cm_backend_qmd_sidecar_collection(&e->qmd->sc, x->collection) : NULL;
        if (!c || !x->file || !*x->file) continue; /* not ours */
        if (x->score < min_score) continue;
        cm_buf_reset(&p);
        CHECK(hit_path(e, c, x->file, &p));
        search_hit *s = &v[n++];
        s->path = cm_buf_detach(&p);
        s->source = cm_strdup(c->sessions ? "sessions" : "memory");
        s->text = cm_strndup(x->snippet, prefix_chars(x->snippet, (size_t)qc->max_snippet_chars));
        if (!s->path || !s->source || !s->text) CHECK(CM_ENOMEM);
        s->start_line = x->start_line;
        s->end_line = x->end_line;
        s->score = s->text_score = x->score;
        s->has_text = true;
    }
    /* alternate sources when both are there */
    bool mem = false, ses = false;
    for (size_t i = 0; i < n; i++)
        *(strcmp(v[i].source, "sessions") ? &mem : &ses) = true;
    if (mem && ses) {
        if (!(w = calloc(n + 1, sizeof *w))) CHECK(CM_ENOMEM);
        const char *first = v[0].source; /* hits come best first */
        size_t k = 0, im = 0, is = 0;
        while (k < n) {
            for (int turn = 0; turn < 2 && k < n; turn++) {
                bool want_first = turn == 0;
                size_t *ix = (!strcmp(first, "sessions")) == want_first ? &is : &im;
                bool sessions = ix == &is;
                while (*ix < n && !strcmp(v[*ix].source, "sessions") != !sessions)
                    (*ix)++;
                if (*ix < n) w[k++] = v[(*ix)++];
            }
        }
        free(v);
        v = w;
        w = NULL;
    }
    size_t keep = CM_MIN(n, (size_t)CM_MAX(limit, 0));
    /* maxInjectedChars over all snippets */
    long budget = qc->max_injected_chars;
    size_t k = 0;
    for (; k < keep && budget > 0; k++) {
        size_t cut = prefix_chars(v[k].text, (size_t)budget);
        long chars = 0;
        for (size_t i = 0; i < cut; i++)
            chars += ((unsigned char)v[k].text[i] & 0xC0) != 0x80;
        if (v[k].text[cut]) {
            v[k].text[cut] = 0;
            k++;
            break;
        }
        budget -= chars;
    }
    for (size_t i = k; i < n; i++) {
        free(v[i].path);
        free(v[i].source);
        free(v[i].text);
    }
    n = k;
out:
    cm_buf_release(&p);
    if (rc) {
        free_hits(v, n);
        v = NULL;
        n = 0;
    }
    *out = v;
    *nout = n;
    return rc;
}

/* One search through QMD; CM_EIO (why in err) when QMD did not answer,
 * CM_ETIMEOUT when it did not in limits.timeoutMs. */
static cm_rc qmd_query(cm_engine *e, const char *query, int limit, qmd_hits *hits, char *err,
                       size_t errlen)
{
    cm_rc rc = CM_OK;
    qmd_sidecar *sc = &e->qmd->sc;
    qmd_run_result res = {0};
    buf why = BUF_INIT;
    const char *argv[64];
    char nbuf[64];
    char **names = calloc(sc->ncols + 1, sizeof *names);
    if (!names) return CM_ENOMEM;
    for (size_t i = 0; i < sc->ncols; i++)
        names[i] = sc->cols[i].name;
    const char *mode = sc->mode;
    int64_t tmo = e->cfg.qmd.timeout_ms;
    bool repaired = false;
    for (int attempt = 0; attempt < 3; attempt++) {
        cm_backend_qmd_search_argv(mode, query, limit, names, sc->ncols, argv, ARRAY_LEN(argv),
                                   nbuf);
        cm_backend_qmd_run_result_release(&res);
        CHECK(cm_backend_qmd_sidecar_run(sc, argv, tmo, false, &res, err, errlen));
        bool ok = !res.timed_out && !res.too_much && res.status == 0;
        if (!ok && strcmp(mode, "query") != 0 &&
            (cm_backend_qmd_refused_flags(res.err.data) ||
             cm_backend_qmd_refused_flags(res.out.data))) {
            cm_logf(&e->lg, CM_LOG_WARN,
                    "qmd %s does not support the flags; retrying the search with qmd query", mode);
            mode = "query";
            continue;
        }
        if (!ok && !repaired && res.err.data && strcasestr(res.err.data, "collection") &&
            (strcasestr(res.err.data, "not found") || strcasestr(res.err.data, "does not exist"))) {
            /* removed behind our back: registered again, and the search retried once */
            cm_logf(&e->lg, CM_LOG_WARN,
                    "qmd search failed because a collection is missing; registering the "
                    "collections again and retrying");
            repaired = true;
            char e2[512];
            if (!cm_backend_qmd_sidecar_repair(sc, e2, sizeof e2)) continue;
        }
        if (!ok) {
            char summary[64];
            snprintf(summary, sizeof summary, "qmd %s", mode);
            CHECK(cm_backend_qmd_run_failure(&res, summary, tmo, &why));
            FAIL(res.timed_out ? CM_ETIMEOUT : CM_EIO, "%s", why.data);
        }
        rc = cm_backend_qmd_parse_hits(res.out.data, res.err.data, hits, err, errlen);
        if (rc == CM_EINVAL) rc = CM_EIO;
        break;
    }
out:
    cm_backend_qmd_run_result_release(&res);
    cm_buf_release(&why);
    free(names);
    return rc;
}

/* The builtin engine's answer, with why QMD did not answer (tools/ puts it in
 * the payload's "fallback"). */
static cm_rc fallback_search(cm_engine *e, const char *query, const cm_search_opts *opts,
                             const char *session_key, const char *why, engine_result *out,
                             char *err, size_t errlen)
{
    cm_logf(&e->lg, CM_LOG_WARN, "qmd memory failed; the builtin index answers: %s", why);
    set_reason(e->qmd, why);
    cm_rc rc = cm_builtin_search(e, query, opts, session_key, out, err, errlen);
    if (!rc && !(out->qmd_why = cm_strdup(why))) rc = CM_ENOMEM;
    return rc;
}

static cm_rc qmd_search(cm_engine *e, const char *query, const cm_search_opts *opts,
                        const char *session_key, engine_result *out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    qmd_hits hits = {0};
    char why[1024] = "";
    memset(out, 0, sizeof *out);
    if (!query) query = "";
    snprintf(out->provider, sizeof out->provider, "qmd");
    snprintf(out->model, sizeof out->model, "qmd");
    if (!cm_backend_qmd_scope_allowed(&e->cfg.qmd, session_key)) {
        qmd_scope_key k;
        cm_backend_qmd_scope_parse(session_key, &k);
        cm_logf(&e->lg, CM_LOG_WARN,
                "qmd search denied by scope (channel=%s, chatType=%s, session=%.200s)",
                *k.channel ? k.channel : "unknown", *k.chat_type ? k.chat_type : "unknown",
                session_key && *session_key ? session_key : "<none>");
        goto out; /* no results */
    }
    const char *qs = query;
    while (*qs == ' ' || *qs == '\t' || *qs == '\n' || *qs == '\r')
        qs++;
    if (!*qs || !e->cfg.enabled) goto out; /* no results */
    int limit = e->cfg.qmd.max_results;
    if (opts && opts->max_results > 0) limit = CM_MIN(limit, opts->max_results);
    double min_score = opts && opts->min_score >= 0 ? opts->min_score : 0;
    if (backing_off(e->qmd, why, sizeof why)) { /* logged at the timeout */
        set_reason(e->qmd, why);
        rc = cm_builtin_search(e, query, opts, session_key, out, err, errlen);
        if (!rc && !(out->qmd_why = cm_strdup(why))) rc = CM_ENOMEM;
        goto out;
    }
    rc = ensure_started(e, why, sizeof why);
    if (!rc) rc = qmd_query(e, qs, limit, &hits, why, sizeof why);
    if (rc == CM_ENOMEM) CHECK(rc);
    if (rc != CM_ETIMEOUT) note_outcome(e->qmd, false, NULL);
    if (rc) {
        if (rc == CM_ETIMEOUT)
            cm_logf(&e->lg, CM_LOG_WARN,
                    "qmd timed out; the builtin index answers without asking it for %lld s",
                    (long long)(note_outcome(e->qmd, true, why) / 1000));
        rc = fallback_search(e, query, opts, session_key, why, out, err, errlen);
        goto out;
    }
    set_reason(e->qmd, NULL);
    CHECK(map_hits(e, &hits, min_score, limit, &out->v, &out->n));
out:
    cm_backend_qmd_hits_release(&hits);
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    return rc;
}

/* ---- sync and status ----------------------------------------------------------- */

static cm_rc qmd_sync(cm_engine *e, unsigned flags, cm_progress_fn progress, void *progress_ctx,
                      cm_sync_stats *stats, char *err, size_t errlen)
{
    /* the builtin index is the fallback: kept current too */
    cm_rc rc = cm_builtin_sync(e, flags, progress, progress_ctx, stats, err, errlen);
    if (flags & CM_SYNC_NOWAIT) return rc; /* a search's sync: QMD updates on its schedule */
    char why[512];
    cm_rc q = ensure_started(e, why, sizeof why);
    if (!q) q = cm_backend_qmd_sidecar_update(&e->qmd->sc, true, why, sizeof why);
    if (q) {
        cm_logf(&e->lg, CM_LOG_WARN, "qmd update failed: %s", why);
        set_reason(e->qmd, why);
    }
    return rc;
}

/* Active documents per collection in QMD's index (read-only), into o. */
static void add_counts(cm_engine *e, json_t *o)
{
    char path[4200];
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    snprintf(path, sizeof path, "%s/qmd/index.sqlite", e->qmd->sc.xdg_cache);
    json_t *by = json_object();
    long long total = 0;
    if (by && sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_busy_timeout(db, 1000) == SQLITE_OK &&
        sqlite3_prepare_v2(db,
                           "SELECT collection, COUNT(*) FROM documents WHERE active = 1 "
                           "GROUP BY collection",
                           -1, &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW) {
            const char *c = (const char *)sqlite3_column_text(st, 0);
            long long k = sqlite3_column_int64(st, 1);
            if (c) json_object_set_new(by, c, json_integer(k));
            total += k;
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    json_object_set_new(o, "documents", json_integer(total));
    if (by) json_object_set_new(o, "documentsByCollection", by);
}

static cm_rc qmd_status(cm_engine *e, int deep, char **json, char *err, size_t errlen)
{
    cm_rc rc = cm_builtin_status(e, deep, json, err, errlen);
    if (rc) return rc;
    json_t *o = json_loads(*json, 0, NULL), *q = json_object(), *cols = json_array();
    if (!json_is_object(o) || !q || !cols) {
        json_decref(o);
        json_decref(q);
        json_decref(cols);
        return CM_OK;
    }
    struct engine_qmd *m = e->qmd;
    char reason[512];
    pthread_mutex_lock(&m->mu);
    snprintf(reason, sizeof reason, "%s", m->reason);
    pthread_mutex_unlock(&m->mu);
    qmd_sidecar *sc = &m->sc;
    json_object_set_new(o, "backend", json_string(*reason ? "builtin" : "qmd"));
    if (*reason) {
        json_t *f = json_object();
        json_object_set_new(f, "from", json_string("qmd"));
        json_object_set_new(f, "reason", json_string(reason));
        json_object_set_new(o, "fallback", f);
    }
    json_object_set_new(q, "command", json_string(sc->command));
    json_object_set_new(q, "searchMode", json_string(sc->mode));
    json_object_set_new(q, "home", json_string(sc->dir));
    for (size_t i = 0; i < sc->ncols; i++) {
        json_t *c = json_object();
        json_object_set_new(c, "name", json_string(sc->cols[i].name));
        json_object_set_new(c, "path", json_string(sc->cols[i].root));
        json_object_set_new(c, "pattern", json_string(sc->cols[i].pattern));
        json_object_set_new(c, "kind", json_string(sc->cols[i].sessions ? "sessions" : "memory"));
        json_array_append_new(cols, c);
    }
    json_object_set_new(q, "collections", cols);
    pthread_mutex_lock(&sc->mu);
    int64_t last = sc->last_update_ms;
    char uerr[256];
    snprintf(uerr, sizeof uerr, "%s", sc->last_update_error);
    bool updating = sc->updating;
    pthread_mutex_unlock(&sc->mu);
    json_object_set_new(q, "lastUpdateAt", last ? json_integer(last) : json_null());
    json_object_set_new(q, "updating", json_boolean(updating));
    if (*uerr) json_object_set_new(q, "lastUpdateError", json_string(uerr));
    add_counts(e, q);
    json_object_set_new(o, "qmd", q);
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!s) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    cm_free(*json);
    *json = s;
    return CM_OK;
}

/* ---- memory_get ------------------------------------------------------------------ */

static cm_rc qmd_get(cm_engine *e, const char *path, long from, long offset, long lines,
                     memfile_text *out, char *err, size_t errlen)
{
    const qmd_sidecar *sc = &e->qmd->sc;
    if (!strncmp(path, "qmd/", 4)) {
        const char *c = path + 4, *slash = strchr(c, '/');
        if (!slash || slash == c || !slash[1])
            return cm_seterr(err, errlen, CM_EPATH,
                             "%.200s: invalid qmd path (qmd/<collection>/<path>)", path);
        char name[220];
        snprintf(name, sizeof name, "%.*s", (int)CM_MIN((size_t)(slash - c), 200), c);
        const qmd_collection *col = cm_backend_qmd_sidecar_collection(sc, name);
        if (!col) return cm_seterr(err, errlen, CM_EPATH, "unknown qmd collection: %.200s", name);
        return cm_index_memfile_read_beneath(col->root, slash + 1, path, from, offset, lines, out,
                                             err, errlen);
    }
    cm_rc rc =
        cm_index_memfile_read(&e->cfg, path, strlen(path), from, offset, lines, out, err, errlen);
    if (rc != CM_EPATH) return rc;
    /* a workspace-relative path of a collection inside the workspace */
    buf abs = BUF_INIT;
    char e2[256];
    if (path[0] == '/' || cm_fs_join(&abs, e->cfg.workspace, path)) {
        cm_buf_release(&abs);
        return rc;
    }
    cm_fs_normalise(abs.data);
    for (size_t i = 0; i < sc->ncols; i++) {
        const char *root = sc->cols[i].root;
        size_t rl = strlen(root);
        if (!strcmp(root, e->cfg.workspace))
            continue; /* the memory files: cm_index_memfile_read's rules */
        if (strncmp(abs.data, root, rl) != 0 || abs.data[rl] != '/') continue;
        cm_rc r2 = cm_index_memfile_read_beneath(root, abs.data + rl + 1, path, from, offset, lines,
                                                 out, e2, sizeof e2);
        if (r2 != CM_EPATH) {
            if (r2) cm_seterr(err, errlen, r2, "%s", e2);
            cm_buf_release(&abs);
            return r2;
        }
    }
    cm_buf_release(&abs);
    return rc;
}

/* QMD's own index (the builtin one is the caller's). */
static cm_rc qmd_drop(cm_engine *e, int *dropped, char *err, size_t errlen)
{
    *dropped = 0;
    if (!e->qmd || !e->qmd->sc_init) return CM_OK;
    return cm_backend_qmd_sidecar_drop(&e->qmd->sc, dropped, err, errlen);
}

const engine_backend cm_engine_qmd_backend = {
    "qmd", qmd_open, qmd_sync, qmd_search, qmd_status, qmd_close, qmd_get, qmd_drop,
};
