/*
 * serve.h — `clawmem serve`: MCP over Streamable HTTP for many agents in one
 * process. The endpoint is /mcp (or /mcp/<agentId>); the agent is the one a
 * bearer token names (--tokens), its engine is opened on demand and kept in
 * an LRU with a cap; the JSON-RPC side is mcp_rpc.c, shared with `clawmem mcp`.
 */
#ifndef CM_SERVE_H
#define CM_SERVE_H

#include "clawmem.h"

typedef struct serve_opts {
    const char *listen;         /* "ADDR:PORT"; NULL: 127.0.0.1:8765 */
    const char *tokens_path;    /* JSON5 {token: {agent, write}}; NULL: no auth (loopback only) */
    const char *const *origins; /* extra allowed Origin values (exact), NULL-terminated */
    int max_engines;            /* open engines at once; <= 0: 32 */
    int max_conns;              /* open connections; <= 0: 256 */
    int watch;                  /* 1 watch local workspaces, 0 never, -1: as sync.watch says */
    int debounce_ms;            /* < 0: sync.watchDebounceMs */
    int stop_fd;                /* readable = stop (the CLI's signal pipe); -1: none */
    int first_sync_wait_ms; /* an agent's first memory_search waits this long for its first
                               sync (first_sync.h); < 0: FIRST_SYNC_WAIT_MS, 0: no wait */
    int max_conns_per_addr;     /* open connections from one client address; <= 0: httpd's
                                   default (a quarter of max_conns, at least 8) */
    size_t max_engine_bytes; /* the open engines' estimated memory (cm_engine_memory), least
                                recently used idle ones closed above it; 0: no bound */
} serve_opts;

/* Serves until stop_fd becomes readable. Prints "listening on
 * http://ADDR:PORT/mcp" on stdout once bound; diagnostics go to opt->log.
 * Returns the process exit status. */
int mcp_serve_http(const cm_options *opt, const serve_opts *so);

#endif
