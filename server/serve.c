/*
 * serve.c — `clawmem serve` (serve.h): MCP Streamable HTTP on httpd.
 *
 * A POST to /mcp carries one JSON-RPC message. The request passes, in order:
 * the Origin check (absent or loopback, or listed with --allow-origin: DNS
 * rebinding), the bearer token (it names the agent and whether memory_write
 * is allowed; /mcp/<agentId> must name the same agent), the method (GET 405:
 * no server-initiated stream; DELETE ends a session), the media types, the
 * body's JSON, and the session: `initialize` opens one (Mcp-Session-Id) that
 * later legacy requests must carry; a request with the 2026-07-28 envelope
 * needs none. Only then is the agent's engine taken from the LRU (opened on
 * demand, one request at a time per engine) and the message answered by
 * mcp_rpc.c — as JSON, or as one server-sent event when the client accepts
 * only text/event-stream. So no token, or a token for another agent, never
 * opens, reads or writes an agent's memory.
 *
 * Engines of local workspaces get a watcher thread (with a writer engine of
 * its own), as `clawmem mcp` does; without one (a workspace on a network file
 * system, or --no-watch) each memory_search syncs first, as `clawmem search`.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "../src/base/buf.h"
#include "../src/base/fs.h"
#include "../src/base/json5.h"
#include "../src/config/config.h"
#include "../src/net/httpd.h"
#include "../src/store/store_pg_shared.h"
#include "engine_lru.h"
#include "first_sync.h"
#include "health.h"
#include "mcp.h"
#include "mcp_rpc.h"
#include "mcp_sessions.h"
#include "serve.h"

#define ENGINE_WAIT_MS 10000 /* for an engine to become idle at the cap, then 503 */
#define LEASE_RETRY_MS 1000  /* a following watcher tries to take the agent's lease */

typedef struct token {
    char *token, *agent;
    bool write;
} token;

/* One agent's open engine. */
typedef struct slot {
    char *agent;
    cm_engine *engine;
    bool writable;
    pthread_mutex_t use; /* one request at a time on the engine */
    int refs;            /* requests holding it (under srv.mu) */
    uint64_t last_used;
    size_t mem; /* cm_engine_memory after its last request (under srv.mu) */
    /* the watcher */
    bool watching;
    pthread_t thr;
    volatile int stop;
    volatile int run_stop; /* ends one cm_engine_watch: stop, or the lease was lost */
    const char *dsn;       /* PostgreSQL (srv.dsns): the watcher writes only with the lease */
    cm_pg_lease *lease;    /* the watcher thread's own */
    volatile int role;     /* the watcher: 1 writes the index, 2 follows another, 0 neither */
    int wake[2];
    int debounce_ms;
    cm_options wopt;
    first_sync first; /* its searches wait for the watcher's first sync */
    struct slot *next;
} slot;

typedef struct srv {
    cm_options opt;
    serve_opts so;
    char *default_agent; /* the config's default agent: --workspace is its workspace */
    char **agents;       /* agents.list[].id, or the one default agent */
    size_t nagents;
    token *tokens;
    size_t ntokens;
    bool auth; /* --tokens given */
    json_t *tools_ro, *tools_rw;
    pthread_mutex_t mu; /* slots, sessions, tick */
    pthread_mutex_t open_mu;
    pthread_cond_t idle; /* an engine's last request ended */
    slot *slots;
    int nslots;
    size_t mem; /* the slots' mem, summed */
    serve_health *health;
    uint64_t tick;
    mcp_sessions *sessions;
    char *sessions_dsn; /* the default agent's PostgreSQL store (a secret), or NULL */
    char **dsns;        /* agents[i]'s PostgreSQL store (a secret), or NULL: SQLite */
} srv;

static void S_log(const srv *s, cm_log_level lv, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void S_log(const srv *s, cm_log_level lv, const char *fmt, ...)
{
    if (!s->opt.log) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->opt.log(s->opt.log_ctx, lv, msg);
}

/* ---- agents and tokens ---------------------------------------------------- */

static bool S_known_agent(const srv *s, const char *id)
{
    for (size_t i = 0; i < s->nagents; i++)
        if (!strcmp(s->agents[i], id)) return true;
    return false;
}

/* The agents of the config: agents.list[].id, else the default agent. */
static cm_rc S_load_agents(srv *s, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    cm_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cm_config_args a = {s->opt.agent_id, s->opt.workspace, s->opt.config_path, s->opt.state_dir};
    cm_logger lg = {NULL, NULL}; /* the engines warn once each */
    CHECK(cm_config_init(&a, &lg, &cfg, err, errlen));
    json_t *list = json_object_get(json_object_get(cfg.root, "agents"), "list");
    size_t i;
    json_t *e;
    s->agents = calloc(json_array_size(list) + 1, sizeof *s->agents);
    if (!s->agents) FAIL(CM_ENOMEM, "out of memory");
    json_array_foreach(list, i, e)
    {
        const char *id = json_string_value(json_object_get(e, "id"));
        if (id && *id && !S_known_agent(s, id)) s->agents[s->nagents++] = cm_strdup(id);
    }
    /* With no list (or --agent naming one outside it): the default agent. */
    if (s->nagents == 0 || (s->opt.agent_id && !S_known_agent(s, s->opt.agent_id)))
        s->agents[s->nagents++] = cm_strdup(cfg.agent_id);
    s->default_agent = cm_strdup(cfg.agent_id);
    /* the sessions live beside the default agent's PostgreSQL index */
    if (cfg.store_driver && !strcmp(cfg.store_driver, "postgres") && cfg.store_dsn &&
        !(s->sessions_dsn = cm_strdup(cfg.store_dsn)))
        FAIL(CM_ENOMEM, "out of memory");
    for (i = 0; i < s->nagents; i++)
        if (!s->agents[i]) FAIL(CM_ENOMEM, "out of memory");
    if (!s->default_agent) FAIL(CM_ENOMEM, "out of memory");
out:
    cm_config_release(&cfg);
    return rc;
}

/* Says at start where each agent's memory is, and warns of a workspace that
 * does not exist (its searches would answer "disabled" until it does);
 * keeps each agent's PostgreSQL DSN (its watcher's lease) in s->dsns. */
static void S_report_agents(srv *s)
{
    s->dsns = calloc(s->nagents + 1, sizeof *s->dsns);
    for (size_t i = 0; i < s->nagents; i++) {
        const char *id = s->agents[i];
        bool dflt = !strcmp(id, s->default_agent);
        char err[CM_ERR_SIZE];
        cm_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cm_config_args a = {id, dflt ? s->opt.workspace : NULL, s->opt.config_path,
                            s->opt.state_dir};
        cm_logger lg = {NULL, NULL};
        struct stat st;
        if (cm_config_init(&a, &lg, &cfg, err, sizeof err) != CM_OK)
            S_log(s, CM_LOG_WARN, "agent %s: %s", id, err);
        else if (stat(cfg.workspace, &st) != 0 || !S_ISDIR(st.st_mode))
            S_log(s, CM_LOG_WARN,
                  "agent %s: workspace %s does not exist; its memory_search answers "
                  "\"disabled\" until it does (set %s)",
                  id, cfg.workspace,
                  dflt ? "--workspace or agents.defaults.workspace" : "agents.list[].workspace");
        else
            S_log(s, CM_LOG_INFO, "agent %s: workspace %s, index %s", id, cfg.workspace,
                  strcmp(cfg.store_driver, "postgres") ? cfg.store_path
                                                       : "postgres (memorySearch.store.dsn)");
        if (s->dsns && cfg.store_driver && !strcmp(cfg.store_driver, "postgres") && cfg.store_dsn)
            s->dsns[i] = cm_strdup(cfg.store_dsn); /* NULL (no memory): no lease, it watches */
        cm_config_release(&cfg);
    }
}

/* --tokens FILE: a JSON5 object {"<token>": {agent: "<id>", write: bool}}. */
static cm_rc S_load_tokens(srv *s, const char *path, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf text = BUF_INIT;
    json5_doc doc;
    memset(&doc, 0, sizeof doc);
    CHECK(cm_fs_read_file_follow(path, 1u << 20, &text, err, errlen));
    CHECK(cm_json5_parse(text.data, text.len, path, &doc, err, errlen));
    if (!json_is_object(doc.root)) FAIL(CM_ECONFIG, "%s: expected an object of tokens", path);
    s->tokens = calloc(json_object_size(doc.root) + 1, sizeof *s->tokens);
    if (!s->tokens) FAIL(CM_ENOMEM, "out of memory");
    const char *k;
    json_t *v;
    json_object_foreach(doc.root, k, v)
    {
        int line = 0, col = 0;
        cm_json5_where(&doc, doc.root, k, 0, &line, &col);
        const char *agent = json_string_value(json_object_get(v, "agent"));
        json_t *w = json_object_get(v, "write");
        /* never the token itself in a message */
        if (strlen(k) < 16)
            FAIL(CM_ECONFIG, "%s:%d:%d: a token must have at least 16 characters", path, line, col);
        if (!json_is_object(v) || !agent)
            FAIL(CM_ECONFIG, "%s:%d:%d: expected {agent: \"<id>\", write: true|false}", path, line,
                 col);
        if (w && !json_is_boolean(w))
            FAIL(CM_ECONFIG, "%s:%d:%d: write must be true or false", path, line, col);
        if (!S_known_agent(s, agent))
            FAIL(CM_ECONFIG, "%s:%d:%d: agent \"%.80s\" is not in the config's agents.list", path,
                 line, col, agent);
        token *t = &s->tokens[s->ntokens++];
        t->token = cm_strdup(k);
        t->agent = cm_strdup(agent);
        t->write = json_is_true(w);
        if (!t->token || !t->agent) FAIL(CM_ENOMEM, "out of memory");
    }
    s->auth = true;
out:
    cm_json5_doc_release(&doc);
    cm_buf_release(&text);
    return rc;
}

/* Constant-time over the token's bytes: which token, or NULL. */
static const token *S_find_token(const srv *s, const char *given)
{
    const token *found = NULL;
    size_t gl = strlen(given);
    for (size_t i = 0; i < s->ntokens; i++) {
        const char *t = s->tokens[i].token;
        size_t tl = strlen(t);
        unsigned diff = (unsigned)(tl ^ gl);
        for (size_t k = 0; k < tl; k++)
            diff |= (unsigned char)t[k] ^ (unsigned char)(k < gl ? given[k] : 0);
        if (diff == 0) found = &s->tokens[i];
    }
    return found;
}

/* ---- engines -------------------------------------------------------------- */

/* After each sync: a watcher that lost its lease (the database restarted,
 * and another replica may hold it now) stops writing and follows again. */
static void S_synced(void *ctx, cm_rc rc, const cm_sync_stats *st, const char *err)
{
    (void)rc;
    (void)st;
    (void)err;
    slot *sl = ctx;
    mcp_first_sync_done(&sl->first);
    char why[CM_ERR_SIZE];
    bool held = true;
    if (sl->lease && (cm_pg_lease_try(sl->lease, &held, why, sizeof why) != CM_OK || !held))
        __atomic_store_n(&sl->run_stop, 1, __ATOMIC_RELEASE);
}

static void S_watch_log(const slot *sl, const char *what)
{
    if (!sl->wopt.log) return;
    char msg[512];
    snprintf(msg, sizeof msg, "agent %s: %s", sl->agent, what);
    sl->wopt.log(sl->wopt.log_ctx, CM_LOG_INFO, msg);
}

/* The watcher. Over PostgreSQL one replica at a time writes an agent's
 * index from its files: the one holding the agent's lease (an advisory
 * lock, store_pg_shared.h); the others follow (their searches read what it
 * commits) and try again every LEASE_RETRY_MS, so when it dies one of them
 * takes over and its first sync indexes what the dead one left. */
static void *S_watch_main(void *arg)
{
    slot *sl = arg;
    char err[CM_ERR_SIZE];
    bool following = false;
    if (sl->dsn && cm_pg_lease_new(sl->dsn, sl->agent, &sl->lease, err, sizeof err) != CM_OK)
        sl->lease = NULL; /* no memory: it watches, as over SQLite */
    while (!__atomic_load_n(&sl->stop, __ATOMIC_ACQUIRE)) {
        bool held = true;
        if (sl->lease && cm_pg_lease_try(sl->lease, &held, err, sizeof err) != CM_OK)
            held = false; /* the database does not answer: try again later */
        if (!held) {
            if (!following)
                S_watch_log(sl, "following (another replica's watcher writes its index)");
            following = true;
            __atomic_store_n(&sl->role, 2, __ATOMIC_RELEASE);
            mcp_first_sync_done(&sl->first); /* its searches never wait here */
            struct pollfd p = {sl->wake[0], POLLIN, 0};
            poll(&p, 1, LEASE_RETRY_MS);
            continue;
        }
        if (sl->lease) S_watch_log(sl, "this replica's watcher writes its index");
        following = false;
        __atomic_store_n(&sl->role, 1, __ATOMIC_RELEASE);
        cm_engine *e = NULL;
        if (cm_engine_open(&sl->wopt, &e, err, sizeof err) == CM_OK) {
            cm_watch_opts wo = {&sl->run_stop, sl->wake[0], sl->debounce_ms, S_synced, sl, 0};
            cm_engine_watch(e, &wo, err, sizeof err);
            cm_engine_close(e);
        }
        if (!sl->lease || __atomic_load_n(&sl->stop, __ATOMIC_ACQUIRE) ||
            !__atomic_load_n(&sl->run_stop, __ATOMIC_ACQUIRE))
            break; /* stopped, or the watcher ended by itself */
        __atomic_store_n(&sl->run_stop, 0, __ATOMIC_RELEASE); /* the lease was lost */
    }
    __atomic_store_n(&sl->role, 0, __ATOMIC_RELEASE);
    cm_pg_lease_free(sl->lease); /* the next replica may take it */
    sl->lease = NULL;
    mcp_first_sync_done(&sl->first); /* no (more) sync will come */
    return NULL;
}

/* True when path is on a local file system (not NFS, SMB, FUSE, Ceph, ...). */
static bool S_local_fs(const char *path)
{
    struct statfs st;
    if (statfs(path, &st) != 0) return true; /* not there yet: created locally */
    switch ((unsigned long)st.f_type) {
    case 0x6969UL:     /* NFS */
    case 0x517BUL:     /* SMB */
    case 0xFF534D42UL: /* CIFS */
    case 0xFE534D42UL: /* SMB2 */
    case 0x65735546UL: /* FUSE */
    case 0x00C36400UL: /* Ceph */
    case 0x5346414FUL: /* AFS */
    case 0x01021997UL: /* 9p */
        return false;
    default:
        return true;
    }
}

static void S_slot_close(slot *sl)
{
    if (!sl) return;
    if (sl->watching) {
        __atomic_store_n(&sl->stop, 1, __ATOMIC_RELEASE);
        __atomic_store_n(&sl->run_stop, 1, __ATOMIC_RELEASE);
        ssize_t w = write(sl->wake[1], "x", 1);
        (void)w;
        pthread_join(sl->thr, NULL);
    }
    if (sl->wake[0] >= 0) close(sl->wake[0]);
    if (sl->wake[1] >= 0) close(sl->wake[1]);
    cm_engine_close(sl->engine);
    pthread_mutex_destroy(&sl->use);
    mcp_first_sync_release(&sl->first);
    free(sl->agent);
    free(sl);
}

static slot *S_slot_open(srv *s, const char *agent, char *err, size_t errlen)
{
    slot *sl = calloc(1, sizeof *sl);
    if (!sl) return NULL;
    sl->wake[0] = sl->wake[1] = -1;
    pthread_mutex_init(&sl->use, NULL);
    mcp_first_sync_init(&sl->first);
    sl->debounce_ms = s->so.debounce_ms;
    sl->agent = cm_strdup(agent);
    cm_options o = s->opt;
    o.agent_id = sl->agent;
    /* --workspace is the default agent's, as for every other command; the
     * others have their own from agents.list */
    if (strcmp(agent, s->default_agent) != 0) o.workspace = NULL;
    if (!sl->agent || cm_engine_open(&o, &sl->engine, err, errlen) != CM_OK) {
        S_slot_close(sl);
        return NULL;
    }
    sl->writable = cm_engine_writable(sl->engine) != 0;
    int watch = s->so.watch;
    char *js = NULL;
    json_t *st = NULL;
    if (cm_engine_status(sl->engine, 0, &js, err, errlen) == CM_OK) st = json_loads(js, 0, NULL);
    cm_free(js);
    if (watch < 0) watch = !json_is_false(json_object_get(json_object_get(st, "sync"), "watch"));
    const char *ws = json_string_value(json_object_get(st, "workspace"));
    if (watch && ws && !S_local_fs(ws)) {
        S_log(s, CM_LOG_INFO, "agent %s: workspace %s is not local: no watcher", agent, ws);
        watch = 0;
    }
    json_decref(st);
    if (watch && pipe2(sl->wake, O_CLOEXEC) == 0) {
        sl->wopt = o;
        for (size_t i = 0; s->dsns && i < s->nagents; i++)
            if (!strcmp(s->agents[i], agent)) sl->dsn = s->dsns[i];
        sl->watching = pthread_create(&sl->thr, NULL, S_watch_main, sl) == 0;
    }
    if (!sl->watching) mcp_first_sync_done(&sl->first); /* each search syncs itself */
    return sl;
}

/* The agent's slot with a reference (S_release), or NULL: *busy when every
 * open engine is in use and the cap is reached, else err says why. */
static slot *S_acquire(srv *s, const char *agent, bool *busy, char *err, size_t errlen)
{
    slot *sl, *victim = NULL;
    *busy = false;
    pthread_mutex_lock(&s->mu);
    for (sl = s->slots; sl; sl = sl->next)
        if (!strcmp(sl->agent, agent)) break;
    if (sl) {
        sl->refs++;
        sl->last_used = ++s->tick;
    }
    pthread_mutex_unlock(&s->mu);
    if (sl) return sl;

    pthread_mutex_lock(&s->open_mu);
    pthread_mutex_lock(&s->mu);
    for (sl = s->slots; sl; sl = sl->next)
        if (!strcmp(sl->agent, agent)) break;
    if (sl) {
        sl->refs++;
        sl->last_used = ++s->tick;
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_unlock(&s->open_mu);
        return sl;
    }
    /* At the cap: close the least recently used idle engine, waiting a
     * while for one to become idle when every one is in use. */
    int64_t deadline = cm_now_ms() + ENGINE_WAIT_MS;
    while (s->nslots >= s->so.max_engines) {
        slot **vp = NULL;
        for (slot **p = &s->slots; *p; p = &(*p)->next)
            if ((*p)->refs == 0 && (!vp || (*p)->last_used < (*vp)->last_used)) vp = p;
        if (vp) {
            victim = *vp;
            *vp = victim->next;
            s->nslots--;
            s->mem -= victim->mem;
            break;
        }
        int64_t left = deadline - cm_now_ms();
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = ts.tv_nsec + CM_MIN(CM_MAX(left, 0), 100) * 1000000;
        ts.tv_sec += (time_t)(ns / 1000000000);
        ts.tv_nsec = (long)(ns % 1000000000);
        if (left <= 0) {
            pthread_mutex_unlock(&s->mu);
            pthread_mutex_unlock(&s->open_mu);
            *busy = true;
            return NULL;
        }
        pthread_cond_timedwait(&s->idle, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
    S_slot_close(victim);
    sl = S_slot_open(s, agent, err, errlen);
    if (sl) {
        pthread_mutex_lock(&s->mu);
        sl->refs = 1;
        sl->last_used = ++s->tick;
        sl->next = s->slots;
        s->slots = sl;
        s->nslots++;
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&s->open_mu);
    return sl;
}

/* Unlinks the idle engines that must close for the open ones to fit
 * --max-engine-mb (never keep), least recently used first (under s->mu);
 * the caller closes them outside it. */
static slot *S_over_budget(srv *s, const slot *keep)
{
    slot *victims = NULL;
    size_t n = 0, k = SIZE_MAX, cap = (size_t)s->nslots;
    if (!s->so.max_engine_bytes || s->mem <= s->so.max_engine_bytes || !cap) return NULL;
    lru_item *items = calloc(cap, sizeof *items);
    bool *close = calloc(cap, sizeof *close);
    if (!items || !close) goto out; /* no budget this time: the next release tries again */
    for (slot *sl = s->slots; sl && n < cap; sl = sl->next, n++) {
        items[n] = (lru_item){sl->last_used, sl->mem, sl->refs > 0};
        if (sl == keep) k = n;
    }
    if (!cm_engine_lru_over(items, n, s->so.max_engine_bytes, k, close)) goto out;
    /* the list in the same order: item i is the i-th slot */
    size_t i = 0;
    for (slot **p = &s->slots; *p && i < n; i++) {
        slot *sl = *p;
        if (close[i]) {
            *p = sl->next;
            s->nslots--;
            s->mem -= sl->mem;
            sl->next = victims;
            victims = sl;
        } else {
            p = &sl->next;
        }
    }
out:
    free(items);
    free(close);
    return victims;
}

/* Ends a request's hold on sl; mem: the engine's memory after it. */
static void S_release(srv *s, slot *sl, size_t mem)
{
    pthread_mutex_lock(&s->mu);
    s->mem = s->mem - sl->mem + mem;
    sl->mem = mem;
    if (--sl->refs == 0) pthread_cond_signal(&s->idle);
    slot *victims = S_over_budget(s, sl);
    pthread_mutex_unlock(&s->mu);
    while (victims) {
        slot *next = victims->next;
        S_log(s, CM_LOG_DEBUG, "agent %s: engine closed (--max-engine-mb)", victims->agent);
        S_slot_close(victims);
        victims = next;
    }
}

/* The figures /healthz shows. */
static void S_figures(srv *s, serve_figures *f)
{
    pthread_mutex_lock(&s->mu);
    f->engines = (size_t)s->nslots;
    f->max_engines = (size_t)s->so.max_engines;
    f->bytes = s->mem;
    f->max_bytes = s->so.max_engine_bytes;
    f->writing = f->following = 0;
    for (slot *sl = s->slots; sl; sl = sl->next) {
        int role = __atomic_load_n(&sl->role, __ATOMIC_ACQUIRE);
        f->writing += role == 1;
        f->following += role == 2;
    }
    pthread_mutex_unlock(&s->mu);
    f->sessions = mcp_sessions_count(s->sessions);
}

/* ---- sessions ------------------------------------------------------------- */

/* mcp_sessions_use; a failure (the database) is logged here. */
static cm_rc S_session_use(srv *s, const char *sid, const char *agent, long owner, bool drop,
                           bool *found)
{
    char err[CM_ERR_SIZE];
    cm_rc rc = mcp_sessions_use(s->sessions, sid, agent, owner, drop, found, err, sizeof err);
    if (rc) S_log(s, CM_LOG_WARN, "agent %s: sessions: %s", agent, err);
    return rc;
}

/* ---- HTTP ------------------------------------------------------------------ */

static void S_plain(httpd_conn *c, int status, const char *const *extra, const char *msg)
{
    const char *h[8] = {"Content-Type: text/plain; charset=utf-8"};
    size_t n = 1;
    for (size_t i = 0; extra && extra[i] && n < 7; i++)
        h[n++] = extra[i];
    h[n] = NULL;
    char body[512];
    int len = snprintf(body, sizeof body, "%s\n", msg);
    cm_net_httpd_respond(c, status, h, body, (size_t)CM_MIN(len, (int)sizeof body - 1));
}

/* A JSON-RPC error as the body of an HTTP error status. */
static void S_rpc_fail(httpd_conn *c, int status, const char *msg)
{
    json_t *e = mcp_rpc_error(NULL, MCP_INVALID_REQUEST, msg);
    char *s = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    cm_net_httpd_respond(c, status, (const char *const[]){"Content-Type: application/json", NULL},
                         s, s ? strlen(s) : 0);
    free(s);
}

/* Origin absent, loopback, or listed. */
static bool S_origin_ok(const srv *s, const char *origin)
{
    if (!origin) return true;
    for (size_t i = 0; s->so.origins && s->so.origins[i]; i++)
        if (!strcasecmp(origin, s->so.origins[i])) return true;
    const char *p = strstr(origin, "://");
    if (!p) return false;
    p += 3;
    size_t n = strcspn(p, ":/");
    if (*p == '[') n = strcspn(p, "]") + 1;
    static const char *const loop[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < ARRAY_LEN(loop); i++)
        if (strlen(loop[i]) == n && !strncasecmp(p, loop[i], n))
            return p[n] == 0 || p[n] == ':' || p[n] == '/';
    return false;
}

static bool S_has_type(const char *accept, const char *type)
{
    if (!accept) return false;
    size_t tl = strlen(type);
    for (const char *p = accept; (p = strcasestr(p, type)) != NULL; p += tl) {
        char after = p[tl];
        if (after == 0 || after == ',' || after == ';' || after == ' ') return true;
    }
    return false;
}

static void S_handle(void *ctx, const httpd_req *rq, httpd_conn *c)
{
    srv *s = ctx;
    json_t *msg = NULL, *ans = NULL;
    slot *sl = NULL;
    char *out = NULL;
    char sid_hdr[64] = "";
    char err[CM_ERR_SIZE];
    const char *path_agent = NULL;

    if (serve_health_path(rq->path)) { /* a load balancer's probes: no token */
        serve_figures f;
        S_figures(s, &f);
        serve_health_answer(s->health, rq, c, &f, cm_now_ms());
        goto out;
    }
    /* DNS rebinding: a page elsewhere must not reach a loopback server */
    if (!S_origin_ok(s, cm_net_httpd_header_get(rq, "Origin"))) {
        S_plain(c, 403, NULL, "Forbidden: Origin not allowed (see clawmem serve --allow-origin)");
        goto out;
    }
    if (!strcmp(rq->path, "/mcp") || !strcmp(rq->path, "/mcp/")) {
        path_agent = NULL;
    } else if (!strncmp(rq->path, "/mcp/", 5) && !strchr(rq->path + 5, '/')) {
        path_agent = rq->path + 5;
    } else {
        S_plain(c, 404, NULL, "Not Found: the MCP endpoint is /mcp");
        goto out;
    }
    /* who */
    const char *agent = path_agent;
    bool may_write = true;
    long owner = -1; /* the token's index */
    if (s->auth) {
        const char *az = cm_net_httpd_header_get(rq, "Authorization");
        const token *t = NULL;
        if (az && !strncasecmp(az, "Bearer ", 7)) t = S_find_token(s, az + 7);
        if (!t) {
            S_plain(c, 401,
                    (const char *const[]){"WWW-Authenticate: Bearer realm=\"clawmem\"", NULL},
                    "Unauthorized: a bearer token from clawmem serve --tokens is required");
            goto out;
        }
        if (path_agent && strcmp(path_agent, t->agent) != 0) {
            S_plain(c, 403, NULL, "Forbidden: this token is for another agent");
            goto out;
        }
        agent = t->agent;
        may_write = t->write;
        owner = (long)(t - s->tokens);
    } else if (!agent) {
        agent = s->opt.agent_id ? s->opt.agent_id : s->agents[0];
    }
    if (!S_known_agent(s, agent)) {
        S_plain(c, 404, NULL, "Not Found: no such agent in agents.list");
        goto out;
    }
    const char *sid = cm_net_httpd_header_get(rq, "Mcp-Session-Id");
    if (!strcmp(rq->method, "DELETE")) {
        bool found = false;
        if (!sid)
            S_plain(c, 400, NULL, "Bad Request: Mcp-Session-Id is required");
        else if (S_session_use(s, sid, agent, owner, true, &found) != CM_OK)
            S_plain(c, 503, (const char *const[]){"Retry-After: 1", NULL},
                    "Service Unavailable: the session store does not answer");
        else if (!found)
            S_plain(c, 404, NULL, "Not Found: no such session");
        else
            cm_net_httpd_respond(c, 204, NULL, NULL, 0);
        goto out;
    }
    if (strcmp(rq->method, "POST") != 0) {
        /* no server-initiated stream (GET) and nothing else */
        S_plain(c, 405, (const char *const[]){"Allow: POST, DELETE", NULL},
                "Method Not Allowed: POST JSON-RPC messages to /mcp");
        goto out;
    }
    const char *ct = cm_net_httpd_header_get(rq, "Content-Type");
    if (!ct || strncasecmp(ct, "application/json", 16) != 0 ||
        (ct[16] && ct[16] != ';' && ct[16] != ' ')) {
        S_plain(c, 415, NULL, "Unsupported Media Type: send application/json");
        goto out;
    }
    const char *accept = cm_net_httpd_header_get(rq, "Accept");
    bool want_json = !accept || S_has_type(accept, "application/json") ||
                     S_has_type(accept, "application/*") || S_has_type(accept, "*/*");
    bool want_sse = S_has_type(accept, "text/event-stream");
    if (!want_json && !want_sse) {
        S_plain(c, 406, NULL, "Not Acceptable: accept application/json or text/event-stream");
        goto out;
    }
    json_error_t je;
    msg = json_loadb(rq->body, rq->body_len, JSON_ALLOW_NUL, &je);
    if (!msg) {
        ans = mcp_rpc_parse_error(je.text);
        out = json_dumps(ans, JSON_COMPACT);
        cm_net_httpd_respond(c, 400, (const char *const[]){"Content-Type: application/json", NULL},
                             out, out ? strlen(out) : 0);
        goto out;
    }
    if (!json_is_object(msg)) {
        S_rpc_fail(c, 400,
                   "Invalid Request: one JSON-RPC object per POST (batches are not supported)");
        goto out;
    }
    const char *method = json_string_value(json_object_get(msg, "method"));
    json_t *meta = json_object_get(json_object_get(msg, "params"), "_meta");
    const char *envelope = json_string_value(json_object_get(meta, MCP_META_VERSION));
    bool modern = envelope && !mcp_rpc_legacy_version(envelope);
    bool is_init = method && !strcmp(method, "initialize") && json_object_get(msg, "id");
    const char *hv = cm_net_httpd_header_get(rq, "MCP-Protocol-Version");
    if (hv && !mcp_rpc_legacy_version(hv) && !mcp_rpc_modern_version(hv)) {
        S_rpc_fail(c, 400, "Bad Request: unsupported MCP-Protocol-Version");
        goto out;
    }
    if (modern && hv && strcmp(hv, envelope) != 0) {
        S_rpc_fail(c, 400, "Bad Request: MCP-Protocol-Version differs from the request's _meta");
        goto out;
    }
    const char *hm = cm_net_httpd_header_get(rq, "Mcp-Method");
    if (hm && method && strcmp(hm, method) != 0) {
        S_rpc_fail(c, 400, "Bad Request: Mcp-Method differs from the request's method");
        goto out;
    }
    if (is_init) {
        char id[33];
        if (mcp_sessions_new(s->sessions, agent, owner, id, err, sizeof err) != CM_OK) {
            S_log(s, CM_LOG_WARN, "agent %s: no session could be made: %s", agent, err);
            S_rpc_fail(c, 503, "Service Unavailable: no session could be made");
            goto out;
        }
        snprintf(sid_hdr, sizeof sid_hdr, "Mcp-Session-Id: %s", id);
    } else if (!modern) {
        if (!sid) {
            S_rpc_fail(c, 400, "Bad Request: Mcp-Session-Id is required (initialize first)");
            goto out;
        }
        bool found = false;
        if (S_session_use(s, sid, agent, owner, false, &found) != CM_OK) {
            S_rpc_fail(c, 503, "Service Unavailable: the session store does not answer");
            goto out;
        }
        if (!found) { /* unknown, ended or expired: the client initializes again */
            S_rpc_fail(c, 404, "Not Found: no such session (initialize again)");
            goto out;
        }
    }
    /* Only now does the request reach the agent's memory. */
    bool busy = false;
    sl = S_acquire(s, agent, &busy, err, sizeof err);
    if (!sl) {
        if (busy)
            S_plain(c, 503, (const char *const[]){"Retry-After: 1", NULL},
                    "Service Unavailable: every open engine is in use");
        else {
            S_log(s, CM_LOG_ERROR, "agent %s: %s", agent, err);
            S_rpc_fail(c, 500, "Internal error: the agent's memory could not be opened");
        }
        goto out;
    }
    mcp_rpc r = {sl->engine, may_write && sl->writable,
                 may_write && sl->writable ? s->tools_rw : s->tools_ro, NULL, NULL};
    const char *tool = json_string_value(json_object_get(json_object_get(msg, "params"), "name"));
    bool search = method && !strcmp(method, "tools/call") && tool && !strcmp(tool, "memory_search");
    /* The agent's first search waits (bounded) for its watcher's first sync:
     * an index that is missing or stale does not answer for it. */
    char status[256];
    int wait_ms = s->so.first_sync_wait_ms < 0 ? FIRST_SYNC_WAIT_MS : s->so.first_sync_wait_ms;
    if (search && !mcp_first_sync_wait(&sl->first, wait_ms, s->so.stop_fd)) {
        mcp_first_sync_status(status, sizeof status, wait_ms);
        r.search_status = status;
    }
    pthread_mutex_lock(&sl->use);
    /* Without a watcher a search brings the index up to date first, as
     * `clawmem search` does (one stat per file when nothing changed). */
    if (!sl->watching && search)
        cm_engine_sync(sl->engine, CM_SYNC_NOWAIT | CM_SYNC_UNLESS_WATCHED, NULL, NULL, NULL, err,
                       sizeof err);
    ans = mcp_rpc_answer(&r, msg);
    size_t mem = cm_engine_memory(sl->engine);
    pthread_mutex_unlock(&sl->use);
    S_release(s, sl, mem);
    if (!ans) { /* a notification or a response */
        cm_net_httpd_respond(c, 202, NULL, NULL, 0);
        goto out;
    }
    out = json_dumps(ans, JSON_COMPACT);
    if (!out) {
        S_plain(c, 500, NULL, "Internal Server Error");
        goto out;
    }
    if (!want_json) {
        cm_net_httpd_sse_begin(c, 200, (const char *const[]){sid_hdr[0] ? sid_hdr : NULL, NULL});
        cm_net_httpd_sse_event(c, "message", NULL, out, strlen(out));
        cm_net_httpd_sse_end(c);
    } else {
        cm_net_httpd_respond(c, 200,
                             (const char *const[]){"Content-Type: application/json",
                                                   sid_hdr[0] ? sid_hdr : NULL, NULL},
                             out, strlen(out));
    }
out:
    free(out);
    json_decref(ans);
    json_decref(msg);
}

/* ---- main ------------------------------------------------------------------ */

int mcp_serve_http(const cm_options *opt, const serve_opts *so)
{
    int status = 1;
    char err[CM_ERR_SIZE];
    srv s;
    httpd *h = NULL;
    memset(&s, 0, sizeof s);
    s.opt = *opt;
    s.so = *so;
    if (s.so.max_engines <= 0) s.so.max_engines = 32;
    pthread_mutex_init(&s.mu, NULL);
    pthread_mutex_init(&s.open_mu, NULL);
    pthread_cond_init(&s.idle, NULL);
    s.tools_ro = mcp_rpc_tools(false);
    s.tools_rw = mcp_rpc_tools(true);
    if (!s.tools_ro || !s.tools_rw) goto out;
    if (S_load_agents(&s, err, sizeof err) != CM_OK ||
        (so->tokens_path && S_load_tokens(&s, so->tokens_path, err, sizeof err) != CM_OK)) {
        S_log(&s, CM_LOG_ERROR, "%s", err);
        goto out;
    }
    S_report_agents(&s);
    const char **secrets = calloc(s.ntokens + 1, sizeof *secrets);
    for (size_t i = 0; secrets && i < s.ntokens; i++)
        secrets[i] = s.tokens[i].token;
    mcp_sessions_opts mso = {s.sessions_dsn, secrets, s.ntokens, 0, -1, NULL, NULL};
    cm_rc src = secrets ? mcp_sessions_open(&mso, &s.sessions, err, sizeof err)
                        : cm_seterr(err, sizeof err, CM_ENOMEM, "out of memory");
    free(secrets);
    if (src != CM_OK) {
        S_log(&s, CM_LOG_ERROR, "sessions: %s", err);
        goto out;
    }
    if (s.sessions_dsn)
        S_log(&s, CM_LOG_INFO, "MCP sessions are kept in PostgreSQL (shared by replicas)");
    if (serve_health_open(&s.opt, s.agents, s.nagents, s.default_agent, &s.health, err,
                          sizeof err) != CM_OK) {
        S_log(&s, CM_LOG_ERROR, "%s", err);
        goto out;
    }
    httpd_opts ho = cm_net_httpd_defaults();
    ho.listen = so->listen ? so->listen : "127.0.0.1:8765";
    if (so->max_conns > 0) ho.max_conns = so->max_conns;
    if (so->max_conns_per_addr > 0) ho.max_conns_per_addr = so->max_conns_per_addr;
    ho.max_body = MCP_MAX_MESSAGE;
    ho.handler = S_handle;
    ho.ctx = &s;
    if (cm_net_httpd_start(&ho, &h, err, sizeof err) != CM_OK) {
        S_log(&s, CM_LOG_ERROR, "%s", err);
        goto out;
    }
    /* Without tokens anyone who reaches the port is every agent: loopback only. */
    const char *addr = cm_net_httpd_addr(h);
    if (!s.auth && strncmp(addr, "127.", 4) != 0 && strncmp(addr, "[::1]", 5) != 0) {
        S_log(&s, CM_LOG_ERROR,
              "serve: listening on %s without --tokens would let anyone reach every agent's "
              "memory: give --tokens FILE or listen on loopback",
              addr);
        goto out;
    }
    printf("listening on http://%s/mcp\n", addr);
    fflush(stdout);
    S_log(&s, CM_LOG_INFO, "serving %zu agent(s) on http://%s/mcp%s", s.nagents, addr,
          s.auth ? "" : " without tokens (loopback)");
    for (;;) {
        struct pollfd p = {so->stop_fd, POLLIN, 0};
        if (so->stop_fd < 0) {
            pause();
            continue;
        }
        int n = poll(&p, 1, -1);
        if (n < 0 && errno == EINTR) continue;
        break;
    }
    status = 0;
out:
    cm_net_httpd_stop(h, 5000);
    while (s.slots) {
        slot *n = s.slots->next;
        S_slot_close(s.slots);
        s.slots = n;
    }
    mcp_sessions_free(s.sessions);
    if (s.sessions_dsn) memset(s.sessions_dsn, 0, strlen(s.sessions_dsn)); /* a secret */
    free(s.sessions_dsn);
    for (size_t i = 0; i < s.nagents; i++) {
        free(s.agents[i]);
        if (s.dsns && s.dsns[i]) memset(s.dsns[i], 0, strlen(s.dsns[i]));
        if (s.dsns) free(s.dsns[i]);
    }
    free(s.dsns);
    free(s.agents);
    free(s.default_agent);
    for (size_t i = 0; i < s.ntokens; i++) {
        /* the token leaves memory wiped */
        if (s.tokens[i].token) memset(s.tokens[i].token, 0, strlen(s.tokens[i].token));
        free(s.tokens[i].token);
        free(s.tokens[i].agent);
    }
    free(s.tokens);
    serve_health_free(s.health);
    json_decref(s.tools_ro);
    json_decref(s.tools_rw);
    pthread_mutex_destroy(&s.mu);
    pthread_mutex_destroy(&s.open_mu);
    pthread_cond_destroy(&s.idle);
    return status;
}
