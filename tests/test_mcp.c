/*
 * test_mcp.c — `clawmem mcp` driven over its pipes with raw JSON-RPC:
 * initialize and version negotiation, tools/list, the three tools, JSON-RPC
 * errors (parse, unknown method, invalid params, oversized message, batch),
 * freshness through the watcher, and shutdown on end of input and SIGTERM.
 */
#include <jansson.h>
#include <signal.h>
#include <unistd.h>

#include "../src/base/fs.h"
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
    const char *args[] = {"--workspace", s->ws, "--state-dir", s->state, "--config",
                          path_in(s->dir, "qc.json"), "mcp", "--debounce", "50", extra, NULL};
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
    return json_array_size(
        json_object_get(json_object_get(json_object_get(r, "result"), "structuredContent"), "results"));
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
    EXPECT_STR(json_string_value(json_object_get(json_array_get(tools, 0), "name")), "memory_search");
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
    json_t *hit = json_array_get(json_object_get(json_object_get(res, "structuredContent"), "results"), 0);
    EXPECT_STR(json_string_value(json_object_get(hit, "path")), "MEMORY.md");
    EXPECT(json_is_false(json_object_get(res, "isError")));
    /* the text content is the same payload */
    const char *text = json_string_value(json_object_get(json_array_get(json_object_get(res, "content"), 0), "text"));
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
                "\"memory_search\",\"arguments\":{}}}");
    EXPECT_INT(error_code(r), -32602);
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"memory_search\",\"arguments\":{\"query\":\"x\",\"maxResults\":0}}}");
    EXPECT_INT(error_code(r), -32602);
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
    buf_adds(&big, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":"
                   "\"memory_search\",\"arguments\":{\"query\":\"");
    while (big.len < (5u << 20)) buf_adds(&big, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    buf_adds(&big, "\"}}}");
    r = rpc(&s, big.data);
    buf_release(&big);
    EXPECT_INT(error_code(r), -32600);
    EXPECT_CONTAINS(json_string_value(json_object_get(json_object_get(r, "error"), "message")),
                    "too large");
    json_decref(r);
    r = rpc(&s, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}");
    EXPECT_INT(json_integer_value(json_object_get(r, "id")), 9);
    json_decref(r);
    /* a method name whose quote would be cut inside a UTF-8 character */
    buf m = BUF_INIT;
    buf_adds(&m, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"a");
    for (int i = 0; i < 60; i++) buf_adds(&m, "\xC3\xA9");
    buf_adds(&m, "\"}");
    r = rpc(&s, m.data);
    buf_release(&m);
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
    fs_read_file(path_in(s.ws, "MEMORY.md"), 1 << 20, &b, err, sizeof err);
    EXPECT_STR(b.data, "# Facts\n\n- The dog is called Biscuit.\n\nPrefers oat milk.\n");
    buf_release(&b);
}

TEST(mcp_official_sdk_client)
{
    /* The official TypeScript SDK client (tests/mcp, installed by
     * scripts/install-node-deps.sh) connects, lists, calls and validates. */
    char *d = tmp_dir();
    write_file(d, "ws/MEMORY.md", "# Facts\n\n- The dog is called Biscuit.\n");
    const char *bin = getenv("CLAWMEM_BIN") ? getenv("CLAWMEM_BIN") : "build/clawmem";
    const char *argv[] = {"node", "tests/mcp/sdk_client.mjs", bin, path_in(d, "ws"),
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
