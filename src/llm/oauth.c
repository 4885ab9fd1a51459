/*
 * oauth.c — refreshing an OAuth profile's access token before a request
 * (runner.h: cm_llm_oauth_refresh). The refresh runs inside the auth store's
 * lock and re-reads the profile first, so when several processes find the
 * same token expired only one of them spends the (single-use) refresh
 * token; the others find the fresh one. Endpoints and client ids are the
 * ones pi-coding-agent uses for QuantumClaw's OAuth providers; a config may
 * point a provider elsewhere (clawmem.oauth.<provider>.tokenUrl, clientId).
 */
#include <ctype.h>

#include "../net/http.h"
#include "runner.h"
#include "../base/caps.h"

typedef struct oauth_provider {
    const char *provider, *token_url, *client_id;
    bool json_body;    /* JSON, else form-encoded */
    int64_t margin_ms; /* subtracted from expires_in */
} oauth_provider;

static const oauth_provider known[] = {
    {"anthropic", "https://platform.claude.com/v1/oauth/token",
     "9d1c250a-e61b-44d9-88ed-5944d1962f5e", true, 5 * 60 * 1000},
    {"openai-codex", "https://auth.openai.com/oauth/token", "app_EMoamEEZ73f0CkXaXp7hrann", false,
     0},
};

bool cm_llm_oauth_expired(const auth_store *s, const char *profile_id, int64_t now)
{
    json_t *p = cm_auth_profile(s, profile_id);
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type || strcmp(type, "oauth") != 0) return false;
    json_t *e = json_object_get(p, "expires");
    return json_is_number(e) && (int64_t)json_number_value(e) <= now;
}

/* Appends "name=value" form-encoded. */
static cm_rc form_add(buf *b, const char *name, const char *value)
{
    cm_rc rc = cm_buf_printf(b, "%s%s=", b->len ? "&" : "", name);
    for (const unsigned char *p = (const unsigned char *)value; !rc && *p; p++)
        rc = (isalnum(*p) || strchr("-._~", *p)) ? cm_buf_addc(b, (char)*p)
                                                 : cm_buf_printf(b, "%%%02X", *p);
    return rc;
}

typedef struct refresh_ctx {
    const char *profile_id;
    oauth_provider ep;
    long status;
    char why[300];
} refresh_ctx;

static bool collect(http_fetch *f, const char *p, size_t n)
{
    buf *b = f->ctx;
    return cm_buf_add(b, p, n) == CM_OK;
}

static cm_rc refresh_fn(json_t *doc, void *vctx, int64_t now, bool *changed, char *err,
                        size_t errlen)
{
    refresh_ctx *c = vctx;
    cm_rc rc = CM_OK;
    buf body = BUF_INIT, answer = BUF_INIT;
    json_t *ans = NULL;
    cm_strlist headers = {0};
    auth_store view = {NULL, doc};
    if (!cm_llm_oauth_expired(&view, c->profile_id, now)) return CM_OK; /* refreshed meanwhile */
    json_t *p = cm_auth_profile(&view, c->profile_id);
    const char *refresh = json_string_value(json_object_get(p, "refresh"));
    if (!refresh || !*refresh)
        FAIL(CM_EINVAL, "%s: no refresh token to renew the access token", c->profile_id);
    const char *client = json_string_value(json_object_get(p, "clientId"));
    if (!client) client = c->ep.client_id;
    if (c->ep.json_body) {
        json_t *j = json_pack("{s:s,s:s,s:s}", "grant_type", "refresh_token", "client_id",
                              client ? client : "", "refresh_token", refresh);
        char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!t || cm_buf_adds(&body, t)) {
            free(t);
            FAIL(CM_ENOMEM, "out of memory");
        }
        free(t);
    } else if (form_add(&body, "grant_type", "refresh_token") ||
               form_add(&body, "refresh_token", refresh) ||
               (client && form_add(&body, "client_id", client))) {
        FAIL(CM_ENOMEM, "out of memory");
    }
    if (cm_config_header_set(&headers, c->ep.json_body
                                           ? "Content-Type: application/json"
                                           : "Content-Type: application/x-www-form-urlencoded") ||
        cm_config_header_set(&headers, "Accept: application/json"))
        FAIL(CM_ENOMEM, "out of memory");
    cm_buf_init(&answer, CM_CAP_OAUTH_ANSWER);
    http_fetch f = {.url = c->ep.token_url,
                    .headers = &headers,
                    .body = body.data,
                    .body_len = body.len,
                    .timeout_ms = 30000,
                    .stall_ms = 30000,
                    .on_data = collect,
                    .ctx = &answer};
    char why[300];
    if (cm_http_fetch_run(&f, why, sizeof why))
        FAIL(CM_EIO, "%s: token refresh failed: %s", c->profile_id, why);
    c->status = f.status;
    ans = answer.len ? json_loadb(answer.data, answer.len, 0, NULL) : NULL;
    const char *access = json_string_value(json_object_get(ans, "access_token"));
    json_t *exp = json_object_get(ans, "expires_in");
    if (f.status < 200 || f.status >= 300 || !access || !*access || !json_is_number(exp)) {
        /* Never echo the answer: it may hold tokens. Its error code only
         * when it has the shape of one (RFC 6749 5.2: invalid_grant, …), so
         * a server that echoes our refresh token there shows nothing. */
        const char *code = json_string_value(json_object_get(ans, "error"));
        if (code &&
            (!*code || strlen(code) >= 60 || code[strspn(code, "abcdefghijklmnopqrstuvwxyz_")]))
            code = NULL;
        FAIL(CM_EIO, "%s: token refresh failed: HTTP %ld%s%s", c->profile_id, f.status,
             code ? ": " : "", code ? code : "");
    }
    const char *nrefresh = json_string_value(json_object_get(ans, "refresh_token"));
    json_object_set_new(p, "access", json_string(access));
    if (nrefresh && *nrefresh) json_object_set_new(p, "refresh", json_string(nrefresh));
    json_object_set_new(
        p, "expires",
        json_integer(now + (int64_t)(json_number_value(exp) * 1000) - c->ep.margin_ms));
    *changed = true;
out:
    json_decref(ans);
    cm_buf_release(&body);
    cm_buf_release(&answer);
    for (size_t i = 0; i < headers.n; i++)
        free(headers.v[i]);
    free(headers.v);
    return rc;
}

cm_rc cm_llm_oauth_refresh(auth_store *s, const char *path, const char *profile_id,
                           const json_t *overrides, int64_t now, char *err, size_t errlen)
{
    json_t *p = cm_auth_profile(s, profile_id);
    const char *provider = json_string_value(json_object_get(p, "provider"));
    char norm[128];
    cm_auth_provider_norm(provider, norm, sizeof norm);
    refresh_ctx c = {profile_id, {norm, NULL, NULL, false, 0}, 0, ""};
    for (size_t i = 0; i < ARRAY_LEN(known); i++)
        if (!strcmp(norm, known[i].provider)) c.ep = known[i];
    const json_t *o = json_object_get(overrides, norm);
    const char *url = json_string_value(json_object_get(o, "tokenUrl"));
    const char *client = json_string_value(json_object_get(o, "clientId"));
    if (url) c.ep.token_url = url;
    if (client) c.ep.client_id = client;
    if (!c.ep.token_url)
        return cm_seterr(err, errlen, CM_EINVAL,
                         "%s: no token endpoint for provider %s (clawmem.oauth.%s.tokenUrl)",
                         profile_id, norm, norm);
    return cm_auth_store_update(s, path, now, refresh_fn, &c, err, errlen);
}
