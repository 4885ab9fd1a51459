/*
 * gateway.c — `clawmem gateway` behind the public API
 * (include/clawmem/gateway.h): the agents the runtime runs (one shared
 * cm_agent per agent id, serving every worker), the channels opened from
 * the config and the status file (gateway_int.h: read by chat_client.c,
 * the terminal chat client).
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
#include "../agent/session_turn.h"
#include "../tools/exec.h"
#include "gateway_int.h"
#include "control/gw_ws.h"
#include "channels/http_channel.h"
#include "channels/telegram.h"
#include "core/reload.h"
#include "core/runtime.h"

/* ---- the agents ------------------------------------------------------------ */

typedef struct gw_agent_slot {
    char id[80];
    cm_agent *a; /* NULL while its first user opens it */
} gw_agent_slot;

struct gw_agents {
    cm_options opt;
    char *agent_id0, *workspace, *config_path, *state_dir;
    pthread_mutex_t mu; /* guards v and n only; an agent is opened outside it */
    pthread_cond_t opened; /* an open finished (or failed) */
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
    pthread_cond_init(&g->opened, NULL);
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
    pthread_cond_destroy(&g->opened);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

size_t cm_gw_agents_opened(gw_agents *g)
{
    pthread_mutex_lock(&g->mu);
    size_t n = 0;
    for (size_t i = 0; i < g->n; i++)
        n += g->v[i].a != NULL;
    pthread_mutex_unlock(&g->mu);
    return n;
}

/* The slot of id, or NULL (g->mu held). */
static gw_agent_slot *S_slot(gw_agents *g, const char *id)
{
    for (size_t i = 0; i < g->n; i++)
        if (!strcmp(g->v[i].id, id)) return &g->v[i];
    return NULL;
}

/* Takes sl out of the list (g->mu held). */
static void S_slot_drop(gw_agents *g, gw_agent_slot *sl)
{
    *sl = g->v[--g->n];
}

/* The agent id, opened on first use by the worker that asks first: it
 * reserves the slot, opens outside the lock and wakes the others. */
static cm_agent *S_agent(gw_agents *g, const char *id, char *err, size_t errlen)
{
    if (strlen(id) >= sizeof g->v[0].id) {
        cm_seterr(err, errlen, CM_EINVAL, "agent id too long");
        return NULL;
    }
    pthread_mutex_lock(&g->mu);
    gw_agent_slot *sl;
    while ((sl = S_slot(g, id)) && !sl->a) /* another worker is opening it */
        pthread_cond_wait(&g->opened, &g->mu);
    if (sl) {
        cm_agent *a = sl->a;
        pthread_mutex_unlock(&g->mu);
        return a;
    }
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 8;
        gw_agent_slot *v = realloc(g->v, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&g->mu);
            cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
            return NULL;
        }
        g->v = v;
        g->cap = cap;
    }
    snprintf(g->v[g->n].id, sizeof g->v[0].id, "%s", id);
    g->v[g->n++].a = NULL; /* reserved: others wait */
    pthread_mutex_unlock(&g->mu);
    cm_options o = g->opt;
    o.agent_id = id;
    /* Another agent than the default has its own workspace (agents.list). */
    if (strcmp(id, "main")) o.workspace = NULL;
    cm_agent *a = NULL;
    cm_rc rc = cm_agent_open_shared(&o, &a, err, errlen);
    pthread_mutex_lock(&g->mu);
    sl = S_slot(g, id);
    if (rc)
        S_slot_drop(g, sl); /* a waiter tries again itself */
    else
        sl->a = a;
    pthread_cond_broadcast(&g->opened);
    pthread_mutex_unlock(&g->mu);
    return rc ? NULL : a;
}

cm_rc cm_gw_agents_engine(void *ctx, const char *agent_id, cm_engine **out, char *err,
                          size_t errlen)
{
    cm_agent *a = ctx ? S_agent(ctx, agent_id, err, errlen) : NULL;
    *out = cm_agent_engine(a);
    if (*out) return CM_OK;
    return ctx ? CM_EIO : cm_seterr(err, errlen, CM_EINVAL, "no agents");
}

cm_rc cm_gw_agents_run(void *ctx, const gw_run_req *rq, gw_run_res *out, char *err, size_t errlen)
{
    gw_agents *g = ctx;
    memset(out, 0, sizeof *out);
    cm_agent *a = S_agent(g, rq->agent_id, err, errlen);
    if (!a) return CM_EIO;
    if (rq->command && rq->status_queue) /* /status */
        return cm_agent_status(a, rq->session_key, rq->status_queue, &out->text, err, errlen);
    if (rq->command) { /* /compact, /think, /reasoning, /model, /models */
        bool handled = false;
        cm_rc rc =
            cm_agent_command(a, rq->session_key, rq->prompt, &handled, &out->text, err, errlen);
        if (!rc && !handled) rc = cm_seterr(err, errlen, CM_EINVAL, "not a session command");
        return rc;
    }
    char *json = NULL;
    agent_hooks hk = {.cancelled = rq->cancelled,
                      .steer = rq->steer,
                      .ctx = rq->hook_ctx,
                      .send = rq->send,
                      .session_send = rq->session_send,
                      .on_tool = rq->on_tool,
                      .tool_ctx = rq->tool_ctx};
    /* the trusted inbound context of the system prompt (2026.3.22's
     * chat_id is "<channel>:<chat>") */
    buf chat = BUF_INIT;
    agent_inbound in = {.account_id = rq->account && *rq->account ? rq->account : "default",
                        .channel = rq->channel,
                        .provider = rq->channel,
                        .surface = rq->channel,
                        .chat_type = rq->is_group ? "group" : "direct",
                        .peer = rq->peer,
                        .thread_id = rq->thread,
                        .conversation_label = rq->label,
                        .group_subject = rq->subject,
                        .trusted_sender = rq->trusted};
    if (rq->channel && rq->peer && !cm_buf_printf(&chat, "%s:%s", rq->channel, rq->peer))
        in.chat_id = chat.data;
    cm_rc rc =
        cm_agent_turn_reasoned(a, rq->session_key, rq->prompt, rq->on_delta, rq->delta_ctx,
                               rq->on_reasoning, rq->reasoning_ctx, &hk, &in, &json, err, errlen);
    cm_buf_release(&chat);
    if (rc) return rc;
    json_t *o = json_loads(json, 0, NULL);
    cm_free(json);
    const char *reply = json_string_value(json_object_get(o, "reply"));
    out->text = cm_strdup(reply ? reply : "");
    out->silent = json_is_true(json_object_get(o, "silent"));
    const char *why = json_string_value(json_object_get(o, "reasoning"));
    if (why && *why && !(out->reasoning = cm_strdup(why))) {
        free(out->text);
        out->text = NULL;
    }
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
    gw_reloader *reload; /* the config watch and SIGHUP's reloads */
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
    cm_gw_malloc_tune(); /* a gateway runs for months (runtime.h) */
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
    /* the default agent's workspace files, at start as 2026.3.22 makes them */
    cm_agent_bootstrap_start(g->cfg.root, g->cfg.workspace, g->started, &g->log);
    if (cm_gw_agents_new(opt, &g->agents)) FAIL(CM_ENOMEM, "out of memory");
    gw_ws_opts wo = {g->cfg.root,     opt,         g->cfg.config_path, cm_gw_agents_run,
                     g->agents,       S_ws_status, g,                  CM_VERSION,
                     &g->log,         cm_gw_agents_engine, g->agents};
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
                          &g->log,
                          g->cfg.rt};
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
    gw_reloader_opts rl = {g->rt,
                           {opt->agent_id, opt->workspace, opt->config_path, opt->state_dir},
                           g->cfg.config_found,
                           {g->cfg.config_path, g->cfg.overlay_path},
                           &g->log};
    CHECK(cm_gw_reloader_new(&rl, &g->reload, err, errlen));
    CHECK(cm_gw_reloader_start(g->reload, err, errlen));
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

void cm_gateway_reload(cm_gateway *g)
{
    if (g) cm_gw_reloader_request(g->reload);
}

void cm_gateway_free(cm_gateway *g)
{
    if (!g) return;
    cm_gw_reloader_free(g->reload); /* before the runtime it swaps into */
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

cm_rc cm_gw_status_read(const cm_options *opt, cm_config *cfg, json_t **out, char *err,
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
    cm_rc rc = cm_gw_status_read(opt, &cfg, &o, err, errlen);
    if (!rc && !(*json = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER)))
        rc = cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    json_decref(o);
    cm_config_release(&cfg);
    return rc;
}
