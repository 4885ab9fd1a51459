/*
 * health.c — /healthz and /readyz of `clawmem serve` (health.h). The
 * stores are gathered once at start from the agents' configs: one probe per
 * distinct PostgreSQL DSN and per SQLite index directory, whatever the
 * number of agents. The answer of a probe is kept HEALTH_CACHE_MS; probes
 * run outside the lock (a connect may take HEALTH_CONNECT_S), one at a time.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/config/config.h"
#include "../src/store/store.h"
#include "health.h"

typedef struct target {
    bool pg;
    char *where; /* the DSN (a secret: never shown) or the directory */
} target;

struct serve_health {
    cm_options opt;
    target *t;
    size_t n;
    pthread_mutex_t mu;    /* the cached answer */
    pthread_mutex_t probe; /* one probe at a time */
    int64_t checked_ms;
    bool checked, ready;
};

static void H_log(const serve_health *h, cm_log_level lv, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void H_log(const serve_health *h, cm_log_level lv, const char *fmt, ...)
{
    if (!h->opt.log) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    h->opt.log(h->opt.log_ctx, lv, msg);
}

static cm_rc add_target(serve_health *h, bool pg, const char *where)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->t[i].pg == pg && !strcmp(h->t[i].where, where)) return CM_OK;
    target *nv = realloc(h->t, (h->n + 1) * sizeof *nv);
    if (!nv) return CM_ENOMEM;
    h->t = nv;
    if (!(h->t[h->n].where = cm_strdup(where))) return CM_ENOMEM;
    h->t[h->n++].pg = pg;
    return CM_OK;
}

cm_rc serve_health_open(const cm_options *opt, char *const *agents, size_t n,
                        const char *default_agent, serve_health **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    serve_health *h = calloc(1, sizeof *h);
    *out = NULL;
    if (!h) return CM_ENOMEM;
    h->opt = *opt;
    pthread_mutex_init(&h->mu, NULL);
    pthread_mutex_init(&h->probe, NULL);
    for (size_t i = 0; i < n && !rc; i++) {
        cm_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cm_config_args a = {agents[i], strcmp(agents[i], default_agent) ? NULL : opt->workspace,
                            opt->config_path, opt->state_dir};
        cm_logger lg = {NULL, NULL};
        rc = cm_config_init(&a, &lg, &cfg, err, errlen);
        if (!rc && cfg.store_driver && !strcmp(cfg.store_driver, "postgres")) {
            rc = add_target(h, true, cfg.store_dsn);
        } else if (!rc) {
            char *dir = cm_fs_dirname(cfg.store_path);
            rc = dir ? add_target(h, false, dir) : CM_ENOMEM;
            free(dir);
        }
        cm_config_release(&cfg);
    }
    if (rc) {
        serve_health_free(h);
        return rc;
    }
    *out = h;
    return CM_OK;
}

void serve_health_free(serve_health *h)
{
    if (!h) return;
    for (size_t i = 0; i < h->n; i++) {
        if (h->t[i].pg) memset(h->t[i].where, 0, strlen(h->t[i].where)); /* the DSN: wiped */
        free(h->t[i].where);
    }
    free(h->t);
    pthread_mutex_destroy(&h->mu);
    pthread_mutex_destroy(&h->probe);
    free(h);
}

bool serve_health_path(const char *path)
{
    return !strcmp(path, "/healthz") || !strcmp(path, "/readyz");
}

/* Every store answers. A SQLite directory that does not exist yet is
 * created by the first index: its parent must be there. */
static bool probe(serve_health *h)
{
    for (size_t i = 0; i < h->n; i++) {
        char err[CM_ERR_SIZE];
        const target *t = &h->t[i];
        if (t->pg) {
            if (cm_store_pg_ping(t->where, HEALTH_CONNECT_S, err, sizeof err) != CM_OK) {
                H_log(h, CM_LOG_WARN, "readyz: not ready: %s", err);
                return false;
            }
            continue;
        }
        struct stat st;
        char *parent = cm_fs_dirname(t->where);
        bool ok = (stat(t->where, &st) == 0 && S_ISDIR(st.st_mode)) ||
                  (parent && stat(parent, &st) == 0 && S_ISDIR(st.st_mode));
        free(parent);
        if (!ok) {
            H_log(h, CM_LOG_WARN, "readyz: not ready: index directory %s is missing", t->where);
            return false;
        }
    }
    return true;
}

static bool ready(serve_health *h, int64_t now_ms)
{
    pthread_mutex_lock(&h->probe);
    pthread_mutex_lock(&h->mu);
    bool fresh = h->checked && now_ms - h->checked_ms < HEALTH_CACHE_MS && now_ms >= h->checked_ms;
    bool r = h->ready;
    pthread_mutex_unlock(&h->mu);
    if (!fresh) {
        r = probe(h); /* outside mu: a connect may take seconds */
        pthread_mutex_lock(&h->mu);
        h->checked = true;
        h->checked_ms = now_ms;
        h->ready = r;
        pthread_mutex_unlock(&h->mu);
    }
    pthread_mutex_unlock(&h->probe);
    return r;
}

void serve_health_answer(serve_health *h, const httpd_req *rq, httpd_conn *c,
                         const serve_figures *f, int64_t now_ms)
{
    static const char *const hdrs[] = {"Content-Type: application/json", "Cache-Control: no-store",
                                       NULL};
    bool head = !strcmp(rq->method, "HEAD");
    if (!head && strcmp(rq->method, "GET") != 0) {
        static const char msg[] = "Method Not Allowed: GET or HEAD\n";
        cm_net_httpd_respond(c, 405,
                             (const char *const[]){"Allow: GET, HEAD",
                                                   "Content-Type: text/plain; charset=utf-8", NULL},
                             msg, sizeof msg - 1);
        return;
    }
    int status = 200;
    json_t *j;
    if (!strcmp(rq->path, "/readyz")) {
        bool ok = ready(h, now_ms);
        status = ok ? 200 : 503;
        j = json_pack("{s:s,s:I}", "status", ok ? "ready" : "not ready", "stores",
                      (json_int_t)h->n);
    } else {
        j = json_pack("{s:s,s:{s:I,s:I,s:f,s:f},s:I}", "status", "ok", "engines", "open",
                      (json_int_t)f->engines, "max", (json_int_t)f->max_engines, "estimatedMb",
                      (double)f->bytes / 1048576.0, "maxMb", (double)f->max_bytes / 1048576.0,
                      "sessions", (json_int_t)f->sessions);
        /* over PostgreSQL: the agents whose index this replica's watcher
         * writes, and those whose watcher on another replica it follows */
        if (j)
            json_object_set_new(j, "watchers",
                                json_pack("{s:I,s:I}", "writing", (json_int_t)f->writing,
                                          "following", (json_int_t)f->following));
    }
    char *body = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(4)) : NULL;
    json_decref(j);
    cm_net_httpd_respond(c, status, hdrs, head ? NULL : body, head || !body ? 0 : strlen(body));
    free(body);
}
