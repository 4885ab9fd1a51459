/*
 * chat_client.c — `clawmem chat` behind cm_chat_send
 * (include/clawmem/gateway.h): a message to the gateway that runs for the
 * state directory (over its HTTP channel with the gateway token, then its
 * replies polled until the conversation is quiet), or, when none runs, one
 * turn of the agent's main session in this process.
 */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../agent/session_turn.h"
#include "../config/config.h"
#include "../config/secret.h"
#include "../net/http.h"
#include "gateway_int.h"

/* The gateway token for a client: gateway.auth.token or the environment. */
static char *S_client_token(const json_t *root)
{
    const json_t *tok =
        json_object_get(json_object_get(json_object_get(root, "gateway"), "auth"), "token");
    char *t = NULL, why[128];
    secrets sec = {{json_object_get(root, "secrets"), NULL}};
    if (tok && !cm_secret_resolve(&sec, tok, &t, why, sizeof why)) return t;
    const char *env = getenv("QUANTUMCLAW_GATEWAY_TOKEN");
    return env && *env ? cm_strdup(env) : NULL;
}

/* One request to the running gateway; resp receives the body. */
static cm_rc S_call(http_client *hc, const char *url, const char *auth, const char *body,
                    long *status, buf *resp, char *err, size_t errlen)
{
    char *hv[2] = {(char *)auth, (char *)"Content-Type: application/json"};
    cm_strlist h = {hv, 2};
    http_req q;
    memset(&q, 0, sizeof q);
    q.url = url;
    q.headers = &h;
    q.body = body;
    q.body_len = body ? strlen(body) : 0;
    http_opts o = cm_http_defaults(10000);
    o.max_attempts = 1;
    cm_rc rc = cm_http_post_all(hc, &q, 1, &o, err, errlen);
    *status = q.status;
    cm_buf_reset(resp);
    if (cm_buf_add(resp, q.resp.data, q.resp.len) && !rc) rc = CM_ENOMEM;
    cm_buf_release(&q.resp);
    return rc;
}

static bool S_fetch_data(http_fetch *f, const char *p, size_t n)
{
    return cm_buf_add(f->ctx, p, n) == CM_OK;
}

static cm_rc S_get(const char *url, const char *auth, long *status, buf *resp, char *err,
                   size_t errlen)
{
    char *hv[1] = {(char *)auth};
    cm_strlist h = {hv, 1};
    http_fetch f;
    memset(&f, 0, sizeof f);
    f.url = url;
    f.headers = &h;
    f.timeout_ms = 10000;
    f.on_data = S_fetch_data;
    cm_buf_reset(resp);
    f.ctx = resp;
    cm_rc rc = cm_http_fetch_run(&f, err, errlen);
    *status = f.status;
    return rc;
}

static void S_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Through the running gateway at addr: POST, then poll the replies until
 * one came and the conversation is quiet for a moment. */
static cm_rc S_chat_remote(const json_t *root, const char *addr, const char *text, int timeout_ms,
                           cm_chat_fn fn, void *ctx, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf url = BUF_INIT, auth = BUF_INIT, resp = BUF_INIT;
    http_client *hc = NULL;
    json_t *o = NULL;
    char *body = NULL, *tok = S_client_token(root);
    if (!tok) FAIL(CM_ECONFIG, "a gateway runs but no token is configured (gateway.auth.token)");
    CHECK(cm_buf_printf(&auth, "Authorization: Bearer %s", tok) ? CM_ENOMEM : CM_OK);
    long status = 0;
    CHECK(cm_buf_printf(&url, "http://%s/v1/replies?peer=terminal&account=default", addr)
              ? CM_ENOMEM
              : CM_OK);
    CHECK(S_get(url.data, auth.data, &status, &resp, err, errlen));
    if (status != 200) FAIL(CM_EIO, "the gateway answered %ld", status);
    o = json_loadb(resp.data, resp.len, 0, NULL);
    json_int_t after = json_integer_value(json_object_get(o, "last"));
    json_decref(o);
    char mid[64];
    snprintf(mid, sizeof mid, "chat-%ld-%lld", (long)getpid(), (long long)cm_wall_ms());
    o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "channel", "terminal", "peer", "terminal", "sender",
                  "terminal", "chatType", "direct", "messageId", mid, "text", text);
    body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    o = NULL;
    if (!body) FAIL(CM_ENOMEM, "out of memory");
    CHECK(cm_http_client_open(&hc, err, errlen));
    cm_buf_reset(&url);
    CHECK(cm_buf_printf(&url, "http://%s/v1/messages", addr) ? CM_ENOMEM : CM_OK);
    CHECK(S_call(hc, url.data, auth.data, body, &status, &resp, err, errlen));
    if (status == 503) FAIL(CM_EBUSY, "the gateway is shutting down");
    if (status != 202) FAIL(CM_EIO, "the gateway refused the message (HTTP %ld)", status);
    int64_t end = cm_now_ms() + timeout_ms, quiet = 0;
    bool got = false;
    while (cm_now_ms() < end) {
        cm_buf_reset(&url);
        CHECK(cm_buf_printf(&url, "http://%s/v1/replies?peer=terminal&account=default&after=%lld",
                            addr, (long long)after)
                  ? CM_ENOMEM
                  : CM_OK);
        CHECK(S_get(url.data, auth.data, &status, &resp, err, errlen));
        o = json_loadb(resp.data, resp.len, 0, NULL);
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(o, "replies"), i, r)
        {
            fn(ctx, json_string_value(json_object_get(r, "text")));
            got = true;
            quiet = cm_now_ms() + 1500;
        }
        if (json_array_size(json_object_get(o, "replies")))
            after = json_integer_value(json_object_get(o, "last"));
        json_decref(o);
        o = NULL;
        if (got && cm_now_ms() >= quiet) break;
        S_sleep_ms(100);
    }
    if (!got) FAIL(CM_ETIMEOUT, "no reply from the gateway within %d ms", timeout_ms);
out:
    if (hc) cm_http_client_close(hc);
    if (tok) explicit_bzero(tok, strlen(tok));
    if (auth.data) explicit_bzero(auth.data, auth.len);
    free(tok);
    free(body);
    json_decref(o);
    cm_buf_release(&url);
    cm_buf_release(&auth);
    cm_buf_release(&resp);
    return rc;
}

cm_rc cm_chat_send(const cm_options *opt, const char *text, int timeout_ms, cm_chat_fn on_text,
                   void *ctx, const char **via, char *err, size_t errlen)
{
    cm_config cfg = {0};
    json_t *st = NULL;
    cm_agent *a = NULL;
    char *json = NULL;
    cm_rc rc = cm_gw_status_read(opt, &cfg, &st, err, errlen);
    if (rc) goto out;
    const char *addr = json_string_value(json_object_get(st, "address"));
    if (json_is_true(json_object_get(st, "running")) && addr) {
        *via = "gateway";
        rc = S_chat_remote(cfg.root, addr, text, timeout_ms, on_text, ctx, err, errlen);
        goto out;
    }
    *via = "local";
    rc = cm_agent_open(opt, &a, err, errlen);
    if (!rc) rc = cm_agent_turn(a, "main", text, NULL, NULL, NULL, &json, err, errlen);
    if (!rc) {
        json_t *o = json_loads(json, 0, NULL);
        const char *r = json_string_value(json_object_get(o, "reply"));
        if (r && *r && !json_is_true(json_object_get(o, "silent"))) on_text(ctx, r);
        json_decref(o);
    }
out:
    cm_free(json);
    cm_agent_close(a);
    json_decref(st);
    cm_config_release(&cfg);
    return rc;
}
