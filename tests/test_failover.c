/*
 * test_failover.c — the model runner (src/llm/runner.c) against the loopback
 * server's scripted answers, with a fake clock: profile rotation and
 * cooldowns, the fallback chain and what advances it, override runs ending at
 * the primary, session pins (auto and user), Retry-After, context overflow,
 * and keys that never reach a message.
 */
#include <jansson.h>

#include "../src/llm/runner.h"
#include "fakeserver.h"
#include "test.h"

#define T0  1800000000000LL
#define MIN 60000LL

static int64_t fake_now = T0;

static int64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

typedef struct rig {
    fake_server *fs;
    char base[64];
    char *state;
    json_t *cfg;
    llm_runner *r;
    char auth_path[1024];
} rig;

/* A runner whose openai and anthropic providers both point at the fake
 * server; model settings from models_json (agents.defaults.model). */
static bool rig_start(rig *g, const char *profiles_json, const char *model_json)
{
    memset(g, 0, sizeof *g);
    fake_now = T0;
    g->fs = fake_start(8, g->base);
    g->state = tmp_dir();
    if (profiles_json) write_file(g->state, "agents/main/agent/auth-profiles.json", profiles_json);
    snprintf(g->auth_path, sizeof g->auth_path, "%s/agents/main/agent/auth-profiles.json",
             g->state);
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"agents\":{\"defaults\":{\"model\":%s}},"
             "\"models\":{\"providers\":{"
             "\"openai\":{\"baseUrl\":\"%s/v1\",\"api\":\"openai-completions\"},"
             "\"anthropic\":{\"baseUrl\":\"%s\",\"api\":\"anthropic-messages\"}}}}",
             model_json, g->base, g->base);
    json_error_t je;
    g->cfg = json_loads(cfg, 0, &je);
    if (!g->cfg) {
        test_fail(__FILE__, __LINE__, "config: %s", je.text);
        return false;
    }
    llm_runner_opts o = {g->cfg, g->state, "main", fake_clock, NULL};
    char err[256];
    if (cm_llm_runner_open(&o, &g->r, err, sizeof err) != CM_OK) {
        test_fail(__FILE__, __LINE__, "open: %s", err);
        return false;
    }
    return true;
}

static void rig_stop(rig *g)
{
    cm_llm_runner_close(g->r);
    json_decref(g->cfg);
    fake_stop(g->fs);
}

static void push_openai_ok(rig *g, const char *text)
{
    buf b = BUF_INIT;
    cm_buf_printf(&b,
                  "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                  "data: "
                  "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"},\"finish_reason\":"
                  "\"stop\"}]}\n\n"
                  "data: [DONE]\n\n",
                  text);
    fake_push_raw(g->fs, b.data, true);
    cm_buf_release(&b);
}

static void push_anthropic_ok(rig *g, const char *text)
{
    buf b = BUF_INIT;
    cm_buf_printf(
        &b,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"text_delta\",\"text\":\"%s\"}}\n\n"
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        text);
    fake_push_raw(g->fs, b.data, true);
    cm_buf_release(&b);
}

static void push_error(rig *g, int status, const char *extra, const char *message)
{
    buf body = BUF_INIT, b = BUF_INIT;
    cm_buf_printf(&body, "{\"error\":{\"message\":\"%s\"}}", message);
    cm_buf_printf(&b,
                  "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n%s"
                  "Connection: close\r\n\r\n%s",
                  status, body.len, extra ? extra : "", body.data);
    fake_push_raw(g->fs, b.data, true);
    cm_buf_release(&body);
    cm_buf_release(&b);
}

static const llm_message hello[] = {{LLM_USER, "hello", NULL, 0, NULL, NULL, false, NULL, 0, NULL, NULL, NULL}};

static cm_rc run(rig *g, const char *model, llm_pin *pin, llm_outcome *oc, char *err, size_t errlen,
                 char *text, size_t textlen)
{
    llm_request rq = {NULL, NULL, hello, 1,    NULL, 0,    0,   true,
                      NULL, NULL, NULL,  NULL, NULL, NULL, NULL, 0, NULL, false, false, false};
    llm_turn t = {model, false, pin};
    llm_response out;
    cm_rc rc = cm_llm_run(g->r, &t, &rq, NULL, NULL, &out, oc, err, errlen);
    if (text) snprintf(text, textlen, "%s", out.text.data);
    cm_llm_response_release(&out);
    return rc;
}

/* The model and the key of request i. */
static const char *req_model(rig *g, int i, char *out, size_t n)
{
    const fake_request *q = fake_get(g->fs, i);
    json_t *b = q ? json_loads(q->body, 0, NULL) : NULL;
    snprintf(out, n, "%s", json_string_value(json_object_get(b, "model")) ?: "?");
    json_decref(b);
    return out;
}

static json_t *stats(rig *g, const char *profile)
{
    json_t *doc = json_load_file(g->auth_path, 0, NULL);
    json_t *s = json_incref(json_object_get(json_object_get(doc, "usageStats"), profile));
    json_decref(doc);
    return s;
}

#define PROFILES_AB                                                                                \
    "{\"version\":1,\"profiles\":{"                                                                \
    "\"openai:a\":{\"type\":\"api_key\",\"provider\":\"openai\",\"key\":\"sk-key-aaaa\"},"         \
    "\"openai:b\":{\"type\":\"api_key\",\"provider\":\"openai\",\"key\":\"sk-key-bbbb\"},"         \
    "\"anthropic:default\":{\"type\":\"api_key\",\"provider\":\"anthropic\",\"key\":\"sk-ant-"     \
    "cccc\"}},"                                                                                    \
    "\"usageStats\":{\"openai:a\":{\"lastUsed\":100},\"openai:b\":{\"lastUsed\":50}}}"

TEST(failover_auth_failures_rotate_then_fall_back)
{
    rig g;
    if (!rig_start(&g, PROFILES_AB,
                   "{\"primary\":\"openai/gpt-a\",\"fallbacks\":[\"anthropic/claude-b\"]}"))
        return;
    push_error(&g, 401, NULL, "Incorrect API key provided: sk-key-bbbb");
    push_error(&g, 401, NULL, "Incorrect API key provided: sk-key-aaaa");
    push_anthropic_ok(&g, "hi from claude");
    llm_outcome oc;
    char err[1024], text[64], m[64];
    EXPECT_INT(run(&g, NULL, NULL, &oc, err, sizeof err, text, sizeof text), CM_OK);
    EXPECT_STR(text, "hi from claude");
    EXPECT_STR(oc.model, "anthropic/claude-b");
    EXPECT_STR(oc.profile, "anthropic:default");
    EXPECT_INT(oc.attempts, 3);
    EXPECT_INT(fake_count(g.fs), 3);
    /* b first (oldest lastUsed), then a, then the fallback. */
    EXPECT_CONTAINS(fake_get(g.fs, 0)->headers, "Bearer sk-key-bbbb");
    EXPECT_CONTAINS(fake_get(g.fs, 1)->headers, "Bearer sk-key-aaaa");
    EXPECT_STR(req_model(&g, 1, m, sizeof m), "gpt-a");
    EXPECT_STR(req_model(&g, 2, m, sizeof m), "claude-b");
    EXPECT_CONTAINS(fake_get(g.fs, 2)->headers, "x-api-key: sk-ant-cccc");
    json_t *sa = stats(&g, "openai:a"), *sb = stats(&g, "openai:b"),
           *sc = stats(&g, "anthropic:default");
    EXPECT_INT(json_integer_value(json_object_get(sa, "cooldownUntil")), T0 + MIN);
    EXPECT_INT(json_integer_value(json_object_get(json_object_get(sb, "failureCounts"), "auth")),
               1);
    EXPECT_INT(json_integer_value(json_object_get(sc, "lastUsed")), T0);
    json_decref(sa);
    json_decref(sb);
    json_decref(sc);

    /* Both openai profiles now cool down: the next run sends nothing to
     * openai and goes straight to the fallback. */
    fake_now += 30000;
    push_anthropic_ok(&g, "again");
    EXPECT_INT(run(&g, NULL, NULL, &oc, err, sizeof err, text, sizeof text), CM_OK);
    EXPECT_INT(fake_count(g.fs), 4);
    EXPECT_STR(req_model(&g, 3, m, sizeof m), "claude-b");
    /* After the cooldown the primary is used again. */
    fake_now = T0 + MIN + 1;
    push_openai_ok(&g, "back");
    EXPECT_INT(run(&g, NULL, NULL, &oc, err, sizeof err, text, sizeof text), CM_OK);
    EXPECT_STR(oc.model, "openai/gpt-a");
    EXPECT_STR(text, "back");
    rig_stop(&g);
}

TEST(failover_what_does_not_advance)
{
    rig g;
    if (!rig_start(&g, PROFILES_AB,
                   "{\"primary\":\"openai/gpt-a\",\"fallbacks\":[\"anthropic/claude-b\"]}"))
        return;
    llm_outcome oc;
    char err[1024];
    /* A malformed request (format): rotates the profiles (cooling each),
     * but the fallback model is not tried. */
    push_error(&g, 400, NULL, "messages.1.content.1.tool_use.id: String should match pattern");
    push_error(&g, 400, NULL, "messages.1.content.1.tool_use.id: String should match pattern");
    EXPECT_INT(run(&g, NULL, NULL, &oc, err, sizeof err, NULL, 0), CM_EIO);
    EXPECT_INT(fake_count(g.fs), 2);
    EXPECT_CONTAINS(err, "openai/gpt-a");
    /* A plain failure (404 with no known cause): neither rotated nor advanced. */
    fake_now += 2 * MIN;
    push_error(&g, 404, NULL, "no such route");
    EXPECT_INT(run(&g, NULL, NULL, &oc, err, sizeof err, NULL, 0), CM_EIO);
    EXPECT_INT(fake_count(g.fs), 3);
    /* A prompt over the context: CM_ETOOBIG, nobody cooled. */
    fake_now += 6 * MIN;
    push_error(&g, 400, NULL, "This model's maximum context length is 8192 tokens");
    EXPECT_INT(run(&g, NULL, NULL, &oc, err, sizeof err, NULL, 0), CM_ETOOBIG);
    EXPECT_INT(fake_count(g.fs), 4);
    json_t *s = stats(&g, "openai:b");
    EXPECT_INT(json_integer_value(json_object_get(json_object_get(s, "failureCounts"), "format")),
               1);
    EXPECT(json_object_get(json_object_get(s, "failureCounts"), "unknown") == NULL);
    json_decref(s);
    rig_stop(&g);
}

TEST(failover_override_ends_at_primary)
{
    rig g;
    if (!rig_start(&g, PROFILES_AB,
                   "{\"primary\":\"anthropic/claude-p\",\"fallbacks\":[\"openai/gpt-f\"]}"))
        return;
    buf chain = BUF_INIT;
    llm_turn t = {"openai/gpt-o", false, NULL};
    EXPECT_INT(cm_llm_runner_chain(g.r, &t, &chain), CM_OK);
    EXPECT_STR(chain.data, "openai/gpt-o,openai/gpt-f,anthropic/claude-p");
    cm_buf_release(&chain);
    llm_turn plain = {NULL, false, NULL};
    EXPECT_INT(cm_llm_runner_chain(g.r, &plain, &chain), CM_OK);
    EXPECT_STR(chain.data, "anthropic/claude-p,openai/gpt-f");
    cm_buf_release(&chain);
    /* Images: agents.defaults.imageModel's chain, else the text model's. */
    llm_turn img = {NULL, true, NULL};
    EXPECT_INT(cm_llm_runner_chain(g.r, &img, &chain), CM_OK);
    EXPECT_STR(chain.data, "anthropic/claude-p,openai/gpt-f");
    cm_buf_release(&chain);
    json_object_set_new(json_object_get(json_object_get(g.cfg, "agents"), "defaults"), "imageModel",
                        json_pack("{s:s, s:[s]}", "primary", "openai/gpt-vision", "fallbacks",
                                  "anthropic/claude-p"));
    EXPECT_INT(cm_llm_runner_chain(g.r, &img, &chain), CM_OK);
    EXPECT_STR(chain.data, "openai/gpt-vision,anthropic/claude-p");
    cm_buf_release(&chain);
    EXPECT_INT(cm_llm_runner_chain(g.r, &plain, &chain), CM_OK);
    EXPECT_STR(chain.data, "anthropic/claude-p,openai/gpt-f");
    cm_buf_release(&chain);
    /* The override fails on both profiles (rate limits), the fallback's
     * profiles are then cooling, the run ends at the primary. */
    push_error(&g, 429, NULL, "Rate limit reached");
    push_error(&g, 429, NULL, "Rate limit reached");
    push_anthropic_ok(&g, "primary");
    llm_outcome oc;
    char err[1024], text[64], m[64];
    EXPECT_INT(run(&g, "openai/gpt-o", NULL, &oc, err, sizeof err, text, sizeof text), CM_OK);
    EXPECT_STR(oc.model, "anthropic/claude-p");
    EXPECT_INT(fake_count(g.fs), 3);
    EXPECT_STR(req_model(&g, 0, m, sizeof m), "gpt-o");
    EXPECT_STR(req_model(&g, 2, m, sizeof m), "claude-p");
    rig_stop(&g);
}

TEST(failover_session_pins)
{
    rig g;
    if (!rig_start(&g, PROFILES_AB,
                   "{\"primary\":\"openai/gpt-a\",\"fallbacks\":[\"anthropic/claude-b\"]}"))
        return;
    llm_pin pin = {"", false};
    llm_outcome oc;
    char err[1024];
    /* Turn 1: b (oldest) answers and is pinned. */
    push_openai_ok(&g, "one");
    EXPECT_INT(run(&g, NULL, &pin, &oc, err, sizeof err, NULL, 0), CM_OK);
    EXPECT_STR(pin.profile, "openai:b");
    /* Turn 2: a is now the oldest, but the pin keeps b. */
    fake_now += 1000;
    push_openai_ok(&g, "two");
    EXPECT_INT(run(&g, NULL, &pin, &oc, err, sizeof err, NULL, 0), CM_OK);
    EXPECT_CONTAINS(fake_get(g.fs, 1)->headers, "Bearer sk-key-bbbb");
    /* Turn 3: b is rate limited with Retry-After 600 s: the auto pin rotates
     * to a, and b cools down for the 600 s, not the 1 min schedule. */
    fake_now += 1000;
    push_error(&g, 429, "Retry-After: 600\r\n", "Too many requests");
    push_openai_ok(&g, "three");
    EXPECT_INT(run(&g, NULL, &pin, &oc, err, sizeof err, NULL, 0), CM_OK);
    EXPECT_STR(pin.profile, "openai:a");
    EXPECT_CONTAINS(fake_get(g.fs, 3)->headers, "Bearer sk-key-aaaa");
    json_t *s = stats(&g, "openai:b");
    EXPECT_INT(json_integer_value(json_object_get(s, "cooldownUntil")), fake_now + 600000);
    json_decref(s);
    /* A user pin never rotates: its failure goes to the next model. */
    llm_pin user = {"openai:a", true};
    fake_now += 1000;
    push_error(&g, 429, NULL, "Too many requests");
    push_anthropic_ok(&g, "four");
    EXPECT_INT(run(&g, NULL, &user, &oc, err, sizeof err, NULL, 0), CM_OK);
    EXPECT_STR(oc.model, "anthropic/claude-b");
    EXPECT_STR(user.profile, "openai:a");
    EXPECT_INT(fake_count(g.fs), 6);
    EXPECT_CONTAINS(fake_get(g.fs, 4)->headers, "Bearer sk-key-aaaa");
    /* …and a user-pinned profile is tried even while it cools down. */
    fake_now += 1000;
    push_openai_ok(&g, "five");
    EXPECT_INT(run(&g, NULL, &user, &oc, err, sizeof err, NULL, 0), CM_OK);
    EXPECT_STR(oc.profile, "openai:a");
    rig_stop(&g);
}

TEST(failover_keys_from_config_and_messages_without_secrets)
{
    rig g;
    if (!rig_start(&g, NULL, "\"openai/gpt-x\"")) return;
    /* No profiles: models.providers.openai.apiKey ("${VAR}" from the environment). */
    json_object_set_new(
        json_object_get(json_object_get(json_object_get(g.cfg, "models"), "providers"), "openai"),
        "apiKey", json_string("${CLAWMEM_TEST_FAILOVER_KEY}"));
    setenv("CLAWMEM_TEST_FAILOVER_KEY", "sk-env-key-9999", 1);
    push_error(&g, 401, NULL, "Incorrect API key provided: sk-env-key-9999");
    llm_outcome oc;
    char err[1024];
    EXPECT_INT(run(&g, NULL, NULL, &oc, err, sizeof err, NULL, 0), CM_EAUTH);
    EXPECT_CONTAINS(fake_get(g.fs, 0)->headers, "Bearer sk-env-key-9999");
    EXPECT(strstr(err, "sk-env-key-9999") == NULL);
    EXPECT_CONTAINS(err, "every model failed");
    EXPECT_STR(oc.profile, "");
    unsetenv("CLAWMEM_TEST_FAILOVER_KEY");
    /* An api clawmem does not speak is a clear failure of that model. */
    json_object_set_new(
        json_object_get(json_object_get(json_object_get(g.cfg, "models"), "providers"), "openai"),
        "api", json_string("google-generative-ai"));
    EXPECT_INT(run(&g, NULL, NULL, &oc, err, sizeof err, NULL, 0), CM_EIO);
    EXPECT_CONTAINS(err, "google-generative-ai");
    EXPECT_INT(fake_count(g.fs), 1);
    rig_stop(&g);
}

TEST(failover_oauth_refresh_before_the_request)
{
    rig g;
    if (!rig_start(&g,
                   "{\"version\":1,\"profiles\":{"
                   "\"anthropic:me@x.org\":{\"type\":\"oauth\",\"provider\":\"anthropic\","
                   "\"access\":\"old-access-token\",\"refresh\":\"rt-1\",\"expires\":1799999999999,"
                   "\"email\":\"me@x.org\"},"
                   "\"anthropic:key\":{\"type\":\"api_key\",\"provider\":\"anthropic\",\"key\":"
                   "\"sk-ant-kkkk\"}}}",
                   "\"anthropic/claude-o\""))
        return;
    buf url = BUF_INIT;
    cm_buf_printf(&url, "%s/oauth/token", g.base);
    json_object_set_new(g.cfg, "clawmem",
                        json_pack("{s:{s:{s:s}}}", "oauth", "anthropic", "tokenUrl", url.data));
    cm_buf_release(&url);
    const char *tok =
        "{\"access_token\":\"new-access-token\",\"refresh_token\":\"rt-2\",\"expires_in\":3600}";
    char raw[512];
    snprintf(raw, sizeof raw,
             "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s",
             strlen(tok), tok);
    fake_push_raw(g.fs, raw, true);
    push_anthropic_ok(&g, "fresh");
    llm_outcome oc;
    char err[1024];
    EXPECT_INT(run(&g, NULL, NULL, &oc, err, sizeof err, NULL, 0), CM_OK);
    EXPECT_STR(oc.profile, "anthropic:me@x.org");
    const fake_request *q = fake_get(g.fs, 0);
    EXPECT_STR(q->path, "/oauth/token");
    json_t *b = json_loads(q->body, 0, NULL);
    EXPECT_STR(json_string_value(json_object_get(b, "grant_type")), "refresh_token");
    EXPECT_STR(json_string_value(json_object_get(b, "refresh_token")), "rt-1");
    EXPECT_STR(json_string_value(json_object_get(b, "client_id")),
               "9d1c250a-e61b-44d9-88ed-5944d1962f5e");
    json_decref(b);
    EXPECT_CONTAINS(fake_get(g.fs, 1)->headers, "Authorization: Bearer new-access-token");
    json_t *doc = json_load_file(g.auth_path, 0, NULL);
    json_t *p = json_object_get(json_object_get(doc, "profiles"), "anthropic:me@x.org");
    EXPECT_STR(json_string_value(json_object_get(p, "access")), "new-access-token");
    EXPECT_STR(json_string_value(json_object_get(p, "refresh")), "rt-2");
    EXPECT_STR(json_string_value(json_object_get(p, "email")), "me@x.org");
    EXPECT_INT(json_integer_value(json_object_get(p, "expires")), T0 + 3600000 - 300000);
    json_decref(doc);

    /* Expired again and the refresh is refused: the profile cools down
     * (auth), the API-key profile answers; no token in any message. */
    fake_now = T0 + 3600000;
    const char *no = "{\"error\":\"invalid_grant\",\"error_description\":\"rt-2 is revoked\"}";
    snprintf(raw, sizeof raw,
             "HTTP/1.1 400 Bad\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s",
             strlen(no), no);
    fake_push_raw(g.fs, raw, true);
    push_anthropic_ok(&g, "by key");
    EXPECT_INT(run(&g, NULL, NULL, &oc, err, sizeof err, NULL, 0), CM_OK);
    EXPECT_STR(oc.profile, "anthropic:key");
    EXPECT_CONTAINS(fake_get(g.fs, 3)->headers, "x-api-key: sk-ant-kkkk");
    json_t *s = stats(&g, "anthropic:me@x.org");
    EXPECT_INT(json_integer_value(json_object_get(json_object_get(s, "failureCounts"), "auth")), 1);
    json_decref(s);
    rig_stop(&g);
}

/* A run that failed for good says why in its return code: the class of the
 * last failure (auth, rate limit, billing), not a bare I/O error. */
TEST(failover_final_failure_class_in_the_return_code)
{
    rig g;
    if (!rig_start(&g, NULL, "\"openai/gpt-x\"")) return;
    json_object_set_new(
        json_object_get(json_object_get(json_object_get(g.cfg, "models"), "providers"), "openai"),
        "apiKey", json_string("sk-config-key-0000"));
    llm_outcome oc;
    char err[1024];
    push_error(&g, 401, NULL, "Incorrect API key provided");
    EXPECT_INT(run(&g, NULL, NULL, &oc, err, sizeof err, NULL, 0), CM_EAUTH);
    push_error(&g, 429, NULL, "Rate limit reached for requests");
    EXPECT_INT(run(&g, NULL, NULL, &oc, err, sizeof err, NULL, 0), CM_ERATELIMIT);
    push_error(&g, 402, NULL, "You have insufficient credits");
    EXPECT_INT(run(&g, NULL, NULL, &oc, err, sizeof err, NULL, 0), CM_EBILLING);
    push_error(&g, 404, NULL, "no such route");
    EXPECT_INT(run(&g, NULL, NULL, &oc, err, sizeof err, NULL, 0), CM_EIO);
    EXPECT_INT(fake_count(g.fs), 4);
    EXPECT_STR(cm_strerror(CM_ERATELIMIT), "rate-limited");
    rig_stop(&g);
}

/* How /status labels a provider's credentials (2026.3.22's
 * resolveModelAuthLabel): the first profile in order — oldest lastUsed
 * first, the session's pin before it — with its email, a token profile as
 * token; no profile: the environment's key by name; nothing: unknown. The
 * secret itself never. */
TEST(failover_auth_label_names_the_credential_never_the_secret)
{
    rig g;
    if (!rig_start(&g,
                   "{\"version\":1,\"profiles\":{"
                   "\"openai:a\":{\"type\":\"api_key\",\"provider\":\"openai\",\"key\":\"sk-key-aaaa\"},"
                   "\"openai:b\":{\"type\":\"api_key\",\"provider\":\"openai\",\"key\":\"sk-key-bbbb\","
                   "\"email\":\"b@x.org\"},"
                   "\"anthropic:t\":{\"type\":\"token\",\"provider\":\"anthropic\",\"token\":\"tk-1\"}},"
                   "\"usageStats\":{\"openai:a\":{\"lastUsed\":100},\"openai:b\":{\"lastUsed\":50}}}",
                   "\"openai/gpt-a\""))
        return;
    char out[256];
    EXPECT_INT(cm_llm_runner_auth_label(g.r, "openai", NULL, out, sizeof out), CM_OK);
    EXPECT_STR(out, "api-key (openai:b (b@x.org))");
    EXPECT_INT(cm_llm_runner_auth_label(g.r, "openai", "openai:a", out, sizeof out), CM_OK);
    EXPECT_STR(out, "api-key (openai:a)");
    EXPECT_INT(cm_llm_runner_auth_label(g.r, "openai", "anthropic:t", out, sizeof out), CM_OK);
    EXPECT_STR(out, "api-key (openai:b (b@x.org))"); /* a pin of another provider: ignored */
    EXPECT_INT(cm_llm_runner_auth_label(g.r, "anthropic", NULL, out, sizeof out), CM_OK);
    EXPECT_STR(out, "token (anthropic:t)");
    setenv("MISTRAL_API_KEY", "sk-mistral-secret", 1);
    EXPECT_INT(cm_llm_runner_auth_label(g.r, "mistral", NULL, out, sizeof out), CM_OK);
    EXPECT_STR(out, "unknown"); /* no endpoint: mistral has no baseUrl here */
    unsetenv("MISTRAL_API_KEY");
    setenv("ANTHROPIC_API_KEY", "sk-ant-env", 1);
    EXPECT_INT(cm_llm_runner_auth_label(g.r, "anthropic", NULL, out, sizeof out), CM_OK);
    EXPECT_STR(out, "token (anthropic:t)"); /* profiles first */
    unsetenv("ANTHROPIC_API_KEY");
    rig_stop(&g);
    if (!rig_start(&g, NULL, "\"openai/gpt-a\"")) return;
    setenv("OPENAI_API_KEY", "sk-openai-env-secret", 1);
    EXPECT_INT(cm_llm_runner_auth_label(g.r, "openai", NULL, out, sizeof out), CM_OK);
    EXPECT_STR(out, "api-key (env: OPENAI_API_KEY)");
    unsetenv("OPENAI_API_KEY");
    EXPECT_INT(cm_llm_runner_auth_label(g.r, "openai", NULL, out, sizeof out), CM_OK);
    EXPECT_STR(out, "unknown");
    rig_stop(&g);
}

/* A token endpoint that echoes the refresh token in its error code (no
 * spaces, short: the shape of a code) has it named in no message. */
TEST(failover_oauth_refresh_error_never_echoes_a_token)
{
    rig g;
    if (!rig_start(&g,
                   "{\"version\":1,\"profiles\":{"
                   "\"anthropic:me@x.org\":{\"type\":\"oauth\",\"provider\":\"anthropic\","
                   "\"access\":\"old-access-tok-5521\",\"refresh\":\"rt-echoed-5521\","
                   "\"expires\":1,\"email\":\"me@x.org\"}}}",
                   "\"anthropic/claude-o\""))
        return;
    buf url = BUF_INIT;
    cm_buf_printf(&url, "%s/oauth/token", g.base);
    json_object_set_new(g.cfg, "clawmem",
                        json_pack("{s:{s:{s:s}}}", "oauth", "anthropic", "tokenUrl", url.data));
    cm_buf_release(&url);
    const char *no = "{\"error\":\"invalid_grant:rt-echoed-5521\"}";
    char raw[512];
    snprintf(raw, sizeof raw,
             "HTTP/1.1 400 Bad\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s",
             strlen(no), no);
    fake_push_raw(g.fs, raw, true);
    llm_outcome oc;
    char err[1024];
    EXPECT(run(&g, NULL, NULL, &oc, err, sizeof err, NULL, 0) != CM_OK);
    EXPECT_STR(fake_get(g.fs, 0)->path, "/oauth/token");
    EXPECT_CONTAINS(err, "token refresh failed: HTTP 400");
    EXPECT(strstr(err, "rt-echoed-5521") == NULL);
    rig_stop(&g);
}
