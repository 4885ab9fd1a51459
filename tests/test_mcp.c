/*
 * test_mcp.c — `clawmem mcp` driven over its pipes with raw JSON-RPC:
 * initialize and version negotiation, tools/list, the three tools, bad tool
 * arguments as tool errors, JSON-RPC errors (parse, unknown method, unknown
 * tool, oversized message, batch), the stateless 2026-07-28 era beside the
 * initialize eras, freshness through the watcher, shutdown on end of input
 * and SIGTERM (also with stdout full), and the official clients: the SDK 1.x
 * and 2.x clients and the MCP Inspector's CLI.
 */
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "../src/base/fs.h"
#include "fakeserver.h"
#include "test.h"

typedef struct session {
    char *dir;
    char ws[1024], state[1024];
    proc p;
} session;

static void start(session *s, const char *extra)
{
    s->dir = tmp_dir();
    snprintf(s->ws, sizeof s->ws, "%s/ws", s->dir);
    snprintf(s->state, sizeof s->state, "%s/state", s->dir);
    write_file(s->ws, "MEMORY.md", "# Facts\n\n- The dog is called Biscuit.\n");
    write_file(s->ws, "memory/2026-02-10.md", "# 2026-02-10\n\nConfigured VLAN 10 for IoT.\n");
    write_file(s->dir, "qc.json", "{}");
    const char *args[] = {"--workspace", s->ws,        "--state-dir",
                          s->state,      "--config",   path_in(s->dir, "qc.json"),
                          "mcp",         "--debounce", "50",
                          extra,         NULL};
    proc_start(&s->p, NULL, args);
}

/* Sends a request and returns the parsed response (caller decrefs). */
static json_t *rpc(session *s, const char *req)
{
    proc_send(&s->p, req);
    char *line = proc_line(&s->p, 5000);
    json_t *j = line ? json_loads(line, 0, NULL) : NULL;
    free(line);
    return j;
}

static int error_code(json_t *r)
{
    return (int)json_integer_value(json_object_get(json_object_get(r, "error"), "code"));
}

static json_t *search(session *s, const char *q)
{
    char req[512];
    snprintf(req, sizeof req,
             "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"memory_search\",\"arguments\":{\"query\":\"%s\"}}}",
             q);
    return rpc(s, req);
}

static size_t hits(json_t *r)
{
    return json_array_size(json_object_get(
        json_object_get(json_object_get(r, "result"), "structuredContent"), "results"));
}

/* Searches until q has hits (the watcher syncs in the background). */
static bool eventually_found(session *s, const char *q, bool want, int ms)
{
    for (int t = 0; t < ms; t += 50) {
        json_t *r = search(s, q);
        bool found = hits(r) > 0;
        json_decref(r);
        if (found == want) return true;
        usleep(50000);
    }
    return false;
}

TEST(mcp_initialize_and_list)
{
    session s;
    start(&s, NULL);
    json_t *r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                        "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                        "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
    EXPECT_STR(json_string_value(json_object_get(json_object_get(r, "result"), "protocolVersion")),
               "2025-06-18");
    EXPECT_INT(json_object_size(r), 3); /* jsonrpc, id, result: nothing else */
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"initialize\",\"params\":{"
                "\"protocolVersion\":\"1999-01-01\"}}");
    EXPECT_STR(json_string_value(json_object_get(json_object_get(r, "result"), "protocolVersion")),
               "2025-11-25");
    EXPECT_STR(json_string_value(json_object_get(r, "id")), "a");
    json_decref(r);
    proc_send(&s.p, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");
    EXPECT(json_is_object(json_object_get(r, "result")));
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
    json_t *tools = json_object_get(json_object_get(r, "result"), "tools");
    EXPECT_INT(json_array_size(tools), 2); /* no memory_write unless enabled */
    EXPECT_STR(json_string_value(json_object_get(json_array_get(tools, 0), "name")),
               "memory_search");
    EXPECT_STR(json_string_value(json_object_get(json_array_get(tools, 1), "name")), "memory_get");
    EXPECT(json_object_get(json_object_get(json_array_get(tools, 0), "inputSchema"), "properties"));
    EXPECT(json_object_get(json_array_get(tools, 0), "outputSchema"));
    EXPECT_CONTAINS(json_string_value(json_object_get(json_array_get(tools, 0), "description")),
                    "before answering");
    json_decref(r);
    EXPECT_INT(proc_stop(&s.p, 0, 5000), 0); /* end of input: clean exit */
}

TEST(mcp_tools_answer_with_payloads)
{
    session s;
    start(&s, NULL);
    EXPECT(eventually_found(&s, "Biscuit", true, 5000));
    json_t *r = search(&s, "Biscuit");
    json_t *res = json_object_get(r, "result");
    json_t *hit =
        json_array_get(json_object_get(json_object_get(res, "structuredContent"), "results"), 0);
    EXPECT_STR(json_string_value(json_object_get(hit, "path")), "MEMORY.md");
    EXPECT(json_is_false(json_object_get(res, "isError")));
    /* the text content is the same payload */
    const char *text = json_string_value(
        json_object_get(json_array_get(json_object_get(res, "content"), 0), "text"));
    json_t *parsed = json_loads(text, 0, NULL);
    EXPECT(json_equal(parsed, json_object_get(res, "structuredContent")));
    json_decref(parsed);
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"memory_get\",\"arguments\":{\"path\":\"memory/2026-02-10.md\",\"from\":3}}}");
    EXPECT_STR(json_string_value(json_object_get(
                   json_object_get(json_object_get(r, "result"), "structuredContent"), "text")),
               "Configured VLAN 10 for IoT.\n"); /* to the end: the final newline too */
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"memory_get\",\"arguments\":{\"path\":\"../../etc/passwd.md\"}}}");
    EXPECT(json_is_true(json_object_get(json_object_get(r, "result"), "isError")));
    EXPECT(!json_object_get(json_object_get(r, "result"), "structuredContent"));
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"memory_get\",\"arguments\":{\"path\":\"memory/a.md\\u0000.txt\"}}}");
    EXPECT(json_is_true(json_object_get(json_object_get(r, "result"), "isError")));
    json_decref(r);
    /* the watcher picks up a new note, then its removal */
    write_file(s.ws, "memory/2026-02-11.md", "Zanzibar trip booked.\n");
    EXPECT(eventually_found(&s, "Zanzibar", true, 5000));
    unlink(path_in(s.ws, "memory/2026-02-11.md"));
    EXPECT(eventually_found(&s, "Zanzibar", false, 5000));
    /* a new directory with a note in it */
    write_file(s.ws, "memory/projects/kiln.md", "Kiln firmware notes.\n");
    EXPECT(eventually_found(&s, "Kiln", true, 5000));
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 5000), 0);
}

/* The embedding server answers its first request after *ctx milliseconds (a
 * slow first sync; the queries' embeddings come at once). */
static bool slow_embed(void *ctx, const char *method, const char *path, const char *body,
                       size_t body_len, int *status, const char **ctype, char **out,
                       size_t *out_len)
{
    (void)method, (void)body, (void)body_len, (void)status, (void)ctype, (void)out, (void)out_len;
    int ms = __atomic_exchange_n((int *)ctx, 0, __ATOMIC_ACQ_REL);
    if (strstr(path, "embeddings") && ms > 0) poll(NULL, 0, ms);
    return false;
}

/* mcp over a workspace whose index does not exist yet and whose first sync
 * takes *delay ms (embeddings), with --first-sync-wait wait. */
static void start_slow(session *s, fake_server **fs, int *delay, const char *wait)
{
    char base[64], text[1024];
    *fs = fake_start(16, base);
    fake_handler(*fs, slow_embed, delay);
    s->dir = tmp_dir();
    snprintf(s->ws, sizeof s->ws, "%s/ws", s->dir);
    snprintf(s->state, sizeof s->state, "%s/state", s->dir);
    write_file(s->ws, "MEMORY.md", "# Facts\n\n- The dog is called Biscuit.\n");
    snprintf(text, sizeof text,
             "{agents: {defaults: {memorySearch: {provider: 'openai', remote: {baseUrl: "
             "'%s/v1', apiKey: 'k'}}}}}",
             base);
    write_file(s->dir, "qc.json", text);
    const char *args[] = {"--workspace",       s->ws, "--state-dir", s->state, "--config",
                          path_in(s->dir, "qc.json"), "mcp", "--first-sync-wait", wait, NULL};
    proc_start(&s->p, NULL, args);
}

static const char *search_status(json_t *r)
{
    return json_string_value(json_object_get(
        json_object_get(json_object_get(r, "result"), "structuredContent"), "status"));
}

TEST(mcp_first_search_waits_for_the_first_sync)
{
    /* the first search, sent at once, waits for the first sync (1 s of
     * embeddings) rather than answering results: [] */
    session s;
    fake_server *fs = NULL;
    int delay = 1000;
    start_slow(&s, &fs, &delay, "30000");
    json_t *r = search(&s, "Biscuit");
    EXPECT_INT(hits(r), 1);
    EXPECT(search_status(r) == NULL);
    json_decref(r);
    EXPECT_INT(proc_stop(&s.p, 0, 5000), 0);
    fake_stop(fs);

    /* bounded: past the wait the payload's status says so; later it is found */
    delay = 2000;
    start_slow(&s, &fs, &delay, "200");
    int64_t t0 = cm_now_ms();
    r = search(&s, "Biscuit");
    EXPECT_INT(hits(r), 0);
    EXPECT_CONTAINS(search_status(r),
                    "the first sync of this agent's memory had not finished after 200 ms");
    EXPECT(cm_now_ms() - t0 < 1800);
    json_decref(r);
    EXPECT(eventually_found(&s, "Biscuit", true, 10000));
    /* the sync commits the note, then marks itself finished: a search in
     * between finds the note and still says the wait ran out; the status goes
     * once the sync is marked finished */
    bool clean = false;
    for (int i = 0; i < 100 && !clean; i++) {
        r = search(&s, "Biscuit");
        clean = hits(r) == 1 && search_status(r) == NULL;
        json_decref(r);
        if (!clean) poll(NULL, 0, 50);
    }
    EXPECT(clean);
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 5000), 0);
    fake_stop(fs);
}

TEST(mcp_json_rpc_errors)
{
    session s;
    start(&s, NULL);
    json_t *r = rpc(&s, "{not json");
    EXPECT_INT(error_code(r), -32700);
    EXPECT(json_is_null(json_object_get(r, "id")));
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\"}");
    EXPECT_INT(error_code(r), -32601);
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"memory_forget\",\"arguments\":{}}}");
    EXPECT_INT(error_code(r), -32602); /* an unknown tool */
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"memory_search\",\"arguments\":[\"x\"]}}");
    EXPECT_INT(error_code(r), -32602); /* not a CallToolRequest */
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"memory_write\",\"arguments\":{\"text\":\"x\"}}}");
    EXPECT_INT(error_code(r), -32602); /* not enabled: not a tool */
    json_decref(r);
    r = rpc(&s, "[{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}]");
    EXPECT_INT(error_code(r), -32600);
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"1.0\",\"id\":6,\"method\":\"ping\"}");
    EXPECT_INT(error_code(r), -32600);
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":[1]}");
    EXPECT_INT(error_code(r), -32602);
    json_decref(r);
    /* a 5 MiB message is refused, and the server goes on */
    buf big = BUF_INIT;
    cm_buf_adds(&big,
                "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"memory_search\",\"arguments\":{\"query\":\"");
    while (big.len < (5u << 20))
        cm_buf_adds(&big, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    cm_buf_adds(&big, "\"}}}");
    r = rpc(&s, big.data);
    cm_buf_release(&big);
    EXPECT_INT(error_code(r), -32600);
    EXPECT_CONTAINS(json_string_value(json_object_get(json_object_get(r, "error"), "message")),
                    "too large");
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}");
    EXPECT_INT(json_integer_value(json_object_get(r, "id")), 9);
    json_decref(r);
    /* a method name whose quote would be cut inside a UTF-8 character */
    buf m = BUF_INIT;
    cm_buf_adds(&m, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"a");
    for (int i = 0; i < 60; i++)
        cm_buf_adds(&m, "\xC3\xA9");
    cm_buf_adds(&m, "\"}");
    r = rpc(&s, m.data);
    cm_buf_release(&m);
    EXPECT_INT(error_code(r), -32601);
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"ping\"}");
    EXPECT_INT(json_integer_value(json_object_get(r, "id")), 11);
    json_decref(r);
    EXPECT_INT(proc_stop(&s.p, 0, 5000), 0);
    char *err = proc_stderr(&s.p);
    EXPECT(strstr(err, "locked") == NULL);
    free(err);
}

TEST(mcp_memory_write)
{
    session s;
    start(&s, "--allow-write");
    json_t *r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
    EXPECT_INT(json_array_size(json_object_get(json_object_get(r, "result"), "tools")), 3);
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"memory_write\",\"arguments\":{\"text\":\"Prefers oat milk.\",\"path\":"
                "\"MEMORY.md\"}}}");
    json_t *sc = json_object_get(json_object_get(r, "result"), "structuredContent");
    EXPECT_STR(json_string_value(json_object_get(sc, "path")), "MEMORY.md");
    EXPECT_INT(json_integer_value(json_object_get(sc, "startLine")), 5);
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"memory_write\",\"arguments\":{\"text\":\"Standup moved to 9:30.\"}}}");
    sc = json_object_get(json_object_get(r, "result"), "structuredContent");
    EXPECT_CONTAINS(json_string_value(json_object_get(sc, "path")), "memory/20");
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"memory_write\",\"arguments\":{\"text\":\"x\",\"path\":\"../evil.md\"}}}");
    EXPECT(json_is_true(json_object_get(json_object_get(r, "result"), "isError")));
    json_decref(r);
    EXPECT(eventually_found(&s, "oat milk", true, 5000));
    EXPECT(eventually_found(&s, "Standup", true, 5000));
    EXPECT_INT(proc_stop(&s.p, SIGINT, 5000), 0);
    buf b = BUF_INIT;
    char err[256];
    cm_fs_read_file(path_in(s.ws, "MEMORY.md"), 1 << 20, &b, err, sizeof err);
    EXPECT_STR(b.data, "# Facts\n\n- The dog is called Biscuit.\n\nPrefers oat milk.\n");
    cm_buf_release(&b);
}

TEST(mcp_node_22_or_newer)
{
    /* The Node.js the JavaScript peers run on (the SDK clients, the MCP
     * Inspector, the conformance suite) is the one `env node` finds in PATH,
     * as their `#!/usr/bin/env node` and the tests' argv do: it is 22 or
     * newer (the Inspector 2.12 and the conformance suite fail on Debian 12's
     * 18), and it is the pinned one of scripts/install-node.sh that the
     * Makefile names in CLAWMEM_NODE and puts first in PATH. */
    run_result r = run_cmd(NULL, (const char *const[]){
                                     "env", "node", "-p",
                                     "process.versions.node + ' ' + process.execPath", NULL});
    EXPECT_INT(r.status, 0);
    char *exec_path = strchr(r.out, ' ');
    EXPECT(exec_path != NULL);
    *exec_path++ = '\0';
    exec_path[strcspn(exec_path, "\n")] = '\0';
    if (strtol(r.out, NULL, 10) < 22)
        test_fail(__FILE__, __LINE__,
                  "node %s (%s) is older than 22: run make test (scripts/install-node.sh)",
                  r.out, exec_path);
    const char *want = getenv("CLAWMEM_NODE");
    if (want && *want) {
        char real[4096];
        EXPECT(realpath(want, real) != NULL);
        EXPECT_STR(exec_path, real);
    }
    run_result_release(&r);
}

TEST(mcp_official_sdk_client)
{
    /* The official TypeScript SDK client (tests/mcp, installed by
     * scripts/install-node-deps.sh) connects, lists, calls and validates. */
    char *d = tmp_dir();
    write_file(d, "ws/MEMORY.md", "# Facts\n\n- The dog is called Biscuit.\n");
    const char *bin = getenv("CLAWMEM_BIN") ? getenv("CLAWMEM_BIN") : "build/clawmem";
    const char *argv[] = {
        "timeout",           "120", "node", "tests/mcp/sdk_client.mjs", bin, path_in(d, "ws"),
        path_in(d, "state"), NULL};
    run_result r = run_cmd(NULL, argv);
    if (r.status != 0)
        test_fail(__FILE__, __LINE__, "sdk client (exit %d):\n%s%s", r.status, r.out, r.err);
    EXPECT_CONTAINS(r.out, "sdk checks passed");
    run_result_release(&r);
}

TEST(mcp_last_message_without_newline)
{
    session s;
    start(&s, NULL);
    const char *ping = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
    EXPECT(write(s.p.in, ping, strlen(ping)) == (ssize_t)strlen(ping));
    close(s.p.in); /* end of input right after the message */
    s.p.in = -1;
    char *line = proc_line(&s.p, 5000);
    EXPECT(line != NULL);
    EXPECT_CONTAINS(line, "\"id\":1");
    free(line);
    EXPECT_INT(proc_stop(&s.p, 0, 5000), 0);
}

/* The response to a tools/call of tool with these arguments (JSON text). */
static json_t *call(session *s, const char *tool_name, const char *args)
{
    buf b = BUF_INIT;
    cm_buf_adds(&b,
                "{\"jsonrpc\":\"2.0\",\"id\":20,\"method\":\"tools/call\",\"params\":{\"name\":\"");
    cm_buf_adds(&b, tool_name);
    cm_buf_adds(&b, "\",\"arguments\":");
    cm_buf_adds(&b, args);
    cm_buf_adds(&b, "}}");
    json_t *r = rpc(s, b.data);
    cm_buf_release(&b);
    return r;
}

/* r is exactly the tool error {"content":[{"type":"text","text":msg}],"isError":true}. */
static void expect_tool_error(json_t *r, const char *msg, int line)
{
    json_t *want = json_pack("{s:s, s:i, s:{s:[{s:s, s:s}], s:b}}", "jsonrpc", "2.0", "id", 20,
                             "result", "content", "type", "text", "text", msg, "isError", 1);
    if (!json_equal(r, want)) {
        char *got = r ? json_dumps(r, JSON_COMPACT) : NULL;
        test_fail(__FILE__, line, "want the tool error \"%s\", got %s", msg, got ? got : "nothing");
        free(got);
    }
    json_decref(want);
    json_decref(r);
}

TEST(mcp_bad_arguments_are_tool_errors)
{
    /* SEP-1303: what the model can fix comes back as a tool result with
     * isError and a message naming the argument, the rule and the value. */
    static const struct {
        const char *tool, *args, *msg;
    } cases[] = {
        {"memory_search", "{}",
         "memory_search: query is required: a non-empty string, the words to look for in the "
         "notes."},
        /* an empty query: the library's check, worded as `clawmem search ''` words it */
        {"memory_search", "{\"query\":\"\"}",
         "memory_search: query is empty: give the words to look for (got \"\")"},
        {"memory_search", "{\"query\":\" \\t\"}",
         "memory_search: query is empty: give the words to look for (got \" \\t\")"},
        {"memory_search", "{\"query\":42}",
         "memory_search: query must be a non-empty string, the words to look for in the notes "
         "(got 42)."},
        {"memory_search", "{\"query\":\"x\",\"maxResults\":0}",
         "memory_search: maxResults must be an integer from 1 to 1000, or left out (got 0)."},
        {"memory_search", "{\"query\":\"x\",\"maxResults\":1001}",
         "memory_search: maxResults must be an integer from 1 to 1000, or left out (got 1001)."},
        {"memory_search", "{\"query\":\"x\",\"maxResults\":2.5}",
         "memory_search: maxResults must be an integer from 1 to 1000, or left out (got 2.5)."},
        {"memory_search", "{\"query\":\"x\",\"maxResults\":\"5\"}",
         "memory_search: maxResults must be an integer from 1 to 1000, or left out (got \"5\")."},
        {"memory_search", "{\"query\":\"x\",\"minScore\":-0.5}",
         "memory_search: minScore must be a number from 0 to 1, or left out (got -0.5)."},
        {"memory_search", "{\"query\":\"x\",\"minScore\":1.5}",
         "memory_search: minScore must be a number from 0 to 1, or left out (got 1.5)."},
        {"memory_search", "{\"query\":\"x\",\"minScore\":\"high\"}",
         "memory_search: minScore must be a number from 0 to 1, or left out (got \"high\")."},
        {"memory_search",
         "{\"query\":\"x\",\"maxResults\":"
         "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
         "memory_search: maxResults must be an integer from 1 to 1000, or left out (got "
         "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...)."},
        {"memory_get", "{}",
         "memory_get: path is required: a workspace-relative path such as MEMORY.md or "
         "memory/2026-02-10.md."},
        {"memory_get", "{\"path\":5}",
         "memory_get: path must be a workspace-relative path such as MEMORY.md or "
         "memory/2026-02-10.md (got 5)."},
        {"memory_get", "{\"path\":\"MEMORY.md\",\"from\":0}",
         "memory_get: from must be an integer of at least 1 (the first line to read), or left "
         "out (got 0)."},
        {"memory_get", "{\"path\":\"MEMORY.md\",\"from\":\"3\"}",
         "memory_get: from must be an integer of at least 1 (the first line to read), or left "
         "out (got \"3\")."},
        {"memory_get", "{\"path\":\"MEMORY.md\",\"lines\":-1}",
         "memory_get: lines must be an integer of at least 1 (how many lines), or left out (got "
         "-1)."},
        {"memory_get", "{\"path\":\"MEMORY.md\",\"lines\":1.5}",
         "memory_get: lines must be an integer of at least 1 (how many lines), or left out (got "
         "1.5)."},
        {"memory_write", "{}",
         "memory_write: text is required: a non-empty string, the note in Markdown."},
        {"memory_write", "{\"text\":\"\"}",
         "memory_write: text must be a non-empty string, the note in Markdown (got \"\")."},
        {"memory_write", "{\"text\":\"x\",\"path\":7}",
         "memory_write: path must be a string such as MEMORY.md or memory/YYYY-MM-DD.md, or left "
         "out for today's note (got 7)."},
    };
    session s;
    start(&s, "--allow-write");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect_tool_error(call(&s, cases[i].tool, cases[i].args), cases[i].msg, __LINE__);
    /* in range, or beyond a file's end: not errors */
    json_t *r = call(&s, "memory_get", "{\"path\":\"MEMORY.md\",\"from\":1e20,\"lines\":1e20}");
    EXPECT(json_is_false(json_object_get(json_object_get(r, "result"), "isError")));
    EXPECT_STR(json_string_value(json_object_get(
                   json_object_get(json_object_get(r, "result"), "structuredContent"), "text")),
               "");
    json_decref(r);
    r = call(&s, "memory_search", "{\"query\":\"Biscuit\",\"maxResults\":1000,\"minScore\":0}");
    EXPECT(json_is_false(json_object_get(json_object_get(r, "result"), "isError")));
    json_decref(r);
    /* what the schema declares: query minLength 1; memory_write appends, never destroys */
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
    json_t *tools = json_object_get(json_object_get(r, "result"), "tools");
    EXPECT_INT(json_integer_value(json_object_get(
                   json_object_get(
                       json_object_get(json_object_get(json_array_get(tools, 0), "inputSchema"),
                                       "properties"),
                       "query"),
                   "minLength")),
               1);
    json_t *want = json_pack("{s:b, s:b, s:b, s:b}", "readOnlyHint", 0, "idempotentHint", 0,
                             "openWorldHint", 0, "destructiveHint", 0);
    EXPECT(json_equal(json_object_get(json_array_get(tools, 2), "annotations"), want));
    json_decref(want);
    json_decref(r);
    /* malformed calls and unknown tools stay JSON-RPC errors */
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"memory_forget\",\"arguments\":{}}}");
    want = json_pack("{s:s, s:i, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", 2, "error", "code", -32602,
                     "message", "Unknown tool: memory_forget");
    EXPECT(json_equal(r, want));
    json_decref(want);
    json_decref(r);
    r = rpc(
        &s,
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"arguments\":{}}}");
    EXPECT_INT(error_code(r), -32602);
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"memory_get\",\"arguments\":\"MEMORY.md\"}}");
    EXPECT_INT(error_code(r), -32602);
    json_decref(r);
    EXPECT_INT(proc_stop(&s.p, 0, 5000), 0);
}

#define ENVELOPE(v)                                                                                \
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"" v "\","                            \
    "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"t\",\"version\":\"1\"},"                   \
    "\"io.modelcontextprotocol/clientCapabilities\":{}}"

TEST(mcp_stateless_2026_07_28_beside_initialize)
{
    session s;
    start(&s, NULL);
    /* the first request of the process: a tools/call, no handshake, no discover;
     * resultType and serverInfo, no cache hints */
    json_t *r = rpc(
        &s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"memory_get\",\"arguments\":{\"path\":\"memory/2026-02-10.md\",\"from\":3}," ENVELOPE(
                "2026-07-28") "}}");
    json_t *res = json_object_get(r, "result");
    EXPECT_STR(
        json_string_value(json_object_get(json_object_get(res, "structuredContent"), "text")),
        "Configured VLAN 10 for IoT.\n");
    EXPECT_STR(json_string_value(json_object_get(res, "resultType")), "complete");
    EXPECT(json_object_get(json_object_get(res, "_meta"), "io.modelcontextprotocol/serverInfo"));
    EXPECT(!json_object_get(res, "ttlMs"));
    json_decref(r);
    /* server/discover, with no initialize before it */
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"server/discover\","
                "\"params\":{" ENVELOPE("2026-07-28") "}}");
    res = json_object_get(r, "result");
    json_t *want = json_pack("[s, s, s, s, s]", "2026-07-28", "2025-11-25", "2025-06-18",
                             "2025-03-26", "2024-11-05");
    EXPECT(json_equal(json_object_get(res, "supportedVersions"), want));
    json_decref(want);
    want = json_pack("{s:{s:b}}", "tools", "listChanged", 0);
    EXPECT(json_equal(json_object_get(res, "capabilities"), want));
    json_decref(want);
    EXPECT_STR(json_string_value(json_object_get(res, "resultType")), "complete");
    EXPECT_INT(json_integer_value(json_object_get(res, "ttlMs")), 3600000);
    EXPECT_STR(json_string_value(json_object_get(res, "cacheScope")), "public");
    EXPECT_STR(
        json_string_value(json_object_get(
            json_object_get(json_object_get(res, "_meta"), "io.modelcontextprotocol/serverInfo"),
            "name")),
        "clawmem");
    EXPECT_CONTAINS(json_string_value(json_object_get(res, "instructions")), "memory_search");
    EXPECT_INT(json_object_size(res), 7);
    EXPECT_INT(json_object_size(r), 3);
    json_decref(r);
    /* tools/list: cacheable */
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" ENVELOPE(
                    "2026-07-28") "}}");
    res = json_object_get(r, "result");
    EXPECT_INT(json_array_size(json_object_get(res, "tools")), 2);
    EXPECT_STR(json_string_value(json_object_get(res, "resultType")), "complete");
    EXPECT_INT(json_integer_value(json_object_get(res, "ttlMs")), 3600000);
    EXPECT_STR(json_string_value(json_object_get(res, "cacheScope")), "public");
    EXPECT(json_object_get(json_object_get(res, "_meta"), "io.modelcontextprotocol/serverInfo"));
    json_decref(r);
    /* a bad argument: the same tool error, in the era's result shape */
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"memory_search\",\"arguments\":{\"query\":\"\"}," ENVELOPE("2026-07-28") "}}");
    want = json_pack("{s:s, s:i, s:{s:[{s:s, s:s}], s:b, s:s, s:{s:{s:s, s:s, s:s}}}}", "jsonrpc",
                     "2.0", "id", 3, "result", "content", "type", "text", "text",
                     "memory_search: query is empty: give the words to look for (got \"\")",
                     "isError", 1, "resultType", "complete", "_meta",
                     "io.modelcontextprotocol/serverInfo", "name", "clawmem", "title",
                     "clawmem agent memory", "version", CM_VERSION);
    EXPECT(json_equal(r, want));
    json_decref(want);
    json_decref(r);
    /* an unknown version: UnsupportedProtocolVersion with what we speak */
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\",\"params\":{" ENVELOPE(
                    "2099-01-01") "}}");
    EXPECT_INT(error_code(r), -32022);
    want = json_pack("{s:[s, s, s, s, s], s:s}", "supported", "2026-07-28", "2025-11-25",
                     "2025-06-18", "2025-03-26", "2024-11-05", "requested", "2099-01-01");
    EXPECT(json_equal(json_object_get(json_object_get(r, "error"), "data"), want));
    json_decref(want);
    json_decref(r);
    /* a malformed envelope, and a method the era removed */
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
                "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}");
    EXPECT_INT(error_code(r), -32602);
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\",\"params\":{" ENVELOPE(
                    "2026-07-28") "}}");
    EXPECT_INT(error_code(r), -32601);
    json_decref(r);
    /* the initialize era, in the same process, unchanged */
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":{"
                "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
                "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
    res = json_object_get(r, "result");
    EXPECT_STR(json_string_value(json_object_get(res, "protocolVersion")), "2025-11-25");
    EXPECT(!json_object_get(res, "resultType"));
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/list\"}");
    EXPECT_INT(json_object_size(json_object_get(r, "result")), 1); /* tools only */
    json_decref(r);
    r = call(&s, "memory_search", "{}");
    EXPECT_INT(json_object_size(json_object_get(r, "result")), 2); /* content, isError */
    json_decref(r);
    /* a legacy version named per request is served as that version */
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\",\"params\":{" ENVELOPE(
                    "2025-06-18") "}}");
    EXPECT_INT(json_object_size(json_object_get(r, "result")), 1);
    json_decref(r);
    EXPECT_INT(proc_stop(&s.p, 0, 5000), 0);
}

TEST(mcp_sigterm_with_stdout_full)
{
    /* A client that stops reading: the answers to many requests fill the
     * stdout pipe and the server waits to write; SIGTERM still ends it. */
    session s;
    start(&s, "--no-watch");
    buf b = BUF_INIT;
    for (int i = 0; i < 300; i++) /* ~1.3 MB of answers; ~20 KB of requests */
        cm_buf_adds(&b, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}\n");
    EXPECT(write(s.p.in, b.data, b.len) == (ssize_t)b.len);
    cm_buf_release(&b);
    int cap = fcntl(s.p.out, F_GETPIPE_SZ), queued = 0;
    EXPECT(cap > 0);
    for (int t = 0; t < 10000 && queued < cap / 2; t += 10) { /* watchdog: 10 s */
        if (ioctl(s.p.out, FIONREAD, &queued)) break;
        if (queued < cap / 2) usleep(10000);
    }
    EXPECT(queued >= cap / 2); /* it is writing, and has far more to write than fits */
    EXPECT_INT(proc_stop(&s.p, SIGTERM, 5000), 0); /* -1: had to be killed */
}

TEST(mcp_official_sdk_client_2026_07_28)
{
    /* The SDK 2.x client pinned to 2026-07-28 (server/discover probe, then
     * stateless requests), in auto mode, and in legacy mode. */
    char *d = tmp_dir();
    write_file(d, "ws/MEMORY.md", "# Facts\n\n- The dog is called Biscuit.\n");
    const char *bin = getenv("CLAWMEM_BIN") ? getenv("CLAWMEM_BIN") : "build/clawmem";
    const char *argv[] = {
        "timeout",           "120", "node", "tests/mcp/sdk_modern.mjs", bin, path_in(d, "ws"),
        path_in(d, "state"), NULL};
    run_result r = run_cmd(NULL, argv);
    if (r.status != 0)
        test_fail(__FILE__, __LINE__, "sdk modern client (exit %d):\n%s%s", r.status, r.out, r.err);
    EXPECT_CONTAINS(r.out, "sdk modern checks passed");
    run_result_release(&r);
}

/* One run of the MCP Inspector's CLI (tests/mcp) against `clawmem mcp` in
 * era ("legacy" or "modern"); method args follow. Returns the run. */
static run_result inspector(const char *dir, const char *era, const char *const *method)
{
    const char *bin = getenv("CLAWMEM_BIN") ? getenv("CLAWMEM_BIN") : "build/clawmem";
    const char *argv[40] = {"timeout",
                            "120",
                            "tests/mcp/node_modules/.bin/mcp-inspector",
                            "--cli",
                            "--protocol-era",
                            era,
                            bin,
                            "--workspace",
                            path_in(dir, "ws"),
                            "--state-dir",
                            path_in(dir, "state"),
                            "mcp",
                            "--no-watch"};
    size_t n = 13;
    for (size_t i = 0; method[i] && n < 38; i++)
        argv[n++] = method[i];
    argv[n++] = "--format";
    argv[n++] = "json";
    argv[n] = NULL;
    char home[4200];
    snprintf(home, sizeof home, "HOME=%s", dir); /* the Inspector keeps nothing in ours */
    const char *env[] = {home, NULL};
    return run_cmd(env, argv);
}

TEST(mcp_inspector_cli_both_eras)
{
    char *d = tmp_dir();
    write_file(d, "ws/MEMORY.md", "# Facts\n\n- The dog is called Biscuit.\n");
    const char *idx[] = {"--workspace",       path_in(d, "ws"), "--state-dir",
                         path_in(d, "state"), "index",          NULL};
    run_result r = run_clawmem(NULL, idx);
    EXPECT_INT(r.status, 0);
    run_result_release(&r);
    static const char *const eras[] = {"legacy", "modern"};
    static const char *const list[] = {"--method", "tools/list", NULL};
    static const char *const search_call[] = {
        "--method",   "tools/call",    "--tool-name", "memory_search",
        "--tool-arg", "query=Biscuit", NULL};
    static const char *const bad_call[] = {"--method",   "tools/call", "--tool-name",
                                           "memory_get", "--tool-arg", "path=MEMORY.md",
                                           "--tool-arg", "from=0",     NULL};
    for (int e = 0; e < 2; e++) {
        r = inspector(d, eras[e], list);
        if (r.status != 0)
            test_fail(__FILE__, __LINE__, "inspector %s tools/list (exit %d):\n%s%s", eras[e],
                      r.status, r.out, r.err);
        json_t *j = json_loads(r.out, 0, NULL);
        json_t *tools = json_object_get(json_object_get(j, "result"), "tools");
        EXPECT_INT(json_array_size(tools), 2);
        EXPECT_STR(json_string_value(json_object_get(json_array_get(tools, 1), "name")),
                   "memory_get");
        json_decref(j);
        run_result_release(&r);

        r = inspector(d, eras[e], search_call);
        if (r.status != 0)
            test_fail(__FILE__, __LINE__, "inspector %s tools/call (exit %d):\n%s%s", eras[e],
                      r.status, r.out, r.err);
        j = json_loads(r.out, 0, NULL);
        json_t *res = json_object_get(j, "result");
        EXPECT_STR(
            json_string_value(json_object_get(
                json_array_get(
                    json_object_get(json_object_get(res, "structuredContent"), "results"), 0),
                "path")),
            "MEMORY.md");
        /* the modern era's results carry the server's identity in _meta */
        EXPECT(!json_object_get(res, "_meta") == (e == 0));
        json_decref(j);
        run_result_release(&r);

        r = inspector(d, eras[e], bad_call);
        EXPECT_INT(r.status, 5); /* the Inspector's exit code for isError */
        j = json_loads(r.out, 0, NULL);
        res = json_object_get(j, "result");
        EXPECT(json_is_true(json_object_get(res, "isError")));
        EXPECT_CONTAINS(json_string_value(json_object_get(
                            json_array_get(json_object_get(res, "content"), 0), "text")),
                        "from must be an integer of at least 1");
        json_decref(j);
        run_result_release(&r);
    }
}
