/*
 * test_serve.c — `clawmem serve` over real HTTP: tokens and agents (no token
 * or another agent's token never opens, reads or writes an agent's memory;
 * read-only tokens never write), the Streamable HTTP rules (sessions,
 * DELETE, GET 405, media types, protocol headers, JSON-RPC errors as HTTP
 * statuses, SSE answers), the Origin check, the stateless 2026-07-28 era,
 * the engine LRU, loopback-only without tokens, a clean stop on SIGTERM, and
 * the official clients: the SDK 1.x and 2.x clients over HTTP and the MCP
 * conformance suite's server scenarios that apply to a tools server.
 */
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fakeserver.h"
#include "test.h"

#define TOK_A "tok-alpha-0123456789"
#define TOK_B "tok-beta-0123456789ab"

typedef struct server {
    char *dir;
    proc p;
    int port;
    char url[128];
} server;

/* Runs clawmem with args (NULL-terminated) and reads the port it listens on. */
static void start_args(server *s, const char *const *args)
{
    proc_start(&s->p, NULL, args);
    char *line = proc_line(&s->p, 10000);
    s->port = 0;
    if (line && !strncmp(line, "listening on http://127.0.0.1:", 30))
        s->port = (int)strtol(line + 30, NULL, 10);
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d/mcp", s->port);
    free(line);
}

/* Two agents (alpha: a note about Biscuit; beta: one about Tiger) and their
 * tokens; extra: more arguments to serve (NULL-terminated, may be NULL). */
static void start(server *s, bool tokens, const char *const *extra)
{
    s->dir = tmp_dir();
    write_file(s->dir, "ws-a/MEMORY.md", "# Alpha\n\nThe dog is called Biscuit.\n");
    write_file(s->dir, "ws-b/MEMORY.md", "# Beta\n\nThe cat is called Tiger.\n");
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{agents: {list: [{id: \"alpha\", workspace: \"%s\"}, {id: \"beta\", workspace: "
             "\"%s\"}]}}",
             path_in(s->dir, "ws-a"), path_in(s->dir, "ws-b"));
    write_file(s->dir, "qc.json", cfg);
    write_file(s->dir, "tokens.json",
               "// tokens\n{'" TOK_A "': {agent: 'alpha', write: true},\n '" TOK_B
               "': {agent: 'beta'}}\n");
    const char *args[32] = {"--config",    path_in(s->dir, "qc.json"),
                            "--state-dir", path_in(s->dir, "state"),
                            "serve",       "--listen",
                            "127.0.0.1:0", "--allow-write"};
    int n = 8;
    char tokpath[1024];
    snprintf(tokpath, sizeof tokpath, "%s", path_in(s->dir, "tokens.json"));
    if (tokens) {
        args[n++] = "--tokens";
        args[n++] = tokpath;
    }
    for (size_t i = 0; extra && extra[i] && n < 30; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    start_args(s, args);
}

static int S_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(0x7f000001);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

typedef struct reply {
    int status;
    char *head, *body;
} reply;

static void reply_release(reply *r)
{
    free(r->head);
    free(r->body);
}

/* One request (Connection: close) with extra header lines ("Name: v\r\n"...). */
static reply S_http(int port, const char *method, const char *path, const char *headers,
                    const char *body)
{
    reply r = {0, NULL, NULL};
    buf q = BUF_INIT, in = BUF_INIT;
    cm_buf_printf(&q, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s", method, path,
                  headers ? headers : "");
    if (body)
        cm_buf_printf(&q, "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
    else
        cm_buf_adds(&q, "\r\n");
    int fd = S_connect(port);
    if (fd >= 0) {
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
        close(fd);
    }
    char *sep = in.data ? strstr(in.data, "\r\n\r\n") : NULL;
    if (sep) {
        r.head = cm_strndup(in.data, (size_t)(sep - in.data) + 2);
        r.body = cm_strdup(sep + 4);
        if (!strncmp(in.data, "HTTP/1.1 ", 9)) r.status = (int)strtol(in.data + 9, NULL, 10);
    } else {
        r.head = cm_strdup("");
        r.body = cm_strdup("");
    }
    cm_buf_release(&q);
    cm_buf_release(&in);
    return r;
}

/* The value of header name in r's head (static buffer), or NULL. */
static const char *S_hdr(const reply *r, const char *name)
{
    static char v[256];
    size_t nl = strlen(name);
    for (const char *p = r->head; p && *p;) {
        const char *e = strstr(p, "\r\n");
        if (!e) break;
        if ((size_t)(e - p) > nl + 1 && !strncasecmp(p, name, nl) && p[nl] == ':') {
            const char *s = p + nl + 1;
            while (*s == ' ')
                s++;
            snprintf(v, sizeof v, "%.*s", (int)(e - s), s);
            return v;
        }
        p = e + 2;
    }
    return NULL;
}

#define JSON_HDRS                                                                                  \
    "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
#define INIT                                                                                       \
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"     \
    "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}"

/* initialize with token (NULL: none); the session id (malloc'd) or NULL. */
static char *S_init(server *s, const char *token, const char *path)
{
    char h[512];
    snprintf(h, sizeof h, JSON_HDRS "%s%s%s", token ? "Authorization: Bearer " : "",
             token ? token : "", token ? "\r\n" : "");
    reply r = S_http(s->port, "POST", path, h, INIT);
    const char *sid = r.status == 200 ? S_hdr(&r, "Mcp-Session-Id") : NULL;
    char *out = sid ? cm_strdup(sid) : NULL;
    reply_release(&r);
    return out;
}

/* A POST of body with token and session; extra header lines may follow. */
static reply S_post(server *s, const char *token, const char *sid, const char *extra,
                    const char *body)
{
    buf h = BUF_INIT;
    cm_buf_adds(&h, JSON_HDRS);
    if (token) cm_buf_printf(&h, "Authorization: Bearer %s\r\n", token);
    if (sid) cm_buf_printf(&h, "Mcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-11-25\r\n", sid);
    if (extra) cm_buf_adds(&h, extra);
    reply r = S_http(s->port, "POST", "/mcp", h.data, body);
    cm_buf_release(&h);
    return r;
}

static const char search_biscuit[] =
    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
    "\"memory_search\",\"arguments\":{\"query\":\"Biscuit\"}}}";
static const char search_tiger[] =
    "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
    "\"memory_search\",\"arguments\":{\"query\":\"Tiger\"}}}";

/* How many results a tools/call memory_search reply body holds (-1: none). */
static int S_nresults(const char *body)
{
    json_t *j = json_loads(body, 0, NULL);
    json_t *res = json_object_get(
        json_object_get(json_object_get(j, "result"), "structuredContent"), "results");
    int n = json_is_array(res) ? (int)json_array_size(res) : -1;
    json_decref(j);
    return n;
}

static bool S_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

TEST(serve_tokens_and_agents)
{
    server s;
    start(&s, true, NULL);
    EXPECT(s.port > 0);
    /* no token, a wrong token, a token for another agent's path: refused, and
     * beta's index is never even created */
    char *sid = S_init(&s, NULL, "/mcp");
    EXPECT(sid == NULL);
    reply r = S_post(&s, NULL, NULL, NULL, search_tiger);
    EXPECT_INT(r.status, 401);
    EXPECT_CONTAINS(r.head, "WWW-Authenticate: Bearer");
    reply_release(&r);
    r = S_post(&s, "tok-wrong-0123456789", NULL, NULL, search_tiger);
    EXPECT_INT(r.status, 401);
    reply_release(&r);
    r = S_http(s.port, "POST", "/mcp/beta", JSON_HDRS "Authorization: Bearer " TOK_A "\r\n", INIT);
    EXPECT_INT(r.status, 403);
    reply_release(&r);
    r = S_http(s.port, "POST", "/mcp/nobody", JSON_HDRS "Authorization: Bearer " TOK_A "\r\n",
               INIT);
    EXPECT_INT(r.status, 403);
    reply_release(&r);
    EXPECT(!S_exists(path_in(s.dir, "state/memory/beta.clawmem.sqlite")));
    EXPECT(!S_exists(path_in(s.dir, "state/memory/alpha.clawmem.sqlite")));

    /* alpha's token: alpha's memory only */
    sid = S_init(&s, TOK_A, "/mcp/alpha");
    EXPECT(sid != NULL);
    EXPECT_INT(strlen(sid), 32);
    int n = 0;
    for (int i = 0; i < 100 && n <= 0; i++) { /* the watcher's first sync */
        r = S_post(&s, TOK_A, sid, NULL, search_biscuit);
        EXPECT_INT(r.status, 200);
        n = S_nresults(r.body);
        reply_release(&r);
        if (n <= 0) poll(NULL, 0, 50);
    }
    EXPECT(n > 0);
    r = S_post(&s, TOK_A, sid, NULL, search_tiger);
    EXPECT_INT(S_nresults(r.body), 0);
    reply_release(&r);
    EXPECT(!S_exists(path_in(s.dir, "state/memory/beta.clawmem.sqlite")));
    /* alpha's session is not beta's */
    r = S_post(&s, TOK_B, sid, NULL, search_tiger);
    EXPECT_INT(r.status, 404);
    reply_release(&r);
    EXPECT(!S_exists(path_in(s.dir, "state/memory/beta.clawmem.sqlite")));

    /* memory_write: listed and served for alpha's write token */
    static const char list[] = "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\"}";
    static const char write_call[] =
        "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
        "\"memory_write\",\"arguments\":{\"text\":\"From HTTP.\",\"path\":\"MEMORY.md\"}}}";
    r = S_post(&s, TOK_A, sid, NULL, list);
    EXPECT_CONTAINS(r.body, "memory_write");
    reply_release(&r);
    r = S_post(&s, TOK_A, sid, NULL, write_call);
    EXPECT_CONTAINS(r.body, "\"isError\":false");
    reply_release(&r);
    /* beta's read-only token: no memory_write, and a call to it is refused */
    char *sid_b = S_init(&s, TOK_B, "/mcp");
    EXPECT(sid_b != NULL);
    r = S_post(&s, TOK_B, sid_b, NULL, list);
    EXPECT_CONTAINS(r.body, "memory_get");
    EXPECT(strstr(r.body, "memory_write") == NULL);
    reply_release(&r);
    r = S_post(&s, TOK_B, sid_b, NULL, write_call);
    EXPECT_CONTAINS(r.body, "Unknown tool: memory_write");
    reply_release(&r);
    /* beta's file is untouched, alpha's has the note */
    char text[256];
    FILE *f = fopen(path_in(s.dir, "ws-b/MEMORY.md"), "r");
    size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[got] = 0;
    EXPECT_STR(text, "# Beta\n\nThe cat is called Tiger.\n");
    f = fopen(path_in(s.dir, "ws-a/MEMORY.md"), "r");
    got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[got] = 0;
    EXPECT_CONTAINS(text, "From HTTP.");
    free(sid);
    free(sid_b);
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 10000), 0);
}

/* The "status" of a tools/call memory_search reply body (malloc'd), or NULL. */
static char *S_status(const char *body)
{
    json_t *j = json_loads(body, 0, NULL);
    const char *st = json_string_value(json_object_get(
        json_object_get(json_object_get(j, "result"), "structuredContent"), "status"));
    char *out = st ? cm_strdup(st) : NULL;
    json_decref(j);
    return out;
}

TEST(serve_workspace_and_config_are_the_default_agents)
{
    /* no --agent and no agents.list: --workspace and --config apply to the
     * default agent, as for every other command */
    char *d = tmp_dir();
    write_file(d, "ws/MEMORY.md", "# Facts\n\nThe dog is called Biscuit.\n");
    write_file(d, "ws/memory/park.md", "Biscuit likes the park.\n");
    write_file(d, "qc.json", "{agents: {defaults: {memorySearch: {query: {maxResults: 1}}}}}");
    char ws[1024], cfg[1024], state[1024];
    snprintf(ws, sizeof ws, "%s", path_in(d, "ws"));
    snprintf(cfg, sizeof cfg, "%s", path_in(d, "qc.json"));
    snprintf(state, sizeof state, "%s", path_in(d, "state"));
    server s;
    const char *args[] = {"--workspace", ws,         "--config", cfg,           "--state-dir",
                          state,         "serve",    "--listen", "127.0.0.1:0", "--verbose",
                          NULL};
    start_args(&s, args);
    EXPECT(s.port > 0);
    char *sid = S_init(&s, NULL, "/mcp");
    EXPECT(sid != NULL);
    reply r = S_post(&s, NULL, sid, NULL, search_biscuit);
    EXPECT_INT(r.status, 200);
    EXPECT(strstr(r.body, "does not exist") == NULL);
    EXPECT_INT(S_nresults(r.body), 1); /* the first search already, and maxResults from --config */
    reply_release(&r);
    free(sid);
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 10000), 0);
    /* start says where the memory is */
    char *err = proc_stderr(&s.p);
    EXPECT_CONTAINS(err, "agent main: workspace ");
    EXPECT_CONTAINS(err, ws);
    free(err);

    /* a workspace that does not exist is a warning at start */
    const char *bad[] = {"--workspace", path_in(d, "nowhere"), "--config", cfg, "--state-dir",
                         state,         "serve",  "--listen",   "127.0.0.1:0", NULL};
    start_args(&s, bad);
    EXPECT(s.port > 0);
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 10000), 0);
    err = proc_stderr(&s.p);
    EXPECT_CONTAINS(err, "warning: agent main: workspace ");
    EXPECT_CONTAINS(err, "nowhere does not exist");
    free(err);
}

TEST(serve_reports_another_programs_index)
{
    /* store.path names QuantumClaw's own index: the search says so, and the
     * file is left as it is */
    char *d = tmp_dir();
    write_file(d, "ws/MEMORY.md", "# Facts\n\nThe dog is called Biscuit.\n");
    write_file(d, "qc.json", "{}");
    write_file(d, "state/clawmem.json",
               "{agents: {defaults: {memorySearch: {store: {path: 'memory/{agentId}.sqlite'}}}}}");
    char ws[1024], cfg[1024], state[1024], qc[1100];
    snprintf(ws, sizeof ws, "%s", path_in(d, "ws"));
    snprintf(cfg, sizeof cfg, "%s", path_in(d, "qc.json"));
    snprintf(state, sizeof state, "%s", path_in(d, "state"));
    snprintf(qc, sizeof qc, "%s/memory/main.sqlite", state);
    write_file(state, "memory/notes.txt", "");
    qc_index_sync(qc, "MEMORY.md", "The dog is called Biscuit.");
    set_mtime(qc, 1700000000);
    struct stat before, after;
    EXPECT(stat(qc, &before) == 0);
    server s;
    const char *args[] = {"--workspace", ws,         "--config", cfg,           "--state-dir",
                          state,         "serve",    "--listen", "127.0.0.1:0", NULL};
    start_args(&s, args);
    EXPECT(s.port > 0);
    char *sid = S_init(&s, NULL, "/mcp");
    EXPECT(sid != NULL);
    reply r = S_post(&s, NULL, sid, NULL, search_biscuit);
    EXPECT_INT(r.status, 200);
    EXPECT_CONTAINS(r.body, "another program's index (QuantumClaw's)");
    EXPECT_CONTAINS(r.body, "memorySearch.store.path");
    EXPECT_INT(S_nresults(r.body), 0);
    reply_release(&r);
    free(sid);
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 10000), 0);
    EXPECT(stat(qc, &after) == 0);
    EXPECT(after.st_size == before.st_size && after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
           after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
    EXPECT(access(path_in(state, "memory/main.sqlite-wal"), F_OK) != 0);
}

/* The embedding server answers its first request after *ctx milliseconds (a
 * slow first sync; the queries' embeddings come at once). */
static bool S_slow_embed(void *ctx, const char *method, const char *path, const char *body,
                         size_t body_len, int *status, const char **ctype, char **out,
                         size_t *out_len)
{
    (void)method, (void)body, (void)body_len, (void)status, (void)ctype, (void)out, (void)out_len;
    int *delay = ctx;
    int ms = __atomic_exchange_n(delay, 0, __ATOMIC_ACQ_REL);
    if (strstr(path, "embeddings") && ms > 0) poll(NULL, 0, ms);
    return false;
}

/* serve for agent alpha (agents.list) whose index does not exist yet and
 * whose first sync takes delay ms (embeddings), with --first-sync-wait wait. */
static void start_slow(server *s, fake_server **fs, int *delay, const char *wait)
{
    char base[64], text[2048];
    *fs = fake_start(16, base);
    fake_handler(*fs, S_slow_embed, delay);
    s->dir = tmp_dir();
    write_file(s->dir, "ws-a/MEMORY.md", "# Alpha\n\nThe dog is called Biscuit.\n");
    snprintf(text, sizeof text,
             "{agents: {defaults: {memorySearch: {provider: 'openai', remote: {baseUrl: "
             "'%s/v1', apiKey: 'k'}}}, list: [{id: 'alpha', workspace: '%s'}]}}",
             base, path_in(s->dir, "ws-a"));
    write_file(s->dir, "qc.json", text);
    char cfg[1024], state[1024];
    snprintf(cfg, sizeof cfg, "%s", path_in(s->dir, "qc.json"));
    snprintf(state, sizeof state, "%s", path_in(s->dir, "state"));
    const char *args[] = {"--config", cfg,           "--state-dir",       state, "serve",
                          "--listen", "127.0.0.1:0", "--first-sync-wait", wait,  NULL};
    start_args(s, args);
}

TEST(serve_first_search_waits_for_the_first_sync)
{
    /* the first search of an agent without an index waits for its first sync
     * (1 s of embeddings) rather than answering results: [] */
    server s;
    fake_server *fs = NULL;
    int delay = 1000;
    start_slow(&s, &fs, &delay, "30000");
    EXPECT(s.port > 0);
    char *sid = S_init(&s, NULL, "/mcp/alpha");
    EXPECT(sid != NULL);
    buf h = BUF_INIT;
    cm_buf_printf(&h, JSON_HDRS "Mcp-Session-Id: %s\r\n", sid);
    reply r = S_http(s.port, "POST", "/mcp/alpha", h.data, search_biscuit);
    EXPECT_INT(r.status, 200);
    EXPECT_INT(S_nresults(r.body), 1);
    char *st = S_status(r.body);
    EXPECT(st == NULL);
    reply_release(&r);
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 10000), 0);
    fake_stop(fs);

    /* the wait is bounded: past it the payload's status says the first sync
     * has not finished, and a later search finds the note */
    delay = 2000;
    start_slow(&s, &fs, &delay, "200");
    EXPECT(s.port > 0);
    free(sid);
    sid = S_init(&s, NULL, "/mcp/alpha");
    EXPECT(sid != NULL);
    cm_buf_reset(&h);
    cm_buf_printf(&h, JSON_HDRS "Mcp-Session-Id: %s\r\n", sid);
    int64_t t0 = cm_now_ms();
    r = S_http(s.port, "POST", "/mcp/alpha", h.data, search_biscuit);
    EXPECT_INT(r.status, 200);
    EXPECT_INT(S_nresults(r.body), 0);
    st = S_status(r.body);
    EXPECT_CONTAINS(st, "the first sync of this agent's memory had not finished after 200 ms");
    free(st);
    EXPECT(cm_now_ms() - t0 < 2500);
    reply_release(&r);
    /* A search that began while the first sync was still running may find
     * the note it committed and still say the wait ran out (true when it
     * did): poll until one finds the note with no status. */
    int n = 0;
    bool clean = false;
    for (int i = 0; i < 200 && !clean; i++) {
        r = S_http(s.port, "POST", "/mcp/alpha", h.data, search_biscuit);
        n = S_nresults(r.body);
        st = S_status(r.body);
        if (n > 0 && st) EXPECT_CONTAINS(st, "the first sync of this agent's memory");
        clean = n > 0 && !st;
        free(st);
        reply_release(&r);
        if (!clean) poll(NULL, 0, 50);
    }
    EXPECT_INT(n, 1);
    EXPECT(clean);
    cm_buf_release(&h);
    free(sid);
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 10000), 0);
    fake_stop(fs);
}

TEST(serve_streamable_http_rules)
{
    server s;
    start(&s, true, NULL);
    EXPECT(s.port > 0);
    char *sid = S_init(&s, TOK_A, "/mcp");
    EXPECT(sid != NULL);
    static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}";
    /* a request without the session, an unknown session */
    reply r = S_post(&s, TOK_A, NULL, NULL, ping);
    EXPECT_INT(r.status, 400);
    EXPECT_CONTAINS(r.body, "Mcp-Session-Id");
    reply_release(&r);
    r = S_post(&s, TOK_A, "00000000000000000000000000000000", NULL, ping);
    EXPECT_INT(r.status, 404);
    reply_release(&r);
    r = S_post(&s, TOK_A, sid, NULL, ping);
    EXPECT_INT(r.status, 200);
    EXPECT_CONTAINS(r.body, "\"result\":{}");
    EXPECT_CONTAINS(S_hdr(&r, "Content-Type"), "application/json");
    reply_release(&r);
    /* notifications and client responses: 202 without a body */
    r = S_post(&s, TOK_A, sid, NULL,
               "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
    EXPECT_INT(r.status, 202);
    EXPECT_STR(r.body, "");
    reply_release(&r);
    /* JSON-RPC errors */
    r = S_post(&s, TOK_A, sid, NULL, "{not json");
    EXPECT_INT(r.status, 400);
    EXPECT_CONTAINS(r.body, "-32700");
    reply_release(&r);
    r = S_post(&s, TOK_A, sid, NULL, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]");
    EXPECT_INT(r.status, 400);
    EXPECT_CONTAINS(r.body, "-32600");
    reply_release(&r);
    r = S_post(&s, TOK_A, sid, NULL, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"nope\"}");
    EXPECT_INT(r.status, 200);
    EXPECT_CONTAINS(r.body, "-32601");
    reply_release(&r);
    /* headers: protocol version, method, media types */
    r = S_post(&s, TOK_A, NULL, "Mcp-Session-Id: x\r\nMCP-Protocol-Version: 1999-01-01\r\n", ping);
    EXPECT_INT(r.status, 400);
    reply_release(&r);
    r = S_http(s.port, "POST", "/mcp",
               "Content-Type: text/plain\r\nAuthorization: Bearer " TOK_A "\r\n", ping);
    EXPECT_INT(r.status, 415);
    reply_release(&r);
    r = S_http(s.port, "POST", "/mcp",
               "Content-Type: application/json\r\nAccept: text/html\r\nAuthorization: Bearer " TOK_A
               "\r\n",
               ping);
    EXPECT_INT(r.status, 406);
    reply_release(&r);
    /* a client that accepts only SSE gets its answer as one event */
    char h[256];
    snprintf(h, sizeof h,
             "Content-Type: application/json\r\nAccept: text/event-stream\r\nAuthorization: "
             "Bearer " TOK_A "\r\nMcp-Session-Id: %s\r\n",
             sid);
    r = S_http(s.port, "POST", "/mcp", h, ping);
    EXPECT_INT(r.status, 200);
    EXPECT_CONTAINS(S_hdr(&r, "Content-Type"), "text/event-stream");
    EXPECT_CONTAINS(r.body, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}");
    reply_release(&r);
    /* GET: no server stream; other paths; PUT */
    r = S_http(s.port, "GET", "/mcp", "Authorization: Bearer " TOK_A "\r\n", NULL);
    EXPECT_INT(r.status, 405);
    EXPECT_CONTAINS(S_hdr(&r, "Allow"), "POST");
    reply_release(&r);
    r = S_http(s.port, "GET", "/", NULL, NULL);
    EXPECT_INT(r.status, 404);
    reply_release(&r);
    /* Origin: a foreign page is refused, loopback and listed ones pass */
    r = S_post(&s, TOK_A, sid, "Origin: http://evil.example\r\n", ping);
    EXPECT_INT(r.status, 403);
    reply_release(&r);
    r = S_post(&s, TOK_A, sid, "Origin: http://localhost:3000\r\n", ping);
    EXPECT_INT(r.status, 200);
    reply_release(&r);
    r = S_post(&s, TOK_A, sid, "Origin: http://localhost.evil.example\r\n", ping);
    EXPECT_INT(r.status, 403);
    reply_release(&r);
    /* 2026-07-28: no session, the envelope in _meta */
    static const char modern[] =
        "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"server/discover\",\"params\":{\"_meta\":{"
        "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
        "\"io.modelcontextprotocol/clientCapabilities\":{}}}}";
    r = S_post(&s, TOK_A, NULL,
               "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: server/discover\r\n", modern);
    EXPECT_INT(r.status, 200);
    EXPECT_CONTAINS(r.body, "\"supportedVersions\":[\"2026-07-28\"");
    EXPECT_CONTAINS(r.body, "\"resultType\":\"complete\"");
    EXPECT(S_hdr(&r, "Mcp-Session-Id") == NULL);
    reply_release(&r);
    r = S_post(&s, TOK_A, NULL, "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\n",
               modern);
    EXPECT_INT(r.status, 400); /* the header says another method */
    reply_release(&r);
    /* DELETE ends the session */
    snprintf(h, sizeof h, "Authorization: Bearer " TOK_A "\r\nMcp-Session-Id: %s\r\n", sid);
    r = S_http(s.port, "DELETE", "/mcp", h, NULL);
    EXPECT_INT(r.status, 204);
    reply_release(&r);
    r = S_post(&s, TOK_A, sid, NULL, ping);
    EXPECT_INT(r.status, 404);
    reply_release(&r);
    /* limits: a body over 4 MiB */
    r = S_http(s.port, "POST", "/mcp",
               JSON_HDRS "Authorization: Bearer " TOK_A "\r\nContent-Length: 99999999\r\n", NULL);
    EXPECT_INT(r.status, 413);
    reply_release(&r);
    free(sid);
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 10000), 0);
}

typedef struct lru_arg {
    int port, seed, ok;
    char fail[256]; /* the first failure */
} lru_arg;

/* Six stateless (2026-07-28) searches alternating between the agents. */
static void *S_lru_client(void *arg)
{
    lru_arg *a = arg;
    for (int i = 0; i < 6; i++) {
        bool beta = (i + a->seed) % 2;
        char body[512];
        snprintf(body, sizeof body,
                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"memory_search\",\"arguments\":{\"query\":\"%s\"},\"_meta\":{"
                 "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
                 "\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
                 beta ? "Tiger" : "Biscuit");
        reply r = S_http(a->port, "POST", beta ? "/mcp/beta" : "/mcp/alpha", JSON_HDRS, body);
        if (r.status == 200 && S_nresults(r.body) == 1)
            a->ok++;
        else if (!a->fail[0])
            snprintf(a->fail, sizeof a->fail, "%d %.200s", r.status, r.body);
        reply_release(&r);
    }
    return NULL;
}

TEST(serve_engine_lru_and_no_tokens)
{
    /* no tokens: loopback only, every agent at /mcp/<id>; one engine open at
     * a time, so the two agents take turns closing each other's */
    server s;
    const char *extra[] = {"--max-engines", "1", "--no-watch", NULL};
    start(&s, false, extra);
    EXPECT(s.port > 0);
    int fds_first = 0;
    for (int round = 0; round < 6; round++) {
        const char *path = round % 2 ? "/mcp/beta" : "/mcp/alpha";
        const char *want = round % 2 ? "Tiger" : "Biscuit";
        char *sid = S_init(&s, NULL, path);
        EXPECT(sid != NULL);
        char body[256];
        snprintf(body, sizeof body,
                 "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"memory_search\",\"arguments\":{\"query\":\"%s\"}}}",
                 want);
        char h[256];
        snprintf(h, sizeof h, JSON_HDRS "Mcp-Session-Id: %s\r\n", sid);
        reply r = S_http(s.port, "POST", path, h, body);
        EXPECT_INT(r.status, 200);
        if (S_nresults(r.body) != 1) test_fail(__FILE__, __LINE__, "round %d: %s", round, r.body);
        reply_release(&r);
        free(sid);
        if (round == 1) fds_first = count_fds(s.p.pid);
    }
    /* the evicted engines' files are closed */
    EXPECT(count_fds(s.p.pid) <= fds_first + 2);
    /* concurrent requests to both agents through the one engine slot: they
     * wait for it in turn, none is refused */
    pthread_t t[8];
    lru_arg la[8];
    for (int i = 0; i < 8; i++) {
        la[i].port = s.port;
        la[i].seed = i;
        la[i].ok = 0;
        la[i].fail[0] = 0;
        pthread_create(&t[i], NULL, S_lru_client, &la[i]);
    }
    int ok = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        ok += la[i].ok;
        if (la[i].fail[0]) test_fail(__FILE__, __LINE__, "client %d: %s", i, la[i].fail);
    }
    EXPECT_INT(ok, 8 * 6);
    /* /mcp alone is the first agent */
    char *sid = S_init(&s, NULL, "/mcp");
    EXPECT(sid != NULL);
    free(sid);
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 10000), 0);

    /* without tokens, a non-loopback address is refused */
    const char *args[] = {"--config",    path_in(s.dir, "qc.json"),
                          "--state-dir", path_in(s.dir, "state"),
                          "serve",       "--listen",
                          "0.0.0.0:0",   NULL};
    run_result rr = run_clawmem(NULL, args);
    EXPECT_INT(rr.status, 1);
    EXPECT_CONTAINS(rr.err, "--tokens");
    run_result_release(&rr);
    /* a bad tokens file names the place, never the token */
    write_file(s.dir, "bad.json", "{'short': {agent: 'alpha'}}");
    const char *args2[] = {
        "--config", path_in(s.dir, "qc.json"),  "--state-dir", path_in(s.dir, "state"), "serve",
        "--tokens", path_in(s.dir, "bad.json"), NULL};
    rr = run_clawmem(NULL, args2);
    EXPECT_INT(rr.status, 1);
    EXPECT_CONTAINS(rr.err, "bad.json:1:2: a token must have at least 16 characters");
    run_result_release(&rr);
    write_file(s.dir, "bad2.json", "{'tok-0123456789abcdef': {agent: 'gamma'}}");
    const char *args3[] = {
        "--config", path_in(s.dir, "qc.json"),   "--state-dir", path_in(s.dir, "state"), "serve",
        "--tokens", path_in(s.dir, "bad2.json"), NULL};
    rr = run_clawmem(NULL, args3);
    EXPECT_INT(rr.status, 1);
    EXPECT_CONTAINS(rr.err, "agent \"gamma\" is not in the config's agents.list");
    EXPECT(strstr(rr.err, "tok-0123456789abcdef") == NULL);
    run_result_release(&rr);
    const char *help[] = {"serve", "--help", NULL};
    rr = run_clawmem(NULL, help);
    EXPECT_INT(rr.status, 0);
    EXPECT_CONTAINS(rr.out, "reverse proxy");
    run_result_release(&rr);
}

TEST(serve_official_sdk_clients)
{
    server s;
    start(&s, true, NULL);
    EXPECT(s.port > 0);
    const char *argv[] = {"timeout", "120", "node", "tests/mcp/sdk_http.mjs",
                          s.url,     TOK_A, TOK_B,  NULL};
    run_result r = run_cmd(NULL, argv);
    if (r.status != 0)
        test_fail(__FILE__, __LINE__, "sdk over http (exit %d):\n%s%s", r.status, r.out, r.err);
    EXPECT_CONTAINS(r.out, "all checks passed");
    run_result_release(&r);
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 10000), 0);
}

TEST(serve_conformance_suite)
{
    /* @modelcontextprotocol/conformance (tests/mcp): the server scenarios
     * that apply to a server with tools only (the others need the suite's
     * own test tools, prompts, resources or sampling). */
    server s;
    start(&s, false, NULL);
    EXPECT(s.port > 0);
    static const char *const scenarios[] = {"server-initialize", "ping", "tools-list",
                                            "dns-rebinding-protection", "server-sse-polling"};
    /* It needs Node.js 22 or newer (fs.globSync, File): the pinned one
     * (test mcp_node_22_or_newer) */
    for (size_t i = 0; i < ARRAY_LEN(scenarios); i++) {
        const char *argv[] = {
            "timeout",
            "120",
            "node",
            "--no-warnings",
            "tests/mcp/node_modules/@modelcontextprotocol/conformance/dist/index.js",
            "server",
            "--url",
            s.url,
            "--scenario",
            scenarios[i],
            NULL};
        run_result r = run_cmd(NULL, argv);
        if (r.status != 0 || !strstr(r.out, " 0 failed"))
            test_fail(__FILE__, __LINE__, "conformance %s (exit %d):\n%s%s", scenarios[i], r.status,
                      r.out, r.err);
        run_result_release(&r);
    }
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 10000), 0);
}

/* Sessions are shared fairly: one LRU of 4,096 MCP sessions used to serve
 * every agent and token, so one read-only token opening 4,100 sessions
 * logged every other tenant out. Now a token holds at most 256 (its own
 * oldest go first), an agent 1,024, and at a cap the biggest holder loses
 * one; a session answers only the token that opened it. */
TEST(serve_sessions_fair_between_tokens)
{
    char *dir = tmp_dir();
    write_file(dir, "tokens.json",
               "{'tok-a1-0123456789abcdef': {agent: 'alpha'},"
               " 'tok-a2-0123456789abcdef': {agent: 'alpha'},"
               " 'tok-b-0123456789abcdefg': {agent: 'beta'}}");
    const char *extra[] = {"--tokens", path_in(dir, "tokens.json"), NULL};
    server s;
    start(&s, false, extra);
    EXPECT(s.port > 0);
    char *sid_b = S_init(&s, "tok-b-0123456789abcdefg", "/mcp");
    char *sid_a2 = S_init(&s, "tok-a2-0123456789abcdef", "/mcp");
    char *first_a1 = S_init(&s, "tok-a1-0123456789abcdef", "/mcp");
    EXPECT(sid_b && sid_a2 && first_a1);
    /* the same agent, another token: not its session */
    reply r = S_post(&s, "tok-a2-0123456789abcdef", first_a1, NULL,
                     "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
    EXPECT_INT(r.status, 404);
    reply_release(&r);
    int made = 0;
    char *last_a1 = NULL;
    for (int i = 0; i < 4100; i++) {
        free(last_a1);
        last_a1 = S_init(&s, "tok-a1-0123456789abcdef", "/mcp");
        made += last_a1 != NULL;
    }
    EXPECT_INT(made, 4100);
    static const char list[] = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}";
    r = S_post(&s, "tok-b-0123456789abcdefg", sid_b, NULL, list);
    EXPECT_INT(r.status, 200);
    reply_release(&r);
    r = S_post(&s, "tok-a2-0123456789abcdef", sid_a2, NULL, list);
    EXPECT_INT(r.status, 200);
    reply_release(&r);
    r = S_post(&s, "tok-a1-0123456789abcdef", last_a1, NULL, list);
    EXPECT_INT(r.status, 200);
    reply_release(&r);
    r = S_post(&s, "tok-a1-0123456789abcdef", first_a1, NULL, list); /* its own oldest went */
    EXPECT_INT(r.status, 404);
    reply_release(&r);
    free(sid_b);
    free(sid_a2);
    free(first_a1);
    free(last_a1);
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 10000), 0);
}
