/*
 * model_cmds.c — /model and /models (model_cmds.h) with 2026.3.22's
 * answers, in the text every channel gets (the reference's Telegram
 * button pickers are not sent).
 */
#include <ctype.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>

#include "../auth/auth.h"
#include "../base/redact.h"
#include "model_cmds.h"
#include "model_select.h"
#include "session_cmds.h"

#define PAGE_SIZE     20  /* the reference's /models page */
#define PAGE_SIZE_MAX 100 /* and the most limit= may ask */

static const char S_browse[] =
    "Use /models to list providers, or /models <provider> to list models.";

/* When text (after blanks) is name (any case) followed by the end, a blank
 * or ':', *rest points past it, the ':' and the blanks after. */
static bool S_word(const char *text, const char *name, const char **rest)
{
    const char *p = text ? text : "";
    size_t n = strlen(name);
    while (isspace((unsigned char)*p))
        p++;
    if (strncasecmp(p, name, n) || (p[n] && p[n] != ':' && !isspace((unsigned char)p[n])))
        return false;
    p += n + (p[n] == ':');
    while (isspace((unsigned char)*p))
        p++;
    *rest = p;
    return true;
}

static int64_t S_now(const agent_ctx *a)
{
    if (a->clock) return a->clock(a->clock_ctx);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The rules of a's config with the runner's chain (held in chain). */
static cm_rc S_rules(agent_ctx *a, buf *chain, model_rules *r)
{
    llm_turn probe = {NULL, false, NULL};
    r->root = a->config;
    r->chain = "";
    if (a->runner && cm_llm_runner_chain(a->runner, &probe, chain)) return CM_ENOMEM;
    if (chain->data) r->chain = chain->data;
    return CM_OK;
}

/* "provider · 🔑 <auth>" (2026.3.22's resolveProviderLabel), or the
 * provider alone when its credential is unknown. */
static cm_rc S_provider_label(agent_ctx *a, const char *prov, const json_t *e, buf *out)
{
    char auth[512] = "unknown";
    if (a->runner &&
        cm_llm_runner_auth_label(a->runner, prov,
                                 json_string_value(json_object_get(e, "authProfileOverride")), auth,
                                 sizeof auth))
        return CM_ENOMEM;
    if (!strcmp(auth, "unknown")) return cm_buf_adds(out, prov);
    return cm_buf_printf(out, "%s \xc2\xb7 \xf0\x9f\x94\x91 %s", prov, auth);
}

/* /models [provider] [page|all] [limit=n] (2026.3.22's parseModelsArgs and
 * resolveModelsCommandReply). */
static cm_rc S_models(agent_ctx *a, const model_rules *r, const json_t *e, const char *args,
                      buf *msg)
{
    char prov[128] = "";
    long page = 1, size = PAGE_SIZE;
    bool all = false;
    for (const char *p = args; *p;) {
        size_t n = strcspn(p, " \t\r\n");
        char tok[64];
        snprintf(tok, sizeof tok, "%.*s", (int)CM_MIN(n, sizeof tok - 1), p);
        for (char *c = tok; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        if (p == args) {
            cm_model_provider_norm(tok, prov);
        } else if (!strcmp(tok, "all") || !strcmp(tok, "--all")) {
            all = true;
        } else if (!strncmp(tok, "page=", 5) || (tok[0] && strspn(tok, "0123456789") == n)) {
            long v = strtol(tok + (tok[0] == 'p' ? 5 : 0), NULL, 10);
            if (v > 0) page = v;
        }
        if (!strncmp(tok, "limit=", 6) || !strncmp(tok, "size=", 5)) {
            long v = strtol(strchr(tok, '=') + 1, NULL, 10);
            if (v > 0) size = v < PAGE_SIZE_MAX ? v : PAGE_SIZE_MAX;
        }
        p += n;
        while (isspace((unsigned char)*p))
            p++;
    }
    json_t *cat = cm_model_catalog(r);
    if (!cat) return CM_ENOMEM;
    cm_rc rc = CM_OK;
    const char *k;
    json_t *v;
    if (!prov[0]) {
        rc = cm_buf_adds(msg, "Providers:");
        json_object_foreach(cat, k, v)
        {
            if (!rc) rc = cm_buf_printf(msg, "\n- %s (%zu)", k, json_array_size(v));
        }
        if (!rc)
            rc = cm_buf_adds(msg, "\n\nUse: /models <provider>\nSwitch: /model <provider/model>");
        goto out;
    }
    json_t *ids = json_object_get(cat, prov);
    if (!ids) {
        rc = cm_buf_printf(msg, "Unknown provider: %s\n\nAvailable providers:", prov);
        json_object_foreach(cat, k, v)
        {
            if (!rc) rc = cm_buf_printf(msg, "\n- %s", k);
        }
        if (!rc) rc = cm_buf_adds(msg, "\n\nUse: /models <provider>");
        goto out;
    }
    buf label = BUF_INIT;
    rc = S_provider_label(a, prov, e, &label);
    long total = (long)json_array_size(ids);
    long per = all ? total : size;
    long pages = per > 0 ? (total + per - 1) / per : 1;
    long safe = all ? 1 : page < 1 ? 1 : page > pages ? pages : page;
    if (rc) {
        /* out of memory */
    } else if (!all && page != safe) {
        rc = cm_buf_printf(msg,
                           "Page out of range: %ld (valid: 1-%ld)\n\nTry: /models %s %ld\nAll: "
                           "/models %s all",
                           page, pages, prov, safe, prov);
    } else {
        long from = (safe - 1) * per, to = CM_MIN(total, from + per);
        rc = cm_buf_printf(msg, "Models (%s) \xe2\x80\x94 showing %ld-%ld of %ld (page %ld/%ld)",
                           label.data, from + 1, to, total, safe, pages);
        for (long i = from; !rc && i < to; i++)
            rc = cm_buf_printf(msg, "\n- %s/%s", prov,
                               json_string_value(json_array_get(ids, (size_t)i)));
        if (!rc) rc = cm_buf_adds(msg, "\n\nSwitch: /model <provider/model>");
        if (!rc && !all && safe < pages)
            rc = cm_buf_printf(msg, "\nMore: /models %s %ld", prov, safe + 1);
        if (!rc && !all) rc = cm_buf_printf(msg, "\nAll: /models %s all", prov);
    }
    cm_buf_release(&label);
out:
    json_decref(cat);
    return rc;
}

/* "Current: …" and, when the last run answered with another model (a
 * fallback), "Active: … (runtime)" (2026.3.22's resolveSelectedAndActiveModel). */
static cm_rc S_current(const json_t *e, const char *model, buf *msg)
{
    const char *rm = json_string_value(json_object_get(e, "model"));
    const char *rp = json_string_value(json_object_get(e, "modelProvider"));
    const char *slash = strchr(model, '/');
    char active[320] = "";
    if (rm && *rm && rp && *rp) {
        size_t pl = strlen(rp);
        bool dup = !strncasecmp(rm, rp, pl) && rm[pl] == '/' && rm[pl + 1];
        snprintf(active, sizeof active, "%.127s/%.189s", rp, dup ? rm + pl + 1 : rm);
    } else if (rm && *rm) {
        if (strchr(rm, '/') && rm[0] != '/')
            snprintf(active, sizeof active, "%.319s", rm);
        else
            snprintf(active, sizeof active, "%.*s/%.189s", slash ? (int)(slash - model) : 0, model,
                     rm);
    }
    bool differs = active[0] && strcmp(active, model);
    cm_rc rc = cm_buf_printf(msg, "Current: %s%s", model, differs ? " (selected)" : "");
    if (!rc && differs) rc = cm_buf_printf(msg, "\nActive: %s (runtime)", active);
    return rc;
}

/* /model status: the current, default and agent, the auth file, then the
 * models by provider with each provider's endpoint, api and credential. */
static cm_rc S_status(agent_ctx *a, const model_rules *r, const json_t *e, const char *model,
                      buf *msg)
{
    model_ref def;
    buf path = BUF_INIT, aliases = BUF_INIT;
    json_t *cat = cm_model_catalog(r);
    cm_rc rc = cat ? S_current(e, model, msg) : CM_ENOMEM;
    if (!cm_model_default(r, &def)) memset(&def, 0, sizeof def);
    if (!rc) rc = cm_auth_store_path(&path, a->state_dir, a->agent_id);
    const char *home = getenv("HOME");
    size_t hl = home ? strlen(home) : 0;
    bool tilde = hl > 1 && path.data && !strncmp(path.data, home, hl) && path.data[hl] == '/';
    if (!rc)
        rc = cm_buf_printf(msg, "\nDefault: %s/%s\nAgent: %s\nAuth file: %s%s", def.provider,
                           def.model, a->agent_id ? a->agent_id : "main", tilde ? "~" : "",
                           tilde       ? path.data + hl
                           : path.data ? path.data
                                       : "");
    const char *k;
    json_t *ids;
    json_object_foreach(cat, k, ids)
    {
        const json_t *pc =
            json_object_get(json_object_get(json_object_get(a->config, "models"), "providers"), k);
        const char *url = json_string_value(json_object_get(pc, "baseUrl"));
        const char *api = json_string_value(json_object_get(pc, "api"));
        char auth[512] = "unknown", shown[512] = "default";
        /* as a message may show a URL: a key in its userinfo or query stays out */
        if (url && *url) cm_redact_url_to(url, shown, sizeof shown);
        if (!rc && a->runner &&
            cm_llm_runner_auth_label(a->runner, k,
                                     json_string_value(json_object_get(e, "authProfileOverride")),
                                     auth, sizeof auth))
            rc = CM_ENOMEM;
        if (!rc)
            rc = cm_buf_printf(msg, "\n\n[%s] endpoint: %s%s%s auth: %s", k, shown,
                               api && *api ? " api: " : "", api && *api ? api : "", auth);
        size_t i;
        json_t *id;
        json_array_foreach(ids, i, id)
        {
            model_ref m;
            snprintf(m.provider, sizeof m.provider, "%s", k);
            snprintf(m.model, sizeof m.model, "%s", json_string_value(id));
            if (!rc) rc = cm_model_aliases(r, &m, &aliases);
            if (!rc)
                rc = cm_buf_printf(msg, "\n  \xe2\x80\xa2 %s/%s%s%s%s", k, m.model,
                                   aliases.len ? " (" : "", aliases.len ? aliases.data : "",
                                   aliases.len ? ")" : "");
        }
    }
    json_decref(cat);
    cm_buf_release(&path);
    cm_buf_release(&aliases);
    return rc;
}

/* Why profile may not be pinned with a model of provider (the reference's
 * resolveProfileOverride), into why; "" when it may. */
static void S_profile_check(agent_ctx *a, const char *profile, const char *provider, buf *why)
{
    auth_store st = {0};
    char err[256];
    const char *of = NULL;
    if (!cm_auth_store_init(&st, a->state_dir, a->agent_id, err, sizeof err))
        of = json_string_value(json_object_get(cm_auth_profile(&st, profile), "provider"));
    cm_rc rc = !of ? cm_buf_printf(why, "Auth profile \"%s\" not found.", profile)
               : strcmp(of, provider) ? cm_buf_printf(why, "Auth profile \"%s\" is for %s, not %s.",
                                                      profile, of, provider)
                                      : CM_OK;
    if (rc) cm_buf_reset(why);
    cm_auth_store_release(&st);
}

/* /model <ref>[@profile]: the selection written to the session's entry, or
 * why not. */
static cm_rc S_set(agent_ctx *a, const model_rules *r, session_store *st, const char *full,
                   const char *raw, buf *msg, char *err, size_t errlen)
{
    model_ref m;
    char alias[128], ref[400], named[512], profile[256];
    bool is_default;
    buf why = BUF_INIT;
    if (strspn(raw, "0123456789") == strlen(raw))
        return cm_buf_adds(msg, "Numeric model selection is not supported in chat.\n\n"
                                "Browse: /models or /models <provider>\n"
                                "Switch: /model <provider/model>");
    cm_model_split_profile(raw, named, sizeof named, profile, sizeof profile);
    model_pick_rc pr = cm_model_pick(r, raw, true, &m, alias, &is_default);
    if (pr == MODEL_UNRECOGNIZED)
        return cm_buf_printf(msg, "Unrecognized model \"%.200s\". %s", named, S_browse);
    snprintf(ref, sizeof ref, "%s/%s", m.provider, m.model);
    if (pr == MODEL_NOT_ALLOWED)
        return cm_buf_printf(msg, "Model \"%s\" is not allowed. %s", ref, S_browse);
    if (profile[0]) S_profile_check(a, profile, m.provider, &why);
    if (why.len) {
        cm_rc wr = cm_buf_adds(msg, why.data);
        cm_buf_release(&why);
        return wr;
    }
    json_t *patch =
        cm_model_override_patch(cm_session_store_get(st, full), &m, is_default, profile);
    if (!patch) return CM_ENOMEM;
    cm_rc rc = json_object_size(patch)
                   ? cm_session_touch(st, full, patch, S_now(a), NULL, err, errlen)
                   : CM_OK;
    json_decref(patch);
    if (rc) return rc;
    if (alias[0])
        rc = cm_buf_printf(
            msg, is_default ? "Model reset to default (%s (%s))." : "Model set to %s (%s).", alias,
            ref);
    else
        rc = cm_buf_printf(msg, is_default ? "Model reset to default (%s)." : "Model set to %s.",
                           ref);
    if (!rc && profile[0]) rc = cm_buf_printf(msg, " Auth profile set to %s.", profile);
    return rc;
}

cm_rc cm_agent_model_override(agent_ctx *a, const json_t *e, char out[320], json_t **reset)
{
    const char *po = json_string_value(json_object_get(e, "providerOverride"));
    const char *mo = json_string_value(json_object_get(e, "modelOverride"));
    out[0] = 0;
    if (reset) *reset = NULL;
    if (!po || !*po || !mo || !*mo || strlen(po) > 127 || strlen(mo) > 189) return CM_OK;
    buf chain = BUF_INIT;
    model_rules r;
    model_ref m, def;
    char ref[320];
    bool is_default;
    cm_rc rc = S_rules(a, &chain, &r);
    snprintf(ref, sizeof ref, "%.127s/%.189s", po, mo);
    if (rc) {
        /* out of memory */
    } else if (cm_model_pick(&r, ref, false, &m, NULL, &is_default) != MODEL_NOT_ALLOWED) {
        snprintf(out, 320, "%s", ref);
    } else if (reset && cm_model_default(&r, &def) &&
               !(*reset = cm_model_override_patch(e, &def, true, NULL))) {
        rc = CM_ENOMEM;
    }
    cm_buf_release(&chain);
    return rc;
}

cm_rc cm_agent_model_command(agent_ctx *a, const char *key, const char *text, bool *handled,
                             char **reply, char *err, size_t errlen)
{
    const char *rest;
    bool list = S_word(text, "/models", &rest);
    *handled = false;
    *reply = NULL;
    if (!list && !S_word(text, "/model", &rest)) return CM_OK;
    *handled = true;
    cm_rc rc = CM_OK;
    session_store st;
    buf chain = BUF_INIT, msg = BUF_INIT;
    model_rules r;
    char full[1100], model[320], arg[512];
    size_t n = strlen(rest);
    while (n && isspace((unsigned char)rest[n - 1]))
        n--;
    snprintf(arg, sizeof arg, "%.*s", (int)CM_MIN(n, sizeof arg - 1), rest);
    rest = arg;
    CHECK(cm_agent_session_open(a, key, true, &st, full, err, errlen));
    const json_t *e = cm_session_store_get(&st, full);
    cm_agent_session_model(a, e, model);
    rc = S_rules(a, &chain, &r);
    if (!rc && !list && !strcasecmp(rest, "list")) {
        list = true;
        rest = "";
    }
    if (rc) {
        /* out of memory */
    } else if (list) {
        rc = S_models(a, &r, e, rest, &msg);
    } else if (!*rest) {
        rc = S_current(e, model, &msg);
        if (!rc)
            rc = cm_buf_adds(&msg, "\nSwitch: /model <provider/model>\n"
                                   "Browse: /models (providers) or /models <provider> (models)\n"
                                   "More: /model status");
    } else if (!strcasecmp(rest, "status")) {
        rc = S_status(a, &r, e, model, &msg);
    } else {
        rc = S_set(a, &r, &st, full, rest, &msg, err, errlen);
    }
    if (!rc && !(*reply = cm_buf_detach(&msg))) rc = CM_ENOMEM;
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_session_store_release(&st);
out:
    cm_buf_release(&chain);
    cm_buf_release(&msg);
    return rc;
}
