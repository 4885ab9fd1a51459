/*
 * test_config.c — defaults, the defaults/agent overlay, clamps, and errors
 * that name file:line:column and the key path; the clawmem.json overlay,
 * secret references, QuantumClaw 2026.3.22's ranges and keys (typos warn),
 * the later layout as an alias; a missing or changed workspace end to end.
 */
#include <jansson.h>
#include <sys/stat.h>

#include "../src/config/config.h"
#include "../src/embed/static_model.h"
#include "clawmem.h"
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
    return cm_config_parse(text, text ? strlen(text) : 0, "qc.json", &a, &lg, cfg, err, errlen);
}

TEST(config_defaults_without_file)
{
    cm_config c;
    char err[512];
    EXPECT_INT(parse(NULL, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_STR(c.agent_id, "main");
    EXPECT_STR(c.workspace, "/tmp/qc-state/workspace");
    EXPECT_STR(c.store_path, "/tmp/qc-state/memory/main.clawmem.sqlite");
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
    EXPECT_INT(cm_config_candidates(&c, 6), 24);
    EXPECT_INT(cm_config_candidates(&c, 100), 200);
    cm_config_release(&c);
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
    cm_config_release(&c);
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
                    "number, got \"six\"");
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
    EXPECT_CONTAINS(err, "agents.defaults.memorySearch.query: expected an object, got 5");
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
    EXPECT_CONTAINS(warnings, "qc.json:3:41: unknown key somethingElse (ignored)");
    cm_config_release(&c);
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
    EXPECT_INT(cm_config_init(&a, &lg, &c, err, sizeof err), CM_OK);
    EXPECT(c.config_found);
    EXPECT_STR(c.state_dir, path_in(d, "state"));
    EXPECT_STR(c.store_path, path_in(d, "state/memory/main.clawmem.sqlite"));
    cm_config_release(&c);
    setenv("QUANTUMCLAW_CONFIG_PATH", path_in(d, "other.json"), 1);
    EXPECT_INT(cm_config_init(&a, &lg, &c, err, sizeof err), CM_OK);
    EXPECT_INT(c.citations, CM_CITE_ON);
    cm_config_release(&c);
    setenv("QUANTUMCLAW_CONFIG_PATH", path_in(d, "missing.json"), 1);
    EXPECT_INT(cm_config_init(&a, &lg, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "missing.json");
    unsetenv("QUANTUMCLAW_CONFIG_PATH");
    unsetenv("QUANTUMCLAW_STATE_DIR");
}

/* Both files from memory: quantumclaw.json as "qc.json", the overlay as
 * "clawmem.json". */
static cm_rc parse2(const char *text, const char *over, const char *agent, cm_config *cfg,
                    char *err, size_t errlen)
{
    cm_config_args a = {agent, NULL, NULL, "/tmp/qc-state"};
    config_text m = {text, text ? strlen(text) : 0, "qc.json"};
    config_text o = {over, over ? strlen(over) : 0, "clawmem.json"};
    warnings[0] = 0;
    unsetenv("CLAWMEM_CONFIG_PATH");
    return cm_config_parse_files(&m, &o, &a, &lg, cfg, err, errlen);
}

TEST(config_overlay_merges_key_by_key)
{
    const char *qc = "{\n"
                     "  agents: {\n"
                     "    defaults: { workspace: '/w/qc', memorySearch: {\n"
                     "      extraPaths: ['a'], sources: ['memory', 'sessions'],\n"
                     "      query: { maxResults: 9, minScore: 0.2,\n"
                     "               hybrid: { mmr: { lambda: 0.5 } } } } },\n"
                     "    list: [ { id: 'main', memorySearch: { query: { maxResults: 3 } } } ],\n"
                     "  },\n"
                     "  memory: { citations: 'on' },\n"
                     "  channels: { telegram: { enabled: true } }, gateway: { port: 1 },\n"
                     "}\n";
    const char *ov =
        "{\n"
        "  agents: { defaults: { memorySearch: {\n"
        "    provider: 'static', extraPaths: ['b'], sources: ['memory'],\n"
        "    store: { fts: { tokenizer: 'trigram' } },\n"
        "    query: { minScore: 0.5, hybrid: { mmr: { enabled: true } } } } },\n"
        "    list: [ { id: 'main', memorySearch: { chunking: { tokens: 100 } } } ] },\n"
        "  memory: { citations: 'off' },\n"
        "  clawmem: { hybridMerge: 'rrf', memoryWrite: true },\n"
        "}\n";
    cm_config c;
    char err[512];
    EXPECT_INT(parse2(qc, ov, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_STR(warnings, ""); /* clawmem's keys are at home in the overlay */
    EXPECT_STR(c.workspace, "/w/qc");
    EXPECT_STR(c.provider, "static");
    EXPECT_NEAR(c.min_score, 0.5, 1e-12);  /* scalar: the overlay's */
    EXPECT_INT(c.max_results, 3);          /* the agent's own beats either file's defaults */
    EXPECT_INT(c.chunk_tokens, 100);       /* the overlay's agents.list entry, matched by id */
    EXPECT(c.mmr_enabled);                 /* nested objects merge: enabled from the overlay, */
    EXPECT_NEAR(c.mmr_lambda, 0.5, 1e-12); /* lambda kept from quantumclaw.json */
    EXPECT_INT(c.sources.n, 1);            /* an array is replaced */
    EXPECT_STR(c.sources.v[0], "memory");
    EXPECT_INT(c.extra_paths.n, 2); /* extraPaths accumulate */
    EXPECT_STR(c.extra_paths.v[0], "a");
    EXPECT_STR(c.extra_paths.v[1], "b");
    EXPECT_STR(c.fts_tokenizer, "trigram");
    EXPECT_INT(c.hybrid_merge, CM_MERGE_RRF);
    EXPECT(c.memory_write);
    EXPECT_INT(c.citations, CM_CITE_OFF);
    cm_config_release(&c);
    /* no overlay at all: quantumclaw.json alone */
    EXPECT_INT(parse2(qc, NULL, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_STR(c.provider, "auto");
    EXPECT_INT(c.sources.n, 2);
    cm_config_release(&c);
}

TEST(config_overlay_errors_name_the_overlay)
{
    cm_config c;
    char err[512];
    const char *qc = "{agents: {defaults: {memorySearch: {query: {maxResults: 4}}}}}";
    const char *ov = "{\n  agents: { defaults: { memorySearch: {\n"
                     "    query: { minScore: 2 } } } } }\n";
    EXPECT_INT(parse2(qc, ov, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_STR(err, "clawmem.json:3:14: agents.defaults.memorySearch.query.minScore: expected a "
                    "number between 0 and 1, got 2");
    EXPECT_INT(parse2(qc, "{\n clawmem: { hybridMerge: 'best' } }", NULL, &c, err, sizeof err),
               CM_ECONFIG);
    EXPECT_STR(err, "clawmem.json:2:13: clawmem.hybridMerge: expected weighted, minmax or rrf, "
                    "got \"best\"");
    EXPECT_INT(parse2(qc, "{ clawmem: { , } }", NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_STR(err, "clawmem.json:1:14: expected a key or '}'");
    EXPECT_INT(parse2(qc, "[1]", NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "clawmem.json:1:1: expected an object");
    /* a typo in the overlay warns with the overlay's position */
    EXPECT_INT(parse2(qc, "{\n  clawmem: { hybridMerj: 'rrf' } }", NULL, &c, err, sizeof err),
               CM_OK);
    EXPECT_CONTAINS(warnings, "clawmem.json:2:14: unknown key clawmem.hybridMerj");
    cm_config_release(&c);
}

TEST(config_clawmem_keys_in_shared_file_warn)
{
    cm_config c;
    char err[512];
    const char *qc = "{\n"
                     "  agents: { defaults: { memorySearch: { provider: 'static',\n"
                     "    store: { fts: { tokenizer: 'trigram' } } } } },\n"
                     "  clawmem: { memoryWrite: true },\n"
                     "}\n";
    EXPECT_INT(parse2(qc, NULL, NULL, &c, err, sizeof err), CM_OK);
    /* still read, for compatibility */
    EXPECT_STR(c.provider, "static");
    EXPECT_STR(c.fts_tokenizer, "trigram");
    EXPECT(c.memory_write);
    EXPECT_CONTAINS(warnings, "qc.json:4:3: the clawmem section makes QuantumClaw 2026.3.22 "
                              "reject this file: move it to clawmem.json");
    EXPECT_CONTAINS(warnings, "qc.json:2:41: agents.defaults.memorySearch.provider \"static\" is "
                              "clawmem's own setting");
    EXPECT_CONTAINS(warnings, "qc.json:3:21: agents.defaults.memorySearch.store.fts.tokenizer is "
                              "clawmem's own setting");
    cm_config_release(&c);
    /* through cm_config_init, the message names the real overlay path */
    char *d = tmp_dir();
    write_file(d, "state/quantumclaw.json", "{clawmem: {memoryWrite: true}}");
    cm_config_args a = {NULL, NULL, NULL, path_in(d, "state")};
    unsetenv("QUANTUMCLAW_CONFIG_PATH");
    unsetenv("CLAWMEM_CONFIG_PATH");
    warnings[0] = 0;
    EXPECT_INT(cm_config_init(&a, &lg, &c, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(warnings, "move it to ");
    EXPECT_CONTAINS(warnings, path_in(d, "state/clawmem.json"));
    EXPECT(c.memory_write);
    EXPECT(!c.overlay_found);
    cm_config_release(&c);
}

TEST(config_load_reads_overlay_file)
{
    char *d = tmp_dir();
    write_file(d, "state/quantumclaw.json", "{agents: {defaults: {workspace: 'ws'}}}");
    write_file(d, "state/clawmem.json",
               "{agents: {defaults: {memorySearch: {provider: 'static'}}},\n clawmem: "
               "{embedMaxInputs: 0}}");
    write_file(d, "mine.json", "{clawmem: {localThreads: 3}}");
    cm_config c;
    char err[512];
    char state[1024];
    snprintf(state, sizeof state, "%s", path_in(d, "state"));
    cm_config_args a = {NULL, NULL, NULL, state};
    unsetenv("QUANTUMCLAW_CONFIG_PATH");
    unsetenv("CLAWMEM_CONFIG_PATH");
    EXPECT_INT(cm_config_init(&a, &lg, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "state/clawmem.json:2:12: clawmem.embedMaxInputs");
    write_file(d, "state/clawmem.json",
               "{agents: {defaults: {memorySearch: {provider: 'static'}}}}");
    EXPECT_INT(cm_config_init(&a, &lg, &c, err, sizeof err), CM_OK);
    EXPECT(c.overlay_found);
    EXPECT_STR(c.provider, "static");
    EXPECT_STR(c.overlay_path, path_in(d, "state/clawmem.json"));
    cm_config_release(&c);
    setenv("CLAWMEM_CONFIG_PATH", path_in(d, "mine.json"), 1);
    EXPECT_INT(cm_config_init(&a, &lg, &c, err, sizeof err), CM_OK);
    EXPECT_INT(c.local_threads, 3);
    EXPECT_STR(c.provider, "auto"); /* state/clawmem.json is not read then */
    cm_config_release(&c);
    setenv("CLAWMEM_CONFIG_PATH", path_in(d, "missing.json"), 1);
    EXPECT_INT(cm_config_init(&a, &lg, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "missing.json");
    unsetenv("CLAWMEM_CONFIG_PATH");
}

TEST(config_secret_references)
{
    cm_config c;
    char err[512], text[4096];
    char *d = tmp_dir();
    setenv("CM_TEST_EMBED_KEY", "sk-env-123", 1);
    unsetenv("CM_TEST_NO_SUCH_KEY");
    const char *qc =
        "{agents: {defaults: {memorySearch: {remote: {\n"
        "  apiKey: {source: 'env', provider: 'default', id: 'CM_TEST_EMBED_KEY'}}}}},\n"
        " models: {providers: {openai: {baseUrl: 'https://x', models: [],\n"
        "  apiKey: '${CM_TEST_EMBED_KEY}'}}}}";
    EXPECT_INT(parse2(qc, NULL, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_STR(c.remote_api_key, "sk-env-123");
    EXPECT_STR(c.providers[CM_PROV_OPENAI].api_key, "sk-env-123");
    EXPECT_STR(warnings, "");
    cm_config_release(&c);
    /* a missing variable: an error naming the key and its position, never a value */
    qc = "{agents: {defaults: {memorySearch: {remote: {\n"
         "  apiKey: {source: 'env', id: 'CM_TEST_NO_SUCH_KEY'}}}}}}";
    EXPECT_INT(parse2(qc, NULL, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_STR(err, "qc.json:2:3: agents.defaults.memorySearch.remote.apiKey: environment "
                    "variable \"CM_TEST_NO_SUCH_KEY\" is missing or empty");
    /* file provider, JSON pointer and singleValue modes */
    write_file(d, "secrets.json", "{\"providers\": {\"openai\": {\"apiKey\": \"sk-file-456\"}}}");
    write_file(d, "one.txt", "sk-single-789\n");
    chmod(path_in(d, "secrets.json"), 0600);
    chmod(path_in(d, "one.txt"), 0600);
    char sj[1024], one[1024];
    snprintf(sj, sizeof sj, "%s", path_in(d, "secrets.json"));
    snprintf(one, sizeof one, "%s", path_in(d, "one.txt"));
    snprintf(text, sizeof text,
             "{secrets: {providers: {vault: {source: 'file', path: '%s', mode: 'json'},\n"
             "  one: {source: 'file', path: '%s', mode: 'singleValue'}}},\n"
             " agents: {defaults: {memorySearch: {remote: {\n"
             "  apiKey: {source: 'file', provider: 'vault', id: '/providers/openai/apiKey'}}}}},\n"
             " models: {providers: {voyage: {baseUrl: 'https://v', models: [],\n"
             "  apiKey: {source: 'file', provider: 'one', id: 'value'}}}}}",
             sj, one);
    EXPECT_INT(parse2(text, NULL, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_STR(c.remote_api_key, "sk-file-456");
    EXPECT_STR(c.providers[CM_PROV_VOYAGE].api_key, "sk-single-789");
    cm_config_release(&c);
    /* the secrets section may live in the overlay, the reference in quantumclaw.json */
    snprintf(text, sizeof text, "{secrets: {providers: {vault: {source: 'file', path: '%s'}}}}",
             sj);
    qc = "{agents: {defaults: {memorySearch: {remote: {\n"
         "  apiKey: {source: 'file', provider: 'vault', id: '/providers/openai/apiKey'}}}}}}";
    EXPECT_INT(parse2(qc, text, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_STR(c.remote_api_key, "sk-file-456");
    cm_config_release(&c);
    /* a file others can read is refused, as QuantumClaw refuses it */
    chmod(path_in(d, "secrets.json"), 0644);
    EXPECT_INT(parse2(qc, text, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "qc.json:2:3: agents.defaults.memorySearch.remote.apiKey: ");
    EXPECT_CONTAINS(err, "permissions are too open");
    EXPECT(strstr(err, "sk-file") == NULL);
    chmod(path_in(d, "secrets.json"), 0600);
    /* a missing pointer */
    qc = "{agents: {defaults: {memorySearch: {remote: {\n"
         "  apiKey: {source: 'file', provider: 'vault', id: '/providers/nope'}}}}}}";
    EXPECT_INT(parse2(qc, text, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "secret \"/providers/nope\" not found");
}

TEST(config_unsupported_secret_reference_is_clear)
{
    cm_config c;
    char err[512];
    const char *qc = "{secrets: {providers: {vault: {source: 'exec', command: '/bin/vault'}}},\n"
                     " agents: {defaults: {memorySearch: {remote: {\n"
                     "  apiKey: {source: 'exec', provider: 'vault', id: 'openai/key'}}}}}}";
    EXPECT_INT(parse2(qc, NULL, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_STR(err, "qc.json:3:3: agents.defaults.memorySearch.remote.apiKey: secret references "
                    "with source \"exec\" are not supported by clawmem: use an env or file "
                    "reference");
    qc = "{agents: {defaults: {memorySearch: {remote: {apiKey: {source: 'vault', id: 'x'}}}}}}";
    EXPECT_INT(parse2(qc, NULL, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "remote.apiKey: a secret reference's source is one of env, file, exec");
    qc = "{agents: {defaults: {memorySearch: {remote: {apiKey: 42}}}}}";
    EXPECT_INT(parse2(qc, NULL, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "remote.apiKey: expected a string or a secret reference");
    qc = "{agents: {defaults: {memorySearch: {remote: {apiKey: {source: 'file', provider: 'x', id: "
         "'/a'}}}}}}";
    EXPECT_INT(parse2(qc, NULL, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "secret provider \"x\" is not configured (secrets.providers.x)");
    /* a chat provider's key clawmem may not need: a warning, not an error */
    qc = "{secrets: {providers: {vault: {source: 'exec', command: '/bin/vault'}}},\n"
         " models: {providers: {openai: {baseUrl: 'https://x', models: [],\n"
         "  apiKey: {source: 'exec', provider: 'vault', id: 'openai/key'}}}}}";
    EXPECT_INT(parse2(qc, NULL, NULL, &c, err, sizeof err), CM_OK);
    EXPECT(c.providers[CM_PROV_OPENAI].api_key == NULL);
    EXPECT_CONTAINS(warnings, "qc.json:3:3: models.providers.openai.apiKey: secret references "
                              "with source \"exec\" are not supported");
    cm_config_release(&c);
}

TEST(config_ranges_follow_quantumclaw)
{
    cm_config c;
    char err[512];
    /* 2026.3.22 accepts any positive integer here (and clamps some at run time) */
    const char *qc = "{agents: {defaults: {memorySearch: {outputDimensionality: 100000,\n"
                     "  chunking: {tokens: 200000, overlap: 300000},\n"
                     "  remote: {batch: {concurrency: 500, timeoutMinutes: 100000}},\n"
                     "  sync: {watchDebounceMs: 99999999999, intervalMinutes: 20000,\n"
                     "         sessions: {postCompactionForce: false}},\n"
                     "  cache: {maxEntries: 9000000000},\n"
                     "  query: {maxResults: 5000, hybrid: {candidateMultiplier: 50,\n"
                     "          temporalDecay: {halfLifeDays: 3650}}}}}}}";
    EXPECT_INT(parse2(qc, NULL, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_STR(warnings, "");
    EXPECT_INT(c.candidate_multiplier, 20); /* clamped as 2026.3.22 clamps it */
    EXPECT_INT(cm_config_candidates(&c, c.max_results), 200);
    EXPECT_INT(c.max_results, 1000);
    EXPECT_INT(c.chunk_overlap, c.chunk_tokens - 1);
    EXPECT_NEAR(c.half_life_days, 3650, 1e-9);
    EXPECT_NEAR(c.sync_interval_minutes, 20000, 1e-9);
    EXPECT_INT(c.cache_max_entries, 2147483647);
    cm_config_release(&c);
    /* and rejects these */
    static const char *const rejected[] = {
        "{agents: {defaults: {memorySearch: {query: {maxResults: 0}}}}}",
        "{agents: {defaults: {memorySearch: {query: {hybrid: {candidateMultiplier: 0}}}}}}",
        "{agents: {defaults: {memorySearch: {query: {hybrid: {temporalDecay: {halfLifeDays: "
        "0.5}}}}}}}",
        "{agents: {defaults: {memorySearch: {sync: {intervalMinutes: 1.5}}}}}",
        "{agents: {defaults: {memorySearch: {query: {minScore: 1.01}}}}}",
        "{agents: {defaults: {memorySearch: {remote: {batch: {timeoutMinutes: 0}}}}}}",
        "{agents: {defaults: {memorySearch: {chunking: {tokens: 0}}}}}",
        "{agents: {defaults: {memorySearch: {query: {maxResults: Infinity}}}}}",
    };
    for (size_t i = 0; i < ARRAY_LEN(rejected); i++)
        EXPECT_INT(parse2(rejected[i], NULL, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_INT(parse2(rejected[0], NULL, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_CONTAINS(err, "query.maxResults: expected an integer of at least 1, got 0");
}

TEST(config_unknown_keys_warn_at_every_level)
{
    cm_config c;
    char err[512];
    const char *qc =
        "{\n"
        "  agent: {},\n"
        "  agents: {\n"
        "    defaults: { workspce: '/w', compaction: {}, heartbeat: {} },\n"
        "    list: [ { id: 'x', memorySerch: {}, identity: {}, memorySearch: { qurey: {} } } ],\n"
        "    defualts: {},\n"
        "  },\n"
        "  memory: { citation: 'off', qmd: { limit: {}, update: { intervall: '5m' },\n"
        "            paths: [ { path: '/p', patern: '*' } ] } },\n"
        "  models: { providers: { openai: { baseUrl: 'u', models: [], apiKye: 'k' } },\n"
        "            mod: 'merge' },\n"
        "  secrets: { defaults: { envv: 'x' } },\n"
        "  channels: {}, gateway: {}, session: {}, auth: {}, tools: {}, plugins: {},\n"
        "  $schema: 'x', messages: {}, hooks: {}, skills: {}, cron: {}, ui: {},\n"
        "}\n";
    EXPECT_INT(parse2(qc, NULL, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(warnings, "qc.json:2:3: unknown key agent (ignored)");
    EXPECT_CONTAINS(warnings, "qc.json:4:17: unknown key agents.defaults.workspce (ignored)");
    EXPECT_CONTAINS(warnings, "qc.json:5:24: unknown key agents.list[0].memorySerch (ignored)");
    EXPECT_CONTAINS(warnings, "qc.json:6:5: unknown key agents.defualts (ignored)");
    /* another agent's typos too */
    EXPECT_CONTAINS(warnings, "qc.json:5:71: unknown key agents.list[0].memorySearch.qurey");
    EXPECT_CONTAINS(warnings, "qc.json:8:13: unknown key memory.citation (ignored)");
    EXPECT_CONTAINS(warnings, "qc.json:8:37: unknown key memory.qmd.limit (ignored)");
    EXPECT_CONTAINS(warnings, "qc.json:8:58: unknown key memory.qmd.update.intervall (ignored)");
    EXPECT_CONTAINS(warnings, "qc.json:9:36: unknown key memory.qmd.paths[0].patern (ignored)");
    EXPECT_CONTAINS(warnings,
                    "qc.json:10:62: unknown key models.providers.openai.apiKye (ignored)");
    EXPECT_CONTAINS(warnings, "qc.json:11:13: unknown key models.mod (ignored)");
    EXPECT_CONTAINS(warnings, "qc.json:12:26: unknown key secrets.defaults.envv (ignored)");
    /* QuantumClaw's own sections clawmem does not use are not typos */
    static const char *const quiet[] = {"channels", "gateway",    "session",   "auth",
                                        "plugins",  "compaction", "heartbeat", "identity",
                                        "$schema",  "messages",   "hooks",     "skills",
                                        "cron",     "ui",         "tools"};
    for (size_t i = 0; i < ARRAY_LEN(quiet); i++) {
        char k[64];
        snprintf(k, sizeof k, "%s (ignored)", quiet[i]);
        EXPECT(strstr(warnings, k) == NULL);
    }
    cm_config_release(&c);
    /* clawmem's old name for channels.telegram.apiRoot: read, but named */
    EXPECT_INT(
        parse2("{channels: {telegram: {apiBaseUrl: 'http://x',\n"
               "  accounts: {two: {apiBaseUrl: 'http://y'}, three: {apiRoot: 'http://z'}}}}}",
               NULL, NULL, &c, err, sizeof err),
        CM_OK);
    EXPECT_CONTAINS(warnings, "qc.json:1:24: channels.telegram.apiBaseUrl is not a QuantumClaw "
                              "2026.3.22 key (it rejects this file): rename it to "
                              "channels.telegram.apiRoot");
    EXPECT_CONTAINS(warnings, "rename it to channels.telegram.accounts.two.apiRoot");
    EXPECT(strstr(warnings, "three") == NULL);
    EXPECT(strstr(warnings, "channels.http") == NULL);
    cm_config_release(&c);
    /* channels.http is clawmem's own: named in quantumclaw.json, at home in clawmem.json */
    EXPECT_INT(parse2("{channels: {http: {enabled: true}}}",
                      "{channels: {http: {callbackUrl: "
                      "'http://cb'}}}",
                      NULL, &c, err, sizeof err),
               CM_OK);
    EXPECT_CONTAINS(warnings, "qc.json:1:13: channels.http makes QuantumClaw 2026.3.22 reject "
                              "this file (unknown channel id): move it to");
    EXPECT(strstr(warnings, "clawmem.json:1") == NULL);
    EXPECT(json_is_true(
        json_object_get(json_object_get(json_object_get(c.root, "channels"), "http"), "enabled")));
    EXPECT_STR(json_string_value(json_object_get(
                   json_object_get(json_object_get(c.root, "channels"), "http"), "callbackUrl")),
               "http://cb");
    cm_config_release(&c);
    /* a top-level memorySearch is named, not silently dropped */
    EXPECT_INT(parse2("{memorySearch: {provider: 'openai'}}", NULL, NULL, &c, err, sizeof err),
               CM_OK);
    EXPECT_CONTAINS(warnings, "qc.json:1:2: memorySearch at the top level is not read: use "
                              "agents.defaults.memorySearch");
    EXPECT_STR(c.provider, "auto");
    cm_config_release(&c);
}

TEST(config_later_layout_is_an_alias)
{
    cm_config c;
    char err[512];
    const char *qc =
        "{\n"
        "  memory: { search: { query: { maxResults: 7 }, extraPaths: ['x'] } },\n"
        "  agents: { entries: {\n"
        "    ops: { workspace: '/w/ops', memory: { search: { query: { minScore: 0.2 } } } },\n"
        "    other: { workspace: '/w/other', memry: {} } } },\n"
        "}\n";
    EXPECT_INT(parse2(qc, NULL, "ops", &c, err, sizeof err), CM_OK);
    EXPECT_INT(c.max_results, 7);
    EXPECT_INT(c.extra_paths.n, 1);
    EXPECT_STR(c.workspace, "/w/ops");
    EXPECT_NEAR(c.min_score, 0.2, 1e-12);
    EXPECT_CONTAINS(warnings, "qc.json:2:13: memory.search is the later OpenClaw layout: read as "
                              "agents.defaults.memorySearch, but QuantumClaw 2026.3.22 rejects");
    EXPECT_CONTAINS(warnings, "qc.json:3:13: agents.entries is the later OpenClaw layout: read as "
                              "agents.list");
    EXPECT_CONTAINS(warnings, "qc.json:5:37: unknown key agents.entries.other.memry (ignored)");
    EXPECT(strstr(warnings, "unknown key agents.entries.ops") == NULL);
    cm_config_release(&c);
    /* a bad value there names the alias path */
    EXPECT_INT(
        parse2("{memory: {search: {query: {minScore: 7}}}}", NULL, NULL, &c, err, sizeof err),
        CM_ECONFIG);
    EXPECT_CONTAINS(err, "qc.json:1:28: memory.search.query.minScore: expected a number");
    /* in clawmem.json the later layout is read without a warning */
    EXPECT_INT(
        parse2("{}", "{memory: {search: {query: {maxResults: 8}}}}", NULL, &c, err, sizeof err),
        CM_OK);
    EXPECT_INT(c.max_results, 8);
    EXPECT_STR(warnings, "");
    cm_config_release(&c);
}

/* ---- end to end: the overlay through the CLI, a missing or changed workspace */

static const char *const static_words[] = {"the", "dog", "puppy", "router", "modem"};
static const float static_vecs[] = {0.1f, 0.1f, 0.1f, 0.1f, 1, 0.2f, 0, 0, 0.9f, 0.3f,
                                    0,    0,    0,    0,    1, 0.2f, 0, 0, 0.9f, 0.3f};

TEST(config_overlay_static_provider_end_to_end)
{
    char *d = tmp_dir();
    char model[1024], over[4096], state[1024], qc[1024], ws[1024];
    snprintf(model, sizeof model, "%s", path_in(d, "m.bin"));
    snprintf(state, sizeof state, "%s", path_in(d, "state"));
    snprintf(qc, sizeof qc, "%s", path_in(d, "state/quantumclaw.json"));
    snprintf(ws, sizeof ws, "%s", path_in(d, "ws"));
    int rc = cm_static_model_write(model, static_words, static_vecs, 5, 4, over, sizeof over);
    EXPECT_INT(rc, CM_OK);
    /* quantumclaw.json: only what QuantumClaw 2026.3.22 itself accepts */
    char text[4096];
    snprintf(
        text, sizeof text,
        "{\n  agents: { defaults: { workspace: '%s', compaction: { reserveTokensFloor: 20000 },\n"
        "    memorySearch: { provider: 'openai', fallback: 'none' } } },\n"
        "  gateway: { port: 18789 }, channels: {},\n}\n",
        ws);
    write_file(d, "state/quantumclaw.json", text);
    snprintf(over, sizeof over,
             "// clawmem's own settings\n{\n  agents: { defaults: { memorySearch: { provider: "
             "'static' } } },\n"
             "  clawmem: { staticModel: '%s', hybridMerge: 'minmax' },\n}\n",
             model);
    write_file(d, "state/clawmem.json", over);
    write_file(d, "ws/memory/a.md", "Took the dog to the park.\n");
    write_file(d, "ws/memory/b.md", "Reset the router again.\n");
    const char *env[] = {"CLAWMEM_CONFIG_PATH=", "QUANTUMCLAW_CONFIG_PATH=", NULL};
    const char *args[] = {"--state-dir", state, "index", NULL};
    run_result r = run_clawmem(env, args);
    EXPECT_INT(r.status, 0);
    EXPECT_STR(r.err, ""); /* no warning about either file */
    run_result_release(&r);
    const char *stargs[] = {"--state-dir", state, "status", "--json", NULL};
    r = run_clawmem(env, stargs);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.out, "\"clawmemConfigFound\":true");
    EXPECT_CONTAINS(r.out, "state/clawmem.json\"");
    EXPECT_CONTAINS(r.out, "\"requestedProvider\":\"static\"");
    run_result_release(&r);
    const char *sargs[] = {"--state-dir", state,         "search", "puppy",
                           "--json",      "--min-score", "0",      NULL};
    r = run_clawmem(env, sargs);
    EXPECT_INT(r.status, 0);
    json_t *p = json_loads(r.out, 0, NULL);
    EXPECT_STR(json_string_value(json_object_get(p, "provider")), "static");
    EXPECT_STR(json_string_value(
                   json_object_get(json_array_get(json_object_get(p, "results"), 0), "path")),
               "memory/a.md");
    json_decref(p);
    run_result_release(&r);
    /* a bad overlay: one line naming the overlay's own file:line:column */
    write_file(d, "state/clawmem.json", "{\n  clawmem: { localThreads: 'many' },\n}\n");
    r = run_clawmem(env, stargs);
    EXPECT_INT(r.status, 1);
    EXPECT_CONTAINS(r.err, "state/clawmem.json:2:14: clawmem.localThreads: expected an integer");
    EXPECT(strchr(r.err, '\n') == strrchr(r.err, '\n')); /* one line */
    run_result_release(&r);
    /* a typo there warns with its position, and the command still runs */
    write_file(d, "state/clawmem.json",
               "{\n  clawmem: { hybridMerge: 'rrf' },\n  agnets: {},\n}\n");
    r = run_clawmem(env, stargs);
    EXPECT_INT(r.status, 0);
    EXPECT_CONTAINS(r.err, "state/clawmem.json:3:3: unknown key agnets (ignored)");
    run_result_release(&r);
}

static int count_result(void *ctx, const cm_search_result *r)
{
    (void)r;
    ++*(int *)ctx;
    return 0;
}

TEST(config_missing_workspace_is_an_error)
{
    char *d = tmp_dir();
    char state[1024], qc[1024], ws[1024], gone[1024];
    snprintf(state, sizeof state, "%s", path_in(d, "state"));
    snprintf(qc, sizeof qc, "%s", path_in(d, "qc.json"));
    snprintf(ws, sizeof ws, "%s", path_in(d, "ws"));
    snprintf(gone, sizeof gone, "%s", path_in(d, "gone"));
    write_file(d, "ws/MEMORY.md", "The dog is called Biscuit.\n");
    char text[4096];
    snprintf(text, sizeof text, "{agents: {defaults: {workspace: '%s'}}}", ws);
    write_file(d, "qc.json", text);
    const char *env[] = {"CLAWMEM_CONFIG_PATH=", NULL};
    const char *iargs[] = {"--state-dir", state, "--config", qc, "index", NULL};
    run_result r = run_clawmem(env, iargs);
    EXPECT_INT(r.status, 0);
    run_result_release(&r);
    /* the config now names a workspace that does not exist: the index of the
     * old one must not answer */
    snprintf(text, sizeof text, "{agents: {defaults: {workspace: '%s'}}}", gone);
    write_file(d, "qc.json", text);
    const char *cmds[][4] = {{"search", "Biscuit", NULL, NULL},
                             {"search", "Biscuit", "--json", NULL},
                             {"get", "MEMORY.md", NULL, NULL},
                             {"status", NULL, NULL, NULL},
                             {"status", "--json", NULL, NULL}};
    for (size_t i = 0; i < ARRAY_LEN(cmds); i++) {
        const char *args[10] = {"--state-dir", state, "--config", qc};
        size_t n = 4;
        for (size_t k = 0; k < 4 && cmds[i][k]; k++)
            args[n++] = cmds[i][k];
        args[n] = NULL;
        r = run_clawmem(env, args);
        if (!(cmds[i][0][1] == 'e' && cmds[i][2])) EXPECT_INT(r.status, 1); /* not search --json */
        EXPECT(strstr(r.out, "Biscuit") == NULL);
        EXPECT(strstr(r.out, "\"files\":1") == NULL);
        if (strstr(r.out, "disabled"))
            EXPECT_CONTAINS(r.out, "gone does not exist");
        else
            EXPECT_CONTAINS(r.err, "gone does not exist");
        run_result_release(&r);
    }
    /* the library says the same */
    cm_options o = {NULL, gone, qc, state, NULL, NULL, 0};
    cm_engine *e = NULL;
    char err[1024], *js = NULL;
    EXPECT_INT(cm_engine_open(&o, &e, err, sizeof err), CM_OK);
    EXPECT_INT(cm_memory_search(e, "Biscuit", NULL, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "\"disabled\":true");
    EXPECT_CONTAINS(js, "gone does not exist");
    EXPECT(strstr(js, "MEMORY.md") == NULL);
    cm_free(js);
    js = NULL;
    int calls = 0;
    EXPECT_INT(
        cm_memory_search_each(e, "Biscuit", NULL, NULL, count_result, &calls, err, sizeof err),
        CM_EUNAVAILABLE);
    EXPECT_CONTAINS(err, "gone does not exist");
    EXPECT_INT(calls, 0);
    EXPECT_INT(cm_memory_get(e, "MEMORY.md", 0, 0, &js, err, sizeof err), CM_ENOTFOUND);
    EXPECT_CONTAINS(err, "gone does not exist");
    EXPECT_INT(cm_engine_status(e, 0, &js, err, sizeof err), CM_ENOTFOUND);
    EXPECT_CONTAINS(err, "gone does not exist");
    cm_engine_close(e);
}

TEST(config_workspace_change_rebuilds)
{
    char *d = tmp_dir();
    char state[1024], ws1[1024], ws2[1024];
    snprintf(state, sizeof state, "%s", path_in(d, "state"));
    snprintf(ws1, sizeof ws1, "%s", path_in(d, "one"));
    snprintf(ws2, sizeof ws2, "%s", path_in(d, "two"));
    write_file(d, "one/MEMORY.md", "The dog is called Biscuit.\n");
    write_file(d, "two/MEMORY.md", "The cat is called Pixel.\n");
    unsetenv("CLAWMEM_CONFIG_PATH");
    cm_options o1 = {NULL, ws1, path_in(d, "none.json"), state, NULL, NULL, 0};
    write_file(d, "none.json", "{}");
    cm_engine *e1 = NULL, *e2 = NULL;
    char err[1024], *js = NULL;
    EXPECT_INT(cm_engine_open(&o1, &e1, err, sizeof err), CM_OK);
    EXPECT_INT(cm_engine_sync(e1, 0, NULL, NULL, NULL, err, sizeof err), CM_OK);
    /* the same index path, another workspace: before a sync, no stale answer */
    cm_options o2 = o1;
    o2.workspace = ws2;
    EXPECT_INT(cm_engine_open(&o2, &e2, err, sizeof err), CM_OK);
    EXPECT_INT(cm_memory_search(e2, "Biscuit", NULL, &js, err, sizeof err), CM_OK);
    EXPECT(strstr(js, "MEMORY.md") == NULL);
    EXPECT_CONTAINS(js, "holds workspace");
    cm_free(js);
    EXPECT_INT(cm_engine_status(e2, 0, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "\"files\":0");
    EXPECT_CONTAINS(js, "holds workspace");
    cm_free(js);
    /* a sync rebuilds it for the new workspace */
    cm_sync_stats st;
    EXPECT_INT(cm_engine_sync(e2, 0, NULL, NULL, &st, err, sizeof err), CM_OK);
    EXPECT_INT(st.files_indexed, 1);
    EXPECT_INT(cm_memory_search(e2, "Pixel", NULL, &js, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(js, "MEMORY.md");
    EXPECT_CONTAINS(js, "Pixel");
    cm_free(js);
    EXPECT_INT(cm_memory_search(e2, "Biscuit", NULL, &js, err, sizeof err), CM_OK);
    EXPECT(strstr(js, "Biscuit") == NULL);
    cm_free(js);
    /* and the first engine, whose workspace the index no longer holds, refuses it */
    EXPECT_INT(cm_memory_search(e1, "Biscuit", NULL, &js, err, sizeof err), CM_OK);
    EXPECT(strstr(js, "Biscuit\\n") == NULL || strstr(js, "holds workspace") != NULL);
    EXPECT_CONTAINS(js, "holds workspace");
    cm_free(js);
    cm_engine_close(e1);
    cm_engine_close(e2);
}

TEST(config_env_substitution)
{
    cm_config c;
    char err[512];
    setenv("CM_TEST_BASE", "https://api.example.com", 1);
    setenv("CM_TEST_WS", "/w/env", 1);
    unsetenv("CM_TEST_UNSET");
    const char *qc = "{agents: {defaults: {workspace: '${CM_TEST_WS}/main',\n"
                     "  memorySearch: {remote: {baseUrl: '${CM_TEST_BASE}/v1',\n"
                     "    headers: {'X-Lit': '$${CM_TEST_BASE}', 'X-Odd': '${lower} $5'}},\n"
                     "    extraPaths: ['${CM_TEST_WS}/notes']}}}}";
    EXPECT_INT(parse2(qc, NULL, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_STR(c.workspace, "/w/env/main");
    EXPECT_STR(c.remote_base_url, "https://api.example.com/v1");
    EXPECT_STR(c.extra_paths.v[0], "/w/env/notes");
    EXPECT_INT(c.remote_headers.n, 2);
    EXPECT_STR(c.remote_headers.v[0], "X-Lit: ${CM_TEST_BASE}");
    EXPECT_STR(c.remote_headers.v[1], "X-Odd: ${lower} $5");
    cm_config_release(&c);
    qc = "{agents: {defaults: {memorySearch: {\n  remote: {baseUrl: '${CM_TEST_UNSET}/v1'}}}}}";
    EXPECT_INT(parse2(qc, NULL, NULL, &c, err, sizeof err), CM_ECONFIG);
    EXPECT_STR(err, "qc.json:2:12: agents.defaults.memorySearch.remote.baseUrl: environment "
                    "variable \"CM_TEST_UNSET\" is missing or empty");
    /* a section clawmem does not read may name variables it does not have */
    EXPECT_INT(
        parse2("{gateway: {auth: {token: '${CM_TEST_UNSET}'}}}", NULL, NULL, &c, err, sizeof err),
        CM_OK);
    cm_config_release(&c);
}

/* Every config error quotes the value as written (after the key path and
 * line:column), but never the value of a credential or a header. */
TEST(config_errors_quote_the_bad_value)
{
    cm_config c;
    char err[512];
    const char *qc = "{}";
    EXPECT_INT(parse2(qc, "{\n clawmem: { hybridMerge: 'rfr' } }", NULL, &c, err, sizeof err),
               CM_ECONFIG);
    EXPECT_STR(err, "clawmem.json:2:13: clawmem.hybridMerge: expected weighted, minmax or rrf, "
                    "got \"rfr\"");
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"{memory: {backend: 'sqlite'}}",
         "qc.json:1:11: memory.backend: expected \"builtin\" or \"qmd\", got \"sqlite\""},
        {"{memory: {citations: 'sometimes'}}",
         "qc.json:1:11: memory.citations: expected auto, on or off, got \"sometimes\""},
        {"{agents: {defaults: {memorySearch: {store: {fts: {tokenizer: 'icu'}}}}}}",
         "qc.json:1:51: agents.defaults.memorySearch.store.fts.tokenizer: expected one of "
         "unicode61|trigram|porter, got \"icu\""},
        {"{agents: {defaults: {memorySearch: {extraPaths: ['a', 3]}}}}",
         "qc.json:1:55: agents.defaults.memorySearch.extraPaths[1]: expected a string, got 3"},
        {"{agents: {defaults: {workspace: 7}}}",
         "qc.json:1:22: agents.defaults.workspace: expected a string, got 7"},
        {"{clawmem: {localThreads: 0}}",
         "qc.json:1:12: clawmem.localThreads: expected an integer from 1 to 256, got 0"},
        {"{memory: {qmd: {update: {interval: 'soon'}}}}",
         "qc.json:1:26: memory.qmd.update.interval: expected a duration such as \"5m\", \"90s\" or "
         "\"1h\", got \"soon\""},
        {"{agents: {defaults: {memorySearch: {query: {maxResults: 'six'}}}}}",
         "qc.json:1:45: agents.defaults.memorySearch.query.maxResults: expected a number, got "
         "\"six\""},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        EXPECT_INT(parse(cases[i].text, NULL, &c, err, sizeof err), CM_ECONFIG);
        EXPECT_STR(err, cases[i].want);
    }
    /* a header's value may be a credential: named, never shown */
    EXPECT_INT(parse("{agents: {defaults: {memorySearch: {remote: {headers: "
                     "{'X-Key': 'Bearer s3cr3t\\nx'}}}}}}",
                     NULL, &c, err, sizeof err),
               CM_ECONFIG);
    EXPECT_CONTAINS(err, "remote.headers.X-Key: a header name or value with ':' or a newline");
    EXPECT(strstr(err, "s3cr3t") == NULL);
    EXPECT_INT(parse("{agents: {defaults: {memorySearch: {remote: {apiKey: "
                     "{source: 'env', provider: 'default', id: 'CM_TEST_NO_SUCH_KEY'}}}}}}",
                     NULL, &c, err, sizeof err),
               CM_ECONFIG);
    EXPECT(strstr(err, "got ") == NULL);
}

/* An unknown key names the one meant when it is a typo of a key known at
 * its level: QuantumClaw's sections, memorySearch's fields, clawmem's own. */
TEST(config_unknown_key_did_you_mean)
{
    cm_config c;
    char err[512];
    const char *text = "{\n agents: {defaults: {memorySerch: {},\n"
                       "  memorySearch: {qurey: {maxResult: 3}, chunking: {token: 9}}}},\n"
                       " memroy: {}, clawmem: {localThread: 2}, zzzzzzzz: 1\n}\n";
    EXPECT_INT(parse(text, NULL, &c, err, sizeof err), CM_OK);
    EXPECT_CONTAINS(warnings, "qc.json:2:22: unknown key agents.defaults.memorySerch (ignored): "
                              "did you mean memorySearch?\n");
    EXPECT_CONTAINS(warnings, "unknown key agents.defaults.memorySearch.qurey (ignored): did you "
                              "mean query?\n");
    EXPECT_CONTAINS(warnings, "unknown key agents.defaults.memorySearch.chunking.token (ignored): "
                              "did you mean tokens?\n");
    EXPECT_CONTAINS(warnings, "unknown key memroy (ignored): did you mean memory?\n");
    EXPECT_CONTAINS(warnings, "unknown key clawmem.localThread (ignored): did you mean "
                              "localThreads?\n");
    EXPECT_CONTAINS(warnings, "unknown key zzzzzzzz (ignored)\n");
    cm_config_release(&c);
}
