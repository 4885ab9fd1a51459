/*
 * turn.c — one agent turn (turn.h): messages between the transcript's
 * format and the chat clients' model, the tool loop, the memory tools.
 */

#include "../base/utf8.h"
#include "turn.h"
#include "run_meta.h"
#include "prompt.h"
#include "../base/caps.h"
#include "../tools/fs_tools.h"
#include "../tools/session_tools.h"

#define DEFAULT_MAX_STEPS 12
#define TOOL_TEXT_MAX     CM_CAP_TOOL_RESULT /* what a tool result may hand the model */

/* One tool as the model is told of it, if the policy allows it. */
static void offer(const agent_tools *t, const cm_tool_def *d, llm_tool_def *out, size_t cap,
                  size_t *n)
{
    if (*n < cap && (!t->policy || cm_tool_policy_allows(t->policy, d->name)))
        out[(*n)++] = (llm_tool_def){d->name, d->description, d->input_schema};
}

/* Whether exec may be offered at all (the policy decides the rest). */
static bool exec_on(const agent_tools *t)
{
    return t->exec && t->exec->enabled && t->trusted && t->workspace;
}

size_t cm_agent_tools_offered(const agent_tools *t, llm_tool_def *out, size_t cap)
{
    size_t n = 0, nf, nm;
    if (!t) return 0;
    if (t->workspace) { /* read, edit, write: first, as the reference lists them */
        const cm_tool_def *f = cm_tool_fs_defs(&nf);
        for (size_t i = 0; i < nf; i++)
            if (f[i].read_only || t->fs_write) offer(t, &f[i], out, cap, &n);
    }
    if (exec_on(t)) { /* exec, process: only for a trusted sender, when configured */
        const cm_tool_def *x = cm_tool_exec_defs(&nf);
        for (size_t i = 0; i < nf; i++)
            offer(t, &x[i], out, cap, &n);
    }
    if (t->store_path) { /* sessions_list, sessions_history, session_status, agents_list */
        const cm_tool_def *sd = cm_tool_session_defs(&nf);
        for (size_t i = 0; i < nf; i++) {
            offer(t, &sd[i], out, cap, &n);
            /* sessions_send after sessions_history, as the reference lists
             * them: a gateway run of a trusted sender only (it writes into
             * another session, whose later turns read it) */
            if (!strcmp(sd[i].name, "sessions_history") && t->trusted && t->hooks &&
                t->hooks->session_send)
                offer(t, cm_tool_sessions_send_def(), out, cap, &n);
        }
    }
    if (t->web && t->web->enabled) offer(t, cm_tool_web_fetch_def(), out, cap, &n);
    if (t->hooks && t->hooks->send) offer(t, cm_tool_message_def(), out, cap, &n);
    if (t->engine) { /* memory_search, memory_get, memory_write (tools/defs.c) */
        const cm_tool_def *m = cm_tool_defs(&nm);
        for (size_t i = 0; i < nm; i++)
            if (m[i].read_only || t->allow_write) offer(t, &m[i], out, cap, &n);
    }
    return n;
}

/* Whether t offers the tool called name. */
static bool offered(const agent_tools *t, const char *name)
{
    llm_tool_def d[AGENT_TOOLS_MAX];
    size_t n = cm_agent_tools_offered(t, d, AGENT_TOOLS_MAX);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(d[i].name, name)) return true;
    return false;
}

void cm_agent_turn_out_release(agent_turn_out *o)
{
    json_decref(o->messages);
    free(o->reply);
    free(o->reasoning);
    memset(o, 0, sizeof *o);
}

/* A message's text: a string, or its text blocks joined by newlines. */
static cm_rc text_of(const json_t *content, buf *out)
{
    if (json_is_string(content)) return cm_buf_adds(out, json_string_value(content));
    size_t i;
    json_t *b;
    cm_rc rc = CM_OK;
    json_array_foreach(content, i, b)
    {
        const char *t = json_string_value(json_object_get(b, "type"));
        const char *tx = json_string_value(json_object_get(b, "text"));
        if (!t || strcmp(t, "text") || !tx) continue;
        if (out->len) rc = cm_buf_addc(out, '\n');
        if (!rc) rc = cm_buf_adds(out, tx);
        if (rc) break;
    }
    return rc;
}

/* The conversation as the chat clients take it; strings live in texts and
 * calls, which the caller frees (free_convo). */
typedef struct convo {
    llm_message *m;
    size_t n, cap;
    buf *texts;
    size_t ntexts;
    llm_tool_call *calls;
    size_t ncalls, calls_cap;
    llm_thinking *thinks; /* borrowed strings (the transcript's) */
    size_t nthinks, thinks_cap;
} convo;

static void free_convo(convo *c)
{
    for (size_t i = 0; i < c->ntexts; i++)
        cm_buf_release(&c->texts[i]);
    free(c->texts);
    for (size_t i = 0; i < c->ncalls; i++) {
        free(c->calls[i].id);
        free(c->calls[i].name);
        free(c->calls[i].arguments);
    }
    free(c->calls);
    free(c->thinks);
    free(c->m);
    memset(c, 0, sizeof *c);
}

/* Room for one more message (and its text buffer). */
static llm_message *add_msg(convo *c, buf **text)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 32;
        llm_message *m = realloc(c->m, cap * sizeof *m);
        if (!m) return NULL;
        c->m = m;
        buf *t = realloc(c->texts, cap * sizeof *t);
        if (!t) return NULL;
        c->texts = t;
        c->cap = cap;
    }
    llm_message *m = &c->m[c->n++];
    memset(m, 0, sizeof *m);
    c->texts[c->ntexts] = (buf)BUF_INIT;
    *text = &c->texts[c->ntexts++];
    return m;
}

/* Adds one transcript message; other roles are skipped. Tool calls are
 * kept in c->calls, which may move: calls are linked up after all
 * messages are in (link_calls). */
static cm_rc add_transcript_message(convo *c, const json_t *msg)
{
    const char *role = json_string_value(json_object_get(msg, "role"));
    if (!role) return CM_OK;
    bool user = !strcmp(role, "user"), asst = !strcmp(role, "assistant"),
         tool = !strcmp(role, "toolResult");
    if (!user && !asst && !tool) return CM_OK;
    /* an aborted or failed answer is never sent back (as pi-ai drops it) */
    const char *stop = json_string_value(json_object_get(msg, "stopReason"));
    if (asst && stop && (!strcmp(stop, "aborted") || !strcmp(stop, "error"))) return CM_OK;
    buf *text;
    llm_message *m = add_msg(c, &text);
    if (!m) return CM_ENOMEM;
    cm_rc rc = text_of(json_object_get(msg, "content"), text);
    if (rc) return rc;
    m->role = user ? LLM_USER : asst ? LLM_ASSISTANT : LLM_TOOL;
    m->text = NULL; /* set in link_calls: texts may move */
    if (tool) {
        m->tool_call_id = json_string_value(json_object_get(msg, "toolCallId"));
        m->tool_name = json_string_value(json_object_get(msg, "toolName"));
        m->is_error = json_is_true(json_object_get(msg, "isError"));
    }
    if (asst) {
        size_t i;
        json_t *b;
        size_t first = c->ncalls;
        json_array_foreach(json_object_get(msg, "content"), i, b)
        {
            const char *t = json_string_value(json_object_get(b, "type"));
            if (!t || strcmp(t, "toolCall")) continue;
            if (c->ncalls == c->calls_cap) {
                size_t cap = c->calls_cap ? c->calls_cap * 2 : 16;
                llm_tool_call *nc = realloc(c->calls, cap * sizeof *nc);
                if (!nc) return CM_ENOMEM;
                c->calls = nc;
                c->calls_cap = cap;
            }
            llm_tool_call *k = &c->calls[c->ncalls++];
            const char *id = json_string_value(json_object_get(b, "id"));
            const char *name = json_string_value(json_object_get(b, "name"));
            json_t *args = json_object_get(b, "arguments");
            k->id = cm_strdup(id ? id : "");
            k->name = cm_strdup(name ? name : "");
            k->arguments =
                args ? json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY) : cm_strdup("{}");
            if (!k->id || !k->name || !k->arguments) return CM_ENOMEM;
        }
        /* first call index and count, kept in the pointer fields until linked */
        m->ncalls = c->ncalls - first;
        m->calls = (const llm_tool_call *)(uintptr_t)first;
        /* thinking blocks with their signatures, for the format that sends
         * them back (Anthropic), likewise linked later */
        size_t first_think = c->nthinks;
        json_array_foreach(json_object_get(msg, "content"), i, b)
        {
            const char *t = json_string_value(json_object_get(b, "type"));
            if (!t || strcmp(t, "thinking")) continue;
            if (c->nthinks == c->thinks_cap) {
                size_t cap = c->thinks_cap ? c->thinks_cap * 2 : 16;
                llm_thinking *nt = realloc(c->thinks, cap * sizeof *nt);
                if (!nt) return CM_ENOMEM;
                c->thinks = nt;
                c->thinks_cap = cap;
            }
            const char *th = json_string_value(json_object_get(b, "thinking"));
            c->thinks[c->nthinks++] = (llm_thinking){
                (char *)(th ? th : ""),
                (char *)json_string_value(json_object_get(b, "thinkingSignature")),
                json_is_true(json_object_get(b, "redacted"))};
        }
        m->nthinking = c->nthinks - first_think;
        m->thinking = (const llm_thinking *)(uintptr_t)first_think;
        m->model = json_string_value(json_object_get(msg, "model"));
        m->provider = json_string_value(json_object_get(msg, "provider"));
        m->api = json_string_value(json_object_get(msg, "api"));
    }
    return CM_OK;
}

static void link_calls(convo *c)
{
    for (size_t i = 0; i < c->n; i++) {
        c->m[i].text = c->texts[i].data;
        if (c->m[i].role == LLM_ASSISTANT) {
            c->m[i].calls = c->m[i].ncalls ? &c->calls[(uintptr_t)c->m[i].calls] : NULL;
            c->m[i].thinking =
                c->m[i].nthinking ? &c->thinks[(uintptr_t)c->m[i].thinking] : NULL;
        }
    }
}

/* ---- the tools ---- */

static json_t *tool_text(const char *s, bool is_error)
{
    (void)is_error;
    return json_pack("[{s:s,s:s}]", "type", "text", "text", s);
}

/* Runs one tool call; the result text (malloc'd) and whether it failed. */
static char *run_tool(const agent_tools *t, const llm_tool_call *call, bool *is_error)
{
    char err[1024] = "", *payload = NULL;
    buf out = BUF_INIT;
    json_t *args = json_loads(call->arguments ? call->arguments : "{}", 0, NULL);
    cm_rc rc = CM_OK, wrc = CM_OK; /* wrc: the result text could not be built */
    *is_error = true;
    if (!json_is_object(args)) {
        wrc = cm_buf_printf(&out, "%s: the arguments are not a JSON object", call->name);
        goto out;
    }
    if (!offered(t, call->name)) {
        wrc = cm_buf_printf(&out, "Tool %.64s not found", call->name);
        goto out;
    }
    if (!strcmp(call->name, "read") || !strcmp(call->name, "write") ||
        !strcmp(call->name, "edit")) {
        cm_rc (*fn)(const char *, const json_t *, buf *, char *, size_t) =
            call->name[0] == 'r' ? cm_tool_read : call->name[0] == 'w' ? cm_tool_write
                                                                       : cm_tool_edit;
        buf res = BUF_INIT;
        rc = fn(t->workspace, args, &res, err, sizeof err);
        payload = rc ? NULL : cm_buf_detach(&res);
        cm_buf_release(&res);
        if (!rc && !payload) rc = CM_ENOMEM;
    } else if (!strcmp(call->name, "exec") || !strcmp(call->name, "process")) {
        exec_env env = {t->exec, t->workspace, t->agent_id, t->session_key,
                        !t->policy || cm_tool_policy_allows(t->policy, "process")};
        buf res = BUF_INIT;
        bool failed = true;
        rc = (call->name[0] == 'e' ? cm_tool_exec : cm_tool_process)(&env, args, &res, &failed,
                                                                      err, sizeof err);
        payload = rc ? NULL : cm_buf_detach(&res);
        cm_buf_release(&res);
        if (!rc && !payload) rc = CM_ENOMEM;
        if (!rc && failed) { /* the command's own failure: its text, marked as an error */
            wrc = cm_buf_add(&out, payload, cm_utf8_valid_prefix(payload, CM_MIN(strlen(payload),
                                                                   (size_t)TOOL_TEXT_MAX)));
            goto out;
        }
    } else if (!strcmp(call->name, "message")) {
        buf res = BUF_INIT;
        rc = cm_tool_message(t->hooks->send, t->hooks->ctx, args, &res, err, sizeof err);
        payload = rc ? NULL : cm_buf_detach(&res);
        cm_buf_release(&res);
        if (!rc && !payload) rc = CM_ENOMEM;
    } else if (!strcmp(call->name, "web_fetch")) {
        buf res = BUF_INIT;
        rc = cm_tool_web_fetch(t->web, args, t->now_ms ? t->now_ms : cm_wall_ms(), &res, err,
                               sizeof err);
        payload = rc ? NULL : cm_buf_detach(&res);
        cm_buf_release(&res);
        if (!rc && !payload) rc = CM_ENOMEM;
    } else if (!strcmp(call->name, "sessions_send")) {
        session_tool_env env = {t->config,      t->store_path, t->agent_id,
                                t->session_key, t->now_ms,     NULL};
        buf res = BUF_INIT;
        rc = cm_tool_sessions_send(&env, args, t->hooks->session_send, t->hooks->ctx, &res, err,
                                   sizeof err);
        payload = rc ? NULL : cm_buf_detach(&res);
        cm_buf_release(&res);
        if (!rc && !payload) rc = CM_ENOMEM;
    } else if (!strncmp(call->name, "session", 7) || !strcmp(call->name, "agents_list")) {
        char tz[128];
        cm_agent_user_timezone(t->config, tz, sizeof tz);
        session_tool_env env = {t->config,      t->store_path,
                                t->agent_id,    t->session_key,
                                t->now_ms ? t->now_ms : cm_wall_ms(), tz};
        cm_rc (*fn)(const session_tool_env *, const json_t *, buf *, char *, size_t) =
            !strcmp(call->name, "sessions_list")      ? cm_tool_sessions_list
            : !strcmp(call->name, "sessions_history") ? cm_tool_sessions_history
            : !strcmp(call->name, "session_status")   ? cm_tool_session_status
                                                      : cm_tool_agents_list;
        buf res = BUF_INIT;
        rc = fn(&env, args, &res, err, sizeof err);
        payload = rc ? NULL : cm_buf_detach(&res);
        cm_buf_release(&res);
        if (!rc && !payload) rc = CM_ENOMEM;
    } else if (!t->engine) {
        wrc = cm_buf_printf(&out, "%s: no memory is available to this agent", call->name);
        goto out;
    } else if (!strcmp(call->name, "memory_search")) {
        const char *q = json_string_value(json_object_get(args, "query"));
        if (!q) { /* an empty one: the library's error, as the CLI and MCP say it */
            wrc = cm_buf_adds(&out, "memory_search: query (a non-empty string) is required");
            goto out;
        }
        json_t *mr = json_object_get(args, "maxResults"), *ms = json_object_get(args, "minScore");
        cm_search_opts so = {json_is_integer(mr) ? (int)json_integer_value(mr) : 0,
                             json_is_number(ms) ? json_number_value(ms) : -1, 0};
        rc = cm_memory_search_session(t->engine, q, &so, t->session_key, &payload, err, sizeof err);
    } else if (!strcmp(call->name, "memory_get")) {
        const char *p = json_string_value(json_object_get(args, "path"));
        json_t *f = json_object_get(args, "from"), *l = json_object_get(args, "lines"),
               *o = json_object_get(args, "offset");
        if (!p) {
            wrc = cm_buf_adds(&out, "memory_get: path (a string) is required");
            goto out;
        }
        rc = cm_memory_get_at(t->engine, p, json_is_integer(f) ? (long)json_integer_value(f) : 0,
                              json_is_integer(o) ? (long)json_integer_value(o) : 0,
                              json_is_integer(l) ? (long)json_integer_value(l) : 0, &payload, err,
                              sizeof err);
    } else if (!strcmp(call->name, "memory_write") && t->allow_write) {
        const char *text = json_string_value(json_object_get(args, "text"));
        const char *p = json_string_value(json_object_get(args, "path"));
        if (!text || !*text) {
            wrc = cm_buf_adds(&out, "memory_write: text (a non-empty string) is required");
            goto out;
        }
        if (t->write_only_to && p && strcmp(p, t->write_only_to) != 0) {
            wrc = cm_buf_printf(&out, "memory_write: during the memory flush, writes go only to %s",
                                t->write_only_to);
            goto out;
        }
        rc = cm_memory_write(t->engine, p ? p : t->write_only_to, text, 0, &payload, err,
                             sizeof err);
    } else {
        wrc = cm_buf_printf(&out, "unknown tool %s", call->name);
        goto out;
    }
    if (rc) {
        wrc = cm_buf_adds(&out, err[0] ? err : cm_strerror(rc));
        goto out;
    }
    *is_error = false;
    /* at most TOOL_TEXT_MAX bytes, never cutting a character in two */
    wrc = cm_buf_add(&out, payload,
                     cm_utf8_valid_prefix(payload, CM_MIN(strlen(payload), (size_t)TOOL_TEXT_MAX)));
out:
    cm_free(payload);
    json_decref(args);
    if (wrc) { /* out of memory: the caller fails the turn */
        cm_buf_release(&out);
        return NULL;
    }
    return cm_buf_detach(&out);
}

/* usage.cost as pi-ai writes it: each part from the model's rates in cfg
 * (models.providers.<p>.models[].cost), all 0 when the model is not listed. */
static json_t *usage_cost(const json_t *cfg, const char *model, const llm_usage *u)
{
    double part[4] = {0, 0, 0, 0};
    if (cfg) (void)cm_agent_run_cost_parts(cfg, model, u, part);
    static const char *const name[4] = {"input", "output", "cacheRead", "cacheWrite"};
    json_t *c = json_object();
    double total = 0;
    for (int i = 0; c && i < 4; i++) {
        total += part[i];
        /* 0 as an integer, as JSON.stringify writes it */
        if (json_object_set_new(c, name[i], part[i] ? json_real(part[i]) : json_integer(0))) {
            json_decref(c);
            return NULL;
        }
    }
    if (c && json_object_set_new(c, "total", total ? json_real(total) : json_integer(0))) {
        json_decref(c);
        return NULL;
    }
    return c;
}

/* Appends block b of answer r to content in the transcript's format (once:
 * done[] marks the blocks written; an index out of range is skipped). */
static void put_block(json_t *content, const llm_response *r, llm_block b, bool *done)
{
    json_t *o = NULL;
    if (b.kind == LLM_BLOCK_TEXT) {
        if (done[0] || !r->text.len) return;
        done[0] = true;
        o = json_pack("{s:s,s:s}", "type", "text", "text", r->text.data);
    } else if (b.kind == LLM_BLOCK_THINKING) {
        if (b.index >= r->nthinking || done[1 + b.index]) return;
        done[1 + b.index] = true;
        const llm_thinking *t = &r->thinking[b.index];
        o = json_pack("{s:s,s:s}", "type", "thinking", "thinking", t->text ? t->text : "");
        if (o && t->signature)
            json_object_set_new(o, "thinkingSignature", json_string(t->signature));
        if (o && t->redacted) json_object_set_new(o, "redacted", json_true());
    } else {
        if (b.index >= r->ncalls || done[1 + r->nthinking + b.index]) return;
        done[1 + r->nthinking + b.index] = true;
        const llm_tool_call *c = &r->calls[b.index];
        json_t *args = json_loads(c->arguments, 0, NULL);
        o = json_pack("{s:s,s:s,s:s,s:o}", "type", "toolCall", "id", c->id, "name", c->name,
                      "arguments", json_is_object(args) ? args : json_object());
        if (!json_is_object(args)) json_decref(args);
    }
    json_array_append_new(content, o);
}

/* The assistant message of a model answer, in the transcript's format;
 * cfg (may be NULL) prices its usage. */
static json_t *assistant_message(const llm_response *r, const llm_outcome *oc, int64_t now,
                                 const json_t *cfg)
{
    json_t *content = json_array();
    bool *done = calloc(1 + r->nthinking + r->ncalls, sizeof *done);
    if (!done) {
        json_decref(content);
        return NULL;
    }
    /* thinking never goes back as text (text_of); the blocks are stored as
     * pi-ai stores them, in the order they came, with their signatures:
     * Anthropic's go back as thinking (anthropic.c), an OpenAI-compatible
     * answer's under the reasoning member its signature names (openai.c).
     * Blocks the answer did not order: thinking, text, calls. */
    if (!r->nthinking && r->reasoning.len)
        json_array_append_new(
            content, json_pack("{s:s,s:s}", "type", "thinking", "thinking", r->reasoning.data));
    for (size_t i = 0; i < r->norder; i++)
        put_block(content, r, r->order[i], done);
    for (size_t i = 0; i < r->nthinking; i++)
        put_block(content, r, (llm_block){LLM_BLOCK_THINKING, i}, done);
    put_block(content, r, (llm_block){LLM_BLOCK_TEXT, 0}, done);
    for (size_t i = 0; i < r->ncalls; i++)
        put_block(content, r, (llm_block){LLM_BLOCK_CALL, i}, done);
    free(done);
    const char *slash = strchr(oc->model, '/');
    char provider[192];
    snprintf(provider, sizeof provider, "%.*s", slash ? (int)(slash - oc->model) : 0, oc->model);
    json_t *usage = json_pack(
        "{s:I,s:I,s:I,s:I,s:I,s:o}", "input", (json_int_t)r->usage.input, "output",
        (json_int_t)r->usage.output, "cacheRead", (json_int_t)r->usage.cache_read, "cacheWrite",
        (json_int_t)r->usage.cache_write, "totalTokens", (json_int_t)r->usage.total, "cost",
        usage_cost(cfg, oc->model, &r->usage));
    const char *api = oc->api[0] ? oc->api : "openai-completions";
    json_t *m = json_pack("{s:s,s:o,s:s,s:s,s:s,s:o,s:s,s:I}", "role", "assistant", "content",
                          content, "api", api, "provider", provider, "model",
                          slash ? slash + 1 : oc->model, "usage", usage, "stopReason",
                          r->stop_reason, "timestamp", (json_int_t)now);
    if (m && r->response_id[0]) json_object_set_new(m, "responseId", json_string(r->response_id));
    return m;
}

/* Appends the steered texts pending (user messages); *took when any. */
static cm_rc S_take_steer(const agent_hooks *hk, json_t *msgs, int64_t now, bool *took)
{
    *took = false;
    for (char *st; hk && hk->steer && (st = hk->steer(hk->ctx));) {
        json_t *um = json_pack("{s:s,s:[{s:s,s:s}],s:I}", "role", "user", "content", "type", "text",
                               "text", st, "timestamp", (json_int_t)now);
        free(st);
        if (!um || json_array_append_new(msgs, um)) return CM_ENOMEM;
        *took = true;
    }
    return CM_OK;
}

cm_rc cm_agent_turn_run(const agent_tools *tools, const agent_turn_in *in, agent_turn_out *out,
                        char *err, size_t errlen)
{
    cm_rc rc = CM_OK;
    convo c = {0};
    llm_response resp = {0};
    memset(out, 0, sizeof *out);
    if (!(out->messages = json_array())) return cm_seterr(err, errlen, CM_ENOMEM, "out of memory");
    int64_t now = in->now_ms;
    json_t *user =
        json_pack("{s:s,s:[{s:s,s:s}],s:I}", "role", "user", "content", "type", "text", "text",
                  in->user_text ? in->user_text : "", "timestamp", (json_int_t)now);
    if (!user || json_array_append_new(out->messages, user)) FAIL(CM_ENOMEM, "out of memory");
    llm_tool_def td[AGENT_TOOLS_MAX];
    size_t nt = cm_agent_tools_offered(tools, td, AGENT_TOOLS_MAX);
    int max = in->max_steps > 0 ? in->max_steps : DEFAULT_MAX_STEPS;
    llm_turn turn = in->turn;
    const agent_hooks *hk = in->hooks;
    for (int step = 0;; step++) {
        if (step >= max)
            FAIL(CM_EIO, "the turn stopped after %d model calls (the model kept calling tools)",
                 max);
        /* the whole conversation, rebuilt each step (the messages array grows) */
        free_convo(&c);
        size_t i;
        json_t *m;
        json_array_foreach((json_t *)in->history, i, m)
        {
            if (add_transcript_message(&c, m)) FAIL(CM_ENOMEM, "out of memory");
        }
        json_array_foreach(out->messages, i, m)
        {
            if (add_transcript_message(&c, m)) FAIL(CM_ENOMEM, "out of memory");
        }
        link_calls(&c);
        llm_request rq = {NULL,
                          in->system_prompt,
                          c.m,
                          c.n,
                          td,
                          nt,
                          0,
                          true,
                          in->on_reasoning,
                          in->reasoning_ctx,
                          hk ? hk->cancelled : NULL,
                          hk ? hk->ctx : NULL,
                          in->effort,
                          in->effort_ctx,
                          NULL,
                          0,
                          NULL,
                          false,
                          false,
                          false};
        cm_llm_response_release(&resp);
        if (hk && hk->cancelled && hk->cancelled(hk->ctx)) {
            rc = CM_ECANCELED;
        } else {
            rc = cm_llm_run(in->runner, &turn, &rq, in->on_delta, in->ctx, &resp, &out->outcome,
                            err, errlen);
            out->steps++;
        }
        if (rc == CM_ECANCELED) {
            /* as pi-agent-core records an abort: an empty assistant message with
             * stopReason "aborted" (nothing of the half answer) */
            cm_llm_response_release(&resp);
            memset(&resp, 0, sizeof resp);
            snprintf(resp.stop_reason, sizeof resp.stop_reason, "aborted");
            now = in->now_ms + out->steps + 1;
            json_t *am = assistant_message(&resp, &out->outcome, now,
                                       tools ? tools->config : NULL);
            if (!am ||
                json_object_set_new(am, "errorMessage", json_string("Request was aborted")) ||
                json_array_append_new(out->messages, am))
                FAIL(CM_ENOMEM, "out of memory");
            FAIL(CM_ECANCELED, "the run was aborted");
        }
        if (rc) goto out;
        out->usage = resp.usage;
        out->total.input += resp.usage.input;
        out->total.output += resp.usage.output;
        out->total.cache_read += resp.usage.cache_read;
        out->total.cache_write += resp.usage.cache_write;
        out->total.total += resp.usage.total;
        /* later steps stay on the model that answered */
        turn.model = out->outcome.model;
        now = in->now_ms + out->steps;
        json_t *am = assistant_message(&resp, &out->outcome, now,
                                       tools ? tools->config : NULL);
        if (!am || json_array_append_new(out->messages, am)) FAIL(CM_ENOMEM, "out of memory");
        free(out->reply);
        out->reply = cm_strdup(resp.text.data);
        if (!out->reply) FAIL(CM_ENOMEM, "out of memory");
        free(out->reasoning);
        out->reasoning = cm_strdup(resp.reasoning.data);
        if (!out->reasoning) FAIL(CM_ENOMEM, "out of memory");
        if (!resp.ncalls) {
            /* steered texts that came during the answer: one more model call */
            bool took = false;
            if (S_take_steer(hk, out->messages, now, &took)) FAIL(CM_ENOMEM, "out of memory");
            if (!took) break;
            continue;
        }
        for (size_t k = 0; k < resp.ncalls; k++) {
            bool is_error;
            const llm_tool_call *call = &resp.calls[k];
            if (hk && hk->on_tool)
                hk->on_tool(hk->tool_ctx, call->id, call->name, call->arguments, NULL, false);
            char *result = run_tool(tools, call, &is_error);
            if (!result) FAIL(CM_ENOMEM, "out of memory");
            if (hk && hk->on_tool)
                hk->on_tool(hk->tool_ctx, call->id, call->name, call->arguments, result, is_error);
            out->tool_calls++;
            json_t *tr = json_pack("{s:s,s:s,s:s,s:o,s:b,s:I}", "role", "toolResult", "toolCallId",
                                   resp.calls[k].id, "toolName", resp.calls[k].name, "content",
                                   tool_text(result, is_error), "isError", is_error, "timestamp",
                                   (json_int_t)now);
            free(result);
            if (!tr || json_array_append_new(out->messages, tr)) FAIL(CM_ENOMEM, "out of memory");
        }
        /* steered texts join the conversation before the next model call */
        bool took;
        if (S_take_steer(hk, out->messages, now, &took)) FAIL(CM_ENOMEM, "out of memory");
    }
out:
    cm_llm_response_release(&resp);
    free_convo(&c);
    if (rc && !out->reply) out->reply = cm_strdup("");
    if (rc && !out->reasoning) out->reasoning = cm_strdup("");
    return rc;
}
