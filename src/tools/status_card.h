/*
 * status_card.h — the session status card of /status and the
 * session_status tool, in 2026.3.22's lines (buildStatusMessage): the
 * version, the model and how it authenticates, tokens and cost, the cache,
 * the context, the session, the options and the queue. Formatting only: the
 * caller reads the session entry and the config.
 */
#ifndef CM_TOOLS_STATUS_CARD_H
#define CM_TOOLS_STATUS_CARD_H

#include "../base/buf.h"
#include "../base/common.h"

#include <jansson.h>

typedef struct status_card_in {
    const json_t *config;    /* the whole config (agents.defaults.*Default), may be NULL */
    const json_t *entry;     /* the session's sessions.json entry, or NULL */
    const char *session_key; /* the full key ("agent:main:main") */
    const char *model;       /* the model the next run asks first ("provider/model") */
    const char *auth;        /* its auth label (llm/runner.h), or NULL: none shown */
    const char *thinking;    /* the thinking level in effect ("off", "low", …) */
    int64_t context_tokens;  /* the model's context window */
    bool show_cost;          /* the auth is an API key: a cost line when known */
    bool cost_known;         /* the model has a cost in the config … */
    double cost_usd;         /* … and this is the entry's tokens' */
    const char *time_line;   /* "🕒 Time: …" (the tool's), or NULL */
    const char *queue_line; /* "🪢 Queue: collect (depth 0)", or NULL for "🪢 Queue: unknown" */
    int64_t now_ms;
} status_card_in;

/* The card into out (appended). Lines without data are left out as
 * 2026.3.22 leaves them out (tokens, cache, cost, fallback). */
cm_rc cm_status_card(const status_card_in *in, buf *out);

/* 2026.3.22's formatTimeAgo: "just now", "5m ago", "3h ago", "2d ago";
 * "unknown" for a negative duration. */
void cm_status_time_ago(int64_t ms, char out[32]);

/* A token count as 2026.3.22 shows it: "950", "1.2k", "34k", "1.5m". */
void cm_status_token_count(int64_t n, char out[16]);

/* 2026.3.22's formatUserTime in zone (NULL: UTC) at now_ms: "Wednesday,
 * December 2nd, 2026 — 7:32 AM", or "… — 07:32" with h24. */
void cm_status_user_time(int64_t now_ms, const char *zone, bool h24, char out[96]);

#endif
