/*
 * test_model_select.c — the model choice of /model and sessions.patch
 * (src/agent/model_select.c) against 2026.3.22's rules: a trailing
 * @profile, the entry's change, the closest allowed model, the /models
 * catalog. The commands through the running gateway are in
 * test_gateway_cmds.c.
 */
#include <jansson.h>

#include "../src/agent/model_select.h"
#include "test.h"

/* 2026.3.22's splitTrailingAuthProfile. */
TEST(gw_cmd_model_profile_split_as_the_reference)
{
    static const struct {
        const char *raw, *model, *profile;
    } cases[] = {{"openai/gpt-u@openai:work", "openai/gpt-u", "openai:work"},
                 {"opus@anthropic:default", "opus", "anthropic:default"},
                 {"anthropic/claude-3@20240229", "anthropic/claude-3@20240229", ""},
                 {"anthropic/claude-3@20240229@me", "anthropic/claude-3@20240229", "me"},
                 {"a@b/c", "a@b/c", ""},
                 {"gpt@", "gpt@", ""},
                 {"@me", "@me", ""}};
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char model[128], profile[128];
        cm_model_split_profile(cases[i].raw, model, sizeof model, profile, sizeof profile);
        EXPECT_STR(model, cases[i].model);
        EXPECT_STR(profile, cases[i].profile);
    }
}

/* The entry change of a switch, as 2026.3.22's applyModelOverrideToSessionEntry. */
TEST(gw_cmd_model_override_patch_as_the_reference)
{
    model_ref m = {"openai", "gpt-u"};
    json_t *e = json_pack("{s:s,s:s,s:i,s:s,s:s}", "model", "gpt-t", "modelProvider", "openai",
                          "contextTokens", 1000, "authProfileOverride", "openai:p1",
                          "fallbackNoticeReason", "rate limit");
    json_t *p = cm_model_override_patch(e, &m, false, NULL);
    char *s = json_dumps(p, JSON_SORT_KEYS | JSON_COMPACT);
    EXPECT_STR(s, "{\"authProfileOverride\":null,\"contextTokens\":null,"
                  "\"fallbackNoticeReason\":null,\"model\":null,\"modelOverride\":\"gpt-u\","
                  "\"modelProvider\":null,\"providerOverride\":\"openai\"}");
    free(s);
    json_decref(p);
    json_decref(e);
    /* the default, nothing to clear, the last run already on it: no change */
    model_ref d = {"openai", "gpt-t"};
    e = json_pack("{s:s,s:s}", "model", "gpt-t", "modelProvider", "openai");
    p = cm_model_override_patch(e, &d, true, NULL);
    EXPECT_INT((int)json_object_size(p), 0);
    json_decref(p);
    json_decref(e);
}

/* Picking with an allowlist, as 2026.3.22's resolveModelDirectiveSelection:
 * an alias in any case, a model named in full, the closest allowed model
 * when the one named is not allowed (labelled with its alias), refused when
 * nothing is close; without an allowlist any model is taken as named. */
TEST(gw_cmd_model_pick_as_the_reference)
{
    json_t *root = json_loads(
        "{\"agents\":{\"defaults\":{\"models\":{\"anthropic/claude-sonnet-4-5\":{\"alias\":"
        "\"sonnet\"},\"openai/gpt-4o-mini\":{},\"openai/gpt-4o\":{}}}}}",
        0, NULL);
    model_rules r = {root, "openai/gpt-t,openai/gpt-f"};
    static const struct {
        const char *raw, *want, *alias;
        model_pick_rc rc;
        bool is_default;
    } cases[] = {
        {"SONNET", "anthropic/claude-sonnet-4-5", "sonnet", MODEL_PICKED, false},
        {"openai/gpt-4o", "openai/gpt-4o", "", MODEL_PICKED, false},
        {"gpt-4o-mini", "openai/gpt-4o-mini", "", MODEL_PICKED, false},
        {"openai/gpt-f", "openai/gpt-f", "", MODEL_PICKED, false}, /* a fallback */
        {" openai/gpt-t ", "openai/gpt-t", "", MODEL_PICKED, true},
        {"claude", "anthropic/claude-sonnet-4-5", "sonnet", MODEL_PICKED, false},
        {"openai/gpt-4", "openai/gpt-4o", "", MODEL_PICKED, false},
        {"Anthropic/sonnet-4.5", "anthropic/claude-sonnet-4-5", "", MODEL_PICKED, false},
        {"mistral/large", "mistral/large", "", MODEL_NOT_ALLOWED, false},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        model_ref m;
        char alias[128], key[400];
        bool def = false;
        EXPECT_INT(cm_model_pick(&r, cases[i].raw, true, &m, alias, &def), cases[i].rc);
        cm_model_key(&m, key);
        EXPECT_STR(key, cases[i].want);
        if (cases[i].rc == MODEL_PICKED) EXPECT_STR(alias, cases[i].alias);
        EXPECT_INT(def, cases[i].is_default);
    }
    model_rules open = {NULL, "openai/gpt-t"};
    model_ref m;
    bool def;
    EXPECT_INT(cm_model_pick(&open, "gpt-5", true, &m, NULL, &def), MODEL_PICKED);
    EXPECT_STR(m.model, "gpt-5");
    EXPECT_STR(m.provider, "openai");
    EXPECT_INT(cm_model_pick(&open, "openai/", true, &m, NULL, &def), MODEL_UNRECOGNIZED);
    /* sessions.patch does not look for the closest */
    EXPECT_INT(cm_model_pick(&r, "openai/gpt-4", false, &m, NULL, &def), MODEL_NOT_ALLOWED);
    json_decref(root);
}

/* /models' catalog (2026.3.22's buildModelsProviderData over the configured
 * models): providers and their model ids sorted, the allowlist's and the
 * chain's models in, a configured model outside the allowlist out. */
TEST(gw_cmd_models_catalog_as_the_reference)
{
    json_t *root = json_loads(
        "{\"models\":{\"providers\":{\"zeta\":{\"models\":[{\"id\":\"b\"},{\"id\":\"a\"}]},"
        "\"Alpha\":{\"models\":[{\"id\":\"c\"}]}}},\"agents\":{\"defaults\":{\"imageModel\":"
        "{\"primary\":\"mid/vision\"}}}}",
        0, NULL);
    model_rules r = {root, "zeta/b,other/x"};
    json_t *cat = cm_model_catalog(&r);
    char *s = json_dumps(cat, JSON_COMPACT);
    EXPECT_STR(s,
               "{\"alpha\":[\"c\"],\"mid\":[\"vision\"],\"other\":[\"x\"],\"zeta\":[\"a\",\"b\"]}");
    free(s);
    json_decref(cat);
    json_object_set_new(json_object_get(root, "agents"), "defaults",
                        json_pack("{s:{s:{}}}", "models", "alpha/c"));
    cat = cm_model_catalog(&r);
    s = json_dumps(cat, JSON_COMPACT);
    EXPECT_STR(s, "{\"alpha\":[\"c\"],\"other\":[\"x\"],\"zeta\":[\"b\"]}");
    free(s);
    json_decref(cat);
    json_decref(root);
}
