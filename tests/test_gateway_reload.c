/*
 * test_gateway_reload.c — what a config reload applies (src/gateway/core/
 * reload.h): the changed key paths of two configs, as 2026.3.22's
 * diffConfigPaths finds them, and which apply to the next message and
 * which need a restart; gateway.reload's settings.
 */
#include <jansson.h>

#include "../src/gateway/core/reload.h"
#include "test.h"

TEST(gw_reload_kinds_of_changed_paths)
{
    static const struct {
        const char *path;
        gw_reload_kind kind;
    } cases[] = {
        {"messages.responsePrefix", GW_RKEY_HOT},
        {"messages", GW_RKEY_HOT},
        {"messagesX", GW_RKEY_RESTART}, /* a prefix matches at a dot only */
        {"session.dmScope", GW_RKEY_HOT},
        {"session.maintenance.mode", GW_RKEY_RESTART},
        {"commands.allowFrom", GW_RKEY_HOT},
        {"bindings", GW_RKEY_HOT},
        {"gateway.reload.debounceMs", GW_RKEY_HOT},
        {"gateway.port", GW_RKEY_RESTART},
        {"gateway.auth.token", GW_RKEY_RESTART},
        {"gateway.remote.url", GW_RKEY_NONE},
        {"channels.telegram.dmPolicy", GW_RKEY_HOT},
        {"channels.telegram.allowFrom", GW_RKEY_HOT},
        {"channels.telegram.accounts.ops.groups.-100.requireMention", GW_RKEY_HOT},
        {"channels.telegram.botToken", GW_RKEY_RESTART},
        {"channels.telegram.accounts.ops.botToken", GW_RKEY_RESTART},
        {"channels.telegram.accounts.ops", GW_RKEY_RESTART}, /* an account added */
        {"channels.telegram.accounts", GW_RKEY_RESTART},
        {"channels.telegram", GW_RKEY_RESTART},
        {"channels", GW_RKEY_RESTART},
        {"agents.defaults.typingMode", GW_RKEY_HOT},
        {"agents.defaults.humanDelay.minMs", GW_RKEY_HOT},
        {"agents.defaults.model", GW_RKEY_RESTART},
        {"agents.list", GW_RKEY_RESTART},
        {"models.providers.openai.apiKey", GW_RKEY_RESTART},
        {"tools.exec", GW_RKEY_RESTART},
        {"meta.lastTouchedAt", GW_RKEY_NONE},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        if (cm_gw_reload_kind(cases[i].path) != cases[i].kind)
            test_fail(__FILE__, __LINE__, "%s: kind %d, want %d", cases[i].path,
                      (int)cm_gw_reload_kind(cases[i].path), (int)cases[i].kind);
    }
}

TEST(gw_reload_plan_diffs_as_the_reference)
{
    json_t *a = json_loads("{\"messages\":{\"responsePrefix\":\"[a]\",\"queue\":{\"cap\":5}},"
                           "\"gateway\":{\"port\":1},\"channels\":{\"telegram\":{\"allowFrom\":"
                           "[\"1\",\"2\"]}},\"meta\":{\"t\":1},\"same\":[1,{\"x\":2}]}",
                           0, NULL);
    json_t *b = json_loads("{\"messages\":{\"responsePrefix\":\"[b]\",\"queue\":{\"cap\":5}},"
                           "\"gateway\":{\"port\":2},\"channels\":{\"telegram\":{\"allowFrom\":"
                           "[\"1\"]}},\"meta\":{\"t\":2},\"same\":[1,{\"x\":2}],"
                           "\"session\":{\"dmScope\":\"per-peer\"}}",
                           0, NULL);
    gw_reload_plan p = {.hot = BUF_INIT, .restart = BUF_INIT, .none = BUF_INIT};
    EXPECT_INT(cm_gw_reload_plan_build(a, b, &p), CM_OK);
    /* objects key by key, arrays whole, equal arrays skipped, a key only in b
     * named whole (not an object on both sides) */
    EXPECT_STR(p.hot.data, "messages.responsePrefix, channels.telegram.allowFrom, session");
    EXPECT_STR(p.restart.data, "gateway.port");
    EXPECT_STR(p.none.data, "meta.t");
    EXPECT_INT(p.nhot, 3);
    /* the same config: nothing */
    EXPECT_INT(cm_gw_reload_plan_build(a, a, &p), CM_OK);
    EXPECT_INT(p.nhot + p.nrestart + p.nnone, 0);
    EXPECT_STR(p.hot.data, "");
    /* a key removed is a change too */
    EXPECT_INT(cm_gw_reload_plan_build(b, NULL, &p), CM_OK);
    EXPECT_INT(p.nhot, 2); /* messages, session */
    EXPECT_STR(p.restart.data, "gateway, channels, same");
    cm_gw_reload_plan_release(&p);
    json_decref(a);
    json_decref(b);
}

TEST(gw_reload_settings_default_hybrid_300)
{
    gw_reload_mode m;
    int64_t d;
    cm_gw_reload_settings(NULL, &m, &d);
    EXPECT_INT(m, GW_RELOAD_HYBRID);
    EXPECT_INT(d, GW_RELOAD_DEBOUNCE_MS);
    EXPECT_INT(GW_RELOAD_DEBOUNCE_MS, 300);
    json_t *j =
        json_loads("{\"gateway\":{\"reload\":{\"mode\":\"off\",\"debounceMs\":0}}}", 0, NULL);
    cm_rtcfg *c = NULL;
    char err[256];
    EXPECT_INT(cm_rtcfg_from_json(j, &c, err, sizeof err), CM_OK);
    cm_gw_reload_settings(c, &m, &d);
    EXPECT_INT(m, GW_RELOAD_OFF);
    EXPECT_INT(d, 0);
    cm_rtcfg_unref(c);
    json_decref(j);
    /* the reference's schema: one of four words, an integer >= 0 */
    j = json_loads("{\"gateway\":{\"reload\":{\"mode\":\"sometimes\"}}}", 0, NULL);
    EXPECT_INT(cm_rtcfg_from_json(j, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "gateway.reload.mode");
    json_decref(j);
    j = json_loads("{\"gateway\":{\"reload\":{\"debounceMs\":-1}}}", 0, NULL);
    EXPECT_INT(cm_rtcfg_from_json(j, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "gateway.reload.debounceMs");
    json_decref(j);
}
