/*
 * model_select.c — 2026.3.22's model selection rules (model_select.h):
 * references, aliases, the allowlist, the /models catalog and the entry
 * change of a switch.
 */
#include <ctype.h>
#include <strings.h>

#include "model_select.h"

/* 2026.3.22 normalizeProviderId: trimmed, lower case, its provider aliases. */
static void S_provider(const char *p, size_t n, char out[128])
{
    static const struct {
        const char *from, *to;
    } aliases[] = {{"z.ai", "zai"},
                   {"z-ai", "zai"},
                   {"opencode-zen", "opencode"},
                   {"opencode-go-auth", "opencode-go"},
                   {"qwen", "qwen-portal"},
                   {"kimi-code", "kimi"},
                   {"kimi-coding", "kimi"},
                   {"bedrock", "amazon-bedrock"},
                   {"aws-bedrock", "amazon-bedrock"},
                   {"bytedance", "volcengine"},
                   {"doubao", "volcengine"}};
    while (n && isspace((unsigned char)*p))
        p++, n--;
    while (n && isspace((unsigned char)p[n - 1]))
        n--;
    size_t k = 0;
    for (; k < n && k < 127; k++)
        out[k] = (char)tolower((unsigned char)p[k]);
    out[k] = 0;
    for (size_t i = 0; i < ARRAY_LEN(aliases); i++)
        if (!strcmp(out, aliases[i].from)) snprintf(out, 128, "%s", aliases[i].to);
}

/* 2026.3.22 normalizeProviderModelId, for the providers clawmem runs:
 * Anthropic's short ids, OpenRouter's bare ids. */
static void S_model_id(const char *provider, const char *m, size_t n, char out[256])
{
    static const struct {
        const char *from, *to;
    } anthropic[] = {{"opus-4.6", "claude-opus-4-6"},
                     {"opus-4.5", "claude-opus-4-5"},
                     {"sonnet-4.6", "claude-sonnet-4-6"},
                     {"sonnet-4.5", "claude-sonnet-4-5"}};
    while (n && isspace((unsigned char)*m))
        m++, n--;
    while (n && isspace((unsigned char)m[n - 1]))
        n--;
    snprintf(out, 256, "%.*s", (int)CM_MIN(n, (size_t)255), m);
    if (!strcmp(provider, "anthropic")) {
        for (size_t i = 0; i < ARRAY_LEN(anthropic); i++)
            if (!strcasecmp(out, anthropic[i].from)) snprintf(out, 256, "%s", anthropic[i].to);
    } else if (!strcmp(provider, "openrouter") && !memchr(m, '/', n)) {
        snprintf(out, 256, "openrouter/%.*s", (int)CM_MIN(n, (size_t)200), m);
    }
}

/* 2026.3.22 parseModelRef of raw[0..n): false for "", "p/" and "/m". */
static bool S_parse(const char *raw, size_t n, const char *defprov, model_ref *out)
{
    while (n && isspace((unsigned char)*raw))
        raw++, n--;
    while (n && isspace((unsigned char)raw[n - 1]))
        n--;
    if (!n) return false;
    const char *slash = memchr(raw, '/', n);
    if (!slash) {
        S_provider(defprov, strlen(defprov), out->provider);
        S_model_id(out->provider, raw, n, out->model);
    } else {
        S_provider(raw, (size_t)(slash - raw), out->provider);
        S_model_id(out->provider, slash + 1, n - (size_t)(slash + 1 - raw), out->model);
    }
    return out->provider[0] && out->model[0];
}

static bool S_same(const model_ref *a, const model_ref *b)
{
    char ka[400], kb[400];
    cm_model_key(a, ka);
    cm_model_key(b, kb);
    return !strcmp(ka, kb);
}

void cm_model_key(const model_ref *m, char out[400])
{
    size_t pl = strlen(m->provider);
    if (!pl || (!strncasecmp(m->model, m->provider, pl) && m->model[pl] == '/'))
        snprintf(out, 400, "%s", m->model);
    else if (!m->model[0])
        snprintf(out, 400, "%s", m->provider);
    else
        snprintf(out, 400, "%s/%s", m->provider, m->model);
}

void cm_model_provider_norm(const char *p, char out[128])
{
    S_provider(p ? p : "", p ? strlen(p) : 0, out);
}

bool cm_model_default(const model_rules *r, model_ref *out)
{
    const char *c = r->chain ? r->chain : "";
    memset(out, 0, sizeof *out);
    return S_parse(c, strcspn(c, ","), "openai", out);
}

static const json_t *S_models(const model_rules *r)
{
    const json_t *m =
        json_object_get(json_object_get(json_object_get(r->root, "agents"), "defaults"), "models");
    return json_is_object(m) ? m : NULL;
}

/* The alias raw names (no '/', any case; the last configured wins, as a
 * Map's set does), its model into out and its text into alias. */
static bool S_alias(const model_rules *r, const char *defprov, const char *raw, size_t n,
                    model_ref *out, char *alias)
{
    const char *k;
    json_t *v;
    bool hit = false;
    json_object_foreach((json_t *)S_models(r), k, v)
    {
        const char *a = json_string_value(json_object_get(v, "alias"));
        model_ref m;
        if (!a) continue;
        while (isspace((unsigned char)*a))
            a++;
        size_t al = strlen(a);
        while (al && isspace((unsigned char)a[al - 1]))
            al--;
        if (!al || al != n || strncasecmp(a, raw, n) || !S_parse(k, strlen(k), defprov, &m))
            continue;
        *out = m;
        if (alias) snprintf(alias, 128, "%.*s", (int)CM_MIN(al, (size_t)127), a);
        hit = true;
    }
    return hit;
}

/* Whether m may be selected (2026.3.22's buildAllowedModelSet): anything
 * without an allowlist — where the reference also wants the model in its
 * catalog, which is pi-ai's built-in list clawmem does not carry — else
 * the allowlist's models, the chain's and the default. */
static bool S_allowed(const model_rules *r, const char *defprov, const model_ref *m)
{
    const json_t *list = S_models(r);
    if (!list || !json_object_size(list)) return true;
    const char *k;
    json_t *v;
    model_ref x;
    json_object_foreach((json_t *)list, k, v)
    {
        if (S_parse(k, strlen(k), defprov, &x) && S_same(&x, m)) return true;
    }
    for (const char *c = r->chain ? r->chain : ""; *c;) {
        size_t n = strcspn(c, ",");
        if (S_parse(c, n, defprov, &x) && S_same(&x, m)) return true;
        c += n + (c[n] == ',');
    }
    return false;
}

void cm_model_split_profile(const char *raw, char *model, size_t model_cap, char *profile,
                            size_t profile_cap)
{
    const char *slash = strrchr(raw, '/');
    const char *at = strchr(slash ? slash + 1 : raw, '@');
    profile[0] = 0;
    if (at && strspn(at + 1, "0123456789") == 8 && (!at[9] || at[9] == '@'))
        at = at[9] ? at + 9 : NULL; /* a version: the profile's '@' is the next one */
    const char *m = raw, *me = at ? at : raw + strlen(raw), *p = at ? at + 1 : "";
    while (isspace((unsigned char)*m))
        m++;
    while (me > m && isspace((unsigned char)me[-1]))
        me--;
    while (isspace((unsigned char)*p))
        p++;
    size_t pl = strlen(p);
    while (pl && isspace((unsigned char)p[pl - 1]))
        pl--;
    if (at && (at == raw || me == m || !pl)) { /* "@x", "x@": no profile */
        me = raw + strlen(raw);
        pl = 0;
    }
    snprintf(model, model_cap, "%.*s", (int)(me - m), m);
    snprintf(profile, profile_cap, "%.*s", (int)pl, p);
}

/* 2026.3.22's boundedLevenshteinDistance: the edit distance of a and b,
 * or -1 when it is over max. */
static int S_distance(const char *a, const char *b, int max)
{
    size_t al = strlen(a), bl = strlen(b);
    if (!strcmp(a, b)) return 0;
    if (!al || !bl || (al > bl ? al - bl : bl - al) > (size_t)max || bl > 255) return -1;
    int prev[256], cur[256];
    for (size_t j = 0; j <= bl; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= al; i++) {
        cur[0] = (int)i;
        int low = cur[0];
        for (size_t j = 1; j <= bl; j++) {
            int c = prev[j - 1] + (a[i - 1] != b[j - 1]);
            cur[j] = CM_MIN(CM_MIN(prev[j] + 1, cur[j - 1] + 1), c);
            low = CM_MIN(low, cur[j]);
        }
        if (low > max) return -1;
        memcpy(prev, cur, (bl + 1) * sizeof *prev);
    }
    return prev[bl] > max ? -1 : prev[bl];
}

/* How well fragment f names a model: the score of 2026.3.22's
 * scoreFuzzyMatch, and what breaks its ties. */
typedef struct fuzzy_score {
    int score, variant_match, variants;
    bool is_default;
    size_t len;
    char key[400];
} fuzzy_score;

static int S_part(const char *value, const char *f, int exact, int starts, int includes)
{
    if (!strcmp(value, f)) return exact;
    if (!strncmp(value, f, strlen(f))) return starts;
    return strstr(value, f) ? includes : 0;
}

static void S_score(const model_rules *r, const char *defprov, const model_ref *def,
                    const model_ref *m, const char *f, fuzzy_score *s)
{
    static const char *const variants[] = {"lightning", "preview", "mini",  "fast", "turbo",
                                           "lite",      "beta",    "small", "nano"};
    char ml[256], hay[400];
    size_t k = 0;
    for (; m->model[k] && k < sizeof ml - 1; k++)
        ml[k] = (char)tolower((unsigned char)m->model[k]);
    ml[k] = 0;
    snprintf(hay, sizeof hay, "%s/%s", m->provider, ml);
    memset(s, 0, sizeof *s);
    s->score = S_part(hay, f, 220, 140, 110) + S_part(m->provider, f, 180, 120, 90) +
               S_part(ml, f, 160, 110, 80);
    int d = S_distance(f, ml, 3);
    if (d >= 0) s->score += (3 - d) * 70;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)S_models(r), key, v)
    {
        const char *a = json_string_value(json_object_get(v, "alias"));
        model_ref x;
        char al[128];
        size_t n = 0;
        while (a && isspace((unsigned char)*a))
            a++;
        for (; a && a[n] && n < sizeof al - 1; n++)
            al[n] = (char)tolower((unsigned char)a[n]);
        while (n && isspace((unsigned char)al[n - 1]))
            n--;
        al[n] = 0;
        if (n && S_parse(key, strlen(key), defprov, &x) && S_same(&x, m))
            s->score += S_part(al, f, 140, 90, 60);
    }
    if (!strncmp(ml, m->provider, strlen(m->provider))) s->score += 30;
    int fv = 0;
    for (size_t i = 0; i < ARRAY_LEN(variants); i++) {
        bool in_f = strstr(f, variants[i]), in_m = strstr(ml, variants[i]);
        fv += in_f;
        s->variants += in_m;
        s->variant_match += in_f && in_m;
    }
    if (!fv && s->variants)
        s->score -= s->variants * 30;
    else if (fv)
        s->score += s->variant_match ? s->variant_match * 40 : -20;
    s->is_default = !strcmp(m->provider, def->provider) && !strcmp(m->model, def->model);
    if (s->is_default) s->score += 20;
    s->len = strlen(ml);
    cm_model_key(m, s->key);
}

/* Whether a ranks before b (the reference's sort). */
static bool S_before(const fuzzy_score *a, const fuzzy_score *b)
{
    if (a->score != b->score) return a->score > b->score;
    if (a->is_default != b->is_default) return a->is_default;
    if (a->variant_match != b->variant_match) return a->variant_match > b->variant_match;
    if (a->variants != b->variants) return a->variants < b->variants;
    if (a->len != b->len) return a->len < b->len;
    return strcmp(a->key, b->key) < 0;
}

/* 2026.3.22's fuzzy pick among the allowed models (the allowlist's, the
 * chain's; the aliases' are among them): the best one for fragment frag
 * (of provider prov when not NULL) if it scores 120 (90 with a provider)
 * or more. */
static bool S_fuzzy(const model_rules *r, const char *defprov, const char *prov, const char *frag,
                    model_ref *out)
{
    char f[256];
    size_t k = 0;
    while (isspace((unsigned char)*frag))
        frag++;
    for (; frag[k] && k < sizeof f - 1; k++)
        f[k] = (char)tolower((unsigned char)frag[k]);
    while (k && isspace((unsigned char)f[k - 1]))
        k--;
    f[k] = 0;
    if (!f[0]) return false;
    model_ref def, m;
    if (!cm_model_default(r, &def)) memset(&def, 0, sizeof def);
    fuzzy_score best = {.score = -1000000}, s;
    bool hit = false;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)S_models(r), key, v)
    {
        if (!S_parse(key, strlen(key), defprov, &m) || (prov && strcmp(m.provider, prov))) continue;
        S_score(r, defprov, &def, &m, f, &s);
        if (!hit || S_before(&s, &best)) *out = m, best = s, hit = true;
    }
    for (const char *c = r->chain ? r->chain : ""; *c;) {
        size_t n = strcspn(c, ",");
        if (S_parse(c, n, defprov, &m) && (!prov || !strcmp(m.provider, prov))) {
            S_score(r, defprov, &def, &m, f, &s);
            if (!hit || S_before(&s, &best)) *out = m, best = s, hit = true;
        }
        c += n + (c[n] == ',');
    }
    return hit && best.score >= (prov ? 90 : 120);
}

model_pick_rc cm_model_pick(const model_rules *r, const char *raw, bool fuzzy, model_ref *out,
                            char *alias, bool *is_default)
{
    model_ref def;
    char defprov[128] = "openai";
    bool has_def = cm_model_default(r, &def);
    if (has_def) snprintf(defprov, sizeof defprov, "%s", def.provider);
    memset(out, 0, sizeof *out);
    if (alias) alias[0] = 0;
    *is_default = false;
    while (raw && isspace((unsigned char)*raw))
        raw++;
    size_t n = raw ? strlen(raw) : 0;
    while (n && isspace((unsigned char)raw[n - 1]))
        n--;
    if (!n) return MODEL_UNRECOGNIZED;
    char whole[512], text[512], profile[256];
    snprintf(whole, sizeof whole, "%.*s", (int)CM_MIN(n, sizeof whole - 1), raw);
    cm_model_split_profile(whole, text, sizeof text, profile, sizeof profile);
    char *slash = strchr(text, '/');
    bool resolved = (!slash && S_alias(r, defprov, text, strlen(text), out, alias)) ||
                    S_parse(text, strlen(text), defprov, out);
    bool near = false;
    /* not allowed as named: the allowed model the words come closest to.
     * Without an allowlist everything is allowed: the reference also wants
     * the model in its catalog (pi-ai's built-in list, which clawmem does
     * not carry) and looks for the closest in it. */
    if (!resolved || !S_allowed(r, defprov, out)) {
        const json_t *list = fuzzy ? S_models(r) : NULL;
        model_ref named = *out;
        if (list && json_object_size(list) && resolved && slash) {
            char prov[128];
            *slash = 0;
            cm_model_provider_norm(text, prov);
            *slash = '/';
            near = S_fuzzy(r, defprov, prov, slash + 1, out);
        }
        if (!near && list && json_object_size(list)) near = S_fuzzy(r, defprov, NULL, text, out);
        if (!near) {
            *out = named;
            return resolved ? MODEL_NOT_ALLOWED : MODEL_UNRECOGNIZED;
        }
    }
    if (near && alias) { /* a fuzzy pick is labelled with its first alias */
        buf al = BUF_INIT;
        if (!cm_model_aliases(r, out, &al))
            snprintf(alias, 128, "%.*s", (int)CM_MIN(strcspn(al.data, ","), (size_t)127), al.data);
        cm_buf_release(&al);
    }
    *is_default = has_def && !strcmp(out->provider, def.provider) && !strcmp(out->model, def.model);
    return MODEL_PICKED;
}

cm_rc cm_model_aliases(const model_rules *r, const model_ref *m, buf *out)
{
    model_ref def, x;
    char defprov[128] = "openai";
    if (cm_model_default(r, &def)) snprintf(defprov, sizeof defprov, "%s", def.provider);
    cm_buf_reset(out);
    cm_rc rc = cm_buf_adds(out, "");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)S_models(r), k, v)
    {
        const char *a = json_string_value(json_object_get(v, "alias"));
        while (a && isspace((unsigned char)*a))
            a++;
        size_t al = a ? strlen(a) : 0;
        while (al && isspace((unsigned char)a[al - 1]))
            al--;
        if (rc || !al || !S_parse(k, strlen(k), defprov, &x) || !S_same(&x, m)) continue;
        rc = cm_buf_printf(out, "%s%.*s", out->len ? ", " : "", (int)al, a);
    }
    return rc;
}

/* Adds m's id under its provider in cat (once). */
static void S_add(json_t *cat, const model_ref *m)
{
    json_t *ids = json_object_get(cat, m->provider);
    if (!ids) json_object_set_new(cat, m->provider, ids = json_array());
    size_t i;
    json_t *v;
    json_array_foreach(ids, i, v)
    {
        if (!strcmp(json_string_value(v), m->model)) return;
    }
    json_array_append_new(ids, json_string(m->model));
}

static void S_add_raw(const model_rules *r, const char *defprov, json_t *cat, const char *raw)
{
    model_ref m;
    if (raw && !memchr(raw, '/', strlen(raw)) && S_alias(r, defprov, raw, strlen(raw), &m, NULL))
        S_add(cat, &m);
    else if (raw && S_parse(raw, strlen(raw), defprov, &m))
        S_add(cat, &m);
}

static int S_cmp(const void *a, const void *b)
{
    return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

/* Sorts an array of strings in place (as JavaScript's toSorted does for
 * ASCII). */
static void S_sort(json_t *arr)
{
    size_t n = json_array_size(arr);
    json_t **items = n ? malloc(n * sizeof *items) : NULL;
    if (!items) return;
    for (size_t j = 0; j < n; j++)
        items[j] = json_incref(json_array_get(arr, j));
    qsort(items, n, sizeof *items, S_cmp);
    json_array_clear(arr);
    for (size_t j = 0; j < n; j++)
        json_array_append_new(arr, items[j]);
    free(items);
}

json_t *cm_model_catalog(const model_rules *r)
{
    model_ref def, m;
    char defprov[128] = "openai";
    bool has_def = cm_model_default(r, &def);
    if (has_def) snprintf(defprov, sizeof defprov, "%s", def.provider);
    json_t *cat = json_object();
    if (!cat) return NULL;
    /* the configured catalog, the allowed part of it when there is an allowlist */
    const char *p, *k;
    json_t *pv, *v;
    size_t i;
    json_object_foreach((json_t *)json_object_get(json_object_get(r->root, "models"), "providers"),
                        p, pv)
    {
        json_array_foreach(json_object_get(pv, "models"), i, v)
        {
            const char *id = json_string_value(json_object_get(v, "id"));
            if (!id || !*id) continue;
            S_provider(p, strlen(p), m.provider);
            snprintf(m.model, sizeof m.model, "%s", id);
            if (m.provider[0] && S_allowed(r, defprov, &m)) S_add(cat, &m);
        }
    }
    json_object_foreach((json_t *)S_models(r), k, v)
    {
        S_add_raw(r, defprov, cat, k);
    }
    if (has_def) S_add(cat, &def);
    /* the model config: the chain, the image model and its fallbacks */
    for (const char *c = r->chain ? r->chain : ""; *c;) {
        size_t n = strcspn(c, ",");
        if (S_parse(c, n, defprov, &m)) S_add(cat, &m);
        c += n + (c[n] == ',');
    }
    const json_t *im = json_object_get(
        json_object_get(json_object_get(r->root, "agents"), "defaults"), "imageModel");
    S_add_raw(r, defprov, cat, json_string_value(im));
    S_add_raw(r, defprov, cat, json_string_value(json_object_get(im, "primary")));
    json_array_foreach(json_object_get(im, "fallbacks"), i, v)
    {
        S_add_raw(r, defprov, cat, json_string_value(v));
    }
    json_object_foreach(cat, k, v)
    {
        S_sort(v);
    }
    /* the providers sorted too: a new object made in that order */
    json_t *names = json_array(), *out = json_object();
    json_object_foreach(cat, k, v)
    {
        json_array_append_new(names, json_string(k));
    }
    S_sort(names);
    json_array_foreach(names, i, v)
    {
        const char *name = json_string_value(v);
        json_object_set(out, name, json_object_get(cat, name));
    }
    json_decref(names);
    json_decref(cat);
    return out;
}

/* The trimmed string member k of e ("" when none). */
static const char *S_trim(const json_t *e, const char *k, char out[320])
{
    const char *s = json_string_value(json_object_get(e, k));
    while (s && isspace((unsigned char)*s))
        s++;
    size_t n = s ? strlen(s) : 0;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    snprintf(out, 320, "%.*s", (int)CM_MIN(n, (size_t)319), s ? s : "");
    return out;
}

json_t *cm_model_override_patch(const json_t *entry, const model_ref *sel, bool is_default,
                                const char *profile)
{
    json_t *p = json_object();
    if (!p) return NULL;
    const char *po = json_string_value(json_object_get(entry, "providerOverride"));
    const char *mo = json_string_value(json_object_get(entry, "modelOverride"));
    bool changed = false;
    if (is_default) {
        if (po && *po) json_object_set_new(p, "providerOverride", json_null());
        if (mo && *mo) json_object_set_new(p, "modelOverride", json_null());
    } else {
        if (!po || strcmp(po, sel->provider))
            json_object_set_new(p, "providerOverride", json_string(sel->provider));
        if (!mo || strcmp(mo, sel->model))
            json_object_set_new(p, "modelOverride", json_string(sel->model));
    }
    changed = json_object_size(p) > 0;
    /* the last run's model, when it is not the one selected now */
    char rm[320], rp[320];
    S_trim(entry, "model", rm);
    S_trim(entry, "modelProvider", rp);
    bool present = rm[0] || rp[0];
    bool aligned = !strcmp(rm, sel->model) && (!rp[0] || !strcmp(rp, sel->provider));
    if (present && (changed || !aligned)) {
        if (json_object_get(entry, "model")) json_object_set_new(p, "model", json_null());
        if (json_object_get(entry, "modelProvider"))
            json_object_set_new(p, "modelProvider", json_null());
    }
    if (json_object_get(entry, "contextTokens") && (changed || (present && !aligned)))
        json_object_set_new(p, "contextTokens", json_null());
    /* the auth profile named with the model is pinned; none: the pin goes */
    static const char *const auth[] = {"authProfileOverride", "authProfileOverrideSource"};
    const char *want[] = {profile && *profile ? profile : NULL, "user"};
    for (size_t i = 0; i < ARRAY_LEN(auth); i++) {
        const char *s = json_string_value(json_object_get(entry, auth[i]));
        if (want[0] && (!s || strcmp(s, want[i])))
            json_object_set_new(p, auth[i], json_string(want[i]));
        else if (!want[0] && s && *s)
            json_object_set_new(p, auth[i], json_null());
    }
    if (json_object_get(entry, "authProfileOverrideCompactionCount"))
        json_object_set_new(p, "authProfileOverrideCompactionCount", json_null());
    if (json_object_size(p)) {
        static const char *const notice[] = {"fallbackNoticeSelectedModel",
                                             "fallbackNoticeActiveModel", "fallbackNoticeReason"};
        for (size_t i = 0; i < ARRAY_LEN(notice); i++)
            if (json_object_get(entry, notice[i])) json_object_set_new(p, notice[i], json_null());
    }
    return p;
}
