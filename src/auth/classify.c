/*
 * classify.c — which failure class an error from a model or embedding
 * provider belongs to (auth.h: cm_auth_classify), by QuantumClaw 2026.3.22's
 * rules: the HTTP status first, refined by the error text; then the text's
 * patterns alone. Matching is on the lower-cased text, by substrings and a
 * few hand-written word-boundary tests (no regular-expression engine).
 */
#include <ctype.h>

#include "auth.h"

static const char *const reason_names[AUTH_R_N] = {
    "auth_permanent", "auth",    "billing",    "format",  "model_not_found",
    "overloaded",     "timeout", "rate_limit", "unknown", "session_expired"};

const char *cm_auth_reason_name(auth_reason r)
{
    return r >= 0 && r < AUTH_R_N ? reason_names[r] : "";
}

auth_reason cm_auth_reason_parse(const char *s)
{
    for (int i = 0; s && i < AUTH_R_N; i++)
        if (strcmp(s, reason_names[i]) == 0) return (auth_reason)i;
    return AUTH_R_NONE;
}

/* Whether any of the NULL-terminated needles occurs in hay. */
static bool has_any(const char *hay, const char *const *needles)
{
    for (; *needles; needles++)
        if (strstr(hay, *needles)) return true;
    return false;
}

static bool is_word_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* word occurs in hay with no word character on either side. */
static bool has_word(const char *hay, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = strstr(hay, word); p; p = strstr(p + 1, word))
        if ((p == hay || !is_word_char(p[-1])) && !is_word_char(p[n])) return true;
    return false;
}

static const char *const rate_limit_pats[] = {"rate limit",
                                              "rate_limit",
                                              "too many requests",
                                              "429",
                                              "model_cooldown",
                                              "exceeded your current quota",
                                              "resource has been exhausted",
                                              "quota exceeded",
                                              "resource_exhausted",
                                              "usage limit",
                                              "tokens per minute",
                                              "tokens per day",
                                              NULL};
static const char *const overloaded_pats[] = {"overloaded_error", "overloaded", "high demand",
                                              NULL};
static const char *const timeout_pats[] = {"timeout",
                                           "timed out",
                                           "service unavailable",
                                           "deadline exceeded",
                                           "connection error",
                                           "network error",
                                           "network request failed",
                                           "fetch failed",
                                           "socket hang up",
                                           "econnrefused",
                                           "econnreset",
                                           "econnaborted",
                                           "enetunreach",
                                           "ehostunreach",
                                           "ehostdown",
                                           "enetreset",
                                           "etimedout",
                                           "esockettimedout",
                                           "epipe",
                                           "enotfound",
                                           "eai_again",
                                           "without sending chunks",
                                           "without sending any chunks",
                                           "stop reason: error",
                                           "stop reason: abort",
                                           "reason: error",
                                           "reason: abort",
                                           "reason: malformed_response",
                                           "reason: network_error",
                                           NULL};
static const char *const billing_pats[] = {"payment required",
                                           "insufficient credits",
                                           "insufficient_quota",
                                           "insufficient quota",
                                           "credit balance",
                                           "plans & billing",
                                           "insufficient balance",
                                           "insufficient usd or diem balance",
                                           "requires more credits",
                                           "require more credits",
                                           "http 402",
                                           "http402",
                                           "status: 402",
                                           "\"status\":402",
                                           "\"code\":402",
                                           "status code 402",
                                           "error 402",
                                           "error code 402",
                                           "got 402",
                                           "got a 402",
                                           "returned 402",
                                           "returned a 402",
                                           "received 402",
                                           "received a 402",
                                           NULL};
static const char *const auth_permanent_pats[] = {"api key revoked",
                                                  "api_key_revoked",
                                                  "apikey revoked",
                                                  "api key invalid",
                                                  "api key deactivated",
                                                  "api key deleted",
                                                  "invalid_api_key",
                                                  "key has been disabled",
                                                  "key has been revoked",
                                                  "account has been deactivated",
                                                  "could not authenticate",
                                                  "could not validate",
                                                  "permission_error",
                                                  "not allowed for this organization",
                                                  NULL};
static const char *const auth_pats[] = {"invalid api key",
                                        "invalid_api_key",
                                        "invalid apikey",
                                        "invalidapikey",
                                        "incorrect api key",
                                        "invalid token",
                                        "authentication",
                                        "re-authenticate",
                                        "oauth token refresh failed",
                                        "unauthorized",
                                        "forbidden",
                                        "access denied",
                                        "insufficient permission",
                                        "missing scope",
                                        "expired",
                                        "no credentials found",
                                        "no api key found",
                                        NULL};
static const char *const format_pats[] = {"string should match pattern", "tool_use.id",
                                          "tool_use_id", "invalid request format", NULL};
static const char *const model_not_found_pats[] = {
    "model_not_found", "model not found", "unknown model",
    "does not exist or you do not have access", NULL};
static const char *const quota_window_pats[] = {"daily limit",   "weekly limit", "monthly limit",
                                                "daily usage",   "weekly usage", "monthly usage",
                                                "try again in",  "retry after",  "resets at",
                                                "quota refresh", "temporarily",  NULL};

static bool billing_text(const char *t)
{
    if (has_any(t, billing_pats)) return true;
    /* A message that starts with "billing" / "credit balance" / … and talks
     * about credits, payment, plans or upgrades. */
    const char *p = t;
    if (strncmp(p, "error", 5) == 0) p += 5;
    while (*p == ':' || *p == ' ' || *p == '-')
        p++;
    bool head = strncmp(p, "billing", 7) == 0 || strncmp(p, "credit balance", 14) == 0 ||
                strncmp(p, "insufficient credit", 19) == 0 ||
                strncmp(p, "payment required", 16) == 0;
    return head && (strstr(t, "upgrade") || strstr(t, "credits") || strstr(t, "payment") ||
                    strstr(t, "plan") || strncmp(p, "billing", 7) == 0);
}

/* 402 is billing unless the text says it is a quota window or a rate limit. */
static auth_reason classify_402(const char *t)
{
    if (!*t) return AUTH_R_BILLING;
    if (has_any(t, quota_window_pats) && !has_any(t, billing_pats)) return AUTH_R_RATE_LIMIT;
    if (billing_text(t)) return AUTH_R_BILLING;
    if (has_any(t, rate_limit_pats)) return AUTH_R_RATE_LIMIT;
    return AUTH_R_BILLING;
}

/* The status a text starts with ("503 Service Unavailable"), or 0. */
static int leading_status(const char *t)
{
    if (strncmp(t, "http ", 5) == 0) t += 5;
    int v = 0, n = 0;
    while (n < 4 && isdigit((unsigned char)t[n]))
        v = v * 10 + (t[n++] - '0');
    return n == 3 && !is_word_char(t[3]) ? v : 0;
}

static bool transient_status(int s)
{
    return s == 499 || s == 500 || s == 502 || s == 503 || s == 504 || s == 521 || s == 522 ||
           s == 523 || s == 524 || s == 529;
}

static auth_reason classify_text(const char *t)
{
    if (!*t) return AUTH_R_NONE;
    if (strstr(t, "session expired") || strstr(t, "session not found"))
        return AUTH_R_SESSION_EXPIRED;
    if (has_any(t, model_not_found_pats)) return AUTH_R_MODEL_NOT_FOUND;
    if (leading_status(t) == 402 || (has_word(t, "402") && has_any(t, billing_pats)))
        return classify_402(t);
    if (has_any(t, rate_limit_pats) || has_word(t, "tpm")) return AUTH_R_RATE_LIMIT;
    if (has_any(t, overloaded_pats)) return AUTH_R_OVERLOADED;
    int lead = leading_status(t);
    if (transient_status(lead)) return lead == 529 ? AUTH_R_OVERLOADED : AUTH_R_TIMEOUT;
    if (strstr(t, "internal server error") || strstr(t, "\"api_error\"")) return AUTH_R_TIMEOUT;
    if (has_any(t, format_pats)) return AUTH_R_FORMAT;
    if (billing_text(t)) return AUTH_R_BILLING;
    if (has_any(t, timeout_pats)) return AUTH_R_TIMEOUT;
    if (has_any(t, auth_permanent_pats)) return AUTH_R_AUTH_PERMANENT;
    if (has_any(t, auth_pats) || has_word(t, "401") || has_word(t, "403")) return AUTH_R_AUTH;
    return AUTH_R_NONE;
}

bool cm_auth_context_overflow(const char *message)
{
    char t[2048];
    size_t n = 0;
    for (const char *p = message ? message : ""; *p && n + 1 < sizeof t; p++)
        t[n++] = (char)tolower((unsigned char)*p);
    t[n] = 0;
    if (has_any(t, rate_limit_pats) || has_word(t, "tpm")) return false;
    static const char *const pats[] = {
        "request_too_large",
        "request exceeds the maximum size",
        "context length exceeded",
        "maximum context length",
        "prompt is too long",
        "prompt too long",
        "exceeds model context window",
        "model token limit",
        "context overflow:",
        "exceed context limit",
        "exceeds the model's maximum context",
        "context_window_exceeded",
        "\xe4\xb8\x8a\xe4\xb8\x8b\xe6\x96\x87\xe8\xbf\x87\xe9\x95\xbf", /* 上下文过长 */
        NULL};
    if (has_any(t, pats)) return true;
    bool ctx = strstr(t, "context") != NULL;
    return (strstr(t, "request size exceeds") &&
            (strstr(t, "context window") || strstr(t, "context length"))) ||
           (strstr(t, "max_tokens") && strstr(t, "exceed") && ctx) ||
           (strstr(t, "input length") && strstr(t, "exceed") && ctx) ||
           (has_word(t, "413") && strstr(t, "too large"));
}

auth_reason cm_auth_classify(int status, const char *message)
{
    /* Lower-case a bounded copy: error bodies can be large. */
    char t[2048];
    size_t n = 0;
    for (const char *p = message ? message : ""; *p && n + 1 < sizeof t; p++)
        t[n++] = (char)tolower((unsigned char)*p);
    t[n] = 0;
    const char *s = t;
    while (*s == ' ' || *s == '\t' || *s == '\n')
        s++;
    switch (status) {
    case 0:
        return classify_text(s);
    case 402:
        return classify_402(s);
    case 429:
        return AUTH_R_RATE_LIMIT;
    case 401:
    case 403:
        return has_any(s, auth_permanent_pats) ? AUTH_R_AUTH_PERMANENT : AUTH_R_AUTH;
    case 408:
        return AUTH_R_TIMEOUT;
    case 499:
    case 503:
        return has_any(s, overloaded_pats) ? AUTH_R_OVERLOADED : AUTH_R_TIMEOUT;
    case 500:
    case 502:
    case 504:
    case 521:
    case 522:
    case 523:
    case 524:
        return AUTH_R_TIMEOUT;
    case 529:
        return AUTH_R_OVERLOADED;
    case 400:
    case 422:
        return billing_text(s) ? AUTH_R_BILLING : AUTH_R_FORMAT;
    default:
        return classify_text(s);
    }
}
