/*
 * mcp_rpc.c — the JSON-RPC dispatcher of mcp_rpc.h: initialize, ping,
 * tools/list, tools/call and server/discover, in both protocol eras (see
 * mcp_rpc.h). Bad tool arguments are tool results with isError (the model can
 * correct them); unknown tools and malformed requests are JSON-RPC errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_rpc.h"
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
#define META_VERSION     MCP_META_VERSION
#define META_CLIENT_CAPS "io.modelcontextprotocol/clientCapabilities"
#define META_CLIENT_INFO "io.modelcontextprotocol/clientInfo"
#define META_SERVER_INFO "io.modelcontextprotocol/serverInfo"

/* Cache hint for tools/list and server/discover (2026-07-28): both are fixed
 * for the life of the process and carry nothing specific to a user. */
#define LIST_TTL_MS 3600000

static const char instructions[] =
    "Agent memory over Markdown files. Use memory_search before answering about prior work, "
    "decisions, people, preferences or dates, then memory_get for the exact lines.";

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

static json_t *rpc_error_data(json_t *id, int code, const char *msg, json_t *data)
{
    char m[512];
    snprintf(m, sizeof m, "%s", msg);
    clip_utf8(m);
    json_t *e = json_pack("{s:i, s:s}", "code", code, "message", m);
    if (e && data) json_object_set(e, "data", data);
    json_decref(data);
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", e);
}

json_t *mcp_rpc_error(json_t *id, int code, const char *msg)
{
    return rpc_error_data(id, code, msg, NULL);
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

static json_t *rpc_result(const req *r, json_t *result)
{
    if (!result) /* could not be built (out of memory): still answer */
        return mcp_rpc_error(r->id, INTERNAL_ERROR,
                             "Internal error: the result could not be built");
    if (r->modern) {
        json_object_set_new(result, "resultType", json_string("complete"));
        json_object_set_new(result, "_meta", json_pack("{s:o}", META_SERVER_INFO, server_info()));
        if (r->cacheable) {
            json_object_set_new(result, "ttlMs", json_integer(LIST_TTL_MS));
            json_object_set_new(result, "cacheScope", json_string("public"));
        }
    }
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", r->id, "result", result);
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

/* payload with "status": status added (payload is freed then), or payload
 * itself when that cannot be done. The result is freed with cm_free (json_dumps
 * allocates with malloc, as the library does). */
static char *with_status(char *payload, const char *status)
{
    json_t *o = json_loads(payload, 0, NULL);
    char *s = NULL;
    if (json_is_object(o) && !json_object_set_new(o, "status", json_string(status)))
        s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!s) return payload;
    cm_free(payload);
    return s;
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

static json_t *search_tool(const mcp_rpc *s, json_t *args)
{
    static const char t[] = "memory_search";
    const char *q = str_arg(args, "query");
    long max = 0;
    cm_search_opts o = {0, -1, 0};
    json_t *ms = json_object_get(args, "minScore");
    char err[CM_ERR_SIZE], *payload = NULL;
    /* not a string: the JSON's fault; an empty one the library refuses (below) */
    if (!q)
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
    /* "sessionKey" (not in the model-facing schema): the caller's session, for
     * memory.citations "auto" and memory.qmd.scope; else the server's --session-key */
    json_t *sk = json_object_get(args, "sessionKey");
    if (sk && !json_is_null(sk) && (!json_is_string(sk) || !*json_string_value(sk)))
        return arg_error(t, "sessionKey", "a session key string, or left out", sk);
    const char *key = json_is_string(sk) ? json_string_value(sk) : s->session_key;
    cm_rc rc = cm_memory_search_session(s->engine, q, &o, key, &payload, err, sizeof err);
    if (rc == CM_EINVAL) { /* a bad query (empty): worded as the CLI words it */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s: %.900s", t, err);
        return error_result(msg);
    }
    if (rc) return error_result(err);
    if (s->search_status) return payload_result(with_status(payload, s->search_status));
    return payload_result(payload);
}

static json_t *get_tool(const mcp_rpc *s, json_t *args)
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
    if (cm_memory_get_at(s->engine, path, from, offset, lines, &payload, err, sizeof err))
        return error_result(err);
    return payload_result(payload);
}

static json_t *write_tool(const mcp_rpc *s, json_t *args)
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
    if (cm_memory_write(s->engine, json_string_value(p), text, 0, &payload, err, sizeof err))
        return error_result(err);
    return payload_result(payload);
}

/* tools/call: an unknown tool or a call that is not a CallToolRequest is a
 * JSON-RPC error (-32602); anything wrong with the arguments is a tool result
 * with isError, which the model sees and can correct (SEP-1303). */
static json_t *call_tool(const mcp_rpc *s, const req *r, json_t *params)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    json_t *args = json_object_get(params, "arguments");
    if (!name)
        return mcp_rpc_error(r->id, INVALID_PARAMS, "Invalid params: tools/call needs a tool name");
    if (args && !json_is_object(args) && !json_is_null(args))
        return mcp_rpc_error(r->id, INVALID_PARAMS,
                             "Invalid params: tools/call arguments must be an object");
    if (!strcmp(name, "memory_search")) return rpc_result(r, search_tool(s, args));
    if (!strcmp(name, "memory_get")) return rpc_result(r, get_tool(s, args));
    if (!strcmp(name, "memory_write") && s->can_write) return rpc_result(r, write_tool(s, args));
    char msg[256];
    snprintf(msg, sizeof msg, "Unknown tool: %.100s", name);
    return mcp_rpc_error(r->id, INVALID_PARAMS, msg);
}

static json_t *capabilities(void)
{
    return json_pack("{s:{s:b}}", "tools", "listChanged", 0);
}

static json_t *initialize(const req *r, json_t *params)
{
    const char *want = json_string_value(json_object_get(params, "protocolVersion"));
    const char *v = versions[0];
    for (size_t i = 0; want && i < sizeof versions / sizeof *versions; i++)
        if (!strcmp(want, versions[i])) v = versions[i];
    return rpc_result(r, json_pack("{s:s, s:o, s:o, s:s}", "protocolVersion", v, "capabilities",
                                   capabilities(), "serverInfo", server_info(), "instructions",
                                   instructions));
}

bool mcp_rpc_legacy_version(const char *v)
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

static json_t *discover(const req *r)
{
    req c = *r;
    c.modern = c.cacheable = true;
    return rpc_result(&c, json_pack("{s:o, s:o, s:s}", "supportedVersions", all_versions(),
                                    "capabilities", capabilities(), "instructions", instructions));
}

/* A request carrying the 2026-07-28 envelope (meta names a protocol version
 * that is not a legacy one): served on its own, with no initialize before it;
 * a version we do not know is UnsupportedProtocolVersion with our list. */
static json_t *handle_modern(const mcp_rpc *s, json_t *id, const char *method, json_t *params,
                             json_t *meta)
{
    req r = {id, true, false};
    json_t *pv = json_object_get(meta, META_VERSION);
    const char *v = json_string_value(pv);
    bool known = false;
    if (!v)
        return mcp_rpc_error(id, INVALID_PARAMS,
                             "Invalid params: _meta." META_VERSION " must be a string");
    for (size_t i = 0; i < sizeof modern_versions / sizeof *modern_versions; i++)
        known = known || !strcmp(v, modern_versions[i]);
    if (!known) {
        char m[256];
        snprintf(m, sizeof m, "Unsupported protocol version: %.60s", v);
        clip_utf8(m);
        return rpc_error_data(
            id, UNSUPPORTED_VERSION, m,
            json_pack("{s:o, s:O}", "supported", all_versions(), "requested", pv));
    }
    if (!json_is_object(json_object_get(meta, META_CLIENT_CAPS)))
        return mcp_rpc_error(id, INVALID_PARAMS,
                             "Invalid params: _meta." META_CLIENT_CAPS " must be an object");
    json_t *ci = json_object_get(meta, META_CLIENT_INFO);
    if (ci && !json_is_object(ci))
        return mcp_rpc_error(id, INVALID_PARAMS,
                             "Invalid params: _meta." META_CLIENT_INFO " must be an object");
    if (!strcmp(method, "server/discover")) return discover(&r);
    if (!strcmp(method, "tools/list")) {
        r.cacheable = true;
        return rpc_result(&r, json_pack("{s:O}", "tools", s->tools));
    }
    if (!strcmp(method, "tools/call")) return call_tool(s, &r, params);
    char m[256];
    snprintf(m, sizeof m, "Method not found: %.100s (protocol version %s)", method, v);
    return mcp_rpc_error(id, METHOD_NOT_FOUND, m);
}

json_t *mcp_rpc_parse_error(const char *text)
{
    char m[256];
    snprintf(m, sizeof m, "Parse error: %s", text);
    return mcp_rpc_error(NULL, PARSE_ERROR, m);
}

json_t *mcp_rpc_answer(const mcp_rpc *s, json_t *msg)
{
    json_t *rc = NULL;
    json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (json_is_array(msg)) {
        rc = mcp_rpc_error(NULL, INVALID_REQUEST, "Invalid Request: batches are not supported");
    } else if (!json_is_object(msg) || !json_is_string(json_object_get(msg, "jsonrpc")) ||
               strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") != 0 ||
               (id && !json_is_string(id) && !json_is_integer(id))) {
        rc = mcp_rpc_error(json_is_string(id) || json_is_integer(id) ? id : NULL, INVALID_REQUEST,
                           "Invalid Request: expected a JSON-RPC 2.0 object");
    } else if (!method) {
        /* a response from the client (we send no requests) or junk */
        if (!json_object_get(msg, "result") && !json_object_get(msg, "error"))
            rc = mcp_rpc_error(id, INVALID_REQUEST, "Invalid Request: no method");
    } else if (!id) {
        /* notifications (initialized, cancelled, ...) need no answer */
    } else {
        json_t *params = json_object_get(msg, "params");
        json_t *meta = json_object_get(params, "_meta");
        req r = {id, false, false};
        if (params && !json_is_object(params)) {
            rc = mcp_rpc_error(id, INVALID_PARAMS, "Invalid params: params must be an object");
        } else if (json_is_object(meta) && json_object_get(meta, META_VERSION) &&
                   !mcp_rpc_legacy_version(
                       json_string_value(json_object_get(meta, META_VERSION)))) {
            /* a legacy version named in _meta is served as that version */
            rc = handle_modern(s, id, method, params, meta);
        } else if (!strcmp(method, "initialize")) {
            rc = initialize(&r, params);
        } else if (!strcmp(method, "ping")) {
            rc = rpc_result(&r, json_object());
        } else if (!strcmp(method, "tools/list")) {
            rc = rpc_result(&r, json_pack("{s:O}", "tools", s->tools));
        } else if (!strcmp(method, "tools/call")) {
            rc = call_tool(s, &r, params);
        } else if (!strcmp(method, "server/discover")) {
            rc = discover(&r); /* without the envelope: still tell what we speak */
        } else {
            char m[256];
            snprintf(m, sizeof m, "Method not found: %.100s", method);
            rc = mcp_rpc_error(id, METHOD_NOT_FOUND, m);
        }
    }
    return rc;
}

bool mcp_rpc_modern_version(const char *v)
{
    for (size_t i = 0; v && i < sizeof modern_versions / sizeof *modern_versions; i++)
        if (!strcmp(v, modern_versions[i])) return true;
    return false;
}

json_t *mcp_rpc_tools(bool can_write)
{
    size_t ndefs;
    const cm_tool_def *defs = cm_tool_defs(&ndefs);
    json_t *tools = json_array();
    for (size_t i = 0; tools && i < ndefs; i++)
        if (defs[i].read_only || can_write)
            json_array_append_new(tools, tool(defs[i].name, defs[i].title, defs[i].description,
                                              defs[i].input_schema, defs[i].output_schema,
                                              defs[i].read_only));
    return tools;
}
