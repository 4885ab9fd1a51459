/*
 * session_cmds.c — /compact, /think, /reasoning and /status on one
 * session (session_cmds.h), with 2026.3.22's answers.
 */
#include <ctype.h>
#include <strings.h>
#include <time.h>

#include "../session/keys.h"
#include "../session/sessions.h"
#include "run_meta.h"
#include "model_cmds.h"
#include "session_cmds.h"
#include "../tools/status_card.h"

static int64_t S_now(const agent_ctx *a)
{
    if (a->clock) return a->clock(a->clock_ctx);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* When text (after blanks) starts with one of names (NULL-terminated, any
 * case) followed by the end, a blank or ':', *rest points past it, the ':'
 * and the blanks after. */
static bool S_word(const char *text, const char *const *names, const char **rest)
{
    const char *p = text ? text : "";
    while (isspace((unsigned char)*p))
        p++;
    for (size_t i = 0; names[i]; i++) {
        size_t n = strlen(names[i]);
        if (strncasecmp(p, names[i], n) || (p[n] && p[n] != ':' && !isspace((unsigned char)p[n])))
            continue;
        p += n + (p[n] == ':');
        while (isspace((unsigned char)*p))
            p++;
        *rest = p;
        return true;
    }
    return false;
}

/* The first word of p into out (cut to its size); its length in the text. */
static size_t S_arg(const char *p, char *out, size_t cap)
{
    size_t n = strcspn(p, " \t\r\n");
    snprintf(out, cap, "%.*s", (int)CM_MIN(n, cap - 1), p);
    return n;
}

cm_rc cm_agent_session_open(agent_ctx *a, const char *k, bool create, session_store *st,
                            char key[1100], char *err, size_t errlen)
{
    buf b = BUF_INIT;
    memset(st, 0, sizeof *st);
    if (!k || !*k || strlen(k) > 1000)
        return cm_seterr(err, errlen, CM_EINVAL, "a session key is needed");
    if (cm_session_store_key(&b, a->agent_id, k))
        return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    snprintf(key, 1100, "%s", b.data);
    cm_buf_release(&b);
    cm_rc rc = cm_session_store_read(st, a->store_path, err, errlen);
    if (!rc && create && !cm_session_store_get(st, key))
        rc = cm_session_touch(st, key, NULL, S_now(a), NULL, err, errlen);
    if (rc) cm_session_store_release(st);
    return rc;
}

void cm_agent_session_model(agent_ctx *a, const json_t *e, char out[320])
{
    if (!cm_agent_model_override(a, e, out, NULL) && out[0]) return;
    buf chain = BUF_INIT;
    llm_turn probe = {NULL, false, NULL};
    out[0] = 0;
    if (!cm_llm_runner_chain(a->runner, &probe, &chain))
        snprintf(out, 320, "%.*s", (int)CM_MIN(strcspn(chain.data, ","), 319), chain.data);
    cm_buf_release(&chain);
}

/* ---- /reasoning ----------------------------------------------------------- */

cm_rc cm_agent_session_reasoning_command(agent_ctx *a, const char *key, const char *text,
                                         bool *handled, char **reply, char *err, size_t errlen)
{
    static const char *const names[] = {"/reasoning", "/reason", NULL};
    cm_rc rc = CM_OK;
    session_store st;
    bool opened = false;
    json_t *patch = NULL;
    buf msg = BUF_INIT;
    char full[1100], arg[32];
    const char *p;
    *handled = false;
    *reply = NULL;
    if (!S_word(text, names, &p)) return CM_OK;
    size_t n = S_arg(p, arg, sizeof arg);
    *handled = true;
    CHECK(cm_agent_session_open(a, key, true, &st, full, err, errlen));
    opened = true;
    int lvl = cm_agent_reasoning_parse(arg);
    if (!arg[0]) {
        int cur = cm_agent_reasoning_parse(
            json_string_value(json_object_get(cm_session_store_get(&st, full), "reasoningLevel")));
        rc = cm_buf_printf(
            &msg, "Current reasoning level: %s.\nOptions: on, off, stream.",
            cm_agent_reasoning_name(cur < 0 ? AGENT_REASONING_OFF : (agent_reasoning)cur));
    } else if (lvl < 0) {
        rc = cm_buf_printf(&msg,
                           "Unrecognized reasoning level \"%.*s\". Valid levels: on, off, stream.",
                           (int)CM_MIN(n, (size_t)64), p);
    } else {
        patch = json_pack("{s:s}", "reasoningLevel", cm_agent_reasoning_name((agent_reasoning)lvl));
        if (!patch) FAIL(CM_ENOMEM, "out of memory");
        CHECK(cm_session_touch(&st, full, patch, S_now(a), NULL, err, errlen));
        rc = cm_buf_adds(&msg, lvl == AGENT_REASONING_OFF ? "⚙️ Reasoning visibility disabled."
                               : lvl == AGENT_REASONING_ON
                                   ? "⚙️ Reasoning visibility enabled."
                                   : "⚙️ Reasoning stream enabled (Telegram only).");
    }
    if (rc || !(*reply = cm_buf_detach(&msg))) FAIL(CM_ENOMEM, "out of memory");
out:
    if (opened) cm_session_store_release(&st);
    json_decref(patch);
    cm_buf_release(&msg);
    return rc;
}

/* ---- /think --------------------------------------------------------------- */

const char *cm_agent_think_parse(const char *arg)
{
    static const struct {
        const char *word, *level;
    } words[] = {{"off", "off"},
                 {"on", "low"},
                 {"enable", "low"},
                 {"enabled", "low"},
                 {"min", "minimal"},
                 {"minimal", "minimal"},
                 {"think", "minimal"},
                 {"low", "low"},
                 {"thinkhard", "low"},
                 {"think-hard", "low"},
                 {"think_hard", "low"},
                 {"mid", "medium"},
                 {"med", "medium"},
                 {"medium", "medium"},
                 {"thinkharder", "medium"},
                 {"think-harder", "medium"},
                 {"harder", "medium"},
                 {"high", "high"},
                 {"ultra", "high"},
                 {"ultrathink", "high"},
                 {"thinkhardest", "high"},
                 {"highest", "high"},
                 {"max", "high"}};
    char c[32];
    size_t k = 0;
    if (!arg || !*arg) return NULL;
    /* blanks, '-' and '_' dropped for adaptive/auto and xhigh/extrahigh */
    for (const char *p = arg; *p && k < sizeof c - 1; p++)
        if (!strchr(" \t-_", *p)) c[k++] = (char)tolower((unsigned char)*p);
    c[k] = 0;
    if (!strcmp(c, "adaptive") || !strcmp(c, "auto")) return "adaptive";
    if (!strcmp(c, "xhigh") || !strcmp(c, "extrahigh")) return "xhigh";
    /* the other words compare trimmed, any case (2026.3.22 normalizeThinkLevel) */
    while (*arg == ' ' || *arg == '\t')
        arg++;
    size_t n = strlen(arg);
    while (n && (arg[n - 1] == ' ' || arg[n - 1] == '\t'))
        n--;
    for (size_t i = 0; i < ARRAY_LEN(words); i++)
        if (strlen(words[i].word) == n && !strncasecmp(arg, words[i].word, n))
            return words[i].level;
    return NULL;
}

/* Whether 2026.3.22 offers "xhigh" for model ("provider/id"). */
static bool S_xhigh(const char *model)
{
    static const char *const openai[] = {"gpt-5.4",      "gpt-5.4-pro", "gpt-5.4-mini",
                                         "gpt-5.4-nano", "gpt-5.2",     NULL};
    static const char *const codex[] = {"gpt-5.4", "gpt-5.3-codex-spark", "gpt-5.2-codex",
                                        "gpt-5.1-codex", NULL};
    const char *slash = model ? strchr(model, '/') : NULL;
    if (!slash) return false;
    size_t pl = (size_t)(slash - model);
    const char *id = slash + 1;
    const char *const *ids = pl == 6 && !strncasecmp(model, "openai", 6)           ? openai
                             : pl == 12 && !strncasecmp(model, "openai-codex", 12) ? codex
                                                                                   : NULL;
    if (pl == 14 && !strncasecmp(model, "github-copilot", 14))
        return !strcasecmp(id, "gpt-5.2") || !strcasecmp(id, "gpt-5.2-codex");
    for (size_t i = 0; ids && ids[i]; i++) {
        size_t n = strlen(ids[i]);
        if (!strncasecmp(id, ids[i], n) && (!id[n] || id[n] == '-')) return true;
    }
    return false;
}

/* The levels 2026.3.22 lists for model. */
static const char *S_levels(const char *model)
{
    const char *slash = model ? strchr(model, '/') : NULL;
    if (slash && slash - model == 3 && !strncasecmp(model, "zai", 3)) return "off, on";
    return S_xhigh(model) ? "off, minimal, low, medium, high, xhigh, adaptive"
                          : "off, minimal, low, medium, high, adaptive";
}

static cm_rc S_think(agent_ctx *a, const char *key, const char *p, char **reply, char *err,
                     size_t errlen)
{
    cm_rc rc = CM_OK;
    session_store st;
    json_t *patch = NULL;
    buf msg = BUF_INIT;
    char full[1100], arg[32], model[320];
    size_t n = S_arg(p, arg, sizeof arg);
    CHECK(cm_agent_session_open(a, key, true, &st, full, err, errlen));
    const json_t *e = cm_session_store_get(&st, full);
    cm_agent_session_model(a, e, model);
    const char *lvl = cm_agent_think_parse(arg);
    if (!arg[0]) {
        const char *cur = json_string_value(json_object_get(e, "thinkingLevel"));
        if (!cur) cur = cm_agent_thinking_level_for(a->config, NULL, model);
        rc = cm_buf_printf(&msg, "Current thinking level: %s.\nOptions: %s.", cur, S_levels(model));
    } else if (!lvl) {
        rc = cm_buf_printf(&msg, "Unrecognized thinking level \"%.*s\". Valid levels: %s.",
                           (int)CM_MIN(n, (size_t)64), p, S_levels(model));
    } else if (!strcmp(lvl, "xhigh") && !S_xhigh(model)) {
        rc = cm_buf_adds(&msg, "Thinking level \"xhigh\" is only supported for provider models "
                               "that advertise xhigh reasoning.");
    } else {
        if (!(patch = json_pack("{s:s}", "thinkingLevel", lvl))) FAIL(CM_ENOMEM, "out of memory");
        rc = cm_session_touch(&st, full, patch, S_now(a), NULL, err, errlen);
        if (!rc)
            rc = !strcmp(lvl, "off") ? cm_buf_adds(&msg, "Thinking disabled.")
                                     : cm_buf_printf(&msg, "Thinking level set to %s.", lvl);
    }
    if (!rc && !(*reply = cm_buf_detach(&msg))) rc = CM_ENOMEM;
    cm_session_store_release(&st);
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    json_decref(patch);
    cm_buf_release(&msg);
    return rc;
}

/* ---- /compact ------------------------------------------------------------- */

/* What a chat is told of a compaction that failed: a short reason without
 * paths or URLs. */
static const char *S_failure(cm_rc rc)
{
    switch (rc) {
    case CM_ERATELIMIT:
        return "the model is unavailable (rate limited)";
    case CM_EAUTH:
    case CM_EBILLING:
        return "the model is unavailable";
    case CM_ETIMEOUT:
        return "the model did not answer in time";
    case CM_ETOOBIG:
        return "the conversation is too large for the model";
    default:
        return "the summary could not be written";
    }
}

static cm_rc S_compact(agent_ctx *a, const char *key, const char *instructions, char **reply,
                       char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    agent_reply r;
    buf msg = BUF_INIT;
    session_store st;
    char cerr[512], full[1100], model[320], b[16], c[16];
    memset(&st, 0, sizeof st);
    cm_rc cr = cm_agent_session_compact_with(a, key, instructions, &r, cerr, sizeof cerr);
    if (cr == CM_ENOTFOUND) {
        rc = cm_buf_adds(&msg, "⚙️ Compaction unavailable (missing session id).");
        goto done;
    }
    CHECK(cm_agent_session_open(a, key, false, &st, full, err, errlen));
    const json_t *e = cm_session_store_get(&st, full);
    cm_agent_session_model(a, e, model);
    /* the label, and the context after it: the new estimate, else the
     * entry's total when it is fresh */
    int64_t total = -1, ctx;
    const json_t *tt = json_object_get(e, "totalTokens"), *ct = json_object_get(e, "contextTokens");
    if (!cr && r.compacted) {
        cm_status_token_count(r.tokens_before, b);
        cm_status_token_count(r.tokens_after, c);
        rc = cm_buf_printf(&msg, "⚙️ Compacted (%s → %s)", b, c);
        total = r.tokens_after;
    } else {
        rc = cm_buf_printf(&msg, "⚙️ %s: %s",
                           r.skipped ? "Compaction skipped" : "Compaction failed",
                           r.skipped ? r.skipped : S_failure(cr));
        if (json_is_number(tt) && json_number_value(tt) >= 0 &&
            !json_is_false(json_object_get(e, "totalTokensFresh")))
            total = (int64_t)json_number_value(tt);
    }
    ctx = json_is_number(ct) && json_number_value(ct) > 0
              ? (int64_t)json_number_value(ct)
              : cm_agent_context_tokens(a->config, model);
    cm_status_token_count(ctx, c);
    if (!rc && total > 0) {
        cm_status_token_count(total, b);
        double pct = (double)total * 100.0 / (double)ctx + 0.5;
        rc = cm_buf_printf(&msg, " • Context %s/%s (%lld%%)", b, c,
                           (long long)(pct > 999 ? 999 : pct));
    } else if (!rc) {
        rc = cm_buf_printf(&msg, " • Context ?/%s", c);
    }
done:
    if (!rc && !(*reply = cm_buf_detach(&msg))) rc = CM_ENOMEM;
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
out:
    cm_session_store_release(&st);
    cm_agent_reply_release(&r);
    cm_buf_release(&msg);
    return rc;
}

/* ---- /status -------------------------------------------------------------- */

cm_rc cm_agent_session_status(agent_ctx *a, const char *key, const char *queue_line,
                              const char *time_line, char **reply, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    session_store st;
    buf msg = BUF_INIT;
    char full[1100], model[320], auth[512] = "", prov[128];
    *reply = NULL;
    CHECK(cm_agent_session_open(a, key, false, &st, full, err, errlen));
    const json_t *e = cm_session_store_get(&st, full);
    cm_agent_session_model(a, e, model);
    const char *slash = strchr(model, '/');
    snprintf(prov, sizeof prov, "%.*s", slash ? (int)CM_MIN((size_t)(slash - model), 127) : 0,
             model);
    if (a->runner &&
        cm_llm_runner_auth_label(a->runner, prov,
                                 json_string_value(json_object_get(e, "authProfileOverride")),
                                 auth, sizeof auth))
        rc = CM_ENOMEM;
    double ctx = json_number_value(json_object_get(e, "contextTokens"));
    const char *think = json_string_value(json_object_get(e, "thinkingLevel"));
    llm_usage u = {.input = json_integer_value(json_object_get(e, "inputTokens")),
                   .output = json_integer_value(json_object_get(e, "outputTokens"))};
    status_card_in in = {
        .config = a->config,
        .entry = e,
        .session_key = full,
        .model = model,
        .auth = auth,
        .thinking = think && *think ? think : cm_agent_thinking_level_for(a->config, NULL, model),
        .context_tokens = ctx > 0 ? (int64_t)ctx : cm_agent_context_tokens(a->config, model),
        .show_cost = !strncmp(auth, "api-key", 7),
        .time_line = time_line,
        .queue_line = queue_line,
        .now_ms = S_now(a)};
    in.cost_known = cm_agent_run_cost(a->config, model, &u, &in.cost_usd);
    if (!rc) rc = cm_status_card(&in, &msg);
    if (!rc && !(*reply = cm_buf_detach(&msg))) rc = CM_ENOMEM;
    if (rc) cm_seterr(err, errlen, rc, "out of memory");
    cm_session_store_release(&st);
out:
    cm_buf_release(&msg);
    return rc;
}

cm_rc cm_agent_session_command(agent_ctx *a, const char *key, const char *text, bool *handled,
                               char **reply, char *err, size_t errlen)
{
    static const char *const compact[] = {"/compact", NULL};
    static const char *const think[] = {"/think", "/thinking", "/t", NULL};
    const char *rest;
    *handled = false;
    *reply = NULL;
    if (S_word(text, compact, &rest)) {
        *handled = true;
        return S_compact(a, key, *rest ? rest : NULL, reply, err, errlen);
    }
    if (S_word(text, think, &rest)) {
        *handled = true;
        return S_think(a, key, rest, reply, err, errlen);
    }
    cm_rc rc = cm_agent_model_command(a, key, text, handled, reply, err, errlen);
    if (rc || *handled) return rc;
    return cm_agent_session_reasoning_command(a, key, text, handled, reply, err, errlen);
}
