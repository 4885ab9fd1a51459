/*
 * test_replicas.c — `clawmem serve` replicas over one PostgreSQL: three real
 * processes with their own state directories over one workspace, on the
 * private cluster of scripts/pg-test-cluster.sh (skipped without it). A note
 * written through A is found through B and C at once; one watcher writes
 * each agent's index and the others follow; kill -9 of A in the middle of
 * writes loses no acknowledged note (a follower takes the lease over); an
 * MCP session opened on A continues on B and C, an ended or expired one is
 * refused everywhere with 404; the stateless 2026-07-28 era stores none.
 * And the session store itself, in process with an injected clock.
 */
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../server/mcp_sessions.h"
#include "../src/base/sha256.h"
#include "../src/store/store.h"
#include "test.h"

#define TOKEN "tok-replica-0123456789"
#define NREP  3

#define TEST_PGR(name)                                                                             \
    static void name##_body(void);                                                                 \
    TEST(name)                                                                                     \
    {                                                                                              \
        const char *dsn = getenv("CLAWMEM_TEST_PG_DSN");                                           \
        if (!dsn || !*dsn) SKIP("postgres", "no PostgreSQL cluster (CLAWMEM_TEST_PG_DSN)");        \
        pg_dsn = dsn;                                                                              \
        name##_body();                                                                             \
        pg_dsn = NULL;                                                                             \
    }                                                                                              \
    static void name##_body(void)

/* ---- a small HTTP client ------------------------------------------------------ */

typedef struct reply {
    int status;
    char *head, *body;
} reply;

static void reply_release(reply *r)
{
    free(r->head);
    free(r->body);
    r->head = r->body = NULL;
}

/* One request (Connection: close); headers are extra lines ("Name: v\r\n"). */
static reply R_http_at(int port, const char *method, const char *path, const char *headers,
                       const char *body)
{
    reply r = {0, NULL, NULL};
    buf q = BUF_INIT, in = BUF_INIT;
    cm_buf_printf(&q,
                  "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                  "Authorization: Bearer " TOKEN "\r\n%s",
                  method, path, headers ? headers : "");
    if (body)
        cm_buf_printf(&q, "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
    else
        cm_buf_adds(&q, "\r\n");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(0x7f000001);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        size_t off = 0;
        while (off < q.len) {
            ssize_t w = send(fd, q.data + off, q.len - off, MSG_NOSIGNAL);
            if (w <= 0) break;
            off += (size_t)w;
        }
        int64_t until = cm_now_ms() + 20000;
        char tmp[4096];
        for (;;) {
            struct pollfd p = {fd, POLLIN, 0};
            int64_t left = until - cm_now_ms();
            if (left <= 0 || poll(&p, 1, (int)left) <= 0) break;
            ssize_t n = recv(fd, tmp, sizeof tmp, 0);
            if (n <= 0) break;
            cm_buf_add(&in, tmp, (size_t)n);
        }
    }
    if (fd >= 0) close(fd);
    char *sep = in.data ? strstr(in.data, "\r\n\r\n") : NULL;
    if (sep && !strncmp(in.data, "HTTP/1.1 ", 9)) {
        r.status = (int)strtol(in.data + 9, NULL, 10);
        r.head = cm_strndup(in.data, (size_t)(sep - in.data) + 2);
        r.body = cm_strdup(sep + 4);
    } else {
        r.head = cm_strdup("");
        r.body = cm_strdup("");
    }
    cm_buf_release(&q);
    cm_buf_release(&in);
    return r;
}

static reply R_http(int port, const char *method, const char *headers, const char *body)
{
    return R_http_at(port, method, "/mcp", headers, body);
}

#define JSON_HDRS                                                                                  \
    "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
#define MODERN_META                                                                                \
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                       \
    "\"io.modelcontextprotocol/clientCapabilities\":{}}"

/* A 2025-11-25 request with session sid (NULL: none). */
static reply R_legacy(int port, const char *sid, const char *body)
{
    char h[512];
    snprintf(h, sizeof h, JSON_HDRS "%s%s%s", sid ? "Mcp-Session-Id: " : "", sid ? sid : "",
             sid ? "\r\nMCP-Protocol-Version: 2025-11-25\r\n" : "");
    return R_http(port, "POST", h, body);
}

/* initialize on port: the session id (malloc'd) or NULL. */
static char *R_init(int port)
{
    reply r = R_legacy(port, NULL,
                       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                       "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{"
                       "\"name\":\"t\",\"version\":\"1\"}}}");
    char *sid = NULL;
    const char *p = r.status == 200 && r.head ? strcasestr(r.head, "\r\nMcp-Session-Id: ") : NULL;
    if (p) sid = cm_strndup(p + 18, strcspn(p + 18, "\r"));
    reply_release(&r);
    return sid;
}

/* A stateless (2026-07-28) tools/call of name with arguments args (JSON). */
static reply R_call(int port, const char *name, const char *args)
{
    buf b = BUF_INIT;
    cm_buf_printf(&b,
                  "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":"
                  "\"%s\",\"arguments\":%s," MODERN_META "}}",
                  name, args);
    reply r = R_http(port, "POST", JSON_HDRS "MCP-Protocol-Version: 2026-07-28\r\n", b.data);
    cm_buf_release(&b);
    return r;
}

/* Results of a memory_search for word on port (-1: no answer). */
static int R_found(int port, const char *word)
{
    char args[256];
    snprintf(args, sizeof args, "{\"query\":\"%s\"}", word);
    reply r = R_call(port, "memory_search", args);
    json_t *j = r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
    json_t *res = json_object_get(
        json_object_get(json_object_get(j, "result"), "structuredContent"), "results");
    int n = json_is_array(res) ? (int)json_array_size(res) : -1;
    json_decref(j);
    reply_release(&r);
    return n;
}

/* ---- three replicas -------------------------------------------------------------- */

typedef struct replicas {
    char *dir;
    char agent[48];
    proc p[NREP];
    int port[NREP];
} replicas;

static int counter;

/* Three `clawmem serve` processes, each its own state directory, over one
 * workspace and one database; a fresh agent. */
static void rep_start(replicas *R)
{
    R->dir = tmp_dir();
    snprintf(R->agent, sizeof R->agent, "rep%d_%d", (int)getpid(), counter++);
    write_file(R->dir, "ws/MEMORY.md", "# Notes\n\nThe dog is called Biscuit.\n");
    buf cfg = BUF_INIT;
    cm_buf_printf(&cfg,
                  "{agents: {defaults: {memorySearch: {store: {driver: 'postgres', dsn: '%s'}}},"
                  " list: [{id: '%s', workspace: '%s'}]}}",
                  pg_dsn, R->agent, path_in(R->dir, "ws"));
    write_file(R->dir, "qc.json", cfg.data);
    cm_buf_reset(&cfg);
    cm_buf_printf(&cfg, "{'" TOKEN "': {agent: '%s', write: true}}", R->agent);
    write_file(R->dir, "tokens.json", cfg.data);
    cm_buf_release(&cfg);
    for (int i = 0; i < NREP; i++) {
        char state[64], conf[1024], tok[1024];
        snprintf(state, sizeof state, "state%d", i);
        snprintf(conf, sizeof conf, "%s", path_in(R->dir, "qc.json"));
        snprintf(tok, sizeof tok, "%s", path_in(R->dir, "tokens.json"));
        const char *args[] = {"--config",    conf,
                              "--state-dir", path_in(R->dir, state),
                              "serve",       "--listen",
                              "127.0.0.1:0", "--tokens",
                              tok,           "--allow-write",
                              "--debounce",  "50",
                              NULL};
        proc_start(&R->p[i], NULL, args);
    }
    for (int i = 0; i < NREP; i++) {
        char *line = proc_line(&R->p[i], 10000);
        R->port[i] = line && !strncmp(line, "listening on http://127.0.0.1:", 30)
                         ? (int)strtol(line + 30, NULL, 10)
                         : 0;
        free(line);
    }
}

static void rep_stop(replicas *R)
{
    for (int i = 0; i < NREP; i++)
        if (R->p[i].pid > 0) proc_stop(&R->p[i], SIGTERM, 10000);
    store s;
    char err[256];
    if (cm_store_open_pg(&s, pg_dsn, R->agent, "porter", STORE_CREATE, 5000, err, sizeof err) ==
        CM_OK) {
        cm_store_drop_agent(&s, err, sizeof err);
        cm_store_close(&s);
    }
}

/* Replica i answers a search for Biscuit (the workspace's note) within a
 * bounded wait: its engine is open, and for the first one the index built. */
static bool rep_ready(const replicas *R, int i)
{
    for (int k = 0; k < 200; k++) {
        if (R_found(R->port[i], "Biscuit") > 0) return true;
        poll(NULL, 0, 50);
    }
    return false;
}

/* The replicas' watchers of the agent, from /healthz: how many write its
 * index and how many follow (a replica killed answers nothing). */
static void rep_watchers(const replicas *R, int *writing, int *following)
{
    *writing = *following = 0;
    for (int i = 0; i < NREP; i++) {
        reply r = R_http_at(R->port[i], "GET", "/healthz", NULL, NULL);
        json_t *j = r.status == 200 ? json_loads(r.body, 0, NULL) : NULL;
        json_t *w = json_object_get(j, "watchers");
        *writing += (int)json_integer_value(json_object_get(w, "writing"));
        *following += (int)json_integer_value(json_object_get(w, "following"));
        json_decref(j);
        reply_release(&r);
    }
}

/* The number psql answers to sql, or -1. */
static long psql_long(const char *sql)
{
    const char *cmd[] = {"psql", pg_dsn, "-Aqtc", sql, NULL};
    run_result k = run_cmd(NULL, cmd);
    long v = -1;
    if (k.status == 0 && k.out) {
        char *end;
        v = strtol(k.out, &end, 10);
        if (end == k.out) v = -1;
    }
    run_result_release(&k);
    return v;
}

TEST_PGR(serve_replicas_write_on_a_found_on_b_and_c)
{
    replicas R;
    rep_start(&R);
    EXPECT(R.port[0] > 0 && R.port[1] > 0 && R.port[2] > 0);
    /* A first: it takes the agent's watcher lease and builds the index */
    EXPECT(rep_ready(&R, 0));
    EXPECT(rep_ready(&R, 1));
    EXPECT(rep_ready(&R, 2));
    reply r = R_call(R.port[0], "memory_write",
                     "{\"text\":\"The parrot is called Zephyrine.\",\"path\":\"MEMORY.md\"}");
    EXPECT_INT(r.status, 200);
    EXPECT_CONTAINS(r.body, "\"isError\":false");
    reply_release(&r);
    /* at once, no waiting: B and C read what A committed */
    EXPECT_INT(R_found(R.port[1], "Zephyrine"), 1);
    EXPECT_INT(R_found(R.port[2], "Zephyrine"), 1);
    /* and the other way round: written on C, found on A and B */
    r = R_call(R.port[2], "memory_write",
               "{\"text\":\"The tortoise is called Quillon.\",\"path\":\"MEMORY.md\"}");
    EXPECT_CONTAINS(r.body, "\"isError\":false");
    reply_release(&r);
    EXPECT_INT(R_found(R.port[0], "Quillon"), 1);
    EXPECT_INT(R_found(R.port[1], "Quillon"), 1);
    /* one watcher writes the agent's index, the others follow */
    int writing, following;
    rep_watchers(&R, &writing, &following);
    EXPECT_INT(writing, 1);
    EXPECT_INT(following, 2);
    rep_stop(&R);
}

TEST_PGR(serve_replicas_session_continues_on_another)
{
    replicas R;
    rep_start(&R);
    EXPECT(R.port[0] > 0 && R.port[1] > 0 && R.port[2] > 0);
    static const char list[] = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}";
    char *sid = R_init(R.port[0]);
    EXPECT(sid != NULL && strlen(sid) == 32);
    /* opened on A, continued on B and C */
    reply r = R_legacy(R.port[1], sid, list);
    EXPECT_INT(r.status, 200);
    EXPECT_CONTAINS(r.body, "memory_search");
    reply_release(&r);
    r = R_legacy(R.port[2], sid, list);
    EXPECT_INT(r.status, 200);
    reply_release(&r);
    /* the database holds a hash of the id, never the id */
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM clawmem_mcp_sessions WHERE agent_id = '%s'",
             R.agent);
    EXPECT_INT(psql_long(sql), 1);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM clawmem_mcp_sessions WHERE id = '%s'",
             sid ? sid : "");
    EXPECT_INT(psql_long(sql), 0);
    /* an unknown id: 404, as for a session that never was */
    r = R_legacy(R.port[1], "0123456789abcdef0123456789abcdef", list);
    EXPECT_INT(r.status, 404);
    reply_release(&r);
    /* the stateless era needs no session and stores none */
    reply m = R_call(R.port[1], "memory_get", "{\"path\":\"MEMORY.md\"}");
    EXPECT_INT(m.status, 200);
    reply_release(&m);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM clawmem_mcp_sessions WHERE agent_id = '%s'",
             R.agent);
    EXPECT_INT(psql_long(sql), 1);
    /* expired (as if an hour passed): refused on a replica with the
     * protocol's answer, 404 (the client initializes again) */
    char *sid2 = R_init(R.port[0]);
    EXPECT(sid2 != NULL);
    char hash[SHA256_HEX_LEN + 1];
    cm_sha256_hex(sid2 ? sid2 : "", sid2 ? strlen(sid2) : 0, hash);
    snprintf(sql, sizeof sql,
             "WITH u AS (UPDATE clawmem_mcp_sessions SET expires_ms = 0 WHERE agent_id = '%s' AND "
             "id = '%s' RETURNING 1) SELECT count(*) FROM u",
             R.agent, hash);
    EXPECT_INT(psql_long(sql), 1);
    r = R_legacy(R.port[2], sid2, list);
    EXPECT_INT(r.status, 404);
    EXPECT_CONTAINS(r.body, "no such session");
    reply_release(&r);
    /* ended with DELETE on A: refused on C (which never held it) */
    char *sid3 = R_init(R.port[0]);
    EXPECT(sid3 != NULL);
    char h[128];
    snprintf(h, sizeof h, "Mcp-Session-Id: %s\r\n", sid3 ? sid3 : "");
    r = R_http(R.port[0], "DELETE", h, NULL);
    EXPECT_INT(r.status, 204);
    reply_release(&r);
    r = R_legacy(R.port[2], sid3, list);
    EXPECT_INT(r.status, 404);
    reply_release(&r);
    /* the first session is still good everywhere */
    r = R_legacy(R.port[0], sid, list);
    EXPECT_INT(r.status, 200);
    reply_release(&r);
    free(sid);
    free(sid2);
    free(sid3);
    rep_stop(&R);
}

/* ---- kill -9 in the middle of writes ------------------------------------------------ */

enum { WRITERS = 4, PER_WRITER = 40 };

typedef struct writer {
    int port, id;
    bool acked[PER_WRITER];
    int nacked;
    volatile int *stop;
} writer;

static void *writer_main(void *arg)
{
    writer *w = arg;
    for (int k = 0; k < PER_WRITER && !__atomic_load_n(w->stop, __ATOMIC_ACQUIRE); k++) {
        char args[256];
        snprintf(args, sizeof args,
                 "{\"text\":\"Acked note zqw%dx%d here.\",\"path\":\"memory/w%d.md\"}", w->id, k,
                 w->id);
        reply r = R_call(w->port, "memory_write", args);
        /* acknowledged: the whole answer, a success */
        if (r.status == 200 && strstr(r.body, "\"isError\":false")) {
            w->acked[k] = true;
            __atomic_add_fetch(&w->nacked, 1, __ATOMIC_ACQ_REL);
        } else if (r.status == 0) {
            reply_release(&r);
            break; /* A is gone */
        }
        reply_release(&r);
    }
    return NULL;
}

TEST_PGR(serve_replicas_kill_a_mid_write_loses_nothing_acknowledged)
{
    replicas R;
    rep_start(&R);
    EXPECT(R.port[0] > 0 && R.port[1] > 0 && R.port[2] > 0);
    EXPECT(rep_ready(&R, 0)); /* A leads */
    EXPECT(rep_ready(&R, 1));
    EXPECT(rep_ready(&R, 2));
    volatile int stop = 0;
    writer w[WRITERS];
    pthread_t t[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].port = R.port[0];
        w[i].id = i;
        w[i].stop = &stop;
        pthread_create(&t[i], NULL, writer_main, &w[i]);
    }
    /* some notes acknowledged, more in flight: kill -9 */
    int64_t until = cm_now_ms() + 15000;
    for (;;) {
        int n = 0;
        for (int i = 0; i < WRITERS; i++)
            n += __atomic_load_n(&w[i].nacked, __ATOMIC_ACQUIRE);
        if (n >= 12 || cm_now_ms() > until) break;
        poll(NULL, 0, 5);
    }
    kill(R.p[0].pid, SIGKILL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < WRITERS; i++)
        pthread_join(t[i], NULL);
    int acked = 0;
    for (int i = 0; i < WRITERS; i++)
        acked += w[i].nacked;
    EXPECT(acked >= 12);
    /* every acknowledged note is found through B and C: at once when A
     * indexed it, else after B or C took the lease over and synced */
    int missing = 0;
    until = cm_now_ms() + 10000;
    do {
        missing = 0;
        for (int i = 0; i < WRITERS; i++)
            for (int k = 0; k < PER_WRITER; k++) {
                if (!w[i].acked[k]) continue;
                char word[32];
                snprintf(word, sizeof word, "zqw%dx%d", i, k);
                missing += R_found(R.port[1], word) != 1 || R_found(R.port[2], word) != 1;
            }
        if (missing) poll(NULL, 0, 100);
    } while (missing && cm_now_ms() < until);
    EXPECT_INT(missing, 0);
    /* B or C writes the index now, the other follows */
    int writing = 0, following = 0;
    for (int k = 0; k < 100 && writing != 1; k++) {
        rep_watchers(&R, &writing, &following);
        if (writing != 1) poll(NULL, 0, 50);
    }
    EXPECT_INT(writing, 1);
    EXPECT_INT(following, 1);
    /* what the killed A did not finish is indexed too: the index matches
     * the files (integrity of the agent's totals) */
    EXPECT(pg_integrity_ok(R.agent));
    proc_stop(&R.p[0], 0, 1000); /* reaped */
    R.p[0].pid = 0;
    rep_stop(&R);
}

/* ---- the session store, in process -------------------------------------------------- */

static int64_t fake_now;

static int64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

TEST_PGR(pg_mcp_sessions_shared_with_expiry)
{
    const char *const toks[] = {"token-one-0123456789", "token-two-0123456789"};
    mcp_sessions_opts o = {pg_dsn, toks, 2, 60000, 0, fake_clock, NULL};
    mcp_sessions *a = NULL, *b = NULL, *mem = NULL;
    char err[256], id[33], agent[48];
    snprintf(agent, sizeof agent, "sess%d", (int)getpid());
    fake_now = 1000000;
    EXPECT_INT(mcp_sessions_open(&o, &a, err, sizeof err), CM_OK);
    EXPECT_INT(mcp_sessions_open(&o, &b, err, sizeof err), CM_OK);
    if (!a || !b) goto out;
    EXPECT(mcp_sessions_shared(a));
    EXPECT_INT(mcp_sessions_new(a, agent, 0, id, err, sizeof err), CM_OK);
    bool found = false;
    /* B never saw it: the database says */
    EXPECT_INT(mcp_sessions_use(b, id, agent, 0, false, &found, err, sizeof err), CM_OK);
    EXPECT(found);
    /* another token, another agent: not theirs */
    mcp_sessions_use(b, id, agent, 1, false, &found, err, sizeof err);
    EXPECT(!found);
    mcp_sessions_use(b, id, "other-agent", 0, false, &found, err, sizeof err);
    EXPECT(!found);
    /* used at +50 s on B: good until +110 s on A */
    fake_now += 50000;
    mcp_sessions_use(b, id, agent, 0, false, &found, err, sizeof err);
    EXPECT(found);
    fake_now += 59000;
    mcp_sessions_use(a, id, agent, 0, false, &found, err, sizeof err);
    EXPECT(found);
    /* idle past the limit: refused on both */
    fake_now += 60001;
    mcp_sessions_use(b, id, agent, 0, false, &found, err, sizeof err);
    EXPECT(!found);
    mcp_sessions_use(a, id, agent, 0, false, &found, err, sizeof err);
    EXPECT(!found);
    /* ended on A: refused on B */
    EXPECT_INT(mcp_sessions_new(a, agent, -1, id, err, sizeof err), CM_OK);
    mcp_sessions_use(a, id, agent, -1, true, &found, err, sizeof err);
    EXPECT(found);
    mcp_sessions_use(b, id, agent, -1, false, &found, err, sizeof err);
    EXPECT(!found);
    /* without a database (the old way): another process is a stranger */
    mcp_sessions_opts om = {NULL, toks, 2, 60000, -1, fake_clock, NULL};
    EXPECT_INT(mcp_sessions_open(&om, &mem, err, sizeof err), CM_OK);
    if (mem) {
        EXPECT(!mcp_sessions_shared(mem));
        EXPECT_INT(mcp_sessions_new(mem, agent, 0, id, err, sizeof err), CM_OK);
        mcp_sessions_use(mem, id, agent, 0, false, &found, err, sizeof err);
        EXPECT(found);
        mcp_sessions_use(b, id, agent, 0, false, &found, err, sizeof err);
        EXPECT(!found);
    }
    char sql[256];
    snprintf(sql, sizeof sql, "DELETE FROM clawmem_mcp_sessions WHERE agent_id = '%s'", agent);
    psql_long(sql);
out:
    mcp_sessions_free(a);
    mcp_sessions_free(b);
    mcp_sessions_free(mem);
}
