/*
 * test_gateway_guard.c — the running gateway under trouble (runtime.h):
 * a failed turn tells the chat a short reason and an error id, never a
 * state path or a model URL (the real agent runner against a dead model
 * and a state dir it cannot write); the pairing store's file lock held by
 * another process while already-allowed senders are answered; the journal's
 * accept limit answered 503 with Retry-After over HTTP until answers make
 * room; a dedupe key journaled by an older version still recognised.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/base/lockfile.h"
#include "../src/gateway/channels/http_channel.h"
#include "../src/gateway/core/runtime.h"
#include "../src/gateway/gateway_int.h"
#include "test.h"

/* ---- a channel that keeps what it is asked to send ------------------------ */

typedef struct fake_ch {
    gw_channel base;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    json_t *sent; /* [{"peer","text"}] */
} fake_ch;

static cm_rc f_start(gw_channel *ch, gw_sink_fn sink, void *ctx, char *err, size_t errlen)
{
    (void)ch, (void)sink, (void)ctx, (void)err, (void)errlen;
    return CM_OK;
}

static cm_rc f_send(gw_channel *ch, const gw_outbound *o, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    fake_ch *f = (fake_ch *)ch;
    pthread_mutex_lock(&f->mu);
    json_array_append_new(f->sent,
                          json_pack("{s:s,s:s}", "peer", o->peer ? o->peer : "", "text", o->text));
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return CM_OK;
}

static void f_stop(gw_channel *ch)
{
    (void)ch;
}

static const gw_channel_ops f_ops = {"http", 0,    f_start, f_send, f_stop,
                                     f_stop, NULL, NULL,    NULL,   NULL};

/* The text sent to peer (a new string), waiting at most ms real time. */
static char *f_wait(fake_ch *f, const char *peer, int64_t ms)
{
    char *out = NULL;
    int64_t end = cm_now_ms() + ms;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        size_t i;
        json_t *e;
        json_array_foreach(f->sent, i,
                           e) if (!strcmp(json_string_value(json_object_get(e, "peer")), peer))
            out = cm_strdup(json_string_value(json_object_get(e, "text")));
        int64_t left = end - cm_now_ms();
        if (out || left <= 0) break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)(left < 50 ? left : 50) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&f->cv, &f->mu, &ts);
    }
    pthread_mutex_unlock(&f->mu);
    return out;
}

/* ---- the world --------------------------------------------------------------- */

typedef struct guard {
    char *dir, *state, *ws;
    json_t *cfg;
    gw_agents *ag; /* the real agent runner, or NULL: an echo */
    gw_runtime *rt;
    fake_ch ch;
    gw_channel *http;
    pthread_mutex_t gmu;
    pthread_cond_t gcv;
    bool closed; /* echo runs wait while closed */
    buf log;     /* every log line */
} guard;

static void g_log(void *ctx, cm_log_level level, const char *msg)
{
    (void)level;
    guard *g = ctx;
    pthread_mutex_lock(&g->gmu);
    cm_buf_printf(&g->log, "%s\n", msg);
    pthread_mutex_unlock(&g->gmu);
}

static cm_rc g_run(void *ctx, const gw_run_req *rq, gw_run_res *out, char *err, size_t errlen)
{
    guard *g = ctx;
    if (g->ag) return cm_gw_agents_run(g->ag, rq, out, err, errlen);
    pthread_mutex_lock(&g->gmu);
    while (g->closed)
        pthread_cond_wait(&g->gcv, &g->gmu);
    pthread_mutex_unlock(&g->gmu);
    buf b = BUF_INIT;
    cm_buf_printf(&b, "echo: %s", rq->prompt);
    out->text = cm_buf_detach(&b);
    return CM_OK;
}

static void g_gate(guard *g, bool closed)
{
    pthread_mutex_lock(&g->gmu);
    g->closed = closed;
    pthread_cond_broadcast(&g->gcv);
    pthread_mutex_unlock(&g->gmu);
}

static const cm_logger *g_logger(guard *g)
{
    static cm_logger lg;
    lg.fn = g_log;
    lg.ctx = g;
    return &lg;
}

/* A runtime over the fake channel (and the HTTP one when http) with
 * channels.http as extra gives it; agents: the real runner. */
static bool g_start(guard *g, const char *channels_http, bool agents, bool http,
                    uint64_t journal_limit, const char *prejournal)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->gmu, NULL);
    pthread_cond_init(&g->gcv, NULL);
    pthread_mutex_init(&g->ch.mu, NULL);
    pthread_cond_init(&g->ch.cv, NULL);
    g->ch.base.ops = &f_ops;
    g->ch.sent = json_array();
    g->dir = tmp_dir();
    g->state = cm_strdup(path_in(g->dir, "state"));
    g->ws = cm_strdup(path_in(g->dir, "ws"));
    write_file(g->dir, "ws/MEMORY.md", "# Facts\n");
    if (prejournal) write_file(g->dir, "state/gateway/journal.jsonl", prejournal);
    char cfg[2048];
    /* port 9 on loopback: nothing listens, the model call fails at once */
    snprintf(cfg, sizeof cfg,
             "{\"gateway\":{\"auth\":{\"token\":\"tok-guard-0001\"}},"
             "\"agents\":{\"defaults\":{\"model\":\"openai/gpt-t\","
             "\"memorySearch\":{\"provider\":\"none\"}}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"http://127.0.0.1:9/v1\","
             "\"apiKey\":\"sk-guard-0001\",\"models\":[]}}},"
             "\"channels\":{\"http\":%s},\"messages\":{\"inbound\":{\"debounceMs\":0}},"
             "\"session\":{\"dmScope\":\"per-peer\"}}", /* each sender its own conversation */
             channels_http);
    g->cfg = json_loads(cfg, 0, NULL);
    write_file(g->dir, "state/quantumclaw.json", cfg); /* what the agents read */
    char err[512] = "";
    if (agents) {
        cm_options o = {NULL, g->ws, NULL, g->state, NULL, NULL, 1};
        if (cm_gw_agents_new(&o, &g->ag)) return false;
    }
    gw_runtime_opts ro = {g->cfg, g->state, g_run, g, NULL, NULL, 2, true, 0, g_logger(g), NULL};
    if (cm_gw_runtime_new(&ro, &g->rt, err, sizeof err)) goto fail;
    cm_gw_runtime_set_journal_limit(g->rt, journal_limit);
    if (http && (cm_gw_http_open(g->cfg, "127.0.0.1:0", &g->http, err, sizeof err) ||
                 cm_gw_runtime_add_channel(g->rt, g->http, NULL, NULL, err, sizeof err)))
        goto fail;
    if (!http && cm_gw_runtime_add_channel(g->rt, &g->ch.base, NULL, NULL, err, sizeof err))
        goto fail;
    if (cm_gw_runtime_start(g->rt, err, sizeof err)) goto fail;
    return true;
fail:
    test_fail(__FILE__, __LINE__, "gateway: %s", err);
    return false;
}

static void g_stop(guard *g)
{
    g_gate(g, false);
    cm_gw_runtime_free(g->rt);
    if (g->http) g->http->ops->close(g->http);
    cm_gw_agents_free(g->ag);
    json_decref(g->cfg);
    json_decref(g->ch.sent);
    cm_buf_release(&g->log);
    free(g->state);
    free(g->ws);
}

static cm_rc g_send(guard *g, const char *peer, const char *id, const char *text)
{
    gw_msg m = {.channel = "http", .peer = peer, .sender = peer, .message_id = id, .text = text};
    return cm_gw_runtime_sink(g->rt, &m);
}

/* ---- failure notices ------------------------------------------------------------- */

/* A path ("/srv/…", "C:\\…") or a URL in text. */
static bool S_leaks(const char *text)
{
    return strchr(text, '/') || strchr(text, '\\') || strstr(text, "http") ||
           strstr(text, "127.0.0.1") || strstr(text, "sk-");
}

/* One turn of the real agent runner in a fresh world whose state dir
 * broken_state leaves without a sessions directory (a file in its place);
 * the chat's notice and the log into *log. */
static char *S_failed_turn(bool broken_state, buf *log, char *dir_out, size_t dir_n)
{
    guard g;
    if (!g_start(&g, "{\"dmPolicy\":\"open\",\"allowFrom\":[\"*\"]}", true, false, 0, NULL))
        return NULL;
    snprintf(dir_out, dir_n, "%s", g.dir);
    if (broken_state) write_file(g.dir, "state/agents/main/sessions", "not a directory");
    char *notice = g_send(&g, "alice", "m1", "hello") ? NULL : f_wait(&g.ch, "alice", 20000);
    cm_gw_runtime_wait_idle(g.rt, 20000);
    pthread_mutex_lock(&g.gmu);
    cm_buf_adds(log, g.log.data ? g.log.data : "");
    pthread_mutex_unlock(&g.gmu);
    g_stop(&g);
    return notice;
}

/* The log line of the error id the notice gives, or NULL. */
static const char *S_log_line(const char *notice, const char *log)
{
    const char *id = strstr(notice, "Error id: ");
    char tag[64];
    if (!id) return NULL;
    snprintf(tag, sizeof tag, "[error %.8s]", id + 10);
    return strstr(log, tag);
}

TEST(gateway_guard_failure_notice_has_no_path_or_url)
{
    buf mlog = BUF_INIT, slog = BUF_INIT;
    char mdir[4096], sdir[4096];
    char *model =
        S_failed_turn(false, &mlog, mdir, sizeof mdir); /* nothing listens on the model's port */
    char *state = S_failed_turn(true, &slog, sdir, sizeof sdir);
    char m[512], s[512], ml[1024] = "", sl[1024] = "";
    snprintf(m, sizeof m, "%s", model ? model : "(none)");
    snprintf(s, sizeof s, "%s", state ? state : "(none)");
    const char *x = S_log_line(m, mlog.data ? mlog.data : "");
    if (x) snprintf(ml, sizeof ml, "%.*s", (int)strcspn(x, "\n"), x);
    x = S_log_line(s, slog.data ? slog.data : "");
    if (x) snprintf(sl, sizeof sl, "%.*s", (int)strcspn(x, "\n"), x);
    free(model);
    free(state);
    cm_buf_release(&mlog);
    cm_buf_release(&slog);
    EXPECT_CONTAINS(m, "Agent failed before reply: the model");
    EXPECT(!S_leaks(m));
    EXPECT_CONTAINS(s, "Agent failed before reply: the agent's state could not be read or written");
    EXPECT(!S_leaks(s));
    /* the id in the chat finds the log line, which has the whole error */
    EXPECT_CONTAINS(ml, "127.0.0.1:9");
    EXPECT_CONTAINS(sl, sdir);
}

/* ---- the pairing store's lock held by another process --------------------------- */

typedef struct stranger {
    guard *g;
    cm_rc rc;
    int64_t ms; /* how long its sink call took */
} stranger;

static void *S_stranger(void *arg)
{
    stranger *s = arg;
    int64_t t0 = cm_now_ms();
    s->rc = g_send(s->g, "stranger", "s1", "hi, who are you?");
    s->ms = cm_now_ms() - t0;
    return NULL;
}

typedef struct allowed {
    guard *g;
    cm_rc ra, rb;
} allowed;

static void *S_allowed(void *arg)
{
    allowed *a = arg;
    a->ra = g_send(a->g, "alice", "a1", "ping from alice");
    a->rb = g_send(a->g, "bob", "b1", "ping from bob");
    return NULL;
}

/* True once the journal on disk holds text (the sink journals before it
 * decides access); waits at most ms. */
static bool S_journaled(guard *g, const char *text, int64_t ms)
{
    int64_t end = cm_now_ms() + ms;
    char path[4200];
    snprintf(path, sizeof path, "%s/gateway/journal.jsonl", g->state);
    do {
        buf b = BUF_INIT;
        char err[128];
        bool hit =
            !cm_fs_read_file(path, 1u << 20, &b, err, sizeof err) && b.data && strstr(b.data, text);
        cm_buf_release(&b);
        if (hit) return true;
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    } while (cm_now_ms() < end);
    return false;
}

TEST(gateway_guard_pairing_lock_stalls_no_other_conversation)
{
    guard g;
    if (!g_start(&g, "{\"dmPolicy\":\"pairing\",\"allowFrom\":[\"alice\",\"bob\"]}", false, false,
                 0, NULL))
        return;
    /* another process (QuantumClaw approving a code) holds the pairing file */
    char path[4200], err[256];
    snprintf(path, sizeof path, "%s/credentials/http-pairing.json", g.state);
    lockfile l;
    if (cm_lockfile_take(&l, path, LOCKFILE_REPLACE, NULL, err, sizeof err)) {
        g_stop(&g);
        EXPECT(!"lock");
    }
    int64_t t0 = cm_now_ms();
    stranger s = {&g, CM_EIO, 0};
    pthread_t th;
    pthread_create(&th, NULL, S_stranger, &s);
    /* the stranger's message is journaled: its access check now waits */
    bool waiting = S_journaled(&g, "who are you", 5000);
    int64_t t1 = cm_now_ms();
    /* from another thread: a sink stuck behind the lock must not hang the test */
    allowed al = {&g, CM_EIO, CM_EIO};
    pthread_t ath;
    pthread_create(&ath, NULL, S_allowed, &al);
    char *a = f_wait(&g.ch, "alice", 5000);
    char *b = f_wait(&g.ch, "bob", 5000);
    int64_t answered_ms = cm_now_ms() - t1;
    /* still held: nobody waited for it */
    bool stranger_done = __atomic_load_n(&s.ms, __ATOMIC_SEQ_CST) != 0;
    int64_t held_ms = cm_now_ms() - t0;
    cm_lockfile_release(&l);
    pthread_join(th, NULL);
    pthread_join(ath, NULL);
    cm_rc ra = al.ra, rb = al.rb;
    char *code = f_wait(&g.ch, "stranger", 5000);
    g_stop(&g);
    bool got_a = a && strstr(a, "ping from alice"), got_b = b && strstr(b, "ping from bob");
    if (!got_a || !got_b)
        test_fail(__FILE__, __LINE__, "alice: %s, bob: %s", a ? a : "(none)", b ? b : "(none)");
    bool got_code = code && strstr(code, "Pairing code");
    free(a);
    free(b);
    free(code);
    EXPECT(waiting);
    EXPECT_INT(ra, CM_OK);
    EXPECT_INT(rb, CM_OK);
    EXPECT(got_a && got_b);
    /* answered while the stranger's check waits for the lock (it would
     * give up after 10 s) */
    EXPECT(answered_ms < 5000);
    EXPECT(!stranger_done);
    EXPECT(held_ms < 9000);
    EXPECT_INT(s.rc, CM_OK);
    EXPECT(got_code); /* once the lock is free the stranger gets a code */
}

/* ---- the journal's limit over HTTP ------------------------------------------------- */

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
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* POSTs body to /v1/messages; the status, the whole response in resp. */
static int t_post(const char *addr, const char *body, buf *resp)
{
    int fd = t_connect(addr);
    if (fd < 0) return -1;
    buf rq = BUF_INIT;
    cm_buf_printf(&rq,
                  "POST /v1/messages HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                  "Authorization: Bearer tok-guard-0001\r\nContent-Type: application/json\r\n"
                  "Content-Length: %zu\r\n\r\n%s",
                  strlen(body), body);
    for (size_t off = 0; off < rq.len;) {
        ssize_t w = write(fd, rq.data + off, rq.len - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    cm_buf_release(&rq);
    cm_buf_reset(resp);
    char tmp[4096];
    struct pollfd p = {fd, POLLIN, 0};
    while (poll(&p, 1, 10000) > 0) {
        ssize_t r = read(fd, tmp, sizeof tmp);
        if (r <= 0) break;
        cm_buf_add(resp, tmp, (size_t)r);
    }
    close(fd);
    return resp->len > 12 ? (int)strtol(resp->data + 9, NULL, 10) : -1;
}

TEST(gateway_guard_journal_full_answers_503_retry_after)
{
    guard g;
    if (!g_start(&g, "{\"dmPolicy\":\"open\",\"allowFrom\":[\"*\"]}", false, true, 16u << 10, NULL))
        return;
    g_gate(&g, true); /* runs wait: the journal fills with unanswered messages */
    const char *addr = cm_gw_http_address(g.http);
    char text[1025], body[2048];
    memset(text, 'q', 1024);
    text[1024] = 0;
    buf r = BUF_INIT;
    int st = 0, accepted = 0;
    for (int i = 0; i < 64; i++) {
        snprintf(body, sizeof body, "{\"peer\":\"p%d\",\"messageId\":\"m%d\",\"text\":\"%s\"}", i,
                 i, text);
        if ((st = t_post(addr, body, &r)) != 202) break;
        accepted++;
    }
    char resp[1024];
    snprintf(resp, sizeof resp, "%s", r.data ? r.data : "");
    /* answers make room: accepted again */
    g_gate(&g, false);
    bool idle = cm_gw_runtime_wait_idle(g.rt, 20000);
    snprintf(body, sizeof body, "{\"peer\":\"late\",\"messageId\":\"late1\",\"text\":\"%s\"}",
             text);
    int after = t_post(addr, body, &r);
    g_stop(&g);
    cm_buf_release(&r);
    EXPECT(accepted >= 8 && accepted < 16);
    EXPECT_INT(st, 503);
    EXPECT_CONTAINS(resp, "\r\nRetry-After: 30\r\n");
    EXPECT_CONTAINS(resp, "too many unanswered messages");
    EXPECT(idle);
    EXPECT_INT(after, 202);
}

/* ---- an older version's dedupe key -------------------------------------------------- */

TEST(gateway_guard_older_journal_key_still_a_duplicate)
{
    char pre[256];
    /* answered a minute before this start (the runtime's clock is the wall's) */
    snprintf(pre, sizeof pre, "{\"j\":\"seen\",\"key\":\"http|alice|42\",\"ts\":%lld}\n",
             (long long)(cm_wall_ms() - 60000));
    guard g;
    if (!g_start(&g, "{\"dmPolicy\":\"open\",\"allowFrom\":[\"*\"]}", false, false, 0, pre)) return;
    EXPECT_INT(g_send(&g, "alice", "42", "redelivered"), CM_OK);
    EXPECT_INT(g_send(&g, "alice", "43", "new one"), CM_OK);
    cm_gw_runtime_wait_idle(g.rt, 10000);
    json_t *st = cm_gw_runtime_status(g.rt);
    json_int_t dups = json_integer_value(json_object_get(st, "duplicates"));
    json_int_t acc = json_integer_value(json_object_get(st, "accepted"));
    json_decref(st);
    g_stop(&g);
    EXPECT_INT(dups, 1);
    EXPECT_INT(acc, 1);
}
