/*
 * test_gateway_run.c — the running gateway end to end over its HTTP
 * channel, with the loopback fake model (fakeserver.c) and a fake clock for
 * debounce and queue delays: duplicates redelivered (one run), a burst
 * debounced into one turn, a message mid-run in collect mode, a long reply
 * with a code fence chunked under the limit, a fact written with
 * memory_write and found in a new session with memory_search, an unapproved
 * sender (no model call, no agent opened), SSE, 503 while draining, reply
 * shaping and routing rules; and the `clawmem gateway` process killed with
 * -9 mid-run, restarted, nothing accepted lost.
 */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/gateway/channels/http_channel.h"
#include "../src/gateway/core/reload.h"
#include "../src/gateway/core/runtime.h"
#include "../src/gateway/gateway_int.h"
#include "../src/session/sessions.h"
#include "../src/gateway/channels/telegram.h"
#include "../src/tools/exec.h"
#include "fake_telegram.h"
#include "fakeserver.h"
#include "test.h"

/* The typed snapshot of root (NULL when root is rejected). */
static cm_rtcfg *rtc(const json_t *root)
{
    cm_rtcfg *c = NULL;
    char err[256];
    return cm_rtcfg_from_json(root, &c, err, sizeof err) ? NULL : c;
}

#define TOKEN "tok-gateway-test-4242"
#define T0    1800000000000LL

static int64_t g_now = T0;
static int64_t t_clock(void *ctx)
{
    (void)ctx;
    return __atomic_load_n(&g_now, __ATOMIC_SEQ_CST);
}
static void t_advance(int64_t ms)
{
    __atomic_add_fetch(&g_now, ms, __ATOMIC_SEQ_CST);
}

/* ---- a tiny HTTP client --------------------------------------------------- */

static int t_connect(const char *addr)
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

static bool t_write(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w <= 0) return false;
        s += w;
        n -= (size_t)w;
    }
    return true;
}

/* One request (Connection: close); returns the status, body into resp. */
static int t_http(const char *addr, const char *method, const char *path, const char *token,
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

static int t_post(const char *addr, const char *json, buf *resp)
{
    return t_http(addr, "POST", "/v1/messages", TOKEN, json, resp);
}

/* The replies of peer as a JSON array (new reference). */
static json_t *t_replies(const char *addr, const char *peer)
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

/* The text of every message the model was sent in request i. */
static char *t_request_text(fake_server *fs, int i)
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

typedef struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool closed; /* runs wait while closed */
    int started;
    bool hold;    /* a run that has answered waits while hold */
    int finished; /* runs that have answered */
    gw_agents *ag;
} gate;

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

/* A journal left by an earlier gateway, written before world_start opens it. */
static const char *g_prejournal;
/* A sessions.json of agent main written before world_start (a restart). */
static const char *g_presessions;
/* Set: world_start opens the Telegram channel of the config too. */
static bool g_telegram;

typedef struct world {
    fake_server *fs;
    char base[64];
    char *dir, *ws, *state;
    json_t *cfg;
    gate gate;
    gw_runtime *rt;
    gw_channel *http, *tg;
    char addr[64];
} world;

/* A model answer queued as soon as the fake model starts (for recovery,
 * which runs inside world_start). */
static const char *t_say_later;

static bool world_start(world *w, const char *extra)
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

static void world_stop(world *w)
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

/* Ticks the runtime until idle (runs finished), at most a few seconds. */
static bool settle(world *w)
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

/* Waits (bounded) until the gate's counter (its runs started or finished)
 * reaches n. */
static bool wait_gate(world *w, const int *count, int n)
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

/* Lets the runs waiting at the gate go on. */
static void gate_open(world *w)
{
    pthread_mutex_lock(&w->gate.mu);
    w->gate.closed = false;
    pthread_cond_broadcast(&w->gate.cv);
    pthread_mutex_unlock(&w->gate.mu);
}

/* The session entry of key as on disk, every pending change written. */
static json_t *t_disk_entry(world *w, const char *key)
{
    char err[256];
    cm_session_store_sync(NULL, err, sizeof err);
    json_t *doc = json_load_file(path_in(w->state, "agents/main/sessions/sessions.json"), 0, NULL);
    json_t *e = json_incref(json_object_get(doc, key));
    json_decref(doc);
    return e;
}

static char *msg_json(const char *peer, const char *id, const char *text)
{
    json_t *o =
        json_pack("{s:s,s:s,s:s,s:s}", "peer", peer, "sender", peer, "messageId", id, "text", text);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

static int post_text(world *w, const char *peer, const char *id, const char *text)
{
    buf r = BUF_INIT;
    char *m = msg_json(peer, id, text);
    int st = t_post(w->addr, m, &r);
    free(m);
    cm_buf_release(&r);
    return st;
}

/* ---- tests ------------------------------------------------------------------------ */

TEST(gateway_run_duplicate_redelivered_runs_once)
{
    world w;
    if (!world_start(&w, NULL)) return;
    fake_push_chat_text(w.fs, "Hello there.", 50);
    EXPECT_INT(post_text(&w, "alice", "m1", "hi"), 202);
    EXPECT_INT(post_text(&w, "alice", "m1", "hi"), 202); /* redelivered */
    EXPECT(settle(&w));
    EXPECT_INT(post_text(&w, "alice", "m1", "hi"), 202); /* after the run too */
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    json_t *r = t_replies(w.addr, "alice");
    EXPECT_INT(json_array_size(r), 1);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(r, 0), "text")), "Hello there.");
    json_decref(r);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "duplicates")), 2);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    /* the token guards the channel */
    buf b = BUF_INIT;
    EXPECT_INT(t_http(w.addr, "POST", "/v1/messages", "wrong", "{}", &b), 401);
    EXPECT_INT(t_http(w.addr, "POST", "/v1/messages", NULL, "{}", &b), 401);
    EXPECT_INT(t_post(w.addr, "{\"text\":\"no peer\"}", &b), 400);
    cm_buf_release(&b);
    world_stop(&w);
}

TEST(gateway_run_burst_debounced_into_one_turn)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"inbound\":{\"debounceMs\":2000}}}")) return;
    fake_push_chat_text(w.fs, "Got all three.", 50);
    EXPECT_INT(post_text(&w, "bob", "b1", "first part"), 202);
    t_advance(500);
    EXPECT_INT(post_text(&w, "bob", "b2", "second part"), 202);
    t_advance(500);
    EXPECT_INT(post_text(&w, "bob", "b3", "third part"), 202);
    t_advance(1999); /* still inside the window of the last one */
    cm_gw_runtime_tick(w.rt);
    EXPECT(cm_gw_runtime_wait_idle(w.rt, 5000));
    EXPECT_INT(fake_count(w.fs), 0);
    t_advance(1);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    char *sent = t_request_text(w.fs, 0);
    EXPECT_CONTAINS(sent, "first part\nsecond part\nthird part");
    free(sent);
    json_t *r = t_replies(w.addr, "bob");
    EXPECT_INT(json_array_size(r), 1);
    json_decref(r);
    /* every message of the burst is answered in the journal */
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

TEST(gateway_run_collect_while_a_run_is_active)
{
    world w;
    if (!world_start(&w, NULL)) return;
    fake_push_chat_text(w.fs, "First answer.", 50);
    fake_push_chat_text(w.fs, "Answer to both followups.", 50);
    w.gate.closed = true;
    EXPECT_INT(post_text(&w, "carol", "c1", "question one"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT(wait_gate(&w, &w.gate.started, 1));
    /* mid-run: collect (the default) queues them */
    EXPECT_INT(post_text(&w, "carol", "c2", "followup A"), 202);
    EXPECT_INT(post_text(&w, "carol", "c3", "followup B"), 202);
    json_t *st = cm_gw_runtime_status(w.rt);
    json_t *s0 = json_array_get(json_object_get(st, "sessions"), 0);
    EXPECT_STR(json_string_value(json_object_get(s0, "key")), "agent:main:main");
    EXPECT(json_is_true(json_object_get(s0, "active")));
    EXPECT_INT(json_integer_value(json_object_get(s0, "queued")), 2);
    json_decref(st);
    gate_open(&w);
    EXPECT(cm_gw_runtime_wait_idle(w.rt, 20000));
    EXPECT_INT(fake_count(w.fs), 1);
    cm_gw_runtime_tick(w.rt); /* the queue's 1000 ms quiet time has not passed */
    EXPECT(cm_gw_runtime_wait_idle(w.rt, 5000));
    EXPECT_INT(fake_count(w.fs), 1);
    t_advance(1000);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 2);
    char *sent = t_request_text(w.fs, 1);
    EXPECT_CONTAINS(sent, "[Queued messages while agent was busy]");
    EXPECT_CONTAINS(sent, "followup A");
    EXPECT_CONTAINS(sent, "followup B");
    EXPECT_CONTAINS(sent, "First answer."); /* the session's history came along */
    free(sent);
    json_t *r = t_replies(w.addr, "carol");
    EXPECT_INT(json_array_size(r), 2);
    json_decref(r);
    st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

/* Lines opening or closing a ``` fence in s. */
static int fence_lines(const char *s)
{
    int n = 0;
    for (const char *p = s; p && *p;) {
        if (!strncmp(p, "```", 3)) n++;
        p = strchr(p, '\n');
        if (p) p++;
    }
    return n;
}

TEST(gateway_run_long_reply_chunked_with_fences_whole)
{
    world w;
    if (!world_start(&w, "{\"channels\":{\"http\":{\"textChunkLimit\":1000,"
                         "\"responsePrefix\":\"[{model}]\"}}}"))
        return;
    buf reply = BUF_INIT;
    for (int i = 0; i < 8; i++)
        cm_buf_printf(&reply, "Paragraph %d explains one more thing about the code below.\n\n", i);
    cm_buf_adds(&reply, "```c\n");
    for (int i = 0; i < 60; i++)
        cm_buf_printf(&reply, "int value_%02d = %d; /* a line of code */\n", i, i);
    cm_buf_adds(&reply, "```\n\nThat is all.");
    fake_push_chat_text(w.fs, reply.data, 50);
    EXPECT_INT(post_text(&w, "dave", "d1", "show me code"), 202);
    EXPECT(settle(&w));
    json_t *r = t_replies(w.addr, "dave");
    EXPECT(json_array_size(r) >= 3);
    size_t i;
    json_t *e;
    buf all = BUF_INIT;
    json_array_foreach(r, i, e)
    {
        const char *t = json_string_value(json_object_get(e, "text"));
        EXPECT(cm_gw_u16len(t, strlen(t)) <= 1000);
        EXPECT(fence_lines(t) % 2 == 0); /* every piece renders: its fences are closed */
        cm_buf_adds(&all, t);
    }
    EXPECT(!strncmp(json_string_value(json_object_get(json_array_get(r, 0), "text")),
                    "[gpt-t] Paragraph 0", 19));
    EXPECT_CONTAINS(all.data, "int value_00 = 0;");
    EXPECT_CONTAINS(all.data, "int value_59 = 59;");
    EXPECT_CONTAINS(all.data, "That is all.");
    cm_buf_release(&all);
    cm_buf_release(&reply);
    json_decref(r);
    world_stop(&w);
}

TEST(gateway_run_memory_written_is_found_in_a_new_session)
{
    world w;
    if (!world_start(&w, NULL)) return;
    fake_push_chat_call(w.fs, "w1", "memory_write",
                        "{\"text\":\"- The boat is called Nautilus.\",\"path\":\"MEMORY.md\"}");
    fake_push_chat_text(w.fs, "Noted.", 50);
    EXPECT_INT(post_text(&w, "erin", "e1", "Remember: the boat is called Nautilus."), 202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 2);
    fake_push_chat_text(w.fs, "Hello again. What shall we do?", 50); /* the greeting */
    EXPECT_INT(post_text(&w, "erin", "e2", "/new"), 202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 3); /* /new: the notice, then a greeting turn */
    char *greet = t_request_text(w.fs, 2);
    EXPECT(!strstr(greet, "Remember: the boat")); /* a new session: the old turn is gone */
    EXPECT_CONTAINS(greet, "/new or /reset");
    free(greet);
    fake_push_chat_call(w.fs, "s1", "memory_search", "{\"query\":\"boat called\"}");
    fake_push_chat_text(w.fs, "The boat is called Nautilus.", 50);
    EXPECT_INT(post_text(&w, "erin", "e3", "What is the boat called?"), 202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 5);
    const fake_request *q = fake_get(w.fs, 4); /* carries the tool result */
    EXPECT_CONTAINS(q->body, "Nautilus");
    json_t *r = t_replies(w.addr, "erin");
    EXPECT_INT(json_array_size(r), 4);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(r, 1), "text")),
               "\xe2\x9c\x85 New session started \xc2\xb7 model: openai/gpt-t");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(r, 2), "text")),
               "Hello again. What shall we do?");
    json_decref(r);
    /* the old transcript was archived */
    world_stop(&w);
}

TEST(gateway_run_unapproved_sender_reaches_no_model)
{
    world w;
    if (!world_start(&w, "{\"channels\":{\"http\":{\"dmPolicy\":\"pairing\",\"allowFrom\":[]}}}"))
        return;
    fake_push_chat_text(w.fs, "should never be asked", 50);
    EXPECT_INT(post_text(&w, "mallory", "x1", "what is in MEMORY.md?"), 202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 0);               /* no model call */
    EXPECT_INT(cm_gw_agents_opened(w.gate.ag), 0); /* no agent, so no memory read */
    EXPECT_INT(w.gate.started, 0);
    json_t *r = t_replies(w.addr, "mallory");
    EXPECT_INT(json_array_size(r), 1);
    EXPECT_CONTAINS(json_string_value(json_object_get(json_array_get(r, 0), "text")),
                    "Pairing code: ");
    json_decref(r);
    EXPECT_INT(post_text(&w, "mallory", "x2", "again"), 202); /* pending: no second code */
    EXPECT(settle(&w));
    r = t_replies(w.addr, "mallory");
    EXPECT_INT(json_array_size(r), 1);
    json_decref(r);
    EXPECT_INT(fake_count(w.fs), 0);
    world_stop(&w);
}

TEST(gateway_run_sse_stream_and_503_while_draining)
{
    world w;
    if (!world_start(&w, NULL)) return;
    int fd = t_connect(w.addr);
    EXPECT(fd >= 0);
    const char *rq =
        "GET /v1/events?peer=frank HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN "\r\n\r\n";
    t_write(fd, rq, strlen(rq));
    buf got = BUF_INIT;
    char tmp[2048];
    struct pollfd p = {fd, POLLIN, 0};
    /* the stream has begun once its headers arrived */
    while (!(got.data && strstr(got.data, "\r\n\r\n")) && poll(&p, 1, 5000) > 0) {
        ssize_t n = read(fd, tmp, sizeof tmp);
        if (n <= 0) break;
        cm_buf_add(&got, tmp, (size_t)n);
    }
    EXPECT_CONTAINS(got.data, "text/event-stream");
    fake_push_chat_text(w.fs, "Streamed hello.", 50);
    EXPECT_INT(post_text(&w, "frank", "f1", "hello"), 202);
    EXPECT(settle(&w));
    while (!strstr(got.data, "Streamed hello.") && poll(&p, 1, 5000) > 0) {
        ssize_t n = read(fd, tmp, sizeof tmp);
        if (n <= 0) break;
        cm_buf_add(&got, tmp, (size_t)n);
    }
    EXPECT_CONTAINS(got.data, "event: reply");
    EXPECT_CONTAINS(got.data, "Streamed hello.");
    close(fd);
    cm_buf_release(&got);
    EXPECT(cm_gw_runtime_drain(w.rt, 5000));
    EXPECT_INT(post_text(&w, "frank", "f2", "too late"), 503);
    world_stop(&w);
}

TEST(gateway_run_reply_rules)
{
    EXPECT(cm_gw_reply_is_silent("  NO_REPLY\n"));
    EXPECT(!cm_gw_reply_is_silent("NO_REPLY please"));
    json_t *cj = json_loads(
        "{\"messages\":{\"responsePrefix\":\"[{model}|{provider}|{Identity.Name}|{x}]\"},"
        "\"agents\":{\"list\":[{\"id\":\"main\",\"identity\":{\"name\":\"Clawd\"}},"
        "{\"id\":\"ops\",\"default\":false}]},"
        "\"channels\":{\"telegram\":{\"responsePrefix\":\"auto\",\"replyToMode\":\"first\","
        "\"accounts\":{\"quiet\":{\"responsePrefix\":\"\",\"replyToMode\":\"all\"}}}},"
        "\"bindings\":[{\"agentId\":\"ops\",\"match\":{\"channel\":\"telegram\","
        "\"peer\":{\"kind\":\"group\",\"id\":\"-100\"}}},"
        "{\"agentId\":\"ops\",\"match\":{\"channel\":\"http\",\"accountId\":\"work\"}}]}",
        0, NULL);
    cm_rtcfg *cfg = rtc(cj);
    json_decref(cj);
    EXPECT(cfg);
    buf b = BUF_INIT;
    EXPECT_INT(cm_gw_reply_prefix(&b, cfg, "main", "http", NULL, "anthropic/claude-x-20260101"),
               CM_OK);
    EXPECT_STR(b.data, "[claude-x|anthropic|Clawd|{x}]");
    cm_buf_reset(&b);
    cm_gw_reply_prefix(&b, cfg, "main", "telegram", "default", NULL);
    EXPECT_STR(b.data, "[Clawd]");
    cm_buf_reset(&b);
    cm_gw_reply_prefix(&b, cfg, "main", "telegram", "quiet", NULL);
    EXPECT(b.len == 0); /* "" stops the cascade */
    EXPECT_INT(cm_gw_reply_to_mode_of(cfg, "telegram", "default"), GW_REPLYTO_FIRST);
    EXPECT_INT(cm_gw_reply_to_mode_of(cfg, "telegram", "quiet"), GW_REPLYTO_ALL);
    EXPECT_INT(cm_gw_reply_to_mode_of(cfg, "http", NULL), GW_REPLYTO_OFF);
    EXPECT_INT(cm_gw_reply_text_limit(cfg, "telegram", NULL, 4096), 4000);
    cm_buf_reset(&b);
    cm_gw_route_agent(&b, cfg, "telegram", "default", "-100", true);
    EXPECT_STR(b.data, "ops");
    cm_buf_reset(&b);
    cm_gw_route_agent(&b, cfg, "telegram", "default", "42", false);
    EXPECT_STR(b.data, "main"); /* no default: the first of agents.list */
    cm_buf_reset(&b);
    cm_gw_route_agent(&b, cfg, "http", "work", "42", false);
    EXPECT_STR(b.data, "ops");
    cm_buf_reset(&b);
    cm_gw_route_session(&b, cfg, "main", "telegram", "default", "42", NULL, false);
    EXPECT_STR(b.data, "agent:main:main"); /* direct chats collapse */
    cm_buf_reset(&b);
    cm_gw_route_session(&b, cfg, "ops", "telegram", "default", "-100", "7", true);
    EXPECT_STR(b.data, "agent:ops:telegram:group:-100:thread:7");
    cm_buf_release(&b);
    cm_rtcfg_unref(cfg);
}

/* ---- the process: kill -9 mid-run, restart, nothing lost ------------------------ */

static bool wait_line(proc *p, char *addr, size_t n)
{
    char *line = proc_line(p, 20000);
    const char *at = line ? strstr(line, "http://") : NULL;
    if (at) snprintf(addr, n, "%s", at + 7);
    free(line);
    return at != NULL;
}

TEST(gateway_run_kill9_mid_run_then_restart_answers)
{
    fake_server *fs;
    char base[64];
    fs = fake_start(8, base);
    char *dir = tmp_dir();
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"gateway\":{\"auth\":{\"token\":\"" TOKEN "\"}},"
             "\"agents\":{\"defaults\":{\"model\":\"openai/"
             "gpt-t\",\"memorySearch\":{\"provider\":\"none\"}}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\","
             "\"apiKey\":\"sk-test-gw-0002\",\"models\":[]}}},"
             "\"channels\":{\"http\":{\"dmPolicy\":\"open\",\"allowFrom\":[\"*\"]}},"
             "\"messages\":{\"inbound\":{\"debounceMs\":0}}}",
             base);
    write_file(dir, "state/quantumclaw.json", cfg);
    write_file(dir, "ws/MEMORY.md", "# Facts\n");
    const char *state = cm_strdup(path_in(dir, "state"));
    const char *ws = cm_strdup(path_in(dir, "ws"));
    const char *args[] = {"--state-dir", state,      "--workspace", ws,
                          "gateway",     "--listen", "127.0.0.1:0", NULL};
    fake_push(fs, FAKE_HANG, 0, -1); /* the first model call never answers */
    proc p;
    proc_start(&p, NULL, args);
    char addr[64] = "";
    EXPECT(wait_line(&p, addr, sizeof addr));
    buf r = BUF_INIT;
    EXPECT_INT(
        t_post(addr, "{\"peer\":\"gina\",\"messageId\":\"g1\",\"text\":\"survive this\"}", &r),
        202);
    for (int i = 0; i < 200 && fake_count(fs) < 1; i++)
        usleep(50000);
    EXPECT_INT(fake_count(fs), 1); /* the run is in the model call */
    EXPECT_INT(proc_stop(&p, SIGKILL, 5000), 128 + SIGKILL);
    char *st_path = cm_strdup(path_in(state, "gateway/journal.jsonl"));
    buf j = BUF_INIT;
    cm_fs_read_file(st_path, 1 << 20, &j, NULL, 0);
    EXPECT_CONTAINS(j.data, "survive this");
    cm_buf_release(&j);
    /* restart: the accepted message is answered */
    fake_push_chat_text(fs, "Answered after the crash.", 50);
    proc_start(&p, NULL, args);
    EXPECT(wait_line(&p, addr, sizeof addr));
    json_t *rep = NULL;
    for (int i = 0; i < 200; i++) {
        json_decref(rep);
        rep = t_replies(addr, "gina");
        if (json_array_size(rep)) break;
        usleep(50000);
    }
    EXPECT_INT(json_array_size(rep), 1);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(rep, 0), "text")),
               "Answered after the crash.");
    json_decref(rep);
    /* redelivered after the restart: still one answer */
    EXPECT_INT(
        t_post(addr, "{\"peer\":\"gina\",\"messageId\":\"g1\",\"text\":\"survive this\"}", &r),
        202);
    run_result s = run_clawmem(
        NULL, (const char *const[]){"--state-dir", state, "gateway", "status", "--json", NULL});
    EXPECT_INT(s.status, 0);
    EXPECT_CONTAINS(s.out, "\"running\":true");
    EXPECT_CONTAINS(s.out, "\"recovered\":1");
    run_result_release(&s);
    /* clawmem chat goes through the running gateway (channel terminal) */
    fake_push_chat_text(fs, "Chat reply through the gateway.", 50);
    s = run_clawmem(NULL,
                    (const char *const[]){"--state-dir", state, "--workspace", ws, "chat",
                                          "hello from the terminal", "--timeout", "20000", NULL});
    EXPECT_INT(s.status, 0);
    EXPECT_CONTAINS(s.out, "Chat reply through the gateway.");
    run_result_release(&s);
    /* SIGTERM drains and exits 0; the journal has nothing pending */
    EXPECT_INT(proc_stop(&p, SIGTERM, 20000), 0);
    s = run_clawmem(NULL, (const char *const[]){"--state-dir", state, "gateway", "status", NULL});
    EXPECT_CONTAINS(s.out, "not running");
    EXPECT_CONTAINS(s.out, "journal backlog: 0");
    run_result_release(&s);
    EXPECT_INT(fake_count(fs), 3);
    /* without a gateway, chat talks to the agent in its own process */
    fake_push_chat_text(fs, "Chat reply in process.", 50);
    s = run_clawmem(NULL, (const char *const[]){"--state-dir", state, "--workspace", ws, "chat",
                                                "hello again", NULL});
    EXPECT_INT(s.status, 0);
    EXPECT_CONTAINS(s.out, "Chat reply in process.");
    run_result_release(&s);
    EXPECT_INT(fake_count(fs), 4);
    cm_buf_release(&r);
    free(st_path);
    free((char *)state);
    free((char *)ws);
    fake_stop(fs);
}

TEST(gateway_run_group_history_until_mentioned)
{
    world w;
    if (!world_start(&w, NULL)) return;
    fake_push_chat_text(w.fs, "Ann said lunch at noon.", 50);
    buf r = BUF_INIT;
    EXPECT_INT(t_post(w.addr,
                      "{\"peer\":\"team\",\"chatType\":\"group\",\"sender\":\"ann\","
                      "\"senderName\":\"Ann\",\"timestamp\":1800000000000,"
                      "\"messageId\":\"g1\",\"text\":\"lunch at noon?\"}",
                      &r),
               202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 0); /* not mentioned: history only */
    EXPECT_INT(t_post(w.addr,
                      "{\"peer\":\"team\",\"chatType\":\"group\",\"sender\":\"ben\","
                      "\"messageId\":\"g2\",\"text\":\"@bot what did ann say?\","
                      "\"mentioned\":true}",
                      &r),
               202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    char *sent = t_request_text(w.fs, 0);
    /* 2026.3.22's layout: the pending history as a JSON block, then the text */
    EXPECT_CONTAINS(sent, "  \"conversation_label\": \"group:team\",\n  \"sender\": \"ben\",\n");
    EXPECT_CONTAINS(sent, "  \"is_group_chat\": true,\n  \"was_mentioned\": true,\n"
                          "  \"history_count\": 1\n}\n```");
    EXPECT_CONTAINS(sent, "Chat history since last reply (untrusted, for context):\n```json\n[\n"
                          "  {\n    \"sender\": \"Ann id:ann\",\n"
                          "    \"timestamp_ms\": 1800000000000,\n"
                          "    \"body\": \"lunch at noon?\"\n  }\n]\n```\n\n"
                          "@bot what did ann say?");
    EXPECT_CONTAINS(sent, "\"chat_id\": \"http:team\"");
    EXPECT_CONTAINS(sent, "\"chat_type\": \"group\"");
    free(sent);
    json_t *rep = t_replies(w.addr, "team");
    EXPECT_INT(json_array_size(rep), 1);
    json_decref(rep);
    /* the group has its own session, apart from the main one */
    session_store st;
    char err[256], store[4096];
    snprintf(store, sizeof store, "%s/agents/main/sessions/sessions.json", w.state);
    EXPECT_INT(cm_session_store_read(&st, store, err, sizeof err), CM_OK);
    EXPECT(cm_session_store_get(&st, "agent:main:http:group:team") != NULL);
    EXPECT(cm_session_store_get(&st, "agent:main:main") == NULL);
    cm_session_store_release(&st);
    cm_buf_release(&r);
    world_stop(&w);
}

TEST(gateway_run_dm_prompt_tells_who_is_writing)
{
    world w;
    if (!world_start(&w, "{\"agents\":{\"defaults\":{\"envelopeTimezone\":\"utc\"}}}")) return;
    fake_push_chat_text(w.fs, "Hello Alice.", 50);
    buf r = BUF_INIT;
    EXPECT_INT(t_post(w.addr,
                      "{\"peer\":\"alice\",\"sender\":\"42\",\"senderName\":\"Alice "
                      "Liddell\",\"senderUsername\":\"alice_l\",\"timestamp\":1800000000000,"
                      "\"messageId\":\"m1\",\"text\":\"hi there\"}",
                      &r),
               202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    char *sent = t_request_text(w.fs, 0);
    EXPECT_CONTAINS(sent, "Conversation info (untrusted metadata):\n```json\n{\n"
                          "  \"message_id\": \"m1\",\n  \"sender_id\": \"42\",\n"
                          "  \"sender\": \"Alice Liddell\",\n"
                          "  \"timestamp\": \"Fri 2027-01-15T08:00Z\"\n}\n```\n\n"
                          "Sender (untrusted metadata):\n```json\n{\n"
                          "  \"label\": \"Alice Liddell (42)\",\n  \"id\": \"42\",\n"
                          "  \"name\": \"Alice Liddell\",\n  \"username\": \"alice_l\"\n}\n```"
                          "\n\nhi there");
    /* the system prompt: where it came from, trusted */
    EXPECT_CONTAINS(sent, "## Inbound Context (trusted metadata)\n");
    EXPECT_CONTAINS(sent, "  \"schema\": \"openclaw.inbound_meta.v1\",\n"
                          "  \"chat_id\": \"http:alice\",\n  \"account_id\": \"default\",\n"
                          "  \"channel\": \"http\",\n  \"provider\": \"http\",\n"
                          "  \"surface\": \"http\",\n  \"chat_type\": \"direct\"\n}");
    /* the agent's first start made the workspace files; they are injected */
    EXPECT(access(path_in(w.ws, "AGENTS.md"), F_OK) == 0);
    EXPECT_CONTAINS(sent, "## Group Chat Context\n## Inbound Context (trusted metadata)\n");
    EXPECT_CONTAINS(sent, "/AGENTS.md\n\n# AGENTS.md - How You Work Here\n");
    EXPECT_CONTAINS(sent, "today's and yesterday's daily notes");
    const char *ctx = strstr(sent, "# Project Context\n"), *run = strstr(sent, "## Runtime\n");
    EXPECT(ctx && run && strstr(sent, "## Safety\n") < ctx && ctx < run);
    free(sent);
    cm_buf_release(&r);
    /* the session's entry: where it came from and where replies go, as
     * 2026.3.22 records them */
    json_t *e = t_disk_entry(&w, "agent:main:main");
    json_t *o = json_object_get(e, "origin");
    EXPECT_STR(json_string_value(json_object_get(o, "label")), "Alice Liddell (@alice_l) id:42");
    EXPECT_STR(json_string_value(json_object_get(o, "from")), "http:alice");
    EXPECT_STR(json_string_value(json_object_get(o, "to")), "http:alice");
    EXPECT_STR(json_string_value(json_object_get(o, "chatType")), "direct");
    EXPECT_STR(json_string_value(json_object_get(json_object_get(e, "deliveryContext"), "to")),
               "http:alice");
    EXPECT_STR(json_string_value(json_object_get(e, "lastChannel")), "http");
    EXPECT_STR(json_string_value(json_object_get(e, "status")), "done");
    EXPECT(json_is_true(json_object_get(e, "systemSent")));
    json_decref(e);
    world_stop(&w);
}

TEST(gateway_run_replayed_message_keeps_its_sender)
{
    g_prejournal =
        "{\"j\":\"in\",\"id\":7,\"ts\":1800000000000,\"msg\":{\"channel\":\"http\","
        "\"peer\":\"ivy\",\"sender\":\"77\",\"senderName\":\"Ivy \\\"Poison\\\" Ng\","
        "\"senderUsername\":\"ivy_ng\",\"timestamp\":1799999000000,\"messageId\":\"i1\","
        "\"text\":\"first\"}}\n";
    world w;
    t_say_later = "Recovered.";
    bool ok = world_start(&w, "{\"agents\":{\"defaults\":{\"envelopeTimezone\":\"utc\"}}}");
    g_prejournal = NULL;
    if (!ok) return;
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    char *sent = t_request_text(w.fs, 0);
    EXPECT_CONTAINS(sent, "  \"sender\": \"Ivy \\\"Poison\\\" Ng\",\n"
                          "  \"timestamp\": \"Fri 2027-01-15T07:43Z\"\n}");
    EXPECT_CONTAINS(sent, "  \"label\": \"Ivy \\\"Poison\\\" Ng (77)\",\n  \"id\": \"77\",\n"
                          "  \"name\": \"Ivy \\\"Poison\\\" Ng\",\n  \"username\": \"ivy_ng\"");
    free(sent);
    world_stop(&w);
}

TEST(gateway_run_block_streaming_and_silent_replies)
{
    world w;
    if (!world_start(&w, "{\"agents\":{\"defaults\":{\"blockStreamingDefault\":\"on\","
                         "\"blockStreamingBreak\":\"text_end\"}},"
                         "\"messages\":{\"responsePrefix\":\"[bot]\"}}"))
        return;
    buf reply = BUF_INIT;
    for (int i = 0; i < 30; i++)
        cm_buf_printf(&reply, "Paragraph %02d has a few words in it to fill the block.\n\n", i);
    fake_push_chat_text(w.fs, reply.data, 50);
    fake_push_chat_text(w.fs, "NO_REPLY", 50);
    EXPECT_INT(post_text(&w, "hank", "h1", "tell me a lot"), 202);
    EXPECT(settle(&w));
    EXPECT_INT(post_text(&w, "hank", "h2", "say nothing"), 202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 2);
    json_t *r = t_replies(w.addr, "hank");
    EXPECT(json_array_size(r) >= 2); /* streamed in blocks */
    size_t i;
    json_t *e;
    buf all = BUF_INIT;
    json_array_foreach(r, i, e)
    {
        const char *t = json_string_value(json_object_get(e, "text"));
        EXPECT(strlen(t) <= GW_CHUNK_MAX_DEFAULT);
        EXPECT(!strstr(t, "NO_REPLY")); /* the silent answer never left */
        cm_buf_adds(&all, t);
    }
    EXPECT(!strncmp(json_string_value(json_object_get(json_array_get(r, 0), "text")),
                    "[bot] Paragraph 00", 18));
    EXPECT_CONTAINS(all.data, "Paragraph 29");
    cm_buf_release(&all);
    cm_buf_release(&reply);
    json_decref(r);
    world_stop(&w);
}

TEST(gateway_run_recovery_answers_or_fails_visibly)
{
    /* Two messages a crashed gateway accepted: one never run (it runs now),
     * one that already took two runs (answered as failed, not run again). */
    g_prejournal =
        "{\"j\":\"in\",\"id\":7,\"ts\":1800000000000,\"msg\":{\"channel\":\"http\","
        "\"peer\":\"ivy\",\"sender\":\"ivy\",\"messageId\":\"i1\",\"text\":\"first\"}}\n"
        "{\"j\":\"in\",\"id\":8,\"ts\":1800000000000,\"msg\":{\"channel\":\"http\","
        "\"peer\":\"jay\",\"sender\":\"jay\",\"messageId\":\"j1\",\"text\":\"crashes us\"}}\n"
        "{\"j\":\"run\",\"id\":8}\n{\"j\":\"run\",\"id\":8}\n"
        "{\"j\":\"in\",\"id\":9,\"ts\":1800000000000,\"msg\":{\"channel\":\"http\","
        "\"peer\":\"kim\",\"sender\":\"kim\",\"messageId\":\"k1\",\"text\":\"done\"}}\n"
        "{\"j\":\"done\",\"id\":9,\"status\":\"answered\"}\n"
        "{\"j\":\"in\",\"id\":10,\"ts\":18000"; /* torn: never acknowledged */
    world w;
    t_say_later = "Recovered first.";
    bool ok = world_start(&w, NULL);
    g_prejournal = NULL;
    if (!ok) return;
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    json_t *r = t_replies(w.addr, "ivy");
    EXPECT_INT(json_array_size(r), 1);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(r, 0), "text")),
               "Recovered first.");
    json_decref(r);
    r = t_replies(w.addr, "jay");
    EXPECT_INT(json_array_size(r), 1);
    EXPECT_CONTAINS(json_string_value(json_object_get(json_array_get(r, 0), "text")),
                    "was not answered");
    json_decref(r);
    r = t_replies(w.addr, "kim");
    EXPECT_INT(json_array_size(r), 0);
    json_decref(r);
    /* the answered one is still a duplicate for 20 minutes */
    EXPECT_INT(post_text(&w, "kim", "k1", "done"), 202);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "recovered")), 2);
    EXPECT_INT(json_integer_value(json_object_get(st, "duplicates")), 1);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    /* the ids go on after the highest whole entry (the torn one never counted) */
    EXPECT_INT(post_text(&w, "kim", "k2", "new"), 202);
    buf j = BUF_INIT;
    cm_fs_read_file(path_in(w.state, "gateway/journal.jsonl"), 1 << 20, &j, NULL, 0);
    EXPECT_CONTAINS(j.data, "\"id\":10,\"ts\"");
    cm_buf_release(&j);
    world_stop(&w);
}

/* Telegram end to end: a group message mentioning the bot, redelivered
 * under a second update id, runs the model once; the long answer with a
 * code fence goes back in sendMessage pieces of at most 4096 characters,
 * each with its fences balanced, to the group, and together they carry the
 * whole answer. */
TEST(gateway_run_telegram_group_end_to_end)
{
    tgfake f;
    tgfake_init(&f);
    char url[64];
    fake_server *tg = fake_start(4, url);
    fake_handler(tg, tgfake_handler, &f);
    char extra[512];
    snprintf(extra, sizeof extra,
             "{\"channels\":{\"telegram\":{\"botToken\":\"%s\",\"apiRoot\":\"%s/\","
             "\"groupPolicy\":\"open\",\"timeoutSeconds\":5}}}",
             TGFAKE_TOKEN, url);
    g_telegram = true;
    world w;
    bool up = world_start(&w, extra);
    g_telegram = false;
    if (up) {
        buf ans = BUF_INIT;
        cm_buf_adds(&ans, "Here it is:\n```c\n");
        for (int i = 0; i < 300; i++)
            cm_buf_printf(&ans, "int value_%03d = %d; /* a line of the listing */\n", i, i);
        cm_buf_adds(&ans, "```\nThat is all.");
        fake_push_chat_text(w.fs, ans.data, 50);
        static const char up_fmt[] =
            "{\"update_id\":%d,\"message\":{\"message_id\":10,\"from\":{\"id\":43,"
            "\"first_name\":\"Tom\",\"last_name\":\"Lee\",\"username\":\"tlee\"},"
            "\"date\":1800000000,\"chat\":{\"id\":-100,\"type\":\"group\",\"title\":\"Devs\"},"
            "\"text\":\"@clawbot show me the code\","
            "\"entities\":[{\"type\":\"mention\",\"offset\":0,\"length\":8}]}}";
        char u[512];
        snprintf(u, sizeof u, up_fmt, 1);
        tgfake_add_update(&f, u);
        snprintf(u, sizeof u, up_fmt, 2); /* redelivered */
        tgfake_add_update(&f, u);
        json_int_t dups = 0;
        for (int i = 0; i < 1000 && dups < 1; i++) {
            cm_gw_runtime_tick(w.rt);
            json_t *st = cm_gw_runtime_status(w.rt);
            dups = json_integer_value(json_object_get(st, "duplicates"));
            json_decref(st);
            if (dups < 1) usleep(10000);
        }
        EXPECT_INT((int)dups, 1);
        EXPECT(settle(&w));
        EXPECT_INT(fake_count(w.fs), 1);
        char *sent = t_request_text(w.fs, 0); /* who wrote it, from the update */
        EXPECT_CONTAINS(sent, "  \"message_id\": \"10\",\n  \"sender_id\": \"43\",\n"
                              "  \"conversation_label\": \"Devs id:-100\",\n"
                              "  \"sender\": \"Tom Lee\",\n");
        EXPECT_CONTAINS(sent, "  \"group_subject\": \"Devs\",\n");
        EXPECT_CONTAINS(sent, "  \"label\": \"Tom Lee (43)\",\n  \"id\": \"43\",\n"
                              "  \"name\": \"Tom Lee\",\n  \"username\": \"tlee\"\n}");
        EXPECT_CONTAINS(sent, "\"chat_id\": \"telegram:-100\"");
        free(sent);
        /* the group's entry, as 2026.3.22's Telegram leaves it */
        json_t *e = t_disk_entry(&w, "agent:main:telegram:group:-100");
        EXPECT_STR(json_string_value(json_object_get(e, "channel")), "telegram");
        EXPECT_STR(json_string_value(json_object_get(e, "groupId")), "-100");
        EXPECT_STR(json_string_value(json_object_get(e, "subject")), "Devs");
        EXPECT_STR(json_string_value(json_object_get(e, "displayName")), "telegram:g-devs");
        json_t *o = json_object_get(e, "origin");
        EXPECT_STR(json_string_value(json_object_get(o, "label")), "Devs id:-100");
        EXPECT_STR(json_string_value(json_object_get(o, "from")), "telegram:group:-100");
        EXPECT_STR(json_string_value(json_object_get(o, "to")), "telegram:-100");
        EXPECT_STR(json_string_value(json_object_get(e, "lastTo")), "telegram:-100");
        json_decref(e);
        pthread_mutex_lock(&f.mu);
        size_t n = json_array_size(f.sent), i;
        json_t *m;
        buf all = BUF_INIT;
        EXPECT(n >= 3); /* ~15,000 characters */
        json_array_foreach(f.sent, i, m)
        {
            const char *t = json_string_value(json_object_get(m, "text"));
            EXPECT(t != NULL);
            if (!t) continue;
            EXPECT(strlen(t) <= 4096);
            int fences = 0;
            for (const char *p = t; (p = strstr(p, "```")) != NULL; p += 3)
                fences++;
            EXPECT_INT(fences % 2, 0);
            json_t *chat = json_object_get(m, "chat_id");
            EXPECT(json_is_integer(chat)
                       ? json_integer_value(chat) == -100
                       : json_is_string(chat) && !strcmp(json_string_value(chat), "-100"));
            cm_buf_adds(&all, t);
        }
        pthread_mutex_unlock(&f.mu);
        EXPECT_CONTAINS(all.data, "int value_000 = 0;");
        EXPECT_CONTAINS(all.data, "int value_299 = 299;");
        EXPECT_CONTAINS(all.data, "That is all.");
        cm_buf_release(&all);
        cm_buf_release(&ans);
        world_stop(&w);
    }
    atomic_store(&f.stop, 1);
    fake_stop(tg);
    tgfake_release(&f);
}

/* ---- interrupt, /stop, steer ------------------------------------------------------- */

/* Waits (bounded) until the fake model has been called n times. */
static bool wait_calls(world *w, int n)
{
    for (int i = 0; i < 400 && fake_count(w->fs) < n; i++) {
        cm_gw_runtime_tick(w->rt);
        usleep(25000);
    }
    return fake_count(w->fs) >= n;
}

/* How many messages of request i have role. */
static int request_roles(fake_server *fs, int i, const char *role)
{
    const fake_request *q = fake_get(fs, i);
    json_t *b = q ? json_loads(q->body, 0, NULL) : NULL;
    int n = 0;
    size_t k;
    json_t *m;
    json_array_foreach(json_object_get(b, "messages"), k, m)
    {
        n += !strcmp(json_string_value(json_object_get(m, "role")) ?: "", role);
    }
    json_decref(b);
    return n;
}

TEST(gateway_run_interrupt_cancels_the_model_call)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"queue\":{\"mode\":\"interrupt\"}}}")) return;
    fake_push(w.fs, FAKE_HANG, 0, -1); /* the first model call hangs until cancelled */
    fake_push_chat_text(w.fs, "Second answer.", 50);
    EXPECT_INT(post_text(&w, "ivan", "i1", "first question"), 202);
    EXPECT(wait_calls(&w, 1));
    EXPECT_INT(post_text(&w, "ivan", "i2", "second question"), 202);
    EXPECT(settle(&w)); /* the hanging call was stopped: the runtime went idle */
    EXPECT_INT(fake_count(w.fs), 2);
    json_t *r = t_replies(w.addr, "ivan");
    EXPECT_INT(json_array_size(r), 1); /* only the second run's answer */
    EXPECT_STR(json_string_value(json_object_get(json_array_get(r, 0), "text")), "Second answer.");
    json_decref(r);
    /* the aborted run's user message stays in the transcript; no half answer is sent back */
    char *sent = t_request_text(w.fs, 1);
    EXPECT_CONTAINS(sent, "first question");
    EXPECT_CONTAINS(sent, "second question");
    free(sent);
    EXPECT_INT(request_roles(w.fs, 1, "assistant"), 0);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

/* Both workers are busy, so a third session's run waits for one; an
 * interrupt meanwhile aborts that waiting run: it never asks the model,
 * and only the interrupting message is answered. */
TEST(gateway_run_interrupt_aborts_a_run_still_waiting_for_a_worker)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"queue\":{\"mode\":\"interrupt\"}},"
                         "\"session\":{\"dmScope\":\"per-peer\"}}"))
        return;
    for (int i = 0; i < 3; i++) /* the three runs may ask in any order */
        fake_push_chat_text(w.fs, "An answer.", 50);
    w.gate.closed = true;
    EXPECT_INT(post_text(&w, "xavier", "x1", "first busy question"), 202);
    EXPECT_INT(post_text(&w, "yara", "y1", "second busy question"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT(wait_gate(&w, &w.gate.started, 2)); /* both workers hold a run at the gate */
    EXPECT_INT(post_text(&w, "zed", "z1", "the waiting question"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT_INT(post_text(&w, "zed", "z2", "the interrupting question"), 202);
    pthread_mutex_lock(&w.gate.mu);
    int started = w.gate.started;
    pthread_mutex_unlock(&w.gate.mu);
    EXPECT_INT(started, 2); /* z1 never reached a worker before the interrupt */
    gate_open(&w);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 3); /* x1, y1, z2: z1 never asked the model */
    json_t *r = t_replies(w.addr, "zed");
    EXPECT_INT(json_array_size(r), 1);
    json_decref(r);
    int interrupting = 0, waiting = 0;
    for (int i = 0; i < fake_count(w.fs); i++) {
        char *sent = t_request_text(w.fs, i);
        interrupting += sent && strstr(sent, "the interrupting question") != NULL;
        waiting += sent && strstr(sent, "the waiting question") != NULL;
        free(sent);
    }
    EXPECT_INT(interrupting, 1);
    EXPECT_INT(waiting, 0);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

/* debounce_ms > 0: messages.inbound.debounceMs, each message's batch let
 * go by the fake clock (the abort words are debounced like any text). */
static void S_stop_cancels_after(const char *stop_text, int64_t debounce_ms)
{
    world w;
    char extra[128];
    snprintf(extra, sizeof extra, "{\"messages\":{\"inbound\":{\"debounceMs\":%lld}}}",
             (long long)debounce_ms);
    if (!world_start(&w, extra)) return;
    fake_push(w.fs, FAKE_HANG, 0, -1);
    EXPECT_INT(post_text(&w, "judy", "j1", "a long question"), 202);
    if (debounce_ms) {
        t_advance(debounce_ms + 1);
        cm_gw_runtime_tick(w.rt);
    }
    EXPECT(wait_calls(&w, 1));
    EXPECT_INT(post_text(&w, "judy", "j2", stop_text), 202);
    if (debounce_ms) {
        t_advance(debounce_ms + 1);
        cm_gw_runtime_tick(w.rt);
    }
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 1);
    json_t *r = t_replies(w.addr, "judy");
    EXPECT_INT(json_array_size(r), 1); /* the notice; no failure of the aborted run */
    EXPECT_CONTAINS(json_string_value(json_object_get(json_array_get(r, 0), "text")),
                    "Agent was aborted.");
    json_decref(r);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

static void S_stop_cancels(const char *stop_text)
{
    S_stop_cancels_after(stop_text, 0);
}

/* The session's entry in sessions.json, or NULL. */
static json_t *t_session_entry(world *w, const char *key)
{
    json_t *doc = json_load_file(path_in(w->state, "agents/main/sessions/sessions.json"), 0, NULL);
    json_t *e = json_incref(json_object_get(doc, key));
    json_decref(doc);
    return e;
}

/* /queue is kept in the session's entry (2026.3.22's queueMode, queueCap,
 * …), so a restarted gateway runs the session the same way; /queue reset
 * removes the fields. */
TEST(gateway_run_queue_override_outlives_a_restart)
{
    world w;
    if (!world_start(&w, NULL)) return;
    EXPECT_INT(post_text(&w, "lena", "l1", "/queue interrupt cap:5"), 202);
    EXPECT(settle(&w));
    json_t *e = t_session_entry(&w, "agent:main:main");
    EXPECT_STR(json_string_value(json_object_get(e, "queueMode")), "interrupt");
    EXPECT_INT(json_integer_value(json_object_get(e, "queueCap")), 5);
    EXPECT(!json_object_get(e, "queueDrop"));
    json_t *store = json_pack("{s:o}", "agent:main:main", e);
    char *saved = json_dumps(store, JSON_COMPACT);
    json_decref(store);
    world_stop(&w);

    /* a new gateway over that store: the second message interrupts the first */
    g_presessions = saved;
    bool ok = world_start(&w, NULL);
    g_presessions = NULL;
    free(saved);
    if (!ok) return;
    fake_push_chat_text(w.fs, "First answer.", 50);
    fake_push_chat_text(w.fs, "Second answer.", 50);
    w.gate.closed = true;
    EXPECT_INT(post_text(&w, "lena", "l2", "first question"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT(wait_gate(&w, &w.gate.started, 1));
    EXPECT_INT(post_text(&w, "lena", "l3", "second question"), 202);
    gate_open(&w);
    EXPECT(settle(&w));
    json_t *r = t_replies(w.addr, "lena");
    EXPECT_INT(json_array_size(r), 1); /* the first run was aborted */
    json_decref(r);
    /* the second ran at once (collect would wait its debounce behind the first) */
    char *sent = t_request_text(w.fs, fake_count(w.fs) - 1);
    EXPECT_CONTAINS(sent, "second question");
    free(sent);
    EXPECT_INT(post_text(&w, "lena", "l4", "/queue reset"), 202);
    EXPECT(settle(&w));
    e = t_session_entry(&w, "agent:main:main");
    EXPECT(e && !json_object_get(e, "queueMode") && !json_object_get(e, "queueCap"));
    EXPECT(json_is_string(json_object_get(e, "sessionId"))); /* the rest stays */
    json_decref(e);
    world_stop(&w);
}

/* interrupt mode: a second message aborts the first run and waits for it to
 * stop; "stop" then drops that waiting run too: the model is asked once. */
TEST(gateway_run_stop_drops_the_run_an_interrupt_left_waiting)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"queue\":{\"mode\":\"interrupt\"}}}")) return;
    fake_push_chat_text(w.fs, "Unwanted answer.", 50);
    w.gate.closed = true;
    EXPECT_INT(post_text(&w, "mia", "m1", "first question"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT(wait_gate(&w, &w.gate.started, 1));
    EXPECT_INT(post_text(&w, "mia", "m2", "second question"), 202);
    EXPECT_INT(post_text(&w, "mia", "m3", "stop"), 202);
    gate_open(&w);
    EXPECT(settle(&w));
    EXPECT(fake_count(w.fs) <= 1); /* the first run only, if it got as far as the model */
    json_t *r = t_replies(w.addr, "mia");
    EXPECT_INT(json_array_size(r), 1); /* the notice */
    EXPECT_CONTAINS(json_string_value(json_object_get(json_array_get(r, 0), "text")),
                    "Agent was aborted.");
    json_decref(r);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

TEST(gateway_run_stop_cancels_the_running_call)
{
    S_stop_cancels("/stop");
}

/* a plain abort word does what /stop does */
TEST(gateway_run_abort_word_cancels_the_running_call)
{
    S_stop_cancels("Stop!");
}

/* debounced, it is still its sender's command: the batch carries the
 * sender's command authorization to the gate */
TEST(gateway_run_debounced_abort_word_still_cancels)
{
    S_stop_cancels_after("stop", 500);
}

TEST(gateway_run_steer_lands_in_the_next_model_request)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"queue\":{\"mode\":\"steer\"}}}")) return;
    fake_push_chat_call(w.fs, "call_1", "memory_search", "{\"query\":\"dog\"}");
    fake_push_chat_text(w.fs, "Steered answer.", 50);
    w.gate.closed = true;
    EXPECT_INT(post_text(&w, "kim", "k1", "what is the dog called"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT(wait_gate(&w, &w.gate.started, 1));
    /* the run is executing: this one steers it */
    EXPECT_INT(post_text(&w, "kim", "k2", "answer in French please"), 202);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(
                   json_object_get(json_array_get(json_object_get(st, "sessions"), 0), "queued")),
               0);
    json_decref(st);
    gate_open(&w);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 2); /* one run, two model calls: no followup turn */
    char *first = t_request_text(w.fs, 0), *second = t_request_text(w.fs, 1);
    EXPECT(!strstr(first, "answer in French please"));
    EXPECT_CONTAINS(second, "answer in French please");
    free(first);
    free(second);
    EXPECT_INT(request_roles(w.fs, 1, "tool"), 1);
    json_t *r = t_replies(w.addr, "kim");
    EXPECT_INT(json_array_size(r), 1);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(r, 0), "text")), "Steered answer.");
    json_decref(r);
    st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

TEST(gateway_run_steer_after_the_last_model_call_becomes_a_followup)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"queue\":{\"mode\":\"steer\"}}}")) return;
    fake_push_chat_text(w.fs, "First answer.", 50);
    fake_push_chat_text(w.fs, "Followup answer.", 50);
    w.gate.hold = true; /* the run answers, then waits before it ends */
    EXPECT_INT(post_text(&w, "leo", "l1", "first question"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT(wait_gate(&w, &w.gate.finished, 1));
    /* still running, but past its last model call */
    EXPECT_INT(post_text(&w, "leo", "l2", "one more thing"), 202);
    pthread_mutex_lock(&w.gate.mu);
    w.gate.hold = false;
    pthread_cond_broadcast(&w.gate.cv);
    pthread_mutex_unlock(&w.gate.mu);
    EXPECT(settle(&w));
    EXPECT_INT(fake_count(w.fs), 2);
    char *sent = t_request_text(w.fs, 1);
    EXPECT_CONTAINS(sent, "one more thing");
    EXPECT_CONTAINS(sent, "First answer."); /* a turn of its own, after the first */
    free(sent);
    json_t *r = t_replies(w.addr, "leo");
    EXPECT_INT(json_array_size(r), 2);
    EXPECT_STR(json_string_value(json_object_get(json_array_get(r, 1), "text")),
               "Followup answer.");
    json_decref(r);
    json_t *st = cm_gw_runtime_status(w.rt);
    EXPECT_INT(json_integer_value(json_object_get(st, "journalBacklog")), 0);
    json_decref(st);
    world_stop(&w);
}

/* The Telegram lastError of a `gateway status --json` text, or NULL. */
static char *tg_last_error(const char *status)
{
    json_t *o = json_loads(status ? status : "", 0, NULL);
    size_t i;
    json_t *c;
    char *why = NULL;
    json_array_foreach(json_object_get(o, "channels"), i, c)
    {
        const char *e = json_string_value(json_object_get(c, "lastError"));
        if (e && *e && !why) why = cm_strdup(e);
    }
    json_decref(o);
    return why;
}

TEST(gateway_run_status_shows_the_telegram_last_error)
{
    char *dir = tmp_dir();
    write_file(dir, "state/quantumclaw.json",
               "{\"gateway\":{\"auth\":{\"token\":\"" TOKEN "\"}},"
               "\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\","
               "\"memorySearch\":{\"provider\":\"none\"}}},"
               "\"channels\":{\"http\":{\"dmPolicy\":\"open\",\"allowFrom\":[\"*\"]},"
               "\"telegram\":{\"botToken\":\"424242:sekret-tg-token\","
               "\"apiRoot\":\"http://127.0.0.1:1/\",\"timeoutSeconds\":1}}}");
    write_file(dir, "ws/MEMORY.md", "# Facts\n");
    char *state = cm_strdup(path_in(dir, "state")), *ws = cm_strdup(path_in(dir, "ws"));
    const char *args[] = {"--state-dir", state,      "--workspace", ws,
                          "gateway",     "--listen", "127.0.0.1:0", NULL};
    proc p;
    proc_start(&p, NULL, args);
    char addr[64] = "";
    EXPECT(wait_line(&p, addr, sizeof addr));
    char *why = NULL;
    for (int i = 0; i < 150 && !why; i++) { /* the Bot API cannot be reached */
        run_result s = run_clawmem(
            NULL, (const char *const[]){"--state-dir", state, "gateway", "status", "--json", NULL});
        why = tg_last_error(s.out);
        EXPECT(!strstr(s.out ? s.out : "", "sekret-tg-token"));
        run_result_release(&s);
        if (!why) usleep(100000);
    }
    EXPECT(why != NULL);
    run_result s =
        run_clawmem(NULL, (const char *const[]){"--state-dir", state, "gateway", "status", NULL});
    EXPECT_CONTAINS(s.out, "telegram/default last error: ");
    EXPECT(!strstr(s.out ? s.out : "", "sekret-tg-token"));
    run_result_release(&s);
    EXPECT_INT(proc_stop(&p, SIGTERM, 20000), 0);
    free(why);
    free(state);
    free(ws);
}

/* exec and message through the gateway: a sender let in by "*" is not
 * trusted (the model is never offered exec, a call is refused, message only
 * answers the conversation itself); the sender allowFrom names is. */
TEST(gateway_run_exec_and_message_only_for_trusted_senders)
{
    world w;
    if (!world_start(&w, "{\"session\":{\"dmScope\":\"per-peer\"},\"tools\":{\"exec\":{\"host\":"
                         "\"gateway\",\"security\":\"full\"}},\"channels\":{\"http\":{"
                         "\"allowFrom\":[\"*\",\"owner\"]}}}"))
        return;
    /* the stranger */
    fake_push_chat_call(w.fs, "c1", "exec", "{\"command\":\"echo PWNED > pwned.txt\"}");
    fake_push_chat_call(w.fs, "c2", "message",
                        "{\"action\":\"send\",\"target\":\"owner\",\"message\":\"hi boss\"}");
    fake_push_chat_text(w.fs, "ok", 10);
    EXPECT_INT(post_text(&w, "stranger", "m1", "run it"), 202);
    EXPECT(settle(&w));
    EXPECT(access(path_in(w.dir, "ws/pwned.txt"), F_OK) != 0);
    const fake_request *q = fake_get(w.fs, 0);
    EXPECT(q && !strstr(q->body, "\"name\":\"exec\""));
    EXPECT(q && strstr(q->body, "\"name\":\"message\""));
    char *t1 = t_request_text(w.fs, 1), *t2 = t_request_text(w.fs, 2);
    EXPECT_CONTAINS(t1, "Tool exec not found");
    EXPECT_CONTAINS(t2, "this sender may only send to the current conversation");
    free(t1);
    free(t2);
    /* the owner: exec runs in the workspace; message reaches only named targets */
    fake_push_chat_call(w.fs, "c3", "exec", "{\"command\":\"echo PWNED > pwned.txt\"}");
    fake_push_chat_call(w.fs, "c4", "message",
                        "{\"action\":\"send\",\"target\":\"stranger\",\"message\":\"psst\"}");
    fake_push_chat_call(w.fs, "c5", "message",
                        "{\"action\":\"send\",\"message\":\"a note from the tool\"}");
    fake_push_chat_text(w.fs, "done", 10);
    EXPECT_INT(post_text(&w, "owner", "m2", "run it"), 202);
    EXPECT(settle(&w));
    EXPECT(access(path_in(w.dir, "ws/pwned.txt"), F_OK) == 0);
    q = fake_get(w.fs, 3);
    EXPECT(q && strstr(q->body, "\"name\":\"exec\""));
    char *t5 = t_request_text(w.fs, 5);
    EXPECT_CONTAINS(t5, "stranger is not an allowed target on http");
    free(t5);
    json_t *rep = t_replies(w.addr, "owner");
    char *s = json_dumps(rep, JSON_COMPACT);
    EXPECT_CONTAINS(s, "a note from the tool");
    free(s);
    json_decref(rep);
    rep = t_replies(w.addr, "stranger");
    s = json_dumps(rep, JSON_COMPACT);
    EXPECT(s && !strstr(s, "psst") && !strstr(s, "hi boss"));
    free(s);
    json_decref(rep);
    world_stop(&w);
    cm_exec_jobs_shutdown();
}

/* sessions_send: a trusted sender's turn puts a message into another
 * session of the agent through the gateway queue; that session's turn runs
 * it untrusted (no exec) and answers nowhere; an untrusted sender is never
 * offered the tool. */
TEST(gateway_run_sessions_send_queues_into_another_session)
{
    world w;
    if (!world_start(&w, "{\"session\":{\"dmScope\":\"per-peer\"},\"tools\":{\"sessions\":{"
                         "\"visibility\":\"agent\"},\"exec\":{\"host\":\"gateway\",\"security\":"
                         "\"full\"}},\"channels\":{\"http\":{\"allowFrom\":[\"*\",\"owner\"]}}}"))
        return;
    fake_push_chat_call(w.fs, "c1", "sessions_send",
                        "{\"sessionKey\":\"main\",\"message\":\"from the stranger\"}");
    fake_push_chat_text(w.fs, "hi", 10);
    EXPECT_INT(post_text(&w, "stranger", "m1", "hello"), 202);
    EXPECT(settle(&w));
    const fake_request *q = fake_get(w.fs, 0);
    EXPECT(q && !strstr(q->body, "\"name\":\"sessions_send\""));
    char *t1 = t_request_text(w.fs, 1);
    EXPECT_CONTAINS(t1, "Tool sessions_send not found");
    free(t1);
    /* the stranger's session key, from the store */
    buf sj = BUF_INIT;
    char err[256];
    EXPECT_INT(cm_fs_read_file(path_in(w.dir, "state/agents/main/sessions/sessions.json"), 1 << 20,
                               &sj, err, sizeof err),
               CM_OK);
    json_t *store = json_loads(sj.data ? sj.data : "", 0, NULL);
    const char *key = NULL, *k;
    json_t *e;
    json_object_foreach(store, k, e) if (strstr(k, "stranger")) key = k;
    EXPECT(key != NULL);
    char args[512];
    snprintf(args, sizeof args, "{\"sessionKey\":\"%s\",\"message\":\"from the owner\"}",
             key ? key : "x");
    /* the owner's run waits (timeoutSeconds 30 by default) for the
     * stranger's session's answer, run by the other worker */
    fake_push_chat_call(w.fs, "c2", "sessions_send", args);
    fake_push_chat_text(w.fs, "the stranger says thanks", 10);
    fake_push_chat_text(w.fs, "done", 10);
    EXPECT_INT(post_text(&w, "owner", "m2", "tell the stranger"), 202);
    EXPECT(settle(&w));
    EXPECT(settle(&w));
    /* the owner's call, the stranger's session's turn, then the owner's
     * again with the answer */
    EXPECT_INT(fake_count(w.fs), 5);
    bool accepted = false, ran = false;
    for (int i = 2; i < fake_count(w.fs); i++) {
        char *t = t_request_text(w.fs, i);
        q = fake_get(w.fs, i);
        if (strstr(t, "\"status\": \"ok\"") && strstr(t, "the stranger says thanks"))
            accepted = true;
        if (strstr(t, "chat_id\": \"internal:") && strstr(t, "from the owner")) {
            ran = true;
            EXPECT_CONTAINS(t, "hello"); /* the stranger's session's history */
            EXPECT(q && !strstr(q->body, "\"name\":\"exec\"")); /* never trusted */
        }
        free(t);
    }
    EXPECT(accepted);
    EXPECT(ran);
    json_decref(store);
    cm_buf_release(&sj);
    world_stop(&w);
}

TEST(gateway_run_sessions_send_to_its_own_session_times_out_at_once)
{
    world w;
    if (!world_start(&w, "{\"session\":{\"dmScope\":\"per-peer\"},\"channels\":{\"http\":{"
                         "\"allowFrom\":[\"*\",\"owner\"]}}}"))
        return;
    /* the message can only run after the caller's turn: no 30 s wait for it */
    fake_push_chat_call(w.fs, "c1", "sessions_send",
                        "{\"sessionKey\":\"current\",\"message\":\"note to self\"}");
    fake_push_chat_text(w.fs, "queued it", 10);
    fake_push_chat_text(w.fs, "noted", 10);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    EXPECT_INT(post_text(&w, "owner", "m1", "remind me"), 202);
    EXPECT(settle(&w));
    t_advance(10000); /* the queued note's followup delay */
    EXPECT(settle(&w));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    EXPECT(t1.tv_sec - t0.tv_sec < 25);
    EXPECT_INT(fake_count(w.fs), 3); /* the call, the answer, then the note's own turn */
    char *t = t_request_text(w.fs, 1);
    EXPECT_CONTAINS(t, "\"status\": \"timeout\"");
    free(t);
    world_stop(&w);
}

static cm_rc t_no_sink(void *ctx, const gw_msg *m)
{
    (void)ctx;
    (void)m;
    return CM_OK;
}

/* The HTTP channel's replies kept for late readers are bounded in all
 * (GW_HTTP_KEEP_BYTES, the oldest of every conversation first) and per
 * conversation (GW_HTTP_KEEP), not by the conversations' number times
 * their length: 1,000 conversations of 10 one-kilobyte replies (10 MB kept
 * by a ring of 256 per conversation) stay under the budget, and each
 * conversation's latest replies are still there, numbered as before. */
TEST(gateway_http_replies_kept_are_bounded)
{
    json_t *cfg = json_pack("{s:{s:{s:s}}}", "gateway", "auth", "token", TOKEN);
    gw_channel *ch = NULL;
    char err[256], peer[32], text[1024];
    EXPECT_INT(cm_gw_http_open(cfg, "127.0.0.1:0", &ch, err, sizeof err), CM_OK);
    if (!ch) return;
    EXPECT_INT(ch->ops->start(ch, t_no_sink, NULL, err, sizeof err), CM_OK);
    memset(text, 'x', sizeof text - 1);
    text[sizeof text - 1] = 0;
    for (int round = 0; round < 10; round++)
        for (int p = 0; p < 1000; p++) {
            snprintf(peer, sizeof peer, "p%d", p);
            gw_outbound o = {NULL, peer, NULL, NULL, text, false};
            EXPECT_INT(ch->ops->send(ch, &o, err, sizeof err), CM_OK);
        }
    for (int i = 0; i < GW_HTTP_KEEP + 10; i++) { /* one long conversation */
        gw_outbound o = {NULL, "long", NULL, NULL, "short", false};
        EXPECT_INT(ch->ops->send(ch, &o, err, sizeof err), CM_OK);
    }
    size_t convs, replies, bytes;
    cm_gw_http_kept(ch, &convs, &replies, &bytes);
    EXPECT_INT(convs, 1001);
    EXPECT(bytes <= GW_HTTP_KEEP_BYTES && bytes > GW_HTTP_KEEP_BYTES - 4096);
    EXPECT(replies < 1000 * 10);
    const char *addr = cm_gw_http_address(ch);
    json_t *a = t_replies(addr, "p999"); /* the newest conversation keeps its latest */
    size_t n = json_array_size(a);
    EXPECT(n >= 1);
    EXPECT_INT(json_integer_value(json_object_get(json_array_get(a, n - 1), "seq")), 10);
    json_decref(a);
    a = t_replies(addr, "long"); /* GW_HTTP_KEEP a conversation, its newest */
    EXPECT_INT(json_array_size(a), GW_HTTP_KEEP);
    EXPECT_INT(json_integer_value(json_object_get(json_array_get(a, 0), "seq")), 11);
    json_decref(a);
    ch->ops->close(ch);
    json_decref(cfg);
}

/* A reload between two turns: the run that started before it keeps the
 * snapshot it began with (its prefix), the next turn reads the new one, and
 * the old snapshot is dropped by the runtime once that run ends. */
TEST(gateway_run_reload_swaps_config_between_turns)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"responsePrefix\":\"[old]\"}}")) return;
    fake_push_chat_text(w.fs, "first answer", 50);
    fake_push_chat_text(w.fs, "second answer", 50);
    pthread_mutex_lock(&w.gate.mu);
    w.gate.closed = true;
    pthread_mutex_unlock(&w.gate.mu);
    EXPECT_INT(post_text(&w, "ivy", "i1", "one"), 202);
    cm_gw_runtime_tick(w.rt);
    EXPECT(wait_gate(&w, &w.gate.started, 1)); /* the run is under way, holding [old] */
    cm_rtcfg *held = cm_gw_runtime_config(w.rt);
    json_t *nj = json_deep_copy(w.cfg);
    json_object_set_new(json_object_get(nj, "messages"), "responsePrefix", json_string("[new]"));
    cm_rtcfg *fresh = rtc(nj);
    json_decref(nj);
    EXPECT(fresh);
    cm_gw_runtime_reload(w.rt, fresh);
    cm_rtcfg *now = cm_gw_runtime_config(w.rt);
    bool swapped = now == fresh && held != fresh;
    cm_rtcfg_unref(now);
    cm_rtcfg_unref(fresh); /* the runtime keeps its own reference */
    EXPECT(swapped);
    EXPECT_STR(held->messages.response_prefix, "[old]");
    gate_open(&w);
    EXPECT(settle(&w));
    EXPECT_INT(post_text(&w, "ivy", "i2", "two"), 202);
    EXPECT(settle(&w));
    json_t *r = t_replies(w.addr, "ivy");
    const char *t0 = json_string_value(json_object_get(json_array_get(r, 0), "text"));
    const char *t1 = json_string_value(json_object_get(json_array_get(r, 1), "text"));
    EXPECT(t0 && t1);
    EXPECT_STR(t0, "[old] first answer");
    EXPECT_STR(t1, "[new] second answer");
    json_decref(r);
    /* nothing in the runtime holds the old snapshot any more: this unref frees it */
    EXPECT_INT(__atomic_load_n(&held->refs, __ATOMIC_RELAXED), 1);
    cm_rtcfg_unref(held);
    world_stop(&w);
}

/* The reloader's log, kept for the tests. */
typedef struct logbuf {
    pthread_mutex_t mu;
    buf text;
} logbuf;
static void t_log(void *ctx, cm_log_level level, const char *msg)
{
    logbuf *l = ctx;
    pthread_mutex_lock(&l->mu);
    cm_buf_printf(&l->text, "%d %s\n", (int)level, msg);
    pthread_mutex_unlock(&l->mu);
}

/* Writes the world's config file again, with extra merged over it (or
 * text as it is when raw). */
static void t_rewrite(world *w, const char *extra, const char *raw)
{
    char *text = NULL;
    if (!raw) {
        json_t *nj = json_deep_copy(w->cfg);
        json_t *x = json_loads(extra, 0, NULL);
        json_object_update_recursive(nj, x);
        text = json_dumps(nj, JSON_INDENT(1));
        json_decref(x);
        json_decref(nj);
    }
    /* as an editor saves: a whole new file renamed over the old one */
    write_file(w->dir, "state/quantumclaw.json.new", raw ? raw : text);
    char *from = cm_strdup(path_in(w->state, "quantumclaw.json.new"));
    EXPECT_INT(rename(from, path_in(w->state, "quantumclaw.json")), 0);
    free(from);
    free(text);
}

static char *t_reply_text(world *w, const char *peer, size_t i)
{
    json_t *r = t_replies(w->addr, peer);
    const char *t = json_string_value(json_object_get(json_array_get(r, i), "text"));
    char *s = cm_strdup(t ? t : "(none)");
    json_decref(r);
    return s;
}

/* SIGHUP's path without the thread: the file rewritten, reloaded, and the
 * next message reads the new messages.responsePrefix; a gateway.* change in
 * the same write is reported as needing a restart. */
TEST(gateway_run_reload_file_applies_hot_key_to_next_message)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"responsePrefix\":\"[old]\"}}")) return;
    logbuf lb = {PTHREAD_MUTEX_INITIALIZER, BUF_INIT};
    cm_logger lg = {t_log, &lb};
    gw_reloader_opts ro = {w.rt, {NULL, w.ws, NULL, w.state}, true, {NULL, NULL}, &lg};
    gw_reloader *r = NULL;
    char err[1024];
    EXPECT_INT(cm_gw_reloader_new(&ro, &r, err, sizeof err), CM_OK);
    fake_push_chat_text(w.fs, "first answer", 50);
    fake_push_chat_text(w.fs, "second answer", 50);
    EXPECT_INT(post_text(&w, "ivy", "i1", "one"), 202);
    EXPECT(settle(&w));
    t_rewrite(&w, "{\"messages\":{\"responsePrefix\":\"[new]\"},\"gateway\":{\"port\":18999}}",
              NULL);
    EXPECT_INT(cm_gw_reloader_apply(r, err, sizeof err), CM_OK);
    EXPECT_INT(post_text(&w, "ivy", "i2", "two"), 202);
    EXPECT(settle(&w));
    char *t0 = t_reply_text(&w, "ivy", 0), *t1 = t_reply_text(&w, "ivy", 1);
    EXPECT_STR(t0, "[old] first answer");
    EXPECT_STR(t1, "[new] second answer");
    free(t0);
    free(t1);
    EXPECT_CONTAINS(lb.text.data, "config hot reload applied (messages.responsePrefix)");
    EXPECT_CONTAINS(lb.text.data, "requires gateway restart for: gateway.port");
    cm_gw_reloader_free(r);
    cm_buf_release(&lb.text);
    world_stop(&w);
}

/* A file broken on reload: the error names file:line:column, nothing
 * changes (the runtime keeps the very snapshot it had), and the next
 * message still reads the old value. */
TEST(gateway_run_reload_broken_file_keeps_old_snapshot)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"responsePrefix\":\"[old]\"}}")) return;
    logbuf lb = {PTHREAD_MUTEX_INITIALIZER, BUF_INIT};
    cm_logger lg = {t_log, &lb};
    gw_reloader_opts ro = {w.rt, {NULL, w.ws, NULL, w.state}, true, {NULL, NULL}, &lg};
    gw_reloader *r = NULL;
    char err[1024];
    EXPECT_INT(cm_gw_reloader_new(&ro, &r, err, sizeof err), CM_OK);
    cm_rtcfg *before = cm_gw_runtime_config(w.rt);
    t_rewrite(&w, NULL, "{\n  \"messages\": {\"responsePrefix\": \"[new]\",,}\n}\n");
    EXPECT_INT(cm_gw_reloader_apply(r, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "quantumclaw.json:2:");
    EXPECT_CONTAINS(lb.text.data, "config reload skipped (invalid config): ");
    EXPECT_CONTAINS(lb.text.data, "quantumclaw.json:2:");
    /* a value of the wrong kind is refused the same way */
    t_rewrite(&w, NULL, "{\"messages\": {\"responsePrefix\": \"[new]\", \"queue\": {\"cap\": -3}}}");
    EXPECT_INT(cm_gw_reloader_apply(r, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "messages.queue.cap");
    /* a file gone (an editor between delete and write) is not a reload to defaults */
    unlink(path_in(w.state, "quantumclaw.json"));
    EXPECT_INT(cm_gw_reloader_apply(r, err, sizeof err), CM_ENOTFOUND);
    cm_rtcfg *after = cm_gw_runtime_config(w.rt);
    EXPECT(after == before);
    cm_rtcfg_unref(after);
    cm_rtcfg_unref(before);
    /* a good file again for the agent opened by the next message (its own
     * load), not reloaded: the runtime still reads the old snapshot */
    t_rewrite(&w, "{\"messages\":{\"responsePrefix\":\"[not reloaded]\"}}", NULL);
    fake_push_chat_text(w.fs, "an answer", 50);
    EXPECT_INT(post_text(&w, "ivy", "i1", "one"), 202);
    EXPECT(settle(&w));
    char *t0 = t_reply_text(&w, "ivy", 0);
    EXPECT_STR(t0, "[old] an answer");
    free(t0);
    cm_gw_reloader_free(r);
    cm_buf_release(&lb.text);
    world_stop(&w);
}

/* The reloader's thread: a write to the watched file is applied after the
 * debounce (gateway.reload.debounceMs, here 0), and with mode "off" a
 * request (SIGHUP's) still reloads. */
TEST(gateway_run_reload_watch_and_request_on_the_thread)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"responsePrefix\":\"[old]\"},"
                         "\"gateway\":{\"reload\":{\"debounceMs\":0}}}"))
        return;
    const char *file = cm_strdup(path_in(w.state, "quantumclaw.json"));
    gw_reloader_opts ro = {w.rt, {NULL, w.ws, NULL, w.state}, true, {file, NULL}, NULL};
    gw_reloader *r = NULL;
    char err[1024];
    EXPECT_INT(cm_gw_reloader_new(&ro, &r, err, sizeof err), CM_OK);
    EXPECT_INT(cm_gw_reloader_start(r, err, sizeof err), CM_OK);
    t_rewrite(&w, "{\"messages\":{\"responsePrefix\":\"[watched]\"}}", NULL);
    EXPECT(cm_gw_reloader_wait(r, 1, 10000));
    cm_rtcfg *c = cm_gw_runtime_config(w.rt);
    EXPECT_STR(c->messages.response_prefix, "[watched]");
    cm_rtcfg_unref(c);
    /* mode off: the watch ignores writes; a request reloads */
    t_rewrite(&w, "{\"messages\":{\"responsePrefix\":\"[off]\"},\"gateway\":{\"reload\":{\"mode\":\"off\"}}}",
              NULL);
    EXPECT(cm_gw_reloader_wait(r, 2, 10000));
    uint64_t n = cm_gw_reloader_count(r);
    t_rewrite(&w, "{\"messages\":{\"responsePrefix\":\"[ignored]\"},\"gateway\":{\"reload\":{\"mode\":\"off\"}}}",
              NULL);
    cm_gw_reloader_request(r); /* after the write: the request reads it */
    EXPECT(cm_gw_reloader_wait(r, n + 1, 10000));
    c = cm_gw_runtime_config(w.rt);
    EXPECT_STR(c->messages.response_prefix, "[ignored]");
    cm_rtcfg_unref(c);
    cm_gw_reloader_free(r);
    free((char *)file);
    world_stop(&w);
}

/* Until the runtime's snapshot has messages.responsePrefix want (at most
 * about 10 s, woken by each reload). */
static bool t_wait_prefix(world *w, gw_reloader *r, const char *want)
{
    for (int i = 0; i < 50; i++) {
        uint64_t n = cm_gw_reloader_count(r);
        cm_rtcfg *c = cm_gw_runtime_config(w->rt);
        bool ok = c->messages.response_prefix && !strcmp(c->messages.response_prefix, want);
        cm_rtcfg_unref(c);
        if (ok) return true;
        cm_gw_reloader_wait(r, n + 1, 200);
    }
    return false;
}

/* The watch survives its directory: removed and made again, or moved away
 * and another moved in (as a sync tool or `config set` into a fresh
 * directory does), the file in the new directory is reloaded. */
TEST(gateway_run_reload_watch_survives_the_directory_made_again)
{
    world w;
    if (!world_start(&w, "{\"messages\":{\"responsePrefix\":\"[old]\"},"
                         "\"gateway\":{\"reload\":{\"debounceMs\":0}}}"))
        return;
    char *conf = cm_strdup(path_in(w.dir, "conf"));
    char *file = cm_strdup(path_in(w.dir, "conf/quantumclaw.json"));
    char *moved = cm_strdup(path_in(w.dir, "conf.old"));
    char *fresh = cm_strdup(path_in(w.dir, "conf.new"));
#define body "{\"messages\":{\"responsePrefix\":\"%s\"},\"gateway\":{\"reload\":{\"debounceMs\":0}}}"
    char text[256];
    snprintf(text, sizeof text, body, "[one]");
    write_file(w.dir, "conf/quantumclaw.json", text);
    gw_reloader_opts ro = {w.rt, {NULL, w.ws, file, w.state}, true, {file, NULL}, NULL};
    gw_reloader *r = NULL;
    char err[1024];
    EXPECT_INT(cm_gw_reloader_new(&ro, &r, err, sizeof err), CM_OK);
    EXPECT_INT(cm_gw_reloader_start(r, err, sizeof err), CM_OK);
    cm_gw_reloader_request(r);
    EXPECT(t_wait_prefix(&w, r, "[one]"));
    /* removed and made again */
    EXPECT_INT(unlink(file), 0);
    EXPECT_INT(rmdir(conf), 0);
    snprintf(text, sizeof text, body, "[two]");
    write_file(w.dir, "conf/quantumclaw.json", text);
    EXPECT(t_wait_prefix(&w, r, "[two]"));
    /* moved away, another moved in */
    EXPECT_INT(rename(conf, moved), 0);
    snprintf(text, sizeof text, body, "[three]");
    write_file(w.dir, "conf.new/quantumclaw.json", text);
    EXPECT_INT(rename(fresh, conf), 0);
    EXPECT(t_wait_prefix(&w, r, "[three]"));
    /* and the new directory's file is watched as before */
    snprintf(text, sizeof text, body, "[four]");
    write_file(w.dir, "conf/quantumclaw.json", text);
    EXPECT(t_wait_prefix(&w, r, "[four]"));
    cm_gw_reloader_free(r);
    free(conf);
    free(file);
    free(moved);
    free(fresh);
    world_stop(&w);
#undef body
}
