/*
 * auth.h — auth profiles as QuantumClaw 2026.3.22 keeps them: the credential
 * store `<stateDir>/agents/<agentId>/agent/auth-profiles.json` (profiles,
 * order, lastGood, usageStats), the rotation order of a provider's profiles,
 * cooldowns and billing disables, and the failure classes that cause them.
 * Used by the chat clients (llm/) and the remote embedding providers (embed/).
 *
 * The store is a JSON document kept whole (fields clawmem does not know are
 * written back unchanged). Every change goes through cm_auth_store_update(),
 * which serialises writers across processes (flock among clawmem processes,
 * plus QuantumClaw's `<file>.lock` sidecar so both tools can share the file),
 * re-reads the file, applies the change and replaces the file atomically
 * (temp + fsync + rename, mode 0600): a reader sees the old or the new file,
 * never a torn one, and no update is lost. Time is always passed in (ms since
 * the epoch), so cooldowns are tested without sleeping. Secrets (keys,
 * tokens) are never put in an error message.
 */
#ifndef CM_AUTH_H
#define CM_AUTH_H

#include <jansson.h>

#include "../base/buf.h"

/* Failure classes, in QuantumClaw's priority order (the first nine). */
typedef enum auth_reason {
    AUTH_R_AUTH_PERMANENT,
    AUTH_R_AUTH,
    AUTH_R_BILLING,
    AUTH_R_FORMAT,
    AUTH_R_MODEL_NOT_FOUND,
    AUTH_R_OVERLOADED,
    AUTH_R_TIMEOUT,
    AUTH_R_RATE_LIMIT,
    AUTH_R_UNKNOWN,
    AUTH_R_SESSION_EXPIRED,
    AUTH_R_N,
    AUTH_R_NONE = -1 /* not a failover-worthy failure */
} auth_reason;

/* "auth_permanent", "rate_limit", …; "" for AUTH_R_NONE. */
const char *cm_auth_reason_name(auth_reason r);
/* The reason named s, or AUTH_R_NONE. */
auth_reason cm_auth_reason_parse(const char *s);

/* The failure class of an HTTP answer (status 0: no status, message only)
 * and its error text (may be NULL), by QuantumClaw's rules: 402 billing
 * unless the text says it is a quota window, 429 rate limit, 401/403 auth
 * (auth_permanent for revoked/invalid keys), 408/5xx timeout or overloaded,
 * 400/422 format (billing when the text says so); without a status, the
 * text's patterns. AUTH_R_NONE when nothing matches. */
auth_reason cm_auth_classify(int http_status, const char *message);

/* Whether an error text says the prompt exceeds the model's context (the
 * caller compacts and retries; no profile is at fault). */
bool cm_auth_context_overflow(const char *message);

/* auth.cooldowns of the config. Zero or negative hours mean the default
 * (billing 5 h doubling up to 24 h; counters reset after 24 h without a
 * failure). by_provider: borrowed {provider: hours} or NULL. */
typedef struct auth_cooldowns {
    double billing_backoff_hours, billing_max_hours, failure_window_hours;
    const json_t *billing_backoff_hours_by_provider;
} auth_cooldowns;

/* The cooldown after the n-th consecutive failure: 1, 5, 25, 60 min (cap). */
int64_t cm_auth_cooldown_ms(int64_t error_count);
/* The billing disable after the n-th billing failure for provider. */
int64_t cm_auth_billing_disable_ms(const auth_cooldowns *c, const char *provider, int64_t count);

/* Provider ids as QuantumClaw compares them (lower case, aliases folded). */
void cm_auth_provider_norm(const char *provider, char *out, size_t outlen);

/* ---- the store ---- */

typedef struct auth_store {
    char *path;  /* the auth-profiles.json this store was read from */
    json_t *doc; /* {version, profiles, order?, lastGood?, usageStats?} */
} auth_store;

/* Appends <stateDir>/agents/<agentId>/agent/auth-profiles.json to out. */
cm_rc cm_auth_store_path(buf *out, const char *state_dir, const char *agent_id);

/* Reads the agent's store. When the file does not exist yet, it is made from
 * what QuantumClaw would import (once, under the lock): the main agent's
 * store for another agent, the legacy `<agentDir>/auth.json` and
 * `<stateDir>/agent/auth-profiles.json`, and `<stateDir>/credentials/oauth.json`;
 * with nothing to import the store is empty and no file is written.
 * CM_ECONFIG (file:line:column) when the file is not valid JSON. */
cm_rc cm_auth_store_init(auth_store *s, const char *state_dir, const char *agent_id, char *err,
                         size_t errlen);
/* Reads the store at path (a missing file is an empty store). */
cm_rc cm_auth_store_read(auth_store *s, const char *path, char *err, size_t errlen);
void cm_auth_store_release(auth_store *s);

/* fn changes doc in place and sets *changed; returning an error aborts the
 * update (nothing is written). */
typedef cm_rc (*auth_update_fn)(json_t *doc, void *ctx, int64_t now_ms, bool *changed, char *err,
                                size_t errlen);

/* Locks the file, re-reads it, applies fn, writes it back when changed, and
 * unlocks. When s is not NULL its document is replaced by the fresh one. */
cm_rc cm_auth_store_update(auth_store *s, const char *path, int64_t now_ms, auth_update_fn fn,
                           void *ctx, char *err, size_t errlen);

/* ---- profiles, order and usage ---- */

/* The profile's credential object (borrowed), or NULL. */
json_t *cm_auth_profile(const auth_store *s, const char *profile_id);
/* The secret a request sends for the profile: api_key `key`, token `token`,
 * oauth `access` (borrowed; NULL when there is none). Never log it. */
const char *cm_auth_profile_secret(const auth_store *s, const char *profile_id);
/* Whether the profile is cooling down or disabled at now. */
bool cm_auth_profile_unusable(const auth_store *s, const char *profile_id, int64_t now_ms);
/* max(cooldownUntil, disabledUntil) of the profile, 0 when none. */
int64_t cm_auth_profile_unusable_until(const auth_store *s, const char *profile_id);

/* A NULL-terminated array of strings; cm_auth_strv_free frees it. */
void cm_auth_strv_free(char **v);

/* The order in which to try provider's profiles: the stored order (the
 * file's `order`) or else the config's `auth.order[provider]`, else the
 * config's `auth.profiles` of that provider, else every stored profile of it;
 * profiles that are missing, of another provider, of another mode than the
 * config names, or without a usable credential are dropped. Without an
 * explicit order: OAuth, then token, then API key, each oldest `lastUsed`
 * first. Profiles cooling down or disabled go last, soonest expiry first.
 * A preferred profile (a session's pin) that survives comes first.
 * cfg_auth: the config's `auth` object (borrowed, may be NULL). Expired
 * windows are cleared in s->doc first (not written; the next update does);
 * error counters stay until the failure window passes (see usage.c). */
cm_rc cm_auth_profile_order(auth_store *s, const json_t *cfg_auth, const char *provider,
                            const char *preferred, int64_t now_ms, char ***out);

/* The most likely reason all of ids are unavailable, or AUTH_R_NONE. */
auth_reason cm_auth_unavailable_reason(const auth_store *s, const char *const *ids, int64_t now_ms);

/* usageStats updates, each one cm_auth_store_update (s: refreshed, may be NULL).
 * used: lastUsed = now, error counters and windows cleared.
 * failure: errorCount/failureCounts/lastFailureAt advance (reset first when
 * the failure window passed without a failure); billing and
 * auth_permanent set disabledUntil/disabledReason, others cooldownUntil; an
 * active window is kept, not extended. openrouter and kilocode never cool.
 * good: lastGood[provider] = profile. clear: counters and windows cleared. */
cm_rc cm_auth_mark_used(auth_store *s, const char *path, const char *profile_id, int64_t now_ms,
                        char *err, size_t errlen);
cm_rc cm_auth_mark_failure(auth_store *s, const char *path, const char *profile_id, auth_reason r,
                           const auth_cooldowns *c, int64_t now_ms, char *err, size_t errlen);
/* The same, with a cooldown that lasts at least until not_before_ms (a
 * server's Retry-After); 0 for none. */
cm_rc cm_auth_mark_failure_until(auth_store *s, const char *path, const char *profile_id,
                                 auth_reason r, const auth_cooldowns *c, int64_t not_before_ms,
                                 int64_t now_ms, char *err, size_t errlen);
cm_rc cm_auth_mark_good(auth_store *s, const char *path, const char *provider,
                        const char *profile_id, int64_t now_ms, char *err, size_t errlen);
cm_rc cm_auth_clear_cooldown(auth_store *s, const char *path, const char *profile_id,
                             int64_t now_ms, char *err, size_t errlen);
/* cm_auth_mark_used and cm_auth_mark_good in one locked write (after a success). */
cm_rc cm_auth_mark_success(auth_store *s, const char *path, const char *provider,
                           const char *profile_id, int64_t now_ms, char *err, size_t errlen);

/* The pure part of cm_auth_mark_failure: the profile's next stats (a new
 * object) from its current ones (may be NULL). */
json_t *cm_auth_stats_after_failure(const json_t *existing, const char *provider, auth_reason r,
                                    const auth_cooldowns *c, int64_t now_ms);

#endif
