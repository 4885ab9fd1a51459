/*
 * openai.c — the OpenAI-compatible Chat Completions wire format
 * (`openai-completions`): POST <baseUrl>/chat/completions with a Bearer key;
 * messages with roles system/user/assistant/tool, function tools, and in a
 * stream `choices[0].delta` pieces (content, tool_calls by index), a
 * finish_reason, a final usage chunk (stream_options.include_usage) and
 * `data: [DONE]`. As pi-ai's openai-completions provider: the token limit
 * as max_completion_tokens, and the reasoning kept in thinking blocks signed
 * with the member it came in, which is where it goes back to the same model.
 */
#include <ctype.h>

#include "../base/jtext.h"
#include "llm.h"

static cm_rc openai_endpoint(const llm_endpoint *ep, const llm_request *rq, buf *url,
                             cm_strlist *headers)
{
    (void)rq;
    const char *base = ep->base_url && *ep->base_url ? ep->base_url : "https://api.openai.com/v1";
    size_t n = strlen(base);
    while (n > 1 && base[n - 1] == '/')
        n--;
    cm_rc rc = cm_buf_printf(url, "%.*s/chat/completions", (int)n, base);
    if (!rc && ep->api_key && *ep->api_key) {
        buf h = BUF_INIT;
        rc = cm_buf_printf(&h, "Authorization: Bearer %s", ep->api_key);
        if (!rc) rc = cm_config_header_set(headers, h.data);
        cm_buf_release(&h);
    }
    return rc;
}

static bool blank(const char *s)
{
    for (; s && *s; s++)
        if (!isspace((unsigned char)*s)) return false;
    return true;
}

/* A member name a thinking signature may give: the reasoning fields of the
 * OpenAI-compatible servers ("reasoning_content", "reasoning", …), never
 * one of the message's own members. */
static bool field_name(const char *s)
{
    size_t n = 0;
    for (; s && s[n]; n++)
        if (!isalnum((unsigned char)s[n]) && s[n] != '_') return false;
    return n && n <= 64 && strcmp(s, "role") && strcmp(s, "content") && strcmp(s, "tool_calls");
}

/* An assistant message as pi-ai's transformMessages and the
 * openai-completions convertMessages send it. Another model's thinking
 * (cm_llm_same_model) becomes text before the answer, its redacted or blank
 * thinking is dropped; the text blocks that are not blank are joined with
 * nothing between them into content (none: content null). This model's
 * non-blank thinking goes back under the member its first block's
 * signature names (the reasoning field it came in), joined with "\n";
 * without a signature, not at all. An assistant message left with neither
 * content nor tool calls is not sent (skip). */
typedef struct asst_parts {
    buf content, think;
    bool has_content, skip;
    const char *field; /* the member for think, or NULL */
} asst_parts;

static cm_rc asst_parts_of(const llm_message *m, const llm_request *rq, asst_parts *p)
{
    cm_rc rc = CM_OK;
    memset(p, 0, sizeof *p);
    cm_buf_init(&p->content, 0);
    cm_buf_init(&p->think, 0);
    bool same = cm_llm_same_model(m, rq, LLM_API_OPENAI);
    for (size_t k = 0; k < m->nthinking && !rc; k++) {
        const llm_thinking *t = &m->thinking[k];
        if (blank(t->text)) continue; /* dropped, or kept for nothing to send */
        if (!same) {
            if (t->redacted) continue;
            rc = cm_buf_adds(&p->content, t->text);
            p->has_content = true;
            continue;
        }
        if (!p->field && !p->think.len) p->field = t->signature && *t->signature ? t->signature : "";
        if (p->think.len) rc = cm_buf_addc(&p->think, '\n');
        if (!rc) rc = cm_buf_adds(&p->think, t->text);
    }
    if (!rc && !blank(m->text)) {
        rc = cm_buf_adds(&p->content, m->text);
        p->has_content = true;
    }
    if (p->field && !field_name(p->field)) p->field = NULL;
    p->skip = !p->has_content && !m->ncalls;
    return rc;
}

static void asst_parts_release(asst_parts *p)
{
    cm_buf_release(&p->content);
    cm_buf_release(&p->think);
}

/* The answer's token limit as pi-ai's streamSimple sends it: the request's,
 * else the model's maxTokens up to 32000; 0: none (a model the config does
 * not list). *name: the member it goes in, max_completion_tokens unless the
 * model takes max_tokens (pi-ai's compat.maxTokensField). */
static int max_tokens_of(const llm_request *rq, const char **name)
{
    *name = rq->max_tokens_field ? "max_tokens" : "max_completion_tokens";
    if (rq->max_tokens > 0) return rq->max_tokens;
    return rq->model_max_tokens > 0 ? CM_MIN(rq->model_max_tokens, 32000) : 0;
}

static json_t *openai_body(const llm_request *rq)
{
    json_t *msgs = json_array(), *body = NULL;
    if (!msgs) return NULL;
    if (rq->system && *rq->system)
        json_array_append_new(msgs,
                              json_pack("{s:s,s:s}", "role", "system", "content", rq->system));
    for (size_t i = 0; i < rq->n; i++) {
        const llm_message *m = &rq->messages[i];
        json_t *o = NULL;
        if (m->role == LLM_USER) {
            o = json_pack("{s:s,s:s}", "role", "user", "content", m->text ? m->text : "");
        } else if (m->role == LLM_TOOL) {
            o = json_pack("{s:s,s:s,s:s}", "role", "tool", "tool_call_id",
                          m->tool_call_id ? m->tool_call_id : "", "content",
                          m->text ? m->text : "");
        } else {
            asst_parts ap;
            if (asst_parts_of(m, rq, &ap)) {
                asst_parts_release(&ap);
                goto fail;
            }
            if (ap.skip) {
                asst_parts_release(&ap);
                continue;
            }
            o = json_pack("{s:s}", "role", "assistant");
            json_t *c = ap.has_content ? json_string(ap.content.data) : json_null();
            if (!o || !c || json_object_set_new(o, "content", c) ||
                (ap.field && json_object_set_new(o, ap.field, json_string(ap.think.data)))) {
                asst_parts_release(&ap);
                json_decref(o);
                goto fail;
            }
            asst_parts_release(&ap);
            if (m->ncalls) {
                json_t *calls = json_array();
                for (size_t k = 0; k < m->ncalls; k++)
                    json_array_append_new(
                        calls,
                        json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", m->calls[k].id, "type", "function",
                                  "function", "name", m->calls[k].name, "arguments",
                                  m->calls[k].arguments ? m->calls[k].arguments : "{}"));
                json_object_set_new(o, "tool_calls", calls);
            }
        }
        if (!o || json_array_append_new(msgs, o)) goto fail;
    }
    body = json_pack("{s:s,s:o,s:b}", "model", rq->model, "messages", msgs, "stream", rq->stream);
    msgs = NULL;
    if (!body) goto fail;
    if (rq->stream && !rq->no_stream_usage &&
        json_object_set_new(body, "stream_options", json_pack("{s:b}", "include_usage", 1)))
        goto fail;
    if (rq->store_false && json_object_set_new(body, "store", json_false())) goto fail;
    const char *mt_name;
    int mt = max_tokens_of(rq, &mt_name);
    if (mt > 0 && json_object_set_new(body, mt_name, json_integer(mt))) goto fail;
    if (rq->reasoning_effort && *rq->reasoning_effort &&
        json_object_set_new(body, "reasoning_effort", json_string(rq->reasoning_effort)))
        goto fail;
    if (rq->ntools) {
        json_t *tools = json_array();
        for (size_t i = 0; i < rq->ntools; i++)
            json_array_append_new(
                tools, json_pack("{s:s,s:{s:s,s:s,s:o}}", "type", "function", "function", "name",
                                 rq->tools[i].name, "description",
                                 rq->tools[i].description ? rq->tools[i].description : "",
                                 "parameters", cm_llm_json_object(rq->tools[i].parameters)));
        json_object_set_new(body, "tools", tools);
    }
    return body;
fail:
    json_decref(msgs);
    json_decref(body);
    return NULL;
}

/* openai_body's text, written directly (llm_format.body_text): the same
 * members in the same order, the same defaults for NULL texts. */
static cm_rc openai_body_text(const llm_request *rq, buf *out)
{
    cm_rc rc = CM_OK;
    asst_parts ap = {.content = BUF_INIT, .think = BUF_INIT};
#define PUT(x)                                                                                     \
    do {                                                                                           \
        if ((rc = (x))) goto out;                                                                  \
    } while (0)
    PUT(cm_buf_adds(out, "{"));
    PUT(cm_jtext_member(out, "model", rq->model));
    PUT(cm_buf_adds(out, ",\"messages\":["));
    bool first = true;
    if (rq->system && *rq->system) {
        PUT(cm_buf_adds(out, "{\"role\":\"system\","));
        PUT(cm_jtext_member(out, "content", rq->system));
        PUT(cm_buf_adds(out, "}"));
        first = false;
    }
    for (size_t i = 0; i < rq->n; i++) {
        const llm_message *m = &rq->messages[i];
        if (m->role == LLM_ASSISTANT) {
            asst_parts_release(&ap);
            PUT(asst_parts_of(m, rq, &ap));
            if (ap.skip) continue;
        }
        if (!first) PUT(cm_buf_addc(out, ','));
        first = false;
        if (m->role == LLM_USER) {
            PUT(cm_buf_adds(out, "{\"role\":\"user\","));
            PUT(cm_jtext_member(out, "content", m->text ? m->text : ""));
        } else if (m->role == LLM_TOOL) {
            PUT(cm_buf_adds(out, "{\"role\":\"tool\","));
            PUT(cm_jtext_member(out, "tool_call_id", m->tool_call_id ? m->tool_call_id : ""));
            PUT(cm_buf_addc(out, ','));
            PUT(cm_jtext_member(out, "content", m->text ? m->text : ""));
        } else {
            PUT(cm_buf_adds(out, "{\"role\":\"assistant\","));
            if (ap.has_content)
                PUT(cm_jtext_member(out, "content", ap.content.data));
            else
                PUT(cm_buf_adds(out, "\"content\":null"));
            if (ap.field) {
                PUT(cm_buf_addc(out, ','));
                PUT(cm_jtext_member(out, ap.field, ap.think.data));
            }
            if (m->ncalls) PUT(cm_buf_adds(out, ",\"tool_calls\":["));
            for (size_t k = 0; k < m->ncalls; k++) {
                PUT(cm_buf_adds(out, k ? ",{" : "{"));
                PUT(cm_jtext_member(out, "id", m->calls[k].id));
                PUT(cm_buf_adds(out, ",\"type\":\"function\",\"function\":{"));
                PUT(cm_jtext_member(out, "name", m->calls[k].name));
                PUT(cm_buf_addc(out, ','));
                PUT(cm_jtext_member(out, "arguments",
                                    m->calls[k].arguments ? m->calls[k].arguments : "{}"));
                PUT(cm_buf_adds(out, "}}"));
            }
            if (m->ncalls) PUT(cm_buf_addc(out, ']'));
        }
        PUT(cm_buf_addc(out, '}'));
    }
    PUT(cm_buf_adds(out, rq->stream ? "],\"stream\":true" : "],\"stream\":false"));
    if (rq->stream && !rq->no_stream_usage)
        PUT(cm_buf_adds(out, ",\"stream_options\":{\"include_usage\":true}"));
    if (rq->store_false) PUT(cm_buf_adds(out, ",\"store\":false"));
    const char *mt_name;
    int mt = max_tokens_of(rq, &mt_name);
    if (mt > 0) PUT(cm_buf_printf(out, ",\"%s\":%d", mt_name, mt));
    if (rq->reasoning_effort && *rq->reasoning_effort) {
        PUT(cm_buf_addc(out, ','));
        PUT(cm_jtext_member(out, "reasoning_effort", rq->reasoning_effort));
    }
    if (rq->ntools) PUT(cm_buf_adds(out, ",\"tools\":["));
    for (size_t i = 0; i < rq->ntools; i++) {
        PUT(cm_buf_adds(out, i ? ",{\"type\":\"function\",\"function\":{"
                               : "{\"type\":\"function\",\"function\":{"));
        PUT(cm_jtext_member(out, "name", rq->tools[i].name));
        PUT(cm_buf_addc(out, ','));
        PUT(cm_jtext_member(out, "description",
                            rq->tools[i].description ? rq->tools[i].description : ""));
        PUT(cm_buf_adds(out, ",\"parameters\":"));
        PUT(cm_llm_json_object_text(rq->tools[i].parameters, out));
        PUT(cm_buf_adds(out, "}}"));
    }
    if (rq->ntools) PUT(cm_buf_addc(out, ']'));
    PUT(cm_buf_addc(out, '}'));
#undef PUT
out:
    asst_parts_release(&ap);
    return rc;
}

static const char *stop_name(const char *finish)
{
    if (!finish) return "";
    if (!strcmp(finish, "stop")) return "stop";
    if (!strcmp(finish, "length")) return "length";
    if (!strcmp(finish, "tool_calls") || !strcmp(finish, "function_call")) return "toolUse";
    return "error"; /* content_filter and the unknown */
}

static void usage_from(llm_usage *u, const json_t *j)
{
    if (!json_is_object(j)) return;
    int64_t prompt = json_integer_value(json_object_get(j, "prompt_tokens"));
    int64_t cached = json_integer_value(
        json_object_get(json_object_get(j, "prompt_tokens_details"), "cached_tokens"));
    u->cache_read = cached;
    u->input = prompt > cached ? prompt - cached : 0;
    u->output = json_integer_value(json_object_get(j, "completion_tokens"));
    json_t *t = json_object_get(j, "total_tokens");
    u->total = json_is_integer(t) ? json_integer_value(t) : prompt + u->output;
}

/* The member an OpenAI-compatible server puts its reasoning in, in a
 * message or a delta, as pi-ai looks for it: the first that is not empty of
 * reasoning_content (DeepSeek, vLLM, llama.cpp), reasoning (OpenRouter,
 * Ollama) and reasoning_text; NULL when none is. *text: its value. */
static const char *reasoning_field(const json_t *m, const char **text)
{
    static const char *const fields[] = {"reasoning_content", "reasoning", "reasoning_text"};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        const char *r = json_string_value(json_object_get(m, fields[i]));
        if (r && *r) {
            *text = r;
            return fields[i];
        }
    }
    *text = NULL;
    return NULL;
}

/* What the last delta streamed: pi-ai's current block, whose kind decides
 * whether reasoning opens a new thinking block. */
enum { OA_NONE, OA_TEXT, OA_THINK, OA_CALL };

/* Reasoning of field streamed: appended to the open thinking block, or to a
 * new one signed with field (the member it came in) after text, a tool call
 * or nothing; and to the answer's reasoning. */
static bool stream_thinking(llm_stream *st, const char *field, const char *why)
{
    llm_response *o = st->out;
    size_t n = strlen(why);
    if (st->oa_block != OA_THINK) {
        llm_thinking *t = cm_llm_thinking_new(o);
        if (!t || !cm_llm_str_append(st, &t->signature, field)) return false;
        st->oa_block = OA_THINK;
    }
    if (cm_llm_stream_reasoning(st, why, n)) return false; /* within the stream's cap */
    return cm_llm_thinking_append(st, o->nthinking - 1, why, n);
}

static bool openai_event(llm_stream *st, const char *name, json_t *d)
{
    (void)name;
    if (!d) return false;
    json_t *err = json_object_get(d, "error");
    if (err) {
        const char *m = json_string_value(json_object_get(err, "message"));
        snprintf(st->error, sizeof st->error, "%s", m ? m : "error event in the stream");
        return true;
    }
    const char *id = json_string_value(json_object_get(d, "id"));
    if (id && !st->out->response_id[0])
        snprintf(st->out->response_id, sizeof st->out->response_id, "%s", id);
    usage_from(&st->out->usage, json_object_get(d, "usage"));
    json_t *choice = json_array_get(json_object_get(d, "choices"), 0);
    if (!choice) return true; /* the usage chunk */
    json_t *delta = json_object_get(choice, "delta");
    const char *text = json_string_value(json_object_get(delta, "content"));
    if (text && *text) {
        if (cm_llm_stream_text(st, text, strlen(text))) return false;
        st->oa_block = OA_TEXT;
    }
    const char *why, *field = reasoning_field(delta, &why);
    if (field && !stream_thinking(st, field, why)) return false;
    size_t k;
    json_t *tc;
    json_array_foreach(json_object_get(delta, "tool_calls"), k, tc)
    {
        st->oa_block = OA_CALL;
        json_t *ix = json_object_get(tc, "index");
        size_t i =
            json_is_integer(ix) && json_integer_value(ix) >= 0 ? (size_t)json_integer_value(ix) : k;
        if (i > 1024) return false;
        llm_tool_call *c = cm_llm_stream_call(st, i);
        if (!c) return false;
        const char *cid = json_string_value(json_object_get(tc, "id"));
        json_t *fn = json_object_get(tc, "function");
        const char *fname = json_string_value(json_object_get(fn, "name"));
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        if (cid && *cid && !c->id && !(c->id = cm_strdup(cid))) return false;
        if (fname && *fname && !c->name && !(c->name = cm_strdup(fname))) return false;
        if (args && cm_llm_stream_args(st, i, args)) return false;
    }
    const char *finish = json_string_value(json_object_get(choice, "finish_reason"));
    if (finish) {
        snprintf(st->out->stop_reason, sizeof st->out->stop_reason, "%s", stop_name(finish));
        st->done = true;
    }
    return true;
}

static bool openai_whole(llm_response *out, json_t *doc)
{
    json_t *choice = json_array_get(json_object_get(doc, "choices"), 0);
    json_t *msg = json_object_get(choice, "message");
    if (!json_is_object(msg)) return false;
    const char *id = json_string_value(json_object_get(doc, "id"));
    snprintf(out->response_id, sizeof out->response_id, "%s", id ? id : "");
    const char *text = json_string_value(json_object_get(msg, "content"));
    if (text && cm_buf_adds(&out->text, text)) return false;
    const char *why, *field = reasoning_field(msg, &why);
    if (field) { /* one thinking block, signed with the member it came in */
        llm_thinking *t = cm_llm_thinking_new(out);
        if (!t || cm_buf_adds(&out->reasoning, why) || !(t->text = cm_strdup(why)) ||
            !(t->signature = cm_strdup(field)))
            return false;
    }
    json_t *calls = json_object_get(msg, "tool_calls");
    size_t n = json_array_size(calls);
    if (n) {
        out->calls = calloc(n, sizeof *out->calls);
        if (!out->calls) return false;
        for (size_t i = 0; i < n; i++) {
            json_t *c = json_array_get(calls, i), *fn = json_object_get(c, "function");
            const char *cid = json_string_value(json_object_get(c, "id"));
            const char *name = json_string_value(json_object_get(fn, "name"));
            const char *args = json_string_value(json_object_get(fn, "arguments"));
            llm_tool_call *t = &out->calls[out->ncalls++];
            t->id = cm_strdup(cid ? cid : "");
            t->name = cm_strdup(name ? name : "");
            t->arguments = cm_strdup(args && *args ? args : "{}");
            if (!t->id || !t->name || !t->arguments) return false;
        }
    }
    snprintf(out->stop_reason, sizeof out->stop_reason, "%s",
             stop_name(json_string_value(json_object_get(choice, "finish_reason"))));
    usage_from(&out->usage, json_object_get(doc, "usage"));
    return true;
}

const llm_format cm_llm_openai_format = {openai_endpoint, openai_body, openai_event, openai_whole,
                                         openai_body_text};
