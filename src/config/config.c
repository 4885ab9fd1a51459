/*
 * config.c — reads quantumclaw.json (JSON5) and resolves one agent's memory
 * settings. Values are checked against one schema table (key path, kind,
 * range, destination); agents.defaults.memorySearch is applied first, then the
 * agent's own agents.list[].memorySearch, so a later leaf overrides an earlier
 * one and each error names the path where the bad value was written.
 */
#include <math.h>
#include <strings.h>
#include <unistd.h>

#include "../base/buf.h"
#include "../base/fs.h"
#include "../base/json5.h"
#include "config.h"

#define CONFIG_MAX_BYTES (16u << 20)

const char *const cm_provider_names[CM_PROV_N] = {"openai", "gemini", "voyage", "mistral",
                                                  "ollama"};

typedef enum kind { K_BOOL, K_INT, K_NUM, K_STR, K_ENUM, K_STRLIST, K_MAP, K_ANY } kind;

typedef struct field {
    const char *path; /* relative to memorySearch, dot-separated */
    kind kind;
    double min, max;     /* K_INT, K_NUM */
    const char *choices; /* K_ENUM: "a|b|c" */
    size_t off;          /* offset in cm_config, or NO_DEST for accepted-but-unused keys */
} field;

#define NO_DEST ((size_t)-1)
#define AT(m)   offsetof(cm_config, m)

static const field fields[] = {
    {"enabled", K_BOOL, 0, 0, NULL, AT(enabled)},
    {"provider", K_ENUM, 0, 0, "auto|openai|gemini|voyage|mistral|ollama|local|static|none",
     AT(provider)},
    {"model", K_STR, 0, 0, NULL, AT(model)},
    {"fallback", K_ENUM, 0, 0, "openai|gemini|voyage|mistral|ollama|local|static|none",
     AT(fallback)},
    {"outputDimensionality", K_INT, 1, 65536, NULL, AT(output_dims)},
    {"extraPaths", K_STRLIST, 0, 0, NULL, AT(extra_paths)},
    {"sources", K_STRLIST, 0, 0, "memory|sessions", AT(sources)},
    {"experimental.sessionMemory", K_BOOL, 0, 0, NULL, NO_DEST},
    {"remote.baseUrl", K_STR, 0, 0, NULL, AT(remote_base_url)},
    {"remote.apiKey", K_STR, 0, 0, NULL, AT(remote_api_key)},
    {"remote.headers", K_MAP, 0, 0, NULL, AT(remote_headers)},
    {"remote.batch.enabled", K_BOOL, 0, 0, NULL, NO_DEST},
    {"remote.batch.wait", K_BOOL, 0, 0, NULL, NO_DEST},
    {"remote.batch.concurrency", K_INT, 1, 64, NULL, AT(batch_concurrency)},
    {"remote.batch.pollIntervalMs", K_INT, 0, 3600000, NULL, NO_DEST},
    {"remote.batch.timeoutMinutes", K_NUM, 0, 10080, NULL, NO_DEST},
    {"local.modelPath", K_STR, 0, 0, NULL, AT(local_model_path)},
    {"local.modelCacheDir", K_STR, 0, 0, NULL, AT(local_cache_dir)},
    {"store.driver", K_ENUM, 0, 0, "sqlite", NO_DEST},
    {"store.path", K_STR, 0, 0, NULL, AT(store_path)},
    {"store.fts.tokenizer", K_ENUM, 0, 0, "unicode61|trigram|porter", AT(fts_tokenizer)},
    {"store.vector.enabled", K_BOOL, 0, 0, NULL, AT(vector_enabled)},
    {"store.vector.extensionPath", K_STR, 0, 0, NULL, AT(vector_extension_path)},
    {"chunking.tokens", K_INT, 1, 100000, NULL, AT(chunk_tokens)},
    {"chunking.overlap", K_INT, 0, 100000, NULL, AT(chunk_overlap)},
    {"sync.onSessionStart", K_BOOL, 0, 0, NULL, AT(sync_on_session_start)},
    {"sync.onSearch", K_BOOL, 0, 0, NULL, AT(sync_on_search)},
    {"sync.watch", K_BOOL, 0, 0, NULL, AT(sync_watch)},
    {"sync.watchDebounceMs", K_INT, 0, 3600000, NULL, AT(watch_debounce_ms)},
    {"sync.intervalMinutes", K_NUM, 0, 10080, NULL, AT(sync_interval_minutes)},
    {"sync.sessions.deltaBytes", K_INT, 0, 1e12, NULL, NO_DEST},
    {"sync.sessions.deltaMessages", K_INT, 0, 1e9, NULL, NO_DEST},
    {"query.maxResults", K_INT, 1, 1000, NULL, AT(max_results)},
    {"query.minScore", K_NUM, 0, 1, NULL, AT(min_score)},
    {"query.hybrid.enabled", K_BOOL, 0, 0, NULL, AT(hybrid_enabled)},
    {"query.hybrid.vectorWeight", K_NUM, 0, 1, NULL, AT(vector_weight)},
    {"query.hybrid.textWeight", K_NUM, 0, 1, NULL, AT(text_weight)},
    {"query.hybrid.candidateMultiplier", K_INT, 1, 20, NULL, AT(candidate_multiplier)},
    {"query.hybrid.mmr.enabled", K_BOOL, 0, 0, NULL, AT(mmr_enabled)},
    {"query.hybrid.mmr.lambda", K_NUM, 0, 1, NULL, AT(mmr_lambda)},
    {"query.hybrid.temporalDecay.enabled", K_BOOL, 0, 0, NULL, AT(decay_enabled)},
    {"query.hybrid.temporalDecay.halfLifeDays", K_NUM, 0.001, 1e6, NULL, AT(half_life_days)},
    {"cache.enabled", K_BOOL, 0, 0, NULL, AT(cache_enabled)},
    {"cache.maxEntries", K_INT, 1, 1e9, NULL, AT(cache_max_entries)},
    {"multimodal.enabled", K_BOOL, 0, 0, NULL, NO_DEST},
    {"multimodal.modalities", K_STRLIST, 0, 0, "image|audio|all", NO_DEST},
    {"multimodal.maxFileBytes", K_INT, 1, 1e12, NULL, NO_DEST},
};

typedef struct ctx {
    const json5_doc *doc;
    const char *file;
    const cm_logger *lg;
    cm_config *cfg;
    char *err;
    size_t errlen;
} ctx;

static cm_rc bad(ctx *c, const json_t *parent, const char *key, const char *path, const char *what)
{
    int line = 0, col = 0;
    if (json5_where(c->doc, parent, key, 0, &line, &col))
        return cm_seterr(c->err, c->errlen, CM_ECONFIG, "%s:%d:%d: %s: %s", c->file, line, col,
                         path, what);
    return cm_seterr(c->err, c->errlen, CM_ECONFIG, "%s: %s: %s", c->file, path, what);
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

static bool in_choices(const char *choices, const char *s)
{
    size_t n = strlen(s);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && memcmp(p, s, n) == 0) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

static cm_rc set_str(char **dst, const char *s)
{
    char *v = cm_strdup(s);
    if (!v) return CM_ENOMEM;
    free(*dst);
    *dst = v;
    return CM_OK;
}

static void strlist_release(cm_strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static cm_rc strlist_add(cm_strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0) return CM_OK;
    char **nv = realloc(l->v, (l->n + 1) * sizeof *nv);
    if (!nv) return CM_ENOMEM;
    l->v = nv;
    if (!(l->v[l->n] = cm_strdup(s))) return CM_ENOMEM;
    l->n++;
    return CM_OK;
}

cm_rc config_header_set(cm_strlist *l, const char *line)
{
    size_t nl = strcspn(line, ":");
    char *copy = cm_strdup(line);
    if (!copy) return CM_ENOMEM;
    for (size_t i = 0; i < l->n; i++)
        if (strncasecmp(l->v[i], line, nl) == 0 && l->v[i][nl] == ':') {
            free(l->v[i]);
            l->v[i] = copy;
            return CM_OK;
        }
    char **nv = realloc(l->v, (l->n + 1) * sizeof *nv);
    if (!nv) {
        free(copy);
        return CM_ENOMEM;
    }
    l->v = nv;
    l->v[l->n++] = copy;
    return CM_OK;
}

static cm_rc header_set(cm_strlist *l, const char *name, const char *value)
{
    buf b = BUF_INIT;
    cm_rc rc = buf_printf(&b, "%s: %s", name, value);
    if (!rc) rc = config_header_set(l, b.data);
    buf_release(&b);
    return rc;
}

cm_rc config_extra_path(const cm_config *cfg, size_t i, buf *out)
{
    char *x = fs_expand_home(cfg->extra_paths.v[i]);
    if (!x) return CM_ENOMEM;
    size_t start = out->len;
    cm_rc rc = fs_join(out, cfg->workspace, x);
    free(x);
    if (!rc) {
        bool ok = fs_normalise(out->data + start);
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
            rc = last ? buf_adds(out, real) : CM_ENOMEM;
            if (!rc) rc = buf_adds(out, last);
            free(last);
            free(real);
        }
    }
    return rc;
}

/* Applies one leaf value described by f. */
static cm_rc apply(ctx *c, const field *f, const json_t *parent, const char *key, const json_t *v,
                   const char *path)
{
    char what[1024];
    void *dst = f->off == NO_DEST ? NULL : (char *)c->cfg + f->off;
    switch (f->kind) {
    case K_BOOL:
        if (!json_is_boolean(v)) goto type;
        if (dst) *(bool *)dst = json_is_true(v);
        return CM_OK;
    case K_INT:
    case K_NUM: {
        if (!json_is_number(v)) goto type;
        double d = json_number_value(v);
        if (f->kind == K_INT && (!isfinite(d) || d != floor(d))) {
            snprintf(what, sizeof what, "expected an integer, got %g", d);
            return bad(c, parent, key, path, what);
        }
        if (!(d >= f->min && d <= f->max)) {
            snprintf(what, sizeof what, "expected a number between %g and %g, got %g", f->min,
                     f->max, d);
            return bad(c, parent, key, path, what);
        }
        if (dst && f->kind == K_INT) *(int *)dst = (int)d;
        if (dst && f->kind == K_NUM) *(double *)dst = d;
        return CM_OK;
    }
    case K_STR:
    case K_ENUM:
        if (!json_is_string(v)) goto type;
        if (f->kind == K_ENUM && !in_choices(f->choices, json_string_value(v))) {
            snprintf(what, sizeof what, "expected one of %s, got \"%.80s\"", f->choices,
                     json_string_value(v));
            return bad(c, parent, key, path, what);
        }
        return dst ? set_str((char **)dst, json_string_value(v)) : CM_OK;
    case K_STRLIST: {
        if (!json_is_array(v)) goto type;
        cm_strlist fresh = {NULL, 0};
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            if (!json_is_string(e) ||
                (f->choices && !in_choices(f->choices, json_string_value(e)))) {
                int line = 0, col = 0;
                json5_where(c->doc, v, NULL, i, &line, &col);
                strlist_release(&fresh);
                snprintf(what, sizeof what, "%s[%zu]: expected %s%s", path, i,
                         f->choices ? "one of " : "a string", f->choices ? f->choices : "");
                return cm_seterr(c->err, c->errlen, CM_ECONFIG, "%s:%d:%d: %s", c->file, line, col,
                                 what);
            }
            if (strlist_add(&fresh, json_string_value(e))) {
                strlist_release(&fresh);
                return CM_ENOMEM;
            }
        }
        if (!dst) {
            strlist_release(&fresh);
            return CM_OK;
        }
        cm_strlist *l = dst;
        if (l == &c->cfg->extra_paths) { /* extraPaths accumulate across layers */
            cm_rc rc = CM_OK;
            for (i = 0; i < fresh.n && !rc; i++)
                rc = strlist_add(l, fresh.v[i]);
            strlist_release(&fresh);
            return rc;
        }
        strlist_release(l);
        *l = fresh;
        return CM_OK;
    }
    case K_MAP: {
        if (!json_is_object(v)) goto type;
        const char *k;
        json_t *e;
        json_object_foreach((json_t *)v, k, e)
        {
            if (!json_is_string(e)) {
                snprintf(what, sizeof what, "expected a string, got %s", type_name(e));
                char sub[1024];
                snprintf(sub, sizeof sub, "%s.%s", path, k);
                return bad(c, v, k, sub, what);
            }
            if (strchr(k, ':') || strchr(k, '\n') || strchr(json_string_value(e), '\n')) {
                char sub[1024];
                snprintf(sub, sizeof sub, "%s.%s", path, k);
                return bad(c, v, k, sub, "a header name or value with ':' or a newline");
            }
            if (dst && header_set(dst, k, json_string_value(e))) return CM_ENOMEM;
        }
        return CM_OK;
    }
    case K_ANY:
        return CM_OK;
    }
type:
    snprintf(what, sizeof what, "expected %s, got %s",
             f->kind == K_BOOL                      ? "true or false"
             : f->kind == K_INT || f->kind == K_NUM ? "a number"
             : f->kind == K_STRLIST                 ? "an array of strings"
             : f->kind == K_MAP                     ? "an object"
                                                    : "a string",
             type_name(v));
    return bad(c, parent, key, path, what);
}

/* Walks a memorySearch object; rel is the dotted path below memorySearch. */
static cm_rc walk(ctx *c, const json_t *obj, const char *prefix, const char *rel)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        char relpath[512], path[768];
        snprintf(relpath, sizeof relpath, "%s%s%s", rel, *rel ? "." : "", key);
        snprintf(path, sizeof path, "%s.%s", prefix, relpath);
        const field *f = NULL;
        bool is_prefix = false;
        size_t rl = strlen(relpath);
        for (size_t i = 0; i < ARRAY_LEN(fields); i++) {
            if (strcmp(fields[i].path, relpath) == 0)
                f = &fields[i];
            else if (strncmp(fields[i].path, relpath, rl) == 0 && fields[i].path[rl] == '.')
                is_prefix = true;
        }
        cm_rc rc = CM_OK;
        if (f) {
            rc = apply(c, f, obj, key, v, path);
        } else if (is_prefix) {
            if (!json_is_object(v)) {
                char what[128];
                snprintf(what, sizeof what, "expected an object, got %s", type_name(v));
                return bad(c, obj, key, path, what);
            }
            rc = walk(c, v, prefix, relpath);
        } else {
            int line = 0, col = 0;
            json5_where(c->doc, obj, key, 0, &line, &col);
            cm_logf(c->lg, CM_LOG_WARN, "%s:%d:%d: unknown key %s (ignored)", c->file, line, col,
                    path);
        }
        if (rc) return rc;
    }
    return CM_OK;
}

static cm_rc get_str(ctx *c, const json_t *obj, const char *key, const char *path, char **dst)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return CM_OK;
    if (!json_is_string(v)) return bad(c, obj, key, path, "expected a string");
    return set_str(dst, json_string_value(v));
}

static cm_rc get_obj(ctx *c, const json_t *obj, const char *key, const char *path, json_t **out)
{
    *out = obj ? json_object_get(obj, key) : NULL;
    if (*out && !json_is_object(*out)) {
        char what[128];
        snprintf(what, sizeof what, "expected an object, got %s", type_name(*out));
        return bad(c, obj, key, path, what);
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
    cfg->batch_concurrency = 2;
    cfg->citations = CM_CITE_AUTO;
}

static cm_rc resolve_state(const cm_config_args *args, cm_config *cfg, char *err, size_t errlen);

static cm_rc resolve_paths(cm_config *cfg, const cm_config_args *args, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    char *ws = NULL;
    buf b = BUF_INIT;
    if (args->workspace) CHECK(set_str(&cfg->workspace, args->workspace));
    if (!cfg->workspace) {
        CHECK(fs_join(&b, cfg->state_dir, "workspace"));
        cfg->workspace = buf_detach(&b);
    }
    if (!cfg->workspace[0]) FAIL(CM_ECONFIG, "the workspace path is empty");
    if (cfg->store_path && !cfg->store_path[0])
        FAIL(CM_ECONFIG, "memorySearch.store.path is empty");
    if (!(ws = fs_expand_home(cfg->workspace))) CHECK(CM_ENOMEM);
    if (ws[0] != '/') {
        char cwd[4096];
        if (!getcwd(cwd, sizeof cwd)) FAIL(CM_EIO, "cannot resolve the current directory");
        buf_reset(&b);
        CHECK(fs_join(&b, cwd, ws));
        free(ws);
        ws = buf_detach(&b);
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

    /* store.path: {agentId} token, ~ expansion, default <stateDir>/memory/<agentId>.sqlite */
    buf_reset(&b);
    if (cfg->store_path) {
        char *expanded = fs_expand_home(cfg->store_path);
        if (!expanded) CHECK(CM_ENOMEM);
        for (const char *p = expanded; *p && !rc;) {
            if (strncmp(p, "{agentId}", 9) == 0) {
                rc = buf_adds(&b, cfg->agent_id);
                p += 9;
            } else {
                rc = buf_addc(&b, *p++);
            }
        }
        free(expanded);
        CHECK(rc);
        if (b.data[0] != '/') {
            char *rel = buf_detach(&b);
            rc = fs_join(&b, cfg->state_dir, rel);
            free(rel);
            CHECK(rc);
        }
    } else {
        CHECK(buf_printf(&b, "%s/memory/%s.sqlite", cfg->state_dir, cfg->agent_id));
    }
    free(cfg->store_path);
    cfg->store_path = buf_detach(&b);
out:
    free(ws);
    buf_release(&b);
    return rc;
}

/* Clamps and derived values, as QuantumClaw resolves them. */
static void finish(cm_config *cfg)
{
    if (!cfg->provider) cfg->provider = cm_strdup("auto");
    if (!cfg->fts_tokenizer) cfg->fts_tokenizer = cm_strdup("porter");
    if (!cfg->backend) cfg->backend = cm_strdup("builtin");
    if (cfg->sources.n == 0) strlist_add(&cfg->sources, "memory");
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

int config_candidates(const cm_config *cfg, int max_results)
{
    long n = (long)max_results * cfg->candidate_multiplier;
    return (int)CM_MAX(1, CM_MIN(200, n));
}

cm_rc config_parse(const char *text, size_t n, const char *name, const cm_config_args *args,
                   const cm_logger *lg, cm_config *cfg, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    json5_doc doc = {0};
    ctx c = {&doc, name, lg, cfg, err, errlen};
    memset(cfg, 0, sizeof *cfg);
    set_defaults(cfg);
    CHECK(resolve_state(args, cfg, err, errlen));
    if (text) CHECK(json5_parse(text, n, name, &doc, err, errlen));
    json_t *root = doc.root, *agents = NULL, *defaults = NULL, *memory = NULL, *ms = NULL;
    if (root && !json_is_object(root))
        FAIL(CM_ECONFIG, "%s:1:1: expected an object at the top", name);
    CHECK(get_obj(&c, root, "agents", "agents", &agents));
    CHECK(get_obj(&c, agents, "defaults", "agents.defaults", &defaults));
    CHECK(get_obj(&c, root, "memory", "memory", &memory));
    if (defaults)
        CHECK(get_str(&c, defaults, "workspace", "agents.defaults.workspace", &cfg->workspace));
    CHECK(get_obj(&c, defaults, "memorySearch", "agents.defaults.memorySearch", &ms));
    if (ms) CHECK(walk(&c, ms, "agents.defaults.memorySearch", ""));

    json_t *list = agents ? json_object_get(agents, "list") : NULL;
    if (list && !json_is_array(list))
        CHECK(bad(&c, agents, "list", "agents.list", "expected an array"));
    size_t i;
    json_t *entry;
    json_array_foreach(list, i, entry)
    {
        char path[128];
        snprintf(path, sizeof path, "agents.list[%zu]", i);
        json_t *id = json_is_object(entry) ? json_object_get(entry, "id") : NULL;
        if (!json_is_string(id) || strcmp(json_string_value(id), cfg->agent_id) != 0) continue;
        CHECK(get_str(&c, entry, "workspace", path, &cfg->workspace));
        snprintf(path, sizeof path, "agents.list[%zu].memorySearch", i);
        CHECK(get_obj(&c, entry, "memorySearch", path, &ms));
        if (ms) CHECK(walk(&c, ms, path, ""));
    }
    if (memory) {
        json_t *v = json_object_get(memory, "backend");
        if (v && (!json_is_string(v) || !in_choices("builtin|qmd", json_string_value(v))))
            CHECK(bad(&c, memory, "backend", "memory.backend", "expected \"builtin\" or \"qmd\""));
        if (v) CHECK(set_str(&cfg->backend, json_string_value(v)));
        v = json_object_get(memory, "citations");
        if (v && (!json_is_string(v) || !in_choices("auto|on|off", json_string_value(v))))
            CHECK(bad(&c, memory, "citations", "memory.citations", "expected auto, on or off"));
        if (v) {
            const char *s = json_string_value(v);
            cfg->citations = s[1] == 'u' ? CM_CITE_AUTO : s[1] == 'n' ? CM_CITE_ON : CM_CITE_OFF;
        }
    }
    json_t *ours = NULL;
    CHECK(get_obj(&c, root, "clawmem", "clawmem", &ours));
    if (ours) {
        const char *k;
        json_t *v;
        json_object_foreach(ours, k, v)
        {
            char path[256];
            snprintf(path, sizeof path, "clawmem.%.200s", k);
            if (strcmp(k, "staticModel") == 0) {
                if (!json_is_string(v)) CHECK(bad(&c, ours, k, path, "expected a string"));
                char *x = fs_expand_home(json_string_value(v));
                if (!x) CHECK(CM_ENOMEM);
                free(cfg->static_model_path);
                cfg->static_model_path = x;
            } else if (strcmp(k, "localThreads") == 0) {
                double d = json_number_value(v);
                if (!json_is_integer(v) || d < 1 || d > 256)
                    CHECK(bad(&c, ours, k, path, "expected an integer from 1 to 256"));
                cfg->local_threads = (int)d;
            } else if (strcmp(k, "hybridMerge") == 0) {
                if (!json_is_string(v) || !in_choices("weighted|minmax|rrf", json_string_value(v)))
                    CHECK(bad(&c, ours, k, path, "expected weighted, minmax or rrf"));
                const char *s = json_string_value(v);
                cfg->hybrid_merge_set = true;
                cfg->hybrid_merge = s[0] == 'w' ? CM_MERGE_WEIGHTED
                                    : s[0] == 'm' ? CM_MERGE_MINMAX
                                                  : CM_MERGE_RRF;
            } else if (strcmp(k, "embedMaxInputs") == 0) {
                double d = json_number_value(v);
                if (!json_is_integer(v) || d < 1 || d > 4096)
                    CHECK(bad(&c, ours, k, path, "expected an integer from 1 to 4096"));
                cfg->embed_max_inputs = (int)d;
            } else if (strcmp(k, "memoryWrite") != 0) {
                int line = 0, col = 0;
                json5_where(&doc, ours, k, 0, &line, &col);
                cm_logf(lg, CM_LOG_WARN, "%s:%d:%d: unknown key %s (ignored)", name, line, col,
                        path);
            } else if (!json_is_boolean(v)) {
                CHECK(bad(&c, ours, k, path, "expected true or false"));
            } else {
                cfg->memory_write = json_is_true(v);
            }
        }
    }
    /* models.providers.<name>: apiKey, baseUrl, headers (google is Gemini) */
    json_t *models = NULL, *provs = NULL;
    CHECK(get_obj(&c, root, "models", "models", &models));
    CHECK(get_obj(&c, models, "providers", "models.providers", &provs));
    for (int pi = 0; provs && pi < CM_PROV_N; pi++) {
        const char *pn = pi == CM_PROV_GEMINI ? "google" : cm_provider_names[pi];
        char path[128];
        json_t *po = NULL;
        snprintf(path, sizeof path, "models.providers.%s", pn);
        CHECK(get_obj(&c, provs, pn, path, &po));
        if (!po && pi == CM_PROV_GEMINI) CHECK(get_obj(&c, provs, "gemini", path, &po));
        if (!po) continue;
        snprintf(path, sizeof path, "models.providers.%s.apiKey", pn);
        CHECK(get_str(&c, po, "apiKey", path, &cfg->providers[pi].api_key));
        snprintf(path, sizeof path, "models.providers.%s.baseUrl", pn);
        CHECK(get_str(&c, po, "baseUrl", path, &cfg->providers[pi].base_url));
        json_t *h = json_object_get(po, "headers");
        if (h) {
            static const field hf = {"headers", K_MAP, 0, 0, NULL, NO_DEST};
            snprintf(path, sizeof path, "models.providers.%s.headers", pn);
            CHECK(apply(&c, &hf, po, "headers", h, path));
            const char *hk;
            json_t *hv;
            json_object_foreach(h, hk, hv)
            {
                if (header_set(&cfg->providers[pi].headers, hk, json_string_value(hv)))
                    CHECK(CM_ENOMEM);
            }
        }
    }
    CHECK(resolve_paths(cfg, args, err, errlen));
    finish(cfg);
    if (!cfg->provider || !cfg->fts_tokenizer || !cfg->backend || !cfg->sources.n) CHECK(CM_ENOMEM);
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory reading the config");
    json5_doc_release(&doc);
    if (rc) config_release(cfg);
    return rc;
}

static cm_rc resolve_state(const cm_config_args *args, cm_config *cfg, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    buf b = BUF_INIT;
    const char *sd = args->state_dir ? args->state_dir : getenv("QUANTUMCLAW_STATE_DIR");
    if (sd && *sd) {
        cfg->state_dir = fs_expand_home(sd);
    } else {
        cfg->state_dir = fs_expand_home("~/.quantumclaw");
    }
    if (!cfg->state_dir) CHECK(CM_ENOMEM);
    if (cfg->state_dir[0] != '/') {
        char cwd[4096];
        if (!getcwd(cwd, sizeof cwd)) FAIL(CM_EIO, "cannot resolve the current directory");
        CHECK(fs_join(&b, cwd, cfg->state_dir));
        free(cfg->state_dir);
        cfg->state_dir = buf_detach(&b);
    }
    const char *cp = args->config_path ? args->config_path : getenv("QUANTUMCLAW_CONFIG_PATH");
    if (cp && *cp) {
        cfg->config_path = fs_expand_home(cp);
    } else {
        CHECK(fs_join(&b, cfg->state_dir, "quantumclaw.json"));
        cfg->config_path = buf_detach(&b);
    }
    if (!cfg->config_path) CHECK(CM_ENOMEM);
    const char *id = args->agent_id && *args->agent_id ? args->agent_id : "main";
    for (const char *p = id; *p; p++)
        if (!(*p == '-' || *p == '_' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
              (*p >= 'A' && *p <= 'Z')))
            FAIL(CM_EINVAL, "agent id \"%s\": use letters, digits, '-' and '_' only", id);
    if (!(cfg->agent_id = cm_strdup(id))) CHECK(CM_ENOMEM);
out:
    buf_release(&b);
    return rc;
}

cm_rc config_load(const cm_config_args *args, const cm_logger *lg, cm_config *cfg, char *err,
                  size_t errlen)
{
    cm_rc rc = CM_OK;
    buf text = BUF_INIT;
    cm_config where = {0};
    memset(cfg, 0, sizeof *cfg);
    CHECK(resolve_state(args, &where, err, errlen)); /* only to learn the file's path */
    rc = fs_read_file(where.config_path, CONFIG_MAX_BYTES, &text, err, errlen);
    bool found = rc == CM_OK;
    if (rc == CM_ENOTFOUND && !args->config_path && !getenv("QUANTUMCLAW_CONFIG_PATH"))
        rc = CM_OK; /* no config file at the default place: all defaults */
    if (rc) {
        rc = CM_ECONFIG;
        goto out;
    }
    CHECK(config_parse(found ? text.data : NULL, text.len, where.config_path, args, lg, cfg, err,
                       errlen));
    cfg->config_found = found;
out:
    buf_release(&text);
    config_release(&where);
    return rc;
}

void config_release(cm_config *cfg)
{
    free(cfg->agent_id);
    free(cfg->state_dir);
    free(cfg->config_path);
    free(cfg->workspace);
    free(cfg->provider);
    free(cfg->model);
    free(cfg->fallback);
    free(cfg->remote_base_url);
    free(cfg->remote_api_key);
    free(cfg->static_model_path);
    strlist_release(&cfg->remote_headers);
    for (int i = 0; i < CM_PROV_N; i++) {
        free(cfg->providers[i].api_key);
        free(cfg->providers[i].base_url);
        strlist_release(&cfg->providers[i].headers);
    }
    free(cfg->local_model_path);
    free(cfg->local_cache_dir);
    strlist_release(&cfg->extra_paths);
    strlist_release(&cfg->sources);
    free(cfg->store_path);
    free(cfg->fts_tokenizer);
    free(cfg->vector_extension_path);
    free(cfg->backend);
    memset(cfg, 0, sizeof *cfg);
}
