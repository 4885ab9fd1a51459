/*
 * qmd_sidecar.c — the QMD sidecar of one agent: its home under
 * <stateDir>/agents/<agentId>/qmd/ (XDG_CONFIG_HOME, QMD_CONFIG_DIR and
 * XDG_CACHE_HOME point there on every run), its collections (the default
 * memory files, memory.qmd.paths[], the sessions export), `qmd update` and
 * `qmd embed` on boot and every update.interval on a thread of its own, and
 * the sessions export. The last update's time is kept in the home
 * (clawmem-state) so that short-lived processes share update.debounceMs.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/fs.h"
#include "../session/extract.h"
#include "qmd.h"

extern char **environ;

#define QMD_EMBED_BACKOFF_BASE_MS 60000
#define QMD_EMBED_BACKOFF_MAX_MS  3600000
#define QMD_RECORD                "clawmem-collections"
#define QMD_STATE                 "clawmem-state"

static int64_t now_ms(const qmd_sidecar *q)
{
    if (q->clock) return q->clock(q->clock_ctx);
    struct timespec ts; /* wall clock: the last update is shared across processes */
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool run_ok(const qmd_run_result *r)
{
    return !r->timed_out && !r->too_much && r->status == 0;
}

/* 2026.3.22's collection names: lower-case, runs of other characters "-". */
static void sanitise(const char *in, char *out, size_t cap)
{
    size_t k = 0;
    bool dash = false;
    for (const char *p = in; *p && k + 1 < cap; p++) {
        char c = *p;
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
        if (!ok) {
            if (!dash && k) out[k++] = '-';
            dash = true;
            continue;
        }
        out[k++] = c;
        dash = false;
    }
    while (k && out[k - 1] == '-')
        k--;
    out[k] = 0;
}

static cm_rc add_collection(qmd_sidecar *q, const char *base, const char *root, const char *pattern,
                            bool sessions)
{
    char b[128], name[200], agent[64];
    sanitise(base, b, sizeof b);
    sanitise(q->cfg->agent_id, agent, sizeof agent);
    snprintf(name, sizeof name, "%s-%s", *b ? b : "collection", *agent ? agent : "agent");
    char unique[220];
    snprintf(unique, sizeof unique, "%s", name);
    for (int k = 2; cm_backend_qmd_sidecar_collection(q, unique); k++)
        snprintf(unique, sizeof unique, "%s-%d", name, k);
    qmd_collection *v = realloc(q->cols, (q->ncols + 1) * sizeof *v);
    if (!v) return CM_ENOMEM;
    q->cols = v;
    qmd_collection *c = &v[q->ncols];
    memset(c, 0, sizeof *c);
    c->sessions = sessions;
    c->name = cm_strdup(unique);
    c->root = cm_strdup(root);
    c->pattern = cm_strdup(pattern);
    q->ncols++;
    return c->name && c->root && c->pattern ? CM_OK : CM_ENOMEM;
}

const qmd_collection *cm_backend_qmd_sidecar_collection(const qmd_sidecar *q, const char *name)
{
    for (size_t i = 0; i < q->ncols; i++)
        if (!strcmp(q->cols[i].name, name)) return &q->cols[i];
    return NULL;
}

/* A path as memory.qmd.paths writes it: ~, absolute, or workspace-relative. */
static char *resolve_path(const char *raw, const char *ws)
{
    buf b = BUF_INIT;
    char *x = cm_fs_expand_home(raw);
    if (!x) return NULL;
    if (x[0] != '/') {
        if (cm_fs_join(&b, ws, x)) {
            free(x);
            cm_buf_release(&b);
            return NULL;
        }
        free(x);
        x = cm_buf_detach(&b);
    }
    if (x) cm_fs_normalise(x);
    return x;
}

static cm_rc build_env(qmd_sidecar *q)
{
    static const char *const drop[] = {
        "XDG_CONFIG_HOME=", "XDG_CACHE_HOME=", "QMD_CONFIG_DIR=", "INDEX_PATH=", "NO_COLOR="};
    size_t n = 0;
    while (environ && environ[n])
        n++;
    q->env = calloc(n + 6, sizeof *q->env);
    if (!q->env) return CM_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool skip = false;
        for (size_t d = 0; d < ARRAY_LEN(drop); d++)
            skip |= !strncmp(environ[i], drop[d], strlen(drop[d]));
        if (skip) continue;
        if (!(q->env[k++] = cm_strdup(environ[i]))) return CM_ENOMEM;
    }
    buf b = BUF_INIT;
    const char *vals[][2] = {{"XDG_CONFIG_HOME", q->xdg_config},
                             {"QMD_CONFIG_DIR", q->xdg_config},
                             {"XDG_CACHE_HOME", q->xdg_cache},
                             {"NO_COLOR", "1"}};
    for (size_t i = 0; i < ARRAY_LEN(vals); i++) {
        cm_buf_reset(&b);
        if (cm_buf_printf(&b, "%s=%s", vals[i][0], vals[i][1])) return CM_ENOMEM;
        if (!(q->env[k++] = cm_buf_detach(&b))) return CM_ENOMEM;
    }
    return CM_OK;
}

cm_rc cm_backend_qmd_sidecar_init(qmd_sidecar *q, const cm_config *cfg, const cm_logger *lg,
                                  qmd_clock_fn clock, void *clock_ctx, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    const cm_qmd_config *c = &cfg->qmd;
    buf b = BUF_INIT;
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    pthread_mutex_init(&q->procs.mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cv, &ca);
    pthread_condattr_destroy(&ca);
    q->cfg = cfg;
    if (lg) q->lg = *lg;
    q->clock = clock;
    q->clock_ctx = clock_ctx;
    /* only the first word of memory.qmd.command is run (as 2026.3.22) */
    const char *cmd = c->command && *c->command ? c->command : "qmd";
    while (*cmd == ' ' || *cmd == '\t')
        cmd++;
    size_t cl = strcspn(cmd, " \t");
    if (!cl) cmd = "qmd", cl = 3;
    char *word = cm_strndup(cmd, cl);
    if (!word) CHECK(CM_ENOMEM);
    if (word[0] == '~') {
        q->command = cm_fs_expand_home(word);
        free(word);
    } else {
        q->command = word;
    }
    q->mode = cm_strdup(c->search_mode ? c->search_mode : "search");
    CHECK(cm_buf_printf(&b, "%s/agents/%s/qmd", cfg->state_dir, cfg->agent_id));
    q->dir = cm_buf_detach(&b);
    CHECK(cm_buf_printf(&b, "%s/xdg-config", q->dir));
    q->xdg_config = cm_buf_detach(&b);
    CHECK(cm_buf_printf(&b, "%s/xdg-cache", q->dir));
    q->xdg_cache = cm_buf_detach(&b);
    if (!q->command || !q->mode || !q->dir || !q->xdg_config || !q->xdg_cache) CHECK(CM_ENOMEM);
    CHECK(build_env(q));
    if (c->include_default_memory) {
        CHECK(cm_buf_printf(&b, "%s/memory", cfg->workspace));
        CHECK(add_collection(q, "memory-root", cfg->workspace, "MEMORY.md", false));
        CHECK(add_collection(q, "memory-alt", cfg->workspace, "memory.md", false));
        CHECK(add_collection(q, "memory-dir", b.data, "**/*.md", false));
        cm_buf_reset(&b);
    }
    for (size_t i = 0; i < c->npaths; i++) {
        char *root = resolve_path(c->paths[i].path, cfg->workspace);
        if (!root) CHECK(CM_ENOMEM);
        char base[64];
        snprintf(base, sizeof base, "custom-%zu", i + 1);
        const char *name = c->paths[i].name && *c->paths[i].name ? c->paths[i].name : base;
        const char *pat =
            c->paths[i].pattern && *c->paths[i].pattern ? c->paths[i].pattern : "**/*.md";
        rc = add_collection(q, name, root, pat, false);
        free(root);
        CHECK(rc);
    }
    if (c->sessions_enabled) {
        if (c->sessions_export_dir)
            q->export_dir = resolve_path(c->sessions_export_dir, cfg->workspace);
        else if (!cm_buf_printf(&b, "%s/sessions", q->dir))
            q->export_dir = cm_buf_detach(&b);
        if (!q->export_dir) CHECK(CM_ENOMEM);
        CHECK(add_collection(q, "sessions", q->export_dir, "**/*.md", true));
    }
out:
    cm_buf_release(&b);
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    return rc;
}

cm_rc cm_backend_qmd_sidecar_run(qmd_sidecar *q, const char *const *args, int64_t timeout_ms,
                                 bool discard, qmd_run_result *res, char *err, size_t errlen)
{
    const char *argv[48];
    size_t n = 0;
    argv[n++] = q->command;
    for (size_t i = 0; args[i] && n + 1 < ARRAY_LEN(argv); i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    /* cwd: the workspace, as 2026.3.22 (a project .qmd/ above it is QMD's business) */
    const char *cwd = access(q->cfg->workspace, X_OK) == 0 ? q->cfg->workspace : q->dir;
    return cm_backend_qmd_run(argv, q->env, cwd, timeout_ms, discard, &q->procs, res, err, errlen);
}

/* Runs args and turns any failure into CM_EIO with one line in err. */
static cm_rc run_checked(qmd_sidecar *q, const char *const *args, const char *summary,
                         int64_t timeout_ms, bool discard, qmd_run_result *res, char *err,
                         size_t errlen)
{
    cm_rc rc = cm_backend_qmd_sidecar_run(q, args, timeout_ms, discard, res, err, errlen);
    if (rc || run_ok(res)) return rc;
    buf why = BUF_INIT;
    cm_backend_qmd_run_failure(res, summary, timeout_ms, &why);
    cm_seterr(err, errlen, CM_EIO, "%s", why.data ? why.data : summary);
    cm_buf_release(&why);
    return CM_EIO;
}

/* ---- collections ----------------------------------------------------------- */

static cm_rc record_text(const qmd_sidecar *q, buf *b)
{
    for (size_t i = 0; i < q->ncols; i++)
        if (cm_buf_printf(b, "%s\t%s\t%s\n", q->cols[i].name, q->cols[i].root, q->cols[i].pattern))
            return CM_ENOMEM;
    return CM_OK;
}

static void write_small(const char *dir, const char *name, const char *text)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    size_t n = strlen(text);
    bool ok = write(fd, text, n) == (ssize_t)n;
    close(fd);
    if (!ok || rename(tmp, path)) unlink(tmp);
}

/* The names `qmd collection list` prints ("name (qmd://name/)" lines) and
 * their "Pattern:" lines, as "name\tpattern\n". */
static cm_rc listed_collections(const char *out, buf *names)
{
    const char *s = out;
    char cur[200] = "";
    while (s && *s) {
        const char *e = strchr(s, '\n');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        char line[600];
        snprintf(line, sizeof line, "%.*s", (int)CM_MIN(n, sizeof line - 1), s);
        char *p = line;
        while (*p == ' ')
            p++;
        char *uri = strstr(p, " (qmd://");
        if (uri && p == line) {
            snprintf(cur, sizeof cur, "%.*s", (int)(uri - p), p);
        } else if (*cur && !strncasecmp(p, "pattern:", 8)) {
            p += 8;
            while (*p == ' ')
                p++;
            size_t pl = strlen(p);
            while (pl && (p[pl - 1] == ' ' || p[pl - 1] == '\r'))
                p[--pl] = 0;
            if (cm_buf_printf(names, "%s\t%s\n", cur, p)) return CM_ENOMEM;
            cur[0] = 0;
        }
        s = e ? e + 1 : NULL;
    }
    return CM_OK;
}

static bool has_glob(const char *p)
{
    return strpbrk(p, "*?[") != NULL;
}

/* Registers the collections QMD lacks (or holds with another pattern, or our
 * record says another root). Skipped when the record of the last
 * registration matches and QMD's config still exists. */
static cm_rc ensure_collections(qmd_sidecar *q, bool check, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf want = BUF_INIT, have = BUF_INIT, listed = BUF_INIT, path = BUF_INIT, recorded = BUF_INIT;
    qmd_run_result res = {0};
    char e2[512];
    CHECK(record_text(q, &want));
    CHECK(cm_buf_printf(&path, "%s/" QMD_RECORD, q->dir));
    bool have_rec = cm_fs_read_file(path.data, 1 << 20, &have, e2, sizeof e2) == CM_OK;
    cm_buf_reset(&path);
    CHECK(cm_buf_printf(&path, "%s/index.yml", q->xdg_config));
    bool have_yml = access(path.data, F_OK) == 0;
    if (!check && have_rec && have_yml && have.len == want.len &&
        (!want.len || !memcmp(have.data, want.data, want.len)))
        goto out;
    const char *list[] = {"collection", "list", NULL};
    CHECK(run_checked(q, list, "qmd collection list", q->cfg->qmd.command_timeout_ms, false, &res,
                      err, errlen));
    CHECK(cm_buf_addc(&listed, '\n')); /* every entry follows a '\n': matched whole */
    CHECK(listed_collections(res.out.data, &listed));
    CHECK(cm_buf_addc(&recorded, '\n'));
    if (have_rec && have.len) CHECK(cm_buf_add(&recorded, have.data, have.len));
    cm_backend_qmd_run_result_release(&res);
    for (size_t i = 0; i < q->ncols; i++) {
        const qmd_collection *c = &q->cols[i];
        char line[700], name_tab[220];
        snprintf(line, sizeof line, "\n%s\t%s\n", c->name, c->pattern);
        snprintf(name_tab, sizeof name_tab, "\n%s\t", c->name);
        bool same_pattern = strstr(listed.data, line) != NULL;
        bool named = strstr(listed.data, name_tab) != NULL;
        char rec[4600];
        snprintf(rec, sizeof rec, "\n%s\t%s\t%s\n", c->name, c->root, c->pattern);
        bool same_root = !have_rec || strstr(recorded.data, rec);
        if (same_pattern && same_root) continue;
        if (named) {
            const char *rm[] = {"collection", "remove", c->name, NULL};
            cm_backend_qmd_sidecar_run(q, rm, q->cfg->qmd.command_timeout_ms, true, &res, e2,
                                       sizeof e2);
            cm_backend_qmd_run_result_release(&res);
        }
        if (has_glob(c->pattern)) cm_fs_mkdirs(c->root, e2, sizeof e2);
        const char *add[] = {"collection", "add",    c->root,    "--name",
                             c->name,      "--mask", c->pattern, NULL};
        rc = run_checked(q, add, "qmd collection add", q->cfg->qmd.command_timeout_ms, true, &res,
                         err, errlen);
        cm_backend_qmd_run_result_release(&res);
        if (rc) {
            if (!strstr(err, "exists")) goto out;
            cm_logf(&q->lg, CM_LOG_WARN, "qmd collection add skipped for %s: %s", c->name, err);
            rc = CM_OK;
        }
    }
    write_small(q->dir, QMD_RECORD, want.data);
out:
    cm_backend_qmd_run_result_release(&res);
    cm_buf_release(&want);
    cm_buf_release(&have);
    cm_buf_release(&listed);
    cm_buf_release(&recorded);
    cm_buf_release(&path);
    return rc;
}

cm_rc cm_backend_qmd_sidecar_repair(qmd_sidecar *q, char *err, size_t errlen)
{
    return ensure_collections(q, true, err, errlen);
}

/* ---- the persisted schedule state ---------------------------------------- */

static void load_state(qmd_sidecar *q)
{
    char path[4096], e2[256];
    buf b = BUF_INIT;
    snprintf(path, sizeof path, "%s/" QMD_STATE, q->dir);
    if (cm_fs_read_file(path, 4096, &b, e2, sizeof e2) == CM_OK && b.data) {
        long long u = 0, e = 0;
        if (sscanf(b.data, "update %lld embed %lld", &u, &e) == 2) {
            q->last_update_ms = u;
            q->last_embed_ms = e;
        }
    }
    cm_buf_release(&b);
}

static void save_state(qmd_sidecar *q)
{
    char text[128];
    snprintf(text, sizeof text, "update %lld embed %lld\n", (long long)q->last_update_ms,
             (long long)q->last_embed_ms);
    write_small(q->dir, QMD_STATE, text);
}

/* ---- the sessions export ---------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

cm_rc cm_backend_qmd_export_sessions(qmd_sidecar *q, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf path = BUF_INIT, text = BUF_INIT, md = BUF_INIT, old = BUF_INIT;
    char **keep = NULL;
    size_t nkeep = 0;
    DIR *d = NULL;
    char e2[256];
    if (!q->export_dir) return CM_OK;
    CHECK(cm_fs_mkdirs(q->export_dir, err, errlen));
    int64_t cutoff = q->cfg->qmd.sessions_retention_days > 0
                         ? now_ms(q) - (int64_t)q->cfg->qmd.sessions_retention_days * 86400000
                         : INT64_MIN;
    d = opendir(q->cfg->sessions_dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t nl = strlen(de->d_name);
        if (nl < 7 || strcmp(de->d_name + nl - 6, ".jsonl") != 0 || de->d_name[0] == '.') continue;
        cm_buf_reset(&path);
        CHECK(cm_fs_join(&path, q->cfg->sessions_dir, de->d_name));
        struct stat st;
        if (lstat(path.data, &st) || !S_ISREG(st.st_mode)) continue;
        int64_t mtime = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
        if (mtime < cutoff) continue;
        cm_buf_reset(&text);
        if (cm_fs_read_file(path.data, 64u << 20, &text, e2, sizeof e2)) continue;
        session_doc doc;
        memset(&doc, 0, sizeof doc);
        if (cm_session_extract(text.data, text.len, &doc)) continue;
        cm_buf_reset(&md);
        char base[256];
        snprintf(base, sizeof base, "%.*s", (int)(nl - 6), de->d_name);
        rc = cm_buf_printf(&md, "# Session %s\n\n%s\n", base,
                           doc.text.len ? doc.text.data : "(empty)");
        cm_session_doc_release(&doc);
        CHECK(rc);
        char name[300];
        snprintf(name, sizeof name, "%s.md", base);
        char **kv = realloc(keep, (nkeep + 1) * sizeof *kv);
        if (!kv || !(kv[nkeep] = cm_strdup(name))) {
            if (kv) keep = kv;
            CHECK(CM_ENOMEM);
        }
        keep = kv;
        nkeep++;
        cm_buf_reset(&path);
        CHECK(cm_fs_join(&path, q->export_dir, name));
        cm_buf_reset(&old);
        if (cm_fs_read_file(path.data, 64u << 20, &old, e2, sizeof e2) == CM_OK &&
            old.len == md.len && !memcmp(old.data, md.data, md.len))
            continue; /* unchanged */
        write_small(q->export_dir, name, md.data);
    }
    if (d) closedir(d);
    d = NULL;
    if (nkeep) qsort(keep, nkeep, sizeof *keep, cmp_str);
    /* files of sessions no longer exported (removed, or past retention) */
    d = opendir(q->export_dir);
    while (d && (de = readdir(d))) {
        size_t nl = strlen(de->d_name);
        if (nl < 4 || strcmp(de->d_name + nl - 3, ".md") != 0) continue;
        const char *key = de->d_name;
        if (nkeep && bsearch(&key, keep, nkeep, sizeof *keep, cmp_str)) continue;
        cm_buf_reset(&path);
        CHECK(cm_fs_join(&path, q->export_dir, de->d_name));
        unlink(path.data);
    }
out:
    if (d) closedir(d);
    for (size_t i = 0; i < nkeep; i++)
        free(keep[i]);
    free(keep);
    cm_buf_release(&path);
    cm_buf_release(&text);
    cm_buf_release(&md);
    cm_buf_release(&old);
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    return rc;
}

/* ---- updates ---------------------------------------------------------------- */

static bool embed_due(qmd_sidecar *q, bool force, int64_t now)
{
    if (!strcmp(q->mode, "search")) return false; /* BM25 needs no vectors */
    if (q->embed_backoff_until_ms && now < q->embed_backoff_until_ms) return false;
    int64_t iv = q->cfg->qmd.embed_interval_ms;
    return force || !q->last_embed_ms || (iv > 0 && now - q->last_embed_ms > iv);
}

/* The update itself (q->updating is set by the caller). */
static cm_rc do_update(qmd_sidecar *q, bool force, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    qmd_run_result res = {0};
    char e2[512];
    if (q->export_dir && cm_backend_qmd_export_sessions(q, e2, sizeof e2))
        cm_logf(&q->lg, CM_LOG_WARN, "qmd sessions export failed: %s", e2);
    const char *up[] = {"update", NULL};
    rc = run_checked(q, up, "qmd update", q->cfg->qmd.update_timeout_ms, true, &res, err, errlen);
    cm_backend_qmd_run_result_release(&res);
    int64_t now = now_ms(q);
    if (!rc && embed_due(q, force, now)) {
        const char *em[] = {"embed", NULL};
        if (run_checked(q, em, "qmd embed", q->cfg->qmd.embed_timeout_ms, true, &res, e2,
                        sizeof e2)) {
            q->embed_failures++;
            int64_t delay = QMD_EMBED_BACKOFF_BASE_MS;
            for (int i = 1; i < q->embed_failures && delay < QMD_EMBED_BACKOFF_MAX_MS; i++)
                delay *= 2;
            delay = CM_MIN(delay, QMD_EMBED_BACKOFF_MAX_MS);
            q->embed_backoff_until_ms = now + delay;
            cm_logf(&q->lg, CM_LOG_WARN, "qmd embed failed: %s; backing off for %llds", e2,
                    (long long)(delay / 1000));
        } else {
            q->last_embed_ms = now;
            q->embed_failures = 0;
            q->embed_backoff_until_ms = 0;
        }
        cm_backend_qmd_run_result_release(&res);
    }
    pthread_mutex_lock(&q->mu);
    q->last_update_ms = now;
    pthread_mutex_unlock(&q->mu);
    save_state(q);
    return rc;
}

/* The lock of <home>/update.lock that serialises updates across processes
 * (an MCP server's two engines, `clawmem index` beside a gateway): its
 * descriptor; -1 when another process holds it and wait is false; -2 when
 * there is no lock to take (the update goes ahead). */
static int lock_updates(const qmd_sidecar *q, bool wait)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/update.lock", q->dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return -2;
    int r;
    while ((r = flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB))) && errno == EINTR) {
    }
    if (r) {
        close(fd);
        return errno == EWOULDBLOCK ? -1 : -2;
    }
    return fd;
}

cm_rc cm_backend_qmd_sidecar_update(qmd_sidecar *q, bool force, char *err, size_t errlen)
{
    pthread_mutex_lock(&q->mu);
    unsigned drops = q->drops;
    while (q->updating && force && !q->stop)
        pthread_cond_wait(&q->cv, &q->mu);
    /* another update runs, or the index was dropped while this one waited
     * (an update asked for before the drop: the next sync builds it) */
    if (q->updating || q->stop || q->drops != drops) {
        pthread_mutex_unlock(&q->mu);
        return CM_OK;
    }
    q->updating = true; /* this thread is the updater now */
    pthread_mutex_unlock(&q->mu);
    int fd = lock_updates(q, force);
    bool skip = fd == -1; /* another process is updating */
    if (!skip) {
        pthread_mutex_lock(&q->mu);
        load_state(q); /* an update by another process counts for the debounce */
        skip = !force && q->cfg->qmd.debounce_ms > 0 && q->last_update_ms &&
               now_ms(q) - q->last_update_ms < q->cfg->qmd.debounce_ms;
        pthread_mutex_unlock(&q->mu);
    }
    cm_rc rc = skip ? CM_OK : do_update(q, force, err, errlen);
    if (fd >= 0) close(fd);
    pthread_mutex_lock(&q->mu);
    q->updating = false;
    if (!skip) {
        q->updates++;
        if (rc)
            snprintf(q->last_update_error, sizeof q->last_update_error, "%s", err);
        else
            q->last_update_error[0] = 0;
    }
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

cm_rc cm_backend_qmd_sidecar_drop(qmd_sidecar *q, int *dropped, char *err, size_t errlen)
{
    static const char *const tails[] = {"", "-wal", "-shm"};
    cm_rc rc = CM_OK;
    *dropped = 0;
    pthread_mutex_lock(&q->mu); /* after this process's update, as an updater */
    while (q->updating && !q->stop)
        pthread_cond_wait(&q->cv, &q->mu);
    q->updating = true;
    q->drops++;
    q->kick = q->force = false; /* an update asked for before (the boot's) is off */
    pthread_mutex_unlock(&q->mu);
    int fd = lock_updates(q, true); /* and after any other process's */
    for (size_t i = 0; i < ARRAY_LEN(tails) && !rc; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/qmd/index.sqlite%s", q->xdg_cache, tails[i]);
        if (unlink(path) == 0) {
            if (!i) *dropped = 1;
        } else if (errno != ENOENT) {
            char clip[FS_CLIP_MAX + 1];
            rc = cm_seterr(err, errlen, CM_EIO, "cannot remove %s: %s", cm_fs_clip(path, clip),
                           strerror(errno));
        }
    }
    if (!rc) { /* the next process's update and embedding run whatever the debounce */
        char path[4200];
        snprintf(path, sizeof path, "%s/" QMD_STATE, q->dir);
        unlink(path);
    }
    if (fd >= 0) close(fd);
    pthread_mutex_lock(&q->mu);
    /* the embedding is due again; the schedule keeps its time (an update it
     * ran now would start a rebuild no one asked for) */
    if (!rc) q->last_embed_ms = 0;
    q->updating = false;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

static void *schedule_main(void *arg)
{
    qmd_sidecar *q = arg;
    char err[512];
    int64_t iv = q->cfg->qmd.interval_ms;
    pthread_mutex_lock(&q->mu);
    while (!q->stop) {
        bool due = q->kick;
        if (!due && iv > 0) due = now_ms(q) - q->last_update_ms >= iv;
        if (!due) {
            /* real time to wait: what the clock says is left, at most a minute */
            int64_t left = iv > 0 ? iv - (now_ms(q) - q->last_update_ms) : 60000;
            left = CM_MAX(CM_MIN(left, 60000), 10);
            struct timespec ts = cm_deadline_in(CLOCK_MONOTONIC, left);
            pthread_cond_timedwait(&q->cv, &q->mu, &ts);
            continue;
        }
        bool force = q->force;
        q->kick = q->force = false;
        pthread_mutex_unlock(&q->mu);
        if (cm_backend_qmd_sidecar_update(q, force, err, sizeof err))
            cm_logf(&q->lg, CM_LOG_WARN, "qmd update failed: %s", err);
        pthread_mutex_lock(&q->mu);
        if (!q->stop && iv <= 0) break; /* a boot update only */
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

cm_rc cm_backend_qmd_sidecar_start(qmd_sidecar *q, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    const cm_qmd_config *c = &q->cfg->qmd;
    CHECK(cm_fs_mkdirs(q->xdg_config, err, errlen));
    CHECK(cm_fs_mkdirs(q->xdg_cache, err, errlen));
    if (q->export_dir) CHECK(cm_fs_mkdirs(q->export_dir, err, errlen));
    load_state(q);
    CHECK(ensure_collections(q, false, err, errlen));
    bool boot_bg = false;
    if (c->on_boot) {
        if (c->wait_for_boot_sync) {
            if (cm_backend_qmd_sidecar_update(q, false, err, errlen)) {
                cm_logf(&q->lg, CM_LOG_WARN, "qmd boot update failed: %s", err);
                if (strstr(err, "cannot run")) CHECK(CM_EIO);
            }
        } else {
            boot_bg = !(c->debounce_ms > 0 && q->last_update_ms &&
                        now_ms(q) - q->last_update_ms < c->debounce_ms);
        }
    }
    if (c->interval_ms > 0 || boot_bg) {
        pthread_mutex_lock(&q->mu); /* the thread reads these fields under it */
        q->kick = boot_bg;
        int e = pthread_create(&q->thread, NULL, schedule_main, q);
        q->thread_started = e == 0;
        pthread_mutex_unlock(&q->mu);
        if (e) FAIL(CM_EIO, "qmd: cannot start the update thread");
    }
out:
    return rc;
}

void cm_backend_qmd_sidecar_poke(qmd_sidecar *q)
{
    pthread_mutex_lock(&q->mu);
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

void cm_backend_qmd_sidecar_release(qmd_sidecar *q)
{
    pthread_mutex_lock(&q->mu);
    bool started = q->thread_started;
    q->stop = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    if (started) {
        cm_backend_qmd_kill_all(&q->procs); /* an update in progress ends now */
        pthread_join(q->thread, NULL);
    }
    for (size_t i = 0; i < q->ncols; i++) {
        free(q->cols[i].name);
        free(q->cols[i].root);
        free(q->cols[i].pattern);
    }
    free(q->cols);
    for (char **e = q->env; e && *e; e++)
        free(*e);
    free(q->env);
    free(q->command);
    free(q->mode);
    free(q->dir);
    free(q->xdg_config);
    free(q->xdg_cache);
    free(q->export_dir);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    pthread_mutex_destroy(&q->procs.mu);
    memset(q, 0, sizeof *q);
}
