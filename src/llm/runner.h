/*
 * runner.h — the model runner: one model call with QuantumClaw's failover
 * (seed 001 "Model failover"). Models are named `provider/model`; the chain
 * is the run's model (an override, or agents.defaults.model.primary), then
 * agents.defaults.model.fallbacks, and a run that started with an override
 * ends at the primary. Within a model, the provider's auth profiles are
 * tried in auth.h's order; a failure cools the profile down (billing
 * disables it) and the next profile is tried. When every profile of a model
 * failed with an auth failure, a rate limit, a timeout, overload, billing or
 * an unknown model, the next model is tried; other failures (a malformed
 * request, a plain error) end the run. A prompt over the model's context
 * ends it with CM_ETOOBIG so the caller can compact and retry.
 *
 * A session pins the profile that answered (an auto pin, a preference that
 * rotates away on failure) or the user pins one (`/model …@<profileId>`),
 * which never rotates: its failure moves to the next model instead.
 */
#ifndef CM_RUNNER_H
#define CM_RUNNER_H

#include "llm.h"

/* Wall-clock milliseconds since the epoch (injectable: tests pass a fake). */
typedef int64_t (*llm_clock_fn)(void *ctx);

typedef struct llm_runner_opts {
    const json_t *config; /* the whole config (borrowed for the runner's life) */
    const char *state_dir, *agent_id;
    llm_clock_fn clock; /* NULL: the real clock */
    void *clock_ctx;
} llm_runner_opts;

typedef struct llm_runner llm_runner;

cm_rc cm_llm_runner_open(const llm_runner_opts *o, llm_runner **out, char *err, size_t errlen);
void cm_llm_runner_close(llm_runner *r);

/* A session's auth-profile pin; profile "" when none. */
typedef struct llm_pin {
    char profile[192];
    bool user; /* set by the user: never rotated */
} llm_pin;

typedef struct llm_turn {
    const char *model; /* "provider/model" override, or NULL for the configured primary */
    bool image;        /* the input holds images: agents.defaults.imageModel's chain */
    llm_pin *pin;      /* the session's pin, read and updated; NULL for none */
} llm_turn;

/* What answered (or was tried last). */
typedef struct llm_outcome {
    char model[192];   /* "provider/model" */
    char profile[192]; /* the auth profile, "" for a key from the config or environment */
    int attempts;      /* requests sent */
    /* The wire API of model's provider (models.providers.<p>.api, else
     * "anthropic-messages" for anthropic and "openai-completions" for the
     * rest): the transcript's message "api". */
    char api[32];
} llm_outcome;

/* The model chain of a turn as "a,b,c" (for status displays and tests). */
cm_rc cm_llm_runner_chain(llm_runner *r, const llm_turn *t, buf *out);

/* How a request to provider would authenticate, as 2026.3.22's /status
 * labels it (never the secret): its first profile in order (the session's
 * pin first when it is of that provider) as "api-key (<id>)", "oauth (<id>
 * (<email>))" or "token (<id>)"; else a key in the config "api-key
 * (models.json)", else the environment's "api-key (env: <PROVIDER>_API_KEY)";
 * else "unknown". Errors only for memory; an unreadable store counts as no
 * profiles. */
cm_rc cm_llm_runner_auth_label(llm_runner *r, const char *provider, const char *pin, char *out,
                               size_t cap);

/* Runs rq (its model field is set per attempt) through the chain. out holds
 * the answer (released by the caller, also on failure). */
cm_rc cm_llm_run(llm_runner *r, const llm_turn *t, llm_request *rq, llm_delta_fn on_delta,
                 void *ctx, llm_response *out, llm_outcome *oc, char *err, size_t errlen);

/* Whether the profile is OAuth and its access token expired by now. */
bool cm_llm_oauth_expired(const auth_store *s, const char *profile_id, int64_t now_ms);

/* Renews an OAuth profile's access token with its refresh token at the
 * provider's token endpoint (overrides: the config's clawmem.oauth object,
 * {<provider>: {tokenUrl, clientId}}, may be NULL) and stores access,
 * refresh and expires under the store's lock; s is refreshed. Nothing is
 * sent when another process renewed it meanwhile. Messages never carry a
 * token. */
cm_rc cm_llm_oauth_refresh(auth_store *s, const char *path, const char *profile_id,
                           const json_t *overrides, int64_t now_ms, char *err, size_t errlen);

#endif
