/*
 * qmd.c — memory.qmd.* of QuantumClaw 2026.3.22 (the QMD backend's settings)
 * into cfg->qmd: types checked as its schema does (a bad value names the key
 * path and line:column), defaults and clamps as its backend config resolves
 * them. Read whatever memory.backend says, so that a config is checked once.
 */
#include "config_int.h"

#define QMD_DEFAULT_INTERVAL_MS        (5 * 60000)
#define QMD_DEFAULT_EMBED_INTERVAL_MS  (60 * 60000)
#define QMD_DEFAULT_DEBOUNCE_MS        15000
#define QMD_DEFAULT_COMMAND_TIMEOUT_MS 30000
#define QMD_DEFAULT_UPDATE_TIMEOUT_MS  120000
#define QMD_DEFAULT_EMBED_TIMEOUT_MS   120000

void cm_config_qmd_defaults(cm_config *cfg)
{
    cm_qmd_config *q = &cfg->qmd;
    q->include_default_memory = true;
    q->interval_ms = QMD_DEFAULT_INTERVAL_MS;
    q->embed_interval_ms = QMD_DEFAULT_EMBED_INTERVAL_MS;
    q->debounce_ms = QMD_DEFAULT_DEBOUNCE_MS;
    q->on_boot = true;
    q->command_timeout_ms = QMD_DEFAULT_COMMAND_TIMEOUT_MS;
    q->update_timeout_ms = QMD_DEFAULT_UPDATE_TIMEOUT_MS;
    q->embed_timeout_ms = QMD_DEFAULT_EMBED_TIMEOUT_MS;
    q->max_results = 6;
    q->max_snippet_chars = 700;
    q->max_injected_chars = 4000;
    q->timeout_ms = 4000;
    q->scope_default_allow = false; /* DM-only unless scope says otherwise */
}

static void rules_release(cm_qmd_config *q)
{
    for (size_t i = 0; i < q->nrules; i++) {
        free(q->rules[i].channel);
        free(q->rules[i].chat_type);
        free(q->rules[i].key_prefix);
        free(q->rules[i].raw_key_prefix);
    }
    free(q->rules);
    q->rules = NULL;
    q->nrules = 0;
}

static void paths_release(cm_qmd_config *q)
{
    for (size_t i = 0; i < q->npaths; i++) {
        free(q->paths[i].path);
        free(q->paths[i].name);
        free(q->paths[i].pattern);
    }
    free(q->paths);
    q->paths = NULL;
    q->npaths = 0;
}

void cm_config_qmd_release(cm_qmd_config *q)
{
    free(q->command);
    free(q->search_mode);
    free(q->sessions_export_dir);
    paths_release(q);
    rules_release(q);
    memset(q, 0, sizeof *q);
}

bool cm_config_duration_ms(const char *s, int64_t unit_ms, int64_t *ms)
{
    double total = 0;
    bool any = false;
    while (*s == ' ' || *s == '\t')
        s++;
    while (*s && *s != ' ' && *s != '\t') {
        if (*s < '0' || *s > '9') return false;
        char *end;
        double v = strtod(s, &end);
        if (end == s || v < 0 || v > 1e12) return false;
        s = end;
        int64_t mult;
        if (!strncmp(s, "ms", 2))
            mult = 1, s += 2;
        else if (*s == 's' || *s == 'S')
            mult = 1000, s++;
        else if (*s == 'm' || *s == 'M')
            mult = 60000, s++;
        else if (*s == 'h' || *s == 'H')
            mult = 3600000, s++;
        else if (*s == 'd' || *s == 'D')
            mult = 86400000, s++;
        else if (!*s && !any)
            mult = unit_ms; /* a bare number */
        else
            return false;
        total += v * (double)mult;
        any = true;
    }
    while (*s == ' ' || *s == '\t')
        s++;
    if (!any || *s || total > 1e15) return false;
    *ms = (int64_t)(total + 0.5);
    return true;
}

static cm_rc get_string(ctx *c, const json_t *o, const char *key, const char *path, char **dst)
{
    json_t *v = json_object_get(o, key);
    if (!v) return CM_OK;
    if (!json_is_string(v)) return cm_config_bad(c, o, key, path, "expected a string");
    return cm_config_set_str(dst, json_string_value(v));
}

static cm_rc get_bool(ctx *c, const json_t *o, const char *key, const char *path, bool *dst)
{
    json_t *v = json_object_get(o, key);
    if (!v) return CM_OK;
    if (!json_is_boolean(v)) return cm_config_bad(c, o, key, path, "expected true or false");
    *dst = json_is_true(v);
    return CM_OK;
}

/* An integer >= min (the schema's nonnegative or positive). */
static cm_rc get_int(ctx *c, const json_t *o, const char *key, const char *path, int64_t min,
                     int64_t *dst)
{
    json_t *v = json_object_get(o, key);
    if (!v) return CM_OK;
    if (!json_is_integer(v) || json_integer_value(v) < min ||
        json_integer_value(v) > (int64_t)1 << 40)
        return cm_config_bad(c, o, key, path,
                             min > 0 ? "expected a positive integer" : "expected an integer >= 0");
    *dst = json_integer_value(v);
    return CM_OK;
}

static cm_rc get_duration(ctx *c, const json_t *o, const char *key, const char *path, int64_t *dst)
{
    json_t *v = json_object_get(o, key);
    if (!v) return CM_OK;
    if (!json_is_string(v)) return cm_config_bad(c, o, key, path, "expected a duration string");
    if (!cm_config_duration_ms(json_string_value(v), 60000, dst))
        return cm_config_bad(c, o, key, path,
                             "expected a duration such as \"5m\", \"90s\" or \"1h\"");
    return CM_OK;
}

static cm_rc get_section(ctx *c, const json_t *o, const char *key, const char *path,
                         const json_t **out)
{
    *out = o ? json_object_get(o, key) : NULL;
    if (*out && !json_is_object(*out)) return cm_config_bad(c, o, key, path, "expected an object");
    return CM_OK;
}

static cm_rc read_paths(ctx *c, const json_t *qmd)
{
    cm_qmd_config *q = &c->cfg->qmd;
    json_t *arr = json_object_get(qmd, "paths");
    char path[96];
    if (!arr) return CM_OK;
    if (!json_is_array(arr))
        return cm_config_bad(c, qmd, "paths", "memory.qmd.paths", "expected an array");
    paths_release(q); /* a later file's array replaces */
    size_t n = json_array_size(arr);
    if (n && !(q->paths = calloc(n, sizeof *q->paths))) return CM_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(arr, i);
        snprintf(path, sizeof path, "memory.qmd.paths[%zu]", i);
        if (!json_is_object(e)) return cm_config_bad(c, arr, NULL, path, "expected an object");
        cm_qmd_path *p = &q->paths[q->npaths++];
        snprintf(path, sizeof path, "memory.qmd.paths[%zu].path", i);
        if (!json_is_string(json_object_get(e, "path")))
            return cm_config_bad(c, e, "path", path, "expected a string (required)");
        cm_rc rc = get_string(c, e, "path", path, &p->path);
        snprintf(path, sizeof path, "memory.qmd.paths[%zu].name", i);
        if (!rc) rc = get_string(c, e, "name", path, &p->name);
        snprintf(path, sizeof path, "memory.qmd.paths[%zu].pattern", i);
        if (!rc) rc = get_string(c, e, "pattern", path, &p->pattern);
        if (rc) return rc;
    }
    return CM_OK;
}

static cm_rc read_scope(ctx *c, const json_t *qmd)
{
    cm_qmd_config *q = &c->cfg->qmd;
    const json_t *scope;
    char path[96];
    cm_rc rc = get_section(c, qmd, "scope", "memory.qmd.scope", &scope);
    if (rc || !scope) return rc;
    json_t *d = json_object_get(scope, "default");
    if (d && (!json_is_string(d) || !cm_config_in_choices("allow|deny", json_string_value(d))))
        return cm_config_bad(c, scope, "default", "memory.qmd.scope.default",
                             "expected \"allow\" or \"deny\"");
    /* a scope given without "default" allows what no rule denies (as 2026.3.22) */
    q->scope_default_allow = !d || !strcmp(json_string_value(d), "allow");
    q->scope_set = true;
    rules_release(q);
    json_t *arr = json_object_get(scope, "rules");
    if (!arr) return CM_OK;
    if (!json_is_array(arr))
        return cm_config_bad(c, scope, "rules", "memory.qmd.scope.rules", "expected an array");
    size_t n = json_array_size(arr);
    if (n && !(q->rules = calloc(n, sizeof *q->rules))) return CM_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(arr, i);
        snprintf(path, sizeof path, "memory.qmd.scope.rules[%zu]", i);
        if (!json_is_object(e)) return cm_config_bad(c, arr, NULL, path, "expected an object");
        cm_qmd_rule *r = &q->rules[q->nrules++];
        json_t *a = json_object_get(e, "action");
        snprintf(path, sizeof path, "memory.qmd.scope.rules[%zu].action", i);
        if (!json_is_string(a) || !cm_config_in_choices("allow|deny", json_string_value(a)))
            return cm_config_bad(c, e, "action", path, "expected \"allow\" or \"deny\"");
        r->allow = !strcmp(json_string_value(a), "allow");
        const json_t *m;
        snprintf(path, sizeof path, "memory.qmd.scope.rules[%zu].match", i);
        if ((rc = get_section(c, e, "match", path, &m)) || !m) {
            if (rc) return rc;
            continue;
        }
        static const char *const keys[] = {"channel", "chatType", "keyPrefix", "rawKeyPrefix"};
        char **dst[] = {&r->channel, &r->chat_type, &r->key_prefix, &r->raw_key_prefix};
        for (size_t k = 0; k < ARRAY_LEN(keys); k++) {
            snprintf(path, sizeof path, "memory.qmd.scope.rules[%zu].match.%s", i, keys[k]);
            if ((rc = get_string(c, m, keys[k], path, dst[k]))) return rc;
        }
        if (r->chat_type && !cm_config_in_choices("direct|group|channel|dm", r->chat_type))
            return cm_config_bad(c, m, "chatType", path, "expected direct, group or channel");
    }
    return CM_OK;
}

cm_rc cm_config_read_qmd(ctx *c, const json_t *qmd)
{
    cm_rc rc = CM_OK;
    cm_qmd_config *q = &c->cfg->qmd;
    const json_t *s;
    int64_t v;
    if (!qmd) return CM_OK;
    CHECK(get_string(c, qmd, "command", "memory.qmd.command", &q->command));
    json_t *m = json_object_get(qmd, "searchMode");
    if (m &&
        (!json_is_string(m) || !cm_config_in_choices("search|vsearch|query", json_string_value(m))))
        CHECK(cm_config_bad(c, qmd, "searchMode", "memory.qmd.searchMode",
                            "expected \"search\", \"vsearch\" or \"query\""));
    CHECK(get_string(c, qmd, "searchMode", "memory.qmd.searchMode", &q->search_mode));
    CHECK(get_bool(c, qmd, "includeDefaultMemory", "memory.qmd.includeDefaultMemory",
                   &q->include_default_memory));
    CHECK(read_paths(c, qmd));
    CHECK(get_section(c, qmd, "sessions", "memory.qmd.sessions", &s));
    if (s) {
        CHECK(get_bool(c, s, "enabled", "memory.qmd.sessions.enabled", &q->sessions_enabled));
        CHECK(get_string(c, s, "exportDir", "memory.qmd.sessions.exportDir",
                         &q->sessions_export_dir));
        v = q->sessions_retention_days;
        CHECK(get_int(c, s, "retentionDays", "memory.qmd.sessions.retentionDays", 0, &v));
        q->sessions_retention_days = (int)CM_MIN(v, 100000);
    }
    CHECK(get_section(c, qmd, "update", "memory.qmd.update", &s));
    if (s) {
        CHECK(get_duration(c, s, "interval", "memory.qmd.update.interval", &q->interval_ms));
        CHECK(get_duration(c, s, "embedInterval", "memory.qmd.update.embedInterval",
                           &q->embed_interval_ms));
        CHECK(get_int(c, s, "debounceMs", "memory.qmd.update.debounceMs", 0, &q->debounce_ms));
        CHECK(get_bool(c, s, "onBoot", "memory.qmd.update.onBoot", &q->on_boot));
        CHECK(get_bool(c, s, "waitForBootSync", "memory.qmd.update.waitForBootSync",
                       &q->wait_for_boot_sync));
        /* 0 keeps the default (2026.3.22 takes only positive timeouts) */
        static const char *const keys[] = {"commandTimeoutMs", "updateTimeoutMs", "embedTimeoutMs"};
        int64_t *dst[] = {&q->command_timeout_ms, &q->update_timeout_ms, &q->embed_timeout_ms};
        char path[64];
        for (size_t k = 0; k < ARRAY_LEN(keys); k++) {
            v = 0;
            snprintf(path, sizeof path, "memory.qmd.update.%s", keys[k]);
            CHECK(get_int(c, s, keys[k], path, 0, &v));
            if (v > 0) *dst[k] = v;
        }
    }
    CHECK(get_section(c, qmd, "limits", "memory.qmd.limits", &s));
    if (s) {
        v = q->max_results;
        CHECK(get_int(c, s, "maxResults", "memory.qmd.limits.maxResults", 1, &v));
        q->max_results = (int)CM_MIN(v, 1000);
        v = q->max_snippet_chars;
        CHECK(get_int(c, s, "maxSnippetChars", "memory.qmd.limits.maxSnippetChars", 1, &v));
        q->max_snippet_chars = (int)CM_MIN(v, 1 << 20);
        v = q->max_injected_chars;
        CHECK(get_int(c, s, "maxInjectedChars", "memory.qmd.limits.maxInjectedChars", 1, &v));
        q->max_injected_chars = (int)CM_MIN(v, 1 << 24);
        v = 0;
        CHECK(get_int(c, s, "timeoutMs", "memory.qmd.limits.timeoutMs", 0, &v));
        if (v > 0) q->timeout_ms = v;
    }
    CHECK(read_scope(c, qmd));
out:
    return rc;
}
