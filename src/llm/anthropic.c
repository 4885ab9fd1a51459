/*
 * anthropic.c — the Anthropic Messages wire format (`anthropic-messages`):
 * POST <baseUrl>/v1/messages with `x-api-key` (an OAuth access token
 * `sk-ant-oat…` goes as a Bearer token) and `anthropic-version`; content
 * blocks (text, tool_use, tool_result — tool results travel in a user
 * message), and in a stream the events message_start, content_block_start /
 * _delta / _stop (text_delta, input_json_delta), message_delta (stop_reason,
 * output tokens), message_stop, ping and error.
 *
 * Thinking follows pi-ai's streamSimpleAnthropic: with a reasoning level
 * (llm_request.reasoning_effort) Opus/Sonnet 4.6 get adaptive thinking and
 * an effort, older models a token budget; the answer's thinking blocks
 * (thinking_delta, signature_delta, redacted_thinking) are kept with their
 * signatures and go back in later requests as convertMessages sends them.
 */
#include <ctype.h>

#include "llm.h"

#define ANTHROPIC_VERSION "2023-06-01"
#define INTERLEAVED_BETA  "interleaved-thinking-2025-05-14"
#define REDACTED_TEXT     "[Reasoning redacted]"

/* Opus 4.6 and Sonnet 4.6 (with or without a date suffix) think adaptively
 * (pi-ai's supportsAdaptiveThinking). */
static bool adaptive_model(const char *id)
{
    return id && (strstr(id, "opus-4-6") || strstr(id, "opus-4.6") || strstr(id, "sonnet-4-6") ||
                  strstr(id, "sonnet-4.6"));
}

/* The thinking level asked of this request, or NULL for none. */
static const char *thinking_level(const llm_request *rq)
{
    const char *l = rq->reasoning_effort;
    return l && *l && strcmp(l, "off") ? l : NULL;
}

/* pi-ai's mapThinkingLevelToEffort. */
static const char *adaptive_effort(const char *level, const char *id)
{
    if (!strcmp(level, "minimal") || !strcmp(level, "low")) return "low";
    if (!strcmp(level, "medium")) return "medium";
    if (!strcmp(level, "xhigh") && (strstr(id, "opus-4-6") || strstr(id, "opus-4.6")))
        return "max";
    return "high";
}

/* max_tokens before any thinking budget: the request's, else pi-ai's
 * buildBaseOptions default min(model maxTokens, 32000), else (a model the
 * config does not list: pi-ai would take its own catalog's) 4096. */
static int base_max_tokens(const llm_request *rq)
{
    if (rq->max_tokens > 0) return rq->max_tokens;
    if (rq->model_max_tokens > 0) return CM_MIN(rq->model_max_tokens, 32000);
    return 4096;
}

/* pi-ai's adjustMaxTokensForThinking with its default budgets: the budget
 * is added to max_tokens (capped by the model's maxTokens when known); when
 * that leaves no room, the budget shrinks to leave 1024 output tokens. */
static void thinking_budget(const llm_request *rq, const char *level, int *max_tokens,
                            int *budget)
{
    int base = base_max_tokens(rq);
    int b = !strcmp(level, "minimal") ? 1024
            : !strcmp(level, "low")   ? 2048
            : !strcmp(level, "medium") ? 8192
                                       : 16384; /* high, xhigh */
    long long m = (long long)base + b;
    if (rq->model_max_tokens > 0 && m > rq->model_max_tokens) m = rq->model_max_tokens;
    if (m > INT32_MAX) m = INT32_MAX;
    if (m <= b) b = m - 1024 > 0 ? (int)(m - 1024) : 0;
    *max_tokens = (int)m;
    *budget = b;
}

static cm_rc anthropic_endpoint(const llm_endpoint *ep, const llm_request *rq, buf *url,
                                cm_strlist *headers)
{
    /* pi-ai asks for interleaved thinking on every model but the adaptive
     * ones, which have it built in */
    bool interleaved = !adaptive_model(rq->model);
    const char *base = ep->base_url && *ep->base_url ? ep->base_url : "https://api.anthropic.com";
    size_t n = strlen(base);
    while (n > 1 && base[n - 1] == '/')
        n--;
    cm_rc rc = cm_buf_printf(url, "%.*s/v1/messages", (int)n, base);
    buf h = BUF_INIT;
    if (!rc && ep->api_key && *ep->api_key) {
        if (ep->bearer || strncmp(ep->api_key, "sk-ant-oat", 10) == 0) {
            rc = cm_buf_printf(&h, "Authorization: Bearer %s", ep->api_key);
            if (!rc) rc = cm_config_header_set(headers, h.data);
            if (!rc)
                rc = cm_config_header_set(
                    headers, interleaved ? "anthropic-beta: oauth-2025-04-20," INTERLEAVED_BETA
                                         : "anthropic-beta: oauth-2025-04-20");
            interleaved = false;
        } else {
            rc = cm_buf_printf(&h, "x-api-key: %s", ep->api_key);
            if (!rc) rc = cm_config_header_set(headers, h.data);
        }
    }
    if (!rc && interleaved) rc = cm_config_header_set(headers, "anthropic-beta: " INTERLEAVED_BETA);
    if (!rc) rc = cm_config_header_set(headers, "anthropic-version: " ANTHROPIC_VERSION);
    cm_buf_release(&h);
    return rc;
}

static bool blank(const char *s)
{
    for (; s && *s; s++)
        if (!isspace((unsigned char)*s)) return false;
    return true;
}

/* An assistant message's thinking blocks as pi-ai's transformMessages and
 * convertMessages send them: this model's signed thinking as thinking (its
 * redacted thinking as redacted_thinking), other thinking as plain text,
 * blank thinking and other models' redacted thinking not at all. */
static cm_rc add_thinking(json_t *content, const llm_message *m, const llm_request *rq)
{
    bool same = cm_llm_same_model(m, rq, LLM_API_ANTHROPIC);
    for (size_t k = 0; k < m->nthinking; k++) {
        const llm_thinking *t = &m->thinking[k];
        json_t *b = NULL;
        if (t->redacted) {
            if (!same || !t->signature) continue;
            b = json_pack("{s:s,s:s}", "type", "redacted_thinking", "data", t->signature);
        } else if (blank(t->text)) {
            continue;
        } else if (same && !blank(t->signature)) {
            b = json_pack("{s:s,s:s,s:s}", "type", "thinking", "thinking", t->text, "signature",
                          t->signature);
        } else {
            b = json_pack("{s:s,s:s}", "type", "text", "text", t->text);
        }
        if (!b || json_array_append_new(content, b)) return CM_ENOMEM;
    }
    return CM_OK;
}

static json_t *anthropic_body(const llm_request *rq)
{
    json_t *msgs = json_array(), *body = NULL, *last_user = NULL;
    if (!msgs) return NULL;
    for (size_t i = 0; i < rq->n; i++) {
        const llm_message *m = &rq->messages[i];
        json_t *content = json_array();
        if (!content) goto fail;
        if (m->role == LLM_TOOL) {
            json_t *tr = json_pack("{s:s,s:s,s:s}", "type", "tool_result", "tool_use_id",
                                   m->tool_call_id ? m->tool_call_id : "", "content",
                                   m->text ? m->text : "");
            if (m->is_error) json_object_set_new(tr, "is_error", json_true());
            json_array_append_new(content, tr);
        } else {
            if (m->role == LLM_ASSISTANT && add_thinking(content, m, rq)) {
                json_decref(content);
                goto fail;
            }
            if (m->text && *m->text)
                json_array_append_new(content,
                                      json_pack("{s:s,s:s}", "type", "text", "text", m->text));
            for (size_t k = 0; m->role == LLM_ASSISTANT && k < m->ncalls; k++)
                json_array_append_new(content,
                                      json_pack("{s:s,s:s,s:s,s:o}", "type", "tool_use", "id",
                                                m->calls[k].id, "name", m->calls[k].name, "input",
                                                cm_llm_json_object(m->calls[k].arguments)));
            if (json_array_size(content) == 0)
                json_array_append_new(content, json_pack("{s:s,s:s}", "type", "text", "text", ""));
        }
        /* Consecutive user turns (tool results, then a user message) are
         * one user message: the API wants the roles to alternate. */
        bool user = m->role != LLM_ASSISTANT;
        if (user && last_user) {
            json_array_extend(json_object_get(last_user, "content"), content);
            json_decref(content);
            continue;
        }
        json_t *o = json_pack("{s:s,s:o}", "role", user ? "user" : "assistant", "content", content);
        if (!o || json_array_append_new(msgs, o)) goto fail;
        last_user = user ? o : NULL;
    }
    const char *level = thinking_level(rq);
    bool adaptive = level && adaptive_model(rq->model);
    int max_tokens = base_max_tokens(rq), budget = 0;
    if (level && !adaptive) thinking_budget(rq, level, &max_tokens, &budget);
    body = json_pack("{s:s,s:i,s:o,s:b}", "model", rq->model, "max_tokens", max_tokens,
                     "messages", msgs, "stream", rq->stream);
    msgs = NULL;
    if (!body) goto fail;
    /* no temperature is sent, so none to drop with thinking */
    if (adaptive) {
        if (json_object_set_new(body, "thinking", json_pack("{s:s}", "type", "adaptive")) ||
            json_object_set_new(body, "output_config",
                                json_pack("{s:s}", "effort", adaptive_effort(level, rq->model))))
            goto fail;
    } else if (level) {
        if (json_object_set_new(body, "thinking",
                                json_pack("{s:s,s:i}", "type", "enabled", "budget_tokens",
                                          budget > 0 ? budget : 1024)))
            goto fail;
    }
    if (rq->system && *rq->system) json_object_set_new(body, "system", json_string(rq->system));
    if (rq->ntools) {
        json_t *tools = json_array();
        for (size_t i = 0; i < rq->ntools; i++)
            json_array_append_new(
                tools, json_pack("{s:s,s:s,s:o}", "name", rq->tools[i].name, "description",
                                 rq->tools[i].description ? rq->tools[i].description : "",
                                 "input_schema", cm_llm_json_object(rq->tools[i].parameters)));
        json_object_set_new(body, "tools", tools);
    }
    return body;
fail:
    json_decref(msgs);
    json_decref(body);
    return NULL;
}

static const char *stop_name(const char *r)
{
    if (!r) return "";
    if (!strcmp(r, "end_turn") || !strcmp(r, "stop_sequence") || !strcmp(r, "pause_turn"))
        return "stop";
    if (!strcmp(r, "max_tokens")) return "length";
    if (!strcmp(r, "tool_use")) return "toolUse";
    return "error"; /* refusal and the unknown */
}

static void usage_from(llm_usage *u, const json_t *j)
{
    if (!json_is_object(j)) return;
    json_t *v;
    if ((v = json_object_get(j, "input_tokens")) && json_is_integer(v))
        u->input = json_integer_value(v);
    if ((v = json_object_get(j, "output_tokens")) && json_is_integer(v))
        u->output = json_integer_value(v);
    if ((v = json_object_get(j, "cache_read_input_tokens")) && json_is_integer(v))
        u->cache_read = json_integer_value(v);
    if ((v = json_object_get(j, "cache_creation_input_tokens")) && json_is_integer(v))
        u->cache_write = json_integer_value(v);
    u->total = u->input + u->output + u->cache_read + u->cache_write;
}

/* The call index of content block b, or -1. */
static int block_call(llm_stream *st, size_t b)
{
    return b < st->nblocks ? st->block_call[b] : -1;
}

/* The thinking index of content block b, or -1. */
static int block_think(llm_stream *st, size_t b)
{
    return b < st->nblocks && st->block_think ? st->block_think[b] : -1;
}

/* Starts thinking block b of the stream: its text so far (a thinking
 * block's, streamed as reasoning; a redacted one's placeholder) and its
 * signature (a redacted one's data). */
static bool start_thinking(llm_stream *st, size_t b, const json_t *cb, bool redacted)
{
    llm_thinking *t = cm_llm_thinking_new(st->out);
    if (!t) return false;
    st->block_think[b] = (int)(st->out->nthinking - 1);
    t->redacted = redacted;
    const char *text =
        redacted ? REDACTED_TEXT : json_string_value(json_object_get(cb, "thinking"));
    const char *sig = json_string_value(json_object_get(cb, redacted ? "data" : "signature"));
    if (!cm_llm_str_append(NULL, &t->text, text ? text : "")) return false;
    if (sig && !cm_llm_str_append(st, &t->signature, sig)) return false;
    if (!redacted && text && *text && cm_llm_stream_reasoning(st, text, strlen(text)))
        return false;
    return true;
}

static bool anthropic_event(llm_stream *st, const char *name, json_t *d)
{
    if (!d) return false;
    const char *type = json_string_value(json_object_get(d, "type"));
    if (!type) type = name;
    if (!strcmp(type, "error")) {
        const char *m = json_string_value(json_object_get(json_object_get(d, "error"), "message"));
        snprintf(st->error, sizeof st->error, "%s", m ? m : "error event in the stream");
        return true;
    }
    if (!strcmp(type, "message_start")) {
        json_t *msg = json_object_get(d, "message");
        const char *id = json_string_value(json_object_get(msg, "id"));
        snprintf(st->out->response_id, sizeof st->out->response_id, "%s", id ? id : "");
        usage_from(&st->out->usage, json_object_get(msg, "usage"));
        return true;
    }
    json_t *ix = json_object_get(d, "index");
    size_t b =
        json_is_integer(ix) && json_integer_value(ix) >= 0 ? (size_t)json_integer_value(ix) : 0;
    if (!strcmp(type, "content_block_start")) {
        if (b > 1024) return false;
        if (b >= st->nblocks) {
            int *nb = realloc(st->block_call, (b + 1) * sizeof *nb);
            if (!nb) return false;
            st->block_call = nb;
            int *nt = realloc(st->block_think, (b + 1) * sizeof *nt);
            if (!nt) return false;
            st->block_think = nt;
            for (size_t i = st->nblocks; i <= b; i++)
                nb[i] = nt[i] = -1;
            st->nblocks = b + 1;
        }
        json_t *cb = json_object_get(d, "content_block");
        const char *ct = json_string_value(json_object_get(cb, "type"));
        if (ct && !strcmp(ct, "tool_use")) {
            size_t ci = st->out->ncalls;
            llm_tool_call *c = cm_llm_stream_call(st, ci);
            if (!c) return false;
            const char *cid = json_string_value(json_object_get(cb, "id"));
            const char *cname = json_string_value(json_object_get(cb, "name"));
            if (!(c->id = cm_strdup(cid ? cid : "")) || !(c->name = cm_strdup(cname ? cname : "")))
                return false;
            st->block_call[b] = (int)ci;
        } else if (ct && !strcmp(ct, "text")) {
            const char *t = json_string_value(json_object_get(cb, "text"));
            if (t && *t && cm_llm_stream_text(st, t, strlen(t))) return false;
        } else if (ct && (!strcmp(ct, "thinking") || !strcmp(ct, "redacted_thinking"))) {
            if (st->block_think[b] >= 0) return false; /* a block started twice */
            return start_thinking(st, b, cb, !strcmp(ct, "redacted_thinking"));
        }
        return true;
    }
    if (!strcmp(type, "content_block_delta")) {
        json_t *delta = json_object_get(d, "delta");
        const char *dt = json_string_value(json_object_get(delta, "type"));
        if (dt && !strcmp(dt, "text_delta")) {
            const char *t = json_string_value(json_object_get(delta, "text"));
            return !(t && cm_llm_stream_text(st, t, strlen(t)));
        }
        if (dt && !strcmp(dt, "input_json_delta")) {
            int ci = block_call(st, b);
            const char *pj = json_string_value(json_object_get(delta, "partial_json"));
            if (ci < 0) return false;
            return !(pj && cm_llm_stream_args(st, (size_t)ci, pj));
        }
        int ti = block_think(st, b);
        if (dt && !strcmp(dt, "thinking_delta")) {
            const char *t = json_string_value(json_object_get(delta, "thinking"));
            if (!t) return true;
            size_t n = strlen(t);
            if (cm_llm_stream_reasoning(st, t, n)) return false;
            /* the text was counted as reasoning */
            return ti < 0 || cm_llm_thinking_append(st, (size_t)ti, t, n);
        }
        if (dt && !strcmp(dt, "signature_delta")) {
            const char *sig = json_string_value(json_object_get(delta, "signature"));
            if (!sig || ti < 0) return true;
            return cm_llm_str_append(st, &st->out->thinking[ti].signature, sig);
        }
        return true;
    }
    if (!strcmp(type, "message_delta")) {
        const char *r =
            json_string_value(json_object_get(json_object_get(d, "delta"), "stop_reason"));
        if (r) snprintf(st->out->stop_reason, sizeof st->out->stop_reason, "%s", stop_name(r));
        usage_from(&st->out->usage, json_object_get(d, "usage"));
        return true;
    }
    if (!strcmp(type, "message_stop")) st->done = true;
    return true; /* content_block_stop, ping, unknown events */
}

static bool anthropic_whole(llm_response *out, json_t *doc)
{
    json_t *content = json_object_get(doc, "content");
    if (!json_is_array(content)) return false;
    const char *id = json_string_value(json_object_get(doc, "id"));
    snprintf(out->response_id, sizeof out->response_id, "%s", id ? id : "");
    size_t i, ncall = 0;
    json_t *blk;
    json_array_foreach(content, i, blk)
    {
        const char *t = json_string_value(json_object_get(blk, "type"));
        ncall += t && !strcmp(t, "tool_use");
    }
    if (ncall && !(out->calls = calloc(ncall, sizeof *out->calls))) return false;
    json_array_foreach(content, i, blk)
    {
        const char *t = json_string_value(json_object_get(blk, "type"));
        if (t && !strcmp(t, "text")) {
            const char *s = json_string_value(json_object_get(blk, "text"));
            if (s && *s && !out->text.len && cm_llm_order_add(out, LLM_BLOCK_TEXT, 0)) return false;
            if (s && cm_buf_adds(&out->text, s)) return false;
        } else if (t && !strcmp(t, "thinking")) {
            const char *s = json_string_value(json_object_get(blk, "thinking"));
            if (s && *s && out->reasoning.len && cm_buf_addc(&out->reasoning, '\n')) return false;
            if (s && cm_buf_adds(&out->reasoning, s)) return false;
            const char *sig = json_string_value(json_object_get(blk, "signature"));
            llm_thinking *th = cm_llm_thinking_new(out);
            if (!th || !(th->text = cm_strdup(s ? s : ""))) return false;
            if (sig && !(th->signature = cm_strdup(sig))) return false;
        } else if (t && !strcmp(t, "redacted_thinking")) {
            const char *data = json_string_value(json_object_get(blk, "data"));
            llm_thinking *th = cm_llm_thinking_new(out);
            if (!th || !(th->text = cm_strdup(REDACTED_TEXT))) return false;
            th->redacted = true;
            if (data && !(th->signature = cm_strdup(data))) return false;
        } else if (t && !strcmp(t, "tool_use")) {
            const char *cid = json_string_value(json_object_get(blk, "id"));
            const char *name = json_string_value(json_object_get(blk, "name"));
            if (cm_llm_order_add(out, LLM_BLOCK_CALL, out->ncalls)) return false;
            llm_tool_call *c = &out->calls[out->ncalls++];
            c->id = cm_strdup(cid ? cid : "");
            c->name = cm_strdup(name ? name : "");
            json_t *in = json_object_get(blk, "input");
            c->arguments = in ? json_dumps(in, JSON_COMPACT) : cm_strdup("{}");
            if (!c->id || !c->name || !c->arguments) return false;
        }
    }
    snprintf(out->stop_reason, sizeof out->stop_reason, "%s",
             stop_name(json_string_value(json_object_get(doc, "stop_reason"))));
    usage_from(&out->usage, json_object_get(doc, "usage"));
    return true;
}

const llm_format cm_llm_anthropic_format = {anthropic_endpoint, anthropic_body, anthropic_event,
                                            anthropic_whole, NULL};
