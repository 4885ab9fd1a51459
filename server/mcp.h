/*
 * mcp.h — clawmem's MCP server over stdio (JSON-RPC 2.0, one message per
 * line): memory_search, memory_get and, when enabled, memory_write, answered
 * by a warm engine while a background thread keeps the index fresh. Uses only
 * the public header.
 */
#ifndef CM_MCP_H
#define CM_MCP_H

#include "clawmem.h"

typedef struct mcp_opts {
    int watch;       /* 1: watch the files, 0: sync on start only, -1: as sync.watch says */
    int debounce_ms; /* < 0: sync.watchDebounceMs */
    /* the session memory_search runs as (memory.citations "auto", memory.qmd.scope),
     * unless a call names one in its "sessionKey" argument; NULL: none */
    const char *session_key;
    /* how long the first memory_search waits for the first sync (first_sync.h);
     * < 0: FIRST_SYNC_WAIT_MS, 0: no wait */
    int first_sync_wait_ms;
} mcp_opts;

/* Serves on stdin/stdout until end of input or SIGTERM/SIGINT. Diagnostics go
 * to opt->log (stderr in the CLI); nothing but protocol messages reaches
 * stdout. Returns the process exit status (0 on a clean shutdown). */
int mcp_serve(const cm_options *opt, const mcp_opts *mo);

/* Messages longer than this are refused with a JSON-RPC error. */
#define MCP_MAX_MESSAGE (4u << 20)

#endif
