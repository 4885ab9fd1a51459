/*
 * config.c — reads quantumclaw.json and the clawmem.json overlay (JSON5) and
 * resolves one agent's memory settings, applied in layers — both files'
 * defaults, then both files' entries of the agent, the overlay second each
 * time — so a later leaf overrides an earlier one and each error names the
 * file and path where the value was written. The memorySearch keys are read
 * by schema.c, typos are found by known_keys.c; then paths, clamps and
 * defaults as QuantumClaw resolves them.
 */
#include <math.h>
#include <unistd.h>

#include "../base/buf.h"
#include "../base/fs.h"
#include "config_int.h"
#include "../base/caps.h"

#define CONFIG_MAX_BYTES CM_CAP_CONFIG_FILE

const char *const cm_provider_names[CM_PROV_N] = {"openai", "gemini", "voyage", "mistral",
                                                  "ollama"};

cm_rc cm_config_extra_path(const cm_config *cfg, size_t i, buf *out)
{
    char *x = cm_fs_expand_home(cfg->extra_paths.v[i]);
    if (!x) return CM_ENOMEM;
    size_t start = out->len;
    cm_rc rc = cm_fs_join(out, cfg->workspace, x);
    free(x);
    if (!rc) {
        bool ok = cm_fs_normalise(out->data + start);
        out->len = start + strlen(out->data + start);
        if (!ok) rc = CM_EPATH;
    }
    /* Its directory canonical when it exists (see the workspace in
     * resolve_paths); the last component stays as written, so that a
     * symbolic link there is still seen, and ignored. */
    char *slash = rc ? NULL : strrchr(out->data + start, '/');
    if (slash && slash != out->data + start) {
        *slash = 0;
        char *real = realpath(out->data + start, NULL);
        *slash = '/';
        if (real) {
            char *last = cm_strdup(slash);
            out->len = start;
            rc = last ? cm_buf_adds(out, real) : CM_ENOMEM;
            if (!rc) rc = cm_buf_adds(out, last);
            free(last);
            free(real);
        }
    }
    return rc;
}

static cm_rc get_str(ctx *c, const json_t *obj, const char *key, const char *path, char **dst)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return CM_OK;
    if (!json_is_string(v)) return cm_config_bad(c, obj, key, path, "expected a string");
    char *x = NULL;
    cm_rc rc = cm_config_subst(c, obj, key, path, v, &x);
    if (rc) return rc;
    free(*dst);
    *dst = x;
    return CM_OK;
}

/* The workspace key of obj (path names it), remembered as where it came from. */
static cm_rc get_workspace(ctx *c, const json_t *obj, const char *path)
{
    if (!json_object_get(obj, "workspace")) return CM_OK;
    snprintf(c->cfg->workspace_from, sizeof c->cfg->workspace_from, "%.95s", path);
    return get_str(c, obj, "workspace", path, &c->cfg->workspace);
}

static cm_rc get_obj(ctx *c, const json_t *obj, const char *key, const char *path, json_t **out)
{
    *out = obj ? json_object_get(obj, key) : NULL;
    if (*out && !json_is_object(*out)) {
        char what[128], val[80];
        snprintf(what, sizeof what, "expected an object, got %s",
                 cm_config_value_text(*out, path, val, sizeof val));
        return cm_config_bad(c, obj, key, path, what);
    }
    return CM_OK;
}

static void set_defaults(cm_config *cfg)
{
    cfg->enabled = true;
    cfg->vector_enabled = true;
    cfg->chunk_tokens = 400;
    cfg->chunk_overlap = 80;
    cfg->sync_watch = true;
    cfg->sync_on_search = true;
    cfg->sync_on_session_start = true;
    cfg->watch_debounce_ms = 1500;
    cfg->max_results = 6;
    cfg->min_score = 0.35;
    cfg->hybrid_enabled = true;
    cfg->vector_weight = -1; /* unset: finish() picks the default */
    cfg->text_weight = -1;
    cfg->candidate_multiplier = 4;
    cfg->mmr_lambda = 0.7;
    cfg->half_life_days = 30;
    cfg->cache_enabled = true;
    cfg->cache_max_entries = 50000;
    cfg->multimodal_max_bytes = CM_MEDIA_MAX_BYTES_DEFAULT;
    cfg->batch_concurrency = 2;
    cfg->batch_wait = true;
    cfg->batch_poll_ms = 2000;
    cfg->batch_timeout_min = 60;
    cfg->citations = CM_CITE_AUTO;
    cm_config_qmd_defaults(cfg);
    cm_session_maint_defaults(&cfg->session_maint);
    cfg->sessions_delta_bytes = 100000;
    cfg->sessions_delta_messages = 50;
}

static cm_rc resolve_state(const cm_config_args *args, cm_config *cfg, char *err, size_t errlen);

static cm_rc resolve_paths(cm_config *cfg, const cm_config_args *args, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    char *ws = NULL;
    buf b = BUF_INIT;
    if (args->workspace) {
        CHECK(cm_config_set_str(&cfg->workspace, args->workspace));
        snprintf(cfg->workspace_from, sizeof cfg->workspace_from, "--workspace");
    }
    if (!cfg->workspace) {
        CHECK(cm_fs_join(&b, cfg->state_dir, "workspace"));
        cfg->workspace = cm_buf_detach(&b);
    }
    if (!cfg->workspace[0]) FAIL(CM_ECONFIG, "the workspace path is empty");
    if (cfg->store_path && !cfg->store_path[0])
        FAIL(CM_ECONFIG, "memorySearch.store.path is empty");
    if (cfg->store_driver && strcmp(cfg->store_driver, "postgres") == 0 &&
        (!cfg->store_dsn || !cfg->store_dsn[0]))
        FAIL(CM_ECONFIG, "memorySearch.store.driver is \"postgres\" but store.dsn is not set");
    if (!(ws = cm_fs_expand_home(cfg->workspace))) CHECK(CM_ENOMEM);
    if (ws[0] != '/') {
        char cwd[4096];
        if (!getcwd(cwd, sizeof cwd)) FAIL(CM_EIO, "cannot resolve the current directory");
        cm_buf_reset(&b);
        CHECK(cm_fs_join(&b, cwd, ws));
        free(ws);
        ws = cm_buf_detach(&b);
    }
    while (strlen(ws) > 1 && ws[strlen(ws) - 1] == '/')
        ws[strlen(ws) - 1] = 0;
    /* The canonical path when it exists: memory_get refuses anything reached
     * through a symbolic link, which a link in the workspace's own path is not. */
    char *real = realpath(ws, NULL);
    if (real) {
        free(ws);
        ws = real;
    }
    free(cfg->workspace);
    cfg->workspace = ws;
    ws = NULL;

    /* store.path: {agentId} token, ~ expansion, default
     * <stateDir>/memory/<agentId>.clawmem.sqlite: QuantumClaw's own index is
     * <stateDir>/memory/<agentId>.sqlite, with other tables under the same
     * names, so clawmem keeps a file of its own beside it (an index of
     * clawmem's found at that older default is moved once, engine/open) */
    cm_buf_reset(&b);
    free(cfg->store_path_legacy);
    cfg->store_path_legacy = NULL;
    if (cfg->store_path) {
        char *expanded = cm_fs_expand_home(cfg->store_path);
        if (!expanded) CHECK(CM_ENOMEM);
        for (const char *p = expanded; *p && !rc;) {
            if (strncmp(p, "{agentId}", 9) == 0) {
                rc = cm_buf_adds(&b, cfg->agent_id);
                p += 9;
            } else {
                rc = cm_buf_addc(&b, *p++);
            }
        }
        free(expanded);
        CHECK(rc);
        if (b.data[0] != '/') {
            char *rel = cm_buf_detach(&b);
            rc = cm_fs_join(&b, cfg->state_dir, rel);
            free(rel);
            CHECK(rc);
        }
    } else {
        CHECK(cm_buf_printf(&b, "%s/memory/%s.sqlite", cfg->state_dir, cfg->agent_id));
        cfg->store_path_legacy = cm_buf_detach(&b);
        CHECK(cm_buf_printf(&b, "%s/memory/%s.clawmem.sqlite", cfg->state_dir, cfg->agent_id));
    }
    free(cfg->store_path);
    cfg->store_path = cm_buf_detach(&b);
    /* the agent's session transcripts (session memory search) */
    CHECK(cm_buf_printf(&b, "%s/agents/%s/sessions", cfg->state_dir, cfg->agent_id));
    free(cfg->sessions_dir);
    cfg->sessions_dir = cm_buf_detach(&b);
out:
    free(ws);
    cm_buf_release(&b);
    return rc;
}

/* Clamps and derived values, as QuantumClaw resolves them. */
static void finish(cm_config *cfg)
{
    /* 2026.3.22 accepts any positive integer and clamps these at run time */
    cfg->candidate_multiplier = CM_MAX(1, CM_MIN(20, cfg->candidate_multiplier));
    cfg->half_life_days = CM_MAX(1, floor(cfg->half_life_days));
    /* clawmem's own bounds: nothing observable changes above them */
    cfg->max_results = CM_MIN(cfg->max_results, 1000); /* at most 400 candidates exist */
    cfg->chunk_tokens = CM_MIN(cfg->chunk_tokens, 100000);
    cfg->batch_concurrency = CM_MIN(cfg->batch_concurrency, 64);
    cfg->output_dims = CM_MIN(cfg->output_dims, 65536);
    cm_config_session_maint_finish(&cfg->session_maint);
    if (!cfg->provider) cfg->provider = cm_strdup("auto");
    if (!cfg->fts_tokenizer) cfg->fts_tokenizer = cm_strdup("porter");
    if (!cfg->store_driver) cfg->store_driver = cm_strdup("sqlite");
    if (!cfg->backend) cfg->backend = cm_strdup("builtin");
    if (cfg->sources.n == 0) cm_config_strlist_add(&cfg->sources, "memory");
    if (cfg->chunk_overlap >= cfg->chunk_tokens) cfg->chunk_overlap = cfg->chunk_tokens - 1;
    /* The static model adds to keywords only min-max normalised and weighted
     * lightly (docs/QUALITY.md): its default unless the merge or a weight is set. */
    if (cfg->vector_weight < 0 && cfg->text_weight < 0 && !cfg->hybrid_merge_set && cfg->provider &&
        strcmp(cfg->provider, "static") == 0) {
        cfg->hybrid_merge = CM_MERGE_MINMAX;
        cfg->vector_weight = CM_STATIC_VECTOR_WEIGHT;
        cfg->text_weight = 1 - CM_STATIC_VECTOR_WEIGHT;
    }
    if (cfg->vector_weight < 0) cfg->vector_weight = 0.7;
    if (cfg->text_weight < 0) cfg->text_weight = 0.3;
    double sum = cfg->vector_weight + cfg->text_weight;
    if (sum > 0) {
        cfg->vector_weight /= sum;
        cfg->text_weight /= sum;
    } else {
        cfg->vector_weight = 0.7;
        cfg->text_weight = 0.3;
    }
}

bool cm_config_gemini2_model(const char *model)
{
    if (!model) return false;
    /* as 2026.3.22 normalises it: "models/", then "gemini/" or "google/" dropped */
    if (!strncmp(model, "models/", 7)) model += 7;
    if (!strncmp(model, "gemini/", 7) || !strncmp(model, "google/", 7)) model += 7;
    return strcmp(model, "gemini-embedding-2-preview") == 0;
}

/* Gemini Embedding 2's dimensions; multimodal.*: which modalities are on,
 * and 2026.3.22's two rules: only
 * with provider gemini and model gemini-embedding-2-preview, and only with
 * fallback "none" (the fallback could not embed the media files). */
static cm_rc check_multimodal(cm_config *cfg, char *err, size_t errlen)
{
    cfg->multimodal = 0;
    if (cfg->output_dims && !strcmp(cfg->provider, "gemini") &&
        cm_config_gemini2_model(cfg->model) && cfg->output_dims != 768 &&
        cfg->output_dims != 1536 && cfg->output_dims != 3072)
        return cm_seterr(err, errlen, CM_ECONFIG,
                         "%s: memorySearch.outputDimensionality: gemini-embedding-2-preview takes "
                         "768, 1536 or 3072, got %d",
                         cfg->config_path, cfg->output_dims);
    if (!cfg->multimodal_enabled) return CM_OK;
    for (size_t i = 0; i < cfg->multimodal_modalities.n; i++) {
        const char *m = cfg->multimodal_modalities.v[i];
        cfg->multimodal |= !strcmp(m, "image")   ? CM_MEDIA_IMAGE
                           : !strcmp(m, "audio") ? CM_MEDIA_AUDIO
                                                 : CM_MEDIA_IMAGE | CM_MEDIA_AUDIO;
    }
    if (!cfg->multimodal_modalities.n) cfg->multimodal = CM_MEDIA_IMAGE | CM_MEDIA_AUDIO;
    if (!cfg->enabled) return CM_OK; /* memory search off: nothing to check */
    if (strcmp(cfg->provider, "gemini") != 0 || !cm_config_gemini2_model(cfg->model))
        return cm_seterr(err, errlen, CM_ECONFIG,
                         "%s: memorySearch.multimodal requires memorySearch.provider \"gemini\" "
                         "and memorySearch.model \"gemini-embedding-2-preview\" (provider is "
                         "\"%.40s\", model \"%.80s\")",
                         cfg->config_path, cfg->provider, cfg->model ? cfg->model : "");
    if (cfg->fallback && strcmp(cfg->fallback, "none") != 0)
        return cm_seterr(err, errlen, CM_ECONFIG,
                         "%s: memorySearch.fallback must be \"none\" while "
                         "memorySearch.multimodal is enabled (it is \"%.40s\")",
                         cfg->config_path, cfg->fallback);
    return CM_OK;
}

int cm_config_candidates(const cm_config *cfg, int max_results)
{
    long n = (long)max_results * cfg->candidate_multiplier;
    return (int)CM_MAX(1, CM_MIN(200, n));
}

/* The later OpenClaw layout, read as an alias; QuantumClaw 2026.3.22 rejects it. */
static void warn_later(ctx *c, const json_t *parent, const char *key, const char *path,
                       const char *as)
{
    if (c->overlay) return;
    cm_config_warn(
        c, parent, key, 0,
        "%s is the later OpenClaw layout: read as %s, but QuantumClaw 2026.3.22 rejects this "
        "file with it (write %s)",
        path, as, as);
}

/* Reads a memorySearch object at key of parent (path names it), if present. */
static cm_rc read_ms(ctx *c, const json_t *parent, const char *key, const char *path)
{
    json_t *ms = NULL;
    cm_rc rc = get_obj(c, parent, key, path, &ms);
    if (!rc && ms) rc = cm_config_walk(c, ms, path, "");
    return rc;
}

/* Stage 1: agents.defaults.{workspace, memorySearch}, then the later
 * layout's memory.search (which wins, as OpenClaw's migration keeps it). */
static cm_rc read_defaults(ctx *c, const json_t *root)
{
    cm_rc rc = CM_OK;
    json_t *agents = NULL, *defaults = NULL, *memory = NULL;
    CHECK(get_obj(c, root, "agents", "agents", &agents));
    CHECK(get_obj(c, agents, "defaults", "agents.defaults", &defaults));
    if (defaults)
        CHECK(get_workspace(c, defaults, "agents.defaults.workspace"));
    CHECK(read_ms(c, defaults, "memorySearch", "agents.defaults.memorySearch"));
    CHECK(get_obj(c, root, "memory", "memory", &memory));
    if (memory && json_object_get(memory, "search")) {
        warn_later(c, memory, "search", "memory.search", "agents.defaults.memorySearch");
        CHECK(read_ms(c, memory, "search", "memory.search"));
    }
out:
    return rc;
}

/* Another agent's memorySearch: only its typos are reported (its values are
 * read into a scratch config and dropped, errors included). */
static void check_other(ctx *c, const json_t *entry, const char *path)
{
    json_t *ms = json_is_object(entry) ? json_object_get(entry, "memorySearch") : NULL;
    if (!json_is_object(ms)) return;
    cm_config scratch;
    char err[256];
    memset(&scratch, 0, sizeof scratch);
    ctx o = *c;
    o.cfg = &scratch;
    o.err = err;
    o.errlen = sizeof err;
    o.overlay = true; /* clawmem's own keys are warned about in the agent's own load */
    cm_config_walk(&o, ms, path, "");
    cm_config_release(&scratch);
}

/* Stage 2: this agent's own settings: its agents.list[] entry, then the
 * later layout's agents.entries.<id> (workspace, memorySearch, memory.search). */
static cm_rc read_agent(ctx *c, const json_t *root)
{
    cm_rc rc = CM_OK;
    cm_config *cfg = c->cfg;
    char path[300];
    json_t *agents = json_is_object(root) ? json_object_get(root, "agents") : NULL;
    json_t *list = json_is_object(agents) ? json_object_get(agents, "list") : NULL;
    if (list && !json_is_array(list))
        CHECK(cm_config_bad(c, agents, "list", "agents.list", "expected an array"));
    size_t i;
    json_t *entry;
    json_array_foreach(list, i, entry)
    {
        snprintf(path, sizeof path, "agents.list[%zu]", i);
        json_t *id = json_is_object(entry) ? json_object_get(entry, "id") : NULL;
        if (!json_is_string(id) || strcmp(json_string_value(id), cfg->agent_id) != 0) {
            snprintf(path, sizeof path, "agents.list[%zu].memorySearch", i);
            check_other(c, entry, path);
            continue;
        }
        snprintf(path, sizeof path, "agents.list[%zu].workspace", i);
        CHECK(get_workspace(c, entry, path));
        snprintf(path, sizeof path, "agents.list[%zu].memorySearch", i);
        CHECK(read_ms(c, entry, "memorySearch", path));
    }
    json_t *entries = NULL, *mine = NULL, *mem = NULL;
    if (json_is_object(agents)) CHECK(get_obj(c, agents, "entries", "agents.entries", &entries));
    if (!entries) goto out;
    warn_later(c, agents, "entries", "agents.entries", "agents.list");
    snprintf(path, sizeof path, "agents.entries.%s", cfg->agent_id);
    CHECK(get_obj(c, entries, cfg->agent_id, path, &mine));
    if (!mine) goto out;
    snprintf(path, sizeof path, "agents.entries.%s.workspace", cfg->agent_id);
    CHECK(get_workspace(c, mine, path));
    snprintf(path, sizeof path, "agents.entries.%s.memorySearch", cfg->agent_id);
    CHECK(read_ms(c, mine, "memorySearch", path));
    snprintf(path, sizeof path, "agents.entries.%s.memory", cfg->agent_id);
    CHECK(get_obj(c, mine, "memory", path, &mem));
    snprintf(path, sizeof path, "agents.entries.%s.memory.search", cfg->agent_id);
    CHECK(read_ms(c, mem, "search", path));
out:
    return rc;
}

/* clawmem's own section (clawmem.json; quantumclaw.json for compatibility). */
static cm_rc read_clawmem(ctx *c, const json_t *ours)
{
    cm_rc rc = CM_OK;
    cm_config *cfg = c->cfg;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)ours, k, v)
    {
        char path[256];
        snprintf(path, sizeof path, "clawmem.%.200s", k);
        if (strcmp(k, "staticModel") == 0) {
            if (!json_is_string(v)) CHECK(cm_config_bad(c, ours, k, path, "expected a string"));
            char *raw = NULL;
            CHECK(cm_config_subst(c, ours, k, path, v, &raw));
            char *x = cm_fs_expand_home(raw);
            free(raw);
            if (!x) CHECK(CM_ENOMEM);
            free(cfg->static_model_path);
            cfg->static_model_path = x;
        } else if (strcmp(k, "localThreads") == 0) {
            double d = json_number_value(v);
            if (!json_is_integer(v) || d < 1 || d > 256)
                CHECK(cm_config_bad(c, ours, k, path, "expected an integer from 1 to 256"));
            cfg->local_threads = (int)d;
        } else if (strcmp(k, "hybridMerge") == 0) {
            if (!json_is_string(v) ||
                !cm_config_in_choices("weighted|minmax|rrf", json_string_value(v)))
                CHECK(cm_config_bad(c, ours, k, path, "expected weighted, minmax or rrf"));
            const char *s = json_string_value(v);
            cfg->hybrid_merge_set = true;
            cfg->hybrid_merge = s[0] == 'w'   ? CM_MERGE_WEIGHTED
                                : s[0] == 'm' ? CM_MERGE_MINMAX
                                              : CM_MERGE_RRF;
        } else if (strcmp(k, "embedMaxInputs") == 0) {
            double d = json_number_value(v);
            if (!json_is_integer(v) || d < 1 || d > 4096)
                CHECK(cm_config_bad(c, ours, k, path, "expected an integer from 1 to 4096"));
            cfg->embed_max_inputs = (int)d;
        } else if (strcmp(k, "memoryWrite") != 0) {
            suggest near;
            cm_suggest_init(&near, k);
            cm_suggest_add_list(&near, "staticModel|localThreads|hybridMerge|embedMaxInputs|"
                                       "memoryWrite");
            cm_config_warn_unknown(c, ours, k, path, &near);
        } else if (!json_is_boolean(v)) {
            CHECK(cm_config_bad(c, ours, k, path, "expected true or false"));
        } else {
            cfg->memory_write = json_is_true(v);
        }
    }
out:
    return rc;
}

/* A secret input of models.providers: one that cannot be resolved is warned
 * about and left unset (the provider may not serve embeddings at all). */
static cm_rc provider_secret(ctx *c, const json_t *parent, const char *key, const char *path,
                             char **dst)
{
    char why[512], *val = NULL;
    cm_rc rc = cm_secret_resolve(c->secrets, json_object_get(parent, key), &val, why, sizeof why);
    if (rc == CM_ECONFIG) {
        cm_config_warn(c, parent, key, 0, "%s: %s (ignored)", path, why);
        return CM_OK;
    }
    if (rc) return rc;
    free(*dst);
    *dst = val;
    return CM_OK;
}

/* Stage 3: memory.{backend, citations}, clawmem.*, models.providers.*. */
static cm_rc read_rest(ctx *c, const json_t *root)
{
    cm_rc rc = CM_OK;
    cm_config *cfg = c->cfg;
    json_t *memory = NULL, *ours = NULL, *models = NULL, *provs = NULL;
    char path[128];
    CHECK(get_obj(c, root, "memory", "memory", &memory));
    if (memory) {
        json_t *v = json_object_get(memory, "backend");
        if (v && (!json_is_string(v) || !cm_config_in_choices("builtin|qmd", json_string_value(v))))
            CHECK(cm_config_bad(c, memory, "backend", "memory.backend",
                                "expected \"builtin\" or \"qmd\""));
        if (v) CHECK(cm_config_set_str(&cfg->backend, json_string_value(v)));
        v = json_object_get(memory, "citations");
        if (v && (!json_is_string(v) || !cm_config_in_choices("auto|on|off", json_string_value(v))))
            CHECK(cm_config_bad(c, memory, "citations", "memory.citations",
                                "expected auto, on or off"));
        if (v) {
            const char *s = json_string_value(v);
            cfg->citations = s[1] == 'u' ? CM_CITE_AUTO : s[1] == 'n' ? CM_CITE_ON : CM_CITE_OFF;
        }
        json_t *qmd = NULL;
        CHECK(get_obj(c, memory, "qmd", "memory.qmd", &qmd));
        CHECK(cm_config_read_qmd(c, qmd));
    }
    CHECK(cm_config_read_session_maint(c, root));
    CHECK(get_obj(c, root, "clawmem", "clawmem", &ours));
    if (ours) CHECK(read_clawmem(c, ours));
    /* models.providers.<name>: apiKey, baseUrl, headers (google is Gemini) */
    CHECK(get_obj(c, root, "models", "models", &models));
    CHECK(get_obj(c, models, "providers", "models.providers", &provs));
    for (int pi = 0; provs && pi < CM_PROV_N; pi++) {
        const char *pn = pi == CM_PROV_GEMINI ? "google" : cm_provider_names[pi];
        json_t *po = NULL;
        snprintf(path, sizeof path, "models.providers.%s", pn);
        CHECK(get_obj(c, provs, pn, path, &po));
        if (!po && pi == CM_PROV_GEMINI) CHECK(get_obj(c, provs, "gemini", path, &po));
        if (!po) continue;
        snprintf(path, sizeof path, "models.providers.%s.apiKey", pn);
        if (json_object_get(po, "apiKey"))
            CHECK(provider_secret(c, po, "apiKey", path, &cfg->providers[pi].api_key));
        snprintf(path, sizeof path, "models.providers.%s.baseUrl", pn);
        CHECK(get_str(c, po, "baseUrl", path, &cfg->providers[pi].base_url));
        json_t *h = json_object_get(po, "headers");
        snprintf(path, sizeof path, "models.providers.%s.headers", pn);
        if (h && !json_is_object(h))
            CHECK(cm_config_bad(c, po, "headers", path, "expected an object"));
        const char *hk;
        json_t *hv;
        json_object_foreach(h, hk, hv)
        {
            char sub[400], *val = NULL;
            snprintf(sub, sizeof sub, "%s.%.200s", path, hk);
            CHECK(provider_secret(c, h, hk, sub, &val));
            if (!val) continue;
            if (strchr(hk, ':') || strchr(hk, '\n') || strchr(val, '\n')) {
                free(val);
                CHECK(cm_config_bad(c, h, hk, sub, "a header name or value with ':' or a newline"));
            }
            rc = cm_config_header_put(&cfg->providers[pi].headers, hk, val);
            free(val);
            CHECK(rc);
        }
    }
out:
    return rc;
}

cm_rc cm_config_parse(const char *text, size_t n, const char *name, const cm_config_args *args,
                      const cm_logger *lg, cm_config *cfg, char *err, size_t errlen)
{
    config_text main = {text, n, name};
    return cm_config_parse_files(&main, NULL, args, lg, cfg, err, errlen);
}

/* dst ← src key by key: objects recursively, other values replaced. */
static cm_rc merge_into(json_t *dst, const json_t *src)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)src, k, v)
    {
        json_t *d = json_object_get(dst, k);
        if (json_is_object(d) && json_is_object(v)) {
            if (merge_into(d, v)) return CM_ENOMEM;
        } else if (json_object_set_new(dst, k, json_deep_copy(v))) {
            return CM_ENOMEM;
        }
    }
    return CM_OK;
}

cm_rc cm_config_parse_files(const config_text *main, const config_text *overlay,
                            const cm_config_args *args, const cm_logger *lg, cm_config *cfg,
                            char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    json5_doc doc[2] = {{0}, {0}};
    const config_text *in[2] = {main, overlay};
    secrets sec = {{NULL, NULL}};
    ctx c[2];
    memset(cfg, 0, sizeof *cfg);
    set_defaults(cfg);
    CHECK(resolve_state(args, cfg, err, errlen));
    for (int i = 0; i < 2; i++) {
        const char *name = in[i] && in[i]->name ? in[i]->name : "clawmem.json";
        c[i] = (ctx){&doc[i], name, lg, cfg, err, errlen, i == 1, NULL, &sec};
        c[i].overlay_path = overlay && overlay->name ? overlay->name : cfg->overlay_path;
        if (in[i] && in[i]->text)
            CHECK(cm_json5_parse(in[i]->text, in[i]->n, name, &doc[i], err, errlen));
        if (doc[i].root && !json_is_object(doc[i].root))
            FAIL(CM_ECONFIG, "%s:1:1: expected an object at the top", name);
        json_t *s = NULL;
        CHECK(get_obj(&c[i], doc[i].root, "secrets", "secrets", &s));
        sec.sec[i] = s;
    }
    for (int i = 0; i < 2; i++)
        cm_config_check_all(&c[i], doc[i].root);
    for (int i = 0; i < 2; i++)
        CHECK(cm_config_check_runtime(&c[i], doc[i].root));
    /* Key by key, clawmem.json over quantumclaw.json: within each stage the
     * overlay's leaves come second, and an agent's own settings still beat
     * either file's defaults. */
    for (int i = 0; i < 2; i++)
        CHECK(read_defaults(&c[i], doc[i].root));
    for (int i = 0; i < 2; i++)
        CHECK(read_agent(&c[i], doc[i].root));
    for (int i = 0; i < 2; i++)
        CHECK(read_rest(&c[i], doc[i].root));
    CHECK(resolve_paths(cfg, args, err, errlen));
    finish(cfg);
    CHECK(check_multimodal(cfg, err, errlen));
    if (!(cfg->root = json_object())) CHECK(CM_ENOMEM);
    for (int i = 0; i < 2; i++)
        if (json_is_object(doc[i].root) && merge_into(cfg->root, doc[i].root)) CHECK(CM_ENOMEM);
    CHECK(cm_rtcfg_from_json(cfg->root, &cfg->rt, err, errlen));
    if (!cfg->provider || !cfg->fts_tokenizer || !cfg->backend || !cfg->sources.n ||
        !cfg->store_driver)
        CHECK(CM_ENOMEM);
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory reading the config");
    cm_json5_doc_release(&doc[0]);
    cm_json5_doc_release(&doc[1]);
    if (rc) cm_config_release(cfg);
    return rc;
}

static cm_rc resolve_state(const cm_config_args *args, cm_config *cfg, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    const char *sd = args->state_dir ? args->state_dir : getenv("QUANTUMCLAW_STATE_DIR");
    if (sd && *sd) {
        cfg->state_dir = cm_fs_expand_home(sd);
    } else {
        cfg->state_dir = cm_fs_expand_home("~/.quantumclaw");
    }
    if (!cfg->state_dir) CHECK(CM_ENOMEM);
    if (cfg->state_dir[0] != '/') {
        char cwd[4096];
        if (!getcwd(cwd, sizeof cwd)) FAIL(CM_EIO, "cannot resolve the current directory");
        CHECK(cm_fs_join(&b, cwd, cfg->state_dir));
        free(cfg->state_dir);
        cfg->state_dir = cm_buf_detach(&b);
    }
    const char *cp = args->config_path ? args->config_path : getenv("QUANTUMCLAW_CONFIG_PATH");
    if (cp && *cp) {
        cfg->config_path = cm_fs_expand_home(cp);
    } else {
        CHECK(cm_fs_join(&b, cfg->state_dir, "quantumclaw.json"));
        cfg->config_path = cm_buf_detach(&b);
    }
    if (!cfg->config_path) CHECK(CM_ENOMEM);
    const char *op = getenv("CLAWMEM_CONFIG_PATH");
    if (op && *op) {
        cfg->overlay_path = cm_fs_expand_home(op);
    } else {
        CHECK(cm_fs_join(&b, cfg->state_dir, "clawmem.json"));
        cfg->overlay_path = cm_buf_detach(&b);
    }
    if (!cfg->overlay_path) CHECK(CM_ENOMEM);
    const char *id = args->agent_id && *args->agent_id ? args->agent_id : "main";
    for (const char *p = id; *p; p++)
        if (!(*p == '-' || *p == '_' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
              (*p >= 'A' && *p <= 'Z')))
            FAIL(CM_EINVAL, "agent id \"%s\": use letters, digits, '-' and '_' only", id);
    if (!(cfg->agent_id = cm_strdup(id))) CHECK(CM_ENOMEM);
out:
    cm_buf_release(&b);
    return rc;
}

/* Reads one config file into text. found is false when the file is absent and
 * may be (not named explicitly); a file named explicitly must exist. */
static cm_rc read_config_file(const char *path, bool named, buf *text, bool *found, char *err,
                              size_t errlen)
{
    /* a symlinked config (dotfile managers) is followed; a FIFO never blocks */
    cm_rc rc = cm_fs_read_file_follow(path, CONFIG_MAX_BYTES, text, err, errlen);
    *found = rc == CM_OK;
    if (rc == CM_ENOTFOUND && !named) rc = CM_OK;
    return rc ? CM_ECONFIG : CM_OK;
}

cm_rc cm_config_init(const cm_config_args *args, const cm_logger *lg, cm_config *cfg, char *err,
                     size_t errlen)
{
    cm_rc rc = CM_OK;
    buf text = BUF_INIT, otext = BUF_INIT;
    cm_config where = {0};
    bool found = false, ofound = false;
    memset(cfg, 0, sizeof *cfg);
    CHECK(resolve_state(args, &where, err, errlen)); /* only to learn the files' paths */
    const char *env = getenv("QUANTUMCLAW_CONFIG_PATH"), *oenv = getenv("CLAWMEM_CONFIG_PATH");
    CHECK(read_config_file(where.config_path, args->config_path || (env && *env), &text, &found,
                           err, errlen));
    CHECK(read_config_file(where.overlay_path, oenv && *oenv, &otext, &ofound, err, errlen));
    config_text qc = {found ? text.data : NULL, text.len, where.config_path};
    config_text ov = {ofound ? otext.data : NULL, otext.len, where.overlay_path};
    CHECK(cm_config_parse_files(&qc, &ov, args, lg, cfg, err, errlen));
    cfg->config_found = found;
    cfg->overlay_found = ofound;
out:
    cm_buf_release(&text);
    cm_buf_release(&otext);
    cm_config_release(&where);
    return rc;
}

void cm_config_release(cm_config *cfg)
{
    free(cfg->agent_id);
    free(cfg->state_dir);
    free(cfg->config_path);
    free(cfg->overlay_path);
    free(cfg->workspace);
    free(cfg->provider);
    free(cfg->model);
    free(cfg->fallback);
    free(cfg->remote_base_url);
    free(cfg->remote_api_key);
    free(cfg->static_model_path);
    cm_config_strlist_release(&cfg->remote_headers);
    for (int i = 0; i < CM_PROV_N; i++) {
        free(cfg->providers[i].api_key);
        free(cfg->providers[i].base_url);
        cm_config_strlist_release(&cfg->providers[i].headers);
    }
    free(cfg->local_model_path);
    free(cfg->local_cache_dir);
    cm_config_strlist_release(&cfg->extra_paths);
    cm_config_strlist_release(&cfg->multimodal_modalities);
    cm_config_strlist_release(&cfg->sources);
    free(cfg->store_path);
    free(cfg->store_path_legacy);
    free(cfg->store_driver);
    free(cfg->store_dsn);
    free(cfg->sessions_dir);
    free(cfg->fts_tokenizer);
    free(cfg->vector_extension_path);
    free(cfg->backend);
    cm_config_qmd_release(&cfg->qmd);
    json_decref(cfg->root);
    cm_rtcfg_unref(cfg->rt);
    memset(cfg, 0, sizeof *cfg);
}
