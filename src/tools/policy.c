/*
 * policy.c — the tool catalogue and tools.profile/allow/alsoAllow/deny
 * (policy.h), with the reference's groups, aliases and globs.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

#define M TOOL_PROFILE_MINIMAL
#define C TOOL_PROFILE_CODING
#define G TOOL_PROFILE_MESSAGING

static const tool_catalog_entry catalog[] = {
    {"read", "fs", C, false},
    {"write", "fs", C, false},
    {"edit", "fs", C, false},
    {"apply_patch", "fs", C, false},
    {"exec", "runtime", C, false},
    {"process", "runtime", C, false},
    {"web_search", "web", C, true},
    {"web_fetch", "web", C, true},
    {"memory_search", "memory", C, true},
    {"memory_get", "memory", C, true},
    {"memory_write", "memory", C, true}, /* clawmem's own */
    {"sessions_list", "sessions", C | G, true},
    {"sessions_history", "sessions", C | G, true},
    {"sessions_send", "sessions", C | G, true},
    {"sessions_spawn", "sessions", C, true},
    {"sessions_yield", "sessions", C, true},
    {"subagents", "sessions", C, true},
    {"session_status", "sessions", M | C | G, true},
    {"browser", "ui", 0, true},
    {"canvas", "ui", 0, true},
    {"message", "messaging", G, true},
    {"cron", "automation", C, true},
    {"gateway", "automation", 0, true},
    {"nodes", "nodes", 0, true},
    {"agents_list", "agents", 0, true},
    {"image", "media", C, true},
    {"image_generate", "media", C, true},
    {"tts", "media", 0, true},
};

#undef M
#undef C
#undef G

const tool_catalog_entry *cm_tool_catalog(size_t *n)
{
    *n = sizeof catalog / sizeof catalog[0];
    return catalog;
}

bool cm_tool_glob_match(const char *p, const char *s)
{
    /* iterative matching with one backtrack point: linear in practice */
    const char *star = NULL, *mark = NULL;
    while (*s) {
        if (*p == '*') {
            star = p++;
            mark = s;
        } else if (*p == *s) {
            p++;
            s++;
        } else if (star) {
            p = star + 1;
            s = ++mark;
        } else {
            return false;
        }
    }
    while (*p == '*')
        p++;
    return *p == 0;
}

static void layer_release(tool_layer *l)
{
    for (size_t i = 0; i < l->nallow; i++)
        free(l->allow[i]);
    for (size_t i = 0; i < l->ndeny; i++)
        free(l->deny[i]);
    free(l->allow);
    free(l->deny);
    memset(l, 0, sizeof *l);
}

void cm_tool_policy_release(tool_policy *p)
{
    for (size_t i = 0; i < 3; i++)
        layer_release(&p->layer[i]);
}

static cm_rc push(char ***v, size_t *n, const char *s, size_t len)
{
    for (size_t i = 0; i < *n; i++) /* a set, as the reference's */
        if (strlen((*v)[i]) == len && !strncmp((*v)[i], s, len)) return CM_OK;
    char **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv) return CM_ENOMEM;
    *v = nv;
    char *c = malloc(len + 1);
    if (!c) return CM_ENOMEM;
    memcpy(c, s, len);
    c[len] = 0;
    nv[(*n)++] = c;
    return CM_OK;
}

/* Adds one configured name: trimmed, lower-cased, aliased, a group expanded. */
static cm_rc add_name(char ***v, size_t *n, const char *raw)
{
    char name[128];
    while (isspace((unsigned char)*raw))
        raw++;
    size_t len = strlen(raw);
    while (len && isspace((unsigned char)raw[len - 1]))
        len--;
    if (!len || len >= sizeof name) return CM_OK; /* empty: ignored, as the reference does */
    for (size_t i = 0; i < len; i++)
        name[i] = (char)tolower((unsigned char)raw[i]);
    name[len] = 0;
    if (!strcmp(name, "bash")) return push(v, n, "exec", 4);
    if (!strcmp(name, "apply-patch")) return push(v, n, "apply_patch", 11);
    if (!strncmp(name, "group:", 6)) {
        size_t nc;
        const tool_catalog_entry *c = cm_tool_catalog(&nc);
        bool all = !strcmp(name + 6, "openclaw"), known = all;
        for (size_t i = 0; i < nc; i++)
            if (all ? c[i].in_openclaw_group : !strcmp(c[i].section, name + 6)) {
                known = true;
                cm_rc rc = push(v, n, c[i].name, strlen(c[i].name));
                if (rc) return rc;
            }
        if (known) return CM_OK;
    }
    return push(v, n, name, len);
}

static cm_rc add_list(char ***v, size_t *n, const json_t *arr)
{
    size_t i;
    const json_t *x;
    json_array_foreach(arr, i, x)
    {
        if (!json_is_string(x)) continue;
        cm_rc rc = add_name(v, n, json_string_value(x));
        if (rc) return rc;
    }
    return CM_OK;
}

/* {allow, alsoAllow, deny} of one config object into l: alsoAllow joins allow
 * (with "*" when there is no allow list, so it only adds). */
static cm_rc layer_from(tool_layer *l, const json_t *t)
{
    cm_rc rc = CM_OK;
    const json_t *allow = json_object_get(t, "allow"), *also = json_object_get(t, "alsoAllow"),
                 *deny = json_object_get(t, "deny");
    bool has_also = json_is_array(also) && json_array_size(also) > 0;
    if (json_is_array(allow) && json_array_size(allow) > 0) {
        l->has_allow = true;
        if ((rc = add_list(&l->allow, &l->nallow, allow))) return rc;
        if (has_also && (rc = add_list(&l->allow, &l->nallow, also))) return rc;
    } else if (has_also) {
        l->has_allow = true;
        if ((rc = push(&l->allow, &l->nallow, "*", 1))) return rc;
        if ((rc = add_list(&l->allow, &l->nallow, also))) return rc;
    }
    if (json_is_array(deny)) rc = add_list(&l->deny, &l->ndeny, deny);
    return rc;
}

static cm_rc profile_layer(tool_layer *l, const char *profile)
{
    unsigned bit = !profile                       ? 0
                   : !strcmp(profile, "minimal")   ? TOOL_PROFILE_MINIMAL
                   : !strcmp(profile, "coding")    ? TOOL_PROFILE_CODING
                   : !strcmp(profile, "messaging") ? TOOL_PROFILE_MESSAGING
                                                   : 0;
    if (!bit) return CM_OK; /* full, none or unknown: no restriction */
    size_t nc;
    const tool_catalog_entry *c = cm_tool_catalog(&nc);
    l->has_allow = true;
    for (size_t i = 0; i < nc; i++)
        if (c[i].profiles & bit) {
            cm_rc rc = push(&l->allow, &l->nallow, c[i].name, strlen(c[i].name));
            if (rc) return rc;
        }
    return CM_OK;
}

static const json_t *agent_entry(const json_t *root, const char *agent_id)
{
    const json_t *list = json_object_get(json_object_get(root, "agents"), "list");
    size_t i;
    const json_t *a;
    json_array_foreach(list, i, a)
    {
        const char *id = json_string_value(json_object_get(a, "id"));
        if (id && agent_id && !strcasecmp(id, agent_id)) return a;
    }
    return NULL;
}

cm_rc cm_tool_policy_init(tool_policy *p, const json_t *root, const char *agent_id)
{
    cm_rc rc = CM_OK;
    memset(p, 0, sizeof *p);
    const json_t *global = json_object_get(root, "tools");
    const json_t *mine = json_object_get(agent_entry(root, agent_id), "tools");
    const char *profile = json_string_value(json_object_get(mine, "profile"));
    if (!profile) profile = json_string_value(json_object_get(global, "profile"));
    if ((rc = profile_layer(&p->layer[0], profile))) goto out;
    if (p->layer[0].has_allow) {
        /* a profile's list grows by alsoAllow (the agent's, else the global
         * one) and by the tools of a configured tools.exec / tools.fs section */
        const json_t *also = json_object_get(mine, "alsoAllow");
        if (!json_is_array(also)) also = json_object_get(global, "alsoAllow");
        if (json_is_array(also) && (rc = add_list(&p->layer[0].allow, &p->layer[0].nallow, also)))
            goto out;
        static const char *const implicit[][4] = {{"exec", "exec", "process", NULL},
                                                  {"fs", "read", "write", "edit"}};
        for (size_t i = 0; i < 2; i++) {
            const json_t *a = json_object_get(mine, implicit[i][0]),
                         *g = json_object_get(global, implicit[i][0]);
            if ((!a || json_is_null(a)) && (!g || json_is_null(g))) continue;
            for (size_t k = 1; k < 4 && implicit[i][k]; k++)
                if ((rc = add_name(&p->layer[0].allow, &p->layer[0].nallow, implicit[i][k])))
                    goto out;
        }
    }
    if (json_is_object(global) && (rc = layer_from(&p->layer[1], global))) goto out;
    if (json_is_object(mine) && (rc = layer_from(&p->layer[2], mine))) goto out;
out:
    if (rc) cm_tool_policy_release(p);
    return rc;
}

static bool any(char *const *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (cm_tool_glob_match(v[i], name)) return true;
    return false;
}

bool cm_tool_policy_allows(const tool_policy *p, const char *name)
{
    char lower[128];
    size_t n = strlen(name);
    if (n >= sizeof lower) return false;
    for (size_t i = 0; i <= n; i++)
        lower[i] = (char)tolower((unsigned char)name[i]);
    for (size_t i = 0; i < 3; i++) {
        const tool_layer *l = &p->layer[i];
        if (any(l->deny, l->ndeny, lower)) return false;
        if (!l->has_allow || any(l->allow, l->nallow, lower)) continue;
        /* apply_patch is allowed wherever exec is */
        if (!strcmp(lower, "apply_patch") && any(l->allow, l->nallow, "exec")) continue;
        return false;
    }
    return true;
}
