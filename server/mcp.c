/*
 * mcp.c — the MCP stdio server of mcp.h.
 *
 * Threads: the main thread reads requests, answers them with the "reader"
 * engine (searches see the last committed index state and never wait for a
 * sync), and alone writes to stdout. A second thread owns a "writer" engine
 * and runs cm_engine_watch (or one sync, with sync.watch off). Shutdown on end
 * of input or SIGTERM/SIGINT: the watcher is told through a pipe, a sync in
 * progress stops at the next file, and the process exits 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp.h"

/* Newest first; a client asking for one of these gets it back. */
static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

enum { PARSE_ERROR = -32700, INVALID_REQUEST = -32600, METHOD_NOT_FOUND = -32601,
       INVALID_PARAMS = -32602, INTERNAL_ERROR = -32603 };

static const char search_desc[] =
    "Recall from the agent's long-term memory. Call it before answering anything that depends "
    "on earlier work, decisions, dates, people, preferences or to-dos. It searches MEMORY.md "
    "and the daily notes in memory/ (plus configured extra paths) and returns the best-matching "
    "snippets with their file path and line range; then use memory_get to read only the lines "
    "you need. Empty results mean nothing relevant was written down.";
static const char get_desc[] =
    "Read a memory file, or some of its lines, typically after memory_search pointed at it: "
    "MEMORY.md, memory.md, memory/YYYY-MM-DD.md or another .md file under memory/ or the "
    "configured extra paths (workspace-relative). `from` is the first line (1-based), `lines` "
    "how many. A file that does not exist yet, such as today's note before anything was "
    "written, returns empty text.";
static const char write_desc[] =
    "Write something down so that it outlives this session; memory is only what is on disk. "
    "Decisions, preferences and durable facts go to MEMORY.md (path \"MEMORY.md\"); day-to-day "
    "notes and running context go to today's daily note memory/YYYY-MM-DD.md (the default). "
    "When the user says \"remember this\", write it. Appends a paragraph, never rewrites what "
    "is there.";

static const char search_in[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"query\":{\"type\":\"string\",\"minLength\":1,\"description\":\"What to recall, in "
    "words likely to appear in the notes\"},"
    "\"maxResults\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000},"
    "\"minScore\":{\"type\":\"number\",\"minimum\":0,\"maximum\":1}},"
    "\"required\":[\"query\"]}";
static const char search_out[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"results\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\"},\"startLine\":{\"type\":\"integer\"},"
    "\"endLine\":{\"type\":\"integer\"},\"score\":{\"type\":\"number\"},"
    "\"snippet\":{\"type\":\"string\"},\"source\":{\"type\":\"string\"},"
    "\"citation\":{\"type\":\"string\"}},"
    "\"required\":[\"path\",\"startLine\",\"endLine\",\"score\",\"snippet\",\"source\"]}},"
    "\"provider\":{\"type\":\"string\"},\"model\":{\"type\":\"string\"},"
    "\"fallback\":{\"type\":\"string\"},\"citations\":{\"type\":\"string\"},"
    "\"disabled\":{\"type\":\"boolean\"},\"error\":{\"type\":\"string\"}},"
    "\"required\":[\"results\"]}";
static const char get_in[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"path\":{\"type\":\"string\",\"description\":\"Workspace-relative, e.g. MEMORY.md or "
    "memory/2026-02-10.md\"},"
    "\"from\":{\"type\":\"integer\",\"minimum\":1},\"lines\":{\"type\":\"integer\",\"minimum\":1},"
    "\"offset\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"Bytes into line `from` "
    "to start at: the nextOffset of a reply cut inside a long line\"}},"
    "\"required\":[\"path\"]}";
static const char get_out[] =
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
    "\"text\":{\"type\":\"string\"},\"truncated\":{\"type\":\"boolean\"},"
    "\"nextFrom\":{\"type\":\"integer\"},\"nextOffset\":{\"type\":\"integer\"}},"
    "\"required\":[\"path\",\"text\"]}";
static const char write_in[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"text\":{\"type\":\"string\",\"minLength\":1,\"description\":\"The note, in Markdown\"},"
    "\"path\":{\"type\":\"string\",\"description\":\"MEMORY.md for durable facts; default: "
    "today's memory/YYYY-MM-DD.md\"}},\"required\":[\"text\"]}";
static const char write_out[] =
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
    "\"startLine\":{\"type\":\"integer\"},\"endLine\":{\"type\":\"integer\"},"
    "\"bytes\":{\"type\":\"integer\"}},\"required\":[\"path\",\"startLine\",\"endLine\"]}";

typedef struct server {
    cm_engine *reader;
    bool can_write;
    json_t *tools; /* the tools/list result */
} server;

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    ssize_t w = write(sig_pipe[1], "x", 1);
    (void)w;
    errno = saved;
}

/* ---- output -------------------------------------------------------------- */

/* Cuts s at its first byte that does not start or continue a well-formed
 * UTF-8 character, so that a message cut to a byte length by snprintf (or
 * quoting the client's bytes) is still a JSON string. */
static void clip_utf8(char *s)
{
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 1 : (*p >> 5) == 6 ? 2 : (*p >> 4) == 14 ? 3 : (*p >> 3) == 30 ? 4 : 0;
        int k = 1;
        while (n && k < n && (p[k] & 0xC0) == 0x80) k++;
        if (!n || k < n) {
            *p = 0;
            return;
        }
        p += n;
    }
}

static int send_json(json_t *msg)
{
    char *s = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (!s) return -1;
    size_t n = strlen(s), off = 0;
    int rc = 0;
    while (off < n) {
        ssize_t w = write(1, s + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            rc = -1;
            break;
        }
        off += (size_t)w;
    }
    if (rc == 0 && write(1, "\n", 1) != 1) rc = -1;
    free(s);
    return rc;
}

static int send_error(json_t *id, int code, const char *msg)
{
    char m[512];
    snprintf(m, sizeof m, "%s", msg);
    clip_utf8(m);
    return send_json(json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
                               id ? id : json_null(), "error", "code", code, "message", m));
}

static int send_result(json_t *id, json_t *result)
{
    if (!result) /* could not be built (out of memory): still answer */
        return send_error(id, INTERNAL_ERROR, "Internal error: the result could not be built");
    return send_json(json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

/* ---- tools --------------------------------------------------------------- */

static json_t *tool(const char *name, const char *title, const char *desc, const char *in,
                    const char *out, bool read_only)
{
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:{s:b, s:b}}", "name", name, "title", title,
                     "description", desc, "inputSchema", json_loads(in, 0, NULL), "outputSchema",
                     json_loads(out, 0, NULL), "annotations", "readOnlyHint", read_only,
                     "idempotentHint", read_only);
}

/* A tool result whose structuredContent is the engine's payload. */
static json_t *payload_result(char *payload)
{
    json_t *obj = json_loads(payload, 0, NULL);
    json_t *r = json_pack("{s:[{s:s, s:s}], s:o, s:b}", "content", "type", "text", "text", payload,
                          "structuredContent", obj ? obj : json_object(), "isError", 0);
    cm_free(payload);
    return r;
}

static json_t *error_result(const char *msg)
{
    char m[1024];
    snprintf(m, sizeof m, "%s", msg);
    clip_utf8(m);
    return json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", m, "isError", 1);
}

/* Reads an optional integer argument in [min, max]; -1 when bad. */
static int int_arg(json_t *args, const char *k, long min, long max, long *out)
{
    json_t *v = json_object_get(args, k);
    if (!v || json_is_null(v)) return 0;
    double d = json_number_value(v);
    if (!json_is_number(v) || d != (double)(long)d || d < (double)min || d > (double)max) return -1;
    *out = (long)d;
    return 0;
}

static int call_tool(server *s, json_t *id, json_t *params)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    json_t *args = json_object_get(params, "arguments");
    char err[1024], *payload = NULL;
    if (!name) return send_error(id, INVALID_PARAMS, "tools/call needs a tool name");
    if (args && !json_is_object(args))
        return send_error(id, INVALID_PARAMS, "tools/call: arguments must be an object");
    if (!strcmp(name, "memory_search")) {
        const char *q = json_string_value(json_object_get(args, "query"));
        long max = 0;
        cm_search_opts o = {0, -1, 0};
        json_t *ms = json_object_get(args, "minScore");
        if (!q) return send_error(id, INVALID_PARAMS, "memory_search: query (a string) is required");
        if (int_arg(args, "maxResults", 1, 1000, &max))
            return send_error(id, INVALID_PARAMS, "memory_search: maxResults must be an integer 1..1000");
        if (ms && !json_is_null(ms)) {
            double d = json_number_value(ms);
            if (!json_is_number(ms) || d < 0 || d > 1)
                return send_error(id, INVALID_PARAMS, "memory_search: minScore must be 0..1");
            o.min_score = d;
        }
        o.max_results = (int)max;
        if (cm_memory_search(s->reader, q, &o, &payload, err, sizeof err))
            return send_result(id, error_result(err));
        return send_result(id, payload_result(payload));
    }
    if (!strcmp(name, "memory_get")) {
        const char *path = json_string_value(json_object_get(args, "path"));
        long from = 0, lines = 0, offset = 0;
        if (!path) return send_error(id, INVALID_PARAMS, "memory_get: path (a string) is required");
        if (int_arg(args, "from", 1, 1L << 40, &from) || int_arg(args, "lines", 1, 1L << 40, &lines))
            return send_error(id, INVALID_PARAMS, "memory_get: from and lines must be positive integers");
        if (int_arg(args, "offset", 0, 1L << 40, &offset))
            return send_error(id, INVALID_PARAMS, "memory_get: offset must be an integer >= 0");
        if (json_string_length(json_object_get(args, "path")) != strlen(path))
            return send_result(id, error_result("memory_get: path contains a NUL byte"));
        if (cm_memory_get_at(s->reader, path, from, offset, lines, &payload, err, sizeof err))
            return send_result(id, error_result(err));
        return send_result(id, payload_result(payload));
    }
    if (!strcmp(name, "memory_write") && s->can_write) {
        const char *text = json_string_value(json_object_get(args, "text"));
        json_t *p = json_object_get(args, "path");
        if (!text) return send_error(id, INVALID_PARAMS, "memory_write: text (a string) is required");
        if (p && !json_is_null(p) && !json_is_string(p))
            return send_error(id, INVALID_PARAMS, "memory_write: path must be a string");
        if (json_string_length(json_object_get(args, "text")) != strlen(text) ||
            (p && json_is_string(p) && json_string_length(p) != strlen(json_string_value(p))))
            return send_result(id, error_result("memory_write: NUL bytes are not allowed"));
        if (cm_memory_write(s->reader, json_string_value(p), text, 0, &payload, err, sizeof err))
            return send_result(id, error_result(err));
        return send_result(id, payload_result(payload));
    }
    char msg[256];
    snprintf(msg, sizeof msg, "unknown tool: %.100s", name);
    return send_error(id, INVALID_PARAMS, msg);
}

static int initialize(json_t *id, json_t *params)
{
    const char *want = json_string_value(json_object_get(params, "protocolVersion"));
    const char *v = versions[0];
    for (size_t i = 0; want && i < sizeof versions / sizeof *versions; i++)
        if (!strcmp(want, versions[i])) v = versions[i];
    return send_result(
        id, json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", v,
                      "capabilities", "tools", "listChanged", 0, "serverInfo", "name", "clawmem",
                      "title", "clawmem agent memory", "version", CM_VERSION, "instructions",
                      "Agent memory over Markdown files. Use memory_search before answering "
                      "about prior work, decisions, people, preferences or dates, then "
                      "memory_get for the exact lines."));
}

/* Handles one message (a line). Returns -1 when stdout is gone. */
static int handle(server *s, const char *line, size_t n)
{
    json_error_t je;
    json_t *msg = json_loadb(line, n, JSON_ALLOW_NUL, &je);
    if (!msg) {
        char m[256];
        snprintf(m, sizeof m, "Parse error: %s", je.text);
        return send_error(NULL, PARSE_ERROR, m);
    }
    int rc = 0;
    json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (json_is_array(msg)) {
        rc = send_error(NULL, INVALID_REQUEST, "Invalid Request: batches are not supported");
    } else if (!json_is_object(msg) ||
               !json_is_string(json_object_get(msg, "jsonrpc")) ||
               strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") != 0 ||
               (id && !json_is_string(id) && !json_is_integer(id))) {
        rc = send_error(json_is_string(id) || json_is_integer(id) ? id : NULL, INVALID_REQUEST,
                        "Invalid Request: expected a JSON-RPC 2.0 object");
    } else if (!method) {
        /* a response from the client (we send no requests) or junk */
        if (!json_object_get(msg, "result") && !json_object_get(msg, "error"))
            rc = send_error(id, INVALID_REQUEST, "Invalid Request: no method");
    } else if (!id) {
        /* notifications (initialized, cancelled, ...) need no answer */
    } else {
        json_t *params = json_object_get(msg, "params");
        if (params && !json_is_object(params)) {
            rc = send_error(id, INVALID_PARAMS, "Invalid params: params must be an object");
        } else if (!strcmp(method, "initialize")) {
            rc = initialize(id, params);
        } else if (!strcmp(method, "ping")) {
            rc = send_result(id, json_object());
        } else if (!strcmp(method, "tools/list")) {
            rc = send_result(id, json_pack("{s:O}", "tools", s->tools));
        } else if (!strcmp(method, "tools/call")) {
            rc = call_tool(s, id, params);
        } else {
            char m[256];
            snprintf(m, sizeof m, "Method not found: %.100s", method);
            rc = send_error(id, METHOD_NOT_FOUND, m);
        }
    }
    json_decref(msg);
    return rc;
}

/* ---- background sync ------------------------------------------------------ */

typedef struct syncer {
    cm_options opt;
    mcp_opts mo;
    volatile int stop;
    int wake[2];
} syncer;

static void log_sync(void *ctx, cm_rc rc, const cm_sync_stats *st, const char *err)
{
    const syncer *y = ctx;
    if (!y->opt.log) return;
    char msg[1200];
    if (rc)
        snprintf(msg, sizeof msg, "sync failed: %s", err);
    else
        snprintf(msg, sizeof msg, "synced %zu files: %zu indexed, %zu removed%s", st->files_seen,
                 st->files_indexed, st->files_removed, st->rebuilt ? " (rebuilt)" : "");
    y->opt.log(y->opt.log_ctx, rc ? CM_LOG_WARN : CM_LOG_INFO, msg);
}

static int stop_sync(void *ctx, const cm_progress *p)
{
    (void)p;
    return ((const syncer *)ctx)->stop;
}

static void *sync_main(void *arg)
{
    syncer *y = arg;
    char err[1024];
    cm_engine *e = NULL;
    if (cm_engine_open(&y->opt, &e, err, sizeof err)) {
        if (y->opt.log) y->opt.log(y->opt.log_ctx, CM_LOG_ERROR, err);
        return NULL;
    }
    if (y->mo.watch) {
        cm_watch_opts wo = {&y->stop, y->wake[0], y->mo.debounce_ms, log_sync, y};
        if (cm_engine_watch(e, &wo, err, sizeof err) && y->opt.log)
            y->opt.log(y->opt.log_ctx, CM_LOG_ERROR, err);
    } else {
        cm_sync_stats st;
        cm_rc rc = cm_engine_sync(e, 0, stop_sync, y, &st, err, sizeof err);
        if (rc != CM_ECANCELED) log_sync(y, rc, &st, err);
    }
    cm_engine_free(e);
    return NULL;
}

/* ---- main loop ------------------------------------------------------------ */

int mcp_serve(const cm_options *opt, const mcp_opts *mo)
{
    int status = 0;
    char err[1024];
    server s = {0};
    syncer y = {*opt, *mo, 0, {-1, -1}};
    pthread_t tid;
    bool thread = false;
    char *in = NULL;
    if (cm_engine_open(opt, &s.reader, err, sizeof err)) {
        if (opt->log) opt->log(opt->log_ctx, CM_LOG_ERROR, err);
        return 1;
    }
    /* memory_write is listed only when it is enabled. */
    s.can_write = cm_engine_writable(s.reader) != 0;
    s.tools = json_pack("[o, o]",
                        tool("memory_search", "Search memory", search_desc, search_in, search_out,
                             true),
                        tool("memory_get", "Read memory", get_desc, get_in, get_out, true));
    if (s.can_write)
        json_array_append_new(s.tools, tool("memory_write", "Write memory", write_desc, write_in,
                                            write_out, false));

    if (y.mo.watch < 0) { /* sync.watch decides */
        char *js = NULL;
        y.mo.watch = 1;
        if (cm_engine_status(s.reader, 0, &js, err, sizeof err) == CM_OK) {
            json_t *st = json_loads(js, 0, NULL);
            if (json_is_false(json_object_get(json_object_get(st, "sync"), "watch"))) y.mo.watch = 0;
            json_decref(st);
        }
        cm_free(js);
    }
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) || pipe2(y.wake, O_CLOEXEC)) {
        status = 1;
        goto out;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    thread = pthread_create(&tid, NULL, sync_main, &y) == 0;

    size_t cap = 64 * 1024, len = 0;
    bool skipping = false; /* discarding the rest of an oversized message */
    in = malloc(cap);
    if (!in) {
        status = 1;
        goto out;
    }
    for (;;) {
        struct pollfd p[2] = {{0, POLLIN, 0}, {sig_pipe[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (p[1].revents & POLLIN) break; /* SIGTERM or SIGINT */
        if (p[0].revents & POLLNVAL) break; /* no standard input at all */
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (len == cap) {
            size_t ncap = cap * 2 > MCP_MAX_MESSAGE + 1 ? MCP_MAX_MESSAGE + 1 : cap * 2;
            char *nb = ncap > cap ? realloc(in, ncap) : NULL;
            if (nb) {
                in = nb;
                cap = ncap;
            }
        }
        ssize_t r = read(0, in + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { /* end of input: a last message may lack its newline */
            if (len && !skipping) handle(&s, in, len);
            break;
        }
        len += (size_t)r;
        size_t start = 0;
        for (;;) {
            char *nl = memchr(in + start, '\n', len - start);
            if (!nl) break;
            size_t n = (size_t)(nl - (in + start));
            if (skipping) {
                skipping = false;
            } else if (n > 0 && !(n == 1 && in[start] == '\r')) {
                if (handle(&s, in + start, n) < 0) goto out;
            }
            start += n + 1;
        }
        memmove(in, in + start, len - start);
        len -= start;
        if (len >= MCP_MAX_MESSAGE) { /* too long and still no newline */
            if (!skipping && send_error(NULL, INVALID_REQUEST, "Invalid Request: message too large") < 0)
                goto out;
            skipping = true;
            len = 0;
        }
    }
out:
    y.stop = 1;
    if (y.wake[1] >= 0) {
        ssize_t w = write(y.wake[1], "x", 1);
        (void)w;
    }
    if (thread) pthread_join(tid, NULL);
    free(in);
    json_decref(s.tools);
    cm_engine_free(s.reader);
    for (int i = 0; i < 2; i++) {
        if (sig_pipe[i] >= 0) close(sig_pipe[i]);
        if (y.wake[i] >= 0) close(y.wake[i]);
        sig_pipe[i] = -1;
    }
    return status;
}
