/*
 * schema.c — the table of memorySearch keys (key path, kind, QuantumClaw
 * 2026.3.22's range or choices, destination in cm_config) and the reader that
 * walks a memorySearch object and applies each leaf through it: a value of
 * the wrong kind or out of range is an error naming its file:line:col, a key
 * outside the table warns.
 */
#include <limits.h>
#include <math.h>

#include "config_int.h"

typedef enum kind {
    K_BOOL,
    K_INT,  /* an integer stored as int (clamped to INT_MAX, see finish) */
    K_INTD, /* an integer stored as double */
    K_NUM,
    K_STR,
    K_ENUM,
    K_STRLIST,
    K_MAP,
    K_SECRET, /* a string or a secret reference {source, provider, id} */
    K_ANY
} kind;

/* Flags of a field. */
enum {
    F_OURS = 1, /* clawmem's own key: QuantumClaw 2026.3.22 rejects it in quantumclaw.json */
};

typedef struct field {
    const char *path; /* relative to memorySearch, dot-separated */
    kind kind;
    double min, max;     /* K_INT, K_INTD, K_NUM: QuantumClaw 2026.3.22's accepted range */
    const char *choices; /* K_ENUM: "a|b|c" */
    size_t off;          /* offset in cm_config, or NO_DEST for accepted-but-unused keys */
    int flags;
    const char *qc_choices; /* K_ENUM: the values 2026.3.22 accepts, NULL: all */
} field;

#define NO_DEST ((size_t)-1)
#define AT(m)   offsetof(cm_config, m)
/* zod's int() and positive()/nonnegative() as in 2026.3.22's schema */
#define SAFE_INT 9007199254740991.0
#define POS      1, SAFE_INT
#define NONNEG   0, SAFE_INT

static const field fields[] = {
    {"enabled", K_BOOL, 0, 0, NULL, AT(enabled), 0, NULL},
    {"provider", K_ENUM, 0, 0, "auto|openai|gemini|voyage|mistral|ollama|local|static|none",
     AT(provider), 0, "openai|gemini|voyage|mistral|ollama|local"},
    {"model", K_STR, 0, 0, NULL, AT(model), 0, NULL},
    {"fallback", K_ENUM, 0, 0, "openai|gemini|voyage|mistral|ollama|local|static|none",
     AT(fallback), 0, "openai|gemini|voyage|mistral|ollama|local|none"},
    {"outputDimensionality", K_INT, POS, NULL, AT(output_dims), 0, NULL},
    {"extraPaths", K_STRLIST, 0, 0, NULL, AT(extra_paths), 0, NULL},
    {"sources", K_STRLIST, 0, 0, "memory|sessions", AT(sources), 0, NULL},
    {"experimental.sessionMemory", K_BOOL, 0, 0, NULL, AT(session_memory), 0, NULL},
    {"remote.baseUrl", K_STR, 0, 0, NULL, AT(remote_base_url), 0, NULL},
    {"remote.apiKey", K_SECRET, 0, 0, NULL, AT(remote_api_key), 0, NULL},
    {"remote.headers", K_MAP, 0, 0, NULL, AT(remote_headers), 0, NULL},
    {"remote.batch.enabled", K_BOOL, 0, 0, NULL, AT(batch_enabled), 0, NULL},
    {"remote.batch.wait", K_BOOL, 0, 0, NULL, AT(batch_wait), 0, NULL},
    {"remote.batch.concurrency", K_INT, POS, NULL, AT(batch_concurrency), 0, NULL},
    {"remote.batch.pollIntervalMs", K_INT, NONNEG, NULL, AT(batch_poll_ms), 0, NULL},
    {"remote.batch.timeoutMinutes", K_INT, POS, NULL, AT(batch_timeout_min), 0, NULL},
    {"local.modelPath", K_STR, 0, 0, NULL, AT(local_model_path), 0, NULL},
    {"local.modelCacheDir", K_STR, 0, 0, NULL, AT(local_cache_dir), 0, NULL},
    {"store.driver", K_ENUM, 0, 0, "sqlite|postgres", AT(store_driver), 0, "sqlite"},
    {"store.dsn", K_SECRET, 0, 0, NULL, AT(store_dsn), F_OURS, NULL},
    {"store.path", K_STR, 0, 0, NULL, AT(store_path), 0, NULL},
    {"store.fts.tokenizer", K_ENUM, 0, 0, "unicode61|trigram|porter", AT(fts_tokenizer), F_OURS,
     NULL},
    {"store.vector.enabled", K_BOOL, 0, 0, NULL, AT(vector_enabled), 0, NULL},
    {"store.vector.extensionPath", K_STR, 0, 0, NULL, AT(vector_extension_path), 0, NULL},
    {"chunking.tokens", K_INT, POS, NULL, AT(chunk_tokens), 0, NULL},
    {"chunking.overlap", K_INT, NONNEG, NULL, AT(chunk_overlap), 0, NULL},
    {"sync.onSessionStart", K_BOOL, 0, 0, NULL, AT(sync_on_session_start), 0, NULL},
    {"sync.onSearch", K_BOOL, 0, 0, NULL, AT(sync_on_search), 0, NULL},
    {"sync.watch", K_BOOL, 0, 0, NULL, AT(sync_watch), 0, NULL},
    {"sync.watchDebounceMs", K_INT, NONNEG, NULL, AT(watch_debounce_ms), 0, NULL},
    {"sync.intervalMinutes", K_INTD, NONNEG, NULL, AT(sync_interval_minutes), 0, NULL},
    {"sync.sessions.deltaBytes", K_INT, NONNEG, NULL, AT(sessions_delta_bytes), 0, NULL},
    {"sync.sessions.deltaMessages", K_INT, NONNEG, NULL, AT(sessions_delta_messages), 0, NULL},
    {"sync.sessions.postCompactionForce", K_BOOL, 0, 0, NULL, NO_DEST, 0, NULL},
    {"query.maxResults", K_INT, POS, NULL, AT(max_results), 0, NULL},
    {"query.minScore", K_NUM, 0, 1, NULL, AT(min_score), 0, NULL},
    {"query.hybrid.enabled", K_BOOL, 0, 0, NULL, AT(hybrid_enabled), 0, NULL},
    {"query.hybrid.vectorWeight", K_NUM, 0, 1, NULL, AT(vector_weight), 0, NULL},
    {"query.hybrid.textWeight", K_NUM, 0, 1, NULL, AT(text_weight), 0, NULL},
    {"query.hybrid.candidateMultiplier", K_INT, POS, NULL, AT(candidate_multiplier), 0, NULL},
    {"query.hybrid.mmr.enabled", K_BOOL, 0, 0, NULL, AT(mmr_enabled), 0, NULL},
    {"query.hybrid.mmr.lambda", K_NUM, 0, 1, NULL, AT(mmr_lambda), 0, NULL},
    {"query.hybrid.temporalDecay.enabled", K_BOOL, 0, 0, NULL, AT(decay_enabled), 0, NULL},
    {"query.hybrid.temporalDecay.halfLifeDays", K_INTD, POS, NULL, AT(half_life_days), 0, NULL},
    {"cache.enabled", K_BOOL, 0, 0, NULL, AT(cache_enabled), 0, NULL},
    {"cache.maxEntries", K_INT, POS, NULL, AT(cache_max_entries), 0, NULL},
    {"multimodal.enabled", K_BOOL, 0, 0, NULL, AT(multimodal_enabled), 0, NULL},
    {"multimodal.modalities", K_STRLIST, 0, 0, "image|audio|all", AT(multimodal_modalities), 0,
     NULL},
    {"multimodal.maxFileBytes", K_INT, POS, NULL, AT(multimodal_max_bytes), 0, NULL},
};

/* In quantumclaw.json, a key or value only clawmem understands. */
static void warn_ours(ctx *c, const json_t *parent, const char *key, const char *path)
{
    if (c->overlay) return;
    cm_config_warn(
        c, parent, key, 0,
        "%s is clawmem's own setting and makes QuantumClaw 2026.3.22 reject this file: move it "
        "to %s (read from here for now)",
        path, c->overlay_path ? c->overlay_path : "<stateDir>/clawmem.json");
}

/* Applies one leaf value described by f. */
static cm_rc apply(ctx *c, const field *f, const json_t *parent, const char *key, const json_t *v,
                   const char *path)
{
    char what[1024], shown[80];
    void *dst = f->off == NO_DEST ? NULL : (char *)c->cfg + f->off;
    if (f->flags & F_OURS) warn_ours(c, parent, key, path);
    switch (f->kind) {
    case K_BOOL:
        if (!json_is_boolean(v)) goto type;
        if (dst) *(bool *)dst = json_is_true(v);
        return CM_OK;
    case K_INT:
    case K_INTD:
    case K_NUM: {
        if (!json_is_number(v)) goto type;
        double d = json_number_value(v);
        if (f->kind != K_NUM && (!isfinite(d) || d != floor(d))) {
            snprintf(what, sizeof what, "expected an integer, got %g", d);
            return cm_config_bad(c, parent, key, path, what);
        }
        if (!(d >= f->min && d <= f->max) && f->max == SAFE_INT) {
            snprintf(what, sizeof what, "expected an integer of at least %g, got %g", f->min, d);
            return cm_config_bad(c, parent, key, path, what);
        }
        if (!(d >= f->min && d <= f->max)) {
            snprintf(what, sizeof what, "expected a number between %g and %g, got %g", f->min,
                     f->max, d);
            return cm_config_bad(c, parent, key, path, what);
        }
        if (dst && f->kind == K_INT) *(int *)dst = (int)CM_MIN(d, (double)INT_MAX);
        if (dst && f->kind != K_INT) *(double *)dst = d;
        return CM_OK;
    }
    case K_SECRET: {
        char *val = NULL;
        cm_rc rc = cm_secret_resolve(c->secrets, v, &val, what, sizeof what);
        if (rc == CM_ECONFIG) return cm_config_bad(c, parent, key, path, what);
        if (rc) return rc;
        if (dst) {
            free(*(char **)dst);
            *(char **)dst = val;
        } else {
            free(val);
        }
        return CM_OK;
    }
    case K_STR:
    case K_ENUM: {
        if (!json_is_string(v)) goto type;
        if (f->kind == K_ENUM && !cm_config_in_choices(f->choices, json_string_value(v))) {
            snprintf(what, sizeof what, "expected one of %s, got %s", f->choices,
                     cm_config_value_text(v, path, shown, sizeof shown));
            return cm_config_bad(c, parent, key, path, what);
        }
        if (f->qc_choices && !cm_config_in_choices(f->qc_choices, json_string_value(v))) {
            snprintf(what, sizeof what, "%s \"%.40s\"", path, json_string_value(v));
            warn_ours(c, parent, key, what);
        }
        if (!dst) return CM_OK;
        if (f->kind == K_ENUM) return cm_config_set_str((char **)dst, json_string_value(v));
        char *x = NULL;
        cm_rc rc = cm_config_subst(c, parent, key, path, v, &x);
        if (rc) return rc;
        free(*(char **)dst);
        *(char **)dst = x;
        return CM_OK;
    }
    case K_STRLIST: {
        if (!json_is_array(v)) goto type;
        cm_strlist fresh = {NULL, 0};
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            if (!json_is_string(e) ||
                (f->choices && !cm_config_in_choices(f->choices, json_string_value(e)))) {
                int line = 0, col = 0;
                cm_json5_where(c->doc, v, NULL, i, &line, &col);
                cm_config_strlist_release(&fresh);
                snprintf(what, sizeof what, "%s[%zu]: expected %s%s, got %s", path, i,
                         f->choices ? "one of " : "a string", f->choices ? f->choices : "",
                         cm_config_value_text(e, path, shown, sizeof shown));
                return cm_seterr(c->err, c->errlen, CM_ECONFIG, "%s:%d:%d: %s", c->file, line, col,
                                 what);
            }
            char *x = NULL;
            cm_rc rc = cm_config_subst(c, parent, key, path, e, &x);
            if (!rc) rc = cm_config_strlist_add(&fresh, x);
            free(x);
            if (rc) {
                cm_config_strlist_release(&fresh);
                return rc;
            }
        }
        if (!dst) {
            cm_config_strlist_release(&fresh);
            return CM_OK;
        }
        cm_strlist *l = dst;
        if (l == &c->cfg->extra_paths) { /* extraPaths accumulate across layers */
            cm_rc rc = CM_OK;
            for (i = 0; i < fresh.n && !rc; i++)
                rc = cm_config_strlist_add(l, fresh.v[i]);
            cm_config_strlist_release(&fresh);
            return rc;
        }
        cm_config_strlist_release(l);
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
                snprintf(what, sizeof what, "expected a string, got %s", cm_config_type_name(e));
                char sub[1024];
                snprintf(sub, sizeof sub, "%s.%s", path, k);
                return cm_config_bad(c, v, k, sub, what);
            }
            if (strchr(k, ':') || strchr(k, '\n') || strchr(json_string_value(e), '\n')) {
                char sub[1024];
                snprintf(sub, sizeof sub, "%s.%s", path, k);
                return cm_config_bad(c, v, k, sub, "a header name or value with ':' or a newline");
            }
            char sub[1024], *x = NULL;
            snprintf(sub, sizeof sub, "%s.%s", path, k);
            cm_rc rc = cm_config_subst(c, v, k, sub, e, &x);
            if (!rc && dst) rc = cm_config_header_put(dst, k, x);
            free(x);
            if (rc) return rc;
        }
        return CM_OK;
    }
    case K_ANY:
        return CM_OK;
    }
type:
    snprintf(what, sizeof what, "expected %s, got %s",
             f->kind == K_BOOL                                           ? "true or false"
             : f->kind == K_INT || f->kind == K_NUM || f->kind == K_INTD ? "a number"
             : f->kind == K_STRLIST                                      ? "an array of strings"
             : f->kind == K_MAP                                          ? "an object"
                                                                         : "a string",
             cm_config_value_text(v, path, shown, sizeof shown));
    return cm_config_bad(c, parent, key, path, what);
}

/* Walks a memorySearch object; rel is the dotted path below memorySearch. */
cm_rc cm_config_walk(ctx *c, const json_t *obj, const char *prefix, const char *rel)
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
                char what[128], val[80];
                snprintf(what, sizeof what, "expected an object, got %s",
                         cm_config_value_text(v, path, val, sizeof val));
                return cm_config_bad(c, obj, key, path, what);
            }
            rc = cm_config_walk(c, v, prefix, relpath);
        } else { /* a typo of one of the keys at this level? */
            suggest near;
            cm_suggest_init(&near, key);
            size_t rel_len = *rel ? strlen(rel) + 1 : 0;
            for (size_t i = 0; i < ARRAY_LEN(fields); i++) {
                const char *fp = fields[i].path;
                if (rel_len && (strncmp(fp, rel, rel_len - 1) != 0 || fp[rel_len - 1] != '.'))
                    continue;
                const char *dot = strchr(fp + rel_len, '.');
                cm_suggest_add(&near, fp + rel_len,
                               dot ? (size_t)(dot - fp - rel_len) : strlen(fp + rel_len));
            }
            cm_config_warn_unknown(c, obj, key, path, &near);
        }
        if (rc) return rc;
    }
    return CM_OK;
}
