/*
 * reload.c — the config reloaded while the gateway runs (reload.h): the
 * changed paths and their kinds, the reload applied to the runtime, and the
 * reloader's thread (an inotify watch of the config files' directories and
 * an eventfd for requests and stop, polled together).
 */
#include "reload.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

/* ---- what a changed path needs --------------------------------------------- */

/* First match wins (a prefix matches itself and what is beneath it). After
 * 2026.3.22's BASE_RELOAD_RULES, narrowed to what clawmem reads per message
 * from the snapshot; the channels are S_chan_kind's. */
static const struct {
    const char *prefix;
    gw_reload_kind kind;
} S_rules[] = {
    {"gateway.reload", GW_RKEY_HOT}, /* the reloader's own settings */
    {"gateway.remote", GW_RKEY_NONE},
    {"gateway", GW_RKEY_RESTART}, /* port, bind, auth, controlUi: the listener */
    {"messages", GW_RKEY_HOT},
    {"session.maintenance", GW_RKEY_RESTART}, /* the session stores read it at open */
    {"session.store", GW_RKEY_RESTART},
    {"session", GW_RKEY_HOT},
    {"commands", GW_RKEY_HOT},
    {"bindings", GW_RKEY_HOT},
    /* agents.defaults.* the gateway reads per message (the rest is the
     * agent's, read when it is first opened) */
    {"agents.defaults.typingMode", GW_RKEY_HOT},
    {"agents.defaults.typingIntervalSeconds", GW_RKEY_HOT},
    {"agents.defaults.humanDelay", GW_RKEY_HOT},
    {"agents.defaults.blockStreamingDefault", GW_RKEY_HOT},
    {"agents.defaults.blockStreamingBreak", GW_RKEY_HOT},
    {"agents.defaults.blockStreamingChunk", GW_RKEY_HOT},
    {"agents.defaults.blockStreamingCoalesce", GW_RKEY_HOT},
    {"agents.defaults.envelopeTimezone", GW_RKEY_HOT},
    {"agents.defaults.envelopeTimestamp", GW_RKEY_HOT},
    {"agents.defaults.userTimezone", GW_RKEY_HOT},
    {"meta", GW_RKEY_NONE},
    {"wizard", GW_RKEY_NONE},
};

/* A channel's keys that its connection reads when it is opened at start. */
static const char *const S_chan_wire[] = {"botToken",    "tokenFile", "apiRoot",    "apiBaseUrl",
                                          "enabled",     "proxy",     "webhookUrl", "webhookSecret",
                                          "webhookPath", "network"};

static bool S_under(const char *path, const char *prefix)
{
    size_t n = strlen(prefix);
    return !strncmp(path, prefix, n) && (path[n] == '\0' || path[n] == '.');
}

/* channels, channels.<ch>[.accounts.<a>][.<key>…]: a channel or account
 * added or removed, or a key of its wire, needs a restart (the channel is
 * opened at start); the rest (policies, allowlists, groups, streaming,
 * limits, prefixes) is read per message. */
static gw_reload_kind S_chan_kind(const char *path)
{
    const char *p = path + strlen("channels");
    if (!*p) return GW_RKEY_RESTART;
    const char *key = strchr(p + 1, '.'); /* after channels.<ch> */
    if (!key) return GW_RKEY_RESTART;
    key++;
    if (!strncmp(key, "accounts", 8) && (key[8] == '.' || !key[8])) {
        if (!key[8]) return GW_RKEY_RESTART;
        key = strchr(key + 9, '.');
        if (!key) return GW_RKEY_RESTART;
        key++;
    }
    size_t n = strcspn(key, ".");
    for (size_t i = 0; i < ARRAY_LEN(S_chan_wire); i++)
        if (strlen(S_chan_wire[i]) == n && !strncmp(key, S_chan_wire[i], n)) return GW_RKEY_RESTART;
    return GW_RKEY_HOT;
}

gw_reload_kind cm_gw_reload_kind(const char *path)
{
    if (S_under(path, "channels")) return S_chan_kind(path);
    for (size_t i = 0; i < ARRAY_LEN(S_rules); i++)
        if (S_under(path, S_rules[i].prefix)) return S_rules[i].kind;
    return GW_RKEY_RESTART;
}

static cm_rc S_plan_add(gw_reload_plan *p, const char *path)
{
    buf *b;
    size_t *n;
    switch (cm_gw_reload_kind(path)) {
    case GW_RKEY_HOT:
        b = &p->hot, n = &p->nhot;
        break;
    case GW_RKEY_NONE:
        b = &p->none, n = &p->nnone;
        break;
    default:
        b = &p->restart, n = &p->nrestart;
        break;
    }
    if ((*n && cm_buf_adds(b, ", ")) || cm_buf_adds(b, path)) return CM_ENOMEM;
    (*n)++;
    return CM_OK;
}

/* One level of diffConfigPaths: path holds the prefix (its length restored
 * on return). */
static cm_rc S_diff(const json_t *a, const json_t *b, buf *path, gw_reload_plan *p)
{
    if (a == b) return CM_OK;
    if (json_is_object(a) && json_is_object(b)) {
        size_t len = path->len;
        const char *k;
        const json_t *v;
        for (int side = 0; side < 2; side++) {
            const json_t *o = side ? b : a, *other = side ? a : b;
            json_object_foreach((json_t *)o, k, v)
            {
                if (side && json_object_get(other, k)) continue; /* seen from a */
                if ((len && cm_buf_adds(path, ".")) || cm_buf_adds(path, k)) return CM_ENOMEM;
                cm_rc rc = S_diff(json_object_get(a, k), json_object_get(b, k), path, p);
                path->len = len;
                if (path->cap) path->data[len] = '\0';
                if (rc) return rc;
            }
        }
        return CM_OK;
    }
    if (a && b && json_equal((json_t *)a, (json_t *)b)) return CM_OK;
    return S_plan_add(p, path->len ? path->data : "<root>");
}

void cm_gw_reload_plan_release(gw_reload_plan *plan)
{
    cm_buf_release(&plan->hot);
    cm_buf_release(&plan->restart);
    cm_buf_release(&plan->none);
    plan->nhot = plan->nrestart = plan->nnone = 0;
}

cm_rc cm_gw_reload_plan_build(const json_t *prev, const json_t *next, gw_reload_plan *plan)
{
    cm_gw_reload_plan_release(plan);
    json_t *empty = json_object();
    if (!empty) return CM_ENOMEM;
    buf path = BUF_INIT;
    cm_rc rc = S_diff(prev ? prev : empty, next ? next : empty, &path, plan);
    cm_buf_release(&path);
    json_decref(empty);
    return rc;
}

void cm_gw_reload_settings(const cm_rtcfg *cfg, gw_reload_mode *mode, int64_t *debounce_ms)
{
    int m = cfg ? cfg->gateway.reload_mode : -1;
    int64_t d = cfg ? cfg->gateway.reload_debounce_ms : CM_RT_UNSET;
    *mode =
        m >= CM_RT_RELOAD_OFF && m <= CM_RT_RELOAD_HYBRID ? (gw_reload_mode)m : GW_RELOAD_HYBRID;
    *debounce_ms = d >= 0 ? d : GW_RELOAD_DEBOUNCE_MS;
}

/* ---- the reloader ----------------------------------------------------------- */

typedef struct S_watched {
    int wd;       /* the inotify watch of dir, or -1 */
    bool missing; /* dir absent (or gone, or moved away): re-added when it is back */
    char *dir, *name;
} S_watched;

struct gw_reloader {
    gw_runtime *rt;
    char *agent_id, *workspace, *config_path, *state_dir;
    bool config_found;
    cm_logger log;
    S_watched w[2];
    size_t nw;
    _Atomic int mode;
    _Atomic int64_t debounce_ms;
    int efd, ifd; /* eventfd (requests, stop); inotify, or -1 */
    pthread_t thr;
    bool started;
    atomic_bool stop;
    pthread_mutex_t mu; /* guards count */
    pthread_cond_t cv;
    uint64_t count;
};

static void S_take_settings(gw_reloader *r, const cm_rtcfg *cfg)
{
    gw_reload_mode m;
    int64_t d;
    cm_gw_reload_settings(cfg, &m, &d);
    atomic_store(&r->mode, (int)m);
    atomic_store(&r->debounce_ms, d);
}

static cm_rc S_dup(char **dst, const char *s)
{
    if (!s) return CM_OK;
    return (*dst = cm_strdup(s)) ? CM_OK : CM_ENOMEM;
}

cm_rc cm_gw_reloader_new(const gw_reloader_opts *o, gw_reloader **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    *out = NULL;
    gw_reloader *r = calloc(1, sizeof *r);
    if (!r) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    r->efd = r->ifd = -1;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->rt = o->rt;
    r->config_found = o->config_found;
    if (o->log) r->log = *o->log;
    CHECK(S_dup(&r->agent_id, o->args.agent_id));
    CHECK(S_dup(&r->workspace, o->args.workspace));
    CHECK(S_dup(&r->config_path, o->args.config_path));
    CHECK(S_dup(&r->state_dir, o->args.state_dir));
    for (size_t i = 0; i < ARRAY_LEN(o->watch); i++) {
        const char *p = o->watch[i];
        if (!p || !*p) continue;
        const char *slash = strrchr(p, '/');
        S_watched *w = &r->w[r->nw];
        w->wd = -1;
        w->dir = slash ? cm_strndup(p, slash == p ? 1 : (size_t)(slash - p)) : cm_strdup(".");
        w->name = cm_strdup(slash ? slash + 1 : p);
        r->nw++;
        if (!w->dir || !w->name) CHECK(CM_ENOMEM);
    }
    cm_rtcfg *cur = cm_gw_runtime_config(r->rt);
    S_take_settings(r, cur);
    cm_rtcfg_unref(cur);
    *out = r;
    r = NULL;
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_gw_reloader_free(r);
    return rc;
}

cm_rc cm_gw_reloader_apply(gw_reloader *r, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    cm_config nc = {0};
    gw_reload_plan plan = {.hot = BUF_INIT, .restart = BUF_INIT, .none = BUF_INIT};
    cm_rtcfg *cur = NULL;
    const cm_logger *lg = r->log.fn ? &r->log : NULL;
    cm_config_args ca = {r->agent_id, r->workspace, r->config_path, r->state_dir};
    rc = cm_config_init(&ca, lg, &nc, err, errlen);
    if (rc) {
        cm_logf(lg, CM_LOG_ERROR, "config reload skipped (invalid config): %s", err);
        goto out;
    }
    if (r->config_found && !nc.config_found) {
        cm_logf(lg, CM_LOG_WARN, "config reload skipped (config file not found)");
        FAIL(CM_ENOTFOUND, "config file not found: %s", nc.config_path);
    }
    S_take_settings(r, nc.rt);
    cur = cm_gw_runtime_config(r->rt);
    CHECK(cm_gw_reload_plan_build(cur ? cur->root : NULL, nc.rt->root, &plan));
    if (!plan.nhot && !plan.nrestart && !plan.nnone) goto out; /* nothing changed */
    if (plan.nhot || plan.nrestart)
        cm_logf(lg, CM_LOG_INFO, "config change detected; evaluating reload (%s%s%s)",
                plan.hot.data, plan.nhot && plan.nrestart ? ", " : "", plan.restart.data);
    if (atomic_load(&r->mode) == GW_RELOAD_RESTART) {
        cm_logf(lg, CM_LOG_WARN,
                "config reload: gateway.reload.mode=restart: nothing applied; restart the "
                "gateway to apply the change");
        goto out;
    }
    if (plan.nrestart)
        cm_logf(lg, CM_LOG_WARN, "config reload requires gateway restart for: %s",
                plan.restart.data);
    cm_gw_runtime_reload(r->rt, nc.rt);
    if (plan.nhot) cm_logf(lg, CM_LOG_INFO, "config hot reload applied (%s)", plan.hot.data);
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_rtcfg_unref(cur);
    cm_gw_reload_plan_release(&plan);
    cm_config_release(&nc);
    return rc;
}

#define S_DIR_EVENTS                                                                              \
    (IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB | \
     IN_DELETE_SELF | IN_MOVE_SELF)

/* Watches w->dir: true when it is watched now. An absent directory is
 * marked missing (tried again later); another failure is logged once. */
static bool S_watch(gw_reloader *r, S_watched *w, bool log_failure)
{
    w->wd = inotify_add_watch(r->ifd, w->dir, S_DIR_EVENTS);
    w->missing = w->wd < 0 && (errno == ENOENT || errno == ENOTDIR);
    if (w->wd < 0 && !w->missing && log_failure)
        cm_logf(r->log.fn ? &r->log : NULL, CM_LOG_WARN, "config watch of %s off: %s", w->dir,
                strerror(errno));
    return w->wd >= 0;
}

/* True when the inotify events in ev[0..n) name a watched file. A watched
 * directory removed or moved away loses its watch: marked missing, so the
 * loop watches the path again once a directory is back there. */
static bool S_events_match(gw_reloader *r, const char *ev, ssize_t n)
{
    bool hit = false;
    for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= n;) {
        const struct inotify_event *e = (const struct inotify_event *)(ev + off);
        if (e->mask & IN_Q_OVERFLOW) hit = true; /* events lost: one of them may be ours */
        for (size_t i = 0; i < r->nw; i++) {
            S_watched *w = &r->w[i];
            if (e->wd != w->wd || w->wd < 0) continue;
            if (e->len && !strcmp(e->name, w->name)) hit = true;
            if (e->mask & IN_MOVE_SELF) inotify_rm_watch(r->ifd, w->wd); /* follows the old name */
            if (e->mask & (IN_IGNORED | IN_MOVE_SELF | IN_DELETE_SELF)) {
                for (size_t j = 0; j < r->nw; j++) /* every file of that directory */
                    if (j != i && r->w[j].wd == e->wd) r->w[j].wd = -1, r->w[j].missing = true;
                w->wd = -1;
                w->missing = true;
                hit = true; /* the file went with it */
            }
        }
        off += (ssize_t)sizeof *e + e->len;
    }
    return hit;
}

/* Watches again the directories that were missing: true when one is back
 * (its file may have come with it: a reload is due). */
static bool S_rewatch(gw_reloader *r)
{
    bool back = false;
    for (size_t i = 0; r->ifd >= 0 && i < r->nw; i++)
        if (r->w[i].missing && S_watch(r, &r->w[i], true)) back = true;
    return back;
}

static bool S_any_missing(const gw_reloader *r)
{
    for (size_t i = 0; r->ifd >= 0 && i < r->nw; i++)
        if (r->w[i].missing) return true;
    return false;
}

static void S_ran(gw_reloader *r)
{
    pthread_mutex_lock(&r->mu);
    r->count++;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void *S_loop(void *arg)
{
    gw_reloader *r = arg;
    int64_t due = INT64_MAX; /* the debounced reload, monotonic ms */
    _Alignas(struct inotify_event) char ev[4096];
    while (!atomic_load(&r->stop)) {
        int64_t now = cm_now_ms();
        int timeout = due == INT64_MAX ? -1 : (int)CM_MIN(CM_MAX(due - now, 0), 60000);
        if (S_any_missing(r) && (timeout < 0 || timeout > GW_RELOAD_REWATCH_MS))
            timeout = GW_RELOAD_REWATCH_MS; /* look for the directory again */
        struct pollfd p[2] = {{r->efd, POLLIN, 0}, {r->ifd, POLLIN, 0}};
        int k = poll(p, r->ifd >= 0 ? 2 : 1, timeout);
        if (k < 0 && errno != EINTR) break;
        if (atomic_load(&r->stop)) break;
        bool now_please = false;
        if (k > 0 && (p[0].revents & POLLIN)) {
            uint64_t v;
            now_please = read(r->efd, &v, sizeof v) == (ssize_t)sizeof v;
        }
        if (k > 0 && r->ifd >= 0 && (p[1].revents & POLLIN)) {
            ssize_t n = read(r->ifd, ev, sizeof ev);
            if (n > 0 && S_events_match(r, ev, n) && atomic_load(&r->mode) != GW_RELOAD_OFF)
                due = cm_now_ms() + atomic_load(&r->debounce_ms); /* each event restarts it */
        }
        if (S_rewatch(r) && atomic_load(&r->mode) != GW_RELOAD_OFF)
            due = cm_now_ms() + atomic_load(&r->debounce_ms);
        if (!now_please && (due == INT64_MAX || cm_now_ms() < due)) continue;
        due = INT64_MAX;
        char err[1024];
        cm_gw_reloader_apply(r, err, sizeof err); /* logged there */
        S_ran(r);
    }
    return NULL;
}

cm_rc cm_gw_reloader_start(gw_reloader *r, char *err, size_t errlen)
{
    const cm_logger *lg = r->log.fn ? &r->log : NULL;
    r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->efd < 0) return cm_seterr(err, errlen, CM_EIO, "eventfd: %s", strerror(errno));
    r->ifd = r->nw ? inotify_init1(IN_CLOEXEC | IN_NONBLOCK) : -1;
    if (r->nw && r->ifd < 0)
        cm_logf(lg, CM_LOG_WARN, "config watch off (inotify: %s); SIGHUP still reloads",
                strerror(errno));
    for (size_t i = 0; r->ifd >= 0 && i < r->nw; i++)
        S_watch(r, &r->w[i], true);
    if (pthread_create(&r->thr, NULL, S_loop, r))
        return cm_seterr(err, errlen, CM_EIO, "cannot start the config reloader");
    r->started = true;
    return CM_OK;
}

void cm_gw_reloader_request(gw_reloader *r)
{
    if (!r || r->efd < 0) return;
    uint64_t one = 1;
    ssize_t n = write(r->efd, &one, sizeof one); /* async-signal-safe */
    (void)n;
}

uint64_t cm_gw_reloader_count(gw_reloader *r)
{
    pthread_mutex_lock(&r->mu);
    uint64_t n = r->count;
    pthread_mutex_unlock(&r->mu);
    return n;
}

bool cm_gw_reloader_wait(gw_reloader *r, uint64_t n, int64_t timeout_ms)
{
    struct timespec until = cm_deadline_in(CLOCK_REALTIME, timeout_ms);
    pthread_mutex_lock(&r->mu);
    while (r->count < n && pthread_cond_timedwait(&r->cv, &r->mu, &until) != ETIMEDOUT)
        ;
    bool ok = r->count >= n;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

void cm_gw_reloader_free(gw_reloader *r)
{
    if (!r) return;
    if (r->started) {
        atomic_store(&r->stop, true);
        cm_gw_reloader_request(r);
        pthread_join(r->thr, NULL);
    }
    if (r->efd >= 0) close(r->efd);
    if (r->ifd >= 0) close(r->ifd);
    for (size_t i = 0; i < r->nw; i++) {
        free(r->w[i].dir);
        free(r->w[i].name);
    }
    free(r->agent_id);
    free(r->workspace);
    free(r->config_path);
    free(r->state_dir);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}
