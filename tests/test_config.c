/*
 * test_config.c — defaults, the defaults/agent overlay, clamps, and errors
 * that name file:line:column and the key path.
 */
#include "../src/config/config.h"
#include "test.h"

static char warnings[4096];

static void collect(void *ctx, cm_log_level lv, const char *msg)
{
    (void)ctx;
    (void)lv;
    size_t n = strlen(warnings);
    snprintf(warnings + n, sizeof warnings - n, "%s\n", msg);
}

static cm_logger lg = {collect, NULL};

static cm_rc parse(const char *text, const char *agent, cm_config *cfg, char *err, size_t errlen)
{
    cm_config_args a = {agent, NULL, NULL, "/tmp/qc-state"};
    warnings[0] = 0;
    return config_parse(text, text ? strlen(text) : 0, "qc.json", &a, &lg, cfg, err, errlen);
}

TEST(config_defaults_without_file)
{
    cm_config c;
    char err[512];
    EXPECT_INT(parse(NULL, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_STR(c.agent_id, "main");
    EXPECT_STR(c.workspace, "/tmp/qc-state/workspace");
    EXPECT_STR(c.store_path, "/tmp/qc-state/memory/main.sqlite");
    EXPECT_STR(c.provider, "auto");
    EXPECT_STR(c.fts_tokenizer, "porter");
    EXPECT_INT(c.max_results, 6);
    EXPECT_NEAR(c.min_score, 0.35, 1e-12);
    EXPECT_NEAR(c.vector_weight, 0.7, 1e-12);
    EXPECT_NEAR(c.text_weight, 0.3, 1e-12);
    EXPECT_INT(c.candidate_multiplier, 4);
    EXPECT(!c.mmr_enabled);
    EXPECT_NEAR(c.mmr_lambda, 0.7, 1e-12);
    EXPECT(!c.decay_enabled);
    EXPECT_NEAR(c.half_life_days, 30, 1e-12);
    EXPECT_INT(c.chunk_tokens, 400);
    EXPECT_INT(c.chunk_overlap, 80);
    EXPECT_INT(c.watch_debounce_ms, 1500);
    EXPECT_INT(c.sources.n, 1);
    EXPECT_STR(c.sources.v[0], "memory");
    EXPECT_INT(c.citations, CM_CITE_AUTO);
    EXPECT_INT(config_candidates(&c, 6), 24);
    EXPECT_INT(config_candidates(&c, 100), 200);
    config_release(&c);
}

TEST(config_agent_overrides_defaults)
{
    const char *text =
        "{\n"
        "  agents: {\n"
        "    defaults: {\n"
        "      workspace: '/w/default',\n"
        "      memorySearch: {\n"
        "        extraPaths: ['../team'],\n"
        "        store: { path: '~/idx/{agentId}.db', fts: { tokenizer: 'trigram' } },\n"
        "        query: { maxResults: 9, hybrid: { vectorWeight: 0.6, textWeight: 0.2,\n"
        "                 mmr: { enabled: true, lambda: 0.5 } } },\n"
        "      },\n"
        "    },\n"
        "    list: [\n"
        "      { id: 'other', memorySearch: { query: { maxResults: 2 } } },\n"
        "      { id: 'ops', workspace: '/w/ops', memorySearch: {\n"
        "          extraPaths: ['/srv/notes.md'], query: { minScore: 0.1,\n"
        "          hybrid: { temporalDecay: { enabled: true, halfLifeDays: 90 } } },\n"
        "          chunking: { tokens: 100, overlap: 500 } } },\n"
        "    ],\n"
        "  },\n"
        "  memory: { citations: 'off', backend: 'builtin' },\n"
        "}\n";
    cm_config c;
    char err[512];
    setenv("HOME", "/home/u", 1);
    EXPECT_INT(parse(text, "ops", &c, err, sizeof err), CM_OK);
    EXPECT_STR(c.workspace, "/w/ops");
    EXPECT_STR(c.store_path, "/home/u/idx/ops.db");
    EXPECT_STR(c.fts_tokenizer, "trigram");
    EXPECT_INT(c.max_results, 9); /* from defaults; the other agent's 2 does not apply */
    EXPECT_NEAR(c.min_score, 0.1, 1e-12);
    EXPECT_NEAR(c.vector_weight, 0.75, 1e-12); /* 0.6 and 0.2 normalised to sum 1 */
    EXPECT(c.mmr_enabled);
    EXPECT(c.decay_enabled);
    EXPECT_NEAR(c.half_life_days, 90, 1e-12);
    EXPECT_INT(c.extra_paths.n, 2);
    EXPECT_STR(c.extra_paths.v[0], "../team");
    EXPECT_STR(c.extra_paths.v[1], "/srv/notes.md");
    EXPECT_INT(c.chunk_tokens, 100);
    EXPECT_INT(c.chunk_overlap, 99); /* clamped below tokens */
    EXPECT_INT(c.citations, CM_CITE_OFF);
    config_release(&c);
}

TEST(config_bad_value_names_key_path_and_position)
{
    cm_config c;
    char err[512];
    const char *text = "{\n  agents: { defaults: { memorySearch: {\n"
                       "    query: { hybrid: { vectorWeight: 1.5 } } } } } }\n";
    EXPECT_INT(parse(text, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_STR(err, "qc.json:3:24: agents.defaults.memorySearch.query.hybrid.vectorWeight: "
                    "expected a number between 0 and 1, got 1.5");
    text = "{agents: {list: [{id: 'main', memorySearch: {query: {maxResults: 'six'}}}]}}";
    EXPECT_INT(parse(text, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_STR(err, "qc.json:1:54: agents.list[0].memorySearch.query.maxResults: expected a "
                    "number, got a string");
    text = "{agents: {defaults: {memorySearch: {query: {hybrid: {candidateMultiplier: 2.5}}}}}}";
    EXPECT_INT(parse(text, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "candidateMultiplier: expected an integer");
    text = "{agents: {defaults: {memorySearch: {store: {fts: {tokenizer: 'icu'}}}}}}";
    EXPECT_INT(parse(text, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "store.fts.tokenizer: expected one of unicode61|trigram|porter");
    text = "{agents: {defaults: {memorySearch: {extraPaths: ['a', 3]}}}}";
    EXPECT_INT(parse(text, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "qc.json:1:55: agents.defaults.memorySearch.extraPaths[1]");
    text = "{memory: {citations: 'sometimes'}}";
    EXPECT_INT(parse(text, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "memory.citations");
    text = "{agents: {defaults: {memorySearch: {query: 5}}}}";
    EXPECT_INT(parse(text, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "agents.defaults.memorySearch.query: expected an object, got a number");
}

TEST(config_malformed_file_is_one_line)
{
    cm_config c;
    char err[512];
    EXPECT_INT(parse("{ agents: { defaults: { , } } }", NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_STR(err, "qc.json:1:25: expected a key or '}'");
    EXPECT(strchr(err, '\n') == NULL);
}

TEST(config_unknown_key_warns)
{
    cm_config c;
    char err[512];
    const char *text =
        "{agents: {defaults: {memorySearch: {\n  querry: {}, query: {maxResult: 3},\n"
        "  remote: {headers: {'X-Any': 'v'}}}}}, somethingElse: 1}";
    EXPECT_INT(parse(text, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(warnings, "qc.json:2:3: unknown key agents.defaults.memorySearch.querry");
    EXPECT_CONTAINS(warnings, "unknown key agents.defaults.memorySearch.query.maxResult");
    EXPECT(strstr(warnings, "X-Any") == NULL);
    EXPECT(strstr(warnings, "somethingElse") == NULL); /* outside memorySearch: not ours */
    config_release(&c);
}

TEST(config_load_reads_env_paths)
{
    char *d = tmp_dir();
    write_file(d, "state/quantumclaw.json", "{agents: {defaults: {workspace: 'ws'}}}");
    write_file(d, "other.json", "{memory: {citations: 'on'}}");
    cm_config c;
    char err[512];
    cm_config_args a = {NULL, NULL, NULL, NULL};
    setenv("QUANTUMCLAW_STATE_DIR", path_in(d, "state"), 1);
    unsetenv("QUANTUMCLAW_CONFIG_PATH");
    EXPECT_INT(config_load(&a, &lg, &c, err, sizeof err), CM_OK);
    EXPECT(c.config_found);
    EXPECT_STR(c.state_dir, path_in(d, "state"));
    EXPECT_STR(c.store_path, path_in(d, "state/memory/main.sqlite"));
    config_release(&c);
    setenv("QUANTUMCLAW_CONFIG_PATH", path_in(d, "other.json"), 1);
    EXPECT_INT(config_load(&a, &lg, &c, err, sizeof err), CM_OK);
    EXPECT_INT(c.citations, CM_CITE_ON);
    config_release(&c);
    setenv("QUANTUMCLAW_CONFIG_PATH", path_in(d, "missing.json"), 1);
    EXPECT_INT(config_load(&a, &lg, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "missing.json");
    unsetenv("QUANTUMCLAW_CONFIG_PATH");
    unsetenv("QUANTUMCLAW_STATE_DIR");
}
