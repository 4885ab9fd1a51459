/*
 * health.h — `clawmem serve`'s endpoints for a load balancer, outside MCP
 * and without a token: GET /healthz (liveness: the process answers, with
 * the engine LRU's figures) and GET /readyz (readiness: every store the
 * agents use answers — each PostgreSQL server a SELECT 1, each SQLite
 * index directory is there). Bodies are small JSON objects with no DSN, no
 * path and no server message; the reason a probe failed goes to the log.
 */
#ifndef CM_SERVE_HEALTH_H
#define CM_SERVE_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clawmem.h"
#include "../src/net/httpd.h"

/* A readiness answer is reused for this long, so probes (unauthenticated)
 * cannot turn into a flood of connections to the database. */
#define HEALTH_CACHE_MS 1000
/* How long a PostgreSQL server may take to accept the probe's connection. */
#define HEALTH_CONNECT_S 2

typedef struct serve_health serve_health;

/* What /healthz reports of the engines (serve.c fills it under its lock). */
typedef struct serve_figures {
    size_t engines, max_engines; /* open, cap */
    size_t bytes, max_bytes;     /* their estimated memory (cm_engine_memory), cap (0: none) */
    size_t sessions;             /* MCP sessions held (cached, when shared) */
    size_t writing, following;   /* watchers: writing an agent's index, following another's */
} serve_figures;

/* The distinct stores of agents[0..n) (each agent's config as opt says;
 * default_agent takes opt->workspace). *out is freed with serve_health_free. */
cm_rc serve_health_open(const cm_options *opt, char *const *agents, size_t n,
                        const char *default_agent, serve_health **out, char *err, size_t errlen);
void serve_health_free(serve_health *h);

/* Whether path is /healthz or /readyz. */
bool serve_health_path(const char *path);

/* Answers a request for serve_health_path: GET or HEAD, else 405. /readyz
 * probes the stores (at most once per HEALTH_CACHE_MS, now_ms injectable)
 * and logs why it is not ready through opt->log. Thread safe. */
void serve_health_answer(serve_health *h, const httpd_req *rq, httpd_conn *c,
                         const serve_figures *f, int64_t now_ms);

#endif
