/*
 * known_keys.c — QuantumClaw 2026.3.22's keys in each section clawmem reads,
 * and the check that warns (file:line:col) about a key outside them: a typo
 * there is silently ignored by clawmem, so it is named instead.
 */
#include "config_int.h"

/* The keys QuantumClaw 2026.3.22's schema accepts in the sections clawmem
 * reads (zod-schema*.js of openclaw@2026.3.22): a key outside these lists is
 * a typo, warned about with its position; a listed key clawmem does not use
 * is silently accepted. */
static const char TOP_KEYS[] =
    "$schema|meta|env|wizard|diagnostics|logging|cli|update|browser|ui|secrets|auth|acp|models|"
    "nodeHost|agents|tools|bindings|broadcast|audio|media|messages|commands|approvals|session|"
    "cron|hooks|web|channels|discovery|canvasHost|talk|gateway|memory|mcp|skills|plugins";
static const char AGENTS_KEYS[] = "defaults|list";
static const char DEFAULTS_KEYS[] =
    "model|imageModel|imageGenerationModel|pdfModel|pdfMaxBytesMb|pdfMaxPages|models|workspace|"
    "repoRoot|skipBootstrap|bootstrapMaxChars|bootstrapTotalMaxChars|"
    "bootstrapPromptTruncationWarning|userTimezone|timeFormat|envelopeTimezone|"
    "envelopeTimestamp|envelopeElapsed|contextTokens|cliBackends|memorySearch|contextPruning|"
    "compaction|embeddedPi|thinkingDefault|verboseDefault|elevatedDefault|blockStreamingDefault|"
    "blockStreamingBreak|blockStreamingChunk|blockStreamingCoalesce|humanDelay|timeoutSeconds|"
    "mediaMaxMb|imageMaxDimensionPx|typingIntervalSeconds|typingMode|heartbeat|maxConcurrent|"
    "subagents|sandbox";
static const char ENTRY_KEYS[] =
    "id|default|name|workspace|agentDir|model|thinkingDefault|reasoningDefault|fastModeDefault|"
    "skills|memorySearch|humanDelay|heartbeat|identity|groupChat|subagents|sandbox|params|tools|"
    "runtime";
static const char MEMORY_KEYS[] = "backend|citations|qmd";
static const char QMD_KEYS[] =
    "command|mcporter|searchMode|includeDefaultMemory|paths|sessions|update|limits|scope";
static const char MODELS_KEYS[] = "mode|providers|bedrockDiscovery";
static const char PROVIDER_KEYS[] =
    "baseUrl|apiKey|auth|api|injectNumCtxForOpenAICompat|headers|authHeader|models";
static const char SECRETS_KEYS[] = "providers|defaults|resolution";

/* Sub-sections of memory.qmd and their keys. */
static const struct {
    const char *name, *keys;
} qmd_sections[] = {
    {"mcporter", "enabled|serverName|startDaemon"},
    {"sessions", "enabled|exportDir|retentionDays"},
    {"update", "interval|debounceMs|onBoot|waitForBootSync|embedInterval|commandTimeoutMs|"
               "updateTimeoutMs|embedTimeoutMs"},
    {"limits", "maxResults|maxSnippetChars|maxInjectedChars|timeoutMs"},
};

/* Warns about each member of obj that is neither in known nor in handled. */
static void check_keys(ctx *c, const json_t *obj, const char *path, const char *known,
                       const char *handled)
{
    const char *k;
    json_t *v;
    if (!json_is_object(obj)) return;
    json_object_foreach((json_t *)obj, k, v)
    {
        if (cm_config_in_choices(known, k) || (handled && cm_config_in_choices(handled, k)))
            continue;
        char full[512];
        snprintf(full, sizeof full, "%s%s%.200s", path, *path ? "." : "", k);
        suggest near;
        cm_suggest_init(&near, k);
        cm_suggest_add_list(&near, known);
        cm_suggest_add_list(&near, handled);
        cm_config_warn_unknown(c, obj, k, full, &near);
    }
}

void cm_config_warn_unknown(ctx *c, const json_t *obj, const char *key, const char *path,
                            const suggest *near)
{
    char best[SUGGEST_MAX_LEN + 1];
    if (cm_suggest_result(near, best, sizeof best))
        cm_config_warn(c, obj, key, 0, "unknown key %s (ignored): did you mean %s?", path, best);
    else
        cm_config_warn(c, obj, key, 0, "unknown key %s (ignored)", path);
}

/* Typos: every section clawmem reads, checked against 2026.3.22's keys. */
void cm_config_check_all(ctx *c, const json_t *root)
{
    char path[300];
    if (!json_is_object(root)) return;
    check_keys(c, root, "", TOP_KEYS, "clawmem|memorySearch");
    if (json_object_get(root, "memorySearch"))
        cm_config_warn(
            c, root, "memorySearch", 0,
            "memorySearch at the top level is not read: use agents.defaults.memorySearch");
    if (!c->overlay && json_object_get(root, "clawmem"))
        cm_config_warn(
            c, root, "clawmem", 0,
            "the clawmem section makes QuantumClaw 2026.3.22 reject this file: move it to %s "
            "(read from here for now)",
            c->overlay_path ? c->overlay_path : "<stateDir>/clawmem.json");
    const json_t *agents = json_object_get(root, "agents");
    check_keys(c, agents, "agents", AGENTS_KEYS, "entries");
    check_keys(c, json_object_get(agents, "defaults"), "agents.defaults", DEFAULTS_KEYS, NULL);
    const json_t *list = json_object_get(agents, "list"), *e;
    size_t i;
    json_array_foreach(list, i, e)
    {
        snprintf(path, sizeof path, "agents.list[%zu]", i);
        check_keys(c, e, path, ENTRY_KEYS, NULL);
    }
    const char *k;
    json_t *v;
    json_object_foreach(json_is_object(json_object_get(agents, "entries"))
                            ? json_object_get(agents, "entries")
                            : NULL,
                        k, v)
    {
        snprintf(path, sizeof path, "agents.entries.%.200s", k);
        check_keys(c, v, path, ENTRY_KEYS, "memory");
    }
    const json_t *memory = json_object_get(root, "memory");
    check_keys(c, memory, "memory", MEMORY_KEYS, "search");
    const json_t *qmd = json_object_get(memory, "qmd");
    check_keys(c, qmd, "memory.qmd", QMD_KEYS, NULL);
    for (size_t q = 0; q < ARRAY_LEN(qmd_sections); q++) {
        snprintf(path, sizeof path, "memory.qmd.%s", qmd_sections[q].name);
        check_keys(c, json_object_get(qmd, qmd_sections[q].name), path, qmd_sections[q].keys, NULL);
    }
    json_array_foreach(json_object_get(qmd, "paths"), i, e)
    {
        snprintf(path, sizeof path, "memory.qmd.paths[%zu]", i);
        check_keys(c, e, path, "path|name|pattern", NULL);
    }
    const json_t *models = json_object_get(root, "models");
    check_keys(c, models, "models", MODELS_KEYS, NULL);
    const json_t *provs = json_object_get(models, "providers");
    json_object_foreach(json_is_object(provs) ? (json_t *)provs : NULL, k, v)
    {
        snprintf(path, sizeof path, "models.providers.%.200s", k);
        check_keys(c, v, path, PROVIDER_KEYS, NULL);
    }
    /* channels.telegram.apiBaseUrl (and per account): clawmem's old name
     * for apiRoot, read still; QuantumClaw rejects the file with it */
    const json_t *tg = json_object_get(json_object_get(root, "channels"), "telegram");
    if (json_object_get(tg, "apiBaseUrl"))
        cm_config_warn(c, tg, "apiBaseUrl", 0,
                       "channels.telegram.apiBaseUrl is not a QuantumClaw 2026.3.22 key (it "
                       "rejects this file): rename it to channels.telegram.apiRoot (read for now)");
    json_object_foreach(
        json_is_object(json_object_get(tg, "accounts")) ? json_object_get(tg, "accounts") : NULL, k,
        v)
    {
        if (json_object_get(v, "apiBaseUrl"))
            cm_config_warn(c, v, "apiBaseUrl", 0,
                           "channels.telegram.accounts.%.200s.apiBaseUrl is not a QuantumClaw "
                           "2026.3.22 key (it rejects this file): rename it to "
                           "channels.telegram.accounts.%.200s.apiRoot (read for now)",
                           k, k);
    }
    /* channels.http, clawmem's HTTP channel, is no channel of QuantumClaw's:
     * it rejects the file ("unknown channel id: http") */
    const json_t *chs = json_object_get(root, "channels");
    if (!c->overlay && json_object_get(chs, "http"))
        cm_config_warn(c, chs, "http", 0,
                       "channels.http makes QuantumClaw 2026.3.22 reject this file (unknown "
                       "channel id): move it to %s (read from here for now)",
                       c->overlay_path ? c->overlay_path : "<stateDir>/clawmem.json");
    const json_t *sec = json_object_get(root, "secrets");
    check_keys(c, sec, "secrets", SECRETS_KEYS, NULL);
    check_keys(c, json_object_get(sec, "defaults"), "secrets.defaults", "env|file|exec", NULL);
}
