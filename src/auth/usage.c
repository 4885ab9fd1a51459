/*
 * usage.c — the rotation order of a provider's auth profiles and the
 * usageStats that drive it (auth.h): cooldowns 1 → 5 → 25 → 60 min by error
 * count, billing disables 5 h doubling up to 24 h, counters reset after the
 * failure window, as QuantumClaw 2026.3.22 computes them. Times are ms since
 * the epoch, passed in.
 */
#include <ctype.h>
#include <math.h>

#include "auth.h"
#include "../base/jnum.h"

#define OOM()                                                                                      \
    do {                                                                                           \
        rc = CM_ENOMEM;                                                                            \
        goto out;                                                                                  \
    } while (0)
#define MINUTE_MS 60000LL
#define HOUR_MS   3600000LL

void cm_auth_provider_norm(const char *provider, char *out, size_t outlen)
{
    size_t n = 0;
    const char *p = provider ? provider : "";
    while (isspace((unsigned char)*p))
        p++;
    for (; *p && n + 1 < outlen; p++)
        out[n++] = (char)tolower((unsigned char)*p);
    while (n > 0 && isspace((unsigned char)out[n - 1]))
        n--;
    out[n] = 0;
    static const char *const alias[][2] = {{"z.ai", "zai"},
                                           {"z-ai", "zai"},
                                           {"opencode-zen", "opencode"},
                                           {"opencode-go-auth", "opencode-go"},
                                           {"qwen", "qwen-portal"},
                                           {"kimi-code", "kimi"},
                                           {"kimi-coding", "kimi"},
                                           {"bedrock", "amazon-bedrock"},
                                           {"aws-bedrock", "amazon-bedrock"},
                                           {"bytedance", "volcengine"},
                                           {"doubao", "volcengine"},
                                           {"volcengine-plan", "volcengine"},
                                           {"byteplus-plan", "byteplus"}};
    for (size_t i = 0; i < ARRAY_LEN(alias); i++)
        if (strcmp(out, alias[i][0]) == 0) {
            snprintf(out, outlen, "%s", alias[i][1]);
            break;
        }
}

static bool same_provider(const char *a, const char *b)
{
    char x[128], y[128];
    cm_auth_provider_norm(a, x, sizeof x);
    cm_auth_provider_norm(b, y, sizeof y);
    return strcmp(x, y) == 0;
}

static bool cooldown_bypassed(const char *provider)
{
    char p[128];
    cm_auth_provider_norm(provider, p, sizeof p);
    return strcmp(p, "openrouter") == 0 || strcmp(p, "kilocode") == 0;
}

int64_t cm_auth_cooldown_ms(int64_t n)
{
    if (n < 1) n = 1;
    int64_t ms = MINUTE_MS;
    for (int64_t i = 1; i < n && i <= 3; i++)
        ms *= 5;
    return ms < HOUR_MS ? ms : HOUR_MS;
}

/* v hours when a positive finite number (at most a million: about 114
 * years, so the ms never overflow), else dflt. */
static double hours_or(double v, double dflt)
{
    return isfinite(v) && v > 0 ? (v > 1e6 ? 1e6 : v) : dflt;
}

int64_t cm_auth_billing_disable_ms(const auth_cooldowns *c, const char *provider, int64_t n)
{
    double base_h = 0, max_h = 0;
    if (c) {
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)c->billing_backoff_hours_by_provider, key, v)
        {
            if (same_provider(key, provider) && json_is_number(v)) base_h = json_number_value(v);
        }
        if (!(base_h > 0)) base_h = c->billing_backoff_hours;
        max_h = c->billing_max_hours;
    }
    int64_t base = (int64_t)(hours_or(base_h, 5) * HOUR_MS);
    int64_t max = (int64_t)(hours_or(max_h, 24) * HOUR_MS);
    if (base < MINUTE_MS) base = MINUTE_MS;
    if (max < base) max = base;
    if (n < 1) n = 1;
    int64_t ms = base;
    for (int64_t i = 1; i < n && i <= 10 && ms < max; i++)
        ms *= 2;
    return ms < max ? ms : max;
}

/* A number field of an object as ms: 0 when absent, not a number or not
 * positive; a time past CM_JNUM_MS_MAX (1e300) reads as that, i.e. never. */
static int64_t get_ms(const json_t *o, const char *key)
{
    return cm_jnum_int64(json_object_get(o, key), 0, CM_JNUM_MS_MAX, 0);
}

static json_t *stats_of(const auth_store *s, const char *id)
{
    return json_object_get(json_object_get(s->doc, "usageStats"), id);
}

json_t *cm_auth_profile(const auth_store *s, const char *id)
{
    json_t *p = json_object_get(json_object_get(s->doc, "profiles"), id);
    return json_is_object(p) ? p : NULL;
}

static const char *str_field(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v && *v ? v : NULL;
}

const char *cm_auth_profile_secret(const auth_store *s, const char *id)
{
    json_t *p = cm_auth_profile(s, id);
    const char *type = str_field(p, "type");
    if (!type) type = str_field(p, "mode"); /* a common misspelling QuantumClaw accepts */
    if (!type) return NULL;
    if (strcmp(type, "api_key") == 0) {
        const char *k = str_field(p, "key");
        return k ? k : str_field(p, "apiKey");
    }
    if (strcmp(type, "token") == 0) return str_field(p, "token");
    if (strcmp(type, "oauth") == 0) return str_field(p, "access");
    return NULL;
}

static int64_t until_of(const json_t *st)
{
    int64_t a = get_ms(st, "cooldownUntil"), b = get_ms(st, "disabledUntil");
    return a > b ? a : b;
}

int64_t cm_auth_profile_unusable_until(const auth_store *s, const char *id)
{
    return until_of(stats_of(s, id));
}

bool cm_auth_profile_unusable(const auth_store *s, const char *id, int64_t now)
{
    if (cooldown_bypassed(str_field(cm_auth_profile(s, id), "provider"))) return false;
    int64_t u = cm_auth_profile_unusable_until(s, id);
    return u > 0 && now < u;
}

/* Clears windows that have passed. The counters stay: the next failure
 * escalates (1 → 5 → 25 → 60 min, billing 5 → 10 → 20 → 24 h) until the
 * failure window passes without a failure, as the seeds describe. (2026.3.22's
 * code also resets them when a window expires, which makes those schedules
 * unreachable: a profile is skipped while cooling, so its next failure always
 * comes after expiry. clawmem follows the seeds.) */
static void clear_expired(json_t *doc, int64_t now)
{
    const char *id;
    json_t *st;
    json_object_foreach(json_object_get(doc, "usageStats"), id, st)
    {
        if (!json_is_object(st)) continue;
        int64_t c = get_ms(st, "cooldownUntil"), d = get_ms(st, "disabledUntil");
        if (c > 0 && now >= c) json_object_del(st, "cooldownUntil");
        if (d > 0 && now >= d) {
            json_object_del(st, "disabledUntil");
            json_object_del(st, "disabledReason");
        }
    }
}

/* Whether the stored credential can be used: a key or key reference; a
 * token that has not expired; OAuth with an access or refresh token. */
static bool credential_ok(const json_t *p, int64_t now)
{
    const char *type = str_field(p, "type");
    if (!type) type = str_field(p, "mode");
    if (!type) return false;
    if (strcmp(type, "api_key") == 0)
        return str_field(p, "key") || str_field(p, "apiKey") ||
               json_is_object(json_object_get(p, "keyRef"));
    if (strcmp(type, "token") == 0) {
        if (!str_field(p, "token") && !json_is_object(json_object_get(p, "tokenRef"))) return false;
        json_t *e = json_object_get(p, "expires");
        if (!e) return true;
        int64_t until = cm_jnum_int64(e, 0, CM_JNUM_MS_MAX, 0);
        return until > 0 && now < until;
    }
    if (strcmp(type, "oauth") == 0) return str_field(p, "access") || str_field(p, "refresh");
    return false;
}

static bool eligible(const auth_store *s, const json_t *cfg_auth, const char *provider,
                     const char *id, int64_t now)
{
    json_t *p = cm_auth_profile(s, id);
    if (!p || !same_provider(str_field(p, "provider"), provider)) return false;
    json_t *pc = json_object_get(json_object_get(cfg_auth, "profiles"), id);
    if (json_is_object(pc)) {
        if (!same_provider(str_field(pc, "provider"), provider)) return false;
        const char *mode = str_field(pc, "mode"), *type = str_field(p, "type");
        if (mode && type && strcmp(mode, type) != 0 &&
            !(strcmp(mode, "oauth") == 0 && strcmp(type, "token") == 0))
            return false;
    }
    return credential_ok(p, now);
}

/* The value of obj whose key names the same provider, or NULL. */
static json_t *by_provider(const json_t *obj, const char *provider)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        if (same_provider(key, provider)) return v;
    }
    return NULL;
}

void cm_auth_strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

typedef struct ranked {
    const char *id;
    int type_score;
    int64_t last_used, until;
    size_t pos;
} ranked;

/* Usable profiles first — in the explicit order, or by type (OAuth, token,
 * API key) then oldest use — then unusable ones by soonest expiry. */
static int cmp_rank(const ranked *x, const ranked *y, bool by_type)
{
    if (!x->until != !y->until) return x->until ? 1 : -1;
    if (x->until && x->until != y->until) return x->until < y->until ? -1 : 1;
    if (!x->until && by_type) {
        if (x->type_score != y->type_score) return x->type_score - y->type_score;
        if (x->last_used != y->last_used) return x->last_used < y->last_used ? -1 : 1;
    }
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int cmp_by_type(const void *a, const void *b)
{
    return cmp_rank(a, b, true);
}

static int cmp_explicit(const void *a, const void *b)
{
    return cmp_rank(a, b, false);
}

cm_rc cm_auth_profile_order(auth_store *s, const json_t *cfg_auth, const char *provider,
                            const char *preferred, int64_t now, char ***out)
{
    cm_rc rc = CM_OK;
    ranked *r = NULL;
    char **v = NULL;
    *out = NULL;
    clear_expired(s->doc, now);
    /* The base list: stored order, configured order, configured profiles of
     * the provider, stored profiles of the provider. */
    json_t *base = NULL;
    json_t *explicit_order = by_provider(json_object_get(s->doc, "order"), provider);
    if (!json_is_array(explicit_order) || json_array_size(explicit_order) == 0)
        explicit_order = by_provider(json_object_get(cfg_auth, "order"), provider);
    bool is_explicit = json_is_array(explicit_order) && json_array_size(explicit_order) > 0;
    json_t *cfg_ids = json_array(), *stored_ids = json_array(), *seen = json_object();
    if (!cfg_ids || !stored_ids || !seen) OOM();
    const char *id;
    json_t *val;
    json_object_foreach(json_object_get(cfg_auth, "profiles"), id, val)
    {
        if (same_provider(str_field(val, "provider"), provider))
            json_array_append_new(cfg_ids, json_string(id));
    }
    json_object_foreach(json_object_get(s->doc, "profiles"), id, val)
    {
        if (same_provider(str_field(val, "provider"), provider))
            json_array_append_new(stored_ids, json_string(id));
    }
    base = is_explicit ? explicit_order : json_array_size(cfg_ids) ? cfg_ids : stored_ids;
    size_t n = json_array_size(base), m = 0;
    r = calloc(n + json_array_size(stored_ids) + 1, sizeof *r);
    if (!r) OOM();
    for (int pass = 0; pass < 2 && m == 0; pass++) {
        /* When every configured profile is missing from the store, fall
         * back to the stored ones. */
        if (pass == 1) {
            if (is_explicit || base != cfg_ids) break;
            bool all_missing = true;
            for (size_t i = 0; i < n; i++)
                if (cm_auth_profile(s, json_string_value(json_array_get(base, i))))
                    all_missing = false;
            if (!all_missing) break;
            base = stored_ids;
            n = json_array_size(base);
        }
        for (size_t i = 0; i < n; i++) {
            const char *pid = json_string_value(json_array_get(base, i));
            if (!pid || !eligible(s, cfg_auth, provider, pid, now)) continue;
            if (json_object_get(seen, pid)) continue; /* listed twice */
            if (json_object_set_new(seen, pid, json_true())) OOM();
            json_t *st = stats_of(s, pid);
            const char *type = str_field(cm_auth_profile(s, pid), "type");
            r[m].id = pid;
            r[m].type_score = !type                          ? 3
                              : strcmp(type, "oauth") == 0   ? 0
                              : strcmp(type, "token") == 0   ? 1
                              : strcmp(type, "api_key") == 0 ? 2
                                                             : 3;
            r[m].last_used = get_ms(st, "lastUsed");
            r[m].until = cm_auth_profile_unusable(s, pid, now) ? until_of(st) : 0;
            r[m].pos = m;
            m++;
        }
    }
    qsort(r, m, sizeof *r, is_explicit ? cmp_explicit : cmp_by_type);
    v = calloc(m + 1, sizeof *v);
    if (!v) OOM();
    size_t w = 0;
    if (preferred)
        for (size_t i = 0; i < m; i++)
            if (strcmp(r[i].id, preferred) == 0 && !(v[w++] = cm_strdup(preferred))) OOM();
    for (size_t i = 0; i < m; i++) {
        if (preferred && strcmp(r[i].id, preferred) == 0) continue;
        if (!(v[w++] = cm_strdup(r[i].id))) OOM();
    }
    *out = v;
    v = NULL;
out:
    json_decref(cfg_ids);
    json_decref(stored_ids);
    json_decref(seen);
    free(r);
    cm_auth_strv_free(v);
    return rc;
}

auth_reason cm_auth_unavailable_reason(const auth_store *s, const char *const *ids, int64_t now)
{
    double score[AUTH_R_N] = {0};
    bool any = false;
    for (size_t i = 0; ids && ids[i]; i++) {
        json_t *st = stats_of(s, ids[i]);
        if (!st) continue;
        int64_t d = get_ms(st, "disabledUntil"), c = get_ms(st, "cooldownUntil");
        auth_reason dr = cm_auth_reason_parse(str_field(st, "disabledReason"));
        if (d > now && dr >= 0 && dr < AUTH_R_SESSION_EXPIRED) {
            score[dr] += 1000;
            any = true;
            continue;
        }
        if (!(c > now)) continue;
        bool recorded = false;
        const char *k;
        json_t *cnt;
        json_object_foreach(json_object_get(st, "failureCounts"), k, cnt)
        {
            auth_reason r = cm_auth_reason_parse(k);
            double n = json_is_number(cnt) ? json_number_value(cnt) : 0;
            if (r < 0 || r >= AUTH_R_SESSION_EXPIRED || !(n > 0)) continue;
            score[r] += n;
            recorded = any = true;
        }
        if (!recorded) {
            score[AUTH_R_UNKNOWN] += 1;
            any = true;
        }
    }
    if (!any) return AUTH_R_NONE;
    auth_reason best = AUTH_R_NONE;
    for (int r = 0; r < AUTH_R_SESSION_EXPIRED; r++)
        if (score[r] > 0 && (best == AUTH_R_NONE || score[r] > score[best])) best = (auth_reason)r;
    return best;
}

/* ---- usageStats updates ---- */

json_t *cm_auth_stats_after_failure(const json_t *existing, const char *provider, auth_reason r,
                                    const auth_cooldowns *c, int64_t now)
{
    json_t *st = existing ? json_deep_copy(existing) : json_object();
    if (!st) return NULL;
    double window_h = c ? hours_or(c->failure_window_hours, 24) : 24;
    int64_t last_fail = get_ms(st, "lastFailureAt");
    bool reset = last_fail > 0 && now - last_fail > (int64_t)(window_h * HOUR_MS);
    json_t *ec = json_object_get(st, "errorCount");
    int64_t errors = reset ? 0 : cm_jnum_int64(ec, 0, INT32_MAX, 0);
    errors++;
    json_t *counts = reset ? NULL : json_object_get(st, "failureCounts");
    counts = json_is_object(counts) ? json_deep_copy(counts) : json_object();
    const char *name = cm_auth_reason_name(r < 0 ? AUTH_R_UNKNOWN : r);
    json_t *prev = json_object_get(counts, name);
    int64_t this_count = cm_jnum_int64(prev, 0, INT32_MAX, 0) + 1;
    json_object_set_new(counts, name, json_integer(this_count));
    json_object_set_new(st, "errorCount", json_integer(errors));
    json_object_set_new(st, "failureCounts", counts);
    json_object_set_new(st, "lastFailureAt", json_integer(now));
    if (r == AUTH_R_BILLING || r == AUTH_R_AUTH_PERMANENT) {
        int64_t d = get_ms(st, "disabledUntil");
        if (!(d > now)) d = now + cm_auth_billing_disable_ms(c, provider, this_count);
        json_object_set_new(st, "disabledUntil", json_integer(d));
        json_object_set_new(st, "disabledReason", json_string(name));
    } else {
        int64_t cu = get_ms(st, "cooldownUntil");
        if (!(cu > now)) cu = now + cm_auth_cooldown_ms(errors);
        json_object_set_new(st, "cooldownUntil", json_integer(cu));
    }
    return st;
}

typedef struct mark_ctx {
    const char *profile_id, *provider;
    enum { MARK_USED, MARK_FAILURE, MARK_GOOD, MARK_CLEAR, MARK_SUCCESS } what;
    auth_reason reason;
    const auth_cooldowns *cooldowns;
    int64_t not_before;
} mark_ctx;

static json_t *usage_stats(json_t *doc)
{
    json_t *u = json_object_get(doc, "usageStats");
    if (!json_is_object(u)) {
        u = json_object();
        if (!u || json_object_set_new(doc, "usageStats", u)) return NULL;
    }
    return u;
}

/* Drops the counters and windows of a stats object (lastUsed and unknown
 * fields stay). */
static void reset_stats(json_t *st)
{
    json_object_set_new(st, "errorCount", json_integer(0));
    json_object_del(st, "cooldownUntil");
    json_object_del(st, "disabledUntil");
    json_object_del(st, "disabledReason");
    json_object_del(st, "failureCounts");
}

static cm_rc mark_fn(json_t *doc, void *vctx, int64_t now, bool *changed, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    mark_ctx *m = vctx;
    json_t *profiles = json_object_get(doc, "profiles");
    json_t *p = json_object_get(profiles, m->profile_id);
    if (!json_is_object(p)) return CM_OK; /* removed meanwhile: nothing to record */
    const char *provider = str_field(p, "provider");
    json_t *u = usage_stats(doc);
    if (!u) return CM_ENOMEM;
    json_t *st = json_object_get(u, m->profile_id);
    if (m->what == MARK_SUCCESS) { /* used, then good: one locked write */
        mark_ctx used = *m, good = *m;
        used.what = MARK_USED;
        good.what = MARK_GOOD;
        cm_rc rc = mark_fn(doc, &used, now, changed, err, errlen);
        return rc ? rc : mark_fn(doc, &good, now, changed, err, errlen);
    }
    switch (m->what) {
    case MARK_SUCCESS:
    case MARK_USED:
    case MARK_CLEAR:
        if (!json_is_object(st)) {
            if (m->what == MARK_CLEAR) return CM_OK;
            st = json_object();
            if (!st || json_object_set_new(u, m->profile_id, st)) return CM_ENOMEM;
        }
        reset_stats(st);
        if (m->what == MARK_USED) json_object_set_new(st, "lastUsed", json_integer(now));
        break;
    case MARK_FAILURE: {
        if (cooldown_bypassed(provider)) return CM_OK;
        json_t *next = cm_auth_stats_after_failure(json_is_object(st) ? st : NULL, provider,
                                                   m->reason, m->cooldowns, now);
        if (!next) return CM_ENOMEM;
        if (m->not_before > get_ms(next, "cooldownUntil") &&
            m->not_before > get_ms(next, "disabledUntil"))
            json_object_set_new(next, "cooldownUntil", json_integer(m->not_before));
        if (json_object_set_new(u, m->profile_id, next)) return CM_ENOMEM;
        break;
    }
    case MARK_GOOD: {
        if (!provider || strcmp(provider, m->provider) != 0) return CM_OK;
        json_t *lg = json_object_get(doc, "lastGood");
        if (!json_is_object(lg)) {
            lg = json_object();
            if (!lg || json_object_set_new(doc, "lastGood", lg)) return CM_ENOMEM;
        }
        json_object_set_new(lg, m->provider, json_string(m->profile_id));
        break;
    }
    }
    *changed = true;
    return CM_OK;
}

cm_rc cm_auth_mark_used(auth_store *s, const char *path, const char *profile_id, int64_t now,
                        char *err, size_t errlen)
{
    mark_ctx m = {profile_id, NULL, MARK_USED, AUTH_R_NONE, NULL, 0};
    return cm_auth_store_update(s, path, now, mark_fn, &m, err, errlen);
}

cm_rc cm_auth_mark_failure(auth_store *s, const char *path, const char *profile_id, auth_reason r,
                           const auth_cooldowns *c, int64_t now, char *err, size_t errlen)
{
    return cm_auth_mark_failure_until(s, path, profile_id, r, c, 0, now, err, errlen);
}

cm_rc cm_auth_mark_failure_until(auth_store *s, const char *path, const char *profile_id,
                                 auth_reason r, const auth_cooldowns *c, int64_t not_before,
                                 int64_t now, char *err, size_t errlen)
{
    mark_ctx m = {profile_id, NULL, MARK_FAILURE, r, c, not_before};
    return cm_auth_store_update(s, path, now, mark_fn, &m, err, errlen);
}

cm_rc cm_auth_mark_good(auth_store *s, const char *path, const char *provider,
                        const char *profile_id, int64_t now, char *err, size_t errlen)
{
    mark_ctx m = {profile_id, provider, MARK_GOOD, AUTH_R_NONE, NULL, 0};
    return cm_auth_store_update(s, path, now, mark_fn, &m, err, errlen);
}

cm_rc cm_auth_mark_success(auth_store *s, const char *path, const char *provider,
                           const char *profile_id, int64_t now, char *err, size_t errlen)
{
    mark_ctx m = {profile_id, provider, MARK_SUCCESS, AUTH_R_NONE, NULL, 0};
    return cm_auth_store_update(s, path, now, mark_fn, &m, err, errlen);
}

cm_rc cm_auth_clear_cooldown(auth_store *s, const char *path, const char *profile_id, int64_t now,
                             char *err, size_t errlen)
{
    mark_ctx m = {profile_id, NULL, MARK_CLEAR, AUTH_R_NONE, NULL, 0};
    return cm_auth_store_update(s, path, now, mark_fn, &m, err, errlen);
}
