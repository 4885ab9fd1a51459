/*
 * anthropic.c — the Anthropic Messages wire format (`anthropic-messages`):
 * POST <baseUrl>/v1/messages with `x-api-key` (an OAuth access token
 * `sk-ant-oat…` goes as a Bearer token) and `anthropic-version`; content
 * blocks (text, tool_use, tool_result — tool results travel in a user
 * message), and in a stream the events message_start, content_block_start /
 * _delta / _stop (text_delta, input_json_delta), message_delta (stop_reason,
 * output tokens), message_stop, ping and error.
 */
#include "llm.h"

#define ANTHROPIC_VERSION "2023-06-01"

static cm_rc anthropic_endpoint(const llm_endpoint *ep, buf *url, cm_strlist *headers)
{
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
            if (!rc) rc = cm_config_header_set(headers, "anthropic-beta: oauth-2025-04-20");
        } else {
            rc = cm_buf_printf(&h, "x-api-key: %s", ep->api_key);
            if (!rc) rc = cm_config_header_set(headers, h.data);
        }
    }
    if (!rc) rc = cm_config_header_set(headers, "anthropic-version: " ANTHROPIC_VERSION);
    cm_buf_release(&h);
    return rc;
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
    body = json_pack("{s:s,s:i,s:o,s:b}", "model", rq->model, "max_tokens",
                     rq->max_tokens > 0 ? rq->max_tokens : 4096, "messages", msgs, "stream",
                     rq->stream);
    msgs = NULL;
    if (!body) goto fail;
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
            for (size_t i = st->nblocks; i <= b; i++)
                nb[i] = -1;
            st->block_call = nb;
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
        } else if (ct && !strcmp(ct, "thinking")) {
            const char *t = json_string_value(json_object_get(cb, "thinking"));
            if (t && *t && cm_llm_stream_reasoning(st, t, strlen(t))) return false;
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
        if (dt && !strcmp(dt, "thinking_delta")) {
            const char *t = json_string_value(json_object_get(delta, "thinking"));
            return !(t && cm_llm_stream_reasoning(st, t, strlen(t)));
        }
        return true; /* signatures: not kept */
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
            if (s && cm_buf_adds(&out->text, s)) return false;
        } else if (t && !strcmp(t, "thinking")) {
            const char *s = json_string_value(json_object_get(blk, "thinking"));
            if (s && *s && out->reasoning.len && cm_buf_addc(&out->reasoning, '\n')) return false;
            if (s && cm_buf_adds(&out->reasoning, s)) return false;
        } else if (t && !strcmp(t, "tool_use")) {
            const char *cid = json_string_value(json_object_get(blk, "id"));
            const char *name = json_string_value(json_object_get(blk, "name"));
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
