/*
 * gw_run_world.c — see gw_run_world.h.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include "../src/gateway/channels/telegram.h"
#include "gw_run_world.h"

static int64_t g_now = T0;

static int64_t t_clock(void *ctx)
{
    (void)ctx;
    return __atomic_load_n(&g_now, __ATOMIC_SEQ_CST);
}

void t_advance(int64_t ms)
{
    __atomic_add_fetch(&g_now, ms, __ATOMIC_SEQ_CST);
}

/* ---- a tiny HTTP client --------------------------------------------------- */

int t_connect(const char *addr)
{
    char host[64];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof host) return -1;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)strtol(colon + 1, NULL, 10));
    inet_pton(AF_INET, host, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        close(fd);
        return -1;
    }
    return fd;
}

bool t_write(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w <= 0) return false;
        s += w;
        n -= (size_t)w;
    }
    return true;
}

int t_http(const char *addr, const char *method, const char *path, const char *token,
           const char *body, buf *resp)
{
    int fd = t_connect(addr);
    if (fd < 0) return -1;
    buf rq = BUF_INIT;
    cm_buf_printf(&rq, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", method, path);
    if (token) cm_buf_printf(&rq, "Authorization: Bearer %s\r\n", token);
    if (body)
        cm_buf_printf(&rq, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                      strlen(body), body);
    else
        cm_buf_adds(&rq, "\r\n");
    t_write(fd, rq.data, rq.len);
    cm_buf_release(&rq);
    buf all = BUF_INIT;
    char tmp[4096];
    struct pollfd p = {fd, POLLIN, 0};
    while (poll(&p, 1, 10000) > 0) {
        ssize_t r = read(fd, tmp, sizeof tmp);
        if (r <= 0) break;
        cm_buf_add(&all, tmp, (size_t)r);
    }
    close(fd);
    int status = -1;
    if (all.len > 12) status = (int)strtol(all.data + 9, NULL, 10);
    const char *b = all.data ? strstr(all.data, "\r\n\r\n") : NULL;
    cm_buf_reset(resp);
    cm_buf_adds(resp, b ? b + 4 : "");
    cm_buf_release(&all);
    return status;
}

int t_post(const char *addr, const char *json, buf *resp)
{
    return t_http(addr, "POST", "/v1/messages", TOKEN, json, resp);
}

json_t *t_replies(const char *addr, const char *peer)
{
    buf r = BUF_INIT;
    char path[256];
    snprintf(path, sizeof path, "/v1/replies?peer=%s&after=0", peer);
    t_http(addr, "GET", path, TOKEN, NULL, &r);
    json_t *o = json_loads(r.data ? r.data : "", 0, NULL);
    json_t *a = json_incref(json_object_get(o, "replies"));
    json_decref(o);
    cm_buf_release(&r);
    return a ? a : json_array();
}

/* ---- the fake model --------------------------------------------------------- */

char *t_request_text(fake_server *fs, int i)
{
    const fake_request *q = fake_get(fs, i);
    json_t *b = q ? json_loads(q->body, 0, NULL) : NULL;
    buf out = BUF_INIT;
    cm_buf_adds(&out, "");
    size_t k;
    json_t *m;
    json_array_foreach(json_object_get(b, "messages"), k, m)
    {
        json_t *c = json_object_get(m, "content");
        if (json_is_string(c)) cm_buf_printf(&out, "%s\n", json_string_value(c));
        size_t j;
        json_t *part;
        json_array_foreach(c, j, part)
        {
            const char *t = json_string_value(json_object_get(part, "text"));
            if (t) cm_buf_printf(&out, "%s\n", t);
        }
    }
    json_decref(b);
    return cm_buf_detach(&out);
}

/* ---- the world: runtime + HTTP channel + agents over the fake model ---------- */

static cm_rc t_run(void *ctx, const gw_run_req *rq, gw_run_res *out, char *err, size_t errlen)
{
    gate *g = ctx;
    pthread_mutex_lock(&g->mu);
    g->started++;
    pthread_cond_broadcast(&g->cv);
    while (g->closed)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    cm_rc rc = cm_gw_agents_run(g->ag, rq, out, err, errlen);
    pthread_mutex_lock(&g->mu);
    g->finished++;
    pthread_cond_broadcast(&g->cv);
    while (g->hold)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    return rc;
}

const char *g_prejournal;

const char *g_presessions;

bool g_telegram;

const char *t_say_later;

bool world_start(world *w, const char *extra)
{
    memset(w, 0, sizeof *w);
    g_now = T0;
    w->fs = fake_start(8, w->base);
    if (t_say_later) fake_push_chat_text(w->fs, t_say_later, 50);
    t_say_later = NULL;
    w->dir = tmp_dir();
    w->ws = cm_strdup(path_in(w->dir, "ws"));
    w->state = cm_strdup(path_in(w->dir, "state"));
    write_file(w->dir, "ws/MEMORY.md", "# Facts\n\n- The dog is called Biscuit.\n");
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"gateway\":{\"auth\":{\"token\":\"" TOKEN "\"}},"
             "\"agents\":{\"defaults\":{\"model\":\"openai/"
             "gpt-t\",\"memorySearch\":{\"provider\":\"none\"}}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\","
             "\"apiKey\":\"sk-test-gw-0001\",\"models\":[]}}},"
             "\"channels\":{\"http\":{\"dmPolicy\":\"open\",\"allowFrom\":[\"*\"],"
             "\"groupPolicy\":\"open\"}},"
             "\"messages\":{\"inbound\":{\"debounceMs\":0}}}",
             w->base);
    w->cfg = json_loads(cfg, 0, NULL);
    json_t *x = extra ? json_loads(extra, 0, NULL) : NULL;
    if (x) json_object_update_recursive(w->cfg, x);
    json_decref(x);
    char *text = json_dumps(w->cfg, JSON_INDENT(1));
    write_file(w->dir, "state/quantumclaw.json", text);
    free(text);
    if (g_prejournal) write_file(w->dir, "state/gateway/journal.jsonl", g_prejournal);
    if (g_presessions)
        write_file(w->dir, "state/agents/main/sessions/sessions.json", g_presessions);
    cm_options o = {NULL, w->ws, NULL, w->state, NULL, NULL, 1};
    pthread_mutex_init(&w->gate.mu, NULL);
    pthread_cond_init(&w->gate.cv, NULL);
    char err[512];
    if (cm_gw_agents_new(&o, &w->gate.ag)) return false;
    gw_runtime_opts ro = {w->cfg, w->state, t_run, &w->gate, t_clock, NULL, 2, true, 0, NULL, NULL};
    if (cm_gw_runtime_new(&ro, &w->rt, err, sizeof err) ||
        cm_gw_http_open(w->cfg, "127.0.0.1:0", &w->http, err, sizeof err) ||
        cm_gw_runtime_add_channel(w->rt, w->http, NULL, NULL, err, sizeof err) ||
        (g_telegram && (cm_gw_telegram_open(w->cfg, NULL, w->state, &w->tg, err, sizeof err) ||
                        cm_gw_runtime_add_channel(w->rt, w->tg, NULL, NULL, err, sizeof err))) ||
        cm_gw_runtime_start(w->rt, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "gateway: %s", err);
        return false;
    }
    snprintf(w->addr, sizeof w->addr, "%s", cm_gw_http_address(w->http));
    return true;
}

void world_stop(world *w)
{
    pthread_mutex_lock(&w->gate.mu);
    w->gate.closed = false;
    w->gate.hold = false;
    pthread_cond_broadcast(&w->gate.cv);
    pthread_mutex_unlock(&w->gate.mu);
    cm_gw_runtime_free(w->rt);
    if (w->http) w->http->ops->close(w->http);
    if (w->tg) w->tg->ops->close(w->tg);
    cm_gw_agents_free(w->gate.ag);
    json_decref(w->cfg);
    fake_stop(w->fs);
    free(w->ws);
    free(w->state);
}

bool settle(world *w)
{
    for (int i = 0; i < 100; i++) {
        cm_gw_runtime_tick(w->rt);
        if (cm_gw_runtime_wait_idle(w->rt, 100)) {
            cm_gw_runtime_tick(w->rt);
            if (cm_gw_runtime_wait_idle(w->rt, 10000)) return true;
        }
    }
    return false;
}

bool wait_gate(world *w, const int *count, int n)
{
    pthread_mutex_lock(&w->gate.mu);
    for (int i = 0; i < 100 && *count < n; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&w->gate.cv, &w->gate.mu, &ts);
    }
    bool ok = *count >= n;
    pthread_mutex_unlock(&w->gate.mu);
    return ok;
}

void gate_open(world *w)
{
    pthread_mutex_lock(&w->gate.mu);
    w->gate.closed = false;
    pthread_cond_broadcast(&w->gate.cv);
    pthread_mutex_unlock(&w->gate.mu);
}

static char *msg_json(const char *peer, const char *id, const char *text)
{
    json_t *o =
        json_pack("{s:s,s:s,s:s,s:s}", "peer", peer, "sender", peer, "messageId", id, "text", text);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

int post_text(world *w, const char *peer, const char *id, const char *text)
{
    buf r = BUF_INIT;
    char *m = msg_json(peer, id, text);
    int st = t_post(w->addr, m, &r);
    free(m);
    cm_buf_release(&r);
    return st;
}

/* ---- the process: kill -9 mid-run, restart, nothing lost ------------------------ */

bool wait_line(proc *p, char *addr, size_t n)
{
    char *line = proc_line(p, 20000);
    const char *at = line ? strstr(line, "http://") : NULL;
    if (at) snprintf(addr, n, "%s", at + 7);
    free(line);
    return at != NULL;
}
