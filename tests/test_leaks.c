/*
 * test_leaks.c — secrets never leave through a message, a status or a
 * payload, end to end: each test gives clawmem a secret, makes the path
 * under test fail or answer in the way that would carry it out (a libpq
 * parse error quoting the DSN, a Control UI config payload, a token
 * endpoint echoing the refresh token), and looks for the secret's bytes in
 * everything that comes back.
 */
#include <jansson.h>

#include "test.h"
#include "ws_client.h"

/* Whether secret occurs in s (NULL: it does not). */
static bool shows(const char *s, const char *secret)
{
    return s && strstr(s, secret) != NULL;
}

/* ---- PostgreSQL: libpq quotes a DSN it cannot parse ------------------------------- */

/* libpq names what it could not parse, and for some mistakes that is the
 * whole DSN or the password: "end of string reached when looking for
 * matching "]" in IPv6 host address in URI: "postgresql://u:pw@[::1/db"",
 * "invalid percent-encoded token: "pw"", "missing "=" after "half"". Each
 * case fails before any connection is tried, so no server is needed. */
TEST(leaks_pg_dsn_libpq_cannot_parse_is_never_shown)
{
    static const struct {
        const char *dsn, *secret;
    } cases[] = {
        {"postgresql://clawuser:PgLeakPw4417@[::1/db", "PgLeakPw4417"},
        {"postgresql://clawuser:PgLeak%zzPw4417@127.0.0.1:1/db", "PgLeak%zzPw4417"},
        {"host=127.0.0.1 port=1 user=x password=PgLeak Pw4417half", "Pw4417half"},
    };
    char *dir = tmp_dir();
    char ws[1024], state[1024], cfg[1024];
    snprintf(ws, sizeof ws, "%s/ws", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    snprintf(cfg, sizeof cfg, "%s/qc.json", dir);
    write_file(ws, "MEMORY.md", "# Facts\nthe keeper notes\n");
    write_file(dir, "qc.json", "{}");
    write_file(state, "clawmem.json",
               "{agents: {defaults: {memorySearch: {provider: 'none', store: {driver: "
               "'postgres', dsn: '${CM_LEAK_DSN}'}}}}}");
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char env[256];
        snprintf(env, sizeof env, "CM_LEAK_DSN=%s", cases[i].dsn);
        const char *e[] = {env, NULL};
        const char *status[] = {"--workspace", ws,       "--state-dir", state, "--config",
                                cfg,           "status", "--json",      NULL};
        const char *index[] = {"--workspace", ws,  "--state-dir", state,
                               "--config",    cfg, "index",       NULL};
        const char *search[] = {"--workspace", ws,       "--state-dir", state, "--config",
                                cfg,           "search", "keeper",      NULL};
        const char *const *runs[] = {status, index, search};
        for (size_t k = 0; k < ARRAY_LEN(runs); k++) {
            run_result r = run_clawmem(e, runs[k]);
            EXPECT(!shows(r.out, cases[i].secret));
            EXPECT(!shows(r.err, cases[i].secret));
            /* the failure is still said: libpq's message, the secret redacted */
            EXPECT(shows(r.out, "cannot connect") || shows(r.err, "cannot connect"));
            if (shows(r.out, cases[i].secret) || shows(r.err, cases[i].secret))
                test_fail(__FILE__, __LINE__, "dsn %zu, run %zu: %s%s", i, k, r.out ? r.out : "",
                          r.err ? r.err : "");
            run_result_release(&r);
        }
    }
}

/* ---- the Control UI: config.get ---------------------------------------------------- */

/* config.get sends the config the gateway runs with, the merged files, to
 * every operator with the read scope, and clawmem.models.status each
 * provider's endpoint: a secret whose key does not say "token" or
 * "password" went too. The DSN of the clawmem.json overlay, a provider's
 * x-api-key / x-goog-api-key / Ocp-Apim-Subscription-Key header, an
 * endpoint's userinfo and ?key=. */
TEST(leaks_control_ui_config_and_models_hide_dsn_headers_and_url_credentials)
{
    wsgw w;
    memset(&w, 0, sizeof w);
    w.fs = fake_start(8, w.base);
    w.dir = tmp_dir();
    w.ws = cm_strdup(path_in(w.dir, "ws"));
    w.state = cm_strdup(path_in(w.dir, "state"));
    write_file(w.dir, "ws/MEMORY.md", "# Facts\n");
    char cfg[4096];
    snprintf(cfg, sizeof cfg,
             "{\"gateway\":{\"auth\":{\"token\":\"%s\"}},"
             "\"agents\":{\"defaults\":{\"model\":{\"primary\":\"openai/gpt-t\","
             "\"fallbacks\":[\"proxy/m1\"]},\"memorySearch\":{"
             "\"provider\":\"none\",\"remote\":{\"baseUrl\":"
             "\"https://emb.example/v1?key=UrlQueryKey5521\"}}}},"
             "\"models\":{\"providers\":{\"openai\":{\"baseUrl\":\"%s/v1\","
             "\"apiKey\":\"sk-test-ws-0001\",\"headers\":{"
             "\"x-api-key\":\"HdrXApiKey5521\",\"x-goog-api-key\":\"HdrGoogKey5521\","
             "\"Ocp-Apim-Subscription-Key\":\"HdrApimKey5521\"},\"models\":[]},"
             "\"proxy\":{\"baseUrl\":\"https://proxyuser:UrlUserPw5521@llm.example/v1\","
             "\"api\":\"openai-completions\",\"models\":[]}}},"
             "\"messages\":{\"inbound\":{\"debounceMs\":0}}}",
             WTOKEN, w.base);
    write_file(w.dir, "state/quantumclaw.json", cfg);
    /* the store stays SQLite: the DSN only has to be in the config */
    write_file(w.dir, "state/clawmem.json",
               "{\"agents\":{\"defaults\":{\"memorySearch\":{\"store\":{"
               "\"dsn\":\"postgresql://claw:DsnPw5521@db.example/mem\"}}}}}");
    cm_options o = {NULL, w.ws, NULL, w.state, NULL, NULL, 1};
    cm_gateway_opts go = {"127.0.0.1:0", 1};
    char err[512];
    if (cm_gateway_start(&o, &go, &w.g, err, sizeof err)) {
        test_fail(__FILE__, __LINE__, "gateway: %s", err);
        fake_stop(w.fs);
        return;
    }
    const char *a = cm_gateway_address(w.g);
    w.port = a && strrchr(a, ':') ? (int)strtol(strrchr(a, ':') + 1, NULL, 10) : 0;
    wsc c;
    EXPECT(ws_open(&c, w.port, NULL, NULL));
    json_t *ch = ws_recv(&c, 5000); /* connect.challenge */
    json_decref(ch);
    char req[1024];
    snprintf(req, sizeof req,
             "{\"type\":\"req\",\"id\":\"1\",\"method\":\"connect\",\"params\":{"
             "\"minProtocol\":3,\"maxProtocol\":3,\"client\":{\"id\":\"test\",\"version\":\"1\","
             "\"platform\":\"linux\",\"mode\":\"test\"},\"role\":\"operator\",\"scopes\":"
             "[\"operator.read\"],\"auth\":{\"token\":\"%s\"}}}",
             WTOKEN);
    ws_send(&c, req);
    json_t *r = ws_res(&c);
    EXPECT(r && json_is_true(json_object_get(r, "ok")));
    json_decref(r);
    r = ws_call(&c, "2", "config.get", "{}");
    char *s = r ? json_dumps(r, 0) : NULL;
    EXPECT(s && strstr(s, "__QUANTUMCLAW_REDACTED__"));
    static const char *const secrets[] = {
        WTOKEN,           "sk-test-ws-0001", "HdrXApiKey5521",  "HdrGoogKey5521",
        "HdrApimKey5521", "UrlUserPw5521",   "UrlQueryKey5521", "DsnPw5521",
    };
    for (size_t i = 0; i < ARRAY_LEN(secrets); i++)
        if (shows(s, secrets[i])) test_fail(__FILE__, __LINE__, "config.get shows %s", secrets[i]);
    /* what is no secret stays readable: the hosts of the endpoints */
    EXPECT(shows(s, "llm.example") && shows(s, "emb.example") && shows(s, "db.example") == false);
    free(s);
    json_decref(r);
    /* the Models page: each provider of the chain with its endpoint */
    r = ws_call(&c, "3", "clawmem.models.status", "{}");
    s = r ? json_dumps(r, 0) : NULL;
    for (size_t i = 0; i < ARRAY_LEN(secrets); i++)
        if (shows(s, secrets[i]))
            test_fail(__FILE__, __LINE__, "clawmem.models.status shows %s", secrets[i]);
    EXPECT(shows(s, "https://llm.example/v1"));
    free(s);
    json_decref(r);
    ws_close(&c);
    gw_down(&w);
}
