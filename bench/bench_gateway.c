/*
 * bench_gateway.c — `make bench`, the gateway's own cost: 10,000 inbound
 * messages over 1,000 conversations POSTed to the HTTP channel by 8 client
 * threads on keep-alive connections, answered by a zero-latency fake model
 * (an in-process run function that replies at once), so what is measured is
 * the gateway: HTTP parsing, the journal (write + fdatasync per message),
 * dedupe, access, routing, the session queue, the worker pool, reply
 * shaping and chunking, the channel's send. Debounce is off (its window
 * would be added latency by design). Prints one JSON object: messages per
 * second, added latency p50/p99 (POST sent → reply handed to the channel),
 * RSS and open descriptors with 1,000 live conversations.
 * With "agent" as the fourth argument the runs are real agent turns instead
 * (sessions.json, transcripts, the runner) against a zero-latency loopback
 * model (an httpd answering every chat request at once): the whole path of
 * a message.
 * With ENTRIES after "agent", sessions.json starts with that many entries
 * (the conversations' own among them, so every turn finds its session; the
 * rest other sessions of the same shape): the per-turn cost of the store.
 * With "paced" after ENTRIES each client waits for its reply before its next
 * message (8 in flight): the added latency is a turn's own, not a backlog's.
 * With "soak" instead (paced too) RSS, open descriptors, the gateway
 * journal's, sessions.json's and its journal's sizes, the added latency of
 * the 5% of messages before each point and the CPU time per reply since the
 * last are reported at every 10% of the run (on stderr as each is taken,
 * and in the JSON at the end); the model's window is small so that
 * conversations compact as they grow.
 * Usage: bench_gateway WORKDIR [MESSAGES] [CONVERSATIONS] [agent [ENTRIES [paced|soak]]]
 * Environment: CLAWMEM_BENCH_TRACE_EVERY=N prints RSS and glibc's heap
 * figures (in use, free inside the heap, mapped) every N replies;
 * CLAWMEM_BENCH_NO_TUNE=1 leaves glibc's malloc defaults (the gateway's
 * cm_gw_malloc_tune otherwise, as cm_gateway_start); CLAWMEM_BENCH_TRIM_EVERY=N
 * calls malloc_trim every N replies.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <jansson.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "../src/session/sessions.h"
#include "../src/session/transcript.h"
#include "../src/gateway/channels/http_channel.h"
#include "../src/gateway/core/runtime.h"
#include "../src/gateway/gateway_int.h"
#include "../src/net/httpd.h"

#define CLIENTS 8
#define TOKEN   "bench-token-0123456789"

static int64_t g_n, g_convs;
static double *g_sent;              /* µs, by message index */
static double *g_reply;             /* µs, by message index */
static int64_t g_replies, g_failed; /* replies; those saying a run failed */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static bool g_paced;                /* each client waits for its reply before the next POST */
static const char *g_state;         /* the state dir (journal sizes) */

/* ---- soak checkpoints: every 10% of the messages -------------------------- */

#define MARKS 10
typedef struct mark {
    int64_t at;       /* replies when taken */
    long rss_kb;
    int fds;
    long long journal_bytes, store_bytes, store_wal_bytes;
    double p50, p99;  /* added latency (ms) of the 5% of messages before */
    double cpu_ms;    /* the process's CPU time per reply since the last mark */
    int64_t model_calls; /* requests the model answered so far (turns, flushes, compactions) */
} mark;
static mark g_marks[MARKS];
static int g_nmarks;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* ---- the zero-latency model ------------------------------------------------ */

static cm_rc fake_run(void *ctx, const gw_run_req *rq, gw_run_res *out, char *err, size_t errlen)
{
    (void)ctx;
    (void)err;
    (void)errlen;
    memset(out, 0, sizeof *out);
    char t[64];
    snprintf(t, sizeof t, "ok (%zu characters)", strlen(rq->prompt));
    out->text = cm_strdup(t);
    return out->text ? CM_OK : CM_ENOMEM;
}

/* The zero-latency model of the agent mode: every request gets the same
 * streamed answer at once (OpenAI-compatible SSE), with a usage that counts
 * the request as a tokenizer roughly would (4 bytes a token), so that a
 * conversation's reported context grows with it and compaction runs when
 * the window is small (the soak's). */
static int64_t g_model_calls, g_model_bytes_max;
static void model_answer(void *ctx, const httpd_req *rq, httpd_conn *c)
{
    (void)ctx;
    pthread_mutex_lock(&g_mu);
    g_model_calls++;
    if ((int64_t)rq->body_len > g_model_bytes_max) g_model_bytes_max = (int64_t)rq->body_len;
    pthread_mutex_unlock(&g_mu);
    char body[512];
    long long prompt = (long long)(rq->body_len / 4);
    int n = snprintf(body, sizeof body,
                     "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Sunny.\"},"
                     "\"finish_reason\":\"stop\"}]}\n\n"
                     "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%lld,"
                     "\"completion_tokens\":2,\"total_tokens\":%lld}}\n\ndata: [DONE]\n\n",
                     prompt, prompt + 2);
    static const char *const hdr[] = {"Content-Type: text/event-stream", NULL};
    cm_net_httpd_respond(c, 200, hdr, body, (size_t)n);
}

static void take_mark(void);
static void trace_point(void);
static int64_t g_trace_every; /* CLAWMEM_BENCH_TRACE_EVERY: a heap line every N replies */
static int64_t g_trim_every;  /* CLAWMEM_BENCH_TRIM_EVERY: malloc_trim every N replies */

/* ---- a channel that times each reply, around the HTTP channel --------------- */

typedef struct timed {
    gw_channel base;
    gw_channel *http;
} timed;

static cm_rc t_start(gw_channel *ch, gw_sink_fn sink, void *ctx, char *err, size_t errlen)
{
    timed *t = (timed *)ch;
    return t->http->ops->start(t->http, sink, ctx, err, errlen);
}

static cm_rc t_send(gw_channel *ch, const gw_outbound *o, char *err, size_t errlen)
{
    timed *t = (timed *)ch;
    cm_rc rc = t->http->ops->send(t->http, o, err, errlen);
    double now = now_us();
    long long i = o->reply_to ? strtoll(o->reply_to + 1, NULL, 10) : -1;
    pthread_mutex_lock(&g_mu);
    if (i >= 0 && i < g_n && g_reply[i] == 0) {
        g_reply[i] = now;
        g_replies++;
        if (strstr(o->text, "Agent failed") && !g_failed++)
            fprintf(stderr, "bench_gateway: first failed run: %.300s\n", o->text);
        if (g_nmarks < MARKS && g_replies >= g_n * (g_nmarks + 1) / MARKS) take_mark();
        if (g_trace_every > 0 && g_replies % g_trace_every == 0) trace_point();
        if (g_trim_every > 0 && g_replies % g_trim_every == 0) malloc_trim(0);
        pthread_cond_broadcast(&g_cv);
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

static void t_stop(gw_channel *ch)
{
    timed *t = (timed *)ch;
    t->http->ops->stop(t->http);
}

static void t_close(gw_channel *ch)
{
    timed *t = (timed *)ch;
    t->http->ops->close(t->http);
}

static gw_channel_ops t_ops = {
    .name = "http", .text_limit = 4000, .start = t_start, .send = t_send, .stop = t_stop,
    .close = t_close};

/* ---- clients ----------------------------------------------------------------- */

static char g_addr[64];

static int dial(void)
{
    char host[64];
    const char *colon = strrchr(g_addr, ':');
    memcpy(host, g_addr, (size_t)(colon - g_addr));
    host[colon - g_addr] = 0;
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)strtol(colon + 1, NULL, 10));
    inet_pton(AF_INET, host, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* Reads one response (headers and Content-Length body); its status. */
static int read_response(int fd, buf *in)
{
    for (;;) {
        char *end = in->data ? strstr(in->data, "\r\n\r\n") : NULL;
        if (end) {
            const char *cl = strcasestr(in->data, "content-length:");
            size_t blen = cl && cl < end ? (size_t)strtoul(cl + 15, NULL, 10) : 0;
            size_t total = (size_t)(end + 4 - in->data) + blen;
            if (in->len >= total) {
                int status = (int)strtol(in->data + 9, NULL, 10);
                memmove(in->data, in->data + total, in->len - total);
                in->len -= total;
                in->data[in->len] = 0;
                return status;
            }
        }
        char tmp[4096];
        ssize_t r = read(fd, tmp, sizeof tmp);
        if (r <= 0) return -1;
        cm_buf_add(in, tmp, (size_t)r);
    }
}

static void *client(void *arg)
{
    long id = (long)arg;
    int fd = dial();
    buf in = BUF_INIT, rq = BUF_INIT, body = BUF_INIT;
    long errors = 0;
    for (int64_t i = id; i < g_n && fd >= 0; i += CLIENTS) {
        cm_buf_reset(&body);
        cm_buf_printf(&body,
                      "{\"peer\":\"user%lld\",\"sender\":\"user%lld\",\"messageId\":\"m%lld\","
                      "\"text\":\"message %lld: how is the weather today?\"}",
                      (long long)(i % g_convs), (long long)(i % g_convs), (long long)i,
                      (long long)i);
        cm_buf_reset(&rq);
        cm_buf_printf(&rq,
                      "POST /v1/messages HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer " TOKEN
                      "\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                      body.len, body.data);
        g_sent[i] = now_us();
        size_t off = 0;
        while (off < rq.len) {
            ssize_t w = write(fd, rq.data + off, rq.len - off);
            if (w <= 0) break;
            off += (size_t)w;
        }
        if (read_response(fd, &in) != 202) {
            errors++;
            continue;
        }
        if (g_paced) { /* closed loop: the reply before the next message */
            pthread_mutex_lock(&g_mu);
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 60;
            while (g_reply[i] == 0 && !pthread_cond_timedwait(&g_cv, &g_mu, &ts)) {
            }
            pthread_mutex_unlock(&g_mu);
        }
    }
    if (fd >= 0) close(fd);
    cm_buf_release(&in);
    cm_buf_release(&rq);
    cm_buf_release(&body);
    return (void *)errors;
}

/* sessions.json with n entries, the conversations' first (as clawmem's
 * turns leave them: id, file, counters, tokens, model). */
static bool populate(const char *state, int64_t n)
{
    buf dir = BUF_INIT, path = BUF_INIT, key = BUF_INIT;
    cm_buf_printf(&dir, "%s/agents/main/sessions", state);
    cm_fs_mkdirs(dir.data, NULL, 0);
    cm_buf_printf(&path, "%s/sessions.json", dir.data);
    json_t *st = json_object();
    for (int64_t i = 0; i < n; i++) {
        char id[37];
        cm_transcript_uuid(id);
        cm_buf_reset(&key);
        if (i < g_convs)
            cm_buf_printf(&key, "agent:main:http:direct:user%lld", (long long)i);
        else
            cm_buf_printf(&key, "agent:main:telegram:direct:%lld", (long long)(100000000 + i));
        json_t *e = json_pack(
            "{s:s,s:I,s:s,s:i,s:s,s:i,s:b,s:i,s:i,s:i,s:i,s:s,s:s,s:s}", "sessionId", id,
            "updatedAt", (json_int_t)(1790000000000LL + i), "sessionFile", "", "compactionCount", 0,
            "chatType", "direct", "totalTokens", 1200, "totalTokensFresh", 1, "inputTokens", 1100,
            "outputTokens", 100, "cacheRead", 0, "cacheWrite", 0, "model", "fake", "modelProvider",
            "openai", "lastChannel", i < g_convs ? "http" : "telegram");
        buf f = BUF_INIT;
        cm_buf_printf(&f, "%s/%s.jsonl", dir.data, id);
        json_object_set_new(e, "sessionFile", json_string(f.data));
        cm_buf_release(&f);
        json_object_set_new(st, key.data, e);
    }
    bool ok = json_dump_file(st, path.data, JSON_INDENT(2) | JSON_PRESERVE_ORDER) == 0;
    json_decref(st);
    cm_buf_release(&dir);
    cm_buf_release(&path);
    cm_buf_release(&key);
    return ok;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return kb;
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    while (d && readdir(d))
        n++;
    if (d) closedir(d);
    return n - 3; /* ".", ".." and the directory itself */
}

static long long file_bytes(const char *dir, const char *name)
{
    buf p = BUF_INIT;
    struct stat st;
    cm_buf_printf(&p, "%s/%s", dir, name);
    long long n = stat(p.data, &st) ? 0 : (long long)st.st_size;
    cm_buf_release(&p);
    return n;
}

static void window(int64_t from, int64_t to, double *p50, double *p99);
static double cpu_ms_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec) * 1e3 +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e3;
}
static double g_cpu_mark; /* cpu_ms_now() at the previous mark (or the start) */

/* Under g_mu, from the channel's send. */
static void take_mark(void)
{
    mark *m = &g_marks[g_nmarks++];
    int64_t prev = g_nmarks > 1 ? g_marks[g_nmarks - 2].at : 0;
    m->at = g_replies;
    m->rss_kb = rss_kb();
    m->fds = open_fds();
    m->journal_bytes = file_bytes(g_state, "gateway/journal.jsonl");
    buf sd = BUF_INIT;
    cm_buf_printf(&sd, "%s/agents/main/sessions", g_state);
    m->store_bytes = file_bytes(sd.data, "sessions.json");
    m->store_wal_bytes = 0;
    DIR *d = opendir(sd.data);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, ".clawmem-wal.")) m->store_wal_bytes += file_bytes(sd.data, de->d_name);
    if (d) closedir(d);
    cm_buf_release(&sd);
    int64_t w = g_n / 20 > 0 ? g_n / 20 : 1; /* latency over the 5% of messages before */
    window(m->at - w > 0 ? m->at - w : 0, m->at, &m->p50, &m->p99);
    double cpu = cpu_ms_now();
    m->cpu_ms = m->at > prev ? (cpu - g_cpu_mark) / (double)(m->at - prev) : 0;
    g_cpu_mark = cpu;
    m->model_calls = g_model_calls;
    /* as it is taken, so that a long soak stopped early still tells */
    fprintf(stderr,
            "bench_gateway: mark %d at %lld replies: rss %ld kB, %d fds, journal %lld B, "
            "sessions.json %lld B, its journal %lld B, added latency p50 %.1f ms p99 %.1f ms, "
            "CPU %.2f ms a reply since the last mark, %lld model calls\n",
            g_nmarks, (long long)m->at, m->rss_kb, m->fds, m->journal_bytes, m->store_bytes,
            m->store_wal_bytes, m->p50, m->p99, m->cpu_ms, (long long)m->model_calls);
}

/* Under g_mu: RSS and the allocator's view (bytes in use, free inside its
 * arenas, mapped directly), to tell memory kept from memory fragmented. */
static void trace_point(void)
{
    struct mallinfo2 mi = mallinfo2();
    fprintf(stderr,
            "bench_gateway: trace at %lld replies: rss %ld kB, heap in use %zu kB, free in "
            "arenas %zu kB, mmapped %zu kB, top releasable %zu kB\n",
            (long long)g_replies, rss_kb(), mi.uordblks / 1024, mi.fordblks / 1024,
            mi.hblkhd / 1024, mi.keepcost / 1024);
}

/* p50/p99 (ms) of the latencies of messages [from, to). */
static void window(int64_t from, int64_t to, double *p50, double *p99)
{
    double *l = calloc((size_t)(to - from) + 1, sizeof *l);
    int64_t n = 0;
    for (int64_t i = from; l && i < to; i++)
        if (g_reply[i] > 0) l[n++] = g_reply[i] - g_sent[i];
    qsort(l, (size_t)n, sizeof *l, cmp);
    *p50 = n ? l[n / 2] / 1e3 : -1;
    *p99 = n ? l[n * 99 / 100] / 1e3 : -1;
    free(l);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("usage: bench_gateway WORKDIR [MESSAGES] [CONVERSATIONS]\n", stderr);
        return 1;
    }
    g_n = argc > 2 ? strtoll(argv[2], NULL, 10) : 10000;
    g_convs = argc > 3 ? strtoll(argv[3], NULL, 10) : 1000;
    bool agent = argc > 4 && !strcmp(argv[4], "agent");
    int64_t entries = agent && argc > 5 ? strtoll(argv[5], NULL, 10) : 0;
    /* "paced": closed loop (8 messages in flight, each client waits for its
     * reply), so the latency is a turn's, not a backlog's; "soak": paced,
     * with RSS, descriptors, journal sizes and latency at 10%, 50%, 100%. */
    bool soak = argc > 6 && !strcmp(argv[6], "soak");
    const char *te = getenv("CLAWMEM_BENCH_TRACE_EVERY");
    g_trace_every = te ? strtoll(te, NULL, 10) : 0;
    const char *tr = getenv("CLAWMEM_BENCH_TRIM_EVERY");
    g_trim_every = tr ? strtoll(tr, NULL, 10) : 0;
    g_paced = soak || (argc > 6 && !strcmp(argv[6], "paced"));
    char err[512];
    /* as cm_gateway_start does (CLAWMEM_BENCH_NO_TUNE=1: glibc's defaults) */
    if (!getenv("CLAWMEM_BENCH_NO_TUNE")) cm_gw_malloc_tune();
    buf state = BUF_INIT, ws = BUF_INIT;
    cm_fs_join(&state, argv[1], agent ? "gateway-agent-state" : "gateway-state");
    cm_fs_join(&ws, argv[1], "gateway-ws");
    if (agent) { /* a fresh state dir: no sessions from an earlier run */
        buf cmd = BUF_INIT;
        cm_buf_printf(&cmd, "rm -rf '%s'", state.data);
        if (system(cmd.data)) return 1;
        cm_buf_release(&cmd);
    }
    cm_fs_mkdirs(state.data, NULL, 0);
    cm_fs_mkdirs(ws.data, NULL, 0);
    g_state = state.data;
    if (entries > 0 && !populate(state.data, entries < g_convs ? g_convs : entries)) return 1;
    if (entries > 0) { /* a running gateway has read its store once already */
        buf sp = BUF_INIT;
        session_store warm;
        cm_session_store_path(&sp, state.data, "main");
        if (cm_session_store_read(&warm, sp.data, err, sizeof err)) return 1;
        cm_session_store_release(&warm);
        cm_buf_release(&sp);
    }
    buf j = BUF_INIT;
    cm_fs_join(&j, state.data, "gateway/journal.jsonl");
    unlink(j.data);
    cm_buf_release(&j);
    httpd *model = NULL;
    char base[96] = "http://127.0.0.1:9";
    if (agent) {
        httpd_opts mo = cm_net_httpd_defaults();
        mo.handler = model_answer;
        mo.max_conns = 64;
        if (cm_net_httpd_start(&mo, &model, err, sizeof err)) {
            fprintf(stderr, "bench_gateway: %s\n", err);
            return 1;
        }
        snprintf(base, sizeof base, "http://%s", cm_net_httpd_addr(model));
    }
    /* The soak's model has a small context window, so that conversations
     * compact (and flush) as real ones do: reported usage grows with the
     * request (model_answer: ~4,400 tokens of system prompt and tools, ~90 a
     * turn) and compaction starts past the window less reserveTokensFloor
     * (20,000 by default): with 27,000 about every 28 turns.
     * CLAWMEM_SOAK_CONTEXT_WINDOW sets another. */
    char window_def[96] = "";
    if (soak) {
        const char *cw = getenv("CLAWMEM_SOAK_CONTEXT_WINDOW");
        snprintf(window_def, sizeof window_def, "{\"id\":\"fake\",\"contextWindow\":%lld}",
                 cw ? strtoll(cw, NULL, 10) : 27000LL);
    }
    buf cj = BUF_INIT;
    cm_buf_printf(&cj,
                  "{\"gateway\":{\"auth\":{\"token\":\"" TOKEN "\"}},"
                  "\"session\":{\"dmScope\":\"per-channel-peer\"},"
                  "\"agents\":{\"defaults\":{\"model\":\"openai/fake\","
                  "\"memorySearch\":{\"provider\":\"none\"}}},"
                  "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\","
                  "\"apiKey\":\"sk-bench\",\"models\":[%s]}}},"
                  "\"channels\":{\"http\":{\"dmPolicy\":\"open\",\"allowFrom\":[\"*\"],"
                  "\"replyToMode\":\"all\"}},"
                  "\"messages\":{\"inbound\":{\"debounceMs\":0},"
                  "\"queue\":{\"mode\":\"followup\",\"debounceMs\":0}}}",
                  base, window_def);
    json_t *cfg = json_loads(cj.data, 0, NULL);
    buf cp = BUF_INIT;
    cm_fs_join(&cp, state.data, "quantumclaw.json");
    FILE *cf = fopen(cp.data, "w");
    if (cf) fputs(cj.data, cf), fclose(cf);
    cm_buf_release(&cp);
    cm_buf_release(&cj);
    gw_agents *ag = NULL;
    cm_options co = {NULL, ws.data, NULL, state.data, NULL, NULL, 1};
    if (agent && cm_gw_agents_new(&co, &ag)) return 1;
    g_sent = calloc((size_t)g_n, sizeof *g_sent);
    g_reply = calloc((size_t)g_n, sizeof *g_reply);
    long rss0 = rss_kb();
    int fds0 = open_fds();
    gw_runtime *rt = NULL;
    timed ch = {{&t_ops}, NULL};
    gw_runtime_opts ro = {
        cfg,  state.data, agent ? cm_gw_agents_run : fake_run, ag, NULL, NULL, 4, false, 0,
        NULL, NULL};
    if (cm_gw_runtime_new(&ro, &rt, err, sizeof err) ||
        cm_gw_http_open(cfg, "127.0.0.1:0", &ch.http, err, sizeof err) ||
        cm_gw_runtime_add_channel(rt, &ch.base, NULL, NULL, err, sizeof err) ||
        cm_gw_runtime_start(rt, err, sizeof err)) {
        fprintf(stderr, "bench_gateway: %s\n", err);
        return 1;
    }
    snprintf(g_addr, sizeof g_addr, "%s", cm_gw_http_address(ch.http));
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    g_cpu_mark = cpu_ms_now();
    double t0 = now_us();
    pthread_t th[CLIENTS];
    for (long c = 0; c < CLIENTS; c++)
        pthread_create(&th[c], NULL, client, (void *)c);
    long errors = 0;
    for (int c = 0; c < CLIENTS; c++) {
        void *e;
        pthread_join(th[c], &e);
        errors += (long)e;
    }
    double posted = now_us();
    pthread_mutex_lock(&g_mu);
    while (g_replies < g_n - errors) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += agent ? 120 : 30;
        if (pthread_cond_timedwait(&g_cv, &g_mu, &ts)) break;
    }
    int64_t got = g_replies;
    pthread_mutex_unlock(&g_mu);
    double t1 = now_us();
    getrusage(RUSAGE_SELF, &ru1);
    /* the process's CPU time (user + system; the clients' share is small)
     * per message: what the machine's load does not change much */
    double cpu_ms = ((double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
                     (double)(ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec)) * 1e3 +
                    ((double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) +
                     (double)(ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec)) / 1e3;
    long rss1 = rss_kb();
    int fds1 = open_fds();
    json_t *st = cm_gw_runtime_status(rt);
    json_int_t sessions = json_integer_value(json_object_get(st, "knownSessions"));
    json_decref(st);
    double *lat = calloc((size_t)g_n, sizeof *lat);
    int64_t n = 0;
    for (int64_t i = 0; i < g_n; i++)
        if (g_reply[i] > 0) lat[n++] = g_reply[i] - g_sent[i];
    qsort(lat, (size_t)n, sizeof *lat, cmp);
    json_t *out = json_pack(
        "{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:I,s:I}", "model",
        agent ? "agent turns, loopback fake model" : "in-process, zero latency", "store_entries",
        (json_int_t)entries, "messages",
        (json_int_t)g_n, "conversations", (json_int_t)g_convs, "sessions", sessions, "replies",
        (json_int_t)got, "failed_runs", (json_int_t)g_failed, "post_errors", (json_int_t)errors,
        "accept_per_s", (double)g_n / ((posted - t0) / 1e6), "messages_per_s",
        (double)got / ((t1 - t0) / 1e6), "added_latency_p50_ms", n ? lat[n / 2] / 1e3 : -1.0,
        "added_latency_p99_ms", n ? lat[n * 99 / 100] / 1e3 : -1.0, "wall_s", (t1 - t0) / 1e6,
        "rss_kb_before", (json_int_t)rss0, "rss_kb_live", (json_int_t)rss1, "fds_before",
        (json_int_t)fds0, "fds_live", (json_int_t)fds1);
    json_object_set_new(out, "paced", json_boolean(g_paced));
    json_object_set_new(out, "model_calls", json_integer(g_model_calls));
    json_object_set_new(out, "model_request_bytes_max", json_integer(g_model_bytes_max));
    json_object_set_new(out, "cpu_ms_per_message", json_real(got ? cpu_ms / (double)got : -1));
    if (soak) {
        json_t *marks = json_array();
        for (int k = 0; k < g_nmarks; k++) {
            mark *m = &g_marks[k];
            json_array_append_new(
                marks, json_pack("{s:I,s:I,s:i,s:I,s:I,s:I,s:f,s:f,s:f,s:I}", "replies",
                                 (json_int_t)m->at, "rss_kb", (json_int_t)m->rss_kb, "fds", m->fds,
                                 "journal_bytes", (json_int_t)m->journal_bytes,
                                 "sessions_json_bytes", (json_int_t)m->store_bytes,
                                 "sessions_journal_bytes", (json_int_t)m->store_wal_bytes,
                                 "added_latency_p50_ms", m->p50, "added_latency_p99_ms", m->p99,
                                 "cpu_ms_per_reply", m->cpu_ms, "model_calls",
                                 (json_int_t)m->model_calls));
        }
        json_object_set_new(out, "soak", marks);
    }
    char *s = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    puts(s);
    free(s);
    json_decref(out);
    cm_gw_runtime_drain(rt, 10000);
    cm_gw_runtime_free(rt);
    ch.http->ops->close(ch.http);
    cm_gw_agents_free(ag);
    cm_net_httpd_stop(model, 1000);
    json_decref(cfg);
    cm_buf_release(&ws);
    free(lat);
    free(g_sent);
    free(g_reply);
    cm_buf_release(&state);
    return got == g_n && !g_failed ? 0 : 1;
}
