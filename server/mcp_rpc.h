/*
 * mcp_rpc.h — MCP's JSON-RPC side, shared by the stdio server (mcp.c) and the
 * Streamable HTTP server (serve.c): one message in, its answer out, for one
 * agent's engine. Protocol eras: an `initialize` handshake (2025-11-25 back to
 * 2024-11-05) or, statelessly, requests that carry the 2026-07-28 per-request
 * `_meta` envelope (`server/discover`, `tools/list`, `tools/call`). Uses only
 * the public header (and jansson).
 */
#ifndef CM_MCP_RPC_H
#define CM_MCP_RPC_H

#include <jansson.h>
#include <stdbool.h>

#include "clawmem.h"

/* What answers a message: the agent's engine and its tools/list (from
 * mcp_rpc_tools). Read-only during a call; the engine must not be used by
 * another thread at the same time. */
typedef struct mcp_rpc {
    cm_engine *engine;
    bool can_write; /* memory_write is offered and served */
    json_t *tools;  /* mcp_rpc_tools(can_write) */
    /* the session memory_search runs as (memory.citations "auto",
     * memory.qmd.scope) unless a call names one in "sessionKey"; NULL: none */
    const char *session_key;
    /* set by the server for one call: memory_search's payload then carries it
     * as "status" (e.g. the first sync has not finished); NULL: none */
    const char *search_status;
} mcp_rpc;

/* The tools/list array: memory_search, memory_get and, with can_write,
 * memory_write. New reference (json_decref). */
json_t *mcp_rpc_tools(bool can_write);

/* The answer to one parsed JSON-RPC message (new reference), or NULL when
 * none is due (a notification, or a response from the client). Bad tool
 * arguments are tool results with isError; unknown tools and malformed
 * requests are JSON-RPC errors; batches are refused. */
json_t *mcp_rpc_answer(const mcp_rpc *s, json_t *msg);

/* A JSON-RPC error response (new reference); id may be NULL. */
json_t *mcp_rpc_error(json_t *id, int code, const char *msg);
enum { MCP_INVALID_REQUEST = -32600 };

/* The JSON-RPC parse error (-32700) for a message that is not JSON. */
json_t *mcp_rpc_parse_error(const char *text);

/* A protocol version negotiated by initialize (2025-11-25 and older). */
bool mcp_rpc_legacy_version(const char *v);
/* A stateless revision named per request in _meta (2026-07-28). */
bool mcp_rpc_modern_version(const char *v);

/* The 2026-07-28 envelope key naming the protocol version in params._meta. */
#define MCP_META_VERSION "io.modelcontextprotocol/protocolVersion"

#endif
