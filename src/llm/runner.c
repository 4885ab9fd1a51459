/*
 * runner.c — the model runner of runner.h: the model chain from the config,
 * each provider's endpoint (models.providers.<id>), its credentials (auth
 * profiles in order, else a key from the config or the environment), and
 * the failover loop that records every outcome in the auth store.
 */
#include <ctype.h>
#include <strings.h>
#include <time.h>

#include "runner.h"

#define MAX_CHAIN 16

struct llm_runner {
    const json_t *cfg;
    char *state_dir, *agent_id, *auth_path;
    llm_clock_fn clock;
    void *clock_ctx;
    auth_cooldowns cooldowns;
};

static int64_t real_clock(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static json_t *path_get(const json_t *root, const char *a, const char *b, const char *c)
{
    json_t *v = json_object_get(root, a);
    if (b) v = json_object_get(v, b);
    if (c) v = json_object_get(v, c);
    return v;
}

static double num_or(const json_t *v, double dflt)
{
    return json_is_number(v) ? json_number_value(v) : dflt;
}

cm_rc cm_llm_runner_open(const llm_runner_opts *o, llm_runner **out, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf p = BUF_INIT;
    llm_runner *r = calloc(1, sizeof *r);
    *out = NULL;
    if (!r) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    r->cfg = o->config;
    r->clock = o->clock ? o->clock : real_clock;
    r->clock_ctx = o->clock_ctx;
    r->state_dir = cm_strdup(o->state_dir);
    r->agent_id = cm_strdup(o->agent_id && *o->agent_id ? o->agent_id : "main");
    if (!r->state_dir || !r->agent_id || cm_auth_store_path(&p, r->state_dir, r->agent_id))
        FAIL(CM_ENOMEM, "out of memory");
    r->auth_path = cm_buf_detach(&p);
    const json_t *cd = path_get(o->config, "auth", "cooldowns", NULL);
    r->cooldowns.billing_backoff_hours = num_or(json_object_get(cd, "billingBackoffHours"), 0);
    r->cooldowns.billing_max_hours = num_or(json_object_get(cd, "billingMaxHours"), 0);
    r->cooldowns.failure_window_hours = num_or(json_object_get(cd, "failureWindowHours"), 0);
    r->cooldowns.billing_backoff_hours_by_provider =
        json_object_get(cd, "billingBackoffHoursByProvider");
    *out = r;
    r = NULL;
out:
    cm_buf_release(&p);
    cm_llm_runner_close(r);
    return rc;
}

void cm_llm_runner_close(llm_runner *r)
{
    if (!r) return;
    free(r->state_dir);
    free(r->agent_id);
    free(r->auth_path);
    free(r);
}

/* ---- the chain ---- */

/* The agent's own entry of agents.list, or NULL. */
static const json_t *agent_entry(const llm_runner *r)
{
    size_t i;
    json_t *a;
    json_array_foreach(path_get(r->cfg, "agents", "list", NULL), i, a)
    {
        const char *id = json_string_value(json_object_get(a, "id"));
        if (id && !strcasecmp(id, r->agent_id)) return a;
    }
    return NULL;
}

/* A model setting (a string, or {primary, fallbacks}) of the agent, else of
 * agents.defaults. */
static const json_t *model_setting(const llm_runner *r, const char *key)
{
    const json_t *own = json_object_get(agent_entry(r), key);
    return own ? own : path_get(r->cfg, "agents", "defaults", key);
}

static bool add_model(char chain[][192], int *n, const char *ref)
{
    if (!ref || !*ref || *n >= MAX_CHAIN) return true;
    char m[192];
    /* A bare model id belongs to QuantumClaw's default provider. */
    snprintf(m, sizeof m, "%s%s", strchr(ref, '/') ? "" : "anthropic/", ref);
    for (int i = 0; i < *n; i++)
        if (!strcmp(chain[i], m)) return true;
    snprintf(chain[(*n)++], 192, "%s", m);
    return true;
}

static int build_chain(const llm_runner *r, const llm_turn *t, char chain[][192])
{
    int n = 0;
    const json_t *ms = model_setting(r, t->image ? "imageModel" : "model");
    const char *primary = json_is_string(ms) ? json_string_value(ms)
                                             : json_string_value(json_object_get(ms, "primary"));
    if (!primary && t->image) { /* no image model: the text model's chain */
        ms = model_setting(r, "model");
        primary = json_is_string(ms) ? json_string_value(ms)
                                     : json_string_value(json_object_get(ms, "primary"));
    }
    add_model(chain, &n,
              t->model && *t->model ? t->model
              : primary             ? primary
                                    : "anthropic/claude-opus-4-6");
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(ms, "fallbacks"), i, f)
    {
        add_model(chain, &n, json_string_value(f));
    }
    if (t->model && *t->model && primary) add_model(chain, &n, primary);
    return n;
}

cm_rc cm_llm_runner_chain(llm_runner *r, const llm_turn *t, buf *out)
{
    char chain[MAX_CHAIN][192];
    int n = build_chain(r, t, chain);
    cm_rc rc = CM_OK;
    for (int i = 0; i < n && !rc; i++)
        rc = cm_buf_printf(out, "%s%s", i ? "," : "", chain[i]);
    return rc;
}

/* ---- endpoints and keys ---- */

/* A configured secret: a string ("${NAME}" reads the environment) or a
 * SecretRef {source:"env", id}. NULL when unset or not resolvable here. */
static const char *secret_value(const json_t *v)
{
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t n = strlen(s);
        if (n > 3 && s[0] == '$' && s[1] == '{' && s[n - 1] == '}') {
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)CM_MIN(n - 3, sizeof name - 1), s + 2);
            s = getenv(name);
        }
        return s && *s ? s : NULL;
    }
    const char *src = json_string_value(json_object_get(v, "source"));
    const char *id = json_string_value(json_object_get(v, "id"));
    if (src && id && !strcmp(src, "env")) {
        const char *s = getenv(id);
        return s && *s ? s : NULL;
    }
    return NULL;
}

typedef struct endpoint {
    llm_endpoint ep;
    cm_strlist headers;
    char base[512];
    const char *config_key; /* models.providers.<id>.apiKey or <PROVIDER>_API_KEY */
} endpoint;

static void endpoint_release(endpoint *e)
{
    for (size_t i = 0; i < e->headers.n; i++)
        free(e->headers.v[i]);
    free(e->headers.v);
    memset(e, 0, sizeof *e);
}

static cm_rc resolve_endpoint(const llm_runner *r, const char *provider, endpoint *e, char *err,
                              size_t errlen)
{
    cm_rc rc = CM_OK;
    memset(e, 0, sizeof *e);
    const json_t *pc = NULL;
    const char *key;
    json_t *v;
    json_object_foreach(path_get(r->cfg, "models", "providers", NULL), key, v)
    {
        char a[128], b[128];
        cm_auth_provider_norm(key, a, sizeof a);
        cm_auth_provider_norm(provider, b, sizeof b);
        if (!strcmp(a, b)) pc = v;
    }
    const char *api = json_string_value(json_object_get(pc, "api"));
    int a = api                              ? cm_llm_api_parse(api)
            : !strcmp(provider, "anthropic") ? LLM_API_ANTHROPIC
                                             : LLM_API_OPENAI;
    if (a < 0)
        FAIL(CM_EINVAL, "%s: api \"%s\" is not supported (openai-completions, anthropic-messages)",
             provider, api);
    e->ep.api = (llm_api)a;
    const char *base = json_string_value(json_object_get(pc, "baseUrl"));
    if (!base && strcmp(provider, "openai") && strcmp(provider, "anthropic"))
        FAIL(CM_EINVAL, "%s: models.providers.%s.baseUrl is not set", provider, provider);
    snprintf(e->base, sizeof e->base, "%s", base ? base : "");
    e->ep.base_url = e->base;
    const char *hk;
    json_t *hv;
    json_object_foreach(json_object_get(pc, "headers"), hk, hv)
    {
        const char *val = secret_value(hv);
        if (!val) continue;
        buf h = BUF_INIT;
        rc = cm_buf_printf(&h, "%s: %s", hk, val);
        if (!rc) rc = cm_config_header_set(&e->headers, h.data);
        cm_buf_release(&h);
        if (rc) FAIL(CM_ENOMEM, "out of memory");
    }
    e->ep.headers = &e->headers;
    e->config_key = secret_value(json_object_get(pc, "apiKey"));
    if (!e->config_key) {
        char env[160];
        size_t n = 0;
        for (const char *p = provider; *p && n < 120; p++)
            env[n++] = isalnum((unsigned char)*p) ? (char)toupper((unsigned char)*p) : '_';
        snprintf(env + n, sizeof env - n, "_API_KEY");
        const char *s = getenv(env);
        e->config_key = s && *s ? s : NULL;
    }
out:
    if (rc) endpoint_release(e);
    return rc;
}

cm_rc cm_llm_runner_auth_label(llm_runner *r, const char *provider, const char *pin, char *out,
                               size_t cap)
{
    cm_rc rc = CM_OK;
    auth_store store = {0};
    char **order = NULL, err[256];
    snprintf(out, cap, "unknown");
    if (!provider || !*provider) goto out;
    if (!cm_auth_store_init(&store, r->state_dir, r->agent_id, err, sizeof err)) {
        json_t *pinned = pin && *pin ? cm_auth_profile(&store, pin) : NULL;
        char a[128], b[128];
        cm_auth_provider_norm(json_string_value(json_object_get(pinned, "provider")), a, sizeof a);
        cm_auth_provider_norm(provider, b, sizeof b);
        if (cm_auth_profile_order(&store, json_object_get(r->cfg, "auth"), provider,
                                  pinned && !strcmp(a, b) ? pin : NULL, r->clock(r->clock_ctx),
                                  &order)) {
            rc = CM_ENOMEM;
            goto out;
        }
        if (order && order[0]) {
            const json_t *p = cm_auth_profile(&store, order[0]);
            const char *type = json_string_value(json_object_get(p, "type"));
            const char *email = json_string_value(json_object_get(
                json_object_get(path_get(r->cfg, "auth", "profiles", NULL), order[0]), "email"));
            if (!email || !*email) email = json_string_value(json_object_get(p, "email"));
            const char *mode = type && !strcmp(type, "oauth")   ? "oauth"
                               : type && !strcmp(type, "token") ? "token"
                                                                : "api-key";
            if (email && *email)
                snprintf(out, cap, "%s (%.120s (%.120s))", mode, order[0], email);
            else
                snprintf(out, cap, "%s (%.190s)", mode, order[0]);
            goto out;
        }
    }
    endpoint e;
    if (resolve_endpoint(r, provider, &e, err, sizeof err)) goto out;
    const json_t *pc = NULL;
    const char *key;
    json_t *v;
    json_object_foreach(path_get(r->cfg, "models", "providers", NULL), key, v)
    {
        char a[128], b[128];
        cm_auth_provider_norm(key, a, sizeof a);
        cm_auth_provider_norm(provider, b, sizeof b);
        if (!strcmp(a, b)) pc = v;
    }
    if (e.config_key && secret_value(json_object_get(pc, "apiKey"))) {
        snprintf(out, cap, "api-key (models.json)");
    } else if (e.config_key) {
        char env[160];
        size_t n = 0;
        for (const char *p = provider; *p && n < 120; p++)
            env[n++] = isalnum((unsigned char)*p) ? (char)toupper((unsigned char)*p) : '_';
        snprintf(env + n, sizeof env - n, "_API_KEY");
        snprintf(out, cap, "api-key (env: %s)", env);
    }
    endpoint_release(&e);
out:
    cm_auth_strv_free(order);
    cm_auth_store_release(&store);
    return rc;
}

/* Failures after which the next model is tried (seed: auth failures, rate
 * limits and timeouts that exhausted profile rotation). */
static bool advances(auth_reason x)
{
    return x == AUTH_R_AUTH || x == AUTH_R_AUTH_PERMANENT || x == AUTH_R_BILLING ||
           x == AUTH_R_RATE_LIMIT || x == AUTH_R_OVERLOADED || x == AUTH_R_TIMEOUT ||
           x == AUTH_R_MODEL_NOT_FOUND || x == AUTH_R_SESSION_EXPIRED;
}

/* ---- the run ---- */

typedef struct tried {
    buf log; /* "model: reason" per model, for the final message */
} tried;

/* The return code of a run that failed for good, by its last failure. */
static cm_rc failure_rc(auth_reason last)
{
    switch (last) {
    case AUTH_R_AUTH:
    case AUTH_R_AUTH_PERMANENT:
    case AUTH_R_SESSION_EXPIRED:
        return CM_EAUTH;
    case AUTH_R_RATE_LIMIT:
    case AUTH_R_OVERLOADED:
        return CM_ERATELIMIT;
    case AUTH_R_TIMEOUT:
        return CM_ETIMEOUT;
    case AUTH_R_BILLING:
        return CM_EBILLING;
    default:
        return CM_EIO;
    }
}

/* The reasoning effort rq asks of ref ("provider/model"), or NULL: none
 * asked, or one the model does not take (pi-ai's openai-completions compat:
 * not on xai or zai, nor where the model's compat.supportsReasoningEffort is
 * false). */
static const char *effort_for(const llm_runner *r, const char *provider, const char *ref,
                              const llm_request *rq)
{
    const char *e = rq->effort ? rq->effort(rq->effort_ctx, ref) : NULL;
    if (!e) return NULL;
    char want[128], have[128];
    cm_auth_provider_norm(provider, want, sizeof want);
    const json_t *pc = NULL;
    const char *key;
    json_t *v;
    json_object_foreach(path_get(r->cfg, "models", "providers", NULL), key, v)
    {
        cm_auth_provider_norm(key, have, sizeof have);
        if (!strcmp(have, want)) pc = v;
    }
    const char *base = json_string_value(json_object_get(pc, "baseUrl"));
    bool off = !strcmp(want, "xai") || !strcmp(want, "zai") ||
               (base && (strstr(base, "api.x.ai") || strstr(base, "api.z.ai")));
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(pc, "models"), i, m)
    {
        const char *id = json_string_value(json_object_get(m, "id"));
        const json_t *c = json_object_get(json_object_get(m, "compat"), "supportsReasoningEffort");
        if (id && !strcmp(id, strchr(ref, '/') + 1) && json_is_boolean(c)) off = !json_is_true(c);
    }
    return off ? NULL : e;
}

/* The entry of ref ("provider/model") in models.providers.<provider>.models[]
 * (provider names compared normalised; the last one listed), or NULL. */
static const json_t *model_entry(const llm_runner *r, const char *provider, const char *ref)
{
    char want[128], have[128];
    cm_auth_provider_norm(provider, want, sizeof want);
    const char *key;
    json_t *pc;
    const json_t *found = NULL;
    json_object_foreach(path_get(r->cfg, "models", "providers", NULL), key, pc)
    {
        cm_auth_provider_norm(key, have, sizeof have);
        if (strcmp(have, want)) continue;
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(pc, "models"), i, m)
        {
            const char *id = json_string_value(json_object_get(m, "id"));
            if (id && !strcmp(id, strchr(ref, '/') + 1)) found = m;
        }
    }
    return found;
}

/* The maxTokens of ref as QuantumClaw's config defaults (applyModelDefaults)
 * make it for a model listed in models.providers.<provider>.models[]: its
 * maxTokens, else min(8192, contextWindow), at most its contextWindow
 * (default 200000); 0 when the model is not listed. */
static int model_max_tokens(const llm_runner *r, const char *provider, const char *ref)
{
    const json_t *m = model_entry(r, provider, ref);
    if (!m) return 0;
    json_t *mt = json_object_get(m, "maxTokens"), *cw = json_object_get(m, "contextWindow");
    double w = json_is_number(cw) && json_number_value(cw) > 0 ? json_number_value(cw) : 200000;
    double t =
        json_is_number(mt) && json_number_value(mt) > 0 ? json_number_value(mt) : CM_MIN(8192, w);
    t = CM_MIN(t, w);
    return t >= INT32_MAX ? INT32_MAX : t >= 1 ? (int)t : 1;
}

/* Whether ref takes its token limit as max_tokens rather than
 * max_completion_tokens: pi-ai's openai-completions compat.maxTokensField,
 * the model's own ("max_tokens" or "max_completion_tokens") else
 * "max_tokens" for a chutes.ai baseUrl only. */
static bool max_tokens_field_for(const llm_runner *r, const char *provider, const char *ref,
                                 const char *base_url)
{
    const json_t *m = model_entry(r, provider, ref);
    const char *f =
        json_string_value(json_object_get(json_object_get(m, "compat"), "maxTokensField"));
    if (f && (!strcmp(f, "max_tokens") || !strcmp(f, "max_completion_tokens")))
        return !strcmp(f, "max_tokens");
    return base_url && strstr(base_url, "chutes.ai");
}

/* The host of url in lower case, as a WHATWG URL's hostname (after
 * "scheme://" and any "user@", up to the port or path); "" when url has no
 * "://" (an address the reference cannot parse). */
static void url_host(const char *url, char *out, size_t outlen)
{
    size_t n = 0;
    const char *p = url ? strstr(url, "://") : NULL;
    if (p) {
        p += 3;
        size_t end = strcspn(p, "/?#");
        const char *at = memchr(p, '@', end);
        if (at) p = at + 1;
        for (; *p && !strchr(":/?#", *p) && n + 1 < outlen; p++)
            out[n++] = (char)tolower((unsigned char)*p);
    }
    out[n] = 0;
}

/* Whether base_url, lower case and without trailing slashes, is want. */
static bool base_is(const char *base_url, const char *want)
{
    size_t n = base_url ? strlen(base_url) : 0;
    while (n && base_url[n - 1] == '/')
        n--;
    return n == strlen(want) && !strncasecmp(base_url, want, n);
}

/* The boolean compat.<key> of ref's model entry: 1 true, 0 false, -1 unset. */
static int model_compat(const llm_runner *r, const char *provider, const char *ref,
                        const char *key)
{
    const json_t *v = json_object_get(
        json_object_get(model_entry(r, provider, ref), "compat"), key);
    return json_is_boolean(v) ? json_is_true(v) : -1;
}

/* Sets rq's stream-usage and store choices for an openai-completions
 * attempt at base_url as the reference makes them: the model's
 * compat.supportsUsageInStreaming, else true on api.openai.com, on no
 * baseUrl and on native Moonshot / Model Studio endpoints and false on any
 * other host (QuantumClaw's normalizeModelCompat); the model's
 * compat.supportsStore, else true unless the provider or baseUrl is one pi-ai
 * calls non-standard (cerebras, xai, zai, opencode, chutes.ai, deepseek.com).
 * stream_options goes with a streamed request when usage is supported; the
 * body says "store": false when store is. */
static void stream_compat_for(const llm_runner *r, const char *provider, const char *ref,
                              const char *base_url, llm_request *rq)
{
    char p[128], host[256];
    cm_auth_provider_norm(provider, p, sizeof p);
    url_host(base_url, host, sizeof host);
    const char *b = base_url ? base_url : "";
    int usage = model_compat(r, provider, ref, "supportsUsageInStreaming");
    if (usage < 0) {
        bool native = !*b || !strcmp(host, "api.openai.com") ||
                      (!strcmp(provider, "moonshot") &&
                       (base_is(b, "https://api.moonshot.ai/v1") ||
                        base_is(b, "https://api.moonshot.cn/v1"))) ||
                      (!strcmp(provider, "modelstudio") &&
                       (base_is(b, "https://coding-intl.dashscope.aliyuncs.com/v1") ||
                        base_is(b, "https://coding.dashscope.aliyuncs.com/v1")));
        usage = native;
    }
    int store = model_compat(r, provider, ref, "supportsStore");
    if (store < 0) {
        static const char *const np[] = {"cerebras", "xai", "zai", "opencode"};
        static const char *const nb[] = {"cerebras.ai", "api.x.ai",    "chutes.ai",
                                         "deepseek.com", "api.z.ai", "opencode.ai"};
        store = 1;
        for (size_t i = 0; i < ARRAY_LEN(np); i++)
            if (!strcmp(p, np[i])) store = 0;
        for (size_t i = 0; i < ARRAY_LEN(nb); i++)
            if (strstr(b, nb[i])) store = 0;
    }
    rq->no_stream_usage = !usage;
    rq->store_false = store;
}

cm_rc cm_llm_run(llm_runner *r, const llm_turn *t, llm_request *rq, llm_delta_fn on_delta,
                 void *ctx, llm_response *out, llm_outcome *oc, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    char chain[MAX_CHAIN][192];
    int n = build_chain(r, t, chain);
    auth_store store = {0};
    tried log = {BUF_INIT};
    char msg[600] = "";
    auth_reason last = AUTH_R_NONE; /* the class of the last failure */
    memset(out, 0, sizeof *out);
    cm_buf_init(&out->text, 0);
    cm_buf_init(&out->reasoning, 0);
    memset(oc, 0, sizeof *oc);
    CHECK(cm_auth_store_init(&store, r->state_dir, r->agent_id, err, errlen));
    for (int mi = 0; mi < n; mi++) {
        char provider[128];
        const char *slash = strchr(chain[mi], '/');
        snprintf(provider, sizeof provider, "%.*s", (int)(slash - chain[mi]), chain[mi]);
        rq->model = slash + 1;
        rq->provider = provider;
        rq->reasoning_effort = effort_for(r, provider, chain[mi], rq);
        rq->model_max_tokens = model_max_tokens(r, provider, chain[mi]);
        memcpy(oc->model, chain[mi], sizeof oc->model); /* both 192 bytes, NUL-terminated */
        endpoint e;
        if (resolve_endpoint(r, provider, &e, msg, sizeof msg)) {
            if (cm_buf_printf(&log.log, "%s%s: %s", log.log.len ? "; " : "", chain[mi], msg))
                FAIL(CM_ENOMEM, "out of memory");
            continue;
        }
        rq->max_tokens_field = max_tokens_field_for(r, provider, chain[mi], e.ep.base_url);
        stream_compat_for(r, provider, chain[mi], e.ep.base_url, rq);
        snprintf(oc->api, sizeof oc->api, "%s", cm_llm_api_name(e.ep.api));
        int64_t now = r->clock(r->clock_ctx);
        /* Candidates: the provider's profiles in order (the session's pin
         * first; a user pin alone), else the configured key. */
        char **order = NULL;
        const char *pin = t->pin && t->pin->profile[0] ? t->pin->profile : NULL;
        json_t *pinned = pin ? cm_auth_profile(&store, pin) : NULL;
        const char *pin_provider = json_string_value(json_object_get(pinned, "provider"));
        char a[128], b[128];
        cm_auth_provider_norm(pin_provider, a, sizeof a);
        cm_auth_provider_norm(provider, b, sizeof b);
        bool pin_here = pinned && !strcmp(a, b);
        if (cm_auth_profile_order(&store, json_object_get(r->cfg, "auth"), provider,
                                  pin_here ? pin : NULL, now, &order)) {
            endpoint_release(&e);
            FAIL(CM_ENOMEM, "out of memory");
        }
        bool user_locked = pin_here && t->pin->user;
        if (user_locked) { /* the user's profile alone, cooling or not */
            cm_auth_strv_free(order);
            order = calloc(2, sizeof *order);
            if (!order || !(order[0] = cm_strdup(pin))) {
                cm_auth_strv_free(order);
                endpoint_release(&e);
                FAIL(CM_ENOMEM, "out of memory");
            }
        }
        bool have_profiles = order && order[0];
        last = AUTH_R_NONE;
        bool done = false, stop = false;
        size_t ncand = have_profiles ? 0 : 1;
        while (have_profiles && order[ncand])
            ncand++;
        for (size_t ci = 0; ci < ncand && !done && !stop; ci++) {
            const char *profile = have_profiles ? order[ci] : "";
            const char *secret =
                have_profiles ? cm_auth_profile_secret(&store, profile) : e.config_key;
            now = r->clock(r->clock_ctx);
            if (have_profiles && cm_auth_profile_unusable(&store, profile, now) && !user_locked) {
                /* Cooling down or disabled: not tried; what keeps it out
                 * counts as this model's failure. */
                const char *one[] = {profile, NULL};
                auth_reason why = cm_auth_unavailable_reason(&store, one, now);
                if (last == AUTH_R_NONE) last = why == AUTH_R_NONE ? AUTH_R_RATE_LIMIT : why;
                snprintf(msg, sizeof msg, "profile %s unavailable (%s)", profile,
                         cm_auth_reason_name(why == AUTH_R_NONE ? AUTH_R_UNKNOWN : why));
                continue;
            }
            if (!have_profiles && !secret && e.base[0] == 0) {
                snprintf(msg, sizeof msg,
                         "no credentials for %s (auth profiles, models.providers.%s.apiKey or the "
                         "environment)",
                         provider, provider);
                last = AUTH_R_AUTH;
                continue;
            }
            if (have_profiles && cm_llm_oauth_expired(&store, profile, now)) {
                char why[400];
                if (cm_llm_oauth_refresh(&store, r->auth_path, profile,
                                         path_get(r->cfg, "clawmem", "oauth", NULL), now, why,
                                         sizeof why)) {
                    snprintf(msg, sizeof msg, "%s", why);
                    last = AUTH_R_AUTH;
                    char ign[256];
                    cm_auth_mark_failure(&store, r->auth_path, profile, last, &r->cooldowns, now,
                                         ign, sizeof ign);
                    if (user_locked) break;
                    continue;
                }
                secret = cm_auth_profile_secret(&store, profile);
            }
            e.ep.api_key = secret;
            const char *ptype =
                have_profiles
                    ? json_string_value(json_object_get(cm_auth_profile(&store, profile), "type"))
                    : NULL;
            e.ep.bearer = ptype && (!strcmp(ptype, "oauth") || !strcmp(ptype, "token"));
            snprintf(oc->profile, sizeof oc->profile, "%s", profile);
            llm_error le;
            cm_llm_response_release(out);
            oc->attempts++;
            rc = cm_llm_chat(&e.ep, rq, on_delta, ctx, out, &le, msg, sizeof msg);
            now = r->clock(r->clock_ctx);
            if (rc == CM_OK) {
                if (have_profiles) {
                    char ign[256];
                    cm_auth_mark_success(&store, r->auth_path, provider, profile, now, ign,
                                         sizeof ign);
                    if (t->pin && !t->pin->user)
                        snprintf(t->pin->profile, sizeof t->pin->profile, "%s", profile);
                }
                done = true;
                break;
            }
            if (rc == CM_ENOMEM || rc == CM_ECANCELED) break;
            if (le.context_overflow) {
                rc = CM_ETOOBIG;
                stop = true;
                break;
            }
            last = le.reason;
            if (last == AUTH_R_NONE) { /* a plain failure: neither rotated nor advanced */
                stop = true;
                break;
            }
            if (have_profiles) {
                char ign[256];
                int64_t nb = le.retry_after_ms > 0 ? now + le.retry_after_ms : 0;
                cm_auth_mark_failure_until(&store, r->auth_path, profile, last, &r->cooldowns, nb,
                                           now, ign, sizeof ign);
                if (t->pin && !t->pin->user && !strcmp(t->pin->profile, profile))
                    t->pin->profile[0] = 0; /* an auto pin rotates away */
            }
            if (user_locked) break; /* a user pin never switches profiles */
        }
        cm_auth_strv_free(order);
        endpoint_release(&e);
        if (done) {
            rc = CM_OK;
            goto out;
        }
        if (rc == CM_ENOMEM) FAIL(CM_ENOMEM, "out of memory");
        if (rc == CM_ECANCELED) FAIL(CM_ECANCELED, "%s", msg);
        if (cm_buf_printf(&log.log, "%s%s: %s", log.log.len ? "; " : "", chain[mi], msg))
            FAIL(CM_ENOMEM, "out of memory");
        if (rc == CM_ETOOBIG)
            FAIL(CM_ETOOBIG, "%s: the prompt exceeds the model's context (%s)", chain[mi], msg);
        if (stop || !advances(last)) FAIL(failure_rc(last), "%s", log.log.data);
    }
    FAIL(failure_rc(last), "every model failed: %s",
         log.log.len ? log.log.data : "no model configured");
out:
    cm_auth_store_release(&store);
    cm_buf_release(&log.log);
    return rc;
}
