/*
 * mcp.c — the MCP stdio server of mcp.h.
 *
 * Threads: the main thread reads requests, answers them with the "reader"
 * engine (searches see the last committed index state and never wait for a
 * sync), and alone writes to stdout. A second thread owns a "writer" engine
 * and runs cm_engine_watch (or one sync, with sync.watch off). Shutdown on end
 * of input or SIGTERM/SIGINT: the watcher is told through a pipe, a sync in
 * progress stops at the next file, and the process exits 0 — also while a
 * client that stopped reading keeps stdout full (writes wait in poll() beside
 * the signal pipe).
 *
 * Protocol eras: an `initialize` handshake (2025-11-25 back to 2024-11-05) or,
 * statelessly, requests that carry the 2026-07-28 per-request `_meta`
 * envelope (`server/discover`, `tools/list`, `tools/call`; results with
 * `resultType`, the server's identity in `_meta` and cache hints on the
 * cacheable ones). Both can be mixed on one process. Bad tool arguments are
 * tool results with isError (the model can correct them); unknown tools and
 * malformed requests are JSON-RPC errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mcp.h"
/* the functions too easy to misuse are compile errors here too (macros only) */
#include "../src/base/banned.h"

/* Newest first. The modern (stateless) revisions are named in each request's
 * _meta; the legacy ones are negotiated by initialize (a client asking for one
 * of these gets it back). */
static const char *const modern_versions[] = {"2026-07-28"};
static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

enum {
    PARSE_ERROR = -32700,
    INVALID_REQUEST = -32600,
    METHOD_NOT_FOUND = -32601,
    INVALID_PARAMS = -32602,
    INTERNAL_ERROR = -32603,
    UNSUPPORTED_VERSION = -32022
};

/* The 2026-07-28 per-request envelope and result metadata keys. */
#define META_VERSION     "io.modelcontextprotocol/protocolVersion"
#define META_CLIENT_CAPS "io.modelcontextprotocol/clientCapabilities"
#define META_CLIENT_INFO "io.modelcontextprotocol/clientInfo"
#define META_SERVER_INFO "io.modelcontextprotocol/serverInfo"

/* Cache hint for tools/list and server/discover (2026-07-28): both are fixed
 * for the life of the process and carry nothing specific to a user. */
#define LIST_TTL_MS 3600000

static const char instructions[] =
    "Agent memory over Markdown files. Use memory_search before answering about prior work, "
    "decisions, people, preferences or dates, then memory_get for the exact lines.";

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
        while (n && k < n && (p[k] & 0xC0) == 0x80)
            k++;
        if (!n || k < n) {
            *p = 0;
            return;
        }
        p += n;
    }
}

/* Writes n bytes to stdout without ever blocking where SIGTERM/SIGINT could
 * not interrupt it: each write waits in poll() beside the signal pipe, a pipe
 * gets at most PIPE_BUF bytes per write once it has room (which never blocks),
 * a socket is written with MSG_DONTWAIT, and the descriptor's flags are left
 * alone (they are shared with whoever else holds it). -1 when stdout is gone
 * or a signal asked us to stop. */
static int put_out(const char *s, size_t n)
{
    static int kind = -1; /* 0 other, 1 pipe, 2 socket */
    if (kind < 0) {
        struct stat st;
        kind = fstat(1, &st) ? 0 : S_ISFIFO(st.st_mode) ? 1 : S_ISSOCK(st.st_mode) ? 2 : 0;
    }
    size_t off = 0;
    while (off < n) {
        struct pollfd p[2] = {{1, POLLOUT, 0}, {sig_pipe[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (p[1].revents & POLLIN) return -1; /* SIGTERM or SIGINT */
        if (!(p[0].revents & POLLOUT)) {
            if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL)) return -1;
            continue;
        }
        size_t left = n - off;
        ssize_t w;
        if (kind == 2)
            w = send(1, s + off, left, MSG_DONTWAIT | MSG_NOSIGNAL);
        else
            w = write(1, s + off, kind == 1 && left > PIPE_BUF ? PIPE_BUF : left);
        if (w < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (w < 0) return -1;
        off += (size_t)w;
    }
    return 0;
}

static int send_json(json_t *msg)
{
    char *s = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (!s) return -1;
    int rc = put_out(s, strlen(s)) || put_out("\n", 1) ? -1 : 0;
    free(s);
    return rc;
}

static int send_error_data(json_t *id, int code, const char *msg, json_t *data)
{
    char m[512];
    snprintf(m, sizeof m, "%s", msg);
    clip_utf8(m);
    json_t *e = json_pack("{s:i, s:s}", "code", code, "message", m);
    if (e && data) json_object_set(e, "data", data);
    json_decref(data);
    return send_json(
        json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", e));
}

static int send_error(json_t *id, int code, const char *msg)
{
    return send_error_data(id, code, msg, NULL);
}

/* A request being answered: its id and, for a 2026-07-28 request, what its
 * result must carry. */
typedef struct req {
    json_t *id;
    bool modern;    /* stateless 2026-07-28: resultType and serverInfo in every result */
    bool cacheable; /* ... and cache hints (tools/list, server/discover) */
} req;

static json_t *server_info(void)
{
    return json_pack("{s:s, s:s, s:s}", "name", "clawmem", "title", "clawmem agent memory",
                     "version", CM_VERSION);
}

static int send_result(const req *r, json_t *result)
{
    if (!result) /* could not be built (out of memory): still answer */
        return send_error(r->id, INTERNAL_ERROR, "Internal error: the result could not be built");
    if (r->modern) {
        json_object_set_new(result, "resultType", json_string("complete"));
        json_object_set_new(result, "_meta", json_pack("{s:o}", META_SERVER_INFO, server_info()));
        if (r->cacheable) {
            json_object_set_new(result, "ttlMs", json_integer(LIST_TTL_MS));
            json_object_set_new(result, "cacheScope", json_string("public"));
        }
    }
    return send_json(json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", r->id, "result", result));
}

/* ---- tools --------------------------------------------------------------- */

static json_t *tool(const char *name, const char *title, const char *desc, const char *in,
                    const char *out, bool read_only)
{
    json_t *t = json_pack("{s:s, s:s, s:s, s:o, s:o, s:{s:b, s:b, s:b}}", "name", name, "title",
                          title, "description", desc, "inputSchema", json_loads(in, 0, NULL),
                          "outputSchema", json_loads(out, 0, NULL), "annotations", "readOnlyHint",
                          read_only, "idempotentHint", read_only, "openWorldHint", 0);
    /* memory_write only appends: it never changes or removes what is there */
    if (t && !read_only)
        json_object_set_new(json_object_get(t, "annotations"), "destructiveHint", json_false());
    return t;
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

/* A bad argument, as a tool error the model can act on:
 * "memory_search: maxResults must be an integer from 1 to 1000, or left out
 * (got 0)." or, when it is missing, "memory_get: path is required: ...". */
static json_t *arg_error(const char *tool_name, const char *arg, const char *want, json_t *got)
{
    char g[80], msg[512];
    if (!got) {
        snprintf(msg, sizeof msg, "%s: %s is required: %s.", tool_name, arg, want);
        return error_result(msg);
    }
    char *d = json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT);
    size_t n = d ? strlen(d) : 0;
    snprintf(g, sizeof g - 4, "%s", d ? d : "?");
    clip_utf8(g);
    if (strlen(g) < n) memcpy(g + strlen(g), "...", 4);
    free(d);
    snprintf(msg, sizeof msg, "%s: %s must be %s (got %s).", tool_name, arg, want, g);
    return error_result(msg);
}

/* Reads an optional integer argument (an integral JSON number) of at least
 * min: values over max are an error, or, with clamp, read as max. -1 when bad. */
static int int_arg(json_t *args, const char *k, long min, long max, bool clamp, long *out)
{
    json_t *v = json_object_get(args, k);
    if (!v || json_is_null(v)) return 0;
    double d = json_number_value(v);
    if (!json_is_number(v) || d < (double)min) return -1;
    if (d > (double)max) { /* max < 2^53: every double above it is integral */
        if (!clamp) return -1;
        *out = max;
        return 0;
    }
    if (d != (double)(long)d) return -1;
    *out = (long)d;
    return 0;
}

/* A required string argument with no NUL byte in it. */
static const char *str_arg(json_t *args, const char *k)
{
    json_t *v = json_object_get(args, k);
    const char *s = json_string_value(v);
    return s && json_string_length(v) == strlen(s) ? s : NULL;
}

static json_t *search_tool(server *s, json_t *args)
{
    static const char t[] = "memory_search";
    const char *q = str_arg(args, "query");
    long max = 0;
    cm_search_opts o = {0, -1, 0};
    json_t *ms = json_object_get(args, "minScore");
    char err[CM_ERR_SIZE], *payload = NULL;
    /* the schema says minLength 1: an empty query is a bad argument, not "no results" */
    if (!q || !*q)
        return arg_error(t, "query", "a non-empty string, the words to look for in the notes",
                         json_object_get(args, "query"));
    if (int_arg(args, "maxResults", 1, 1000, false, &max))
        return arg_error(t, "maxResults", "an integer from 1 to 1000, or left out",
                         json_object_get(args, "maxResults"));
    if (ms && !json_is_null(ms)) {
        double d = json_number_value(ms);
        if (!json_is_number(ms) || d < 0 || d > 1)
            return arg_error(t, "minScore", "a number from 0 to 1, or left out", ms);
        o.min_score = d;
    }
    o.max_results = (int)max;
    if (cm_memory_search(s->reader, q, &o, &payload, err, sizeof err)) return error_result(err);
    return payload_result(payload);
}

static json_t *get_tool(server *s, json_t *args)
{
    static const char t[] = "memory_get";
    const char *path = str_arg(args, "path");
    long from = 0, lines = 0, offset = 0;
    char err[CM_ERR_SIZE], *payload = NULL;
    if (!path)
        return arg_error(t, "path",
                         "a workspace-relative path such as MEMORY.md or memory/2026-02-10.md",
                         json_object_get(args, "path"));
    if (int_arg(args, "from", 1, 1L << 40, true, &from))
        return arg_error(t, "from",
                         "an integer of at least 1 (the first line to read), or left out",
                         json_object_get(args, "from"));
    if (int_arg(args, "lines", 1, 1L << 40, true, &lines))
        return arg_error(t, "lines", "an integer of at least 1 (how many lines), or left out",
                         json_object_get(args, "lines"));
    if (int_arg(args, "offset", 0, 1L << 40, true, &offset))
        return arg_error(t, "offset",
                         "an integer of at least 0 (bytes into line `from`: a reply's nextOffset), "
                         "or left out",
                         json_object_get(args, "offset"));
    if (cm_memory_get_at(s->reader, path, from, offset, lines, &payload, err, sizeof err))
        return error_result(err);
    return payload_result(payload);
}

static json_t *write_tool(server *s, json_t *args)
{
    static const char t[] = "memory_write";
    const char *text = str_arg(args, "text");
    json_t *p = json_object_get(args, "path");
    char err[CM_ERR_SIZE], *payload = NULL;
    if (!text || !*text)
        return arg_error(t, "text", "a non-empty string, the note in Markdown",
                         json_object_get(args, "text"));
    if (p && !json_is_null(p) && !str_arg(args, "path"))
        return arg_error(t, "path",
                         "a string such as MEMORY.md or memory/YYYY-MM-DD.md, or left out for "
                         "today's note",
                         p);
    if (cm_memory_write(s->reader, json_string_value(p), text, 0, &payload, err, sizeof err))
        return error_result(err);
    return payload_result(payload);
}

/* tools/call: an unknown tool or a call that is not a CallToolRequest is a
 * JSON-RPC error (-32602); anything wrong with the arguments is a tool result
 * with isError, which the model sees and can correct (SEP-1303). */
static int call_tool(server *s, const req *r, json_t *params)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    json_t *args = json_object_get(params, "arguments");
    if (!name)
        return send_error(r->id, INVALID_PARAMS, "Invalid params: tools/call needs a tool name");
    if (args && !json_is_object(args) && !json_is_null(args))
        return send_error(r->id, INVALID_PARAMS,
                          "Invalid params: tools/call arguments must be an object");
    if (!strcmp(name, "memory_search")) return send_result(r, search_tool(s, args));
    if (!strcmp(name, "memory_get")) return send_result(r, get_tool(s, args));
    if (!strcmp(name, "memory_write") && s->can_write) return send_result(r, write_tool(s, args));
    char msg[256];
    snprintf(msg, sizeof msg, "Unknown tool: %.100s", name);
    return send_error(r->id, INVALID_PARAMS, msg);
}

static json_t *capabilities(void)
{
    return json_pack("{s:{s:b}}", "tools", "listChanged", 0);
}

static int initialize(const req *r, json_t *params)
{
    const char *want = json_string_value(json_object_get(params, "protocolVersion"));
    const char *v = versions[0];
    for (size_t i = 0; want && i < sizeof versions / sizeof *versions; i++)
        if (!strcmp(want, versions[i])) v = versions[i];
    return send_result(r, json_pack("{s:s, s:o, s:o, s:s}", "protocolVersion", v, "capabilities",
                                    capabilities(), "serverInfo", server_info(), "instructions",
                                    instructions));
}

static bool legacy_version(const char *v)
{
    for (size_t i = 0; v && i < sizeof versions / sizeof *versions; i++)
        if (!strcmp(v, versions[i])) return true;
    return false;
}

/* Every version this server speaks, newest first (discover and -32022). */
static json_t *all_versions(void)
{
    json_t *a = json_array();
    for (size_t i = 0; i < sizeof modern_versions / sizeof *modern_versions; i++)
        json_array_append_new(a, json_string(modern_versions[i]));
    for (size_t i = 0; i < sizeof versions / sizeof *versions; i++)
        json_array_append_new(a, json_string(versions[i]));
    return a;
}

static int discover(const req *r)
{
    req c = *r;
    c.modern = c.cacheable = true;
    return send_result(&c, json_pack("{s:o, s:o, s:s}", "supportedVersions", all_versions(),
                                     "capabilities", capabilities(), "instructions", instructions));
}

/* A request carrying the 2026-07-28 envelope (meta names a protocol version
 * that is not a legacy one): served on its own, with no initialize before it;
 * a version we do not know is UnsupportedProtocolVersion with our list. */
static int handle_modern(server *s, json_t *id, const char *method, json_t *params, json_t *meta)
{
    req r = {id, true, false};
    json_t *pv = json_object_get(meta, META_VERSION);
    const char *v = json_string_value(pv);
    bool known = false;
    if (!v)
        return send_error(id, INVALID_PARAMS,
                          "Invalid params: _meta." META_VERSION " must be a string");
    for (size_t i = 0; i < sizeof modern_versions / sizeof *modern_versions; i++)
        known = known || !strcmp(v, modern_versions[i]);
    if (!known) {
        char m[256];
        snprintf(m, sizeof m, "Unsupported protocol version: %.60s", v);
        clip_utf8(m);
        return send_error_data(
            id, UNSUPPORTED_VERSION, m,
            json_pack("{s:o, s:O}", "supported", all_versions(), "requested", pv));
    }
    if (!json_is_object(json_object_get(meta, META_CLIENT_CAPS)))
        return send_error(id, INVALID_PARAMS,
                          "Invalid params: _meta." META_CLIENT_CAPS " must be an object");
    json_t *ci = json_object_get(meta, META_CLIENT_INFO);
    if (ci && !json_is_object(ci))
        return send_error(id, INVALID_PARAMS,
                          "Invalid params: _meta." META_CLIENT_INFO " must be an object");
    if (!strcmp(method, "server/discover")) return discover(&r);
    if (!strcmp(method, "tools/list")) {
        r.cacheable = true;
        return send_result(&r, json_pack("{s:O}", "tools", s->tools));
    }
    if (!strcmp(method, "tools/call")) return call_tool(s, &r, params);
    char m[256];
    snprintf(m, sizeof m, "Method not found: %.100s (protocol version %s)", method, v);
    return send_error(id, METHOD_NOT_FOUND, m);
}

/* Handles one message (a line). Returns -1 when stdout is gone (or a signal
 * interrupted the answer). */
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
    } else if (!json_is_object(msg) || !json_is_string(json_object_get(msg, "jsonrpc")) ||
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
        json_t *meta = json_object_get(params, "_meta");
        req r = {id, false, false};
        if (params && !json_is_object(params)) {
            rc = send_error(id, INVALID_PARAMS, "Invalid params: params must be an object");
        } else if (json_is_object(meta) && json_object_get(meta, META_VERSION) &&
                   !legacy_version(json_string_value(json_object_get(meta, META_VERSION)))) {
            /* a legacy version named in _meta is served as that version */
            rc = handle_modern(s, id, method, params, meta);
        } else if (!strcmp(method, "initialize")) {
            rc = initialize(&r, params);
        } else if (!strcmp(method, "ping")) {
            rc = send_result(&r, json_object());
        } else if (!strcmp(method, "tools/list")) {
            rc = send_result(&r, json_pack("{s:O}", "tools", s->tools));
        } else if (!strcmp(method, "tools/call")) {
            rc = call_tool(s, &r, params);
        } else if (!strcmp(method, "server/discover")) {
            rc = discover(&r); /* without the envelope: still tell what we speak */
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
    return __atomic_load_n(&((const syncer *)ctx)->stop, __ATOMIC_ACQUIRE);
}

static void *sync_main(void *arg)
{
    syncer *y = arg;
    char err[CM_ERR_SIZE];
    cm_engine *e = NULL;
    if (cm_engine_open(&y->opt, &e, err, sizeof err)) {
        if (y->opt.log) y->opt.log(y->opt.log_ctx, CM_LOG_ERROR, err);
        return NULL;
    }
    if (y->mo.watch) {
        cm_watch_opts wo = {&y->stop, y->wake[0], y->mo.debounce_ms, log_sync, y, 0};
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
    char err[CM_ERR_SIZE];
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
    size_t ndefs;
    const cm_tool_def *defs = cm_tool_defs(&ndefs);
    s.tools = json_array();
    for (size_t i = 0; i < ndefs; i++)
        if (defs[i].read_only || s.can_write)
            json_array_append_new(s.tools, tool(defs[i].name, defs[i].title, defs[i].description,
                                                defs[i].input_schema, defs[i].output_schema,
                                                defs[i].read_only));

    if (y.mo.watch < 0) { /* sync.watch decides */
        char *js = NULL;
        y.mo.watch = 1;
        if (cm_engine_status(s.reader, 0, &js, err, sizeof err) == CM_OK) {
            json_t *st = json_loads(js, 0, NULL);
            if (json_is_false(json_object_get(json_object_get(st, "sync"), "watch")))
                y.mo.watch = 0;
            json_decref(st);
        }
        cm_free(js);
    }
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) || pipe2(y.wake, O_CLOEXEC)) {
        status = 1;
        goto out;
    }
    /* No SA_RESTART: a signal interrupts whatever the main thread waits in;
     * the sync thread blocks both, so they are delivered to the main thread. */
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    thread = pthread_create(&tid, NULL, sync_main, &y) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);

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
        if (p[1].revents & POLLIN) break;   /* SIGTERM or SIGINT */
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
            if (!skipping &&
                send_error(NULL, INVALID_REQUEST, "Invalid Request: message too large") < 0)
                goto out;
            skipping = true;
            len = 0;
        }
    }
out:
    __atomic_store_n(&y.stop, 1, __ATOMIC_RELEASE);
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
