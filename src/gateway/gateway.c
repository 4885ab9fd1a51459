/*
 * gateway.c — `clawmem gateway` and `clawmem chat` behind the public API
 * (include/clawmem/gateway.h): the agents the runtime runs (one cm_agent
 * per worker and agent id: an engine is not thread safe), the channels
 * opened from the config, the status file, and the terminal chat client.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "../base/fs.h"
#include "../base/lockfile.h"
#include "../config/config.h"
#include "../config/secret.h"
#include "../agent/session_turn.h"
#include "../tools/exec.h"
#include "../net/http.h"
#include "gw_ws.h"
#include "http_channel.h"
#include "runtime.h"

/* ---- the agents ------------------------------------------------------------ */

typedef struct gw_agent_slot {
    int worker;
    char id[80];
    cm_agent *a;
} gw_agent_slot;

struct gw_agents {
    cm_options opt;
    char *agent_id0, *workspace, *config_path, *state_dir;
    pthread_mutex_t mu;
    gw_agent_slot *v;
    size_t n, cap;
};

cm_rc cm_gw_agents_new(const cm_options *opt, gw_agents **out)
{
    gw_agents *g = calloc(1, sizeof *g);
    *out = NULL;
    if (!g) return CM_ENOMEM;
    g->opt = *opt;
    g->workspace = opt->workspace ? cm_strdup(opt->workspace) : NULL;
    g->config_path = opt->config_path ? cm_strdup(opt->config_path) : NULL;
    g->state_dir = opt->state_dir ? cm_strdup(opt->state_dir) : NULL;
    g->opt.workspace = g->workspace;
    g->opt.config_path = g->config_path;
    g->opt.state_dir = g->state_dir;
    g->opt.agent_id = NULL;
    pthread_mutex_init(&g->mu, NULL);
    *out = g;
    return CM_OK;
}

void cm_gw_agents_free(gw_agents *g)
{
    if (!g) return;
    for (size_t i = 0; i < g->n; i++)
        cm_agent_close(g->v[i].a);
    free(g->v);
    free(g->workspace);
    free(g->config_path);
    free(g->state_dir);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

size_t cm_gw_agents_opened(gw_agents *g)
{
    pthread_mutex_lock(&g->mu);
    size_t n = g->n;
    pthread_mutex_unlock(&g->mu);
    return n;
}

/* The agent of (worker, id), opened on first use. */
static cm_agent *S_agent(gw_agents *g, int worker, const char *id, char *err, size_t errlen)
{
    pthread_mutex_lock(&g->mu);
    for (size_t i = 0; i < g->n; i++)
        if (g->v[i].worker == worker && !strcmp(g->v[i].id, id)) {
            cm_agent *a = g->v[i].a;
            pthread_mutex_unlock(&g->mu);
            return a;
        }
    pthread_mutex_unlock(&g->mu);
    cm_options o = g->opt;
    o.agent_id = id;
    /* Another agent than the default has its own workspace (agents.list). */
    if (strcmp(id, "main")) o.workspace = NULL;
    cm_agent *a = NULL;
    if (cm_agent_open(&o, &a, err, errlen)) return NULL;
    pthread_mutex_lock(&g->mu);
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 8;
        gw_agent_slot *v = realloc(g->v, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&g->mu);
            cm_agent_close(a);
            cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
            return NULL;
        }
        g->v = v;
        g->cap = cap;
    }
    g->v[g->n].worker = worker;
    snprintf(g->v[g->n].id, sizeof g->v[0].id, "%s", id);
    g->v[g->n].a = a;
    g->n++;
    pthread_mutex_unlock(&g->mu);
    return a;
}

cm_rc cm_gw_agents_run(void *ctx, const gw_run_req *rq, gw_run_res *out, char *err, size_t errlen)
{
    gw_agents *g = ctx;
    memset(out, 0, sizeof *out);
    cm_agent *a = S_agent(g, rq->worker, rq->agent_id, err, errlen);
    if (!a) return CM_EIO;
    char *json = NULL;
    agent_hooks hk = {rq->cancelled, rq->steer, rq->hook_ctx, rq->send, rq->session_send};
    /* the trusted inbound context of the system prompt (2026.3.22's
     * chat_id is "<channel>:<chat>") */
    buf chat = BUF_INIT;
    agent_inbound in = {NULL, rq->account && *rq->account ? rq->account : "default",
                        rq->channel, rq->channel, rq->channel,
                        rq->is_group ? "group" : "direct", rq->trusted};
    if (rq->channel && rq->peer && !cm_buf_printf(&chat, "%s:%s", rq->channel, rq->peer))
        in.chat_id = chat.data;
    cm_rc rc = cm_agent_turn_hooked(a, rq->session_key, rq->prompt, NULL, rq->on_delta,
                                    rq->delta_ctx, &hk, &in, &json, err,
                                    errlen);
    cm_buf_release(&chat);
    if (rc) return rc;
    json_t *o = json_loads(json, 0, NULL);
    cm_free(json);
    const char *reply = json_string_value(json_object_get(o, "reply"));
    out->text = cm_strdup(reply ? reply : "");
    out->silent = json_is_true(json_object_get(o, "silent"));
    snprintf(out->model, sizeof out->model, "%s",
             json_string_value(json_object_get(o, "model"))
                 ? json_string_value(json_object_get(o, "model"))
                 : "");
    json_decref(o);
    return out->text ? CM_OK : cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
}

/* ---- the gateway ------------------------------------------------------------ */

#define GW_MAX_OPEN 8

struct cm_gateway {
    cm_config cfg;
    gw_agents *agents;
    gw_runtime *rt;
    gw_channel *ch[GW_MAX_OPEN];
    size_t nch;
    gw_channel *http;
    gw_ws *ws; /* the gateway protocol and Control UI on the HTTP port */
    char *status_path;
    int64_t started;
    pthread_t status_thr;
    bool has_status_thr, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    cm_logger log;
    cm_log_fn log_fn; /* the caller's logger, copied: opt need not outlive the gateway */
    void *log_ctx;
};

static void log_to(void *ctx, cm_log_level level, const char *msg)
{
    const cm_options *o = ctx;
    if (o->log) o->log(o->log_ctx, level, msg);
}

/* The gateway's own log: the caller's, and logs.tail's lines. */
static void log_gw(void *ctx, cm_log_level level, const char *msg)
{
    cm_gateway *g = ctx;
    if (g->log_fn) g->log_fn(g->log_ctx, level, msg);
    if (g->ws) cm_gw_ws_log(g->ws, level, msg);
}

/* The channels the config enables, opened and registered with the runtime.
 * The HTTP channel runs when a gateway token is configured; Telegram when
 * channels.telegram has a botToken (telegram.c, wired in here). */
/* Opens the Telegram channel of account (NULL: the default one). */
static cm_rc S_open_telegram(cm_gateway *g, const json_t *root, const char *account, char *err,
                             size_t errlen)
{
    cm_rc rc = CM_OK;
    gw_channel *t = NULL;
    if (g->nch >= GW_MAX_OPEN)
        FAIL(CM_ECONFIG, "too many channel accounts (at most %d)", GW_MAX_OPEN);
    CHECK(cm_gw_telegram_open(root, account, g->cfg.state_dir, &t, err, errlen));
    cm_gw_telegram_set_logger(t, &g->log);
    g->ch[g->nch++] = t;
    CHECK(cm_gw_runtime_add_channel(g->rt, t, NULL, account, err, errlen));
out:
    return rc;
}

/* Whether the HTTP channel (and the gateway protocol on its port) runs. */
static bool S_http_wanted(const json_t *root)
{
    const json_t *hc = json_object_get(json_object_get(root, "channels"), "http");
    const json_t *gw = json_object_get(root, "gateway");
    return json_is_true(json_object_get(hc, "enabled")) ||
           (!json_is_false(json_object_get(hc, "enabled")) &&
            (json_object_get(json_object_get(gw, "auth"), "token") ||
             (getenv("QUANTUMCLAW_GATEWAY_TOKEN") && *getenv("QUANTUMCLAW_GATEWAY_TOKEN"))));
}

static cm_rc S_open_channels(cm_gateway *g, const cm_gateway_opts *go, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    const json_t *root = g->cfg.root;
    if (S_http_wanted(root)) {
        CHECK(cm_gw_http_open(root, go ? go->listen : NULL, &g->http, err, errlen));
        g->ch[g->nch++] = g->http;
        CHECK(cm_gw_runtime_add_channel(g->rt, g->http, NULL, NULL, err, errlen));
        CHECK(cm_gw_runtime_add_channel(g->rt, g->http, "terminal", NULL, err, errlen));
    }
    /* Telegram: channels.telegram's default account when it has a token
     * (botToken, tokenFile or $TELEGRAM_BOT_TOKEN), and each of its
     * accounts.<id>, unless enabled is false. */
    const json_t *tg = json_object_get(json_object_get(root, "channels"), "telegram");
    if (tg && !json_is_false(json_object_get(tg, "enabled"))) {
        const char *env = getenv("TELEGRAM_BOT_TOKEN");
        if (json_object_get(tg, "botToken") || json_object_get(tg, "tokenFile") || (env && *env))
            CHECK(S_open_telegram(g, root, NULL, err, errlen));
        const char *id;
        json_t *acc;
        json_object_foreach((json_t *)json_object_get(tg, "accounts"), id, acc)
        {
            if (!json_is_false(json_object_get(acc, "enabled")))
                CHECK(S_open_telegram(g, root, id, err, errlen));
        }
    }
    if (!g->nch)
        FAIL(CM_ECONFIG, "no channel is configured: set gateway.auth.token for the HTTP channel "
                         "(or channels.telegram.botToken)");
out:
    return rc;
}

static json_t *S_status_json(cm_gateway *g, bool running)
{
    json_t *o = cm_gw_runtime_status(g->rt);
    if (!o) return NULL;
    /* each Telegram account's last polling or sending failure ("" when none):
     * the runtime lists them in the order they were opened, as g->ch does */
    size_t i, k = 0;
    json_t *c;
    json_array_foreach(json_object_get(o, "channels"), i, c)
    {
        const char *name = json_string_value(json_object_get(c, "channel"));
        if (!name || strcmp(name, "telegram")) continue;
        while (k < g->nch && strcmp(g->ch[k]->ops->name, "telegram"))
            k++;
        if (k == g->nch) break;
        char why[512];
        cm_gw_telegram_last_error(g->ch[k++], why, sizeof why);
        json_object_set_new(c, "lastError", json_string(why));
    }
    json_object_set_new(o, "running", json_boolean(running));
    json_object_set_new(o, "pid", json_integer(getpid()));
    const char *addr = g->http ? cm_gw_http_address(g->http) : NULL;
    if (addr) json_object_set_new(o, "address", json_string(addr));
    json_object_set_new(o, "startedAt", json_integer(g->started));
    json_object_set_new(o, "updatedAt", json_integer(cm_wall_ms()));
    return o;
}

static json_t *S_ws_status(void *ctx)
{
    return S_status_json(ctx, true);
}

static char *S_status_text(cm_gateway *g, bool running)
{
    json_t *o = S_status_json(g, running);
    char *s = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

static char *S_http_status(void *ctx)
{
    return S_status_text(ctx, true);
}

static void S_write_status(cm_gateway *g, bool running)
{
    char *s = S_status_text(g, running);
    if (!s) return;
    lockfile l;
    char err[256];
    if (!cm_lockfile_take(&l, g->status_path, LOCKFILE_REPLACE, NULL, err, sizeof err)) {
        cm_lockfile_replace(&l, s, strlen(s), err, sizeof err);
        cm_lockfile_release(&l);
    }
    free(s);
}

static void *S_status_loop(void *arg)
{
    cm_gateway *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        pthread_mutex_unlock(&g->mu);
        S_write_status(g, true);
        pthread_mutex_lock(&g->mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

cm_rc cm_gateway_start(const cm_options *opt, const cm_gateway_opts *go, cm_gateway **out,
                       char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf p = BUF_INIT;
    cm_gateway *g = calloc(1, sizeof *g);
    *out = NULL;
    if (!g) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->log_fn = opt->log;
    g->log_ctx = opt->log_ctx;
    g->log = (cm_logger){log_gw, g};
    g->started = cm_wall_ms();
    cm_config_args ca = {opt->agent_id, opt->workspace, opt->config_path, opt->state_dir};
    CHECK(cm_config_init(&ca, &g->log, &g->cfg, err, errlen));
    if (cm_gw_agents_new(opt, &g->agents)) FAIL(CM_ENOMEM, "out of memory");
    gw_ws_opts wo = {g->cfg.root,     opt,         g->cfg.config_path, cm_gw_agents_run,
                     g->agents,       S_ws_status, g,                  CM_VERSION,
                     &g->log};
    if (S_http_wanted(g->cfg.root)) CHECK(cm_gw_ws_new(&wo, &g->ws, err, errlen));
    gw_runtime_opts ro = {g->cfg.root,
                          g->cfg.state_dir,
                          g->ws ? cm_gw_ws_run : cm_gw_agents_run,
                          g->ws ? (void *)g->ws : (void *)g->agents,
                          NULL,
                          NULL,
                          go ? go->workers : 0,
                          false,
                          0,
                          &g->log};
    CHECK(cm_gw_runtime_new(&ro, &g->rt, err, errlen));
    CHECK(S_open_channels(g, go, err, errlen));
    if (g->http) cm_gw_http_set_status(g->http, S_http_status, g);
    if (g->http && g->ws) {
        cm_gw_ws_set_runtime(g->ws, g->rt);
        cm_gw_http_set_route(g->http, cm_gw_ws_route, g->ws);
        CHECK(cm_gw_runtime_add_channel(g->rt, cm_gw_ws_channel(g->ws), NULL, NULL, err, errlen));
    }
    CHECK(cm_fs_join(&p, g->cfg.state_dir, "gateway/status.json") ? CM_ENOMEM : CM_OK);
    g->status_path = cm_buf_detach(&p);
    CHECK(cm_gw_runtime_start(g->rt, err, errlen));
    S_write_status(g, true);
    if (!pthread_create(&g->status_thr, NULL, S_status_loop, g)) g->has_status_thr = true;
    *out = g;
    g = NULL;
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_buf_release(&p);
    cm_gateway_free(g);
    return rc;
}

const char *cm_gateway_address(const cm_gateway *g)
{
    return g && g->http ? cm_gw_http_address(g->http) : NULL;
}

int cm_gateway_drain(cm_gateway *g, int timeout_ms)
{
    bool ok = cm_gw_runtime_drain(g->rt, timeout_ms);
    S_write_status(g, true);
    return ok;
}

void cm_gateway_free(cm_gateway *g)
{
    if (!g) return;
    if (g->has_status_thr) {
        pthread_mutex_lock(&g->mu);
        g->stop = true;
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->status_thr, NULL);
    }
    if (g->rt && g->status_path) S_write_status(g, false);
    cm_gw_ws_detach(g->ws);
    cm_gw_runtime_free(g->rt);
    for (size_t i = 0; i < g->nch; i++)
        g->ch[i]->ops->close(g->ch[i]);
    cm_gw_agents_free(g->agents);
    cm_exec_jobs_shutdown(); /* exec's background commands end with the gateway */
    cm_gw_ws_free(g->ws);
    cm_config_release(&g->cfg);
    free(g->status_path);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}

/* True when a gateway holds the journal of state_dir. */
static bool S_running(const char *state_dir)
{
    buf p = BUF_INIT;
    bool held = false;
    if (!cm_fs_join(&p, state_dir, "gateway/journal.jsonl.lock")) {
        int fd = open(p.data, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
            held = flock(fd, LOCK_EX | LOCK_NB) != 0;
            close(fd);
        }
    }
    cm_buf_release(&p);
    return held;
}

/* The status file of opt's gateway (a new object) and whether one runs. */
static cm_rc S_read_status(const cm_options *opt, cm_config *cfg, json_t **out, char *err,
                           size_t errlen)
{
    cm_rc rc = CM_OK;
    buf p = BUF_INIT, data = BUF_INIT;
    cm_logger lg = {log_to, (void *)opt};
    cm_config_args ca = {opt->agent_id, opt->workspace, opt->config_path, opt->state_dir};
    *out = NULL;
    CHECK(cm_config_init(&ca, &lg, cfg, err, errlen));
    CHECK(cm_fs_join(&p, cfg->state_dir, "gateway/status.json") ? CM_ENOMEM : CM_OK);
    bool running = S_running(cfg->state_dir);
    json_t *o = NULL;
    if (access(p.data, F_OK) == 0 && !cm_fs_read_file(p.data, 1 << 24, &data, err, errlen))
        o = json_loadb(data.data, data.len, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        o = json_object();
    }
    if (!o) FAIL(CM_ENOMEM, "out of memory");
    json_object_set_new(o, "running", json_boolean(running));
    *out = o;
out:
    cm_buf_release(&p);
    cm_buf_release(&data);
    return rc;
}

cm_rc cm_gateway_status(const cm_options *opt, char **json, char *err, size_t errlen)
{
    cm_config cfg = {0};
    json_t *o = NULL;
    *json = NULL;
    cm_rc rc = S_read_status(opt, &cfg, &o, err, errlen);
    if (!rc && !(*json = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER)))
        rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    json_decref(o);
    cm_config_release(&cfg);
    return rc;
}

/* ---- clawmem chat ------------------------------------------------------------ */

/* The gateway token for a client: gateway.auth.token or the environment. */
static char *S_client_token(const json_t *root)
{
    const json_t *tok =
        json_object_get(json_object_get(json_object_get(root, "gateway"), "auth"), "token");
    char *t = NULL, why[128];
    secrets sec = {{json_object_get(root, "secrets"), NULL}};
    if (tok && !cm_secret_resolve(&sec, tok, &t, why, sizeof why)) return t;
    const char *env = getenv("QUANTUMCLAW_GATEWAY_TOKEN");
    return env && *env ? cm_strdup(env) : NULL;
}

/* One request to the running gateway; resp receives the body. */
static cm_rc S_call(http_client *hc, const char *url, const char *auth, const char *body,
                    long *status, buf *resp, char *err, size_t errlen)
{
    char *hv[2] = {(char *)auth, (char *)"Content-Type: application/json"};
    cm_strlist h = {hv, 2};
    http_req q;
    memset(&q, 0, sizeof q);
    q.url = url;
    q.headers = &h;
    q.body = body;
    q.body_len = body ? strlen(body) : 0;
    http_opts o = cm_http_defaults(10000);
    o.max_attempts = 1;
    cm_rc rc = cm_http_post_all(hc, &q, 1, &o, err, errlen);
    *status = q.status;
    cm_buf_reset(resp);
    if (cm_buf_add(resp, q.resp.data, q.resp.len) && !rc) rc = CM_ENOMEM;
    cm_buf_release(&q.resp);
    return rc;
}

static bool S_fetch_data(http_fetch *f, const char *p, size_t n)
{
    return cm_buf_add(f->ctx, p, n) == CM_OK;
}

static cm_rc S_get(const char *url, const char *auth, long *status, buf *resp, char *err,
                   size_t errlen)
{
    char *hv[1] = {(char *)auth};
    cm_strlist h = {hv, 1};
    http_fetch f;
    memset(&f, 0, sizeof f);
    f.url = url;
    f.headers = &h;
    f.timeout_ms = 10000;
    f.on_data = S_fetch_data;
    cm_buf_reset(resp);
    f.ctx = resp;
    cm_rc rc = cm_http_fetch_run(&f, err, errlen);
    *status = f.status;
    return rc;
}

static void S_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Through the running gateway at addr: POST, then poll the replies until
 * one came and the conversation is quiet for a moment. */
static cm_rc S_chat_remote(const json_t *root, const char *addr, const char *text, int timeout_ms,
                           cm_chat_fn fn, void *ctx, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf url = BUF_INIT, auth = BUF_INIT, resp = BUF_INIT;
    http_client *hc = NULL;
    json_t *o = NULL;
    char *body = NULL, *tok = S_client_token(root);
    if (!tok) FAIL(CM_ECONFIG, "a gateway runs but no token is configured (gateway.auth.token)");
    CHECK(cm_buf_printf(&auth, "Authorization: Bearer %s", tok) ? CM_ENOMEM : CM_OK);
    long status = 0;
    CHECK(cm_buf_printf(&url, "http://%s/v1/replies?peer=terminal&account=default", addr)
              ? CM_ENOMEM
              : CM_OK);
    CHECK(S_get(url.data, auth.data, &status, &resp, err, errlen));
    if (status != 200) FAIL(CM_EIO, "the gateway answered %ld", status);
    o = json_loadb(resp.data, resp.len, 0, NULL);
    json_int_t after = json_integer_value(json_object_get(o, "last"));
    json_decref(o);
    char mid[64];
    snprintf(mid, sizeof mid, "chat-%ld-%lld", (long)getpid(), (long long)cm_wall_ms());
    o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "channel", "terminal", "peer", "terminal", "sender",
                  "terminal", "chatType", "direct", "messageId", mid, "text", text);
    body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    o = NULL;
    if (!body) FAIL(CM_ENOMEM, "out of memory");
    CHECK(cm_http_client_open(&hc, err, errlen));
    cm_buf_reset(&url);
    CHECK(cm_buf_printf(&url, "http://%s/v1/messages", addr) ? CM_ENOMEM : CM_OK);
    CHECK(S_call(hc, url.data, auth.data, body, &status, &resp, err, errlen));
    if (status == 503) FAIL(CM_EBUSY, "the gateway is shutting down");
    if (status != 202) FAIL(CM_EIO, "the gateway refused the message (HTTP %ld)", status);
    int64_t end = cm_now_ms() + timeout_ms, quiet = 0;
    bool got = false;
    while (cm_now_ms() < end) {
        cm_buf_reset(&url);
        CHECK(cm_buf_printf(&url, "http://%s/v1/replies?peer=terminal&account=default&after=%lld",
                            addr, (long long)after)
                  ? CM_ENOMEM
                  : CM_OK);
        CHECK(S_get(url.data, auth.data, &status, &resp, err, errlen));
        o = json_loadb(resp.data, resp.len, 0, NULL);
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(o, "replies"), i, r)
        {
            fn(ctx, json_string_value(json_object_get(r, "text")));
            got = true;
            quiet = cm_now_ms() + 1500;
        }
        if (json_array_size(json_object_get(o, "replies")))
            after = json_integer_value(json_object_get(o, "last"));
        json_decref(o);
        o = NULL;
        if (got && cm_now_ms() >= quiet) break;
        S_sleep_ms(100);
    }
    if (!got) FAIL(CM_ETIMEOUT, "no reply from the gateway within %d ms", timeout_ms);
out:
    if (hc) cm_http_client_close(hc);
    if (tok) explicit_bzero(tok, strlen(tok));
    if (auth.data) explicit_bzero(auth.data, auth.len);
    free(tok);
    free(body);
    json_decref(o);
    cm_buf_release(&url);
    cm_buf_release(&auth);
    cm_buf_release(&resp);
    return rc;
}

cm_rc cm_chat_send(const cm_options *opt, const char *text, int timeout_ms, cm_chat_fn on_text,
                   void *ctx, const char **via, char *err, size_t errlen)
{
    cm_config cfg = {0};
    json_t *st = NULL;
    cm_agent *a = NULL;
    char *json = NULL;
    cm_rc rc = S_read_status(opt, &cfg, &st, err, errlen);
    if (rc) goto out;
    const char *addr = json_string_value(json_object_get(st, "address"));
    if (json_is_true(json_object_get(st, "running")) && addr) {
        *via = "gateway";
        rc = S_chat_remote(cfg.root, addr, text, timeout_ms, on_text, ctx, err, errlen);
        goto out;
    }
    *via = "local";
    rc = cm_agent_open(opt, &a, err, errlen);
    if (!rc) rc = cm_agent_turn(a, "main", text, NULL, NULL, NULL, &json, err, errlen);
    if (!rc) {
        json_t *o = json_loads(json, 0, NULL);
        const char *r = json_string_value(json_object_get(o, "reply"));
        if (r && *r && !json_is_true(json_object_get(o, "silent"))) on_text(ctx, r);
        json_decref(o);
    }
out:
    cm_free(json);
    cm_agent_close(a);
    json_decref(st);
    cm_config_release(&cfg);
    return rc;
}
