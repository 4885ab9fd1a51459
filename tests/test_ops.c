/*
 * test_ops.c — operating a fleet (issue 31): `clawmem agents list|delete`
 * removes every row of one agent and none of another's, on SQLite and on
 * PostgreSQL; `clawmem serve`'s /healthz and /readyz answer a load balancer
 * without a token and without secrets or paths, /readyz failing while the
 * PostgreSQL server is stopped; the engine LRU bounded by memory
 * (--max-engine-mb) closes the least recently used engines by size.
 */
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../server/engine_lru.h"
#include "../src/store/store_pg_shared.h"
#include "test.h"

/* ---- helpers ------------------------------------------------------------------ */

/* A state dir whose config lists agents ops-a and ops-b, each with a
 * workspace holding one note; store: the clawmem.json overlay (NULL: none). */
static char *two_agents(const char *store)
{
    char *dir = tmp_dir();
    write_file(dir, "ws-a/MEMORY.md", "# A\n\nThe falcon is named Ariel.\n");
    write_file(dir, "ws-b/MEMORY.md", "# B\n\nThe otter is named Bruno.\n");
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{agents: {list: [{id: 'ops-a', workspace: '%s'}, {id: 'ops-b', workspace: '%s'}]}}",
             path_in(dir, "ws-a"), path_in(dir, "ws-b"));
    write_file(dir, "state/quantumclaw.json", cfg);
    if (store) write_file(dir, "state/clawmem.json", store);
    return dir;
}

static cm_rc sync_agent(const char *dir, const char *agent)
{
    cm_options o = {agent, NULL, NULL, path_in(dir, "state"), NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[CM_ERR_SIZE];
    cm_rc rc = cm_engine_open(&o, &e, err, sizeof err);
    if (!rc) rc = cm_engine_sync(e, 0, NULL, NULL, NULL, err, sizeof err);
    if (rc) fprintf(stderr, "  sync %s: %s\n", agent, err);
    cm_engine_close(e);
    return rc;
}

/* clawmem --state-dir DIR/state ARGS... */
static run_result ops_run5(const char *dir, const char *a1, const char *a2, const char *a3,
                           const char *a4, const char *a5)
{
    const char *args[] = {"--state-dir", path_in(dir, "state"), a1, a2, a3, a4, a5, NULL};
    return run_clawmem(NULL, args);
}

static run_result ops_run(const char *dir, const char *a1, const char *a2, const char *a3,
                          const char *a4)
{
    const char *args[] = {"--state-dir", path_in(dir, "state"), a1, a2, a3, a4, NULL};
    return run_clawmem(NULL, args);
}

/* The agent's entry of `agents list --json`, or NULL (json_decref root). */
static json_t *listed(json_t *root, const char *id)
{
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(root, "agents"), i, a)
    {
        if (!strcmp(json_string_value(json_object_get(a, "id")), id)) return a;
    }
    return NULL;
}

static json_t *list_json(const char *dir)
{
    run_result r = ops_run(dir, "agents", "list", "--json", NULL);
    json_t *j = r.status == 0 && r.out ? json_loads(r.out, 0, NULL) : NULL;
    if (!j) fprintf(stderr, "  agents list: %s%s\n", r.out ? r.out : "", r.err ? r.err : "");
    run_result_release(&r);
    return j;
}

static int search_hits(const char *dir, const char *agent, const char *q)
{
    const char *args[] = {
        "--state-dir", path_in(dir, "state"), "--agent", agent, "search", q, "--json", NULL};
    run_result r = run_clawmem(NULL, args);
    json_t *j = r.status == 0 && r.out ? json_loads(r.out, 0, NULL) : NULL;
    int n = j ? (int)json_array_size(json_object_get(j, "results")) : -1;
    json_decref(j);
    run_result_release(&r);
    return n;
}

/* ---- agents list|delete ---------------------------------------------------------- */

TEST(ops_agents_delete_sqlite_removes_one_agent_only)
{
    char *dir = two_agents(NULL);
    EXPECT_INT(sync_agent(dir, "ops-a"), CM_OK);
    EXPECT_INT(sync_agent(dir, "ops-b"), CM_OK);
    /* an index of an agent not in the config (the default workspace) */
    write_file(dir, "state/workspace/MEMORY.md", "# Stray\n\nA heron.\n");
    EXPECT_INT(sync_agent(dir, "stray"), CM_OK);
    json_t *j = list_json(dir);
    EXPECT(j != NULL);
    json_t *a = listed(j, "ops-a"), *s = listed(j, "stray");
    EXPECT(a && json_is_true(json_object_get(a, "configured")));
    EXPECT_INT(json_integer_value(json_object_get(json_object_get(a, "rows"), "chunks")), 1);
    EXPECT(s && json_is_false(json_object_get(s, "configured")));
    json_decref(j);
    const char *idx_a = path_in(dir, "state/memory/ops-a.clawmem.sqlite");
    char keep[4096];
    snprintf(keep, sizeof keep, "%s", idx_a);
    /* without --yes: nothing happens */
    run_result r = ops_run(dir, "agents", "delete", "ops-a", NULL);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "--yes");
    run_result_release(&r);
    EXPECT(access(keep, F_OK) == 0);
    r = ops_run(dir, "agents", "delete", "ops-a", "--yes");
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "Deleted agent ops-a from the sqlite store: ");
    EXPECT_CONTAINS(r.out, "chunks 1");
    run_result_release(&r);
    /* every file of a's index is gone; b's index answers as before */
    static const char *const tails[] = {"", "-wal", "-shm", ".lock", ".watch"};
    for (size_t i = 0; i < ARRAY_LEN(tails); i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s%s", keep, tails[i]);
        EXPECT(access(p, F_OK) != 0);
    }
    EXPECT(access(path_in(dir, "state/memory/ops-b.clawmem.sqlite"), F_OK) == 0);
    EXPECT_INT(search_hits(dir, "ops-b", "otter Bruno"), 1);
    /* the memory files stay */
    EXPECT(access(path_in(dir, "ws-a/MEMORY.md"), F_OK) == 0);
    j = list_json(dir);
    a = listed(j, "ops-a");
    EXPECT(a && json_is_null(json_object_get(a, "index")));
    EXPECT(listed(j, "ops-b") && listed(j, "stray"));
    json_decref(j);
    /* deleting again: nothing to delete */
    r = ops_run(dir, "agents", "delete", "ops-a", "--yes");
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "Nothing to delete");
    run_result_release(&r);
}

/* Rows of agent in every table of the database that has an agent_id
 * column (found from the catalogue, so a table added later is counted). */
static long pg_rows_of(const char *dsn, const char *agent)
{
    char sql[1024];
    snprintf(sql, sizeof sql,
             "DO $$DECLARE t text; n bigint; s bigint := 0; BEGIN FOR t IN SELECT table_name FROM "
             "information_schema.columns WHERE column_name = 'agent_id' AND table_schema = "
             "current_schema() LOOP EXECUTE format('SELECT count(*) FROM %%I WHERE agent_id = "
             "%%L', t, '%s') INTO n; s := s + n; END LOOP; RAISE NOTICE 'rows=%%', s; END$$",
             agent);
    const char *cmd[] = {"psql", dsn, "-Aqtc", sql, NULL};
    run_result k = run_cmd(NULL, cmd);
    const char *p = k.err ? strstr(k.err, "rows=") : NULL;
    long v = p ? strtol(p + 5, NULL, 10) : -1;
    run_result_release(&k);
    return v;
}

TEST(ops_agents_delete_postgres_one_transaction_one_agent)
{
    const char *dsn = getenv("CLAWMEM_TEST_PG_DSN");
    if (!dsn || !*dsn) SKIP("postgres", "no PostgreSQL cluster (CLAWMEM_TEST_PG_DSN)");
    char store[1024];
    snprintf(store, sizeof store,
             "{agents: {defaults: {memorySearch: {store: {driver: 'postgres', dsn: '%s'}}}}}", dsn);
    char *dir = two_agents(store);
    EXPECT_INT(sync_agent(dir, "ops-a"), CM_OK);
    EXPECT_INT(sync_agent(dir, "ops-b"), CM_OK);
    long before_a = pg_rows_of(dsn, "ops-a"), before_b = pg_rows_of(dsn, "ops-b");
    EXPECT(before_a >= 4); /* agents, meta, files, chunks at least */
    EXPECT(before_b >= 4);
    json_t *j = list_json(dir);
    json_t *a = listed(j, "ops-a");
    EXPECT(a && !strcmp(json_string_value(json_object_get(a, "store")), "postgres"));
    EXPECT_INT(json_integer_value(json_object_get(json_object_get(a, "rows"), "clawmem_chunks")),
               1);
    char *dump = json_dumps(j, 0);
    EXPECT(dump && strstr(dump, dsn) == NULL); /* never the DSN */
    free(dump);
    json_decref(j);
    run_result r = ops_run(dir, "agents", "delete", "ops-a", "--yes");
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "Deleted agent ops-a from the postgres store: ");
    EXPECT_CONTAINS(r.out, "clawmem_chunks 1");
    EXPECT(strstr(r.out, dsn) == NULL);
    run_result_release(&r);
    EXPECT_INT(pg_rows_of(dsn, "ops-a"), 0);
    EXPECT_INT(pg_rows_of(dsn, "ops-b"), before_b);
    EXPECT_INT(search_hits(dir, "ops-b", "otter Bruno"), 1);
    /* the JSON report counts what went */
    EXPECT_INT(sync_agent(dir, "ops-a"), CM_OK);
    r = ops_run5(dir, "agents", "delete", "ops-a", "--yes", "--json");
    json_t *rep = r.out ? json_loads(r.out, 0, NULL) : NULL;
    EXPECT(rep && json_is_true(json_object_get(rep, "found")));
    long sum = 0;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(rep, "removed"), k, v) sum += (long)json_integer_value(v);
    EXPECT_INT(sum, before_a);
    json_decref(rep);
    run_result_release(&r);
    EXPECT_INT(pg_rows_of(dsn, "ops-a"), 0);
    r = ops_run(dir, "agents", "delete", "ops-b", "--yes");
    EXPECT_INT(r.status, 0);
    run_result_release(&r);
    EXPECT_INT(pg_rows_of(dsn, "ops-b"), 0);
}

/* A session `clawmem serve` keeps in PostgreSQL for a replica to accept is
 * the agent's row too: agents delete removes it (with the index's rows, in
 * the same transaction), so a client of a deleted agent cannot go on; the
 * other agent's session stays. */
TEST(ops_agents_delete_postgres_removes_mcp_sessions)
{
    const char *dsn = getenv("CLAWMEM_TEST_PG_DSN");
    if (!dsn || !*dsn) SKIP("postgres", "no PostgreSQL cluster (CLAWMEM_TEST_PG_DSN)");
    char store[1024];
    snprintf(store, sizeof store,
             "{agents: {defaults: {memorySearch: {store: {driver: 'postgres', dsn: '%s'}}}}}", dsn);
    char *dir = two_agents(store);
    EXPECT_INT(sync_agent(dir, "ops-a"), CM_OK);
    EXPECT_INT(sync_agent(dir, "ops-b"), CM_OK);
    cm_pg_shared *sh = NULL;
    char err[256];
    EXPECT_INT(cm_pg_shared_open(dsn, &sh, err, sizeof err), CM_OK);
    int64_t now = cm_wall_ms();
    const char *ids[] = {"ops-a", "ops-b"};
    for (size_t i = 0; sh && i < 2; i++) {
        pg_session_key k = {ids[i], "", i ? "feedb0b0" : "facade00"};
        EXPECT_INT(cm_pg_session_put(sh, &k, now, 3600000, 8, 64, err, sizeof err), CM_OK);
    }
    long before_b = pg_rows_of(dsn, "ops-b");
    /* listed with the index's tables */
    json_t *j = list_json(dir);
    json_t *rows = json_object_get(listed(j, "ops-a"), "rows");
    EXPECT_INT(json_integer_value(json_object_get(rows, "clawmem_mcp_sessions")), 1);
    json_decref(j);
    run_result r = ops_run5(dir, "agents", "delete", "ops-a", "--yes", "--json");
    EXPECT_INT(r.status, 0);
    json_t *rep = r.out ? json_loads(r.out, 0, NULL) : NULL;
    json_t *gone = json_object_get(rep, "removed");
    EXPECT_INT(json_integer_value(json_object_get(gone, "clawmem_mcp_sessions")), 1);
    json_decref(rep);
    run_result_release(&r);
    EXPECT_INT(pg_rows_of(dsn, "ops-a"), 0);
    EXPECT_INT(pg_rows_of(dsn, "ops-b"), before_b);
    /* the deleted agent's session is no longer accepted; the other's is */
    bool found = true;
    pg_session_key ka = {"ops-a", "", "facade00"}, kb = {"ops-b", "", "feedb0b0"};
    EXPECT_INT(cm_pg_session_touch(sh, &ka, now, 3600000, false, &found, err, sizeof err), CM_OK);
    EXPECT(!found);
    EXPECT_INT(cm_pg_session_touch(sh, &kb, now, 3600000, false, &found, err, sizeof err), CM_OK);
    EXPECT(found);
    cm_pg_shared_free(sh);
    r = ops_run(dir, "agents", "delete", "ops-b", "--yes");
    EXPECT_INT(r.status, 0);
    run_result_release(&r);
    EXPECT_INT(pg_rows_of(dsn, "ops-b"), 0);
}

/* ---- serve: /healthz, /readyz, the memory-bounded LRU ---------------------------- */

typedef struct srv_proc {
    proc p;
    int port;
} srv_proc;

static void serve_start(srv_proc *s, const char *dir, const char *const *extra)
{
    const char *args[24] = {"--state-dir", path_in(dir, "state"), "serve",
                            "--listen",    "127.0.0.1:0",         "--no-watch"};
    int n = 6;
    for (size_t i = 0; extra && extra[i] && n < 22; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    proc_start(&s->p, NULL, args);
    char *line = proc_line(&s->p, 15000);
    s->port = line && !strncmp(line, "listening on http://127.0.0.1:", 30)
                  ? (int)strtol(line + 30, NULL, 10)
                  : 0;
    free(line);
}

/* One request (Connection: close): the status, *body the body (malloc'd). */
static int http_req(int port, const char *method, const char *path, const char *headers,
                    const char *body, char **out)
{
    *out = NULL;
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
    buf q = BUF_INIT, in = BUF_INIT;
    cm_buf_printf(&q, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s", method, path,
                  headers ? headers : "");
    cm_buf_printf(&q, "Content-Length: %zu\r\n\r\n%s", body ? strlen(body) : 0, body ? body : "");
    ssize_t w = send(fd, q.data, q.len, MSG_NOSIGNAL);
    (void)w;
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
    int status = -1;
    if (in.data && !strncmp(in.data, "HTTP/1.1 ", 9)) status = (int)strtol(in.data + 9, NULL, 10);
    char *sep = in.data ? strstr(in.data, "\r\n\r\n") : NULL;
    *out = cm_strdup(sep ? sep + 4 : "");
    cm_buf_release(&q);
    cm_buf_release(&in);
    return status;
}

static json_t *healthz(int port)
{
    char *b = NULL;
    int st = http_req(port, "GET", "/healthz", NULL, NULL, &b);
    json_t *j = st == 200 && b ? json_loads(b, 0, NULL) : NULL;
    free(b);
    return j;
}

TEST(ops_serve_health_and_readiness)
{
    char *dir = two_agents(NULL);
    write_file(dir, "tokens.json", "{'tok-ops-0123456789ab': {agent: 'ops-a'}}");
    const char *extra[] = {"--tokens", path_in(dir, "tokens.json"), NULL};
    srv_proc s;
    serve_start(&s, dir, extra);
    EXPECT(s.port > 0);
    char *b = NULL;
    /* no token needed; nothing but figures in the bodies */
    EXPECT_INT(http_req(s.port, "GET", "/healthz", NULL, NULL, &b), 200);
    json_t *j = b ? json_loads(b, 0, NULL) : NULL;
    EXPECT(j && !strcmp(json_string_value(json_object_get(j, "status")), "ok"));
    EXPECT(json_is_integer(json_object_get(json_object_get(j, "engines"), "open")));
    EXPECT(json_is_number(json_object_get(json_object_get(j, "engines"), "estimatedMb")));
    EXPECT(strstr(b, dir) == NULL);
    json_decref(j);
    free(b);
    EXPECT_INT(http_req(s.port, "GET", "/readyz", NULL, NULL, &b), 200);
    EXPECT_CONTAINS(b, "\"status\":\"ready\"");
    EXPECT(strstr(b, dir) == NULL);
    free(b);
    EXPECT_INT(http_req(s.port, "POST", "/readyz", NULL, "{}", &b), 405);
    free(b);
    /* the MCP endpoint still wants its token */
    EXPECT_INT(http_req(s.port, "POST", "/mcp", "Content-Type: application/json\r\n", "{}", &b),
               401);
    free(b);
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 10000), 0);
}

TEST(ops_serve_readyz_fails_while_postgres_is_stopped)
{
    const char *dsn0 = getenv("CLAWMEM_TEST_PG_DSN");
    if (!dsn0 || !*dsn0) SKIP("postgres", "no PostgreSQL cluster (CLAWMEM_TEST_PG_DSN)");
    /* a cluster of this test's own, stopped when its command (reading
     * stdin) ends: scripts/pg-test-cluster.sh */
    char here[4096];
    EXPECT(getcwd(here, sizeof here) != NULL);
    char script[4200];
    snprintf(script, sizeof script, "%s/scripts/pg-test-cluster.sh", here);
    const char *old = getenv("CLAWMEM_BIN");
    char *keep = old ? cm_strdup(old) : NULL;
    setenv("CLAWMEM_BIN", script, 1);
    proc cl;
    const char *cargs[] = {"sh", "-c", "echo \"DSN $CLAWMEM_TEST_PG_DSN\"; read x || true", NULL};
    proc_start(&cl, NULL, cargs);
    if (keep)
        setenv("CLAWMEM_BIN", keep, 1);
    else
        unsetenv("CLAWMEM_BIN");
    free(keep);
    char *line = proc_line(&cl, 60000);
    EXPECT(line && !strncmp(line, "DSN host=", 9));
    if (!line || strncmp(line, "DSN host=", 9) != 0) {
        free(line);
        proc_stop(&cl, 0, 20000);
        return;
    }
    char store[1024];
    snprintf(store, sizeof store,
             "{agents: {defaults: {memorySearch: {store: {driver: 'postgres', dsn: '%s'}}}}}",
             line + 4);
    char *dir = two_agents(store);
    srv_proc s;
    serve_start(&s, dir, NULL);
    EXPECT(s.port > 0);
    char *b = NULL;
    EXPECT_INT(http_req(s.port, "GET", "/readyz", NULL, NULL, &b), 200);
    free(b);
    /* the server stops: not ready (once the last answer is older than the
     * cache), and the body names no host, socket or DSN; alive all along */
    EXPECT_INT(proc_stop(&cl, 0, 30000), 0);
    int st = 0;
    for (int64_t until = cm_now_ms() + 15000; cm_now_ms() < until;) {
        st = http_req(s.port, "GET", "/readyz", NULL, NULL, &b);
        if (st == 503) break;
        free(b);
        b = NULL;
        struct pollfd none = {-1, 0, 0};
        poll(&none, 0, 100);
    }
    EXPECT_INT(st, 503);
    EXPECT(b && strstr(b, "not ready") && !strstr(b, "host") && !strstr(b, "/tmp"));
    free(b);
    EXPECT_INT(http_req(s.port, "GET", "/healthz", NULL, NULL, &b), 200);
    free(b);
    free(line);
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 10000), 0);
}

TEST(ops_engine_lru_closes_by_size)
{
    /* the choice: least recently used idle engines until the rest fit */
    lru_item v[4] = {{4, 300, false}, {1, 500, false}, {2, 100, true}, {3, 200, false}};
    bool close[4];
    EXPECT_INT(cm_engine_lru_over(v, 4, 1100, 0, close), 0); /* 1100 fits */
    /* 1100 > 700: the oldest idle (1, 500 bytes) goes, the busy one (2) stays */
    EXPECT_INT(cm_engine_lru_over(v, 4, 700, 0, close), 1);
    EXPECT(close[1] && !close[0] && !close[2] && !close[3]);
    /* 1100 > 450: 1, then 3 (busy 2 skipped); keep (0) never */
    EXPECT_INT(cm_engine_lru_over(v, 4, 450, 0, close), 2);
    EXPECT(close[1] && close[3] && !close[0] && !close[2]);
    /* a budget below what is in use: every idle one but keep */
    EXPECT_INT(cm_engine_lru_over(v, 4, 10, 0, close), 2);
    EXPECT_INT(cm_engine_lru_over(v, 4, 0, 0, close), 0); /* no budget */
    /* a big engine counts as much as its size: one 900-byte engine goes
     * where three small ones would fit */
    lru_item w[4] = {{1, 900, false}, {2, 100, false}, {3, 100, false}, {4, 100, false}};
    EXPECT_INT(cm_engine_lru_over(w, 4, 400, 3, close), 1);
    EXPECT(close[0] && !close[1] && !close[2] && !close[3]);

    /* serve: two agents' engines do not fit 0.4 MB together (an engine is
     * at least 0.25 MB), so they take turns; without the bound both stay */
    char *dir = two_agents(NULL);
    static const char *const q[] = {
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"_meta\":{"
        "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/"
        "clientCapabilities\":{}},\"name\":\"memory_search\","
        "\"arguments\":{\"query\":\"falcon Ariel\"}}}",
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"_meta\":{"
        "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/"
        "clientCapabilities\":{}},\"name\":\"memory_search\","
        "\"arguments\":{\"query\":\"otter Bruno\"}}}"};
    for (int bounded = 1; bounded >= 0; bounded--) {
        const char *extra[] = {bounded ? "--max-engine-mb" : NULL, "0.4", NULL};
        srv_proc s;
        serve_start(&s, dir, extra);
        EXPECT(s.port > 0);
        for (int round = 0; round < 4; round++) {
            char *b = NULL;
            int st = http_req(s.port, "POST", round % 2 ? "/mcp/ops-b" : "/mcp/ops-a",
                              "Content-Type: application/json\r\nAccept: application/json\r\n"
                              "MCP-Protocol-Version: 2026-07-28\r\n",
                              q[round % 2], &b);
            EXPECT_INT(st, 200);
            if (!b || !strstr(b, round % 2 ? "Bruno" : "Ariel"))
                test_fail(__FILE__, __LINE__, "round %d: %s", round, b ? b : "");
            free(b);
        }
        json_t *h = healthz(s.port);
        json_t *eng = json_object_get(h, "engines");
        EXPECT_INT(json_integer_value(json_object_get(eng, "open")), bounded ? 1 : 2);
        double mb = json_real_value(json_object_get(eng, "estimatedMb"));
        EXPECT(mb >= 0.25);
        if (bounded) EXPECT(mb <= 0.4);
        json_decref(h);
        EXPECT_INT(proc_stop(&s.p, SIGTERM, 10000), 0);
    }
}
