/*
 * run_meta.c — a run's thinking level, context tokens and cost from the
 * config (run_meta.h).
 */
#include <strings.h>

#include "../auth/auth.h"
#include "run_meta.h"

#define CONTEXT_TOKENS_DEFAULT 200000

static json_t *path_get(const json_t *o, const char *a, const char *b, const char *c)
{
    json_t *v = json_object_get(o, a);
    if (b) v = json_object_get(v, b);
    if (c) v = json_object_get(v, c);
    return v;
}

/* models.providers.<provider of model>.models[] entry of model, or NULL
 * (the provider named as the runner matches it: normalised). */
static const json_t *model_def(const json_t *cfg, const char *model)
{
    const char *slash = model ? strchr(model, '/') : NULL;
    if (!slash) return NULL;
    char want[128], have[128], prov[128];
    snprintf(prov, sizeof prov, "%.*s", (int)(slash - model), model);
    cm_auth_provider_norm(prov, want, sizeof want);
    const char *key;
    json_t *pc;
    json_object_foreach(path_get(cfg, "models", "providers", NULL), key, pc)
    {
        cm_auth_provider_norm(key, have, sizeof have);
        if (strcmp(have, want)) continue;
        size_t i;
        json_t *m;
        json_array_foreach(json_object_get(pc, "models"), i, m)
        {
            const char *id = json_string_value(json_object_get(m, "id"));
            if (id && !strcmp(id, slash + 1)) return m;
        }
    }
    return NULL;
}

static const char *const levels[] = {"off", "minimal", "low", "medium", "high", "xhigh", NULL};

/* The canonical level named by s (adaptive: medium), or NULL. */
static const char *level_named(const char *s)
{
    if (!s) return NULL;
    if (!strcasecmp(s, "adaptive")) return "medium";
    for (size_t i = 0; levels[i]; i++)
        if (!strcasecmp(s, levels[i])) return levels[i];
    return NULL;
}

static const char *level_of(const json_t *v)
{
    return level_named(json_string_value(v));
}

const char *cm_agent_thinking_level(const json_t *cfg, const json_t *entry, const char *model)
{
    return cm_agent_thinking_level_for(
        cfg, json_string_value(json_object_get(entry, "thinkingLevel")), model);
}

const char *cm_agent_thinking_effort(const json_t *cfg, const char *session_level,
                                     const char *model)
{
    const char *l = cm_agent_thinking_level_for(cfg, session_level, model);
    return strcmp(l, "off") ? l : NULL;
}

const char *cm_agent_thinking_level_for(const json_t *cfg, const char *session_level,
                                        const char *model)
{
    const json_t *def = model_def(cfg, model);
    bool reasoning = json_is_true(json_object_get(def, "reasoning"));
    const char *lvl = level_named(session_level);
    if (!lvl && model)
        lvl = level_of(json_object_get(
            json_object_get(
                json_object_get(path_get(cfg, "agents", "defaults", "models"), model), "params"),
            "thinking"));
    if (!lvl) lvl = level_of(path_get(cfg, "agents", "defaults", "thinkingDefault"));
    if (!lvl) lvl = reasoning ? "low" : "off";
    if (!reasoning) return "off";
    return strcmp(lvl, "xhigh") ? lvl : "high";
}

int64_t cm_agent_context_tokens(const json_t *cfg, const char *model)
{
    json_t *ct = path_get(cfg, "agents", "defaults", "contextTokens");
    if (json_is_number(ct) && json_number_value(ct) > 0) return (int64_t)json_number_value(ct);
    json_t *cw = json_object_get(model_def(cfg, model), "contextWindow");
    if (json_is_number(cw) && json_number_value(cw) > 0) return (int64_t)json_number_value(cw);
    return CONTEXT_TOKENS_DEFAULT;
}

static double rate(const json_t *cost, const char *k)
{
    json_t *v = json_object_get(cost, k);
    return json_is_number(v) && json_number_value(v) >= 0 ? json_number_value(v) : 0;
}

bool cm_agent_run_cost_parts(const json_t *cfg, const char *model, const llm_usage *u,
                             double part[4])
{
    const json_t *def = model_def(cfg, model);
    if (!def) return false;
    const json_t *c = json_object_get(def, "cost");
    part[0] = rate(c, "input") / 1e6 * (double)u->input;
    part[1] = rate(c, "output") / 1e6 * (double)u->output;
    part[2] = rate(c, "cacheRead") / 1e6 * (double)u->cache_read;
    part[3] = rate(c, "cacheWrite") / 1e6 * (double)u->cache_write;
    return true;
}

bool cm_agent_run_cost(const json_t *cfg, const char *model, const llm_usage *u, double *usd)
{
    double part[4];
    if (!cm_agent_run_cost_parts(cfg, model, u, part)) return false;
    *usd = part[0] + part[1] + part[2] + part[3];
    return true;
}
