/*
 * agent_api.c — the public agent API (include/clawmem/agent.h) over the agent
 * layer: the config, the engine, the runner and the session store of one
 * agent.
 */
#include <time.h>

#include "../base/redact.h"
#include "../config/config.h"
#include "../session/keys.h"
#include "../session/sessions.h"
#include "bootstrap.h"
#include "session_cmds.h"

struct cm_agent {
    cm_config cfg;
    cm_engine *engine;
    llm_runner *runner;
    char *store_path;
    agent_ctx ctx;
    tool_policy tools;
    web_fetch_cfg web;
    exec_cfg exec;
    cm_logger log;
};

static void log_to(void *ctx, cm_log_level level, const char *msg)
{
    const cm_options *o = ctx;
    if (o->log) o->log(o->log_ctx, level, msg);
}

cm_engine *cm_agent_engine(cm_agent *a)
{
    return a ? a->engine : NULL;
}

static cm_rc agent_open(const cm_options *opt, bool shared, cm_agent **out, char *err,
                        size_t errlen)
{
    cm_rc rc = CM_OK;
    buf p = BUF_INIT;
    cm_agent *a = calloc(1, sizeof *a);
    *out = NULL;
    if (!a) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    cm_config_args ca = {opt->agent_id, opt->workspace, opt->config_path, opt->state_dir};
    cm_logger lg = {log_to, (void *)opt};
    a->log = (cm_logger){opt->log, opt->log_ctx};
    CHECK(cm_config_init(&ca, &lg, &a->cfg, err, errlen));
    /* first start: the workspace bootstrap files (bootstrap.h) */
    cm_agent_bootstrap_start(a->cfg.root, a->cfg.workspace, cm_wall_ms(), &a->log);
    CHECK((shared ? cm_engine_open_shared : cm_engine_open)(opt, &a->engine, err, errlen));
    char serr[512];
    cm_rc sr = cm_engine_sync(a->engine, CM_SYNC_NOWAIT, NULL, NULL, NULL, serr, sizeof serr);
    if (sr && sr != CM_EBUSY && opt->log) opt->log(opt->log_ctx, CM_LOG_WARN, serr);
    llm_runner_opts ro = {a->cfg.root, a->cfg.state_dir, a->cfg.agent_id, NULL, NULL};
    CHECK(cm_llm_runner_open(&ro, &a->runner, err, errlen));
    CHECK(cm_session_store_path(&p, a->cfg.state_dir, a->cfg.agent_id) ? CM_ENOMEM : CM_OK);
    a->store_path = cm_buf_detach(&p);
    CHECK(cm_tool_policy_init(&a->tools, a->cfg.root, a->cfg.agent_id));
    cm_web_fetch_cfg_init(&a->web, a->cfg.root);
    CHECK(cm_exec_cfg_init(&a->exec, a->cfg.root, a->cfg.agent_id));
    /* a long-lived agent coalesces its turns' bookkeeping (sessions.h) */
    session_store_config sc = {a->cfg.session_maint, CM_SESSION_FLUSH_MS, a->log};
    CHECK(cm_session_store_configure(a->store_path, &sc, err, errlen));
    a->ctx = (agent_ctx){a->cfg.root,
                         a->cfg.state_dir,
                         a->cfg.agent_id,
                         a->store_path,
                         a->cfg.workspace,
                         a->engine,
                         a->runner,
                         true,
                         NULL,
                         NULL,
                         &a->tools,
                         &a->web,
                         &a->exec};
    *out = a;
    a = NULL;
out:
    if (rc == CM_ENOMEM) cm_seterr(err, errlen, rc, "out of memory");
    cm_buf_release(&p);
    cm_agent_close(a);
    return rc;
}

cm_rc cm_agent_open(const cm_options *opt, cm_agent **out, char *err, size_t errlen)
{
    return agent_open(opt, false, out, err, errlen);
}

cm_rc cm_agent_open_shared(const cm_options *opt, cm_agent **out, char *err, size_t errlen)
{
    return agent_open(opt, true, out, err, errlen);
}

void cm_agent_close(cm_agent *a)
{
    if (!a) return;
    char err[512];
    if (a->store_path && cm_session_store_sync(a->store_path, err, sizeof err))
        cm_logf(&a->log, CM_LOG_WARN, "sessions: %s", err);
    if (a->store_path) { /* the caller's logger may not outlive the agent */
        session_store_config sc = {a->cfg.session_maint, CM_SESSION_FLUSH_MS, {NULL, NULL}};
        cm_session_store_configure(a->store_path, &sc, err, sizeof err);
    }
    cm_llm_runner_close(a->runner);
    cm_engine_close(a->engine);
    cm_config_release(&a->cfg);
    cm_tool_policy_release(&a->tools);
    cm_exec_cfg_release(&a->exec);
    free(a->store_path);
    free(a);
}

static cm_rc dump(json_t *j, char **out, char *err, size_t errlen)
{
    *out = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    return *out ? CM_OK : cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
}

static json_t *usage_json(const llm_usage *u)
{
    return json_pack("{s:I,s:I,s:I,s:I,s:I}", "input", (json_int_t)u->input, "output",
                     (json_int_t)u->output, "cacheRead", (json_int_t)u->cache_read, "cacheWrite",
                     (json_int_t)u->cache_write, "total", (json_int_t)u->total);
}

static cm_rc S_turn(cm_agent *a, const char *key, const char *prompt, const char *model,
                    cm_text_fn on_text, void *ctx, llm_delta_fn on_reasoning, void *reasoning_ctx,
                    bool reasoned, const agent_hooks *hooks, const agent_inbound *inbound,
                    char **json, char *err, size_t errlen);

cm_rc cm_agent_turn(cm_agent *a, const char *key, const char *prompt, const char *model,
                    cm_text_fn on_text, void *ctx, char **json, char *err, size_t errlen)
{
    return cm_agent_turn_hooked(a, key, prompt, model, on_text, ctx, NULL, NULL, json, err, errlen);
}

cm_rc cm_agent_turn_hooked(cm_agent *a, const char *key, const char *prompt, const char *model,
                           cm_text_fn on_text, void *ctx, const agent_hooks *hooks,
                           const agent_inbound *inbound, char **json, char *err, size_t errlen)
{
    return S_turn(a, key, prompt, model, on_text, ctx, NULL, NULL, false, hooks, inbound, json, err,
                  errlen);
}

cm_rc cm_agent_turn_reasoned(cm_agent *a, const char *key, const char *prompt, llm_delta_fn on_text,
                             void *ctx, llm_delta_fn on_reasoning, void *reasoning_ctx,
                             const agent_hooks *hooks, const agent_inbound *inbound, char **json,
                             char *err, size_t errlen)
{
    return S_turn(a, key, prompt, NULL, on_text, ctx, on_reasoning, reasoning_ctx, true, hooks,
                  inbound, json, err, errlen);
}

cm_rc cm_agent_status(cm_agent *a, const char *key, const char *queue_line, char **reply, char *err,
                      size_t errlen)
{
    return cm_agent_session_status(&a->ctx, key, queue_line, NULL, reply, err, errlen);
}

cm_rc cm_agent_command(cm_agent *a, const char *key, const char *text, bool *handled, char **reply,
                       char *err, size_t errlen)
{
    return cm_agent_session_command(&a->ctx, key, text, handled, reply, err, errlen);
}

/* A turn; with reasoned, the session's reasoning goes to on_reasoning
 * (stream) and into the json's "reasoning" (on). */
static cm_rc S_turn(cm_agent *a, const char *key, const char *prompt, const char *model,
                    cm_text_fn on_text, void *ctx, llm_delta_fn on_reasoning, void *reasoning_ctx,
                    bool reasoned, const agent_hooks *hooks, const agent_inbound *inbound,
                    char **json, char *err, size_t errlen)
{
    cm_rc rc;
    *json = NULL;
    if (!prompt) prompt = "";
    if (key && *key) {
        agent_reply r;
        agent_turn_opts o = {prompt,       model,         on_text, ctx,
                             on_reasoning, reasoning_ctx, hooks,   inbound};
        rc = cm_agent_session_turn_opts(&a->ctx, key, &o, &r, err, errlen);
        json_t *doc =
            rc ? NULL
               : json_pack("{s:s,s:b,s:b,s:b,s:s,s:i,s:o}", "reply", r.text, "silent", r.silent,
                           "flushed", r.flushed, "compacted", r.compacted, "model", r.model,
                           "toolCalls", r.tool_calls, "usage", usage_json(&r.usage));
        if (doc && reasoned &&
            json_object_set_new(doc, "reasoning", json_string(r.reasoning ? r.reasoning : ""))) {
            json_decref(doc);
            doc = NULL;
        }
        if (!rc) rc = dump(doc, json, err, errlen);
        cm_agent_reply_release(&r);
        return rc;
    }
    /* no session: one turn, nothing recorded */
    agent_tools tools = {.engine = a->engine,
                         .allow_write = cm_engine_writable(a->engine) != 0,
                         .workspace = a->cfg.workspace,
                         .fs_write = true,
                         .policy = &a->tools,
                         .web = &a->web,
                         .exec = &a->exec,
                         .trusted = !inbound || inbound->trusted_sender};
    agent_turn_in in = {a->runner, {model, false, NULL},
                        NULL,      NULL,
                        prompt,    0,
                        0,         on_text,
                        ctx,       NULL,
                        NULL,      hooks,
                        NULL,      NULL};
    agent_turn_out t;
    rc = cm_agent_turn_run(&tools, &in, &t, err, errlen);
    if (!rc)
        rc = dump(json_pack("{s:s,s:b,s:b,s:b,s:s,s:i,s:o}", "reply", t.reply, "silent", 0,
                            "flushed", 0, "compacted", 0, "model", t.outcome.model, "toolCalls",
                            t.tool_calls, "usage", usage_json(&t.usage)),
                  json, err, errlen);
    cm_agent_turn_out_release(&t);
    return rc;
}

cm_rc cm_agent_flush(cm_agent *a, const char *key, char **json, char *err, size_t errlen)
{
    agent_reply r;
    *json = NULL;
    cm_rc rc = cm_agent_session_flush(&a->ctx, key, NULL, true, &r, err, errlen);
    if (!rc)
        rc = dump(json_pack("{s:b,s:i}", "flushed", r.flushed, "toolCalls", r.tool_calls), json,
                  err, errlen);
    cm_agent_reply_release(&r);
    return rc;
}

cm_rc cm_agent_compact(cm_agent *a, const char *key, char **json, char *err, size_t errlen)
{
    agent_reply r;
    *json = NULL;
    cm_rc rc = cm_agent_session_compact(&a->ctx, key, &r, err, errlen);
    if (!rc) rc = dump(json_pack("{s:b}", "compacted", r.compacted), json, err, errlen);
    cm_agent_reply_release(&r);
    return rc;
}

/* "a,b,c" → ["a","b","c"] */
static json_t *split(const char *s)
{
    json_t *arr = json_array();
    for (const char *p = s; p && *p;) {
        size_t n = strcspn(p, ",");
        json_array_append_new(arr, json_stringn(p, n));
        p += n + (p[n] == ',');
    }
    return arr;
}

/* The status document of cm_models_status for cfg's agent and runner. */
static cm_rc S_models_status(const cm_config *cfg, llm_runner *runner, char **json, char *err,
                             size_t errlen)
{
    cm_rc rc = CM_OK;
    buf chain = BUF_INIT, ichain = BUF_INIT, ap = BUF_INIT;
    auth_store st = {0};
    json_t *out = NULL;
    *json = NULL;
    llm_turn t = {NULL, false, NULL}, ti = {NULL, true, NULL};
    if (cm_llm_runner_chain(runner, &t, &chain) || cm_llm_runner_chain(runner, &ti, &ichain) ||
        cm_auth_store_path(&ap, cfg->state_dir, cfg->agent_id))
        FAIL(CM_ENOMEM, "out of memory");
    CHECK(cm_auth_store_init(&st, cfg->state_dir, cfg->agent_id, err, errlen));
    int64_t now = (int64_t)time(NULL) * 1000;
    json_t *providers = json_object();
    out = json_pack("{s:s,s:o,s:o,s:o}", "authStore", ap.data, "chain", split(chain.data),
                    "imageChain", split(ichain.data), "providers", providers);
    if (!out) FAIL(CM_ENOMEM, "out of memory");
    json_t *models = json_object_get(out, "chain");
    size_t i;
    json_t *m;
    json_array_foreach(models, i, m)
    {
        const char *ref = json_string_value(m), *slash = strchr(ref, '/');
        char prov[128];
        snprintf(prov, sizeof prov, "%.*s", slash ? (int)(slash - ref) : 0, ref);
        if (json_object_get(providers, prov)) continue;
        json_t *pc = json_object_get(
            json_object_get(json_object_get(cfg->root, "models"), "providers"), prov);
        const char *api = json_string_value(json_object_get(pc, "api"));
        const char *url = json_string_value(json_object_get(pc, "baseUrl"));
        char shown[512] = "";
        /* as a message shows a URL: a key in its userinfo or query stays out */
        if (url && *url) cm_redact_url_to(url, shown, sizeof shown);
        json_t *pj = json_pack("{s:s,s:s,s:[]}", "api",
                               api                          ? api
                               : !strcmp(prov, "anthropic") ? "anthropic-messages"
                                                            : "openai-completions",
                               "baseUrl", shown, "profiles");
        json_object_set_new(providers, prov, pj);
        char **order = NULL;
        if (cm_auth_profile_order(&st, json_object_get(cfg->root, "auth"), prov, NULL, now, &order))
            FAIL(CM_ENOMEM, "out of memory");
        for (size_t k = 0; order && order[k]; k++) {
            json_t *p = cm_auth_profile(&st, order[k]);
            json_t *stats = json_object_get(json_object_get(st.doc, "usageStats"), order[k]);
            json_t *row =
                json_pack("{s:s,s:s,s:b,s:I}", "id", order[k], "type",
                          json_string_value(json_object_get(p, "type")) ?: "", "usable",
                          !cm_auth_profile_unusable(&st, order[k], now), "errorCount",
                          (json_int_t)json_integer_value(json_object_get(stats, "errorCount")));
            int64_t until = cm_auth_profile_unusable_until(&st, order[k]);
            if (until > now) json_object_set_new(row, "unusableUntil", json_integer(until));
            json_t *dr = json_object_get(stats, "disabledReason");
            if (json_is_string(dr) && until > now) json_object_set(row, "disabledReason", dr);
            json_t *lu = json_object_get(stats, "lastUsed");
            if (json_is_number(lu)) json_object_set(row, "lastUsed", lu);
            json_t *lf = json_object_get(stats, "lastFailureAt");
            if (json_is_number(lf)) json_object_set(row, "lastFailureAt", lf);
            json_t *fc = json_object_get(stats, "failureCounts");
            if (json_is_object(fc) && json_object_size(fc))
                json_object_set(row, "failureCounts", fc);
            json_array_append_new(json_object_get(pj, "profiles"), row);
        }
        cm_auth_strv_free(order);
    }
    rc = dump(out, json, err, errlen);
    out = NULL;
out:
    json_decref(out);
    cm_auth_store_release(&st);
    cm_buf_release(&chain);
    cm_buf_release(&ichain);
    cm_buf_release(&ap);
    return rc;
}

cm_rc cm_models_status(cm_agent *a, char **json, char *err, size_t errlen)
{
    return S_models_status(&a->cfg, a->runner, json, err, errlen);
}

cm_rc cm_models_status_at(const cm_options *opt, char **json, char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    cm_config cfg = {0};
    llm_runner *runner = NULL;
    *json = NULL;
    cm_config_args ca = {opt->agent_id, opt->workspace, opt->config_path, opt->state_dir};
    cm_logger lg = {log_to, (void *)opt};
    CHECK(cm_config_init(&ca, &lg, &cfg, err, errlen));
    llm_runner_opts ro = {cfg.root, cfg.state_dir, cfg.agent_id, NULL, NULL};
    CHECK(cm_llm_runner_open(&ro, &runner, err, errlen));
    rc = S_models_status(&cfg, runner, json, err, errlen);
out:
    cm_llm_runner_close(runner);
    cm_config_release(&cfg);
    return rc;
}
